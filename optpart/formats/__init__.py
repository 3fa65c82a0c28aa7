"""File formats: optpart JSON (problems and results), columnar .npz, STG, dnn-partitioning JSON, networkx.

:func:`load` recognises a file by its content and extension: ``.stg`` files are
STG; JSON (optionally gzip-compressed, ``.json.gz``) is an optpart problem when it
says ``"format": "optpart-problem"`` and a dnn-partitioning graph when it has
``maxSizePerFPGA``. :func:`save` writes problems and results as optpart JSON.
"""

from __future__ import annotations

from pathlib import Path

from .._gc import no_gc
from ..errors import FormatError, OptpartError
from ..model.devices import Links
from ..model.records import read_links as _links_from_dict
from ..model.problem import Problem
from ..result import Result
from .dnn_partitioning import dnn_partitioning_from_dict, looks_like_dnn_partitioning
from .optpart_json import (PROBLEM_FORMAT, RESULT_FORMAT, problem_for_result, problem_from_dict,
                           problem_to_json, result_from_dict, result_json_pieces, result_to_json)
from .npz import read_npz, write_npz
from .stg import parse_stg, read_stg
from ._io import parse_json, read_bytes, read_text, write_bytes, write_pieces

__all__ = [
    "load",
    "save",
    "load_result",
    "save_result",
    "with_result_devices",
    "result_links",
    "read_text",
    "from_networkx",
    "to_networkx",
    "read_stg",
    "read_npz",
    "write_npz",
    "parse_stg",
    "problem_to_json",
    "result_to_json",
]


def __getattr__(name: str):
    """``from_networkx``/``to_networkx`` import networkx on first use (PEP 562): reading and
    solving a file never pays for importing networkx (about 80 ms)."""
    if name in ("from_networkx", "to_networkx"):
        from . import networkx_io

        return getattr(networkx_io, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _stem(path: Path) -> str:
    name = path.name
    for suffix in (".gz", ".json", ".stg", ".npz"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    return name


def _decode(path: Path, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FormatError(f"{path}: not UTF-8 text (byte {exc.start}: {exc.reason})") from None


def load(path: str | Path) -> Problem:
    """Read a problem from an optpart JSON, STG or dnn-partitioning file (format detected).

    The cyclic garbage collector is paused meanwhile (:func:`optpart._gc.no_gc`): a big
    JSON graph parses into millions of dicts, whose collector passes cost a third of the time.

    Parameters
    ----------
    path : str or pathlib.Path
        A ``.json``/``.json.gz`` (optpart or dnn-partitioning), ``.stg`` or ``.npz`` file.

    Returns
    -------
    Problem
        The frozen problem (with the file's devices, when it has any).

    Raises
    ------
    FormatError
        One line naming the file and the offending field, node or line.
    """
    with no_gc():
        return _load(Path(path))


def _load(path: Path) -> Problem:
    if path.name.endswith(".npz"):
        return read_npz(path)
    data = read_bytes(path)
    if data.startswith(b"\xef\xbb\xbf"):  # a UTF-8 byte-order mark (some Windows editors write one)
        data = data[3:]
    if path.suffix == ".stg" or path.name.endswith(".stg.gz"):
        return parse_stg(_decode(path, data), name=_stem(path))
    if not data.lstrip()[:1] == b"{":
        raise FormatError(f"{path}: unknown format; optpart reads optpart JSON, STG (.stg) and "
                          "dnn-partitioning JSON")
    doc = parse_json(data, path)
    del data  # the text of a big graph is hundreds of MB: free it before building the problem
    fmt = doc.get("format") if isinstance(doc, dict) else None
    if fmt == PROBLEM_FORMAT:
        return problem_from_dict(doc, name=_stem(path))
    if fmt == RESULT_FORMAT:
        raise FormatError(f"{path} is a result file; give the problem file instead")
    if fmt is None and looks_like_dnn_partitioning(doc):
        return dnn_partitioning_from_dict(doc, name=_stem(path))
    if fmt is None:
        raise FormatError(f"{path}: missing field 'format'; optpart reads optpart JSON (\"format\": "
                          f"\"{PROBLEM_FORMAT}\"), STG and dnn-partitioning JSON")
    raise FormatError(f"{path}: unknown format {fmt!r}; expected \"{PROBLEM_FORMAT}\"")


def _write(path: Path, text: str) -> None:
    write_bytes(path, text.encode("utf-8"))


def save(problem: Problem, path: str | Path) -> None:
    """Write a problem as optpart JSON (gzip-compressed when the name ends in ``.gz``), or
    as the columnar ``.npz`` format when the name ends in ``.npz`` (big graphs; docs/formats.md).

    Parameters
    ----------
    problem : Problem
        The problem to write.
    path : str or pathlib.Path
        The file; its name chooses the format and the compression.
    """
    if Path(path).name.endswith(".npz"):
        write_npz(problem, path)
        return
    _write(Path(path), problem_to_json(problem))


def save_result(result: Result, problem: Problem, path: str | Path, include_wall_time: bool = True) -> None:
    """Write a result as optpart JSON (gzip-compressed when the name ends in ``.gz``).

    Parameters
    ----------
    result : Result
        The result to write.
    problem : Problem
        Its problem (node and device ids are written, not indices).
    path : str or pathlib.Path
        The file.
    include_wall_time : bool, optional
        False drops ``wall_seconds``, so that equal runs write equal bytes.
    """
    write_pieces(Path(path), result_json_pieces(result, problem, include_wall_time))


def load_result(path: str | Path, problem: Problem) -> Result:
    """Read a result file and re-score it against ``problem``.

    Parameters
    ----------
    path : str or pathlib.Path
        An optpart-result file.
    problem : Problem
        The problem it was computed for (ids are resolved against it).

    Returns
    -------
    Result
        Re-scored by the evaluator; the stored figures are not trusted.
    """
    path = Path(path)
    return result_from_dict(parse_json(read_bytes(path), path), problem)


def with_result_devices(problem: Problem, result_path: str | Path) -> Problem:
    """``problem`` with the devices and links recorded in a result file, when the problem
    file carries none (see :func:`optpart.formats.optpart_json.problem_for_result`).

    Parameters
    ----------
    problem : Problem
        The problem read from its file.
    result_path : str or pathlib.Path
        The result file.

    Returns
    -------
    Problem
        ``problem`` itself when it has devices, else on the result's devices and links.
    """
    if problem.n_devices:
        return problem
    path = Path(result_path)
    return problem_for_result(problem, parse_json(read_bytes(path), path))


def result_links(result_path: str | Path) -> Links | None:
    """The links a result file records (those it was solved for), or ``None`` when it records none.

    Only the file's last ``"links"`` object is decoded (the writer puts it in the footer, after
    the placement and schedule), so a result of 10^6 nodes is not parsed twice.

    Parameters
    ----------
    result_path : str or pathlib.Path
        An optpart-result file.

    Returns
    -------
    Links or None
    """
    import json

    raw = read_bytes(Path(result_path))
    at = raw.rfind(b'"links":')
    if at < 0:
        return None
    try:
        value, _ = json.JSONDecoder().raw_decode(raw[at + len(b'"links":'):].decode("utf-8").lstrip())
        return _links_from_dict(value)
    except (ValueError, UnicodeDecodeError, OptpartError):
        return None
