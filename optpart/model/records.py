"""The one reader of JSON-shaped records: nodes, edges, devices, links and constraints.

:meth:`Problem.build <optpart.model.problem.Problem.build>` and the optpart JSON format
(:mod:`optpart.formats.optpart_json`) both read their records here, so they accept and
refuse the same things with the same message (docs/model.md section 5):

* nodes are ``{"id", "time", "memory"}`` and/or the peak split ``param_bytes``,
  ``output_bytes``, ``temp_bytes``; other keys are node metadata, except a key that looks
  like a misspelt model field (``tiem``, ``Memory``), which is an error naming it;
* edges are ``{"src", "dst", "bytes"}`` (bytes default 0), devices ``{"id", "memory",
  "speed"}``, links ``{"latency", "bandwidth", "pairs"}``, link pairs ``{"src", "dst",
  "latency", "bandwidth"}``, constraints ``{"pin", "colocate", "forbid"}``: any other key
  (``bandwith``) is an error naming it and the known ones, never a silent default;
* numbers are ints or floats (numpy scalars too), never booleans or strings, except the
  string ``"inf"`` where infinity is a value (device memory, bandwidth).

Errors are :class:`~optpart.errors.RecordError`: a :class:`~optpart.errors.ProblemError`
for ``build`` and a :class:`~optpart.errors.FormatError` for a file, both at once.
Columns are read in a few C-level passes (``itemgetter``, ``map``), 10^6 nodes in about
a second; value ranges are checked once, by ``Problem.from_arrays``.
"""

from __future__ import annotations

import difflib
import math
from operator import itemgetter
from typing import Any, Iterable, Mapping

import numpy as np

from ..errors import RecordError
from ..limits import check_devices
from .columns import short
from .constraints import Constraints
from .devices import Device, LinkOverride, Links
from .frozen import FrozenList

__all__ = ["NODE_FIELDS", "SPLIT_FIELDS", "check_keys", "graph_columns", "read_devices", "read_links",
           "read_constraints", "number"]

SPLIT_FIELDS = ("param_bytes", "output_bytes", "temp_bytes")
NODE_FIELDS = ("id", "time", "memory") + SPLIT_FIELDS
EDGE_FIELDS = ("src", "dst", "bytes")
DEVICE_FIELDS = ("id", "memory", "speed")
LINK_FIELDS = ("latency", "bandwidth", "pairs")
PAIR_FIELDS = ("src", "dst", "latency", "bandwidth")
CONSTRAINT_FIELDS = ("pin", "colocate", "forbid")
_NUMBER_TYPES = frozenset((int, float, np.int64, np.int32, np.float64, np.float32))


def _suggest(key: Any, known: Iterable[str]) -> str:
    close = difflib.get_close_matches(str(key).lower(), list(known), n=1, cutoff=0.75)
    return f"; did you mean '{close[0]}'?" if close else ""


def check_keys(keys: Iterable[Any], known: tuple[str, ...], what: str) -> None:
    """Refuse keys outside ``known``, naming the first and the known ones.

    Parameters
    ----------
    keys : iterable
        The keys a record (or all records of a kind) has.
    known : tuple of str
        The keys the record may have.
    what : str
        The record, for the message (``"links"``, ``"an edge"``).
    """
    unknown = sorted(map(str, set(keys) - set(known)))
    if unknown:
        raise RecordError(f"{what} has unknown field '{unknown[0]}'{_suggest(unknown[0], known)} "
                          f"(known: {', '.join(known)})")


def _check_node_keys(keys: set) -> None:
    """Node metadata may use any key but one that looks like a misspelt model field."""
    for key in sorted(map(str, keys - set(NODE_FIELDS))):
        hint = _suggest(key, NODE_FIELDS)
        if hint:
            raise RecordError(f"a node has unknown field '{key}'{hint} (model fields: {', '.join(NODE_FIELDS)}; "
                              "other keys are metadata, but this one looks like a misspelling)")


