"""A time-indexed MILP for ``milp`` (option ``formulation="time-indexed"``).

Where the big-M model of :mod:`optpart.solvers.exact.milp_model` relaxes to the
communication-aware critical path (its order and transfer rows vanish when the LP
spreads every node over all devices), a time-indexed model states *when* every node
starts, so its relaxation keeps devices busy one unit at a time and transfers tied to
where the predecessor ran. It needs whole time units (an exact
:func:`~optpart.solvers.exact._exact_common.time_grid`: integer run times and transfers, as in
STG graphs or the benchmark generators with free links) and a small horizon.

Variables, on the grid of ``1 / scale`` s, for every allowed (node ``v``, device ``d``)
and start ``t`` in ``[head_v, H - tail_v - p(v, d)]`` (``H``: the incumbent's makespan;
heads and tails count communication, see
:func:`~optpart.solvers.exact._exact_common.heads_tails_comm`):

* ``z[v, d, t]`` binary: ``v`` starts on ``d`` at ``t``; ``Z[v, d, t] = sum_{s <= t} z[v, d, s]``
  (continuous, by a running sum).
* One start per node; ``x[v, d] = Z[v, d, last]`` (shared inside colocation groups);
  ``S[v] = sum t z[v, d, t] / scale`` in seconds; the makespan ``M >= S[v] + p(v) + tail_v``.
* One node at a time: ``sum_v Z[v, d, t] - Z[v, d, t - p(v, d)] <= 1`` for every ``d``, ``t``;
  a zero-time node starting at ``t`` is not inside a run (started in ``[t - p + 1, t - 1]``).
* Edge ``(u, w)``, device ``d``, time ``t``: ``w`` has started on ``d`` by ``t`` only if ``u``
  finished on ``d`` by ``t``, or on another device ``e`` early enough for the transfer:
  ``Z[w, d, t] <= Z[u, d, t - p(u, d)] + sum_{e != d} Z[u, e, t - p(u, e) - c(e, d)]``
  (the strong, "aggregated by time" form of precedence with delays).
* Static memory and load rows as in the big-M model.

Every row holds for every schedule with integer starts, and on an exact grid an optimal
schedule has integer starts (a semi-active schedule starts at sums of run and transfer
times), so the model is exact. Size: about ``n k H`` binaries; :func:`check_size`
refuses (one line, :class:`~optpart.errors.SolverError`) an inexact grid or more than
``MAX_BINARIES``.

References: M. Queyranne, A. S. Schulz, "Polyhedral approaches to machine scheduling",
TU Berlin report 408 (1994) (time-indexed formulations); S. Venugopalan, O. Sinnen,
"ILP formulations for optimal task scheduling with communication delays on parallel
systems", IEEE TPDS 26(1), 2015.
"""

from __future__ import annotations

import math

import numpy as np

from ...errors import SolverError
from ...model.problem import Problem
from . import _exact_common as xc
from .milp_model import MilpModel, _safe, _var, add_memory_and_loads

__all__ = ["MAX_BINARIES", "TimeIndexedSize", "build", "check_size"]

#: The most start binaries (node x device x time unit) the time-indexed model may hold.
MAX_BINARIES = 50_000


class TimeIndexedSize:
    """Grid, horizon in units, heads and tails in units, and the number of start binaries."""

    def __init__(self, scale: float, horizon: int, head: list, tail: list, dur_u: np.ndarray,
                 comm_u: np.ndarray, binaries: int) -> None:
        self.scale, self.horizon, self.head, self.tail = scale, horizon, head, tail
        self.dur_u, self.comm_u, self.binaries = dur_u, comm_u, binaries

    def terms(self, problem: Problem) -> int:
        """Variables plus constraint terms, about: three per binary (z, Z, running sum), two per
        binary in the one-at-a-time rows, ``k + 1`` per (edge, device, time) precedence row.

        Parameters
        ----------
        problem : Problem
            The problem this size was computed for (its edge count).

        Returns
        -------
        int
            The estimate the build-time guard compares with ``MAX_TERMS``.
        """
        k = problem.n_devices
        return 6 * self.binaries + problem.n_edges * k * (self.horizon + 1) * (k + 2)


