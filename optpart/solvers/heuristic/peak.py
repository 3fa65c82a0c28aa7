"""The peak model's repair: when no construction fits the liveness model, the memory step.

Under ``peak`` the constructions of the pipeline schedule with the liveness policy
(:class:`optpart.schedule.liveness.LivenessPolicy`: a node takes a slot only when the device's
liveness peak stays within capacity), and every candidate is checked on its own schedule. The
greedy can dead-end where a placement exists. Then the static answers (HEFT's and m-ETF's
constructions under the static budget of the capacities, and HEFT's without any budget: the
fastest schedules, often within peak already) are offered as they are and, when they overflow,
given to the seed method's memory step on the liveness timeline
(:func:`optpart.solvers.pardnn.memory.peak_memory_step`: units leave the overflowing device at its
peak instant, best bytes freed per communication added first), with the seed method's own
placement as the last start. When nothing fits still, a tabu search minimises the overflow
itself from the closest candidate (:func:`overflow_search`).
"""

from __future__ import annotations

import numpy as np

import time as _time

from ..._docstrings import fill_doc
from ...model.memory import fits, peak_memory
from ...model.paths import priority_order
from ...schedule import Beaten, NoRoom, StaticPolicy, TimeUp, eft_schedule, etf_schedule, schedule_placement
from ..pardnn.memory import peak_memory_step

__all__ = ["static_answers", "repair", "overflow_search"]

#: Overflow-search evaluations (one schedule each): at most this many per unit of effort, and
#: ``effort x TABU_WORK / (nodes + edges)``.
TABU_EVALS, TABU_WORK = 3_000, 3_000_000


@fill_doc
def static_answers(run) -> None:
    """Under peak only, HEFT's and m-ETF's constructions under the static budget of the capacities:
    offered as they are when they fit the liveness model, else repaired by the seed method's
    memory step. Wins where the liveness policy's greedy dead-ends or is short-sighted (on the
    bundled training graphs it is the search's best start, or the only placement that fits).

    Parameters
    ----------
    %(run)s
    """
    if not run.peak:
        return
    problem, g = run.problem, run.g
    order = priority_order(problem, np.asarray(g.mean_bottom)).tolist()
    cap = problem.device_memory.astype(float).tolist()
    _offer_or_repair(run, (("static-heft", lambda: eft_schedule(g, order, StaticPolicy(problem, capacity=cap))),
                           ("static-etf", lambda: etf_schedule(g, g.mean_bottom, StaticPolicy(problem, capacity=cap)))))


def repair(run) -> None:
    """When no construction fits under peak: HEFT without a memory budget (the fastest
    schedule), repaired by the memory step; then the overflow search from the closest candidate.

    Parameters
    ----------
    run : optpart.solvers.heuristic.pipeline.Run
        A solve under ``peak`` whose constructions found nothing that fits.
    """
    problem, g = run.problem, run.g
    order = priority_order(problem, np.asarray(g.mean_bottom)).tolist()
    _offer_or_repair(run, (("free-heft", lambda: eft_schedule(g, order, StaticPolicy(problem, memory_aware=False))),))
    if run.best is None and run.closest is not None and g.k > 1 and not run.late("the overflow search"):
        evals = int(min(run.effort * TABU_EVALS, run.effort * TABU_WORK / max(1, run.size)))
        run.stats["overflow_search_evals"] = overflow_search(run, run.closest[2], max(1, evals))


def _offer_or_repair(run, builds) -> None:
    """Offer each static construction; repair those that overflow with the memory step."""
    for name, build in builds:
        if run.late(name):
            return
        try:
            res = build()
        except (NoRoom, Beaten, TimeUp):
            continue
        if not run.offer(name, res.place, res.start, res.finish) and not run.late("the memory step"):
            fixed = peak_memory_step(run.problem, run.g, res.place, run.units())
            if fixed is not None:
                run.offer(name + "+repair", *fixed[:3])


def overflow_search(run, start: list[int], evals: int, tenure: int = 7) -> int:
    """Tabu search for a placement that fits under peak, from ``start`` (Glover, "Tabu search -
    Part I", ORSA J. Computing 1989): the objective is the overflow, ``sum_d max(0, peak_d -
    C_d) / C_d``, then the makespan; a move sends one unit from an overflowing device to another
    allowed device; each step takes the best move, even a worse one, and the reverse is tabu for
    ``tenure`` steps unless it reaches a new best. Steepest descent stalls a fraction of a percent
    over capacity, where a tensor's producer must first join its consumers and raise another
    device's peak. The first placement that fits is offered to ``run``.

    Parameters
    ----------
    run : optpart.solvers.heuristic.pipeline.Run
        The solve (its problem, budgets and deadline).
    start : list of int
        The starting placement (the closest candidate).
    evals : int
        Schedules at most.
    tenure : int
        Steps a reversed move stays tabu.

    Returns
    -------
    int
        Schedules evaluated.
    """
    problem, g = run.problem, run.g
    _, members, _ = run.units()
    cap = problem.device_memory.astype(float)
    scale = np.maximum(cap, 1e-300)
    canon = g.canon

    def score(place):
        s, f, ms = schedule_placement(g, place, run.jr)
        peak = peak_memory(problem, np.asarray(place, dtype=np.int64), np.asarray(s), np.asarray(f))
        return float((np.maximum(peak - cap, 0.0) / scale).sum()), ms, s, f, peak

    place, cur = list(start), score(start)
    used, step, best_over, tabu = 1, 0, cur[0], {}
    while used < evals and not fits(cur[4], cap).all():
        step += 1
        chosen = None
        over = cur[4] > cap
        units = sorted({run.units()[0][v] for v in range(g.n) if over[place[v]]}, key=lambda u: canon[members[u][0]])
        for u in units:
            if problem.pin[members[u][0]] >= 0:
                continue
            ok = problem.allowed[members[u]].all(axis=0)
            for d in range(g.k):
                if d == place[members[u][0]] or not ok[d] or used >= evals:
                    continue
                if run.deadline is not None and _time.perf_counter() > run.deadline:
                    return used
                new = list(place)
                for v in members[u]:
                    new[v] = d
                sc = score(new)
                used += 1
                key = (tabu.get((u, d), 0) >= step and not sc[0] < best_over, sc[0], sc[1], canon[members[u][0]], d)
                if chosen is None or key < chosen[0]:
                    chosen = (key, new, sc, u, place[members[u][0]])
        if chosen is None:
            break
        _, place, cur, u, old = chosen
        tabu[(u, old)] = step + tenure
        best_over = min(best_over, cur[0])
    if fits(cur[4], cap).all():
        run.offer("overflow-search", place, cur[2], cur[3])
    return used
