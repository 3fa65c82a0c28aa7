"""Planted-optimum DAGs: the project's benchmark set, graphs whose optimal makespan is known.

A schedule is planted first: ``k`` identical devices each run ``n / k`` nodes back to back
from 0 to ``L`` (node times uniform in [1, 10], scaled per device so that every device's
sum is ``L``). Edges are then drawn so that the planted schedule stays valid: a tensor of
``u`` read by ``v`` arrives on ``v``'s planted device by ``v``'s planted start (at ``u``'s
finish from the same device, ``bytes(u) / bandwidth`` later from another). Every device is busy for all of
``[0, L]``, so the planted schedule meets the work bound (total work over ``k``): the
optimum is exactly ``L``, under either memory model, since the capacities are set so that
the planted placement fits (under ``peak``: with its planted schedule).

Nothing in the file tells the planted schedule: node indices, ids and the edge order are a
seeded random permutation (a list scheduler that breaks ties by index, or a reader that
follows the file order, gets no hint), devices are identical with equal capacities, and a
node does not read from its planted device predecessor unless ``chains`` asks for it.

Edge rules (``edges``), each on the same planted timeline:

* ``"near"`` (default): each node reads up to ``preds`` tensors drawn among those that arrive
  last on its planted device before its start (the ``window`` latest from other devices, and
  the nodes of its own device that finish after the first of them): near-critical edges,
  little slack, and a share of them between neighbours of one device;
* ``"long"``: drawn among every tensor that arrives by its start: long-range edges;
* ``"mixed"``: half of the draws near, half long;
* ``"forkjoin"``: one node in ``width`` is a join reading ``width`` near producers, which
  all read one common fork node (a diamond); every other node reads one near tensor;
* ``"layered"``: the horizon is cut into time layers of about ``k * width`` nodes; a node reads
  ``preds`` tensors that became available in the layer before its own;
* ``"local"``: a node reads one near tensor and one of the ``width // 2`` nodes before it on its
  planted device (no transfer needed there): locality a placement must find, as the chains of
  operators of a network, without the tie-break hint of ``chains``.

Memory: ``memory_model="static"`` gives each node a static ``memory``; ``"peak"`` gives the
liveness split (parameters on a third of the nodes, an output per node that every out-edge
carries, temporaries) and sets the capacities from the planted schedule's liveness peak.
Capacities are equal on every device: ``(1 + memory_slack)`` times the largest planted
device's need (``memory_slack=None``: unlimited). A node's output size is what each of its
out-edges carries, under both models.
"""

from __future__ import annotations

import numpy as np

from ..model.devices import Device, Links
from ..model.problem import Problem

__all__ = ["planted_dag", "EDGE_RULES"]

#: The edge rules :func:`planted_dag` knows.
EDGE_RULES = ("near", "long", "mixed", "forkjoin", "layered", "local")


