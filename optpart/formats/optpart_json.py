"""The optpart JSON formats for problems and results (``docs/model.md`` section 5, ``docs/formats.md``).

Problem documents carry ``"format": "optpart-problem"`` and result documents
``"format": "optpart-result"``, each with ``"version": 1``; anything else is refused.
Infinite values (unlimited device memory, free links) are written as the string
``"inf"``, since JSON has no infinity. Writers are deterministic: one node, edge or
placement entry per line, keys in a fixed order, so equal inputs give equal bytes.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np

from ..errors import FormatError, ProblemError
from ..model import records
from ..model.problem import Problem
from ..result import Result, Status
# The writers live below formats (optpart/documents.py), so Result.to_json imports no format; their
# names stay importable from here.
from ..documents import (PROBLEM_FORMAT, RESULT_FORMAT, VERSION, _document, _document_pieces,  # noqa: F401
                         _dumps, _joined_rows, _json_safe, _num, constraints_to_dict, float_reprs, links_to_dict,
                         problem_to_json, result_json_pieces, result_to_json)
from ._io import json_number, short as _short

__all__ = [
    "PROBLEM_FORMAT",
    "RESULT_FORMAT",
    "problem_from_dict",
    "problem_to_json",
    "result_to_json",
    "result_from_dict",
    "links_to_dict",
    "constraints_to_dict",
]



# ---------------------------------------------------------------------- reading
def _check_header(doc: Any, expected: str) -> None:
    if not isinstance(doc, dict):
        raise FormatError(f"expected a JSON object with \"format\": \"{expected}\", got {type(doc).__name__}")
    fmt = doc.get("format")
    if fmt is None:
        raise FormatError(f"missing field 'format' (expected \"{expected}\")")
    if fmt != expected:
        raise FormatError(f"unknown format {fmt!r}; expected \"{expected}\"")
    if "version" not in doc:
        raise FormatError("missing field 'version'")
    version = doc["version"]
    if isinstance(version, bool) or not isinstance(version, int) or version != VERSION:
        raise FormatError(f"unsupported {expected} version {doc['version']!r}; this optpart reads version {VERSION}")


#: The fields of an optpart-problem document.
DOCUMENT_FIELDS = ("format", "version", "name", "nodes", "edges", "devices", "links", "constraints", "meta")


def problem_from_dict(doc: Mapping[str, Any], name: str | None = None) -> Problem:
    """Build a :class:`Problem` from a parsed optpart-problem document.

    The records are read by :mod:`optpart.model.records`, the reader
    :meth:`Problem.build` uses, so both accept and refuse the same things.

    Parameters
    ----------
    doc : mapping
        The parsed JSON document.
    name : str, optional
        The name to use when the document has none (the file's stem); default ``"problem"``.

    Returns
    -------
    Problem
        The problem the document describes.
    """
    _check_header(doc, PROBLEM_FORMAT)
    records.check_keys(doc, DOCUMENT_FIELDS, "the optpart-problem document")
    nodes = doc.get("nodes")
    if nodes is None:
        raise FormatError("missing field 'nodes' (a list of {\"id\", \"time\", \"memory\"} objects)")
    if not isinstance(nodes, list):
        raise FormatError(f"field 'nodes' is a {type(nodes).__name__}; it must be a list of "
                          "{\"id\", \"time\", \"memory\"} objects")
    edges = doc.get("edges", [])
    if not isinstance(edges, list):
        raise FormatError("field 'edges' must be a list of {\"src\", \"dst\", \"bytes\"} objects")
    columns = records.graph_columns(nodes, edges)
    devices = records.read_devices(doc["devices"]) if "devices" in doc else None
    links = records.read_links(doc["links"]) if "links" in doc else None
    constraints = records.read_constraints(doc.get("constraints") or {})
    if (constraints.pin or constraints.forbid) and devices is None:
        raise ProblemError("pin/forbid constraints name devices, but the problem has no 'devices'")
    meta = doc.get("meta", {})
    if not isinstance(meta, dict):
        raise FormatError(f"field 'meta' must be a JSON object, got {_short(meta)}")
    doc_name = doc.get("name", name if name is not None else "problem")
    if not isinstance(doc_name, str):
        raise FormatError(f"field 'name' must be a string, got {_short(doc_name)}")
    return Problem.from_arrays(**columns, devices=devices, links=links, constraints=constraints,
                               name=doc_name, meta=meta)


def problem_for_result(problem: Problem, doc: Mapping[str, Any]) -> Problem:
    """``problem`` with the devices and links a result document was computed for, when the
    problem file has no devices of its own (a bare graph solved with ``--devices/--memory``).

    A problem that has devices is returned as it is: its own devices are the reference.

    Parameters
    ----------
    problem : Problem
        The problem read from its file.
    doc : mapping
        The parsed result document.

    Returns
    -------
    Problem
    """
    if problem.n_devices or not isinstance(doc, Mapping) or "devices" not in doc:
        return problem
    devices = records.read_devices(doc["devices"])
    links = records.read_links(doc["links"]) if "links" in doc else problem.links
    return problem.with_devices(devices, links=links, constraints=problem.constraints)


def result_from_dict(doc: Mapping[str, Any], problem: Problem) -> Result:
    """Read an optpart-result document against its problem (ids are resolved to indices).

    The schedule is optional: without it, the placement is scored by the canonical schedule.
    The makespan and memory figures are recomputed from the placement and schedule; the
    stored ones are ignored (``optpart evaluate`` prints both).

    Parameters
    ----------
    doc : mapping
        The parsed optpart-result document.
    problem : Problem
        Its problem (ids resolve against it).

    Returns
    -------
    Result
        Evaluated anew.

    Raises
    ------
    FormatError
        Naming the missing or malformed field, or a node or device the problem does not have.
    """
    from ..evaluate import evaluate

    _check_header(doc, RESULT_FORMAT)
    for key in ("status", "solver"):
        if key not in doc:
            raise FormatError(f"missing field '{key}' in result")
        if not isinstance(doc[key], str):
            raise FormatError(f"result field '{key}' must be a string, got {_short(doc[key])}")
    try:
        status = Status(doc["status"])
    except ValueError:
        raise FormatError(f"unknown status {_short(doc['status'])}; known: "
                          f"{', '.join(s.value for s in Status)}") from None
    lower_bound = _result_number(doc, "lower_bound")
    message = doc.get("message", "")
    if not isinstance(message, str):
        raise FormatError(f"result field 'message' must be a string, got {_short(message)}")
    if status is Status.INVALID and isinstance(doc.get("placement"), dict):
        status = Status.FEASIBLE  # what it claims is re-judged: the evaluator says invalid again, or not
    elif not status.has_solution:
        return Result(problem=str(doc.get("problem", problem.name)), solver=doc["solver"], status=status,
                      lower_bound=lower_bound, message=message)
    if "placement" not in doc or not isinstance(doc["placement"], dict):
        raise FormatError(f"result with status '{status.value}' has no 'placement' object")
    for nid, did in doc["placement"].items():
        if not isinstance(did, str):
            raise FormatError(f"placement of node '{nid}' must be a device id (a string), got {_short(did)}")
    placement = problem.placement_from_ids(doc["placement"])
    start = None
    if doc.get("schedule"):
        sched = doc["schedule"]
        if not isinstance(sched, dict):
            raise FormatError(f"result field 'schedule' must be an object, got {type(sched).__name__}")
        values = []
        for nid in problem.node_ids:
            entry = sched.get(nid)
            if not isinstance(entry, dict) or "start" not in entry:
                raise FormatError(f"schedule has no start time for node '{nid}'")
            x = entry["start"]
            if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(float(x)):
                raise FormatError(f"schedule of node '{nid}' has start={_short(x)}; it must be a finite number")
            values.append(float(x))
        start = np.array(values)
    memory_model = doc.get("memory_model", "static")
    if memory_model not in ("static", "peak"):
        raise FormatError(f"result field 'memory_model' is {_short(memory_model)}; use 'static' or 'peak'")
    for key in ("options", "stats"):
        if not isinstance(doc.get(key) or {}, dict):
            raise FormatError(f"result field '{key}' must be an object, got {_short(doc[key])}")
    result = evaluate(problem, placement, start, solver=doc["solver"], status=status,
                      lower_bound=lower_bound, memory_model=memory_model, message=message,
                      options=doc.get("options") or {}, stats=doc.get("stats") or {})
    result.wall_seconds = _result_number(doc, "wall_seconds")
    return result


def _result_number(doc: Mapping[str, Any], key: str) -> float:
    """A result's optional number (``null`` or absent read as 0), or an error naming the field."""
    value = doc.get(key)
    return 0.0 if value is None else json_number(value, f"result field '{key}'")
