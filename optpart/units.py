"""Human units in and out: bytes (GiB, GB), bandwidth (GB/s, Gbit/s) and time (us, ms, s).

Binary prefixes (KiB, MiB, GiB, TiB) are powers of 1024, decimal ones (kB, MB,
GB, TB) powers of 1000, as in IEC 80000-13. A bare number is taken in the base
unit (bytes, bytes per second, seconds). Bandwidths distinguish bytes (``B``) from
bits (``bit``) and refuse spellings that mean either (``GBps``, ``Gbps``, ``Gb/s``).
"""

from __future__ import annotations

import math
import re

from .errors import OptpartError

__all__ = [
    "parse_bytes",
    "parse_bandwidth",
    "parse_time",
    "parse_speed",
    "parse_list",
    "format_bytes",
    "format_time",
    "format_flops",
    "format_bandwidth",
]

_BYTE_UNITS = {
    "": 1, "b": 1,
    "k": 1e3, "kb": 1e3, "m": 1e6, "mb": 1e6, "g": 1e9, "gb": 1e9, "t": 1e12, "tb": 1e12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
}
_TIME_UNITS = {"": 1.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9, "m": 60.0, "min": 60.0,
               "h": 3600.0}
_NUMBER = re.compile(r"^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|inf)\s*([A-Za-zµ/]*)\s*$")


def _split(text: str | float | int, what: str) -> tuple[float, str]:
    if isinstance(text, (int, float)):
        try:
            return float(text), ""
        except OverflowError:
            raise OptpartError(f"{what} {text!r} is beyond the float range") from None
    m = _NUMBER.match(str(text))
    if not m:
        raise OptpartError(f"cannot read {what} {text!r}: expected a number with a unit, e.g. '16GiB'")
    return float(m.group(1)), m.group(2)


def _checked(value: float, text, what: str) -> float:
    if math.isnan(value) or value < 0:
        raise OptpartError(f"{what} {text!r} must be a non-negative number")
    if math.isinf(value) and "inf" not in str(text).lower():
        # 1e400 or 1e308TiB overflow to inf: refused, never read as "unlimited" (write inf for that).
        raise OptpartError(f"{what} {text!r} is beyond the float range; write 'inf' for unlimited")
    return value


def parse_bytes(text: str | float | int, *, unit_required: bool = False) -> float:
    """Read a size such as ``'16GiB'``, ``'2.5 GB'`` or ``1024`` into bytes.

    Parameters
    ----------
    text : str, float or int
        The size; a bare number is bytes.
    unit_required : bool
        Refuse text that is a bare number other than 0 or inf (the command line's rule:
        ``--memory 16`` is far more likely to mean 16 GiB than 16 bytes; write ``16B`` for bytes).

    Returns
    -------
    float
        Bytes.
    """
    value, unit = _split(text, "size")
    if unit_required and isinstance(text, str) and not unit and value not in (0.0, math.inf):
        raise OptpartError(f"size {text!r} has no unit; write e.g. {text.strip()}GiB, {text.strip()}GB "
                           f"or {text.strip()}B for bytes")
    key = unit.lower()
    if key not in _BYTE_UNITS:
        raise OptpartError(f"unknown size unit {unit!r} in {text!r}; use B, KiB, MiB, GiB, TiB, kB, MB, GB or TB")
    return _checked(value * _BYTE_UNITS[key], text, "size")


_RATE_PREFIX = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12,
                "Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40}


def parse_bandwidth(text: str | float | int, *, unit_required: bool = False) -> float:
    """Read a bandwidth such as ``'25GB/s'``, ``'25GiB/s'``, ``'100Gbit/s'`` or ``'inf'`` into bytes per second.

    ``B`` is a byte and ``bit`` a bit; spellings that readers take both ways (``GBps``,
    ``Gbps``, ``gbps``, ``Gb/s``) are refused with the two readings offered, never guessed.

    Parameters
    ----------
    text : str or float or int
        A number (bytes per second) or a number with a unit.
    unit_required : bool
        Refuse text that is a bare number other than inf (the command line's rule, as for
        sizes: ``--bandwidth 25`` means 25 GB/s far more often than 25 bytes per second).

    Returns
    -------
    float
        Bytes per second (> 0; ``inf`` for an unlimited link).
    """
    value, unit = _split(text, "bandwidth")
    if unit_required and isinstance(text, str) and not unit and value != math.inf:
        raise OptpartError(f"bandwidth {text!r} has no unit; write e.g. {text.strip()}GB/s, {text.strip()}GiB/s "
                           f"or {text.strip()}B/s for bytes per second")
    body = unit[:-2] if unit.endswith("/s") else unit
    factor = None
    if unit.lower().endswith("ps") or (body.endswith("b") and not body.endswith("bit")):
        stem = unit[:-3] if unit.lower().endswith("bps") else body[:-1]
        stem = stem[:1].upper() + stem[1:] if stem else ""
        raise OptpartError(f"ambiguous bandwidth unit {unit!r} in {text!r}: write {stem}B/s for bytes or "
                           f"{stem}bit/s for bits per second")
    if unit and not unit.endswith("/s"):
        raise OptpartError(f"bandwidth {text!r} has no '/s': {unit!r} is an amount, not a rate; "
                           f"write e.g. {value:g}{unit}/s")
    if body.endswith("bit"):
        prefix = body[:-3]
        factor = _RATE_PREFIX.get(prefix)
        factor = None if factor is None else factor / 8
    elif body.endswith("B") or body == "":
        prefix = body[:-1] if body else ""
        factor = _RATE_PREFIX.get(prefix)
    if factor is None:
        raise OptpartError(f"unknown bandwidth unit {unit!r} in {text!r}; use e.g. GB/s, GiB/s or Gbit/s")
    bw = _checked(value * factor, text, "bandwidth")
    if bw == 0:
        raise OptpartError(f"bandwidth {text!r} must be positive")
    return bw


