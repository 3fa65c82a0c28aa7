"""Conversion between :class:`Problem` and networkx ``DiGraph`` (interop only, never a hot path).

:func:`to_networkx` writes everything a problem holds, so that
``from_networkx(to_networkx(p))`` gives ``p`` back:

* node attributes ``time``, ``memory`` (and ``param_bytes``/``output_bytes``/``temp_bytes``
  when the problem has the peak-memory split) plus every node metadata key;
* edge attribute ``bytes`` plus the edge metadata a graph brought in (kept in
  ``problem.meta["edge_meta"]`` as ``[src, dst, {attributes}]`` rows);
* graph attributes ``name``, ``devices`` (a list of ``{"id", "memory", "speed"}``),
  ``links`` and ``constraints`` (shaped as in the optpart JSON format, ``docs/model.md``
  section 5) and ``meta``.

:func:`from_networkx` reads any ``DiGraph``: like networkx algorithms (``weight="weight"``)
it takes the *names* of the attributes that hold a node's run time, memory and an edge's
bytes, and values may be numbers or unit strings (``"12us"``, ``"3MiB"``). Node ids become
strings (``str(node)``).
"""

from __future__ import annotations

import math

from typing import Any, Mapping, Sequence

import networkx as nx
import numpy as np

from ..errors import OptpartError, ProblemError
from ..model.constraints import Constraints
from ..model.devices import Device, Links
from ..model.problem import Problem
from ..units import parse_bytes, parse_time

__all__ = ["from_networkx", "to_networkx"]

_SPLIT = ("param_bytes", "output_bytes", "temp_bytes")


def _value(raw: Any, parse, what: str) -> float:
    try:
        return parse(raw)
    except (OptpartError, TypeError, ValueError) as exc:
        raise ProblemError(f"{what}: {exc}") from None


def from_networkx(
    graph: nx.DiGraph,
    *,
    time: str = "time",
    memory: str = "memory",
    bytes: str = "bytes",  # noqa: A002 - the attribute name, as networkx's ``weight=``
    param_bytes: str = "param_bytes",
    output_bytes: str = "output_bytes",
    temp_bytes: str = "temp_bytes",
    devices: int | Sequence[Device] | Sequence[str] | None = None,
    memory_capacity: Any = None,
    speed: Any = None,
    links: Links | Mapping[str, Any] | None = None,
    constraints: Constraints | Mapping[str, Any] | None = None,
    name: str | None = None,
) -> Problem:
    """Build a problem from a ``DiGraph``.

    Parameters
    ----------
    graph : networkx.DiGraph
        A DAG. Node attribute ``time`` is required; ``memory`` defaults to 0 unless the
        peak split attributes are given; edge attribute ``bytes`` defaults to 0. Every
        other node attribute becomes node metadata, every other edge attribute edge metadata.
    time, memory, bytes, param_bytes, output_bytes, temp_bytes : str
        Names of the attributes holding those fields, e.g. ``time="weight", bytes="size"``.
    devices : int, list of Device, list of str, optional
        The devices (a count names them ``dev0``...). Default: the graph's ``devices``
        attribute (as :func:`to_networkx` writes it), else none.
    memory_capacity, speed : optional
        Device capacities and speeds, as :meth:`Problem.with_devices` takes them (one value,
        a list, or a dict by device id; unit strings allowed).
    links, constraints : optional
        :class:`Links`/:class:`Constraints` or dicts shaped as in the JSON format. Default:
        the graph's ``links``/``constraints`` attributes.
    name : str, optional
        Default: the graph's ``name`` attribute, else ``'problem'``.

    Returns
    -------
    Problem
        The graph as a problem (with devices when ``devices`` is given).

    Examples
    --------
    >>> g = nx.DiGraph()
    >>> g.add_edge("a", "b", size="1MB")
    >>> g.nodes["a"]["weight"], g.nodes["b"]["weight"] = 1.0, "2ms"
    >>> p = from_networkx(g, time="weight", bytes="size", devices=2, memory_capacity="1GiB")
    >>> p.n_devices, float(p.time[1]), float(p.edge_bytes[0])
    (2, 0.002, 1000000.0)
    """
    if not isinstance(graph, nx.DiGraph) or graph.is_multigraph():
        raise ProblemError(f"expected a networkx DiGraph, got {type(graph).__name__}")
    nodes = list(graph.nodes)
    ids = [str(v) for v in nodes]
    index = {v: i for i, v in enumerate(nodes)}
    data = [graph.nodes[v] for v in nodes]
    times = []
    for v, d in zip(ids, data):
        if time not in d:
            raise ProblemError(f"node '{v}' has no attribute {time!r} (its run time; choose the attribute "
                               f"with time=...)")
        times.append(_value(d[time], parse_time, f"node '{v}' {time}"))
    split_names = dict(zip(_SPLIT, (param_bytes, output_bytes, temp_bytes)))
    # NaN: not given for this node; Problem.from_arrays fills it (docs/model.md section 3).
    split = {f: [_value(d[a], parse_bytes, f"node '{v}' {a}") if a in d else math.nan for v, d in zip(ids, data)]
             for f, a in split_names.items() if any(a in d for d in data)}
    mem = None
    if not split or any(memory in d for d in data):
        mem = [_value(d[memory], parse_bytes, f"node '{v}' {memory}") if memory in d else (math.nan if split else 0.0)
               for v, d in zip(ids, data)]
    used = {time, memory, *split_names.values()}
    meta = [{k: val for k, val in d.items() if k not in used} for d in data]
    src, dst, nbytes, edge_meta = [], [], [], []
    for u, w, d in graph.edges(data=True):
        src.append(index[u])
        dst.append(index[w])
        nbytes.append(_value(d.get(bytes, 0), parse_bytes, f"edge '{u}' -> '{w}' {bytes}"))
        extra = {k: val for k, val in d.items() if k != bytes}
        if extra:
            edge_meta.append([str(u), str(w), extra])
    gattr = graph.graph
    problem_meta = dict(gattr.get("meta") or {})
    problem_meta.pop("edge_meta", None)
    if edge_meta:
        problem_meta["edge_meta"] = edge_meta
    if devices is None and "devices" in gattr:
        devices = [Device(str(d["id"]), _value(d.get("memory", float("inf")), parse_bytes,
                                               f"device '{d['id']}' memory"), float(d.get("speed", 1.0)))
                   for d in gattr["devices"]]
        if memory_capacity is not None or speed is not None:  # override the graph's values, keep its ids
            memory_capacity = [d.memory for d in devices] if memory_capacity is None else memory_capacity
            speed = [d.speed for d in devices] if speed is None else speed
            devices = [d.id for d in devices]
    links = links if links is not None else gattr.get("links")
    constraints = constraints if constraints is not None else gattr.get("constraints")
    from ..model.records import read_constraints, read_links  # the JSON readers' validation

    if isinstance(links, Mapping):
        links = read_links(dict(links))
    if isinstance(constraints, Mapping):
        constraints = read_constraints(dict(constraints))
    has_devices = devices is not None or memory_capacity is not None or speed is not None
    p = Problem.from_arrays(
        ids, np.asarray(times, dtype=np.float64), mem, src, dst, np.asarray(nbytes, dtype=np.float64),
        links=links, constraints=None if has_devices else constraints,
        param_bytes=split.get("param_bytes"), output_bytes=split.get("output_bytes"),
        temp_bytes=split.get("temp_bytes"), node_meta=meta if any(meta) else None,
        name=name or gattr.get("name", "problem"), meta=problem_meta,
    )
    if has_devices:
        kw: dict[str, Any] = {}
        if memory_capacity is not None:
            kw["memory"] = memory_capacity
        if speed is not None:
            kw["speed"] = speed
        p = p.with_devices(devices, links=p.links, constraints=constraints or Constraints(), **kw)
    return p


