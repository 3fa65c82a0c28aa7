"""Hypothesis strategies for placement problems that look like real ones.

Everything is drawn from small integers, so shrinking ends in small, readable
counterexamples (few nodes, times 0-1, one device). Times, memories and bytes are
integers and link bandwidths powers of two, so every transfer time is an exact
binary fraction: exact solvers that scale times to integers stay exact.

Shapes: chain, fork-join, layered random, series-parallel, and training-like
graphs whose backward pass mirrors the forward, with each layer's weights
colocated with their update.
"""

from __future__ import annotations

import math

import numpy as np
from hypothesis import settings
from hypothesis import strategies as st

from optpart import Constraints, Device, LinkOverride, Links, Problem

__all__ = ["SHAPES", "draw_placement", "edge_case_problems", "examples", "graphs", "placements", "problems",
           "split_problems", "tiny_problems", "zero_time_problems"]

#: The example count in which tests state their own counts (the ``ci`` profile of
#: tests/conftest.py runs 16, 0.4 of it, so that the README's test command stays within CI's time).
CI_EXAMPLES = 40


def examples(ci_count: int) -> int:
    """``ci_count`` examples scaled by the loaded profile (``ci``: 0.4 of them, at least one).

    Parameters
    ----------
    ci_count : int
        How many examples the test runs under ``ci`` (tests that cost more run fewer).

    Returns
    -------
    int
        ``ci_count`` times the loaded profile's ``max_examples`` over :data:`CI_EXAMPLES`
        (tests/conftest.py), so ``HYPOTHESIS_PROFILE=thorough`` enlarges every property.
    """
    return max(1, round(ci_count * settings.default.max_examples / CI_EXAMPLES))

SHAPES = ("chain", "fork_join", "layered", "series_parallel", "training")
BANDWIDTHS = (1.0, 2.0, 4.0, 8.0, math.inf)


@st.composite
def _chain(draw, max_nodes: int):
    n = draw(st.integers(1, max_nodes))
    return n, [(i, i + 1) for i in range(n - 1)], []


@st.composite
def _fork_join(draw, max_nodes: int):
    width = draw(st.integers(1, max(1, max_nodes - 2)))
    n = width + 2
    return n, [(0, i) for i in range(1, width + 1)] + [(i, n - 1) for i in range(1, width + 1)], []


@st.composite
def _layered(draw, max_nodes: int):
    n = draw(st.integers(1, max_nodes))
    layer = [0] + draw(st.lists(st.integers(0, 1), min_size=n - 1, max_size=n - 1))
    layer = np.cumsum(layer).tolist()  # non-decreasing layer index per node
    edges = []
    for v in range(n):
        earlier = [u for u in range(v) if layer[u] < layer[v]]
        if not earlier:
            continue
        picks = draw(st.lists(st.sampled_from(earlier), min_size=1, max_size=min(3, len(earlier)), unique=True))
        edges += [(u, v) for u in sorted(picks)]
    return n, edges, []


@st.composite
def _series_parallel(draw, max_nodes: int):
    # Start from one edge s -> t and repeatedly expand an edge in series or in parallel.
    edges = [(0, 1)]
    n = 2
    while n < max_nodes and draw(st.booleans()):
        i = draw(st.integers(0, len(edges) - 1))
        u, w = edges[i]
        m = n
        n += 1
        if draw(st.booleans()):       # series: u -> m -> w
            edges[i] = (u, m)
            edges.append((m, w))
        else:                         # parallel: u -> m -> w beside u -> w
            edges += [(u, m), (m, w)]
    # relabel in a topological order so file order is natural
    order = _topological(n, edges)
    pos = {v: i for i, v in enumerate(order)}
    return n, sorted({(pos[u], pos[w]) for u, w in edges}), []


