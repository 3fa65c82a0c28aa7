"""Devices and links for a graph: the one place that turns "4 devices of 16 GiB" into a problem.

:func:`resolve_devices` is what ``optpart solve --devices 4 --memory 16GiB`` does, as a
library function, so the command line and ``optpart bench`` (and notebooks) share one
set of rules. Values may be numbers (bytes, seconds, bytes/s), unit strings
(``"16GiB"``, ``"10us"``, ``"25GB/s"``, see :mod:`optpart.units`), comma lists
(``"80GiB,80GiB,40GiB"``), per-device lists or ``{device id: value}`` dictionaries.

Rules (also in ``docs/formats.md``):

* ``devices=K`` sets the count; the file's devices keep their ids (pins and link
  overrides name them), extra ones are named ``dev<i>``; without ``devices`` a per-device
  list of ``memory`` (else ``speed``) gives the count, else the file's count is kept, and
  a graph without devices is an error.
* ``memory``/``speed``: one value for every device, one per device (a list or a comma
  list of exactly ``K`` values) or a dictionary naming devices; a device a dictionary
  leaves out keeps the file's value, and a new device it leaves out is an error. Left
  out entirely, each file device keeps its own value; new devices get the file's
  smallest capacity (unlimited when the file has no devices) and speed 1.
* ``bandwidth``/``latency``: the uniform link. Left out, the file's links stay; when
  the file has none, the defaults are :data:`DEFAULT_BANDWIDTH` and :data:`DEFAULT_LATENCY`.
  Per-pair overrides of the file are kept, except those naming a device that is no
  longer there (fewer devices than the file).

Every value is checked (unit, sign, range, count) and an error names the parameter
and the value.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping, Sequence

from .errors import OptpartError
from .limits import check_devices
from .problem import Device, Links, Problem
from .units import parse_bandwidth, parse_bytes, parse_speed, parse_time

__all__ = ["resolve_devices", "DEFAULT_BANDWIDTH", "DEFAULT_LATENCY"]

#: Links used when neither the file nor the caller gives any.
DEFAULT_BANDWIDTH = "25GB/s"
DEFAULT_LATENCY = "10us"

Value = Any  # a number, a unit string, a comma list, a sequence, or a {device id: value} mapping


def _parse_speed(text: Any) -> float:
    if isinstance(text, bool) or not isinstance(text, (str, int, float)):
        raise OptpartError(f"speed {text!r} must be a positive finite number")
    return parse_speed(text)


def _with_name(name: str, parse: Callable[[Any], float], raw: Any) -> float:
    try:
        return parse(raw)
    except OptpartError as exc:
        raise OptpartError(f"{name}: {exc}") from None


def _per_device(name: str, value: Value, parse: Callable[[Any], float], ids: Sequence[str],
                own: Sequence[float | None]) -> list[float]:
    """One float per device from a scalar, a list, a comma list or a mapping (see the module doc)."""
    k = len(ids)
    if isinstance(value, Mapping):
        index = {d: i for i, d in enumerate(ids)}
        out = list(own)
        for key, raw in value.items():
            if str(key) not in index:
                raise OptpartError(f"{name} names unknown device {str(key)!r}; devices: {', '.join(ids)}")
            out[index[str(key)]] = _with_name(name, parse, raw)
        missing = [ids[i] for i, x in enumerate(out) if x is None]
        if missing:
            raise OptpartError(f"{name} gives no value for new device '{missing[0]}'")
        return [float(x) for x in out]  # type: ignore[arg-type]
    if isinstance(value, str):
        items: list[Any] = [x.strip() for x in value.split(",")]
        if len(items) > 1 and any(x == "" for x in items):
            raise OptpartError(f"{name} {value!r} has an empty item")
    elif isinstance(value, (list, tuple)):
        items = list(value)
    else:
        items = [value]
    if not items:
        raise OptpartError(f"{name} gives no value")
    values = [_with_name(name, parse, x) for x in items]
    if len(values) == 1:
        return values * k
    if len(values) != k:
        raise OptpartError(f"{name} gives {len(values)} values for {k} devices")
    return values


def _list_length(value: Value) -> int:
    """The device count a per-device list implies (``"80GiB,40GiB"`` -> 2), or 0 for one value."""
    if isinstance(value, str):
        n = len(value.split(","))
    elif isinstance(value, (list, tuple)):
        n = len(value)
    else:
        return 0
    return n if n > 1 else 0


def _count(devices: Any) -> int:
    if isinstance(devices, bool) or not isinstance(devices, int):
        try:
            as_int = int(devices)
        except (TypeError, ValueError, OverflowError):
            raise OptpartError(f"devices {devices!r} must be a whole number >= 1") from None
        if isinstance(devices, bool) or as_int != devices:
            raise OptpartError(f"devices {devices!r} must be a whole number >= 1")
        devices = as_int
    if devices < 1:
        raise OptpartError(f"devices {devices} must be at least 1")
    check_devices(devices, "devices")
    return devices


def resolve_devices(problem: Problem, *, devices: int | None = None, memory: Value = None,
                    speed: Value = None, bandwidth: Value = None, latency: Value = None) -> Problem:
    """The problem on the devices and links asked for (rules in the module docstring).

    Parameters
    ----------
    problem : the graph, with or without devices
    devices : device count ``K``
    memory : capacity per device (bytes or a size such as ``"16GiB"``)
    speed : relative speed per device (> 0)
    bandwidth : uniform link bandwidth (bytes/s or e.g. ``"25GB/s"``)
    latency : uniform link latency (s or e.g. ``"10us"``)

    Raises
    ------
    OptpartError
        Naming the parameter and the value: a bad unit, sign, range or count, a
        device count above :func:`optpart.limits.max_devices`, or a graph without devices.

    Examples
    --------
    >>> p = Problem.build(nodes=[{"id": "a", "time": 1.0, "memory": 10}])
    >>> q = resolve_devices(p, devices=2, memory="1KiB,2KiB")
    >>> q.device_ids, q.device_memory.tolist(), q.links.bandwidth
    (['dev0', 'dev1'], [1024.0, 2048.0], 25000000000.0)
    """
    links = problem.links
    if bandwidth is not None or latency is not None or links is None:
        base = links or Links(parse_time(DEFAULT_LATENCY), parse_bandwidth(DEFAULT_BANDWIDTH))
        links = Links(_with_name("latency", parse_time, latency) if latency is not None else base.latency,
                      _with_name("bandwidth", parse_bandwidth, bandwidth) if bandwidth is not None
                      else base.bandwidth,
                      base.pairs if problem.links is not None else ())
    if devices is None and memory is None and speed is None:
        if problem.n_devices == 0:
            raise OptpartError(f"'{problem.name}' has no devices; give their number (--devices K) and "
                               "capacity (--memory SIZE)")
        if links is problem.links:
            return problem
        return problem.with_devices(list(problem.devices), links=links, constraints=problem.constraints)
    k = _count(devices) if devices is not None else (_list_length(memory) or _list_length(speed)
                                                      or problem.n_devices)
    if devices is None and problem.n_devices and k != problem.n_devices:
        # A per-device list that disagrees with the file's devices: never add or drop
        # devices silently; a different count must be asked for.
        flag = "memory" if _list_length(memory) else "speed"
        raise OptpartError(f"{flag} gives {k} values but '{problem.name}' has {problem.n_devices} devices "
                           f"({', '.join(problem.device_ids)}); give one value per device, or --devices {k} "
                           "to change the count")
    if k == 0:
        raise OptpartError(f"'{problem.name}' has no devices; give their number (--devices K)")
    old = problem.devices
    ids = [old[i].id if i < len(old) else f"dev{i}" for i in range(k)]
    if memory is not None:
        own_mem = [old[i].memory if i < len(old) else None for i in range(k)]
        caps = _per_device("memory", memory, parse_bytes, ids, own_mem)
    else:
        fallback = float(problem.device_memory.min()) if problem.n_devices else math.inf
        caps = [old[i].memory if i < len(old) else fallback for i in range(k)]
    own_speed = [old[i].speed if i < len(old) else None for i in range(k)]
    if speed is not None:
        speeds = _per_device("speed", speed, _parse_speed, ids, own_speed)
    else:
        speeds = [s if s is not None else 1.0 for s in own_speed]
    new = [Device(ids[i], caps[i], speeds[i]) for i in range(k)]
    if len(old) > k:
        kept = set(ids)
        links = Links(links.latency, links.bandwidth,
                      tuple(o for o in links.pairs if o.src in kept and o.dst in kept))
    return problem.with_devices(new, links=links)