def planted_dag(n: int, k: int = 4, *, ccr: float = 1.0, edges: str = "near", preds: int = 2,
                window: int = 64, width: int = 8, chains: bool = False, memory_model: str = "static",
                memory_slack: float | None = 0.05, seed: int = 0, name: str | None = None) -> Problem:
    """A random DAG whose optimal makespan is known, with shuffled ids (see the module docstring).

    Parameters
    ----------
    n : int
        Node count (at least ``k``).
    k : int, optional
        Device count of the planted schedule and of the problem.
    ccr : float, optional
        Communication-to-computation ratio: the bandwidth makes the mean transfer time
        ``ccr`` times the mean node time (0: free transfers).
    edges : {"near", "long", "mixed", "forkjoin", "layered", "local"}, optional
        The edge rule.
    preds : int, optional
        Tensors each node draws (``near``, ``long``, ``mixed``, ``layered``); duplicates merge.
    window : int, optional
        How many of the latest available tensors a near draw picks from.
    width : int, optional
        Producers of a join (``forkjoin``); nodes per device in a time layer (``layered``);
        twice the local reach (``local``).
    chains : bool, optional
        Also make every node read its planted device predecessor (which ends at its start):
        no slack anywhere, and a hint a scheduler can follow; off by default.
    memory_model : {"static", "peak"}, optional
        Static node memories, or the liveness split with capacities from the planted peak.
    memory_slack : float or None, optional
        Capacity of every device over the largest planted need (0.05: tight; None: unlimited).
    seed : int, optional
        Seed of the numpy generator (one stream for everything, the permutation included).
    name : str, optional
        Default ``planted-{edges}-{n}-k{k}-c{ccr}-s{seed}`` (``-peak`` under ``peak``).

    Returns
    -------
    Problem
        With ``meta["optimum"]`` (seconds, ``L``), ``meta["planted_placement"]`` and
        ``meta["planted_start"]`` (per node, in the problem's node order).
    """
    if edges not in EDGE_RULES:
        raise ValueError(f"edges={edges!r}; use one of {', '.join(EDGE_RULES)}")
    if memory_model not in ("static", "peak"):
        raise ValueError(f"memory_model={memory_model!r}; use 'static' or 'peak'")
    if k < 1 or n < k:
        raise ValueError(f"planted_dag needs 1 <= k <= n (n={n}, k={k})")
    rng = np.random.default_rng(seed)
    dev, t, start, prev = _planted_schedule(rng, n, k)
    fin = start + t
    out_b = rng.uniform(1e6, 1e8, size=n)
    mean_t = float(t.mean())
    bw = float(out_b.mean()) / (ccr * mean_t) if ccr > 0 else float("inf")
    avail = fin + out_b / bw                          # when the tensor of each node can be anywhere
    src, dst = _draw_edges(rng, edges, dev, start, fin, avail, preds, window, width, k)
    if chains:
        has = np.flatnonzero(prev >= 0)
        src, dst = np.concatenate([src, prev[has]]), np.concatenate([dst, has])
    key = np.unique(src * n + dst)
    src, dst = key // n, key % n
    mem = _memory(rng, n, memory_model, out_b)
    # shuffle: node i of the planted schedule becomes node perm[i]; edges in random order
    perm = rng.permutation(n)
    inv = np.empty(n, dtype=np.int64)
    inv[perm] = np.arange(n)
    e_order = rng.permutation(src.size)
    src, dst = perm[src[e_order]], perm[dst[e_order]]
    dev, t, start, out_b = dev[inv], t[inv], start[inv], out_b[inv]
    mem = {key: val[inv] for key, val in mem.items()}
    tag = f"planted-{edges}-{n}-k{k}-c{ccr:g}-s{seed}" + ("-peak" if memory_model == "peak" else "")
    meta = {"generator": "planted_dag", "edges": edges, "seed": seed, "ccr": ccr, "optimum": float(fin.max()),
            "planted_placement": dev.tolist(), "planted_start": start.tolist()}
    p = Problem.from_arrays([f"v{i}" for i in range(n)], t, mem.get("memory"), src, dst, out_b[src],
                            devices=[Device(f"dev{i}", float("inf")) for i in range(k)], links=Links(0.0, bw),
                            param_bytes=mem.get("param"), output_bytes=mem.get("output"), temp_bytes=mem.get("temp"),
                            name=name or tag, meta=meta)
    return p.with_devices(k, memory=_capacity(p, dev, start, memory_model, memory_slack))


