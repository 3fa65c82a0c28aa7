"""Conversion between :class:`Problem` and networkx ``DiGraph`` (interop only, never a hot path).

Node attributes ``time`` (required), ``memory`` (default 0) and the optional
``param_bytes``/``output_bytes``/``temp_bytes`` map to the model's fields; every
other node attribute is kept as metadata. Edge attribute ``bytes`` (default 0)
is the tensor size. Node ids are turned into strings. Graph attribute ``name``
names the problem.
"""

from __future__ import annotations

import math

from typing import Any, Sequence

import networkx as nx
import numpy as np

from ..errors import ProblemError
from ..problem import Constraints, Device, Links, Problem

__all__ = ["from_networkx", "to_networkx"]

_FIELDS = ("time", "memory", "param_bytes", "output_bytes", "temp_bytes")


def from_networkx(graph: nx.DiGraph, devices: Sequence[Device] | None = None, links: Links | None = None,
                  constraints: Constraints | None = None, name: str | None = None) -> Problem:
    """Build a problem from a ``DiGraph`` whose nodes carry ``time`` (and ``memory``)."""
    if not isinstance(graph, nx.DiGraph) or graph.is_multigraph():
        raise ProblemError(f"expected a networkx DiGraph, got {type(graph).__name__}")
    nodes = list(graph.nodes)
    ids = [str(v) for v in nodes]
    index = {v: i for i, v in enumerate(nodes)}
    data = [graph.nodes[v] for v in nodes]
    for v, d in zip(ids, data):
        if "time" not in d:
            raise ProblemError(f"node '{v}' has no attribute 'time'")
    # NaN: not given for this node; Problem.from_arrays fills it (docs/model.md section 3).
    split = {f: [d.get(f, math.nan) for d in data] for f in _FIELDS[2:] if any(f in d for d in data)}
    memory = [d.get("memory", math.nan if split else 0) for d in data]
    meta = [{k: val for k, val in d.items() if k not in _FIELDS} for d in data]
    src, dst, nbytes = [], [], []
    for u, w, d in graph.edges(data=True):
        src.append(index[u])
        dst.append(index[w])
        nbytes.append(d.get("bytes", 0))
    return Problem.from_arrays(
        ids, [d["time"] for d in data], memory, src, dst, np.asarray(nbytes, dtype=np.float64),
        devices=devices, links=links, constraints=constraints,
        param_bytes=split.get("param_bytes"), output_bytes=split.get("output_bytes"),
        temp_bytes=split.get("temp_bytes"), node_meta=meta if any(meta) else None,
        name=name or graph.graph.get("name", "problem"),
    )


def to_networkx(problem: Problem) -> nx.DiGraph:
    """The problem's graph as a ``DiGraph`` with ``time``, ``memory`` and ``bytes`` attributes."""
    g = nx.DiGraph(name=problem.name)
    meta = problem.node_meta or [{}] * problem.n_nodes
    for i, nid in enumerate(problem.node_ids):
        attrs: dict[str, Any] = dict(meta[i])
        attrs["time"] = float(problem.time[i])
        attrs["memory"] = float(problem.memory[i])
        if problem.has_split:
            attrs["param_bytes"] = float(problem.param_bytes[i])
            attrs["output_bytes"] = float(problem.output_bytes[i])
            attrs["temp_bytes"] = float(problem.temp_bytes[i])
        g.add_node(nid, **attrs)
    ids = problem.node_ids
    for s, t, b in zip(problem.edge_src.tolist(), problem.edge_dst.tolist(), problem.edge_bytes.tolist()):
        g.add_edge(ids[s], ids[t], bytes=b)
    return g
