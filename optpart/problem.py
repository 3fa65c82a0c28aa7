"""The placement problem: graph, devices, links and constraints (``../shared/MODEL.md`` section 1).

A :class:`Problem` is immutable once built. It keeps the graph as integer-indexed
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
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from .errors import ProblemError

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
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ProblemError(f"node field '{what}' must hold numbers: {exc}") from None
    if arr.shape != (n,):
        raise ProblemError(f"node field '{what}' has {arr.size} values for {n} nodes")
    bad = ~np.isfinite(arr) if not allow_inf else np.isnan(arr)
    bad |= arr < 0
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ProblemError(f"node '{ids[i]}' has {what}={float(arr[i])!r}; it must be a finite number >= 0")
    return arr


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
    ) -> "Problem":
        """Build a problem from parallel arrays (the fast path used by every reader).

        ``edge_src``/``edge_dst`` hold node indices. ``memory`` may be left out when the
        split ``param_bytes``/``output_bytes``/``temp_bytes`` is given; it is then their sum.
        """
        p = cls()
        p.name = str(name)
        p.meta = dict(meta or {})
        ids = [str(x) for x in node_ids]
        n = len(ids)
        index: dict[str, int] = {}
        for i, nid in enumerate(ids):
            if nid in index:
                raise ProblemError(f"duplicate node id '{nid}' (nodes {index[nid]} and {i})")
            index[nid] = i
        p.node_ids = ids
        p.node_index = index
        p.n_nodes = n
        p.time = _as_float_array(time, n, "time", ids)
        split = [param_bytes, output_bytes, temp_bytes]
        names = ["param_bytes", "output_bytes", "temp_bytes"]
        arrays = [None if a is None else _as_float_array(a, n, nm, ids) for a, nm in zip(split, names)]
        p.has_split = any(a is not None for a in arrays)
        if memory is None:
            if p.has_split:
                memory = sum(a for a in arrays if a is not None)
            else:
                memory = np.zeros(n)
        p.memory = _as_float_array(memory, n, "memory", ids)
        zeros = np.zeros(n)
        if p.has_split:
            p.param_bytes, p.output_bytes, p.temp_bytes = [zeros if a is None else a for a in arrays]
        else:
            # MODEL.md section 3: a node with only `memory` holds it for the whole step.
            p.param_bytes, p.output_bytes, p.temp_bytes = p.memory, zeros, zeros
        p.node_meta = None if node_meta is None else [dict(m) for m in node_meta]
        if p.node_meta is not None and len(p.node_meta) != n:
            raise ProblemError(f"node_meta has {len(p.node_meta)} entries for {n} nodes")
        p._set_edges(edge_src, edge_dst, edge_bytes)
        p._set_devices(devices or (), links)
        p._set_constraints(constraints or Constraints())
        return p

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
        """Build a problem from dictionaries shaped like the optpart JSON format.

        >>> p = Problem.build(
        ...     nodes=[{"id": "a", "time": 1.0, "memory": 10}, {"id": "b", "time": 2.0, "memory": 5}],
        ...     edges=[{"src": "a", "dst": "b", "bytes": 1000}],
        ...     devices=[Device("gpu0", memory=16), Device("gpu1", memory=16)])
        >>> p.n_nodes, p.n_edges, p.n_devices
        (2, 1, 2)
        """
        from .formats.optpart_json import problem_from_dict

        doc: dict[str, Any] = {"format": "optpart-problem", "version": 1, "name": name,
                               "nodes": list(nodes), "edges": list(edges)}
        if devices is not None:
            doc["devices"] = [d if isinstance(d, Mapping) else
                              {"id": d.id, "memory": d.memory, "speed": d.speed} for d in devices]
        if links is not None:
            doc["links"] = links if isinstance(links, Mapping) else _links_to_dict(links)
        if constraints is not None:
            doc["constraints"] = constraints if isinstance(constraints, Mapping) else _constraints_to_dict(constraints)
        if meta:
            doc["meta"] = dict(meta)
        return problem_from_dict(doc)

    def _set_edges(self, edge_src, edge_dst, edge_bytes) -> None:
        n = self.n_nodes
        src = np.asarray(edge_src, dtype=np.int64).reshape(-1)
        dst = np.asarray(edge_dst, dtype=np.int64).reshape(-1)
        if src.shape != dst.shape:
            raise ProblemError(f"edge_src has {src.size} entries but edge_dst has {dst.size}")
        m = src.size
        if edge_bytes is None:
            eb = np.zeros(m)
        else:
            eb = np.asarray(edge_bytes, dtype=np.float64).reshape(-1)
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
        self.topo = self._topological_order()

    def _topological_order(self) -> np.ndarray:
        """Kahn's algorithm with a FIFO queue seeded in index order: deterministic, O(V + E)."""
        n = self.n_nodes
        indeg = np.diff(self.in_ptr).tolist()
        out_ptr = self.out_ptr.tolist()
        succ = self.edge_dst[self.out_edges].tolist()
        order = [v for v in range(n) if indeg[v] == 0]
        head = 0
        while head < len(order):
            v = order[head]
            head += 1
            for i in range(out_ptr[v], out_ptr[v + 1]):
                w = succ[i]
                indeg[w] -= 1
                if indeg[w] == 0:
                    order.append(w)
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
        self.devices = tuple(devices)
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
        # Colocation groups: overlapping groups merge (union-find), so `group_of` is a partition.
        parent = list(range(n)) if c.colocate else []

        def find(x: int) -> int:
            while parent[x] != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        for g in c.colocate:
            members = [node(nid, "colocate") for nid in g]
            for v in members[1:]:
                ra, rb = find(members[0]), find(v)
                if ra != rb:
                    parent[max(ra, rb)] = min(ra, rb)
        self.group_of = np.full(n, -1, dtype=np.int64)
        self.groups: list[np.ndarray] = []
        if c.colocate:
            roots: dict[int, list[int]] = {}
            for g in c.colocate:
                for nid in g:
                    v = self.node_index[nid]
                    roots.setdefault(find(v), [])
            for v in range(n):
                r = find(v)
                if r in roots:
                    roots[r].append(v)
            for r in sorted(roots):
                members = np.array(sorted(set(roots[r])), dtype=np.int64)
                if members.size < 2:
                    continue
                self.group_of[members] = len(self.groups)
                self.groups.append(members)
        # Pins inside a group must agree; the group inherits the pin.
        for gi, members in enumerate(self.groups):
            pins = {int(self.pin[v]) for v in members if self.pin[v] >= 0}
            if len(pins) > 1:
                names = sorted(self.device_ids[d] for d in pins)
                raise ProblemError(f"colocation group of node '{self.node_ids[members[0]]}' is pinned to "
                                   f"several devices: {', '.join(names)}")
            if pins:
                self.pin[members] = pins.pop()
        for v, devs in self.forbidden.items():
            if self.pin[v] >= 0 and self.pin[v] in devs:
                raise ProblemError(f"node '{self.node_ids[v]}' is pinned to device "
                                   f"'{self.device_ids[self.pin[v]]}' that it is forbidden on")
        self._allowed = None
        self._lower_bound_cache = None  # filled by optpart.evaluate.problem_lower_bound

    # ------------------------------------------------------------------ derived views
    @property
    def has_devices(self) -> bool:
        return self.n_devices > 0

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
            for members in self.groups:
                mask[members] = mask[members].all(axis=0)
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

    def infeasibility(self, memory_model: str = "static") -> str | None:
        """A reason why no placement can fit memory and constraints, or None if none is obvious.

        Checks, in order: a colocation group larger than every device it may use, a
        node with no allowed device, a node larger than every device it may use, and
        total memory above total capacity. Under the ``peak`` model only what is held
        for certain counts: a running node holds its parameters, temporaries and output
        (its static memory); a group holds all its parameters plus its largest running
        node; all devices together hold at least every parameter.
        """
        if self.n_devices == 0:
            return None
        if memory_model not in ("static", "peak"):
            raise ProblemError(f"memory_model={memory_model!r}; use 'static' or 'peak'")
        peak = memory_model == "peak"
        cap = self.device_memory
        allowed = self.allowed
        room = np.where(allowed, cap[None, :], -1.0).max(axis=1)
        for members in self.groups:
            if peak:
                running = self.output_bytes[members] + self.temp_bytes[members]
                total = float(self.param_bytes[members].sum() + running.max())
            else:
                total = float(self.memory[members].sum())
            if total > room[members[0]]:
                from .units import format_bytes
                return (f"colocation group of node '{self.node_ids[members[0]]}' ({members.size} nodes) needs "
                        f"{format_bytes(total)} but the largest device it may use has "
                        f"{format_bytes(max(room[members[0]], 0))}")
        no_device = ~allowed.any(axis=1)
        if no_device.any():
            v = int(np.flatnonzero(no_device)[0])
            return f"node '{self.node_ids[v]}' is forbidden on every device"
        too_big = self.memory > room
        if too_big.any():
            from .units import format_bytes
            v = int(np.flatnonzero(too_big)[0])
            return (f"node '{self.node_ids[v]}' needs {format_bytes(self.memory[v])} but the largest device "
                    f"it may use has {format_bytes(room[v])}")
        need = float((self.param_bytes if peak else self.memory).sum())
        total_cap = float(cap.sum())
        if need > total_cap:
            from .units import format_bytes
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
        return q

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


def _links_to_dict(links: Links) -> dict[str, Any]:
    from .formats.optpart_json import links_to_dict
    return links_to_dict(links)


def _constraints_to_dict(c: Constraints) -> dict[str, Any]:
    from .formats.optpart_json import constraints_to_dict
    return constraints_to_dict(c)


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
