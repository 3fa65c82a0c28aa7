"""Peak (liveness) memory in the CP-SAT model of ``cpsat``: one cumulative per device.

:func:`peak_bytes` puts the ``param``/``output``/``temp`` split and the capacities on an
integer byte grid; :func:`add_peak_memory` adds the tensor lifetimes of docs/model.md
section 3 as optional intervals. Read with :mod:`optpart.solvers.exact.cpsat_model`, which calls
both when the call asks for the peak model on a graph with the split.
"""

from __future__ import annotations

import numpy as np

from ...model.problem import Problem
from . import _exact_common as xc

__all__ = ["peak_bytes", "add_peak_memory"]


def peak_bytes(problem: Problem) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, bool]:
    """Integer ``param``/``output``/``temp`` bytes and capacities for the peak model.

    Exact (as :func:`~optpart.solvers.exact._exact_common.integral_memory`) when every figure is a
    whole number of ``1/s`` bytes for ``s`` in 1, 10, ..., 1e6; otherwise bytes are rounded
    up and capacities down on a scale near 1e12, which is conservative (``exact=False``).
    Infinite capacities map to -1 (no constraint).

    Parameters
    ----------
    problem : Problem
        The problem (its peak split and capacities).

    Returns
    -------
    tuple
        ``(param, output, temp, cap, exact)``: integer arrays and whether no rounding happened.
    """
    arrs = [np.asarray(a, dtype=np.float64) for a in (problem.param_bytes, problem.output_bytes,
                                                       problem.temp_bytes)]
    cap = problem.device_memory
    finite = np.isfinite(cap)
    cap0 = np.where(finite, cap, 0.0)
    allb = np.concatenate(arrs)
    # Worst sum on a device: every param, every output (produced and received), every temp.
    total = float(arrs[0].sum() + 2 * arrs[1].sum() + arrs[2].sum()) + float(cap0.max(initial=0.0)) + 1.0
    for s in (1, 10, 100, 1000, 10**4, 10**5, 10**6):
        if total * s >= 2**53:
            break
        if xc._integral(allb * s):
            ints = [np.rint(a * s).astype(np.int64) for a in arrs]
            c_int = np.where(finite, np.floor(cap0 * s), -1).astype(np.int64)
            return ints[0], ints[1], ints[2], c_int, True
    s = 1e12 / total
    ints = [np.ceil(a * s - 1e-9).astype(np.int64) for a in arrs]
    c_int = np.where(finite, np.floor(cap0 * s), -1).astype(np.int64)
    return ints[0], ints[1], ints[2], c_int, False


