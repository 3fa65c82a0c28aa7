"""The optpart JSON formats for problems and results (``docs/model.md`` section 5, ``docs/formats.md``).

Problem documents carry ``"format": "optpart-problem"`` and result documents
``"format": "optpart-result"``, each with ``"version": 1``; anything else is refused.
Infinite values (unlimited device memory, free links) are written as the string
``"inf"``, since JSON has no infinity. Writers are deterministic: one node, edge or
placement entry per line, keys in a fixed order, so equal inputs give equal bytes.
"""

from __future__ import annotations

import json
import math
from typing import Any, Mapping

import numpy as np

from ..errors import FormatError, ProblemError
from ..model import records
from ..model.constraints import Constraints
from ..model.devices import Links
from ..model.problem import Problem
from ..result import Result, Status
from ._io import _orjson, json_number, short as _short

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

PROBLEM_FORMAT = "optpart-problem"
RESULT_FORMAT = "optpart-result"
VERSION = 1


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

# The record readers, under the names the other formats (npz, networkx) import.
_devices_from_list = records.read_devices
_links_from_dict = records.read_links
_constraints_from_dict = records.read_constraints


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


# ---------------------------------------------------------------------- writing
def _num(x: float) -> Any:
    """A JSON-safe number: "inf" for infinity, an int when the float is integral and exact."""
    x = float(x)
    if math.isinf(x):
        return "inf"
    if x.is_integer() and abs(x) < 2**53:
        return int(x)
    return x


def links_to_dict(links: Links) -> dict[str, Any]:
    """The links as an optpart JSON record (``latency``, ``bandwidth``, ``pairs``).

    Parameters
    ----------
    links : Links
        The uniform link and its per-pair overrides.

    Returns
    -------
    dict
        ``"inf"`` stands for an unlimited bandwidth; ``pairs`` only when there are overrides.
    """
    out: dict[str, Any] = {"latency": _num(links.latency), "bandwidth": _num(links.bandwidth)}
    if links.pairs:
        out["pairs"] = [{"src": o.src, "dst": o.dst, "latency": _num(o.latency), "bandwidth": _num(o.bandwidth)}
                        for o in links.pairs]
    return out


def constraints_to_dict(c: Constraints) -> dict[str, Any]:
    """The constraints as an optpart JSON record; empty parts are left out.

    Parameters
    ----------
    c : Constraints
        The constraints.

    Returns
    -------
    dict
        ``pin``, ``colocate`` and ``forbid`` where given.
    """
    out: dict[str, Any] = {}
    if c.pin:
        out["pin"] = dict(c.pin)
    if c.colocate:
        out["colocate"] = [list(g) for g in c.colocate]
    if c.forbid:
        out["forbid"] = {k: list(v) for k, v in c.forbid.items()}
    return out


_encode_str = json.encoder.encode_basestring  # json.dumps(s, ensure_ascii=False) for a str s (C version)


def float_reprs(values: np.ndarray) -> list[str]:
    """``[repr(float(x)) for x in values]`` for finite ``values``, the text ``json.dumps`` writes.

    With orjson (the ``fast`` extra) the digits come from one ``orjson.dumps`` of the array
    (shortest round-trip digits, as ``repr``), five times faster than ``repr`` per value;
    orjson spells numbers outside ``[1e-4, 1e16)`` (and ``-0.0``) differently, so those few
    fall back on ``repr``. The bytes are identical either way.

    Parameters
    ----------
    values : numpy.ndarray
        Finite floats.

    Returns
    -------
    list of str
        Their shortest round-trip representations.
    """
    arr = np.ascontiguousarray(values, dtype=np.float64).reshape(-1)
    if _orjson is None or not arr.size:
        return list(map(float.__repr__, arr.tolist()))
    text = _orjson.dumps(arr, option=_orjson.OPT_SERIALIZE_NUMPY).decode("ascii")
    out = text[1:-1].split(",")
    mag = np.abs(arr)
    odd = np.flatnonzero(((mag < 1e-4) & (mag > 0)) | (mag >= 1e16) | ((arr == 0) & np.signbit(arr)))
    for i in odd.tolist():
        out[i] = repr(float(arr[i]))
    return out


