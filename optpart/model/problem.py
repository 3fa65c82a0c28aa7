"""The placement problem: graph, devices, links and constraints (``docs/model.md`` section 1).

A :class:`Problem` is frozen once built (no attribute can be rebound; its arrays, lists and
dicts are read-only for good, :mod:`optpart.model.frozen`; derive a new one with
:meth:`Problem.with_devices`), so figures cached by their owners (the lower bound of
:mod:`optpart.bounds`) never go stale. It keeps the graph as integer-indexed numpy arrays:

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

All validation happens at construction (the rules live beside this module: graph,
devices, constraints, records, columns), and raises :class:`ProblemError`
naming the node, edge, device or field. A problem whose memory cannot fit (a
node larger than every device it may use) is *valid*: it is an infeasible
instance, reported by :meth:`Problem.infeasibility` and by every solver as the
status ``infeasible``.

A graph read from a file may come without devices; :meth:`Problem.with_devices` adds them.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from ..errors import ProblemError
from . import records, screening
from .columns import check_sum, float_column, partial_column
from .constraints import Constraints, allowed_mask, constraint_devices, resolve_constraints
from .devices import Device, Links, check_path_bounds, device_list, device_table, link_matrices
from .frozen import FrozenDict, FrozenList, locked
from .graph import adjacency, check_edges, topological_order
from .placement import PlacementViews

__all__ = ["Problem"]

#: Every attribute of a problem (``__slots__``); the public ones are documented on the class.
_FIELDS = ('name', 'meta', 'node_ids', 'node_index', 'n_nodes', 'time', 'memory', 'has_split', 'param_bytes', 'output_bytes', 'temp_bytes', 'node_meta', 'edge_src', 'edge_dst', 'edge_bytes', 'n_edges', 'out_edges', 'out_ptr', 'in_edges', 'in_ptr', 'topo', 'topo_rank', 'devices', 'device_ids', 'device_index', 'n_devices', 'device_memory', 'device_speed', 'links', 'latency', 'bandwidth', 'constraints', 'pin', 'forbidden', 'group_of', 'groups', '_allowed', '_frozen')


class Problem(PlacementViews):
    """A placement problem. Build it with :meth:`from_arrays`, :meth:`build`,
    :func:`optpart.load` or :func:`optpart.from_networkx`.

    Attributes are numpy arrays indexed by integer node, edge and device ids;
    ``node_ids``/``device_ids`` give the string ids and ``node_index``/``device_index``
    map them back. Frozen: rebinding or deleting any attribute raises ``AttributeError``.
    """

    __slots__ = _FIELDS + ("__weakref__",)

    # ------------------------------------------------------------------ frozen
    def __init__(self) -> None:  # use the from_* constructors
        object.__setattr__(self, "_frozen", False)
        self.name = "problem"
        self.meta = FrozenDict()
        self._allowed = None

    def __setattr__(self, key: str, value: Any) -> None:
        if self._frozen:
            raise AttributeError(f"Problem is immutable: cannot set '{key}' (derive a new problem with "
                                 "with_devices(), with_memory_scale() or with_name())")
        object.__setattr__(self, key, value)

    def __delattr__(self, key: str) -> None:
        raise AttributeError(f"Problem is immutable: cannot delete '{key}'")

    def __reduce__(self):
        state = {k: getattr(self, k) for k in _FIELDS if k not in ("_frozen", "_allowed") and hasattr(self, k)}
        return (_unpickle, (state,))

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

        Parameters
        ----------
        node_ids : sequence of str
            Node ids, unique and non-empty.
        time : array_like
            Run time per node (s on a speed-1 device).
        memory : array_like, optional
            Static bytes per node (NaN: not given).
        edge_src, edge_dst : array_like of int
            Node indices of each edge's ends.
        edge_bytes : array_like, optional
            Bytes per edge (default 0).
        devices, links, constraints : optional
            The devices, links and constraints.
        param_bytes, output_bytes, temp_bytes : array_like, optional
            The peak split (NaN: not given for a node).
        node_meta : sequence of mapping, optional
            Per-node metadata.
        name, meta : optional
            The problem's name and metadata.
        topo : array_like of int, optional
            A claimed topological order, used when it is exactly Kahn's
            (:func:`optpart.model.graph.is_kahn_order`, O(V + E)); any other order is an error.
        copy : bool
            False takes ``node_ids``/``node_meta`` as they are when they are
            :class:`~optpart.model.frozen.FrozenList` (readers that built them fresh).

        Returns
        -------
        Problem
        """
        p = cls()
        p.name = str(name)
        p.meta = FrozenDict(meta or {})
        ids = node_ids if not copy and type(node_ids) is FrozenList else FrozenList(
            node_ids if not copy and type(node_ids) is list else map(str, node_ids))
        n = len(ids)
        index = FrozenDict(zip(ids, range(n)))
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
        p.time = float_column(time, n, "time", ids)
        names = ("param_bytes", "output_bytes", "temp_bytes")
        parts = [None if a is None else partial_column(a, n, nm, ids)
                 for a, nm in zip((param_bytes, output_bytes, temp_bytes), names)]
        given_split = np.zeros(n, dtype=bool)
        for part in parts:
            if part is not None:
                given_split |= part[1]
        split = [np.zeros(n) if part is None else part[0] for part in parts]
        if memory is None:
            memory = np.full(n, np.nan) if given_split.any() else np.zeros(n)
        mem, mem_given = partial_column(memory, n, "memory", ids)
        neither = ~mem_given & ~given_split
        if neither.any():
            v = int(np.flatnonzero(neither)[0])
            raise ProblemError(f"node '{ids[v]}' gives neither memory nor param_bytes/output_bytes/temp_bytes")
        p.memory = np.where(mem_given, mem, split[0] + split[1] + split[2])
        check_sum(p.memory, "node field 'memory'", lambda i: f"node '{ids[i]}'")
        p.has_split = bool(given_split.any())
        # docs/model.md section 3: a node with only `memory` holds it for the whole step.
        p.param_bytes = np.where(given_split, split[0], p.memory)
        p.output_bytes = np.where(given_split, split[1], 0.0)
        p.temp_bytes = np.where(given_split, split[2], 0.0)
        if node_meta is None:
            p.node_meta = None
        else:
            p.node_meta = node_meta if not copy and type(node_meta) is FrozenList else FrozenList(
                node_meta if not copy and type(node_meta) is list else (dict(m) for m in node_meta))
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

        Built directly (no file format involved), read by :mod:`optpart.model.records`, the
        reader the JSON format uses too, so both accept and refuse the same records.

        Parameters
        ----------
        nodes : iterable of mapping
            ``{"id", "time", "memory"}`` and/or the peak split; other keys are node
            metadata, except one that looks like a misspelt field (``tiem``): an error.
        edges : iterable of mapping
            ``{"src", "dst", "bytes"}`` (bytes default 0).
        devices : iterable of Device or mapping, optional
            :class:`Device` or ``{"id", "memory", "speed"}`` (memory may be ``"inf"``).
        links : Links or mapping, optional
            :class:`Links` or ``{"latency", "bandwidth", "pairs"}`` (unknown keys such as
            ``bandwith`` are an error, never free communication).
        constraints : Constraints or mapping, optional
            :class:`Constraints` or ``{"pin", "colocate", "forbid"}``.
        name : str
            The problem's name.
        meta : mapping, optional
            Problem metadata.

        Returns
        -------
        Problem

        Examples
        --------
        >>> p = Problem.build(
        ...     nodes=[{"id": "a", "time": 1.0, "memory": 10}, {"id": "b", "time": 2.0, "memory": 5}],
        ...     edges=[{"src": "a", "dst": "b", "bytes": 1000}],
        ...     devices=[Device("gpu0", memory=16), Device("gpu1", memory=16)])
        >>> p.n_nodes, p.n_edges, p.n_devices
        (2, 1, 2)
        """
        return cls.from_arrays(
            **records.graph_columns(nodes, edges),
            devices=None if devices is None else records.read_devices(devices),
            links=None if links is None else records.read_links(links),
            constraints=records.read_constraints(constraints), name=name, meta=meta)

    def _set_edges(self, edge_src, edge_dst, edge_bytes, topo=None) -> None:
        src, dst, eb = check_edges(edge_src, edge_dst, edge_bytes, self.node_ids)
        self.edge_src, self.edge_dst, self.edge_bytes = src, dst, eb
        self.n_edges = src.size
        adj = adjacency(src, dst, self.n_nodes)
        self.out_edges, self.out_ptr, self.in_edges, self.in_ptr = adj
        self.topo = topological_order(src, dst, adj, self.node_ids, topo)
        # Position of each node in ``topo``: the tie-break "topological position" of every
        # list scheduler and replay (one array, computed once).
        rank = np.empty(self.n_nodes, dtype=np.int64)
        rank[self.topo] = np.arange(self.n_nodes)
        self.topo_rank = rank

    def _set_devices(self, devices: Sequence[Device], links: Links | None) -> None:
        self.devices, ids, index = device_table(devices, self.n_nodes)
        self.device_ids, self.device_index = FrozenList(ids), FrozenDict(index)
        self.n_devices = len(self.devices)
        self.device_memory = np.array([d.memory for d in self.devices], dtype=np.float64)
        self.device_speed = np.array([d.speed for d in self.devices], dtype=np.float64)
        self.links = links
        self.latency, self.bandwidth = link_matrices(links, self.device_index)
        check_path_bounds(self.time, self.edge_bytes, self.device_speed, self.latency, self.bandwidth)

    def _set_constraints(self, c: Constraints) -> None:
        self.constraints = c
        pin, forbidden, group_of, groups = resolve_constraints(c, self.node_ids, self.node_index,
                                                               self.device_ids, self.device_index)
        self.pin, self.forbidden, self.group_of = pin, FrozenDict(forbidden), group_of
        self.groups = FrozenList(groups)
        self._allowed = None

    def _freeze(self) -> "Problem":
        """Make every array read-only for good and the problem frozen (``p.time[0] = 1`` and
        ``p.time.flags.writeable = True`` raise ValueError, ``p.time = ...`` AttributeError)."""
        for key in _FIELDS:
            value = getattr(self, key, None)
            if isinstance(value, np.ndarray):
                object.__setattr__(self, key, locked(value))
        # the one list of arrays (not node_ids: 10^6 strings to walk)
        object.__setattr__(self, "groups", FrozenList(locked(arr) for arr in self.groups))
        object.__setattr__(self, "_frozen", True)
        return self

    # ------------------------------------------------------------------ derived views
    @property
    def has_devices(self) -> bool:
        """True when the problem has at least one device."""
        return self.n_devices > 0

    @property
    def allowed(self) -> np.ndarray:
        """``n x k`` boolean mask: may node ``v`` run on device ``d`` (pins, forbids and groups applied)."""
        if self._allowed is None:  # computed once, on first use: a cache, not a rebinding
            object.__setattr__(self, "_allowed", locked(allowed_mask(self.n_nodes, self.n_devices, self.pin,
                                                                      self.forbidden, self.group_of, self.groups)))
        return self._allowed

    @property
    def has_constraints(self) -> bool:
        return bool((self.pin >= 0).any() or self.forbidden or self.groups)

    def running_need(self) -> np.ndarray:
        """Bytes each node surely holds on its device while it runs, under peak
        (:func:`optpart.model.screening.running_need`).

        Returns
        -------
        numpy.ndarray of float64
            Bytes per node.
        """
        return screening.running_need(self)

    def infeasibility(self, memory_model: str = "peak") -> str | None:
        """A reason why no placement can fit memory and constraints, or None if none is obvious
        (:func:`optpart.model.screening.infeasibility`, the one screen).

        Parameters
        ----------
        memory_model : str
            ``"peak"`` (the default, as everywhere) or ``"static"``.

        Returns
        -------
        str or None
            The reason, naming the node, group or device; None when no proof was found.
        """
        return screening.infeasibility(self, memory_model)

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
        strings (``p.with_devices(4, memory="8GiB")``; see :mod:`optpart.units`).

        Links and constraints default to the problem's own; constraints that name a device
        missing from the new set are an error, never silently dropped. Values follow the
        rules of :mod:`optpart.model.devices` (the ones ``--devices/--memory`` follow).

        Parameters
        ----------
        devices : int, sequence of str, sequence of Device, optional
            The count, the ids, or the devices themselves.
        memory, speed : value, optional
            Per-device values (with a count or ids only).
        links : Links, optional
            The links (default: the problem's own).
        constraints : Constraints, optional
            The constraints (default: the problem's own).

        Returns
        -------
        Problem
            A new problem sharing this one's graph arrays.
        """
        devices = device_list(devices, memory, speed)
        q = self._copy_graph()
        q._set_devices(devices, links if links is not None else self.links)
        keep = constraints if constraints is not None else self.constraints
        missing = sorted(constraint_devices(keep) - set(q.device_index))
        if missing:
            raise ProblemError(f"the constraints name device(s) {', '.join(map(repr, missing))}, which the new "
                               f"devices ({', '.join(q.device_ids)}) do not include")
        q._set_constraints(keep)
        return q._freeze()

    def with_memory_scale(self, scale: float) -> "Problem":
        """The same problem with every device capacity multiplied by ``scale``.

        Parameters
        ----------
        scale : float
            The factor (> 0).

        Returns
        -------
        Problem
        """
        devs = [Device(d.id, d.memory * scale, d.speed) for d in self.devices]
        return self.with_devices(devs, links=self.links, constraints=self.constraints)

    def with_name(self, name: str) -> "Problem":
        """The same problem under another name (its arrays are shared, not copied).

        Parameters
        ----------
        name : str
            The new name.

        Returns
        -------
        Problem
        """
        q = self._copy_graph()
        q.name = str(name)
        return q._freeze()

    def with_meta(self, **items: Any) -> "Problem":
        """The same problem with ``items`` added to its metadata (arrays shared, not copied).

        Parameters
        ----------
        **items : object
            Metadata entries to add or replace (JSON-serialisable values travel with the file).

        Returns
        -------
        Problem
            A new frozen problem; this one is unchanged.
        """
        q = self._copy_graph()
        q.meta = FrozenDict({**self.meta, **items})
        return q._freeze()

    def _copy_graph(self) -> "Problem":
        """An unfrozen shallow copy (arrays shared: they are read-only)."""
        q = Problem()
        for key in _FIELDS:
            if key != "_frozen" and hasattr(self, key):
                object.__setattr__(q, key, getattr(self, key))
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



def _unpickle(state: dict[str, Any]) -> Problem:
    """Rebuild a pickled problem (worker processes of ``optpart bench``), frozen again."""
    p = Problem()
    for key, value in state.items():
        object.__setattr__(p, key, value)
    return p._freeze()