def check_size(problem: Problem, dur: np.ndarray, comm: np.ndarray, horizon_s: float) -> TimeIndexedSize:
    """The grid and size of the time-indexed model, or :class:`SolverError` naming why it cannot be built.

    Parameters
    ----------
    problem : Problem
        The problem.
    dur, comm : ndarray
        Run times (``n x k``) and transfer times (``m x k x k``) in seconds.
    horizon_s : float
        The time horizon in seconds (a known makespan keeps it short).

    Returns
    -------
    TimeIndexedSize
        Grid scale, horizon in units, heads/tails and the number of start binaries.
    """
    n, k = problem.n_nodes, problem.n_devices
    allowed = problem.allowed
    grid = xc.time_grid(dur, comm, horizon_s=max(horizon_s, 1e-9), upper_s=horizon_s)
    if not grid.exact:
        raise SolverError("milp: formulation='time-indexed' needs whole time units (run times and transfers "
                          "multiples of 1/s for s in 1, 2, 4, 5, ..., 1e6); not all of this problem's are: use "
                          "formulation='big-m'")
    scale = grid.scale
    dur_u = np.where(allowed, grid.up(np.where(allowed, dur, 0.0)), 0)
    comm_u = grid.up(comm) if comm.size else np.zeros((0, k, k), dtype=np.int64)
    horizon = math.floor(horizon_s * scale + 1e-6)
    min_dur = [int(dur_u[v][allowed[v]].min()) for v in range(n)]
    head, tail = xc.heads_tails_comm(problem, min_dur, xc.min_transfer(problem, comm_u))
    head = [math.ceil(h - 1e-6) for h in head]
    tail = [math.ceil(t - 1e-6) for t in tail]
    binaries = sum(max(0, horizon - tail[v] - int(dur_u[v, d]) - head[v] + 1)
                   for v in range(n) for d in range(k) if allowed[v, d])
    if binaries > MAX_BINARIES:
        raise SolverError(f"milp: formulation='time-indexed' would need {binaries:,} start binaries (horizon "
                          f"{horizon:,} units of 1/{scale:g} s x {n} nodes x {k} devices), more than "
                          f"{MAX_BINARIES:,}: use formulation='big-m'")
    return TimeIndexedSize(scale, horizon, head, tail, dur_u, comm_u, binaries)