def add_peak_memory(model, problem: Problem, x: dict, S: list, E: list, makespan, dur: np.ndarray,
                     comm: np.ndarray, horizon: int, param: np.ndarray, out: np.ndarray,
                     temp: np.ndarray, cap: np.ndarray, exact_time: bool, relaxed: bool = False) -> None:
    """Peak (liveness) memory of docs/model.md section 3 as one cumulative per device.

    Capacity ``cap(d) - sum param(v) x[v, d]``; optional intervals (all on integer time):

    * temp of ``v`` on ``d``: ``[S(v), E(v))``, present iff ``x[v, d]``;
    * output of ``u`` on ``d(u)``: ``[S(u), O(u))`` with ``O(u) >= E(w)`` for each consumer
      ``w`` on ``d(u)``, ``O(u) >= E(u) + c`` for each consumer elsewhere (per-pair delay),
      ``O(u) >= makespan`` without consumers;
    * copy of ``u`` received on ``e``: present iff ``u`` is not on ``e`` and a consumer is;
      ``[A, B)`` with ``F(u) <= A <= F(u) + c(u, w)`` and ``B >= E(w)`` for each consumer ``w`` on ``e``.

    Ends are only bounded below and the copy's start only above, so a model interval
    contains the real one and the solver may take it equal: the model is exact. A
    zero-length interval (counted at its instant by :func:`~optpart.evaluate.peak_memory`)
    becomes one unit long: with integer endpoints, a half-open interval overlaps
    ``[t, t + 1)`` iff it contains ``t``, so this is exact too. On an inexact (rounded-up)
    time grid, where real times are earlier than the model's, a copy starts at ``S(u)``
    and ends one unit after its last consumer: conservative, and checked after solving.
    A copy whose consumer on ``e`` takes zero time also ends one unit after that consumer
    (it may be an instant at the first arrival, which the start's bound alone can miss):
    conservative, and such graphs get no proof (see :func:`optpart.solvers.exact.cpsat_decode.has_instants`).

    ``relaxed=True`` (times rounded *down*, :mod:`optpart.solvers.exact.cpsat_relax`) gives a
    relaxation instead: intervals may be empty (an empty interval holds nothing, so
    instants are not counted) and a copy may start up to two units later than its first
    arrival (flooring a sum loses at most one unit per term). A real schedule with every
    time rounded down then satisfies every row: model intervals that overlap at an integer
    ``t`` are real intervals that all contain instants just before ``t + 1``.

    Parameters
    ----------
    model : ortools.sat.python.cp_model.CpModel
        The model the rows go into.
    problem : Problem
        The problem (DAG, groups).
    x : dict
        ``(v, d) -> `` literal "node ``v`` runs on device ``d``".
    S, E : list
        Start and end variables per node (grid units).
    makespan
        The makespan variable (outputs without consumers live to it).
    dur, comm : ndarray
        Integer run times (``n x k``) and transfer times (``m x k x k``) in grid units.
    horizon : int
        The largest time any variable may take (units).
    param, out, temp, cap : ndarray
        Integer parameter, output and temporary bytes per node and capacities per device
        (:func:`peak_bytes`; -1: no constraint).
    exact_time : bool
        Whether the time grid is exact (else copies are modelled conservatively).
    relaxed : bool
        Build the relaxation described above (times in ``dur``/``comm`` rounded down).
    """
    n, k = problem.n_nodes, problem.n_devices
    allowed = problem.allowed
    h1 = horizon + 1
    least = 0 if relaxed else 1  # the shortest interval: an instant counts as one unit, or not at all
    late = 2 if relaxed else 0   # how much later than F(u) + c a relaxed copy may start
    items: list[list[tuple]] = [[] for _ in range(k)]
    cons: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    for e, (u, w) in enumerate(zip(problem.edge_src.tolist(), problem.edge_dst.tolist())):
        cons[u].append((e, w))
    for v in range(n):
        devs = [d for d in range(k) if allowed[v, d]]
        if temp[v] > 0:
            for d in devs:
                if cap[d] >= 0:
                    iv = model.new_optional_fixed_size_interval_var(S[v], max(int(dur[v, d]), least), x[v, d],
                                                                     f"pt_{v}_{d}")
                    items[d].append((iv, int(temp[v])))
        if out[v] <= 0:
            continue
        if any(cap[d] >= 0 for d in devs):
            o_end = model.new_int_var(0, h1, f"po_end_{v}")
            model.add(o_end >= E[v])
            model.add(o_end >= S[v] + least)
            if not cons[v]:
                model.add(o_end >= makespan)
            for e, w in cons[v]:
                for a in devs:
                    if allowed[w, a]:
                        model.add(o_end >= E[w]).only_enforce_if([x[v, a], x[w, a]])
                    terms = [int(comm[e, a, b]) * x[w, b] for b in range(k)
                             if b != a and allowed[w, b] and comm[e, a, b] > 0]
                    if terms:
                        model.add(o_end >= E[v] + sum(terms)).only_enforce_if(x[v, a])
            size = model.new_int_var(least, h1, f"po_len_{v}")
            for d in devs:
                if cap[d] >= 0:
                    iv = model.new_optional_interval_var(S[v], size, o_end, x[v, d], f"po_{v}_{d}")
                    items[d].append((iv, int(out[v])))
        for d in range(k):  # copies received on d
            if cap[d] < 0:
                continue
            ws = [(e, w) for e, w in cons[v] if allowed[w, d]]
            others = [a for a in devs if a != d]
            if not ws or not others:
                continue
            r = model.new_bool_var(f"pr_{v}_{d}")
            here = [x[v, d]] if allowed[v, d] else []
            if here:
                model.add_implication(r, x[v, d].negated())
            model.add_bool_or([x[w, d] for _, w in ws] + [r.negated()])
            for _, w in ws:
                model.add_bool_or([x[w, d].negated(), r] + here)
            a_beg = model.new_int_var(0, horizon, f"pa_{v}_{d}")
            a_end = model.new_int_var(0, h1, f"pb_{v}_{d}")
            if exact_time or relaxed:
                model.add(a_beg >= E[v])
                for e, w in ws:
                    for a in others:
                        model.add(a_beg <= E[v] + int(comm[e, a, d]) + late).only_enforce_if([x[v, a], x[w, d]])
            else:
                model.add(a_beg == S[v])
            for _, w in ws:
                # A zero-time consumer may finish at the first arrival: the copy is then an
                # instant there, while the start above may lie earlier; cover that instant.
                pad = 0 if relaxed or (exact_time and dur[w, d] > 0) else 1
                model.add(a_end >= E[w] + pad).only_enforce_if(x[w, d])
            model.add(a_end >= a_beg + least)
            size = model.new_int_var(least, h1, f"pc_len_{v}_{d}")
            items[d].append((model.new_optional_interval_var(a_beg, size, a_end, r, f"pc_{v}_{d}"), int(out[v])))
    for d in range(k):
        if cap[d] < 0:
            continue
        held = [int(param[v]) * x[v, d] for v in range(n) if allowed[v, d] and param[v] > 0]
        room = model.new_int_var(0, int(cap[d]), f"room_{d}")
        model.add(room == int(cap[d]) - sum(held))
        if items[d]:
            model.add_cumulative([iv for iv, _ in items[d]], [q for _, q in items[d]], room)