@st.composite
def _training(draw, max_nodes: int):
    layers = draw(st.integers(1, max(1, (max_nodes - 1) // 4)))
    # per layer: w_i, f_i, b_i, u_i ; plus one loss node
    ids = {}
    for i in range(layers):
        ids[f"w{i}"] = len(ids)
        ids[f"f{i}"] = len(ids)
    ids["loss"] = len(ids)
    for i in reversed(range(layers)):
        ids[f"b{i}"] = len(ids)
        ids[f"u{i}"] = len(ids)
    e = []
    for i in range(layers):
        e.append((ids[f"w{i}"], ids[f"f{i}"]))
        if i:
            e.append((ids[f"f{i - 1}"], ids[f"f{i}"]))
        e.append((ids[f"f{i}"], ids[f"b{i}"]))
        e.append((ids[f"b{i + 1}"] if i + 1 < layers else ids["loss"], ids[f"b{i}"]))
        e.append((ids[f"b{i}"], ids[f"u{i}"]))
        e.append((ids[f"w{i}"], ids[f"u{i}"]))
    e.append((ids[f"f{layers - 1}"], ids["loss"]))
    groups = [[ids[f"w{i}"], ids[f"u{i}"]] for i in range(layers)]
    return len(ids), sorted(set(e)), groups


def _topological(n: int, edges) -> list[int]:
    indeg = [0] * n
    succ: list[list[int]] = [[] for _ in range(n)]
    for u, w in edges:
        indeg[w] += 1
        succ[u].append(w)
    order = [v for v in range(n) if indeg[v] == 0]
    for v in order:
        for w in succ[v]:
            indeg[w] -= 1
            if indeg[w] == 0:
                order.append(w)
    return order


_SHAPE_STRATEGIES = {"chain": _chain, "fork_join": _fork_join, "layered": _layered,
                     "series_parallel": _series_parallel, "training": _training}


@st.composite
def graphs(draw, max_nodes: int = 10, shapes=SHAPES):
    """A DAG of one of the shapes, with small integer costs (shrinks to readable cases).

    Parameters
    ----------
    max_nodes : int
        Upper bound on the node count (a shape may stay below it).
    shapes : sequence of str
        Shapes to draw from, names of :data:`SHAPES`.

    Returns
    -------
    SearchStrategy of tuple
        ``(n, edges, groups, time, memory, bytes)``: node count, ``(src, dst)`` pairs in a
        topological numbering, colocation groups (node index lists; ``training`` colocates each
        weight with its update), integer times 0-10, memories 0-100 and edge bytes 0-16.
    """
    shape = draw(st.sampled_from(shapes))
    n, edges, groups = draw(_SHAPE_STRATEGIES[shape](max_nodes))
    time = draw(st.lists(st.integers(0, 10), min_size=n, max_size=n))
    memory = draw(st.lists(st.integers(0, 100), min_size=n, max_size=n))
    nbytes = draw(st.lists(st.integers(0, 16), min_size=len(edges), max_size=len(edges)))
    return n, edges, groups, time, memory, nbytes


@st.composite
def problems(draw, max_nodes: int = 10, max_devices: int = 8, memory: tuple[str, ...] = ("loose", "tight", "just_enough"),
             constraints: bool = True, pins: bool = True, shapes=SHAPES, per_pair_links: bool = True,
             forbids: bool | None = None, scales: bool = True):
    """A full problem: graph, 1..max_devices devices with mixed speeds and capacities,
    uniform or per-pair links, and optionally constraints.

    Parameters
    ----------
    max_nodes : int
        Upper bound on the node count (see :func:`graphs`).
    max_devices : int
        Devices are drawn from 1 to this many; speeds 0.5, 1 or 2.
    memory : tuple of str
        Memory regimes to draw from: ``loose`` (every device holds everything), ``tight``
        (capacity between total/K and about 1.3 x that, so some problems have no fit),
        ``just_enough`` (every device holds total/K plus the largest node or group: the
        heuristic's sufficient condition for finding a placement).
    constraints : bool
        Draw colocation groups (the shape's pairs and sometimes one larger group of 3-5
        unrelated nodes), and allow pins and forbids.
    pins : bool
        Draw pins, on free nodes and on members of a group (a pinned group).
    shapes : sequence of str
        Graph shapes, names of :data:`SHAPES`.
    per_pair_links : bool
        Sometimes override the latency and bandwidth of some ordered device pairs.
    forbids : bool or None
        Draw forbidden devices on free nodes (never all devices, never a node's pin);
        None follows ``pins``.
    scales : bool
        Sometimes make all times equal, and scale times by a tiny (2**-30 s) or huge
        (2**20 s) unit and memories and bytes by 2**30 (GiB-scale). Links scale with them
        and every factor is a power of two, so transfer times stay exact binary fractions.

    Returns
    -------
    SearchStrategy of optpart.Problem
        Named ``hyp-<regime>``; node ids ``v0..``, device ids ``d0..``.
    """
    n, edges, groups, time, mem, nbytes = draw(graphs(max_nodes, shapes))
    k = draw(st.integers(1, max_devices))
    speeds = draw(st.lists(st.sampled_from([1.0, 1.0, 2.0, 0.5]), min_size=k, max_size=k))
    if not constraints:
        groups = []
    elif n >= 3 and draw(st.integers(0, 3)) == 0:
        loose_nodes = [v for v in range(n) if all(v not in g for g in groups)]
        if len(loose_nodes) >= 3:
            groups = groups + [sorted(draw(st.lists(st.sampled_from(loose_nodes), min_size=3,
                                                    max_size=min(5, len(loose_nodes)), unique=True)))]
    t_unit, m_unit = 1.0, 1.0
    if scales:
        if draw(st.integers(0, 4)) == 0:
            time = [draw(st.integers(0, 3))] * n                   # equal times (maybe all zero)
        t_unit = draw(st.sampled_from([1.0, 1.0, 1.0, 2.0 ** -30, 2.0 ** 20]))
        m_unit = draw(st.sampled_from([1.0, 1.0, 2.0 ** 30]))
    total = float(sum(mem))
    group_mem = [sum(mem[v] for v in g) for g in groups]
    largest = max([max(mem, default=0)] + group_mem)
    regime = draw(st.sampled_from(memory))
    if regime == "loose":
        caps = [total + 1.0] * k
    elif regime == "just_enough":
        caps = [math.ceil(total / k) + largest] * k
    else:
        caps = [math.ceil(total / k * draw(st.integers(100, 130)) / 100) for _ in range(k)]
    devices = [Device(f"d{i}", float(caps[i]) * m_unit, speeds[i]) for i in range(k)]
    rate = m_unit / t_unit  # bytes scale by m_unit and transfer times by t_unit
    latency = float(draw(st.integers(0, 2))) * t_unit
    bandwidth = draw(st.sampled_from(BANDWIDTHS)) * rate
    pairs = []
    if per_pair_links and k > 1 and draw(st.booleans()):
        for a in range(k):
            for b in range(k):
                if a != b and draw(st.integers(0, 3)) == 0:
                    pairs.append(LinkOverride(f"d{a}", f"d{b}", float(draw(st.integers(0, 2))) * t_unit,
                                              draw(st.sampled_from(BANDWIDTHS)) * rate))
    pin: dict[str, str] = {}
    forbid: dict[str, tuple[str, ...]] = {}
    grouped = {v for g in groups for v in g}
    free = [v for v in range(n) if v not in grouped]
    if constraints and pins and k > 1 and n and draw(st.booleans()):
        if free:
            for v in draw(st.lists(st.sampled_from(free), max_size=2, unique=True)):
                pin[f"v{v}"] = f"d{draw(st.integers(0, k - 1))}"
        if groups and draw(st.booleans()):                          # a pin on a colocated node
            g = draw(st.sampled_from(groups))
            pin[f"v{draw(st.sampled_from(g))}"] = f"d{draw(st.integers(0, k - 1))}"
    if constraints and (pins if forbids is None else forbids) and k > 1 and draw(st.booleans()):
        for v in draw(st.lists(st.sampled_from(free), max_size=2, unique=True)) if free else []:
            banned = draw(st.lists(st.integers(0, k - 1), min_size=1, max_size=k - 1, unique=True))
            if f"v{v}" in pin:
                banned = [d for d in banned if pin[f"v{v}"] != f"d{d}"]
            if banned:
                forbid[f"v{v}"] = tuple(f"d{d}" for d in sorted(banned))
    return Problem.from_arrays(
        [f"v{i}" for i in range(n)], np.array(time, dtype=float) * t_unit, np.array(mem, dtype=float) * m_unit,
        [u for u, _ in edges], [w for _, w in edges], np.array(nbytes, dtype=float) * m_unit,
        devices=devices, links=Links(latency, bandwidth, tuple(pairs)),
        constraints=Constraints(pin=pin, colocate=tuple(tuple(f"v{v}" for v in g) for g in groups), forbid=forbid),
        name=f"hyp-{regime}",
    )


def tiny_problems(max_nodes: int = 6, max_devices: int = 3, **kw):
    """Problems small enough for the brute-force oracle and the exact solvers.

    Parameters
    ----------
    max_nodes, max_devices : int
        Size limits (the oracle is exponential in both).
    **kw
        Passed on to :func:`problems`.

    Returns
    -------
    SearchStrategy of optpart.Problem
    """
    return problems(max_nodes=max_nodes, max_devices=max_devices, **kw)


@st.composite
def split_problems(draw, **kw):
    """A :func:`problems` problem whose nodes give the peak split, so peak and static differ.

    Parameters
    ----------
    **kw
        Passed on to :func:`problems`.

    Returns
    -------
    SearchStrategy of optpart.Problem
        Some nodes give ``param_bytes`` (half their memory), ``output_bytes`` and
        ``temp_bytes`` (zero, small or GiB-scale); the others only ``memory`` (mixed files,
        held as parameters under peak). Named ``<base>-split``.
    """
    base = draw(problems(**kw))
    n = base.n_nodes
    unit = draw(st.sampled_from([1.0, 2.0 ** 30]))
    given = np.asarray(draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool)
    out = np.asarray(draw(st.lists(st.integers(0, 30), min_size=n, max_size=n)), dtype=float) * unit
    tmp = np.asarray(draw(st.lists(st.sampled_from([0, 0, 1, 7]), min_size=n, max_size=n)), dtype=float) * unit
    return Problem.from_arrays(
        list(base.node_ids), base.time, base.memory, base.edge_src, base.edge_dst, base.edge_bytes,
        devices=base.devices, links=base.links, constraints=base.constraints, name=f"{base.name}-split",
        param_bytes=np.where(given, base.memory // 2, np.nan), output_bytes=np.where(given, out, np.nan),
        temp_bytes=np.where(given, tmp, np.nan))


@st.composite
def placements(draw, problem: Problem):
    """A placement that honours pins, forbids and colocation (memory not guaranteed).

    Parameters
    ----------
    problem : optpart.Problem
        The problem whose ``allowed`` devices and ``groups`` the placement respects.

    Returns
    -------
    SearchStrategy of numpy.ndarray
        A device index per node (int64); a group takes its first member's device.
    """
    allowed = problem.allowed
    out = np.zeros(problem.n_nodes, dtype=np.int64)
    for v in range(problem.n_nodes):
        choices = np.flatnonzero(allowed[v]).tolist()
        out[v] = draw(st.sampled_from(choices))
    for g in problem.groups:
        out[g] = out[g[0]]
    return out


# ---------------------------------------------------------------- edge cases of time and memory
@st.composite
def edge_case_problems(draw, max_nodes: int = 9, max_devices: int = 3):
    """Problems at the edges of the model's arithmetic, for every solver and the checker.

    Starting from :func:`problems`, one or more of: a time unit of 1e-9 s or 1e6 s (times and
    transfer costs scaled together); zero-time nodes; all times equal (many equal finish
    times); chains of *views* (zero time, zero memory, zero-byte edges: reshape-like nodes)
    behind existing nodes, views behind views; and the param/output/temp split on some nodes
    (others give only ``memory``: mixed files), so that peak and static differ.

    Parameters
    ----------
    max_nodes, max_devices : int
        Size limits of the base problem (views are added on top, up to 9 more nodes).

    Returns
    -------
    SearchStrategy of optpart.Problem
        Loose or just-enough memory, no pins, uniform links; named ``edge-<unit>``.
    """
    base = draw(problems(max_nodes=max_nodes, max_devices=max_devices, pins=False, per_pair_links=False,
                         memory=("loose", "just_enough")))
    n = base.n_nodes
    unit = draw(st.sampled_from([1e-9, 1.0, 1e6]))
    time = base.time.copy()
    if draw(st.booleans()):
        time[:] = draw(st.integers(0, 3))                         # equal times (maybe all zero)
    zero = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    time[np.asarray(zero, dtype=bool)] = 0.0                      # zero-time nodes
    ids = list(base.node_ids)
    src, dst, nbytes = base.edge_src.tolist(), base.edge_dst.tolist(), base.edge_bytes.tolist()
    memory = base.memory.tolist()
    time = time.tolist()
    for v in draw(st.lists(st.integers(0, max(0, n - 1)), max_size=3)) if n else []:
        tail = v
        for _ in range(draw(st.integers(1, 3))):                  # views chained behind views
            ids.append(f"view{len(ids)}")
            time.append(0.0)
            memory.append(0.0)
            src.append(tail)
            dst.append(len(ids) - 1)
            nbytes.append(0.0)
            tail = len(ids) - 1
    m = len(ids)
    split = {}
    if draw(st.booleans()):
        out = draw(st.lists(st.integers(0, 30), min_size=m, max_size=m))
        # Mixed files: nodes without the split (NaN) hold their `memory` as parameters under peak.
        given = np.asarray(draw(st.lists(st.booleans(), min_size=m, max_size=m)), dtype=bool)
        split = {"param_bytes": np.where(given, np.asarray(memory) // 2, np.nan),
                 "output_bytes": np.where(given, np.asarray(out, dtype=float), np.nan),
                 "temp_bytes": np.where(given, 0.0, np.nan)}
    links = base.links
    return Problem.from_arrays(
        ids, np.asarray(time) * unit, memory, src, dst, nbytes,
        devices=base.devices, links=Links(links.latency * unit, links.bandwidth / unit),
        constraints=base.constraints, name=f"edge-{unit:g}", **split)


# ------------------------------------------------------------------ zero-duration and extreme times
#: Run times that stress float schedules: instants, 1e-9, 1e6, fractions without exact binary form.
EXTREME_TIMES = (0.0, 0.0, 0.0, 1e-9, 1e6, 0.1, 1.0 / 3.0, 1.0, 2.5, 7.0)


@st.composite
def zero_time_problems(draw, max_nodes: int = 14, max_devices: int = 4):
    """Problems full of zero-duration nodes (views, ``t``, ``expand``): chains of views behind
    views, times of 1e-9 and 1e6 units, many equal finish times (repeated times), speeds that
    make durations inexact (3.0), free or costly links. Memory is loose or total/K plus the
    largest node (the heuristic's sufficient condition), so every list scheduler can finish.

    Parameters
    ----------
    max_nodes, max_devices : int
        Size limits.

    Returns
    -------
    SearchStrategy of optpart.Problem
        Without constraints; named ``hyp-zero-time``.
    """
    n = draw(st.integers(1, max_nodes))
    times = draw(st.lists(st.sampled_from(EXTREME_TIMES), min_size=n, max_size=n))
    edges = set()
    for v in range(1, n):
        if draw(st.integers(0, 2)) == 0:      # a view chained behind the node just before it
            times[v] = 0.0
            edges.add((v - 1, v))
        for u in draw(st.lists(st.integers(0, v - 1), max_size=3, unique=True)):
            edges.add((u, v))
    edges = sorted(edges)
    k = draw(st.integers(1, max_devices))
    speeds = draw(st.lists(st.sampled_from([1.0, 1.0, 3.0, 0.5]), min_size=k, max_size=k))
    mem = draw(st.lists(st.integers(0, 50), min_size=n, max_size=n))
    total = float(sum(mem))
    loose = draw(st.booleans())
    cap = total + 1.0 if loose else math.ceil(total / k) + max(mem, default=0)
    devices = [Device(f"d{i}", float(cap), speeds[i]) for i in range(k)]
    nbytes = draw(st.lists(st.sampled_from([0.0, 0.0, 1.0, 3.0, 1e6]), min_size=len(edges), max_size=len(edges)))
    latency = draw(st.sampled_from([0.0, 0.0, 1e-9, 0.5]))
    bandwidth = draw(st.sampled_from([1.0, 3.0, 1e9]))
    return Problem.from_arrays(
        [f"v{i}" for i in range(n)], np.array(times, dtype=float), np.array(mem, dtype=float),
        [u for u, _ in edges], [w for _, w in edges], np.array(nbytes, dtype=float),
        devices=devices, links=Links(latency, bandwidth, ()), name="hyp-zero-time",
    )


def draw_placement(data, problem: Problem) -> np.ndarray:
    """Draw any placement of ``problem`` inside a test, unlike :func:`placements`: forbidden
    devices are not avoided (callers check ``allowed``), so refusals get exercised too.

    Parameters
    ----------
    data : hypothesis.strategies.DataObject
        The test's ``st.data()`` object to draw from.
    problem : optpart.Problem
        The problem to place.

    Returns
    -------
    numpy.ndarray
        A device index per node (int64), colocation groups kept together and pins applied.
    """
    k = problem.n_devices
    place = np.array(data.draw(st.lists(st.integers(0, k - 1), min_size=problem.n_nodes,
                                        max_size=problem.n_nodes)), dtype=np.int64)
    for g in problem.groups:
        place[g] = place[g[0]]
    pins = problem.pin >= 0
    place[pins] = problem.pin[pins]
    return place