def _dumps(x: Any) -> str:
    return json.dumps(x, ensure_ascii=False, allow_nan=False, separators=(", ", ": "))


_ROW_SEP = ",\n    "


def _joined_rows(columns: list[list[str] | str], n: int) -> str:
    """``_ROW_SEP.join`` of ``n`` rows, row ``i`` being ``"".join(col[i] for col in columns)``
    (a ``str`` column is the same text in every row), built by one ``join`` over the
    interleaved columns: no string per row (three times faster at 10^6 rows)."""
    if n == 0:
        return ""
    width = len(columns) + 1
    parts: list[str] = [_ROW_SEP] * (width * n)
    for j, col in enumerate(columns):
        parts[j::width] = [col] * n if isinstance(col, str) else col
    parts.pop()  # no separator after the last row
    return "".join(parts)


def _document(header: list[tuple[str, Any]], lists: list[tuple[str, list[str] | str, bool]],
              footer: list[tuple[str, Any]]) -> str:
    """Assemble a JSON object: scalar keys one per line, list keys one item per line
    (items given as a list, or already joined by :func:`_joined_rows`)."""
    return "".join(_document_pieces(header, lists, footer))


def _document_pieces(header: list[tuple[str, Any]], lists: list[tuple[str, list[str] | str, bool]],
                     footer: list[tuple[str, Any]]) -> list[str]:
    """The text of :func:`_document` as pieces to write one after the other (a 10^6-node
    result's ~80 MB are not copied into one string)."""
    fields = [f"  {_dumps(k)}: {_dumps(v)}" for k, v in header]
    for key, items, as_object in lists:
        if not items:
            fields.append(f"  {_dumps(key)}: {'{}' if as_object else '[]'}")
        else:
            open_, close = ("{", "}") if as_object else ("[", "]")
            body = items if isinstance(items, str) else _ROW_SEP.join(items)
            fields.append((f"  {_dumps(key)}: {open_}\n    ", body, f"\n  {close}"))
    fields += [f"  {_dumps(k)}: {_dumps(v)}" for k, v in footer]
    pieces = ["{\n"]
    for i, f in enumerate(fields):
        if i:
            pieces.append(",\n")
        if isinstance(f, tuple):
            pieces.extend(f)
        else:
            pieces.append(f)
    pieces.append("\n}\n")
    return pieces


def problem_to_json(problem: Problem) -> str:
    """The problem as an optpart-problem JSON document (deterministic text).

    Parameters
    ----------
    problem : Problem
        The problem.

    Returns
    -------
    str
        The document; reading it back gives an equal problem.
    """
    ids = problem.node_ids
    time = problem.time.tolist()
    mem = problem.memory.tolist()
    split = None
    if problem.has_split:
        split = (problem.param_bytes.tolist(), problem.output_bytes.tolist(), problem.temp_bytes.tolist())
    meta = problem.node_meta
    node_lines = []
    for i in range(problem.n_nodes):
        nd: dict[str, Any] = {"id": ids[i], "time": time[i], "memory": _num(mem[i])}
        if split is not None:
            nd["param_bytes"], nd["output_bytes"], nd["temp_bytes"] = (_num(s[i]) for s in split)
        if meta is not None and meta[i]:
            for k, v in meta[i].items():
                nd.setdefault(k, v)
        node_lines.append(_dumps(nd))
    src, dst, eb = problem.edge_src.tolist(), problem.edge_dst.tolist(), problem.edge_bytes.tolist()
    edge_lines = [_dumps({"src": ids[s], "dst": ids[t], "bytes": _num(b)}) for s, t, b in zip(src, dst, eb)]
    header: list[tuple[str, Any]] = [("format", PROBLEM_FORMAT), ("version", VERSION), ("name", problem.name)]
    footer: list[tuple[str, Any]] = []
    if problem.n_devices:
        footer.append(("devices", [{"id": d.id, "memory": _num(d.memory), "speed": d.speed}
                                   for d in problem.devices]))
    if problem.links is not None:
        footer.append(("links", links_to_dict(problem.links)))
    if not problem.constraints.is_empty():
        footer.append(("constraints", constraints_to_dict(problem.constraints)))
    if problem.meta:
        footer.append(("meta", {k: problem.meta[k] for k in sorted(problem.meta)}))
    return _document(header, [("nodes", node_lines, False), ("edges", edge_lines, False)], footer)


