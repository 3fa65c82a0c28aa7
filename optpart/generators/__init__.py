"""Synthetic problems for tests, benchmarks and examples; every generator is seeded and deterministic.

* :func:`layered_dag`: random layered DAG (the usual random task-graph model), with a
  communication-to-computation ratio (CCR) setting tensor sizes against the link.
* :func:`training_graph`: a DNN-like training step: a forward chain of layers (each a
  small fork-join of operators), a loss, a backward pass mirroring the forward, and
  one parameter-update node per layer colocated with that layer's weights.
* :func:`chain` and :func:`fork_join`: the simplest shapes.
* :func:`fork_join_dag` (fork-join stages in a chain) and :func:`fork_join_graph` (one
  fork-join with communication): the exact solvers' benchmark families.
* :func:`planted_dag` (:mod:`optpart.generators.planted`): the benchmark set, random DAGs whose
  optimum is known (a planted schedule without idle time), ids and edge order shuffled.
"""

from __future__ import annotations

import numpy as np

from ..model.constraints import Constraints
from ..model.devices import Device, Links
from ..model.problem import Problem
from .planted import planted_dag

__all__ = ["layered_dag", "training_graph", "chain", "fork_join", "uniform_devices", "planted_dag",
           "large_training_graph", "fork_join_dag", "fork_join_graph"]


def uniform_devices(k: int, memory: float = float("inf"), speed: float = 1.0) -> list[Device]:
    """``k`` identical devices named ``dev0..dev{k-1}``.

    Parameters
    ----------
    k : int
        Device count.
    memory : float, optional
        Capacity of each, in bytes (unlimited by default).
    speed : float, optional
        Relative speed of each (1 is the reference device).

    Returns
    -------
    list of Device
    """
    return [Device(f"dev{i}", memory, speed) for i in range(k)]


def _links_for_ccr(time: np.ndarray, nbytes: np.ndarray, ccr: float, bandwidth: float, latency: float) -> Links:
    """Links whose mean transfer time is ``ccr`` times the mean node time."""
    mean_t = float(time.mean()) if time.size else 1.0
    if ccr <= 0 or nbytes.size == 0 or nbytes.mean() == 0:
        return Links(latency, float("inf"))
    bw = float(nbytes.mean()) / max(ccr * mean_t - latency, 1e-12)
    return Links(latency, bw if bandwidth <= 0 else bandwidth)