def number(value: Any, who: str, key: str, allow_inf: bool = False) -> float:
    """One number of a record: an int or float (``"inf"`` when ``allow_inf``), never a bool.

    Parameters
    ----------
    value : object
        The value read.
    who : str
        Who has it, for the message (``"device 'g'"``, ``"links"``).
    key : str
        The field (``"memory"``).
    allow_inf : bool
        Whether infinity (also spelt ``"inf"``) is a value here.

    Returns
    -------
    float
    """
    if isinstance(value, str) and allow_inf and value.strip().lower() in ("inf", "infinity"):
        return math.inf
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise RecordError(f"{who} has {key}={short(value)}; it must be a number")
    try:
        x = float(value)
    except OverflowError:
        raise RecordError(f"{who} has {key}={short(value)}; it is beyond the float range "
                          "(at most about 1.8e308)") from None
    if math.isnan(x) or x < 0 or (math.isinf(x) and not allow_inf):
        raise RecordError(f"{who} has {key}={value!r}; it must be a finite number >= 0")
    return x


def _column(items: list, key: str, what: str, ids: list[str] | None = None, default: Any = None) -> list:
    try:
        if default is None:
            return list(map(itemgetter(key), items))
        return [item.get(key, default) for item in items]
    except (KeyError, TypeError, AttributeError):
        for i, item in enumerate(items):
            if not isinstance(item, Mapping):
                raise RecordError(f"{what} at position {i} must be an object (a mapping), got {short(item)}") from None
            if default is None and key not in item:
                who = f"'{ids[i]}'" if ids else f"at position {i}"
                raise RecordError(f"{what} {who} has no field '{key}'") from None
        raise


def _numbers(values: list, key: str, name_of) -> np.ndarray:
    """A list of numbers as float64 (NaN allowed: "not given"); bools, strings, nulls and
    integers beyond the float range are refused naming the item; one type pass."""
    if not _NUMBER_TYPES.issuperset(set(map(type, values))):
        for i, x in enumerate(values):
            if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, float, np.integer, np.floating)):
                raise RecordError(f"{name_of(i)} has {key}={short(x)}; it must be a number")
    try:
        return np.asarray(values, dtype=np.float64)
    except OverflowError:
        for i, x in enumerate(values):
            if isinstance(x, int) and abs(x) > 1.7e308:
                raise RecordError(f"{name_of(i)} has {key}={short(x)}; it is beyond the float range "
                                  "(at most about 1.8e308)") from None
        raise


def _node_meta(nodes: list, known: frozenset) -> list[dict]:
    """Per-node metadata (the keys that are not model fields, in the node's own order); when
    every node has the keys of the first in the same order, picked with ``itemgetter``."""
    first = tuple(nodes[0]) if nodes else ()
    extra = [k for k in first if k not in known]
    if extra and all(map(first.__eq__, map(tuple, nodes))):
        if len(extra) == 1:
            key = extra[0]
            return [{key: v} for v in map(itemgetter(key), nodes)]
        return [dict(zip(extra, vals)) for vals in map(itemgetter(*extra), nodes)]
    return [{k: v for k, v in nd.items() if k not in known} for nd in nodes]


def _ids(raw: list, what: str) -> list[str]:
    if set(map(type, raw)) <= {str}:
        return raw
    for i, x in enumerate(raw):
        if isinstance(x, bool) or not isinstance(x, (str, int)):
            raise RecordError(f"{what} at position {i} has id {short(x)}; ids are strings")
    return [str(x) for x in raw]