def parse_speed(text: str | float | int) -> float:
    """Read a relative device speed (``1``, ``'0.5'``): a positive finite number, 1.0 being the reference device.

    Parameters
    ----------
    text : str or float or int
        The speed; no unit.

    Returns
    -------
    float
    """
    value, unit = _split(text, "speed")
    if unit or not math.isfinite(value) or value <= 0:
        raise OptpartError(f"speed {text!r} must be a positive finite number (1.0 is the reference device)")
    return value


def parse_list(text: str | float | int, parse, what: str) -> list[float]:
    """Read a comma-separated list (``'80GiB,80GiB,40GiB'``), one value per device, with ``parse``.

    Parameters
    ----------
    text : str or float or int
        One value or a comma list.
    parse : callable
        Reads one item (:func:`parse_bytes`, :func:`parse_speed`, ...).
    what : str
        The flag or field, for the message.

    Returns
    -------
    list of float
        One parsed value per item.
    """
    if isinstance(text, (int, float)):
        return [parse(text)]
    parts = [t.strip() for t in str(text).split(",")]
    if any(not t for t in parts):
        raise OptpartError(f"{what} {text!r} has an empty entry; give one value per device, e.g. 80GiB,40GiB")
    return [parse(t) for t in parts]


def parse_time(text: str | float | int) -> float:
    """Read a duration such as ``'10us'``, ``'1.5ms'``, ``'5m'`` (minutes) or ``'60'`` into seconds.

    Parameters
    ----------
    text : str or float or int
        A number (seconds) or a number with a unit.

    Returns
    -------
    float
        Seconds (finite, >= 0).
    """
    value, unit = _split(text, "time")
    key = unit if unit in _TIME_UNITS else unit.lower()
    if key not in _TIME_UNITS:
        raise OptpartError(f"unknown time unit {unit!r} in {text!r}; use s, ms, us, ns, m (minutes) or h")
    scale = _TIME_UNITS[key]
    # below a second divide by the exact power of ten: '10us' is 1e-05, the double nearest 10e-6
    return _checked(value / round(1 / scale) if scale < 1 else value * scale, text, "time")


def format_bytes(n: float) -> str:
    """Bytes in binary units with three significant digits: ``17179869184 -> '16 GiB'``, ``1536 -> '1.5 KiB'``.

    Parameters
    ----------
    n : float
        Bytes (None or NaN prints ``-``, infinity ``unlimited``).

    Returns
    -------
    str
    """
    if n is None or math.isnan(n):
        return "-"
    if math.isinf(n):
        return "unlimited"
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= size:
            v = n / size
            # 1000-1023 of a unit: whole numbers, never "1e+03" (the next unit would read 0.98)
            return f"{v:.3g} {unit}" if abs(v) < 1000 else f"{v:.0f} {unit}"
    return f"{n:.0f} B"


def _three(v: float) -> str:
    """Three significant digits, never an exponent: ``3.11024 -> '3.11'``, ``1234.5 -> '1234'``."""
    return f"{v:.0f}" if abs(v) >= 100 else f"{v:.3g}"


def format_time(t: float) -> str:
    """Seconds with an adapted unit and three significant digits: ``0.0123 -> '12.3 ms'``,
    ``3.11024 -> '3.11 s'``.

    Parameters
    ----------
    t : float
        Seconds (None or NaN prints ``-``).

    Returns
    -------
    str
        The value in s, ms, us or ns (whole numbers from 100 up: ``'348 ms'``, ``'1234 s'``).
    """
    if t is None or math.isnan(t):
        return "-"
    if math.isinf(t):
        return "inf"
    a = abs(t)
    if a == 0:
        return "0 s"
    for unit, size in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if a >= size * 0.9995:  # 999.96 ms reads 1 s, not 1000 ms
            return f"{_three(t / size)} {unit}"
    return f"{_three(t * 1e9)} ns"


def format_flops(n: float) -> str:
    """Floating-point operations in decimal units with three significant digits:
    ``4.453e13 -> '44.5 TFLOP'``.

    Parameters
    ----------
    n : float
        Operations (a count, not a rate).

    Returns
    -------
    str
        The count in FLOP, kFLOP, MFLOP, GFLOP, TFLOP, PFLOP or EFLOP.

    Examples
    --------
    >>> format_flops(4.453e13), format_flops(0), format_flops(999.6)
    ('44.5 TFLOP', '0 FLOP', '1 kFLOP')
    """
    for unit, size in (("EFLOP", 1e18), ("PFLOP", 1e15), ("TFLOP", 1e12), ("GFLOP", 1e9), ("MFLOP", 1e6),
                       ("kFLOP", 1e3)):
        if abs(n) >= size * 0.9995:
            return f"{_three(n / size)} {unit}"
    return f"{_three(n)} FLOP"


def format_bandwidth(bw: float) -> str:
    """Bytes per second in decimal units: ``2.5e10 -> '25 GB/s'``.

    Parameters
    ----------
    bw : float
        Bytes per second (infinity prints ``unlimited``).

    Returns
    -------
    str
    """
    if math.isinf(bw):
        return "unlimited"
    for unit, size in (("TB/s", 1e12), ("GB/s", 1e9), ("MB/s", 1e6), ("kB/s", 1e3)):
        if bw >= size:
            return f"{bw / size:.4g} {unit}"
    return f"{bw:.4g} B/s"