def layered_dag(n: int, *, layers: int | None = None, edge_prob: float = 0.3, ccr: float = 1.0,
                k: int | None = None, memory_slack: float | None = None, seed: int = 0,
                name: str | None = None) -> Problem:
    """A random layered DAG of ``n`` nodes.

    Node times are uniform in [1, 10] (seconds, as in STG), memories uniform in [1, 100] MB,
    tensor sizes uniform in [1, 100] MB; the link bandwidth is chosen so that the mean
    transfer equals ``ccr`` times the mean node time (zero latency). Every node after the
    first layer has at least one predecessor in the layer above. With ``k``, the problem
    gets ``k`` identical devices of capacity ``memory_slack * total / k`` (unlimited when
    ``memory_slack`` is None).

    Parameters
    ----------
    n : int
        Node count.
    layers : int, optional
        Layer count (default ``round(sqrt(n))``).
    edge_prob : float, optional
        Probability of each edge between consecutive layers.
    ccr : float, optional
        Communication-to-computation ratio: mean transfer time over mean node time.
    k : int, optional
        Identical devices to add; without ``k`` the problem has none (give them later with
        :meth:`Problem.with_devices`).
    memory_slack : float, optional
        Total capacity over total memory (1.5: 50% room); None: unlimited.
    seed : int, optional
        Seed of the numpy generator: equal seeds give equal problems.
    name : str, optional
        Default ``layered-{n}-s{seed}``.

    Returns
    -------
    Problem
        Static memory only (no param/output/temp split).
    """
    rng = np.random.default_rng(seed)
    layers = layers or max(1, int(round(np.sqrt(n))))
    sizes = np.full(layers, n // layers)
    sizes[: n % layers] += 1
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    src: list[int] = []
    dst: list[int] = []
    for li in range(1, layers):
        lo, hi = bounds[li - 1], bounds[li]
        for v in range(bounds[li], bounds[li + 1]):
            preds = [u for u in range(lo, hi) if rng.random() < edge_prob]
            if not preds:
                preds = [int(rng.integers(lo, hi))]
            # occasional skip connection to an earlier layer
            if li >= 2 and rng.random() < 0.1:
                u = int(rng.integers(0, bounds[li - 1]))
                if u not in preds:
                    preds.append(u)
            for u in preds:
                src.append(u)
                dst.append(v)
    return _random_cost_problem(rng, "n", n, src, dst, ccr, k, memory_slack, name or f"layered-{n}-s{seed}",
                                {"generator": "layered_dag", "seed": seed, "ccr": ccr})


def _random_cost_problem(rng: np.random.Generator, prefix: str, n: int, src: list[int], dst: list[int],
                         ccr: float, k: int | None, memory_slack: float | None, name: str,
                         meta: dict) -> Problem:
    """A DAG's shape made into a problem with the random costs the exact-solver families share:
    whole-number times in [1, 10] (an exact CP-SAT grid), memories and tensors of 1-100 MB,
    links whose mean transfer is ``ccr`` times the mean node time, and ``k`` equal devices
    holding ``memory_slack`` times an equal share of the memory (unlimited without a slack)."""
    time = rng.integers(1, 11, size=n).astype(float)
    memory = rng.integers(1, 101, size=n).astype(float) * 1e6
    nbytes = rng.integers(1, 101, size=len(src)).astype(float) * 1e6
    links = _links_for_ccr(time, nbytes, ccr, 0.0, 0.0)
    devices = None
    if k is not None:
        cap = float("inf") if memory_slack is None else memory_slack * memory.sum() / k
        devices = uniform_devices(k, cap)
    return Problem.from_arrays([f"{prefix}{i}" for i in range(n)], time, memory, src, dst, nbytes,
                               devices=devices, links=links, name=name, meta=meta)


def training_graph(n_layers: int, *, width: int = 2, ccr: float = 0.5, k: int | None = None,
                   memory_slack: float | None = None, seed: int = 0, name: str | None = None) -> Problem:
    """A DNN-like training step of ``n_layers`` layers, each ``width`` parallel operators.

    Forward layer ``i``: operators ``f{i}.{j}`` joined by ``f{i}.out``. Backward mirrors it
    (``b{i}.*``), reading the forward activations. The weights of layer ``i`` live on
    ``w{i}`` (parameters + optimizer state), which feeds forward and backward and is
    updated by ``u{i}``; ``w{i}``, ``u{i}`` and the backward weight-gradient node are
    colocated. About ``(2 * width + 5) * n_layers`` nodes.

    Parameters
    ----------
    n_layers : int
        Layer count.
    width : int, optional
        Parallel operators per layer.
    ccr : float, optional
        Mean transfer over mean operator time, which sets the link bandwidth.
    k : int, optional
        How many identical devices the problem gets (none without it).
    memory_slack : float, optional
        Capacity of all devices together over the graph's total memory; None: unlimited.
    seed : int, optional
        Seeds the operator times, memories and tensor sizes.
    name : str, optional
        Default ``training-{n_layers}x{width}-s{seed}``.

    Returns
    -------
    Problem
        With colocation constraints tying each weight to its update.
    """
    rng = np.random.default_rng(seed)
    ids: list[str] = []
    time: list[float] = []
    memory: list[float] = []
    index: dict[str, int] = {}
    src: list[int] = []
    dst: list[int] = []
    nbytes: list[float] = []
    colocate: list[tuple[str, ...]] = []

    def node(nid: str, t: float, m: float) -> None:
        index[nid] = len(ids)
        ids.append(nid)
        time.append(t)
        memory.append(m)

    def edge(a: str, b: str, size: float) -> None:
        src.append(index[a])
        dst.append(index[b])
        nbytes.append(size)

    act = lambda: float(rng.integers(4, 64)) * 2**20  # activation tensor bytes
    node("input", 0.1, 64 * 2**20)
    prev = "input"
    for i in range(n_layers):
        params = float(rng.integers(16, 256)) * 2**20
        node(f"w{i}", 0.0, 4 * params)  # weights, gradient, two Adam moments
        parts = []
        for j in range(width):
            node(f"f{i}.{j}", float(rng.uniform(0.5, 2.0)), act())
            edge(prev, f"f{i}.{j}", act())
            edge(f"w{i}", f"f{i}.{j}", params / width)
            parts.append(f"f{i}.{j}")
        node(f"f{i}.out", 0.2, act())
        for pnode in parts:
            edge(pnode, f"f{i}.out", act())
        prev = f"f{i}.out"
    node("loss", 0.2, 2**20)
    edge(prev, "loss", act())
    grad = "loss"
    for i in reversed(range(n_layers)):
        parts = []
        for j in range(width):
            node(f"b{i}.{j}", 2.0 * time[index[f"f{i}.{j}"]], act())
            edge(grad, f"b{i}.{j}", act())
            edge(f"f{i}.{j}", f"b{i}.{j}", act())  # saved activation
            parts.append(f"b{i}.{j}")
        node(f"b{i}.wgrad", 0.3, 2**20)
        node(f"b{i}.out", 0.2, act())
        for pnode in parts:
            edge(pnode, f"b{i}.out", act())
            edge(pnode, f"b{i}.wgrad", act())
        node(f"u{i}", 0.1, 2**20)
        edge(f"b{i}.wgrad", f"u{i}", act())
        edge(f"w{i}", f"u{i}", 0.0)
        colocate.append((f"w{i}", f"b{i}.wgrad", f"u{i}"))
        grad = f"b{i}.out"
    t = np.array(time)
    b = np.array(nbytes)
    links = _links_for_ccr(t, b, ccr, 0.0, 0.0)
    devices = None
    if k is not None:
        mem = np.array(memory)
        cap = float("inf") if memory_slack is None else memory_slack * mem.sum() / k
        devices = uniform_devices(k, cap)
    return Problem.from_arrays(ids, t, np.array(memory), src, dst, b, devices=devices, links=links,
                               constraints=Constraints(colocate=tuple(colocate)),
                               name=name or f"training-{n_layers}x{width}-s{seed}",
                               meta={"generator": "training_graph", "seed": seed, "ccr": ccr})


def chain(n: int, time: float = 1.0, memory: float = 1.0, nbytes: float = 0.0) -> Problem:
    """A chain ``c0 -> c1 -> ... -> c{n-1}`` of equal nodes (no devices).

    Parameters
    ----------
    n : int
        Node count.
    time : float, optional
        Seconds of each node.
    memory : float, optional
        Bytes of each node.
    nbytes : float, optional
        Bytes of each edge's tensor.

    Returns
    -------
    Problem
        Named ``chain-{n}``, without devices.
    """
    return Problem.from_arrays([f"c{i}" for i in range(n)], np.full(n, time), np.full(n, memory),
                               list(range(n - 1)), list(range(1, n)), np.full(max(n - 1, 0), nbytes),
                               name=f"chain-{n}")


def fork_join(width: int, time: float = 1.0, memory: float = 1.0, nbytes: float = 0.0) -> Problem:
    """``src`` -> ``width`` parallel nodes -> ``sink`` (no devices).

    Parameters
    ----------
    width : int
        Parallel nodes between ``src`` and ``sink``.
    time, memory : float, optional
        Seconds and bytes of every node (the two ends included).
    nbytes : float, optional
        Bytes per edge (``2 * width`` edges).

    Returns
    -------
    Problem
        Named ``fork-join-{width}``, without devices.
    """
    ids = ["src"] + [f"p{i}" for i in range(width)] + ["sink"]
    src = [0] * width + list(range(1, width + 1))
    dst = list(range(1, width + 1)) + [width + 1] * width
    return Problem.from_arrays(ids, np.full(width + 2, time), np.full(width + 2, memory), src, dst,
                               np.full(2 * width, nbytes), name=f"fork-join-{width}")


def large_training_graph(n_target: int, seed: int = 0, *, k: int | None = None, memory_slack: float = 1.5,
                         ccr: float = 0.3, name: str | None = None) -> Problem:
    """A stacked transformer-like training step of about ``n_target`` nodes, built with numpy.

    Each layer has a forward block (``in -> q,k,v -> scores -> softmax -> mix -> proj ->
    add -> norm -> mlp1 -> act -> mlp2 -> out``, 13 operators), a backward block mirroring
    it (gradients flow back along every forward edge, and each backward operator reads
    its forward operator's saved activation), six weight nodes feeding their forward and
    backward operators and six update nodes, each colocated with its weight. 38 nodes per
    layer; layers are chained (forward out -> next in; backward in -> previous out).
    With ``k``, ``k`` identical devices of capacity ``memory_slack * total / k``.

    Parameters
    ----------
    n_target : int
        Approximate node count (rounded to whole layers of 38 nodes).
    seed : int, optional
        Seeds the costs.
    k : int, optional
        With it, that many identical devices.
    memory_slack : float, optional
        Their total capacity over the total memory (1.5 by default).
    ccr : float, optional
        Communication-to-computation ratio (0.3 by default: a fast interconnect).
    name : str, optional
        Default ``large-training-{n}-s{seed}``.

    Returns
    -------
    Problem
        Built with numpy arrays throughout: 10^6 nodes in seconds.
    """
    rng = np.random.default_rng(seed)
    f_names = ["in", "q", "k", "v", "scores", "softmax", "mix", "proj", "add", "norm", "mlp1", "act", "mlp2"]
    nf = len(f_names)
    f_edges = [(0, 1), (0, 2), (0, 3), (1, 4), (2, 4), (4, 5), (5, 6), (3, 6), (6, 7), (7, 8), (0, 8),
               (8, 9), (9, 10), (10, 11), (11, 12), (9, 12)]
    weighted = [1, 2, 3, 7, 10, 12]          # forward ops with a weight
    nw = len(weighted)
    per = 2 * nf + 2 * nw                    # fwd, bwd, weights, updates
    layers = max(1, int(round(n_target / per)))
    n = layers * per
    base_time = np.array([0.2, 1, 1, 1, 1.5, 0.5, 1.5, 1, 0.2, 0.3, 2, 0.4, 2])
    loc_s, loc_d = [], []
    for a, b in f_edges:                      # forward
        loc_s.append(a); loc_d.append(b)
    for a, b in f_edges:                      # backward: grad of b -> grad of a
        loc_s.append(nf + b); loc_d.append(nf + a)
    for i in range(nf):                       # saved activations
        loc_s.append(i); loc_d.append(nf + i)
    for j, op in enumerate(weighted):         # weights feed fwd and bwd; bwd feeds update
        w, u = 2 * nf + j, 2 * nf + nw + j
        loc_s += [w, w, nf + op, w]
        loc_d += [op, nf + op, u, u]
    loc_s = np.array(loc_s)
    loc_d = np.array(loc_d)
    off = (np.arange(layers) * per)[:, None]
    src = (loc_s[None, :] + off).ravel()
    dst = (loc_d[None, :] + off).ravel()
    if layers > 1:                            # chain layers: fwd out -> next in, bwd next in -> bwd out
        lo = np.arange(layers - 1) * per
        src = np.concatenate([src, lo + nf - 1, lo + per + nf])
        dst = np.concatenate([dst, lo + per, lo + 2 * nf - 1])
    time_s = np.concatenate([base_time, 2 * base_time, np.zeros(nw), np.full(nw, 0.1)])
    time_s = np.tile(time_s, layers) * rng.uniform(0.8, 1.25, size=n) * 1e-4
    act = rng.uniform(4, 64, size=n) * 2**20
    params = rng.uniform(4, 64, size=n) * 2**20
    kind = np.tile(np.concatenate([np.zeros(nf), np.ones(nf), np.full(nw, 2), np.full(nw, 3)]), layers)
    memory = np.where(kind == 2, 4 * params, np.where(kind == 3, 2**20, act))
    nbytes = act[src]
    links = _links_for_ccr(time_s, nbytes, ccr, 0.0, 0.0)
    w_ids = (np.arange(layers)[:, None] * per + 2 * nf + np.arange(nw)[None, :]).ravel()
    ids = [f"v{i}" for i in range(n)]
    colocate = tuple((ids[w], ids[w + nw]) for w in w_ids.tolist())
    devices = None
    if k is not None:
        devices = uniform_devices(k, float(memory_slack * memory.sum() / k))
    return Problem.from_arrays(ids, time_s, memory, src, dst, nbytes, devices=devices, links=links,
                               constraints=Constraints(colocate=colocate),
                               name=name or f"large-training-{n}-s{seed}",
                               meta={"generator": "large_training_graph", "seed": seed, "layers": layers})


def fork_join_dag(n: int, *, width: int = 4, ccr: float = 1.0, k: int | None = None,
                  memory_slack: float | None = None, seed: int = 0, name: str | None = None) -> Problem:
    """Fork-join stages with communication, about ``n`` nodes: the shape of data-parallel
    branches (inception blocks, attention heads) that the exact solvers meet in DNNs.

    Each stage is a fork node, ``width`` branches of random length 1-3 and a join node
    (the join of one stage is the fork of the next). Node times are whole numbers in
    [1, 10] (an exact CP-SAT time grid), tensor sizes uniform in [1, 100] MB and the link
    bandwidth makes the mean transfer ``ccr`` times the mean node time, so a branch placed
    away from its fork pays two transfers. With ``k``: ``k`` identical devices of
    capacity ``memory_slack * total / k`` (unlimited when ``memory_slack`` is None).

    Parameters
    ----------
    n : int
        Approximate node count (the last stage is completed).
    width : int, optional
        Branches per stage.
    ccr : float, optional
        Mean transfer time over mean node time.
    k : int, optional
        Devices (identical) the problem gets; None: no devices.
    memory_slack : float, optional
        Room factor of the devices' capacity; None: unlimited capacity.
    seed : int, optional
        Seeds branch lengths, times and sizes.
    name : str, optional
        Default ``forkjoin-{n}-w{width}-s{seed}``.

    Returns
    -------
    Problem
        Integer node times in [1, 10].
    """
    rng = np.random.default_rng(seed)
    src: list[int] = []
    dst: list[int] = []
    fork, count = 0, 1
    while count < n:
        ends = []
        for _ in range(width):
            prev = fork
            for _ in range(int(rng.integers(1, 4))):
                src.append(prev)
                dst.append(count)
                prev = count
                count += 1
            ends.append(prev)
        join = count
        count += 1
        for u in ends:
            src.append(u)
            dst.append(join)
        fork = join
    return _random_cost_problem(rng, "f", count, src, dst, ccr, k, memory_slack,
                                name or f"forkjoin-{count}-w{width}-s{seed}",
                                {"generator": "fork_join_dag", "seed": seed, "ccr": ccr, "width": width})


def fork_join_graph(width: int, *, k: int | None = 4, ccr: float = 1.0, seed: int = 0,
                    name: str | None = None) -> Problem:
    """One source, ``width`` independent branches, one sink: the fork-join graphs with
    communication of ``P|fork-join, c_ij|C_max`` (Wang and Sinnen, ICPP 2022; Dutot, Fu,
    Prasad and Sinnen), where the hard choices are which branches pay their two transfers.

    Node times are whole numbers in [1, 10]; each transfer is a whole number near ``ccr``
    times a draw in [1, 10] (at least 1 when ``ccr > 0``), carried as bytes over 1 B/s
    links without latency, so every time is a whole second (an exact CP-SAT grid).
    ``k`` identical devices without a memory limit.

    Parameters
    ----------
    width : int
        Branches (the graph has ``width + 2`` nodes).
    k : int, optional
        Identical devices; None: no devices.
    ccr : float, optional
        Mean transfer over mean node time.
    seed : int, optional
        Seeds the times and transfers.
    name : str, optional
        Default ``forkjoin1-{width}-k{k}-c{ccr}-s{seed}``.

    Returns
    -------
    Problem
        Node 0 is the source, node ``width + 1`` the sink.
    """
    rng = np.random.default_rng(seed)
    n = width + 2
    time = rng.integers(1, 11, size=n).astype(float)
    draws = rng.integers(1, 11, size=2 * width).astype(float)
    transfer = np.maximum(1.0, np.rint(ccr * draws)) if ccr > 0 else np.zeros(2 * width)
    src = [0] * width + list(range(1, width + 1))
    dst = list(range(1, width + 1)) + [width + 1] * width
    devices = uniform_devices(k) if k is not None else None
    return Problem.from_arrays([f"t{i}" for i in range(n)], time, np.ones(n), src, dst, transfer,
                               devices=devices, links=Links(0.0, 1.0),
                               name=name or f"forkjoin1-{width}-k{k}-c{ccr:g}-s{seed}",
                               meta={"generator": "fork_join_graph", "seed": seed, "ccr": ccr, "width": width})