def graph_columns(nodes: Any, edges: Any = ()) -> dict[str, Any]:
    """Node and edge records as the keyword arguments of ``Problem.from_arrays``.

    Parameters
    ----------
    nodes : list of mapping
        Node records (module doc).
    edges : list of mapping
        Edge records naming nodes by id.

    Returns
    -------
    dict
        ``node_ids``, ``time``, ``memory``, ``edge_src``, ``edge_dst``, ``edge_bytes``, the
        split columns given, ``node_meta`` and ``copy=False``.
    """
    nodes = nodes if type(nodes) is list else list(nodes)
    edges = edges if type(edges) is list else list(edges)
    ids = FrozenList(_ids(_column(nodes, "id", "node"), "node"))
    present: set = set().union(*(nd.keys() for nd in nodes))
    _check_node_keys(present)
    by_node = lambda i: f"node '{ids[i]}'"  # noqa: E731
    out: dict[str, Any] = {"node_ids": ids, "copy": False}
    out["time"] = _numbers(_column(nodes, "time", "node", ids), "time", by_node)
    split = [key for key in SPLIT_FIELDS if key in present]
    for key in split:  # NaN: not given for this node; from_arrays fills it (docs/model.md section 3)
        out[key] = _numbers(_column(nodes, key, "node", ids, default=math.nan), key, by_node)
    if split:
        out["memory"] = _numbers(_column(nodes, "memory", "node", ids, default=math.nan), "memory", by_node)
    else:
        out["memory"] = _numbers(_column(nodes, "memory", "node", ids), "memory", by_node)
    for key in ("time", "memory", *split):  # NaN means "not given": a NaN written is an error
        for i in np.flatnonzero(np.isnan(out[key])).tolist():
            if key in nodes[i]:
                raise RecordError(f"node '{ids[i]}' has {key}=nan; it must be a finite number >= 0")
    known = frozenset(NODE_FIELDS)
    out["node_meta"] = None if known.issuperset(present) else FrozenList(_node_meta(nodes, known))
    if edges:
        check_keys(set().union(*(ed.keys() for ed in edges if isinstance(ed, Mapping))), EDGE_FIELDS, "an edge")
    src_ids = _column(edges, "src", "edge")
    dst_ids = _column(edges, "dst", "edge")
    index = dict(zip(ids, range(len(ids))))
    try:
        if set(map(type, src_ids)) | set(map(type, dst_ids)) <= {str}:
            out["edge_src"] = list(map(index.__getitem__, src_ids))
            out["edge_dst"] = list(map(index.__getitem__, dst_ids))
        else:
            out["edge_src"] = [index[str(s)] for s in src_ids]
            out["edge_dst"] = [index[str(t)] for t in dst_ids]
    except KeyError:
        for s, t in zip(src_ids, dst_ids):
            for end in (s, t):
                if str(end) not in index:
                    raise RecordError(f"edge '{s}' -> '{t}' names unknown node '{end}'") from None
        raise
    out["edge_bytes"] = _numbers(_column(edges, "bytes", "edge", default=0), "bytes",
                                 lambda e: f"edge '{src_ids[e]}' -> '{dst_ids[e]}'")
    return out


def read_devices(items: Any) -> list[Device]:
    """Device records ``{"id", "memory", "speed"}`` (or :class:`Device` objects) as devices.

    Parameters
    ----------
    items : list
        The records; memory may be ``"inf"``, speed defaults to 1.

    Returns
    -------
    list of Device
    """
    if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Iterable):
        raise RecordError(f"field 'devices' must be a list of {{\"id\", \"memory\", \"speed\"}} objects, "
                          f"got {type(items).__name__}")
    items = list(items)
    check_devices(len(items), "field 'devices': device count")
    devices = []
    for i, d in enumerate(items):
        if isinstance(d, Device):
            devices.append(d)
            continue
        if not isinstance(d, Mapping) or "id" not in d:
            raise RecordError(f"device at position {i} needs an 'id', got {short(d)}")
        did = d["id"]
        if isinstance(did, bool) or not isinstance(did, (str, int)):
            raise RecordError(f"device at position {i} has id {short(did)}; ids are strings")
        check_keys(d, DEVICE_FIELDS, f"device '{did}'")
        if "memory" not in d:
            raise RecordError(f"device '{did}' has no field 'memory' (bytes, or \"inf\")")
        speed = number(d.get("speed", 1.0), f"device '{did}'", "speed")
        if speed <= 0:
            raise RecordError(f"device '{did}' has speed={d['speed']!r}; it must be > 0")
        devices.append(Device(str(did), number(d["memory"], f"device '{did}'", "memory", True), speed))
    return devices