def _planted_schedule(rng: np.random.Generator, n: int, k: int):
    """Device, time, start and device predecessor of every node (planted order: device-major)."""
    per = np.full(k, n // k)
    per[: n % k] += 1
    dev = np.repeat(np.arange(k), per)
    t = rng.uniform(1.0, 10.0, size=n)
    sums = np.bincount(dev, weights=t, minlength=k)
    t = t * (float(sums.max()) / sums)[dev]
    offs = np.concatenate([[0], np.cumsum(per)])
    start = np.zeros(n)
    prev = np.full(n, -1, dtype=np.int64)
    for d in range(k):
        seg = t[offs[d]:offs[d + 1]]
        start[offs[d]:offs[d + 1]] = np.concatenate([[0.0], np.cumsum(seg)[:-1]])
        prev[offs[d] + 1:offs[d + 1]] = np.arange(offs[d], offs[d + 1] - 1)
    return dev, t, start, prev


def _draw_edges(rng: np.random.Generator, rule: str, dev: np.ndarray, start: np.ndarray, fin: np.ndarray,
                avail: np.ndarray, preds: int, window: int, width: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """``(src, dst)`` of the edges of ``rule``: every tensor arrives on its reader's planted device by
    its planted start (from the same device at the producer's finish, from another after the transfer).

    Nodes come in planted order (device-major, by start within a device), so the nodes before
    ``v`` on its device are ``first[dev[v]] .. v - 1``, in increasing finish."""
    n = start.size
    by_avail = np.argsort(avail, kind="stable")
    avail_sorted = avail[by_avail]
    ready = np.searchsorted(avail_sorted, start, side="right")     # tensors anywhere by each start
    first = np.searchsorted(dev, dev)                                # each node's device's first node
    own = np.arange(n) - first                                       # nodes before it on its device
    big = 2.0 * float(fin.max()) + 2.0
    dev_fin = dev * big + fin                                        # increasing: device-major, then finish

    def near(readers: np.ndarray, by: np.ndarray | None = None, local_ok: bool = True):
        """One of the latest arrivals on each reader's device: the ``window`` latest from anywhere,
        and the nodes before it on its own device that finish after the first of those (``by``: by
        that time, from any device)."""
        cnt = ready[readers] if by is None else np.searchsorted(avail_sorted, by, side="right")
        w = np.minimum(cnt, max(1, window))
        if local_ok and by is None:
            lo = np.where(w > 0, avail_sorted[np.maximum(cnt - w, 0)], -1.0)
            m = np.minimum(readers - np.searchsorted(dev_fin, dev[readers] * big + lo, side="right"), max(1, window))
            m = np.clip(m, 0, own[readers])
        else:
            m = np.zeros(readers.size, dtype=np.int64)
        r = np.floor(rng.random(readers.size) * (w + m)).astype(np.int64)
        ok = w + m > 0
        src = np.where(r < m, readers - 1 - r, by_avail[np.clip(cnt - 1 - (r - m), 0, n - 1)])
        return src[ok], readers[ok]

    def far(readers: np.ndarray):
        """Any tensor that arrives on the reader's device by its start."""
        cnt, m = ready[readers], own[readers]
        r = np.floor(rng.random(readers.size) * (cnt + m)).astype(np.int64)
        ok = cnt + m > 0
        src = np.where(r < m, np.minimum(first[readers] + r, n - 1), by_avail[np.clip(r - m, 0, n - 1)])
        return src[ok], readers[ok]

    every = np.arange(n)
    pairs: list[tuple[np.ndarray, np.ndarray]] = []
    if rule in ("near", "long", "mixed"):
        for i in range(max(1, preds)):
            use_near = rule == "near" or (rule == "mixed" and i % 2 == 0)
            pairs.append(near(every) if use_near else far(every))
    elif rule == "local":   # one near tensor from another device, one of the nodes just before on its own
        pairs.append(near(every, local_ok=False))
        has = np.flatnonzero(own > 0)
        back = np.minimum(rng.integers(1, max(1, width // 2) + 1, size=has.size), own[has])
        pairs.append((has - back, has))
    elif rule == "forkjoin":
        joins = np.flatnonzero(rng.random(n) < 1.0 / max(2, width))
        pairs.append(near(np.setdiff1d(every, joins)))
        prod, reader = near(np.repeat(joins, width))
        pairs.append((prod, reader))
        # each join's producers share one fork, available anywhere by the earliest producer's start
        early = np.full(n, np.inf)
        np.minimum.at(early, reader, start[prod])
        fj = joins[np.isfinite(early[joins])]
        fork, fj = near(fj, by=early[fj])
        fork_of = np.full(n, -1, dtype=np.int64)
        fork_of[fj] = fork
        sel = fork_of[reader] >= 0
        pairs.append((fork_of[reader[sel]], prod[sel]))
    else:  # layered: tensors that became available anywhere in the time layer before the reader's
        span = float(start.max() + 1e-12) or 1.0
        layers = max(1, n // max(1, k * width))
        edge_t = np.linspace(0.0, span, layers + 1)
        layer = np.minimum(np.searchsorted(edge_t, start, side="right") - 1, layers - 1)
        lo = np.searchsorted(avail_sorted, edge_t[np.maximum(layer - 1, 0)], side="left")
        hi = np.searchsorted(avail_sorted, np.minimum(edge_t[layer], start), side="right")
        for _ in range(max(1, preds)):
            ok = hi > lo
            pick = lo + np.floor(rng.random(n) * (hi - lo)).astype(np.int64)
            pairs.append((by_avail[pick[ok]], every[ok]))
    src = np.concatenate([p[0] for p in pairs])
    dst = np.concatenate([p[1] for p in pairs])
    return src.astype(np.int64), dst.astype(np.int64)


def _memory(rng: np.random.Generator, n: int, memory_model: str, out_b: np.ndarray) -> dict:
    """Static memories, or the liveness split (parameters on a third of the nodes)."""
    if memory_model == "static":
        return {"memory": rng.uniform(1e6, 1e8, size=n)}
    param = np.where(rng.random(n) < 1.0 / 3.0, rng.uniform(1e6, 1e8, size=n), 0.0)
    return {"param": param, "output": out_b.copy(), "temp": rng.uniform(0.0, 5e7, size=n)}


def _capacity(p: Problem, dev: np.ndarray, start: np.ndarray, memory_model: str,
              slack: float | None) -> float:
    """One capacity for every device: (1 + slack) x the largest planted need."""
    if slack is None:
        return float("inf")
    from ..model.memory import peak_memory, static_memory

    if memory_model == "peak":
        need = peak_memory(p, dev, start, start + p.time)
    else:
        need = static_memory(p, dev)
    return float(need.max()) * (1.0 + float(slack))