def to_networkx(problem: Problem) -> nx.DiGraph:
    """The whole problem as a ``DiGraph``: node/edge fields and metadata, devices, links,
    constraints and problem metadata as graph attributes (see the module docstring).

    Parameters
    ----------
    problem : Problem
        Any problem, with or without devices.

    Returns
    -------
    networkx.DiGraph
        Nodes keyed by id; :func:`from_networkx` reads it back to an equal problem.
    """
    from .optpart_json import constraints_to_dict, links_to_dict

    meta = dict(problem.meta)
    edge_meta = {(s, d): attrs for s, d, attrs in meta.pop("edge_meta", [])}
    g = nx.DiGraph(name=problem.name)
    if problem.n_devices:
        g.graph["devices"] = [{"id": d.id, "memory": float(d.memory), "speed": float(d.speed)}
                              for d in problem.devices]
    if problem.links is not None:
        g.graph["links"] = links_to_dict(problem.links)
    if not problem.constraints.is_empty():
        g.graph["constraints"] = constraints_to_dict(problem.constraints)
    if meta:
        g.graph["meta"] = meta
    node_meta = problem.node_meta or [{}] * problem.n_nodes
    for i, nid in enumerate(problem.node_ids):
        attrs: dict[str, Any] = dict(node_meta[i])
        attrs["time"] = float(problem.time[i])
        attrs["memory"] = float(problem.memory[i])
        if problem.has_split:
            attrs["param_bytes"] = float(problem.param_bytes[i])
            attrs["output_bytes"] = float(problem.output_bytes[i])
            attrs["temp_bytes"] = float(problem.temp_bytes[i])
        g.add_node(nid, **attrs)
    ids = problem.node_ids
    for s, t, b in zip(problem.edge_src.tolist(), problem.edge_dst.tolist(), problem.edge_bytes.tolist()):
        g.add_edge(ids[s], ids[t], **edge_meta.get((ids[s], ids[t]), {}), bytes=b)
    return g