def read_links(doc: Any) -> Links:
    """A links record ``{"latency", "bandwidth", "pairs"}`` (or :class:`Links`) as links.

    Parameters
    ----------
    doc : mapping or Links
        Latency defaults to 0, bandwidth to ``"inf"``; a pair's missing values take the
        uniform link's.

    Returns
    -------
    Links
    """
    if isinstance(doc, Links):
        return doc
    if not isinstance(doc, Mapping):
        raise RecordError(f"links must be an object with 'latency', 'bandwidth' and optional 'pairs', "
                          f"got {short(doc)}")
    check_keys(doc, LINK_FIELDS, "links")
    lat = number(doc.get("latency", 0.0), "links", "latency")
    bw = number(doc.get("bandwidth", "inf"), "links", "bandwidth", allow_inf=True)
    raw_pairs = doc.get("pairs", [])
    if isinstance(raw_pairs, (str, bytes, Mapping)) or not isinstance(raw_pairs, Iterable):
        raise RecordError("field 'links.pairs' must be a list of {\"src\", \"dst\", \"latency\", \"bandwidth\"} objects")
    pairs = []
    for i, pr in enumerate(raw_pairs):
        if isinstance(pr, LinkOverride):
            pairs.append(pr)
            continue
        if not isinstance(pr, Mapping) or "src" not in pr or "dst" not in pr:
            raise RecordError(f"link pair at position {i} needs 'src' and 'dst', got {short(pr)}")
        what = f"link '{pr['src']}' -> '{pr['dst']}'"
        check_keys(pr, PAIR_FIELDS, what)
        pairs.append(LinkOverride(str(pr["src"]), str(pr["dst"]), number(pr.get("latency", lat), what, "latency"),
                                  number(pr.get("bandwidth", bw), what, "bandwidth", allow_inf=True)))
    return Links(lat, bw, tuple(pairs))


def read_constraints(doc: Any) -> Constraints:
    """A constraints record ``{"pin", "colocate", "forbid"}`` (or :class:`Constraints`).

    Parameters
    ----------
    doc : mapping, Constraints or None
        ``pin`` maps node ids to a device id, ``colocate`` is a list of lists of node
        ids, ``forbid`` maps node ids to lists of device ids.

    Returns
    -------
    Constraints
        Empty constraints for None.
    """
    if isinstance(doc, Constraints):
        return doc
    if doc is None:
        return Constraints()
    if not isinstance(doc, Mapping):
        raise RecordError(f"constraints must be an object with 'pin', 'colocate', 'forbid', got {short(doc)}")
    unknown = sorted(map(str, set(doc) - set(CONSTRAINT_FIELDS)))
    if unknown:
        raise RecordError(f"unknown constraint kind(s) {unknown}{_suggest(unknown[0], CONSTRAINT_FIELDS)}; "
                          "known: pin, colocate, forbid")
    pin = doc.get("pin") or {}
    colocate = doc.get("colocate") or []
    forbid = doc.get("forbid") or {}
    seq = (list, tuple)
    if not isinstance(pin, Mapping):
        raise RecordError("constraints 'pin' must map node ids to device ids")
    if not isinstance(colocate, seq) or not all(isinstance(g, seq) for g in colocate):
        raise RecordError("constraints 'colocate' must be a list of lists of node ids")
    if not isinstance(forbid, Mapping) or not all(isinstance(v, seq) for v in forbid.values()):
        raise RecordError("constraints 'forbid' must map node ids to lists of device ids")
    return Constraints(pin={str(k): str(v) for k, v in pin.items()},
                       colocate=tuple(tuple(str(x) for x in g) for g in colocate),
                       forbid={str(k): tuple(str(x) for x in v) for k, v in forbid.items()})
