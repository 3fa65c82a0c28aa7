"""The MILP of ``milp`` (PuLP): a disjunctive model with communication delays (Davidovic et al.,
MISTA 2007; Venugopalan and Sinnen, IEEE TPDS 26(1), 2015).

* ``x[v, d]`` binary per allowed pair (shared inside colocation groups), ``S[v]`` start, ``M``
  the makespan, ``M >= S[v] + p(v) + tail_v`` with ``p(v) = sum_d dur(v, d) x[v, d]``;
* edge ``(u, w)``: ``S[w] >= S[u] + p(u) + c apart[e]`` with ``apart[e] >= x[u, d] - x[w, d]``
  (uniform links), or ``+ c(a, b) (x[u, a] + x[w, b] - 1)`` per device pair;
* pairs the DAG leaves unordered get an order binary and a same-device variable with big-M
  rows (pair-specific ``M``: the horizon minus a tail and a head);
* static memory rows, device and total loads below the makespan, and energetic window rows
  (:func:`~optpart.solvers.exact.bounds.window_cuts`), which lift the LP where work waits
  behind long chains.

Times are in a power-of-two unit near the horizon (:func:`time_unit`): the backends'
tolerances are absolute, so nanosecond-scale times in seconds would be all tolerance.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ...model.problem import Problem
from .bounds import heads_tails_comm, min_transfer, reachability, window_cuts
from .call import Budget, OutOfTime
from .grid import uniform_transfers


def time_unit(horizon_s: float) -> float:
    """Seconds per model time unit: the power of two at or below ``horizon_s`` (1 when not positive).

    Parameters
    ----------
    horizon_s : float
        An upper bound of the makespan.

    Returns
    -------
    float
    """
    if not (np.isfinite(horizon_s) and horizon_s > 0):
        return 1.0
    return float(2.0 ** np.floor(np.log2(horizon_s)))


@dataclass
class MilpModel:
    """The PuLP problem and the variables the warm start and decoding read."""

    prob: object
    x: dict
    S: list
    M: object
    aparts: list   # (u, w, apart) per edge with a uniform transfer
    orders: list   # (i, j, y, same or None) per unordered pair that may share a device
    horizon: float
    unit: float = 1.0


def _var(prob, name: str, low=None, up=None, cat: str = "Continuous"):
    import pulp
    if hasattr(prob, "add_variable"):  # PuLP >= 3.3
        return prob.add_variable(name, low, up, cat=cat)
    return pulp.LpVariable(name, lowBound=low, upBound=up, cat=cat)


def build(problem: Problem, dur: np.ndarray, comm: np.ndarray, horizon: float, lb: float,
          budget: Budget | None = None, reserve: float = 0.0, windows: bool = True, unit: float = 1.0) -> MilpModel:
    """The MILP for run times ``dur``, transfers ``comm``, big-M ``horizon`` and bound ``lb``, all in
    one time unit (``unit`` seconds).

    Parameters
    ----------
    problem : Problem
    dur, comm : numpy.ndarray
    horizon, lb : float
        An upper and a lower bound of the optimal makespan.
    budget : Budget, optional
    reserve : float
    windows : bool
        Add the energetic window rows.
    unit : float
        Seconds per unit (recorded for decoding).

    Returns
    -------
    MilpModel
    """
    import pulp
    n, k, allowed = problem.n_nodes, problem.n_devices, problem.allowed
    min_dur = [float(dur[v][allowed[v]].min()) for v in range(n)]
    head, tail = heads_tails_comm(problem, min_dur, min_transfer(problem, comm))
    name = re.sub(r"[^A-Za-z0-9_]", "_", problem.name)[:40] or "problem"
    prob = pulp.LpProblem(f"optpart_{name}", pulp.LpMinimize)
    group_of = problem.group_of.tolist()
    leader = [v if group_of[v] < 0 else int(problem.groups[group_of[v]][0]) for v in range(n)]
    x: dict = {}
    for v in range(n):
        for d in np.flatnonzero(allowed[v]).tolist():
            x[v, d] = x[leader[v], d] if leader[v] != v else _var(prob, f"x_{v}_{d}", cat="Binary")
    S = [_var(prob, f"S_{v}", head[v], max(head[v], horizon - tail[v] - min_dur[v])) for v in range(n)]
    M = _var(prob, "makespan", lb, horizon)
    prob += M
    mm = MilpModel(prob, x, S, M, [], [], horizon, unit)

    def p(v: int):
        vals = {float(dur[v, d]) for d in range(k) if allowed[v, d]}
        return vals.pop() if len(vals) == 1 else pulp.lpSum(float(dur[v, d]) * x[v, d] for d in range(k)
                                                             if allowed[v, d])
    for v in range(n):
        if leader[v] == v:
            prob += pulp.lpSum(x[v, d] for d in range(k) if allowed[v, d]) == 1, f"one_{v}"
        prob += M >= S[v] + p(v) + tail[v], f"end_{v}"
    _precedence(problem, mm, p, comm, leader)
    if budget is not None and budget.left() < reserve + 0.5:
        raise OutOfTime("the time limit ran out while building the model (precedence rows)")
    _order(problem, mm, p, head, tail, leader)
    cap = problem.device_memory
    for d in range(k):
        nodes = np.flatnonzero(allowed[:, d]).tolist()
        if np.isfinite(cap[d]) and float(problem.memory[nodes].sum()) > cap[d]:
            prob += pulp.lpSum(float(problem.memory[v]) * x[v, d] for v in nodes) <= float(cap[d]), f"mem_{d}"
        terms = [float(dur[v, d]) * x[v, d] for v in nodes if dur[v, d] > 0]
        if terms:
            prob += pulp.lpSum(terms) <= M, f"load_{d}"
    prob += pulp.lpSum(float(dur[v, d]) * x[v, d] for (v, d) in x) <= k * M, "work"
    if windows:
        lb_c = max(lb, max(h + d + t for h, d, t in zip(head, min_dur, tail)))
        for c, (h, t, a) in enumerate(window_cuts(head, tail, min_dur, k, lb_c)):
            for d in range(k):
                terms = [(float(dur[v, d]) - a[v]) * x[v, d] for v in range(n) if allowed[v, d] and dur[v, d] > a[v]]
                if terms:
                    prob += pulp.lpSum(terms) <= M - (h + t), f"win_{c}_{d}"
    return mm


def _precedence(problem: Problem, mm: MilpModel, p, comm: np.ndarray, leader: list) -> None:
    prob, x, S = mm.prob, mm.x, mm.S
    k, allowed = problem.n_devices, problem.allowed
    uniform = uniform_transfers(comm) if comm.size else np.ones(0, dtype=bool)
    src, dst = problem.edge_src.tolist(), problem.edge_dst.tolist()
    for e in range(problem.n_edges):
        u, w = src[e], dst[e]
        du, dw = np.flatnonzero(allowed[u]).tolist(), np.flatnonzero(allowed[w]).tolist()
        pairs = [(a, b) for a in du for b in dw if a != b]
        if leader[u] == leader[w] or not pairs or max(float(comm[e, a, b]) for a, b in pairs) == 0:
            prob += S[w] >= S[u] + p(u), f"prec_{e}"
        elif uniform[e]:
            apart = _var(prob, f"apart_{e}", 0, 1)
            mm.aparts.append((u, w, apart))
            for d in du:
                prob += apart >= x[u, d] - (x[w, d] if allowed[w, d] else 0), f"apart_{e}_{d}"
            prob += S[w] >= S[u] + p(u) + float(comm[e, pairs[0][0], pairs[0][1]]) * apart, f"prec_{e}"
        else:
            prob += S[w] >= S[u] + p(u), f"prec_{e}"
            for a, b in pairs:
                if comm[e, a, b] > 0:
                    prob += S[w] >= S[u] + p(u) + float(comm[e, a, b]) * (x[u, a] + x[w, b] - 1), \
                        f"prec_{e}_{a}_{b}"


def _order(problem: Problem, mm: MilpModel, p, head: list, tail: list, leader: list) -> None:
    prob, x, S, H = mm.prob, mm.x, mm.S, mm.horizon
    n, k, allowed = problem.n_nodes, problem.n_devices, problem.allowed
    desc = reachability(problem)
    for i in range(n):
        for j in range(i + 1, n):
            common = [d for d in range(k) if allowed[i, d] and allowed[j, d]]
            if (desc[i] >> j) & 1 or (desc[j] >> i) & 1 or not common:
                continue
            y = _var(prob, f"y_{i}_{j}", cat="Binary")
            m_ij, m_ji = max(H - tail[i] - head[j], 0.0), max(H - tail[j] - head[i], 0.0)
            same = None
            if leader[i] != leader[j]:
                same = _var(prob, f"same_{i}_{j}", 0, 1)
                for d in common:
                    prob += same >= x[i, d] + x[j, d] - 1, f"same_{i}_{j}_{d}"
            off = 0 if same is None else 1 - same
            prob += S[j] >= S[i] + p(i) - m_ij * (1 - y) - m_ij * off, f"ord_{i}_{j}"
            prob += S[i] >= S[j] + p(j) - m_ji * y - m_ji * off, f"ord_{j}_{i}"
            mm.orders.append((i, j, y, same))


def warm_values(problem: Problem, mm: MilpModel, place: np.ndarray, start: np.ndarray) -> dict:
    """Every variable's value in a schedule (placement, starts in seconds): the warm start.

    Parameters
    ----------
    problem : Problem
    mm : MilpModel
    place, start : numpy.ndarray

    Returns
    -------
    dict
        PuLP variable to value.
    """
    pl = place.tolist()
    vals: dict = {var: float(pl[v] == d) for (v, d), var in mm.x.items()}
    st = (start / mm.unit).tolist()
    fin = ((start + problem.duration(place)) / mm.unit).tolist()
    vals.update(zip(mm.S, st))
    vals[mm.M] = max(fin)
    for u, w, var in mm.aparts:
        vals[var] = float(pl[u] != pl[w])
    for i, j, y, same in mm.orders:
        vals[y] = float((st[i], fin[i]) <= (st[j], fin[j]))
        if same is not None:
            vals[same] = float(pl[i] == pl[j])
    return vals
