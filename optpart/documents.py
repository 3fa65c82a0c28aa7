"""Writers of the optpart JSON documents (problem and result), below :mod:`optpart.formats`.

The text is deterministic: one node, edge or placement entry per line, keys in a fixed order,
so equal inputs give equal bytes; infinite values are written as the string ``"inf"``
(docs/formats.md). This module reads a result only through its attributes and never imports
:mod:`optpart.result` or :mod:`optpart.formats`, so :meth:`optpart.Result.to_json` writes
through it without an import circle; :mod:`optpart.formats.optpart_json` (the readers)
re-exports every name.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np

from .model.constraints import Constraints
from .model.devices import Links, default_links
from .model.problem import Problem

try:  # the ``fast`` extra: faster number text (the same bytes)
    import orjson as _orjson
except ImportError:  # pragma: no cover - exercised when orjson is absent
    _orjson = None

__all__ = ["PROBLEM_FORMAT", "RESULT_FORMAT", "VERSION", "problem_to_json", "result_to_json",
           "result_json_pieces", "links_to_dict", "constraints_to_dict", "float_reprs"]

PROBLEM_FORMAT = "optpart-problem"
RESULT_FORMAT = "optpart-result"
VERSION = 1


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
    """The ``links`` object of a document.

    Parameters
    ----------
    links : Links
        Default latency (s) and bandwidth (bytes/s), and per-pair overrides.

    Returns
    -------
    dict
        ``{"latency", "bandwidth"[, "pairs"]}``, infinities written as ``"inf"``.
    """
    out: dict[str, Any] = {"latency": _num(links.latency), "bandwidth": _num(links.bandwidth)}
    if links.pairs:
        out["pairs"] = [{"src": o.src, "dst": o.dst, "latency": _num(o.latency), "bandwidth": _num(o.bandwidth)}
                        for o in links.pairs]
    return out


def constraints_to_dict(c: Constraints) -> dict[str, Any]:
    """The ``constraints`` object of a problem document.

    Parameters
    ----------
    c : Constraints
        Pins, colocation groups and forbidden devices (by id).

    Returns
    -------
    dict
        Only the kinds that are present (``pin``, ``colocate``, ``forbid``).
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
    (shortest round-trip digits, as ``repr``); orjson spells numbers outside ``[1e-4, 1e16)`` (and ``-0.0``) differently, so those few
    fall back on ``repr``. The bytes are identical either way.

    Parameters
    ----------
    values : numpy.ndarray
        Finite floats (times in seconds, byte counts).

    Returns
    -------
    list of str
        One JSON number text per value.
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
    interleaved columns: no string per row."""
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
        The problem to write (nodes with their metadata, edges, devices, links, constraints).

    Returns
    -------
    str
        The document, one node or edge per line.
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


def result_to_json(result: Any, problem: Problem, include_wall_time: bool = True) -> str:
    """The result as an optpart-result JSON document.

    Deterministic apart from ``wall_seconds``; pass ``include_wall_time=False`` to drop it
    when comparing bytes across runs.

    Parameters
    ----------
    result, problem, include_wall_time
        As in :func:`result_json_pieces`.

    Returns
    -------
    str
        The document text.
    """
    return "".join(result_json_pieces(result, problem, include_wall_time))


def result_json_pieces(result: Any, problem: Problem, include_wall_time: bool = True) -> list[str]:
    """:func:`result_to_json`'s text as pieces to write one after the other (see
    :func:`_document_pieces`); :func:`optpart.formats.save_result` writes these.

    Parameters
    ----------
    result : Result
        The result (read through its attributes only: this module imports no :mod:`optpart.result`).
    problem : Problem
        The problem it is for: node and device ids, and the devices and links written with it.
    include_wall_time : bool
        Write ``wall_seconds`` (the one field that differs between equal runs).

    Returns
    -------
    list of str
        The document text in pieces (joined, they are :func:`result_to_json`).
    """
    header: list[tuple[str, Any]] = [
        ("format", RESULT_FORMAT), ("version", VERSION), ("problem", result.problem),
        ("solver", result.solver), ("status", result.status.value),
    ]
    has = result.status.has_solution
    # an ``invalid`` result keeps its placement and schedule, for inspection (see Status)
    carries = has or (result.status.value == "invalid" and result.placement is not None
                      and result.start is not None and len(result.placement) == problem.n_nodes)
    header += [
        ("makespan", result.makespan if carries else None),
        ("lower_bound", result.lower_bound),
        ("gap", result.gap if has else None),
        ("memory_model", result.memory_model),
    ]
    if result.message:
        header.append(("message", result.message))
    lists = []
    if carries:
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
    # bare graph file (no devices in it) can be shown, judged and exported as it was solved,
    # and judged against the links it was solved for (a file without links has the default ones).
    footer.append(("devices", [{"id": d.id, "memory": _num(d.memory), "speed": d.speed} for d in problem.devices]))
    footer.append(("links", links_to_dict(problem.links if problem.links is not None else default_links())))
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
