"""Bounded, error-checked reading and writing of files, and the JSON parser.

Every reader goes through :func:`read_bytes`: it refuses a missing file, a
directory, a file or a gzip stream larger than :func:`optpart.limits.max_input_bytes`
once decompressed (checked while inflating, so a gzip bomb stops at the limit),
and a truncated or corrupt gzip stream, each with one line naming the file.

:func:`parse_json` uses ``orjson`` when it is installed (the ``fast`` extra; strict: no
``NaN``, nesting depth at most 1024) and :mod:`json` otherwise, with the same error messages.
"""

from __future__ import annotations

import gzip
import json
import math
import zlib
from pathlib import Path
from typing import Any

from ..errors import FormatError
from ..limits import max_input_bytes

try:  # optional: pip install 'optpart[fast]'
    import orjson as _orjson
except ImportError:  # pragma: no cover - exercised when orjson is absent
    _orjson = None

__all__ = ["read_bytes", "read_text", "parse_json", "write_bytes", "write_pieces", "HAVE_ORJSON"]

HAVE_ORJSON = _orjson is not None
_CHUNK = 16 * 2**20



def short(x: Any, limit: int = 40) -> str:
    """``repr(x)`` cut to ``limit`` characters, for one-line error messages.

    Parameters
    ----------
    x : object
        The offending value, as read.
    limit : int, optional
        The most characters kept before ``...``.

    Returns
    -------
    str
        The (cut) representation.
    """
    text = repr(x)
    return text if len(text) <= limit else text[:limit] + "..."


def json_number(value: Any, what: str) -> float:
    """A JSON number that must be finite and >= 0 (never a bool), as a float.

    Parameters
    ----------
    value : object
        The value read from the document.
    what : str
        The field, for the message (``"result field 'makespan'"``).

    Returns
    -------
    float
        The number.

    Raises
    ------
    FormatError
        One line naming ``what`` and the value: not a number, beyond the float range,
        negative, infinite or NaN.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise FormatError(f"{what} is {short(value)}; it must be a number")
    try:
        x = float(value)
    except OverflowError:
        raise FormatError(f"{what} is {short(value)}; it is beyond the float range") from None
    if not (0 <= x < math.inf):
        raise FormatError(f"{what} is {short(value)}; it must be a finite number >= 0")
    return x

def _too_big(path: Path, limit: int, compressed: bool) -> FormatError:
    what = "decompresses to more than" if compressed else "is larger than"
    return FormatError(f"{path} {what} the input limit of {limit} bytes "
                       f"(set OPTPART_MAX_INPUT_BYTES to raise it)")


def read_bytes(path: str | Path) -> bytes:
    """A file's bytes, gunzipped when its name ends in ``.gz``, within the input size limit.

    Parameters
    ----------
    path : str or pathlib.Path
        The file.

    Returns
    -------
    bytes
        Its (decompressed) content.

    Raises
    ------
    FormatError
        A missing file, a directory, a broken gzip stream, or more than
        :func:`optpart.limits.max_input_bytes` (also after decompression).
    """
    path = Path(path)
    if not path.exists():
        raise FormatError(f"no such file: {path}")
    if path.is_dir():
        raise FormatError(f"{path} is a directory, not a problem file")
    limit = max_input_bytes()
    try:
        if not path.name.endswith(".gz"):
            if path.stat().st_size > limit:
                raise _too_big(path, limit, False)
            return path.read_bytes()
        chunks, total = [], 0
        with gzip.open(path, "rb") as fh:
            while True:
                chunk = fh.read(_CHUNK)
                if not chunk:
                    break
                total += len(chunk)
                if total > limit:
                    raise _too_big(path, limit, True)
                chunks.append(chunk)
        return b"".join(chunks)
    except EOFError:
        raise FormatError(f"{path}: the gzip stream is truncated (the file was cut short)") from None
    except (gzip.BadGzipFile, zlib.error) as exc:
        raise FormatError(f"{path}: not a valid gzip file ({exc})") from None
    except OSError as exc:
        raise FormatError(f"cannot read {path}: {exc.strerror or exc}") from None


def read_text(path: str | Path) -> str:
    """A file's text (UTF-8), gunzipped when its name ends in ``.gz``; see :func:`read_bytes`.

    Parameters
    ----------
    path : path-like
        A text file, possibly gzip-compressed.

    Returns
    -------
    str
        The decoded text; bytes that are not UTF-8 are an error naming the offset.
    """
    data = read_bytes(path)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FormatError(f"{path}: not UTF-8 text (byte {exc.start}: {exc.reason})") from None


def parse_json(data: bytes | str, path: str | Path) -> Any:
    """Parse JSON text, or raise :class:`FormatError` naming the file, line and column.

    Parameters
    ----------
    data : bytes or str
        The document's text.
    path : str or pathlib.Path
        Its file, for the message.

    Returns
    -------
    object
        The parsed value (``NaN``/``Infinity`` constants are refused: not JSON).
    """
    try:
        if _orjson is not None:
            return _orjson.loads(data)
        return json.loads(data, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:  # orjson's error derives from it too
        msg = exc.msg.split(": line ")[0] if isinstance(exc.msg, str) else str(exc)
        raise FormatError(f"{path}: not valid JSON ({msg} at line {exc.lineno} column {exc.colno})") from None
    except UnicodeDecodeError as exc:
        raise FormatError(f"{path}: not UTF-8 text (byte {exc.start}: {exc.reason})") from None
    except RecursionError:
        raise FormatError(f"{path}: JSON nested too deeply") from None
    except ValueError as exc:  # e.g. an integer with more than 4300 digits
        raise FormatError(f"{path}: not valid JSON ({exc})") from None


def _reject_constant(name: str):
    # NaN and Infinity are not JSON (RFC 8259); refused as orjson refuses them.
    raise ValueError(f"{name} is not a JSON value (write infinity as the string \"inf\")")


def write_bytes(path: str | Path, data: bytes) -> None:
    """Write ``data`` (gzip-compressed, deterministically, when the name ends in ``.gz``).

    Parameters
    ----------
    path : str or pathlib.Path
        The file.
    data : bytes
        Its content.
    """
    write_pieces(path, [data])


def write_pieces(path: str | Path, pieces: list[bytes | str]) -> None:
    """Write ``pieces`` one after the other (``str`` as UTF-8), gzip-compressed and
    deterministic when the name ends in ``.gz``: the same bytes as writing their
    concatenation, without building it.

    Parameters
    ----------
    path : str or pathlib.Path
        The file.
    pieces : list of bytes or str
        Its content, in order.

    Raises
    ------
    FormatError
        When the file cannot be written (naming it and the reason).
    """
    path = Path(path)
    try:
        with open(path, "wb") as raw:
            if path.name.endswith(".gz"):
                # mtime=0 and no file name keep compressed bytes identical across runs.
                with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as fh:
                    _write_all(fh, pieces)
            else:
                _write_all(raw, pieces)
    except OSError as exc:
        raise FormatError(f"cannot write {path}: {exc.strerror or exc}") from None


def _write_all(fh, pieces: list[bytes | str]) -> None:
    for piece in pieces:
        fh.write(piece.encode("utf-8") if isinstance(piece, str) else piece)
