"""File formats: optpart JSON (problems and results), STG, dnn-partitioning JSON, networkx.

:func:`load` recognises a file by its content and extension: ``.stg`` files are
STG; JSON (optionally gzip-compressed, ``.json.gz``) is an optpart problem when it
says ``"format": "optpart-problem"`` and a dnn-partitioning graph when it has
``maxSizePerFPGA``. :func:`save` writes problems and results as optpart JSON.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from ..errors import FormatError
from ..problem import Problem
from ..result import Result
from .dnn_partitioning import dnn_partitioning_from_dict, looks_like_dnn_partitioning
from .networkx_io import from_networkx, to_networkx
from .optpart_json import (PROBLEM_FORMAT, RESULT_FORMAT, problem_from_dict, problem_to_json,
                           result_from_dict, result_to_json)
from .stg import parse_stg, read_stg

__all__ = [
    "load",
    "save",
    "load_result",
    "save_result",
    "read_text",
    "from_networkx",
    "to_networkx",
    "read_stg",
    "parse_stg",
    "problem_to_json",
    "result_to_json",
]


def _stem(path: Path) -> str:
    name = path.name
    for suffix in (".gz", ".json", ".stg"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    return name


def read_text(path: str | Path) -> str:
    """A file's text, gunzipped when its name ends in ``.gz``; a clear error when it is missing."""
    path = Path(path)
    if not path.exists():
        raise FormatError(f"no such file: {path}")
    if path.is_dir():
        raise FormatError(f"{path} is a directory, not a problem file")
    try:
        if path.name.endswith(".gz"):
            with gzip.open(path, "rt", encoding="utf-8") as fh:
                return fh.read()
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise FormatError(f"cannot read {path}: {exc}") from None


def _parse_json(path: Path, text: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise FormatError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None


def load(path: str | Path) -> Problem:
    """Read a problem from an optpart JSON, STG or dnn-partitioning file (format detected)."""
    path = Path(path)
    text = read_text(path)
    if path.suffix == ".stg" or path.name.endswith(".stg.gz"):
        return parse_stg(text, name=_stem(path))
    if not text.lstrip().startswith("{"):
        raise FormatError(f"{path}: unknown format; optpart reads optpart JSON, STG (.stg) and "
                          "dnn-partitioning JSON")
    doc = _parse_json(path, text)
    fmt = doc.get("format") if isinstance(doc, dict) else None
    if fmt == PROBLEM_FORMAT:
        problem = problem_from_dict(doc)
        if "name" not in doc:
            problem.name = _stem(path)
        return problem
    if fmt == RESULT_FORMAT:
        raise FormatError(f"{path} is a result file; give the problem file instead")
    if fmt is None and looks_like_dnn_partitioning(doc):
        return dnn_partitioning_from_dict(doc, name=_stem(path))
    if fmt is None:
        raise FormatError(f"{path}: missing field 'format'; optpart reads optpart JSON (\"format\": "
                          f"\"{PROBLEM_FORMAT}\"), STG and dnn-partitioning JSON")
    raise FormatError(f"{path}: unknown format {fmt!r}; expected \"{PROBLEM_FORMAT}\"")


def _write(path: Path, text: str) -> None:
    if path.name.endswith(".gz"):
        # mtime=0 and no file name keep compressed bytes identical across runs.
        with open(path, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as fh:
            fh.write(text.encode("utf-8"))
    else:
        path.write_text(text, encoding="utf-8")


def save(problem: Problem, path: str | Path) -> None:
    """Write a problem as optpart JSON (gzip-compressed when the name ends in ``.gz``)."""
    _write(Path(path), problem_to_json(problem))


def save_result(result: Result, problem: Problem, path: str | Path, include_wall_time: bool = True) -> None:
    """Write a result as optpart JSON."""
    _write(Path(path), result_to_json(result, problem, include_wall_time))


def load_result(path: str | Path, problem: Problem) -> Result:
    """Read a result file and re-score it against ``problem``."""
    path = Path(path)
    return result_from_dict(_parse_json(path, read_text(path)), problem)