def _json_safe(x: Any) -> Any:
    """A solver's free-form option or statistic as JSON: infinite floats as ``"inf"``/``"-inf"``
    (the format's spelling), NaN as null, inside lists and dicts too."""
    if isinstance(x, float):
        if math.isnan(x):
            return None
        if math.isinf(x):
            return "inf" if x > 0 else "-inf"
        return x
    if isinstance(x, dict):
        return {k: _json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_json_safe(v) for v in x]
    if isinstance(x, np.generic):
        return _json_safe(x.item())
    return x


def result_to_json(result: Result, problem: Problem, include_wall_time: bool = True) -> str:
    """The result as an optpart-result JSON document.

    Deterministic apart from ``wall_seconds``; pass ``include_wall_time=False`` to drop it
    when comparing bytes across runs.

    Parameters
    ----------
    result : Result
        The result.
    problem : Problem
        Its problem (ids are written, not indices).
    include_wall_time : bool, optional
        Write ``wall_seconds``.

    Returns
    -------
    str
    """
    return "".join(result_json_pieces(result, problem, include_wall_time))


def result_json_pieces(result: Result, problem: Problem, include_wall_time: bool = True) -> list[str]:
    """:func:`result_to_json`'s text as pieces to write one after the other (see
    :func:`_document_pieces`); :func:`optpart.formats.save_result` writes these.

    Parameters
    ----------
    result : Result
        The result.
    problem : Problem
        Its problem.
    include_wall_time : bool, optional
        Write ``wall_seconds``.

    Returns
    -------
    list of str
        Pieces whose concatenation is :func:`result_to_json`'s text.
    """
    header: list[tuple[str, Any]] = [
        ("format", RESULT_FORMAT), ("version", VERSION), ("problem", result.problem),
        ("solver", result.solver), ("status", result.status.value),
    ]
    has = result.status.has_solution
    header += [
        ("makespan", result.makespan if has else None),
        ("lower_bound", result.lower_bound),
        ("gap", result.gap if has else None),
        ("memory_model", result.memory_model),
    ]
    if result.message:
        header.append(("message", result.message))
    lists = []
    if has:
        # The same bytes as json.dumps per entry, built from the C string encoder and float
        # repr (what json.dumps uses) without a dumps call per node: 10^6 nodes in about a second.
        names = list(map(_encode_str, problem.node_ids))
        devs = [_encode_str(x) for x in problem.device_ids]
        n = len(names)
        lists.append(("placement", _joined_rows([names, ": ", list(map(devs.__getitem__,
                                                                       result.placement.tolist()))], n), True))
        if not (np.isfinite(result.start).all() and np.isfinite(result.finish).all()):
            raise ValueError("a result's start and finish times must be finite to be written as JSON")
        lists.append(("schedule", _joined_rows([names, ': {"start": ', float_reprs(result.start), ', "finish": ',
                                                float_reprs(result.finish), "}"], n), True))
    footer: list[tuple[str, Any]] = []
    # The devices and links the result was computed for, so that a result file read beside a
    # bare graph file (no devices in it) can be shown, judged and exported as it was solved.
    footer.append(("devices", [{"id": d.id, "memory": _num(d.memory), "speed": d.speed} for d in problem.devices]))
    if problem.links is not None:
        footer.append(("links", links_to_dict(problem.links)))
    if has:
        footer.append(("memory", {d: {"static": _num(s), "peak": _num(pk)} for d, s, pk in
                                  zip(problem.device_ids, result.memory_static.tolist(),
                                      result.memory_peak.tolist())}))
    if result.options:
        footer.append(("options", {k: _json_safe(result.options[k]) for k in sorted(result.options)}))
    if result.stats:
        footer.append(("stats", {k: _json_safe(result.stats[k]) for k in sorted(result.stats)}))
    if include_wall_time:
        footer.append(("wall_seconds", round(result.wall_seconds, 6)))
    return _document_pieces(header, lists, footer)


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
    devices = _devices_from_list(doc["devices"])
    links = _links_from_dict(doc["links"]) if "links" in doc else problem.links
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
    if not status.has_solution:
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
