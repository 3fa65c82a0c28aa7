"""The placement problem: graph, devices, links and constraints (``docs/model.md`` section 1).

A :class:`Problem` is immutable once built: its numpy arrays are read-only, and derived
figures (such as the lower bound of :mod:`optpart.bounds`) are cached by their owners, never
written into the problem. It keeps the graph as integer-indexed
numpy arrays so that solvers and the evaluator run plain loops over integer ids:

* nodes ``0..n-1`` in file order, with ``time``, ``memory`` and the optional
  ``param_bytes``/``output_bytes``/``temp_bytes`` split used by the peak memory model;
* edges ``0..m-1`` with ``edge_src``, ``edge_dst``, ``edge_bytes``;
* CSR adjacency: the out-edges of ``v`` are ``out_edges[out_ptr[v]:out_ptr[v+1]]``
  and the in-edges ``in_edges[in_ptr[v]:in_ptr[v+1]]`` (edge ids, in edge order);
* ``topo``: a topological order (Kahn's algorithm, ties by node index);
* devices ``0..k-1`` with ``device_memory`` and ``device_speed``, and ``k x k``
  ``latency`` and ``bandwidth`` matrices;
* constraints as ``pin`` (device index or -1 per node), colocation ``groups``
  (``group_of`` per node, -1 when free) and ``forbidden`` (node -> device set).

All validation happens here, at construction, and raises :class:`ProblemError`
naming the node, edge, device or field. A problem whose memory cannot fit (a
node larger than every device it may use) is *valid*: it is an infeasible
instance, reported by :meth:`Problem.infeasibility` and by every solver as the
status ``infeasible``.

A graph read from a file may come without devices; :meth:`Problem.with_devices`
adds them (as the command line does from ``--devices/--memory``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from itertools import chain, repeat
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from .errors import ProblemError
from .limits import check_cells, check_devices

__all__ = ["Device", "LinkOverride", "Links", "Constraints", "Problem"]


@dataclass(frozen=True)
class Device:
    """One accelerator: its memory capacity in bytes and its relative speed."""

    id: str
    memory: float = math.inf
    speed: float = 1.0


@dataclass(frozen=True)
class LinkOverride:
    """Latency (s) and bandwidth (bytes/s) between two devices, overriding the uniform link.

    An override applies in both directions unless the reverse pair has its own override.
    """

    src: str
    dst: str
    latency: float
    bandwidth: float


@dataclass(frozen=True)
class Links:
    """Uniform link (latency in s, bandwidth in bytes/s) plus per-pair overrides.

    The default, zero latency and infinite bandwidth, makes communication free.
    """

    latency: float = 0.0
    bandwidth: float = math.inf
    pairs: tuple[LinkOverride, ...] = ()


@dataclass(frozen=True)
class Constraints:
    """Pins (node -> device), colocation groups (nodes on one device) and forbidden devices."""

    pin: Mapping[str, str] = field(default_factory=dict)
    colocate: tuple[tuple[str, ...], ...] = ()
    forbid: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def is_empty(self) -> bool:
        return not (self.pin or self.colocate or self.forbid)


def _as_float_array(values, n: int, what: str, ids: Sequence[str], allow_inf: bool = False) -> np.ndarray:
    """``values`` as a float64 array of ``n`` finite numbers >= 0, or a :class:`ProblemError`
    naming the first bad node, and refusing columns whose sum overflows to infinity (a
    makespan or memory total computed from them would be inf or NaN)."""
    try:
        arr = np.asarray(values, dtype=np.float64)
    except OverflowError:
        vals = list(values)
        for i, x in enumerate(vals):
            try:
                float(x)
            except OverflowError:
                raise ProblemError(f"node '{ids[i]}' has {what}={_short(x)}; it is beyond the float range "
                                   "(at most about 1.8e308)") from None
        raise ProblemError(f"node field '{what}' holds a number beyond the float range") from None
    except (TypeError, ValueError) as exc:
        raise ProblemError(f"node field '{what}' must hold numbers: {exc}") from None
    if arr.shape != (n,):
        raise ProblemError(f"node field '{what}' has {arr.size} values for {n} nodes")
    bad = ~np.isfinite(arr) if not allow_inf else np.isnan(arr)
    bad |= arr < 0
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ProblemError(f"node '{ids[i]}' has {what}={float(arr[i])!r}; it must be a finite number >= 0")
    _check_sum(arr, f"node field '{what}'", lambda i: f"node '{ids[i]}'")
    return arr


def _short(x: Any, limit: int = 40) -> str:
    text = repr(x)
    return text if len(text) <= limit else text[:limit] + "..."


def _check_sum(arr: np.ndarray, what: str, name_of) -> None:
    """Refuse an array of finite values whose sum is not finite (float overflow)."""
    if arr.size == 0:
        return
    with np.errstate(over="ignore", invalid="ignore"):
        total = float(arr.sum())
    if not math.isfinite(total):
        i = int(np.argmax(arr))
        raise ProblemError(f"{what} sums to {total!r} (largest value {float(arr[i])!r} at {name_of(i)}): "
                           "the values overflow the float range when added; use smaller units")


def _partial_array(values, n: int, what: str, ids: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """A node column where NaN means "not given": ``(values with NaN as 0, given mask)``."""
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        arr = None
    if arr is None or arr.shape != (n,):
        arr = _as_float_array(values, n, what, ids)  # raises the one message for a bad column
    given = ~np.isnan(arr)
    return _as_float_array(np.where(given, arr, 0.0), n, what, ids), given


class Problem:
    """A placement problem. Build it with :meth:`from_arrays`, :meth:`build`,
    :func:`optpart.load` or :func:`optpart.from_networkx`.

    Attributes are numpy arrays indexed by integer node, edge and device ids;
    ``node_ids``/``device_ids`` give the string ids and ``node_index``/``device_index``
    map them back.
    """

    # ------------------------------------------------------------------ construction
    def __init__(self) -> None:  # use the from_* constructors
        self.name = "problem"
        self.meta: dict[str, Any] = {}

    @classmethod
    def from_arrays(
        cls,
        node_ids: Sequence[str],
        time: Sequence[float] | np.ndarray,
        memory: Sequence[float] | np.ndarray | None = None,
        edge_src: Sequence[int] | np.ndarray = (),
        edge_dst: Sequence[int] | np.ndarray = (),
        edge_bytes: Sequence[float] | np.ndarray | None = None,
        *,
        devices: Sequence[Device] | None = None,
        links: Links | None = None,
        constraints: Constraints | None = None,
        param_bytes=None,
        output_bytes=None,
        temp_bytes=None,
        node_meta: Sequence[Mapping[str, Any]] | None = None,
        name: str = "problem",
        meta: Mapping[str, Any] | None = None,
        topo: Sequence[int] | np.ndarray | None = None,
        copy: bool = True,
    ) -> "Problem":
        """Build a problem from parallel arrays (the fast path used by every reader).

        ``edge_src``/``edge_dst`` hold node indices. Memory (docs/model.md section 3): a
        node gives ``memory``, the split ``param_bytes``/``output_bytes``/``temp_bytes``,
        or both. ``NaN`` in any of these arrays means "not given for this node", so one
        graph may mix nodes of both kinds:

        * a node with only ``memory`` holds it as ``param_bytes`` (all step) under peak;
        * a node with only (part of) the split has static ``memory`` = the sum of its split
          (parts not given count 0);
        * a node with neither is an error naming it.

        ``memory=None`` means "not given for any node"; without any split either, every
        node then holds 0 bytes (graphs that carry no memory, e.g. STG).

        ``topo`` is an optional claimed topological order (the ``.npz`` format stores one):
        it is checked in O(V + E) with numpy to be exactly the order Kahn's algorithm gives
        (:func:`_is_kahn_order`) and then used instead of running the algorithm; an order
        that is not is an error. ``copy=False`` takes ``node_ids`` (a list of str) and
        ``node_meta`` (a list of dicts) as they are, for readers that built them fresh
        (10^6 strings and dicts are not copied again).
        """
        p = cls()
        p.name = str(name)
        p.meta = dict(meta or {})
        ids = node_ids if not copy and type(node_ids) is list else list(map(str, node_ids))
        n = len(ids)
        index = dict(zip(ids, range(n)))
        if len(index) != n:  # a duplicate: name the first one and both positions
            seen: dict[str, int] = {}
            for i, nid in enumerate(ids):
                if nid in seen:
                    raise ProblemError(f"duplicate node id '{nid}' (nodes {seen[nid]} and {i})")
                seen[nid] = i
        if "" in index:
            raise ProblemError(f"node {index['']} has an empty id; every node needs a non-empty id")
        p.node_ids = ids
        p.node_index = index
        p.n_nodes = n
        p.time = _as_float_array(time, n, "time", ids)
        names = ("param_bytes", "output_bytes", "temp_bytes")
        parts = [None if a is None else _partial_array(a, n, nm, ids)
                 for a, nm in zip((param_bytes, output_bytes, temp_bytes), names)]
        given_split = np.zeros(n, dtype=bool)
        for part in parts:
            if part is not None:
                given_split |= part[1]
        split = [np.zeros(n) if part is None else part[0] for part in parts]
        if memory is None:
            memory = np.full(n, np.nan) if given_split.any() else np.zeros(n)
        mem, mem_given = _partial_array(memory, n, "memory", ids)
        neither = ~mem_given & ~given_split
        if neither.any():
            v = int(np.flatnonzero(neither)[0])
            raise ProblemError(f"node '{ids[v]}' gives neither memory nor param_bytes/output_bytes/temp_bytes")
        p.memory = np.where(mem_given, mem, split[0] + split[1] + split[2])
        _check_sum(p.memory, "node field 'memory'", lambda i: f"node '{ids[i]}'")
        p.has_split = bool(given_split.any())
        # docs/model.md section 3: a node with only `memory` holds it for the whole step.
        p.param_bytes = np.where(given_split, split[0], p.memory)
        p.output_bytes = np.where(given_split, split[1], 0.0)
        p.temp_bytes = np.where(given_split, split[2], 0.0)
        if node_meta is None:
            p.node_meta = None
        else:
            p.node_meta = node_meta if not copy and type(node_meta) is list else [dict(m) for m in node_meta]
        if p.node_meta is not None and len(p.node_meta) != n:
            raise ProblemError(f"node_meta has {len(p.node_meta)} entries for {n} nodes")
        p._set_edges(edge_src, edge_dst, edge_bytes, topo)
        p._set_devices(devices or (), links)
        p._set_constraints(constraints or Constraints())
        return p._freeze()

    @classmethod
    def build(
        cls,
        nodes: Iterable[Mapping[str, Any]],
        edges: Iterable[Mapping[str, Any]] = (),
        devices: Iterable[Device | Mapping[str, Any]] | None = None,
        links: Links | Mapping[str, Any] | None = None,
        constraints: Constraints | Mapping[str, Any] | None = None,
        name: str = "problem",
        meta: Mapping[str, Any] | None = None,
    ) -> "Problem":
        """Build a problem from dictionaries shaped like the optpart JSON format (docs/model.md section 5).

        Built directly (no file format involved): ``nodes`` are ``{"id", "time", "memory"}``
        and/or the peak split, extra keys kept as node metadata; ``edges`` are ``{"src", "dst",
        "bytes"}`` (bytes default 0); ``devices`` are :class:`Device` or ``{"id", "memory",
        "speed"}``; ``links`` a :class:`Links` or ``{"latency", "bandwidth", "pairs"}``;
        ``constraints`` a :class:`Constraints` or ``{"pin", "colocate", "forbid"}``.
        Infinite numbers may be written ``"inf"``.

        >>> p = Problem.build(
        ...     nodes=[{"id": "a", "time": 1.0, "memory": 10}, {"id": "b", "time": 2.0, "memory": 5}],
        ...     edges=[{"src": "a", "dst": "b", "bytes": 1000}],
        ...     devices=[Device("gpu0", memory=16), Device("gpu1", memory=16)])
        >>> p.n_nodes, p.n_edges, p.n_devices
        (2, 1, 2)
        """
        nodes, edges = list(nodes), list(edges)
        for i, nd in enumerate(nodes):
            if not isinstance(nd, Mapping) or "id" not in nd:
                raise ProblemError(f"node at position {i} must be a mapping with an 'id', got {nd!r}")
        ids = [str(nd["id"]) for nd in nodes]

        def column(key: str, required: bool) -> list[float]:
            out = []
            for nid, nd in zip(ids, nodes):
                if key not in nd or nd[key] is None:
                    if required:
                        raise ProblemError(f"node '{nid}' has no field '{key}'")
                    out.append(math.nan)
                else:
                    x = _build_number(nd[key], f"node '{nid}'", key)
                    if math.isnan(x):  # NaN would read as "not given" below
                        raise ProblemError(f"node '{nid}' has {key}=nan; it must be a finite number >= 0")
                    out.append(x)
            return out

        split = {key: column(key, False) for key in _SPLIT if any(key in nd for nd in nodes)}
        meta_rows = [{k: v for k, v in nd.items() if k not in _NODE_KEYS} for nd in nodes]
        index = {nid: i for i, nid in enumerate(ids)}
        src, dst, nbytes = [], [], []
        for e, ed in enumerate(edges):
            if not isinstance(ed, Mapping) or "src" not in ed or "dst" not in ed:
                raise ProblemError(f"edge at position {e} must be a mapping with 'src' and 'dst', got {ed!r}")
            for end in ("src", "dst"):
                if str(ed[end]) not in index:
                    raise ProblemError(f"edge '{ed['src']}' -> '{ed['dst']}' names unknown node '{ed[end]}'")
            src.append(index[str(ed["src"])])
            dst.append(index[str(ed["dst"])])
            nbytes.append(_build_number(ed.get("bytes", 0), f"edge '{ed['src']}' -> '{ed['dst']}'", "bytes"))
        devs = None if devices is None else [_build_device(d) for d in devices]
        if links is not None and not isinstance(links, Links):
            links = _build_links(links)
        if constraints is not None and not isinstance(constraints, Constraints):
            constraints = _build_constraints(constraints)
        return cls.from_arrays(
            ids, column("time", True), column("memory", not split), src, dst, nbytes,
            devices=devs, links=links, constraints=constraints,
            param_bytes=split.get("param_bytes"), output_bytes=split.get("output_bytes"),
            temp_bytes=split.get("temp_bytes"), node_meta=meta_rows if any(meta_rows) else None,
            name=name, meta=meta)

    def _set_edges(self, edge_src, edge_dst, edge_bytes, topo=None) -> None:
        n = self.n_nodes
        try:
            src = np.asarray(edge_src, dtype=np.int64).reshape(-1)
            dst = np.asarray(edge_dst, dtype=np.int64).reshape(-1)
        except (TypeError, ValueError, OverflowError) as exc:
            raise ProblemError(f"edge endpoints must be node indices (integers): {exc}") from None
        if src.shape != dst.shape:
            raise ProblemError(f"edge_src has {src.size} entries but edge_dst has {dst.size}")
        m = src.size
        if edge_bytes is None:
            eb = np.zeros(m)
        else:
            try:
                eb = np.asarray(edge_bytes, dtype=np.float64).reshape(-1)
            except (TypeError, ValueError, OverflowError) as exc:
                raise ProblemError(f"edge bytes must be numbers: {exc}") from None
            if eb.shape != (m,):
                raise ProblemError(f"edge_bytes has {eb.size} entries for {m} edges")
        for arr, what in ((src, "source"), (dst, "destination")):
            bad = (arr < 0) | (arr >= n)
            if bad.any():
                e = int(np.flatnonzero(bad)[0])
                raise ProblemError(f"edge {e} has {what} index {int(arr[e])}, outside 0..{n - 1}")
        bad = ~np.isfinite(eb) | (eb < 0)
        if bad.any():
            e = int(np.flatnonzero(bad)[0])
            raise ProblemError(f"edge '{self.node_ids[src[e]]}' -> '{self.node_ids[dst[e]]}' has "
                               f"bytes={float(eb[e])!r}; it must be a finite number >= 0")
        _check_sum(eb, "edge field 'bytes'",
                   lambda e: f"edge '{self.node_ids[src[e]]}' -> '{self.node_ids[dst[e]]}'")
        loops = src == dst
        if loops.any():
            e = int(np.flatnonzero(loops)[0])
            raise ProblemError(f"cycle: node '{self.node_ids[src[e]]}' has an edge to itself")
        if m:
            key = src * n + dst
            order = np.argsort(key, kind="stable")
            dup = np.flatnonzero(key[order][1:] == key[order][:-1])
            if dup.size:
                e = int(order[dup[0] + 1])
                raise ProblemError(f"duplicate edge '{self.node_ids[src[e]]}' -> '{self.node_ids[dst[e]]}' "
                                   "(a pair of nodes has at most one edge)")
        self.edge_src, self.edge_dst, self.edge_bytes = src, dst, eb
        self.n_edges = m
        # CSR adjacency over edge ids, stable in edge order.
        self.out_edges = np.argsort(src, kind="stable")
        self.out_ptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(src, minlength=n), out=self.out_ptr[1:])
        self.in_edges = np.argsort(dst, kind="stable")
        self.in_ptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(dst, minlength=n), out=self.in_ptr[1:])
        if topo is not None and _is_kahn_order(topo, src, self.in_edges, self.in_ptr):
            self.topo = np.array(topo, dtype=np.int64)
        else:
            self.topo = self._topological_order()  # raises on a cycle, naming a node on it
            if topo is not None:
                raise ProblemError("the given topological order (topo; in a .npz file the member "
                                   "'topo.npy') is not the one of this graph (Kahn's algorithm, FIFO from "
                                   "the sources in index order): the file was edited; rewrite it with optpart")
        # Position of each node in ``topo``: the tie-break "topological position" of every
        # list scheduler and replay (one array, computed once).
        self.topo_rank = np.empty(self.n_nodes, dtype=np.int64)
        self.topo_rank[self.topo] = np.arange(self.n_nodes)

    def _topological_order(self) -> np.ndarray:
        """Kahn's algorithm with a FIFO queue seeded in index order: deterministic, O(V + E).

        The loop walks ``order`` while appending to it (the list is the queue), over plain
        Python lists: the fastest pure-Python form (about 2 s for 10^6 nodes).
        """
        n = self.n_nodes
        indeg = np.diff(self.in_ptr).tolist()
        out_ptr = self.out_ptr.tolist()
        succ = self.edge_dst[self.out_edges].tolist()
        order = [v for v, d in enumerate(indeg) if d == 0]
        append = order.append
        for v in order:  # grows while walked: a FIFO queue
            for w in succ[out_ptr[v]:out_ptr[v + 1]]:
                d = indeg[w] - 1
                indeg[w] = d
                if not d:
                    append(w)
        if len(order) < n:
            raise ProblemError(f"cycle: node '{self.node_ids[self._node_on_cycle(indeg)]}' lies on a cycle")
        return np.asarray(order, dtype=np.int64)

    def _node_on_cycle(self, indeg: list[int]) -> int:
        # Nodes left with indeg > 0 each have a predecessor that is also left; walking
        # predecessors must revisit a node, and that node lies on a cycle.
        left = [v for v in range(self.n_nodes) if indeg[v] > 0]
        remaining = set(left)
        v = left[0]
        seen: set[int] = set()
        while v not in seen:
            seen.add(v)
            for i in range(self.in_ptr[v], self.in_ptr[v + 1]):
                u = int(self.edge_src[self.in_edges[i]])
                if u in remaining:
                    v = u
                    break
        return v

    def _set_devices(self, devices: Sequence[Device], links: Links | None) -> None:
        devices = tuple(devices)
        check_devices(len(devices))
        check_cells(self.n_nodes, len(devices))
        for d in devices:
            if not isinstance(d, Device):
                raise ProblemError(f"devices must be Device objects, got {_short(d)}")
            for what in ("memory", "speed"):
                x = getattr(d, what)
                if isinstance(x, bool) or not isinstance(x, (int, float, np.integer, np.floating)):
                    raise ProblemError(f"device '{d.id}' has {what}={_short(x)}; it must be a number")
                if isinstance(x, int) and abs(x) > 1.7e308:
                    raise ProblemError(f"device '{d.id}' has {what}={_short(x)}; it is beyond the float range")
        self.devices = devices
        self.device_ids = [d.id for d in self.devices]
        self.device_index = {}
        for i, d in enumerate(self.devices):
            if d.id in self.device_index:
                raise ProblemError(f"duplicate device id '{d.id}'")
            self.device_index[d.id] = i
            if not (d.memory >= 0) or math.isnan(d.memory):
                raise ProblemError(f"device '{d.id}' has memory={d.memory!r}; it must be >= 0")
            if not (0 < d.speed < math.inf):
                raise ProblemError(f"device '{d.id}' has speed={d.speed!r}; it must be a finite number > 0")
        self.n_devices = k = len(self.devices)
        self.device_memory = np.array([d.memory for d in self.devices], dtype=np.float64)
        self.device_speed = np.array([d.speed for d in self.devices], dtype=np.float64)
        self.links = links
        lk = links or Links()
        _check_link(lk.latency, lk.bandwidth, "links")
        lat = np.full((k, k), float(lk.latency))
        bw = np.full((k, k), float(lk.bandwidth))
        explicit: set[tuple[int, int]] = set()
        for o in lk.pairs:
            for end in (o.src, o.dst):
                if end not in self.device_index:
                    raise ProblemError(f"link override '{o.src}' -> '{o.dst}' names unknown device '{end}'")
            a, b = self.device_index[o.src], self.device_index[o.dst]
            if a == b:
                raise ProblemError(f"link override '{o.src}' -> '{o.dst}' joins a device to itself")
            _check_link(o.latency, o.bandwidth, f"link override '{o.src}' -> '{o.dst}'")
            lat[a, b], bw[a, b] = o.latency, o.bandwidth
            explicit.add((a, b))
            if (b, a) not in explicit:
                lat[b, a], bw[b, a] = o.latency, o.bandwidth
        np.fill_diagonal(lat, 0.0)
        np.fill_diagonal(bw, math.inf)
        self.latency, self.bandwidth = lat, bw
        self._check_path_bounds()

    def _check_path_bounds(self) -> None:
        """Refuse devices and links under which a schedule's length can overflow to inf.

        Any schedule is at most the sum of all run times on the slowest device plus all
        transfers over the slowest link; when that bound is finite, no start, finish or
        makespan the evaluator computes can become inf or NaN.
        """
        if self.n_devices == 0:
            return
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            run = float(self.time.sum()) / float(self.device_speed.min())
            off = ~np.eye(self.n_devices, dtype=bool)
            comm = 0.0
            if self.n_edges and off.any():
                comm = (float(self.latency[off].max()) * self.n_edges
                        + float(self.edge_bytes.sum()) / float(self.bandwidth[off].min()))
        if not math.isfinite(run):
            raise ProblemError(f"the node times sum to {float(self.time.sum())!r} s, which on the slowest device "
                               f"(speed {float(self.device_speed.min())!r}) overflows the float range")
        if not math.isfinite(run + comm):
            raise ProblemError(f"a schedule's length can overflow the float range: the edges carry "
                               f"{float(self.edge_bytes.sum())!r} bytes in total over links as slow as "
                               f"{float(self.bandwidth[off].min())!r} bytes/s")

    def _set_constraints(self, c: Constraints) -> None:
        n, k = self.n_nodes, self.n_devices
        self.constraints = c
        self.pin = np.full(n, -1, dtype=np.int64)
        self.forbidden: dict[int, frozenset[int]] = {}
        if (c.pin or c.forbid) and k == 0:
            raise ProblemError("pin/forbid constraints name devices, but the problem has no devices")

        def node(nid: str, what: str) -> int:
            if nid not in self.node_index:
                raise ProblemError(f"{what} names unknown node '{nid}'")
            return self.node_index[nid]

        def device(did: str, what: str) -> int:
            if did not in self.device_index:
                raise ProblemError(f"{what} names unknown device '{did}'; devices: {', '.join(self.device_ids)}")
            return self.device_index[did]

        for nid, did in c.pin.items():
            self.pin[node(nid, "pin")] = device(did, f"pin of node '{nid}'")
        for nid, dids in c.forbid.items():
            v = node(nid, "forbid")
            self.forbidden[v] = frozenset(device(d, f"forbid of node '{nid}'") for d in dids)
        # Colocation groups: overlapping groups merge, so `group_of` is a partition. Groups are
        # ordered by their smallest node index, members sorted.
        self.group_of = np.full(n, -1, dtype=np.int64)
        self.groups: list[np.ndarray] = []
        if c.colocate:
            self.groups = _colocation_groups(c.colocate, self.node_index, n)
            if self.groups:  # one scatter, not one per group (10^5 groups in big graphs)
                sizes = np.fromiter(map(len, self.groups), dtype=np.int64, count=len(self.groups))
                self.group_of[np.concatenate(self.groups)] = np.repeat(np.arange(len(self.groups)), sizes)
        # Pins inside a group must agree; the group inherits the pin.
        if c.pin and self.groups:
            pinned_groups = np.unique(self.group_of[(self.pin >= 0) & (self.group_of >= 0)])
            for gi in pinned_groups.tolist():
                members = self.groups[gi]
                pins = {int(d) for d in self.pin[members] if d >= 0}
                if len(pins) > 1:
                    names = sorted(self.device_ids[d] for d in pins)
                    raise ProblemError(f"colocation group of node '{self.node_ids[members[0]]}' is pinned to "
                                       f"several devices: {', '.join(names)}")
                self.pin[members] = pins.pop()
        for v, devs in self.forbidden.items():
            if self.pin[v] >= 0 and self.pin[v] in devs:
                raise ProblemError(f"node '{self.node_ids[v]}' is pinned to device "
                                   f"'{self.device_ids[self.pin[v]]}' that it is forbidden on")
        self._allowed = None

    def _freeze(self) -> "Problem":
        """Make every array of the problem read-only (``p.time[0] = 1`` raises ValueError)."""
        for value in self.__dict__.values():
            if isinstance(value, np.ndarray):
                value.flags.writeable = False
        for arr in self.groups:  # the one list of arrays (not node_ids: 10^6 strings to walk)
            arr.flags.writeable = False
        return self

    # ------------------------------------------------------------------ derived views
    @property
    def has_devices(self) -> bool:
        return self.n_devices > 0

    def respects_constraints(self, placement: np.ndarray) -> bool:
        """Does a placement (a device index per node) keep every pin, forbid and colocation group?"""
        placement = np.asarray(placement, dtype=np.int64)
        n = self.n_nodes
        if placement.shape != (n,) or not self.allowed[np.arange(n), placement].all():
            return False
        return all(np.unique(placement[members]).size == 1 for members in self.groups)

    @property
    def allowed(self) -> np.ndarray:
        """``n x k`` boolean mask: may node ``v`` run on device ``d`` (pins, forbids and groups applied)."""
        if self._allowed is None:
            n, k = self.n_nodes, self.n_devices
            mask = np.ones((n, k), dtype=bool)
            pinned = np.flatnonzero(self.pin >= 0)
            mask[pinned] = False
            mask[pinned, self.pin[pinned]] = True
            for v, devs in self.forbidden.items():
                mask[v, list(devs)] = False
            # Only a group with a pinned or forbidden member changes (AND of all-True rows is a no-op).
            restricted = np.concatenate([pinned, np.fromiter(self.forbidden, dtype=np.int64)])
            touched = np.unique(self.group_of[restricted]) if self.groups else restricted[:0]
            for gi in touched[touched >= 0].tolist():
                members = self.groups[gi]
                mask[members] = mask[members].all(axis=0)
            mask.flags.writeable = False
            self._allowed = mask
        return self._allowed

    @property
    def has_constraints(self) -> bool:
        return bool((self.pin >= 0).any() or self.forbidden or self.groups)

    def duration(self, placement: np.ndarray) -> np.ndarray:
        """Run time of every node on its device: ``time(v) / speed(d(v))``."""
        return self.time / self.device_speed[np.asarray(placement, dtype=np.int64)]

    def transfer_times(self, placement: np.ndarray) -> np.ndarray:
        """Transfer time of every edge under a placement (0 within one device)."""
        placement = np.asarray(placement, dtype=np.int64)
        a = placement[self.edge_src]
        b = placement[self.edge_dst]
        with np.errstate(divide="ignore", invalid="ignore"):
            c = self.latency[a, b] + self.edge_bytes / self.bandwidth[a, b]
        c[a == b] = 0.0
        return c

    def transfer_time(self, edge: int, a: int, b: int) -> float:
        """Transfer time of one edge from device ``a`` to device ``b``."""
        if a == b:
            return 0.0
        return float(self.latency[a, b] + self.edge_bytes[edge] / self.bandwidth[a, b])

    def running_need(self) -> np.ndarray:
        """Bytes each node surely holds on its device while it runs, under peak.

        Its parameters, temporaries and output, plus the output of every predecessor (held
        locally or as a received copy until the node finishes). A zero-time node runs for an
        instant, at which its inputs may be freed (half-open intervals), so its inputs do not count.
        """
        inputs = np.zeros(self.n_nodes)
        np.add.at(inputs, self.edge_dst, self.output_bytes[self.edge_src])
        inputs[self.time <= 0] = 0.0
        return self.param_bytes + self.temp_bytes + self.output_bytes + inputs

    def infeasibility(self, memory_model: str = "static") -> str | None:
        """A reason why no placement can fit memory and constraints, or None if none is obvious.

        The one place where infeasibility is screened (the registry calls it before any
        solver). Checks, in order: a colocation group larger than every device it may
        use, a node with no allowed device, a node larger than every device it may use,
        the nodes pinned to one device larger than it, and total memory above total
        capacity. Under the ``peak`` model only what is held for certain counts: a
        running node holds its parameters, temporaries, output and inputs (:meth:`running_need`);
        a set of nodes on one device holds all their parameters plus its largest running
        node; all devices together hold at least every parameter. Sizes are compared
        with :func:`optpart.memory.fits`, the one memory-fit rule.
        """
        if self.n_devices == 0:
            return None
        if memory_model not in ("static", "peak"):
            raise ProblemError(f"memory_model={memory_model!r}; use 'static' or 'peak'")
        from .memory import fits
        from .units import format_bytes

        peak = memory_model == "peak"
        cap = self.device_memory
        allowed = self.allowed
        room = best_allowed(allowed, cap, -1.0)  # the largest capacity each node may use

        def held(members: np.ndarray) -> float:
            """Bytes the nodes ``members`` surely hold together on one device."""
            if not peak:
                return float(self.memory[members].sum())
            running = self.output_bytes[members] + self.temp_bytes[members]
            return float(self.param_bytes[members].sum() + running.max())

        if self.groups:
            # All groups at once (one reduction per quantity, not a loop of small sums).
            member = self.group_of >= 0
            gid = self.group_of[member]
            m = len(self.groups)
            if peak:
                totals = np.bincount(gid, weights=self.param_bytes[member], minlength=m)
                running = np.zeros(m)
                np.maximum.at(running, gid, (self.output_bytes + self.temp_bytes)[member])
                totals = totals + running
            else:
                totals = np.bincount(gid, weights=self.memory[member], minlength=m)
            first = np.fromiter((g[0] for g in self.groups), dtype=np.int64, count=m)
            bad = np.flatnonzero(~fits(totals, room[first]))
            if bad.size:
                members = self.groups[int(bad[0])]
                total = held(members)
                return (f"colocation group of node '{self.node_ids[members[0]]}' ({members.size} nodes) needs "
                        f"{format_bytes(total)} but the largest device it may use has "
                        f"{format_bytes(max(room[members[0]], 0))}")
        no_device = ~allowed.any(axis=1)
        if no_device.any():
            v = int(np.flatnonzero(no_device)[0])
            return f"node '{self.node_ids[v]}' is forbidden on every device"
        need = self.running_need() if peak else self.memory
        too_big = ~fits(need, room)
        if too_big.any():
            v = int(np.flatnonzero(too_big)[0])
            what = " while it runs (parameters, temporaries, output and inputs)" if peak else ""
            return (f"node '{self.node_ids[v]}' needs {format_bytes(need[v])}{what} but the largest device "
                    f"it may use has {format_bytes(room[v])}")
        pinned = np.flatnonzero(self.pin >= 0)
        for d in np.unique(self.pin[pinned]).tolist():
            members = pinned[self.pin[pinned] == d]
            total = held(members)
            if not fits(total, cap[d]):
                return (f"the {members.size} node(s) pinned to device '{self.device_ids[d]}' need "
                        f"{format_bytes(total)} ({memory_model}) but it has {format_bytes(cap[d])}")
        need = float((self.param_bytes if peak else self.memory).sum())
        total_cap = float(cap.sum())
        if not fits(need, total_cap):
            return f"the graph needs {format_bytes(need)} but all devices together hold {format_bytes(total_cap)}"
        return None

    # ------------------------------------------------------------------ variants
    def with_devices(
        self,
        devices: Sequence[Device] | Sequence[str] | int | None = None,
        memory: Any = math.inf,
        speed: Any = 1.0,
        links: Links | None = None,
        constraints: Constraints | None = None,
    ) -> "Problem":
        """The same graph on other devices.

        ``devices`` is a list of :class:`Device`, a list of device ids, or a count (devices
        named ``dev0``, ``dev1``...). ``memory`` and ``speed`` are one value for every
        device, a list with one value per device, or a dict ``{device id: value}`` (which
        names the devices when ``devices`` is a count or omitted); capacities may be unit
        strings (``"80GiB"``, ``"16GB"``; see :mod:`optpart.units`). Examples::

            p.with_devices(4, memory="8GiB")
            p.with_devices(memory={"gpu0": "80GiB", "gpu1": "40GiB"}, speed={"gpu0": 1, "gpu1": 0.5})
            p.with_devices(["a", "b"], memory=["80GiB", "40GiB"], speed=[1, 0.5])

        Links and constraints default to the problem's own; constraints that name a device
        missing from the new set are an error, never silently dropped.
        """
        if devices is None or isinstance(devices, (int, np.integer)) or \
                (isinstance(devices, Sequence) and not isinstance(devices, str)
                 and devices and all(isinstance(d, str) for d in devices)):
            devices = _devices_from_values(devices, memory, speed)
        elif isinstance(devices, Sequence) and not isinstance(devices, str) and \
                all(isinstance(d, Device) for d in devices):
            if not (_is_default(memory, math.inf) and _is_default(speed, 1.0)):
                raise ProblemError("give memory= and speed= either inside the Device objects or with a device "
                                   "count/ids, not both")
            devices = list(devices)
        else:
            raise ProblemError(f"devices={devices!r} must be a count, a list of device ids or a list of Device")
        q = self._copy_graph()
        q._set_devices(devices, links if links is not None else self.links)
        keep = constraints if constraints is not None else self.constraints
        missing = sorted(_constraint_devices(keep) - set(q.device_index))
        if missing:
            raise ProblemError(f"the constraints name device(s) {', '.join(map(repr, missing))}, which the new "
                               f"devices ({', '.join(q.device_ids)}) do not include")
        q._set_constraints(keep)
        return q._freeze()

    def with_memory_scale(self, scale: float) -> "Problem":
        """The same problem with every device capacity multiplied by ``scale``."""
        devs = [Device(d.id, d.memory * scale, d.speed) for d in self.devices]
        return self.with_devices(devs, links=self.links, constraints=self.constraints)

    def _copy_graph(self) -> "Problem":
        q = Problem()
        for key, value in self.__dict__.items():
            setattr(q, key, value)
        q.meta = dict(self.meta)
        return q

    def __repr__(self) -> str:
        """Sizes for large problems; every node, edge and device for small ones (readable
        counterexamples when a property test fails)."""
        if self.n_nodes > 20 or self.n_edges > 40:
            return (f"Problem(name={self.name!r}, n_nodes={self.n_nodes}, n_edges={self.n_edges}, "
                    f"n_devices={self.n_devices})")
        g = lambda x: f"{float(x):g}"
        ids = self.node_ids
        nodes = ", ".join(f"{ids[v]}(t={g(self.time[v])}, m={g(self.memory[v])})" for v in range(self.n_nodes))
        edges = ", ".join(f"{ids[s]}->{ids[t]}({g(b)} B)" for s, t, b in
                          zip(self.edge_src.tolist(), self.edge_dst.tolist(), self.edge_bytes.tolist()))
        devices = ", ".join(f"{d.id}(mem={g(d.memory)}, speed={g(d.speed)})" for d in self.devices)
        parts = [f"name={self.name!r}", f"nodes=[{nodes}]", f"edges=[{edges}]", f"devices=[{devices}]"]
        if self.links is not None:
            lk = self.links
            parts.append(f"links=(latency={g(lk.latency)}, bandwidth={g(lk.bandwidth)}"
                         + (f", {len(lk.pairs)} pair overrides)" if lk.pairs else ")"))
        if not self.constraints.is_empty():
            c = self.constraints
            parts.append(f"constraints=(pin={dict(c.pin)}, colocate={[list(x) for x in c.colocate]}, "
                         f"forbid={ {k: list(v) for k, v in c.forbid.items()} })")
        return "Problem(" + ", ".join(parts) + ")"

    # ------------------------------------------------------------------ conveniences
    def placement_from_ids(self, mapping: Mapping[str, str]) -> np.ndarray:
        """Turn ``{node id: device id}`` into an integer placement array, naming what is missing."""
        placement = np.full(self.n_nodes, -1, dtype=np.int64)
        for nid, did in mapping.items():
            if nid not in self.node_index:
                raise ProblemError(f"placement names unknown node '{nid}'")
            if did not in self.device_index:
                raise ProblemError(f"placement puts node '{nid}' on unknown device '{did}'")
            placement[self.node_index[nid]] = self.device_index[did]
        missing = np.flatnonzero(placement < 0)
        if missing.size:
            raise ProblemError(f"placement leaves node '{self.node_ids[missing[0]]}' without a device")
        return placement


def _is_kahn_order(order, src: np.ndarray, in_edges: np.ndarray, in_ptr: np.ndarray) -> bool:
    """Is ``order`` exactly what :meth:`Problem._topological_order` returns? O(V + E) numpy.

    Kahn's algorithm with a FIFO queue seeded with the sources in index order appends
    node ``w`` while it processes ``w``'s predecessor that comes *last* in the order,
    at the edge from it (out-edges in edge-id order). So the order it returns is the
    sources in index order, then every other node sorted by the key (position of its
    last predecessor, id of the edge from it). Conversely, a permutation that is
    topological and has exactly that form is that order: by induction over positions,
    the nodes appended while processing position ``j`` depend only on the first
    ``j + 1`` nodes, which agree. The keys are distinct (no duplicate edges), so "sorted"
    is "strictly increasing along the order": no sort is needed.

    Reference: A. B. Kahn, "Topological sorting of large networks", Communications of
    the ACM 5(11), 1962.
    """
    order = np.asarray(order)
    n = in_ptr.size - 1
    if order.shape != (n,) or order.dtype.kind not in "iu":
        return False
    if n == 0:
        return True
    order = order.astype(np.int64, copy=False)
    if order.min() < 0 or order.max() >= n:
        return False
    pos = np.full(n, -1, dtype=np.int64)
    pos[order] = np.arange(n)
    if (pos < 0).any():  # a repeated node leaves another without a position
        return False
    src_in = src[in_edges]           # predecessors, grouped by node (CSR of in-edges)
    dst_in = np.repeat(np.arange(n), np.diff(in_ptr))
    pe = pos[src_in]
    if (pe >= pos[dst_in]).any():    # not topological (this also proves there is no cycle)
        return False
    indeg = np.diff(in_ptr)
    inner = indeg > 0
    sources = np.flatnonzero(~inner)
    s = sources.size
    if not np.array_equal(order[:s], sources):
        return False
    if s == n:
        return True
    last_pos = np.maximum.reduceat(pe, in_ptr[:-1][inner])  # per non-source node, ascending id
    is_last = pe == np.repeat(last_pos, indeg[inner])       # one edge per node: preds are distinct
    key1 = np.zeros(n, dtype=np.int64)
    key2 = np.zeros(n, dtype=np.int64)
    key1[inner] = last_pos
    key2[inner] = in_edges[is_last]
    k1, k2 = key1[order[s:]], key2[order[s:]]
    rising = (k1[1:] > k1[:-1]) | ((k1[1:] == k1[:-1]) & (k2[1:] > k2[:-1]))
    return bool(rising.all())


def best_allowed(allowed: np.ndarray, value: np.ndarray, none: float) -> np.ndarray:
    """Per row of the ``n x k`` mask ``allowed``: the largest ``value[d]`` over its allowed
    columns, or ``none`` when no column is allowed.

    Rows allowed everywhere (most nodes) take ``value.max()``; only the other rows are
    searched, by a boolean ``argmax`` over the columns sorted by value. No ``n x k`` float
    matrix (512 MB at 10^6 nodes on 64 devices)."""
    n, k = allowed.shape
    out = np.full(n, float(value.max()) if k else none)
    rows = np.flatnonzero(~allowed.all(axis=1))
    if rows.size:
        order = np.argsort(-value, kind="stable")
        ranked = allowed[rows][:, order]
        first = ranked.argmax(axis=1)
        best = value[order][first].astype(np.float64)
        best[~ranked[np.arange(rows.size), first]] = none
        out[rows] = best
    return out


def _colocation_groups(colocate: Sequence[Sequence[str]], index: Mapping[str, int], n: int) -> list[np.ndarray]:
    """Colocation groups as sorted index arrays, overlapping groups merged, ordered by their
    smallest member; groups of one node dropped.

    Disjoint groups (the common case: one group per variable) take a vectorised path;
    overlapping ones a union-find (Tarjan 1975) over the merged nodes.
    """
    sizes = np.fromiter(map(len, colocate), dtype=np.int64, count=len(colocate))
    flat_ids = list(chain.from_iterable(colocate))
    flat = np.fromiter(map(index.get, flat_ids, repeat(-1)), dtype=np.int64, count=len(flat_ids))
    if (flat < 0).any():
        raise ProblemError(f"colocate names unknown node '{flat_ids[int(np.flatnonzero(flat < 0)[0])]}'")
    gid = np.repeat(np.arange(sizes.size), sizes)
    if flat.size == 0:
        return []
    if np.bincount(flat, minlength=n).max() <= 1:  # disjoint groups, no repeats
        keep = sizes[gid] >= 2
        flat, gid = flat[keep], gid[keep]
        if flat.size == 0:
            return []
        order = np.lexsort((flat, gid))
        flat, gid = flat[order], gid[order]
        starts = np.flatnonzero(np.r_[True, gid[1:] != gid[:-1]])
        bounds = np.r_[starts, flat.size].tolist()
        order = np.argsort(flat[starts], kind="stable").tolist()
        return [flat[bounds[i]:bounds[i + 1]] for i in order]
    parent = list(range(n))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    bounds = np.r_[0, np.cumsum(sizes)].tolist()
    members_all = flat.tolist()
    for i in range(sizes.size):
        members = members_all[bounds[i]:bounds[i + 1]]
        for v in members[1:]:
            ra, rb = find(members[0]), find(v)
            if ra != rb:
                parent[max(ra, rb)] = min(ra, rb)
    roots: dict[int, list[int]] = {}
    for v in sorted(set(members_all)):
        roots.setdefault(find(v), []).append(v)
    out = []
    for r in sorted(roots):
        if len(roots[r]) >= 2:
            out.append(np.array(roots[r], dtype=np.int64))
    return out


def _check_link(latency: float, bandwidth: float, what: str) -> None:
    if not (0 <= latency < math.inf):
        raise ProblemError(f"{what} has latency={latency!r}; it must be a finite number >= 0")
    if not (bandwidth > 0) or math.isnan(bandwidth):
        raise ProblemError(f"{what} has bandwidth={bandwidth!r}; it must be > 0 (inf for free transfers)")


def _constraint_devices(c: Constraints) -> set[str]:
    out = set(c.pin.values())
    for devs in c.forbid.values():
        out.update(devs)
    return out


_SPLIT = ("param_bytes", "output_bytes", "temp_bytes")
_NODE_KEYS = frozenset(("id", "time", "memory") + _SPLIT)


def _build_number(value: Any, who: str, key: str) -> float:
    """A number from :meth:`Problem.build` input (``"inf"`` allowed; ranges are checked later)."""
    if isinstance(value, str) and value.strip().lower() in ("inf", "infinity"):
        return math.inf
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ProblemError(f"{who} has {key}={value!r}; it must be a number")
    return float(value)


def _build_device(d: Device | Mapping[str, Any]) -> Device:
    if isinstance(d, Device):
        return d
    if not isinstance(d, Mapping) or "id" not in d or "memory" not in d:
        raise ProblemError(f"device {d!r} must be a Device or a mapping with 'id' and 'memory'")
    did = str(d["id"])
    return Device(did, _build_number(d["memory"], f"device '{did}'", "memory"),
                  _build_number(d.get("speed", 1.0), f"device '{did}'", "speed"))


def _build_links(doc: Mapping[str, Any]) -> Links:
    if not isinstance(doc, Mapping):
        raise ProblemError(f"links {doc!r} must be Links or a mapping with 'latency', 'bandwidth', 'pairs'")
    lat = _build_number(doc.get("latency", 0.0), "links", "latency")
    bw = _build_number(doc.get("bandwidth", math.inf), "links", "bandwidth")
    pairs = []
    for i, pr in enumerate(doc.get("pairs", ())):
        if isinstance(pr, LinkOverride):
            pairs.append(pr)
            continue
        if not isinstance(pr, Mapping) or "src" not in pr or "dst" not in pr:
            raise ProblemError(f"link pair at position {i} needs 'src' and 'dst', got {pr!r}")
        what = f"link '{pr['src']}' -> '{pr['dst']}'"
        pairs.append(LinkOverride(str(pr["src"]), str(pr["dst"]),
                                  _build_number(pr.get("latency", lat), what, "latency"),
                                  _build_number(pr.get("bandwidth", bw), what, "bandwidth")))
    return Links(lat, bw, tuple(pairs))


def _build_constraints(doc: Mapping[str, Any]) -> Constraints:
    if not isinstance(doc, Mapping):
        raise ProblemError(f"constraints {doc!r} must be Constraints or a mapping with 'pin', 'colocate', 'forbid'")
    unknown = sorted(set(doc) - {"pin", "colocate", "forbid"})
    if unknown:
        raise ProblemError(f"unknown constraint kind(s) {unknown}; known: pin, colocate, forbid")
    return Constraints(pin={str(k): str(v) for k, v in dict(doc.get("pin") or {}).items()},
                       colocate=tuple(tuple(str(x) for x in g) for g in doc.get("colocate") or ()),
                       forbid={str(k): tuple(str(x) for x in v) for k, v in dict(doc.get("forbid") or {}).items()})


def _is_default(value: Any, default: float) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and float(value) == default


def _devices_from_values(devices: Any, memory: Any, speed: Any) -> list[Device]:
    """Devices from a count or ids plus per-device memory/speed given as scalars, lists or dicts
    (values may be unit strings). Dict keys name the devices; every mismatch is an error."""
    from .units import parse_bytes, parse_speed

    memory = memory.tolist() if isinstance(memory, np.ndarray) else memory
    speed = speed.tolist() if isinstance(speed, np.ndarray) else speed
    names: list[str] | None = None
    if isinstance(devices, (int, np.integer)):
        if devices < 1:
            raise ProblemError(f"devices={devices} must be >= 1")
        count: int | None = int(devices)
    elif devices is None:
        count = None
    else:
        names, count = [str(d) for d in devices], len(devices)
    for what, value in (("memory", memory), ("speed", speed)):
        if isinstance(value, Mapping):
            keys = [str(k) for k in value]
            if names is None and (count is None or count == len(keys)):
                names, count = keys, len(keys)
            elif names is not None and sorted(keys) != sorted(names):
                raise ProblemError(f"{what} is given for device(s) {', '.join(map(repr, keys))} but the devices "
                                   f"are {', '.join(map(repr, names))}")
            elif names is None:
                raise ProblemError(f"{what} names {len(keys)} devices but devices={count}")
        elif isinstance(value, Sequence) and not isinstance(value, str):
            if count is None:
                count = len(value)
            elif len(value) != count:
                raise ProblemError(f"{len(value)} {what} values given for {count} devices")
    if count is None:
        raise ProblemError("give the devices: a count, a list of ids, or memory/speed per device")
    names = names or [f"dev{i}" for i in range(count)]

    def per_device(value: Any, what: str, parse) -> list[float]:
        if isinstance(value, Mapping):
            got = {str(k): v for k, v in value.items()}
            return [_parsed(parse, got[n], what, n) for n in names]
        if isinstance(value, Sequence) and not isinstance(value, str):
            return [_parsed(parse, v, what, n) for n, v in zip(names, value)]
        return [_parsed(parse, value, what, n) for n in names]

    mem = per_device(memory, "memory", parse_bytes)
    spd = per_device(speed, "speed", parse_speed)
    return [Device(n, m, s) for n, m, s in zip(names, mem, spd)]


def _parsed(parse, value: Any, what: str, device: str) -> float:
    from .errors import OptpartError

    try:
        return parse(value)
    except OptpartError as exc:
        raise ProblemError(f"device '{device}' {what}: {exc}") from None
