"""The MILP of ``milp`` (PuLP), one function per constraint family (see :mod:`optpart.solvers.exact.milp`).

:func:`build` creates the variables (assignment binaries shared inside colocation groups,
start times, the makespan) and adds, in order: one device per node, the makespan rows,
precedence with communication delays, the order of unordered pairs that may share a
device (pair-specific big-M), static memory and load rows, and energetic window rows
(:func:`~optpart.solvers.exact._exact_common.window_cuts`: the part of every node's work
that must fall between a head and a tail fits there, on every device and in total), which lift the LP
relaxation above the work bound on graphs whose work waits behind long chains. It checks the wall-clock
budget before the quadratic family and raises
:class:`~optpart.solvers.exact._exact_common.OutOfTime` when it has run out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ...model.problem import Problem
from . import _exact_common as xc

__all__ = ["MilpModel", "build", "time_unit"]


def time_unit(horizon_s: float) -> float:
    """Seconds per MILP time unit: the power of two at or below ``horizon_s``.

    The backends' tolerances are absolute (HiGHS: 1e-9 feasibility), so a model in seconds
    of nanosecond-scale times would be all tolerance; in this unit the horizon lies in
    [1, 2) and binary fractions (2**-30 s) stay exact.

    Parameters
    ----------
    horizon_s : float
        An upper bound of the makespan in seconds.

    Returns
    -------
    float
        The unit in seconds (1.0 when ``horizon_s`` is not a positive finite number).
    """
    if not (np.isfinite(horizon_s) and horizon_s > 0):
        return 1.0
    return float(2.0 ** np.floor(np.log2(horizon_s)))


@dataclass
class MilpModel:
    """The PuLP problem and the variables that decoding and the warm start read."""

    prob: object
    x: dict
    S: list
    M: object
    aparts: list   # (u, w, apart variable) per edge with a uniform transfer
    orders: list   # (i, j, y, same or None) per unordered pair that may share a device
    horizon: float
    extra_warm: object = None  # (placement, start) -> values of formulation-specific variables
    unit: float = 1.0  # seconds per model time unit (S, M and the horizon are in units)


def build(problem: Problem, dur: np.ndarray, comm: np.ndarray, horizon: float, lb_s: float,
          budget: xc.Budget | None = None, reserve: float = 0.0, window_cuts: bool = True) -> MilpModel:
    """The MILP for durations ``dur`` (n x k), transfers ``comm`` and upper bound ``horizon``, all in
    one time unit (the caller's: :func:`time_unit` seconds keeps the numbers near 1).

    Parameters
    ----------
    problem : Problem
        The problem (DAG, memory, constraints).
    dur : ndarray
        ``n x k`` run times in the model's unit (``inf`` where not allowed).
    comm : ndarray
        ``m x k x k`` transfer times in the model's unit.
    horizon : float
        An upper bound of the optimal makespan (the big-M), same unit.
    lb_s : float
        A valid lower bound of the makespan, same unit (the makespan variable's floor).
    budget : Budget, optional
        Wall-clock budget; building stops with ``OutOfTime`` ``reserve`` seconds before its end.
    reserve : float
        Seconds kept for solving and decoding.
    window_cuts : bool
        Add the energetic window rows.

    Returns
    -------
    MilpModel
        The PuLP problem and its variables (placement, starts, makespan, orders).
    """
    import pulp

    n, k = problem.n_nodes, problem.n_devices
    allowed = problem.allowed
    min_dur = [float(dur[v][allowed[v]].min()) for v in range(n)]
    head, tail = xc.heads_tails_comm(problem, min_dur, xc.min_transfer(problem, comm))
    prob = pulp.LpProblem(f"optpart_{_safe(problem.name)}", pulp.LpMinimize)
    group_of = problem.group_of.tolist()
    leader = [v if group_of[v] < 0 else int(problem.groups[group_of[v]][0]) for v in range(n)]
    x: dict = {}
    for v in range(n):
        for d in range(k):
            if allowed[v, d]:
                x[v, d] = x[leader[v], d] if leader[v] != v else _var(prob, f"x_{v}_{d}", cat="Binary")
    S = [_var(prob, f"S_{v}", lowBound=head[v], upBound=max(head[v], horizon - tail[v] - min_dur[v]))
         for v in range(n)]
    M = _var(prob, "makespan", lowBound=lb_s, upBound=horizon)
    prob += M

    def p(v: int):
        """Run time of ``v``: a constant, or linear in its assignment."""
        vals = {float(dur[v, d]) for d in range(k) if allowed[v, d]}
        if len(vals) == 1:
            return vals.pop()
        return pulp.lpSum(float(dur[v, d]) * x[v, d] for d in range(k) if allowed[v, d])

    mm = MilpModel(prob, x, S, M, [], [], horizon)
    # Each node on exactly one device; the makespan covers every finish plus its tail.
    for v in range(n):
        if leader[v] == v:
            prob += pulp.lpSum(x[v, d] for d in range(k) if allowed[v, d]) == 1, f"one_{v}"
        prob += M >= S[v] + p(v) + tail[v], f"end_{v}"
    _add_precedence(problem, mm, p, comm, leader)
    if budget is not None and budget.left() < reserve + 0.5:
        raise xc.OutOfTime("the time limit ran out while building the model (precedence rows)")
    _add_order(problem, mm, p, head, tail, leader)
    add_memory_and_loads(problem, mm.prob, mm.x, mm.M, dur)
    if window_cuts:
        lb_c = max(lb_s, max(h + d + t for h, d, t in zip(head, min_dur, tail)))
        _add_windows(problem, mm, dur, xc.window_cuts(head, tail, min_dur, k, lb_c))
    return mm


def _add_precedence(problem: Problem, mm: MilpModel, p, comm: np.ndarray, leader: list) -> None:
    """``S[w] >= S[u] + p(u)``, plus ``c apart[e]`` (uniform links) or per-pair rows
    ``c(a, b) (x[u, a] + x[w, b] - 1)``, which bind exactly when ``u`` is on ``a`` and ``w`` on ``b``."""
    prob, x, S = mm.prob, mm.x, mm.S
    k, allowed = problem.n_devices, problem.allowed
    uniform = xc.uniform_transfers(comm) if comm.size else np.ones(0, dtype=bool)
    src, dst = problem.edge_src.tolist(), problem.edge_dst.tolist()
    for e in range(problem.n_edges):
        u, w = src[e], dst[e]
        du = [d for d in range(k) if allowed[u, d]]
        dw = [d for d in range(k) if allowed[w, d]]
        pairs = [(a, b) for a in du for b in dw if a != b]
        if leader[u] == leader[w] or not pairs or max(float(comm[e, a, b]) for a, b in pairs) == 0:
            prob += S[w] >= S[u] + p(u), f"prec_{e}"
        elif uniform[e]:
            c = float(comm[e, pairs[0][0], pairs[0][1]])
            apart = _var(prob, f"apart_{e}", lowBound=0, upBound=1)
            mm.aparts.append((u, w, apart))
            for d in du:
                prob += apart >= x[u, d] - (x[w, d] if allowed[w, d] else 0), f"apart_{e}_{d}"
            prob += S[w] >= S[u] + p(u) + c * apart, f"prec_{e}"
        else:
            prob += S[w] >= S[u] + p(u), f"prec_{e}"
            for a, b in pairs:
                c = float(comm[e, a, b])
                if c > 0:
                    prob += S[w] >= S[u] + p(u) + c * (x[u, a] + x[w, b] - 1), f"prec_{e}_{a}_{b}"


def _add_order(problem: Problem, mm: MilpModel, p, head: list, tail: list, leader: list) -> None:
    """Unordered pairs (no path between them) that may share a device never overlap there:
    an order binary ``y`` and ``same >= x[i, d] + x[j, d] - 1``, with pair-specific big-M
    ``H - tail_i - head_j`` (``S_i + p_i <= H - tail_i`` by the end rows, ``S_j >= head_j``)."""
    prob, x, S, H = mm.prob, mm.x, mm.S, mm.horizon
    n, k, allowed = problem.n_nodes, problem.n_devices, problem.allowed
    desc = xc.reachability(problem)
    for i in range(n):
        for j in range(i + 1, n):
            if (desc[i] >> j) & 1 or (desc[j] >> i) & 1:
                continue
            common = [d for d in range(k) if allowed[i, d] and allowed[j, d]]
            if not common:
                continue
            y = _var(prob, f"y_{i}_{j}", cat="Binary")
            m_ij = max(H - tail[i] - head[j], 0.0)
            m_ji = max(H - tail[j] - head[i], 0.0)
            if leader[i] == leader[j]:
                prob += S[j] >= S[i] + p(i) - m_ij * (1 - y), f"ord_{i}_{j}"
                prob += S[i] >= S[j] + p(j) - m_ji * y, f"ord_{j}_{i}"
                same = None
            else:
                same = _var(prob, f"same_{i}_{j}", lowBound=0, upBound=1)
                for d in common:
                    prob += same >= x[i, d] + x[j, d] - 1, f"same_{i}_{j}_{d}"
                prob += S[j] >= S[i] + p(i) - m_ij * (1 - y) - m_ij * (1 - same), f"ord_{i}_{j}"
                prob += S[i] >= S[j] + p(j) - m_ji * y - m_ji * (1 - same), f"ord_{j}_{i}"
            mm.orders.append((i, j, y, same))


def add_memory_and_loads(problem: Problem, prob, x: dict, M, dur: np.ndarray, work_row: bool = True) -> None:
    """Static memory rows where they can bind, each device's load (and the total load) below the makespan.

    Parameters
    ----------
    problem : Problem
        The problem.
    prob : pulp.LpProblem
        The model the rows go into.
    x : dict
        ``x[v, d]``: the assignment binaries of allowed pairs.
    M : pulp.LpVariable
        The makespan.
    dur : ndarray
        ``n x k`` run times in the model's time unit.
    work_row : bool
        Also add ``sum of all work <= k M``.
    """
    import pulp
    n, k, allowed = problem.n_nodes, problem.n_devices, problem.allowed
    cap = problem.device_memory
    for d in range(k):
        nodes = [v for v in range(n) if allowed[v, d]]
        if np.isfinite(cap[d]) and float(problem.memory[nodes].sum()) > cap[d]:
            prob += pulp.lpSum(float(problem.memory[v]) * x[v, d] for v in nodes) <= float(cap[d]), f"mem_{d}"
        terms = [float(dur[v, d]) * x[v, d] for v in nodes if dur[v, d] > 0]
        if terms:
            prob += pulp.lpSum(terms) <= M, f"load_{d}"
    if work_row:
        prob += pulp.lpSum(float(dur[v, d]) * x[v, d] for (v, d) in x) <= k * M, "work"


def _add_windows(problem: Problem, mm: MilpModel, dur: np.ndarray, cuts: list) -> None:
    """Per window ``(h, t, a)``: ``sum_v max(0, dur(v, d) - a_v) x[v, d] <= M - h - t`` on every
    device (valid for every schedule, see :func:`~optpart.solvers.exact._exact_common.window_cuts`;
    their sum over the devices, the total-work form, is implied and not added)."""
    import pulp
    prob, x, M = mm.prob, mm.x, mm.M
    n, k, allowed = problem.n_nodes, problem.n_devices, problem.allowed
    for c, (h, t, a) in enumerate(cuts):
        for d in range(k):
            terms = [(float(dur[v, d]) - a[v]) * x[v, d] for v in range(n)
                     if allowed[v, d] and dur[v, d] > a[v]]
            if terms:
                prob += pulp.lpSum(terms) <= M - (h + t), f"win_{c}_{d}"


def _var(prob, name: str, lowBound=None, upBound=None, cat: str = "Continuous"):  # noqa: N803 - PuLP names
    """A variable attached to ``prob`` (PuLP >= 3.3 API, with the older one as fallback)."""
    import pulp
    if hasattr(prob, "add_variable"):
        return prob.add_variable(name, lowBound, upBound, cat=cat)
    return pulp.LpVariable(name, lowBound=lowBound, upBound=upBound, cat=cat)


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", name)[:40] or "problem"