def build(problem: Problem, dur: np.ndarray, size: TimeIndexedSize, lb_s: float,
          budget: xc.Budget | None = None, reserve: float = 0.0) -> MilpModel:
    """The time-indexed MILP (seconds for ``S`` and ``M``, units for the index ``t``).

    Parameters
    ----------
    problem : Problem
        The problem.
    dur : ndarray
        Run times in seconds (``n x k``).
    size : TimeIndexedSize
        From :func:`check_size` (the grid and the start windows).
    lb_s : float
        A valid lower bound of the makespan in seconds.
    budget : Budget, optional
        Wall-clock budget of the build (``OutOfTime`` ``reserve`` seconds before its end).
    reserve : float
        Seconds kept for solving.

    Returns
    -------
    MilpModel
        The PuLP problem and its variables.
    """
    import pulp

    n, k = problem.n_nodes, problem.n_devices
    allowed = problem.allowed
    H, scale, head, tail, dur_u, comm_u = size.horizon, size.scale, size.head, size.tail, size.dur_u, size.comm_u
    prob = pulp.LpProblem(f"optpart_ti_{_safe(problem.name)}", pulp.LpMinimize)
    group_of = problem.group_of.tolist()
    leader = [v if group_of[v] < 0 else int(problem.groups[group_of[v]][0]) for v in range(n)]
    M = _var(prob, "makespan", lowBound=lb_s, upBound=H / scale)
    prob += M
    z: dict = {}       # (v, d) -> list of (t, binary)
    cum: dict = {}     # (v, d) -> (first t, list of running sums Z[first..last])
    x: dict = {}
    for v in range(n):
        for d in range(k):
            if not allowed[v, d]:
                continue
            lo, hi = head[v], H - tail[v] - int(dur_u[v, d])
            ts = list(range(lo, hi + 1))
            z[v, d] = [(t, _var(prob, f"z_{v}_{d}_{t}", cat="Binary")) for t in ts]
            sums = []
            for i, (t, var) in enumerate(z[v, d]):
                zz = _var(prob, f"Z_{v}_{d}_{t}", lowBound=0, upBound=1)
                prob += (zz == var) if i == 0 else (zz == sums[-1] + var), f"cum_{v}_{d}_{t}"
                sums.append(zz)
            cum[v, d] = (lo, sums)
            xv = _var(prob, f"x_{v}_{d}", lowBound=0, upBound=1)
            if sums:
                prob += xv == sums[-1], f"x_{v}_{d}"
            else:  # no start fits before the horizon on this device
                xv.upBound = 0
            x[v, d] = xv
    if budget is not None and budget.left() < reserve + 0.5:
        raise xc.OutOfTime("the time limit ran out while building the model (time-indexed starts)")

    def Z(v: int, d: int, t: int):
        """``Z[v, d, t]``: None (zero) before the first start, the last running sum after the last."""
        lo, sums = cum[v, d]
        if not sums or t < lo:
            return None
        return sums[min(t - lo, len(sums) - 1)]

    S = []
    for v in range(n):
        devs = [d for d in range(k) if allowed[v, d]]
        if leader[v] == v:
            prob += pulp.lpSum(x[v, d] for d in devs) == 1, f"one_{v}"
        else:
            for d in devs:
                prob += x[v, d] == x[leader[v], d], f"group_{v}_{d}"
        s = _var(prob, f"S_{v}", lowBound=0, upBound=H / scale)
        prob += s == pulp.lpSum((t / scale) * var for d in devs for t, var in z[v, d]), f"start_{v}"
        S.append(s)
        prob += M >= s + pulp.lpSum(float(dur[v, d]) * x[v, d] for d in devs) + tail[v] / scale, f"end_{v}"
    # One node at a time on every device.
    for d in range(k):
        nodes = [v for v in range(n) if allowed[v, d] and dur_u[v, d] > 0]
        for t in range(H):
            terms = []
            for v in nodes:
                a, b = Z(v, d, t), Z(v, d, t - int(dur_u[v, d]))
                if a is None or a is b:
                    continue
                terms.append(a if b is None else a - b)
            if len(terms) > 1:
                prob += pulp.lpSum(terms) <= 1, f"busy_{d}_{t}"
    # A zero-time node sits between the runs of its device, never inside one (it is part
    # of the device's sequence, as in the big-M order rows and the brute force).
    for v in range(n):
        for d in range(k):
            if not allowed[v, d] or dur_u[v, d] > 0:
                continue
            for t, zv in z[v, d]:
                inside = []
                for u in range(n):
                    if u == v or not allowed[u, d] or dur_u[u, d] <= 1:
                        continue
                    a, b = Z(u, d, t - 1), Z(u, d, t - int(dur_u[u, d]))
                    if a is None or a is b:
                        continue
                    inside.append(a if b is None else a - b)
                if inside:
                    prob += zv + pulp.lpSum(inside) <= 1, f"instant_{v}_{d}_{t}"
    if budget is not None and budget.left() < reserve + 0.5:
        raise xc.OutOfTime("the time limit ran out while building the model (time-indexed capacity)")
    # Precedence with communication, aggregated by time.
    for e, (u, w) in enumerate(zip(problem.edge_src.tolist(), problem.edge_dst.tolist())):
        for d in range(k):
            if not allowed[w, d]:
                continue
            lo, sums = cum[w, d]
            for i, zw in enumerate(sums):
                t = lo + i
                rhs = []
                for a in range(k):
                    if not allowed[u, a]:
                        continue
                    ready = t - int(dur_u[u, a]) - (int(comm_u[e, a, d]) if a != d else 0)
                    term = Z(u, a, ready)
                    if term is not None:
                        rhs.append(term)
                prob += zw <= pulp.lpSum(rhs), f"prec_{e}_{d}_{t}"
    add_memory_and_loads(problem, prob, x, M, dur, work_row=False)  # as in the big-M model

    def warm(place: np.ndarray, start: np.ndarray) -> dict:
        """Values of the time-indexed variables for a schedule (starts rounded to the grid)."""
        vals: dict = {}
        st = np.rint(np.asarray(start, dtype=np.float64) * scale).astype(np.int64).tolist()
        pl = place.tolist()
        for (v, d), pairs in z.items():
            for (t, var), zz in zip(pairs, cum[v, d][1]):
                vals[var] = 1.0 if (pl[v] == d and st[v] == t) else 0.0
                vals[zz] = 1.0 if (pl[v] == d and st[v] <= t) else 0.0
        return vals

    return MilpModel(prob, x, S, M, [], [], H / scale, extra_warm=warm)
