"""The heuristic under the liveness (peak) memory model of docs/model.md section 3.

Under peak a placement fits or not *with its schedule*: a tensor holds memory from its
producer's start to its last consumer's end, and a copy received from another device
adds to the receiver. So the constructions here check the liveness timeline as they
schedule instead of budgeting static bytes:

1. **Memory-aware EFT under liveness** (:func:`eft_peak`): HEFT-style earliest finish
   time with insertion (Topcuoglu et al., TPDS 2002), where a device is a candidate for
   a node only when :class:`optpart.schedule.liveness.LivenessPolicy` admits the node at
   that slot (as Baechi's m-ETF keeps memory in its simulation; Jeon et al., SoCC 2020).
   If the earliest slot overflows, the slot at the end of the device is tried too.
   Several priority orders: HEFT's upward rank, rank_u + rank_d, seeded noisy ranks.
2. **ParDNN's memory step on the timeline** (:func:`.memory.repair_peak`): the static
   constructions of the heuristic (phases 1-4 and static memory-aware EFT), and the
   ``hint``, are rescheduled and repaired at the device and instant of their overflow.
3. **Known-feasible candidates**: everything on one device (fastest first) when its
   schedule fits; HEFT under peak (the first EFT order above is exactly it); m-ETF under
   liveness (the ``etf`` baseline's schedule); the ``topo``, ``metis`` and ``pardnn``
   baselines' answers (:mod:`.baseline_candidates`) when their schedules fit; the
   heuristic's static answers (within the capacities and without limits) when their own
   schedules fit; consecutive topological stages and mirrored pipeline stages
   (:mod:`.peak_stages`).
4. **Improvement**: hill climbing over unit moves along the critical chain, every
   move checked against the peak model (:func:`_improve`), sized by ``effort``.
5. **Overflow search**: when no candidate fits, a tabu search minimises the overflow
   itself, from the closest candidate (:func:`_overflow_tabu`), sized by ``effort``.

Every candidate is verified with :func:`optpart.model.memory.peak_memory` and
:func:`optpart.model.memory.fits` on the exact schedule returned; the shortest that fits wins.
So the answer is never over capacity under peak and never slower than any candidate that
fits (in particular the single-device placement). ``infeasible`` is claimed only on a
proven reason (:func:`peak_infeasibility`); otherwise a dead end is ``unknown`` with the
closest candidate's overflow named.
"""

from __future__ import annotations

import time as _time

import numpy as np

from ..._docstrings import fill_doc
from ...evaluate import problem_lower_bound
from ...model.memory import fits, overflow_message, peak_memory
from ...model.problem import Problem
from ...result import Status
from ..base import Solution
from .eft import heft_order, topological_priority, upward_rank
from .memory import (
    greedy_fill,
    memory_units,
    peak_schedule,
    project_constraints,
    repair_peak,
)
from ...model.screening import infeasibility
from .peak_stages import chunk_placements
from .schedule import Graph, critical_chain, justify
from .stage_candidate import stage_candidate

__all__ = ["eft_peak", "peak_infeasibility", "solve_peak"]



def peak_infeasibility(problem: Problem) -> str | None:
    """A proven reason that no placement fits under peak, or None: the model's one screen
    (:func:`optpart.model.screening.infeasibility` under ``"peak"``), named for this module's callers.

    Parameters
    ----------
    problem : Problem

    Returns
    -------
    str or None
        The one-line reason, or None when no proof was found.
    """
    return infeasibility(problem, "peak")


_WORK_PER_EFFORT = 300_000   # (nodes + edges) x schedule evaluations per unit of effort
_MAX_EVALS_PER_EFFORT = 300
_EVAL_WORK = 20              # replay units per evaluation of the budget: peak's own search pays more for
                             # the time than the static constructions' searches (left out), and a search
                             # that converges stops before its budget (docs/heuristic.md)
_JUSTIFIED_NODES = 300       # graphs up to this size are searched with justified schedules
_ORDER_WORK = 60_000          # (nodes + edges) x extra EFT orders per unit of effort
_MAX_NOISY = 8
_TABU_WORK_PER_EFFORT = 3_000_000  # (nodes + edges) x overflow-search evaluations per unit of effort
_MAX_TABU_EVALS_PER_EFFORT = 3000


@fill_doc
def eft_peak(problem: Problem, g: Graph, order: list[int] | None = None):
    """Earliest-finish-time insertion list scheduling (the engine of :mod:`optpart.schedule.eft`)
    with the liveness policy: a node goes to a slot only when the device's peak stays within
    capacity. ``(place, start, finish)`` or None when some node fits nowhere (a dead end of
    the greedy, not a proof).

    Parameters
    ----------
    %(problem_g)s
    order : list of int, optional
        Node order (default: HEFT's).

    Returns
    -------
    tuple or None
        ``(place, start, finish)`` lists, or None on a dead end.
    """
    from ...schedule import NoRoom, eft_schedule
    from ...schedule.liveness import LivenessPolicy

    try:
        res = eft_schedule(g, order if order is not None else heft_order(g), LivenessPolicy(problem))
    except NoRoom:
        return None
    return res.place, res.start, res.finish


class _Pool:
    """Candidates that fit under peak, verified on their exact schedule; the best is kept."""

    def __init__(self, problem: Problem, g: Graph) -> None:
        self.problem, self.g = problem, g
        self.best = None          # (makespan, tag, place, start, finish)
        self.fitting: list = []   # every candidate that fits, as the tuple above
        self.closest = None       # (worst peak / capacity, tag, place, start, finish) of a non-fitting one
        self.tried: list[str] = []

    def offer(self, tag: str, place, start, finish, justify_rounds: int = 0) -> bool:
        p = self.problem
        self.tried.append(tag)
        if justify_rounds:
            s2, f2, _ = justify(self.g, place, start, finish, justify_rounds)
            if self._offer(tag, place, s2, f2):
                return True
        if self._offer(tag, place, start, finish):
            return True
        # another order of the same placement may shorten the lifetimes that overflow
        from ...evaluate import canonical_schedule
        cs, cf = canonical_schedule(p, np.asarray(place, dtype=np.int64))
        return self._offer(tag + "-canonical", place, cs.tolist(), cf.tolist())

    def _offer(self, tag, place, start, finish) -> bool:
        p = self.problem
        pl = np.asarray(place, dtype=np.int64)
        st, fi = np.asarray(start, dtype=np.float64), np.asarray(finish, dtype=np.float64)
        peak = peak_memory(p, pl, st, fi)
        ms = float(fi.max()) if fi.size else 0.0
        if not fits(peak, p.device_memory).all():
            worst = float(np.max(peak / np.maximum(p.device_memory, 1e-300)))
            if self.closest is None or worst < self.closest[0]:
                self.closest = (worst, tag, pl, st, fi)
            return False
        cand = (ms, tag, list(place), list(start), list(finish))
        self.fitting.append(cand)
        if self.best is None or ms < self.best[0] - 1e-12 * max(1.0, ms):
            self.best = cand
        return True

    def valid_best(self):
        """The shortest fitting candidate whose schedule passes the evaluator's checker
        (rules 1-4 of docs/model.md section 2), or None. Guards against a scheduler defect
        turning into an invalid answer."""
        from ...evaluate import evaluate, violations
        for cand in sorted(self.fitting, key=lambda c: c[0]):
            _ms, _tag, place, s, _ = cand
            res = evaluate(self.problem, np.asarray(place, dtype=np.int64), np.asarray(s), memory_model="peak")
            if not violations(self.problem, res):
                return cand
        return None


def _unit_moves(problem: Problem, g: Graph, place: list[int], units, nodes):
    """Each move of a unit (of the nodes in ``nodes``, first seen first) to another allowed
    device, pinned units excepted: ``(unit, device, new placement)``."""
    unit_of, members, _ = units
    allowed = problem.allowed
    seen: set[int] = set()
    for v in nodes:
        u = unit_of[v]
        if u in seen or problem.pin[members[u][0]] >= 0:
            continue
        seen.add(u)
        ok = allowed[members[u]].all(axis=0)
        for d in range(g.k):
            if d == place[v] or not ok[d]:
                continue
            new = list(place)
            for w in members[u]:
                new[w] = d
            yield u, d, new


def _improve(problem: Problem, g: Graph, pool: _Pool, units, work: int, deadline, jr: int, seed: int = 0) -> int:
    """The schedule-aware search (:func:`.search.improve_schedule`) from the best candidate,
    every kept move checked against the peak model on its exact schedule; the result is
    offered to ``pool``. Returns the work used."""
    if pool.best is None or work <= 0 or g.k < 2:
        return 0
    from .search import improve_schedule

    cap = problem.device_memory

    def admit(place, start, finish) -> bool:
        return bool(fits(peak_memory(problem, np.asarray(place, dtype=np.int64), np.asarray(start),
                                     np.asarray(finish)), cap).all())

    _, _, place, s, _ = pool.best
    out = improve_schedule(g, place, s, problem.allowed, units, [float("inf")] * g.k, work, deadline,
                           admit=admit, seed=seed, justify_rounds=jr, justified=g.n <= _JUSTIFIED_NODES,
                           lower=problem_lower_bound(problem))
    if out["moves"]:
        pool.offer("search", out["place"], out["start"], out["finish"], justify_rounds=jr)
    return out["work"]


def _overflow_tabu(problem: Problem, g: Graph, pool: _Pool, start: list[int], units, evals: int,
                   deadline, jr: int, tenure: int = 7) -> int:
    """Tabu search for a placement that fits under peak, from the closest candidate.

    When no construction fits, the overflow itself is minimised: the objective is the sum
    over devices of ``max(0, peak - capacity) / capacity`` (then the makespan), a move sends
    one memory unit (a colocation group or a free node) from an overflowing device to
    another allowed device, and each step takes the best move even when it is worse, with
    the reverse move forbidden for ``tenure`` steps unless it reaches a new best
    (Glover, "Tabu search - Part I", ORSA J. Computing 1989). Steepest descent alone stalls
    a fraction of a percent over capacity, where moving a tensor's producer next to its
    consumers must first raise the overflow of one device. Every fitting placement met is
    offered to ``pool``. Returns the evaluations used.
    """
    members_of = units[1]
    cap = np.asarray(problem.device_memory, dtype=np.float64)
    scale = np.maximum(cap, 1e-300)

    def score(place):
        s, f, ms, peak = peak_schedule(problem, g, place, jr)
        peak = np.asarray(peak, dtype=np.float64)
        return float((np.maximum(peak - cap, 0.0) / scale).sum()), ms, s, f, peak

    place = list(start)
    cur = score(place)
    used, step, best_over = 1, 0, cur[0]
    tabu: dict[tuple[int, int], int] = {}
    while used < evals:
        if fits(cur[4], cap).all():
            pool.offer("overflow-tabu", place, cur[2], cur[3])
            return used
        step += 1
        over_dev = cur[4] > cap
        chosen = None
        over_nodes = [v for v in range(g.n) if over_dev[place[v]]]
        for u, d, new in _unit_moves(problem, g, place, units, over_nodes):
            if used >= evals:
                break
            if deadline is not None and _time.perf_counter() > deadline:
                return used
            sc = score(new)
            used += 1
            # tabu moves rank after every allowed one (unless they reach a new best), so
            # a step is taken even when every move is tabu
            forbidden = tabu.get((u, d), 0) >= step and not sc[0] < best_over
            key = (forbidden, sc[0], sc[1], u, d)
            if chosen is None or key < chosen[0]:
                chosen = (key, new, sc, u, place[members_of[u][0]])
        if chosen is None:
            break
        _, place, cur, u, old = chosen
        tabu[(u, old)] = step + tenure
        best_over = min(best_over, cur[0])
    if fits(cur[4], cap).all():
        pool.offer("overflow-tabu", place, cur[2], cur[3])
    return used


@fill_doc
def solve_peak(problem: Problem, g: Graph, *, time_limit: float | None = None, seed: int = 0, hint=None,
               effort: float = 1.0, deadline: float | None = None) -> Solution:
    """Place and schedule ``problem`` so that every device's liveness peak fits (module doc).

    Parameters
    ----------
    %(problem_g)s
    time_limit : float, optional
        The caller's time limit (the ``deadline`` is what is checked).
    seed : int
        Seed of the noisy priority orders and the static search.
    hint : array_like of int, optional
        A placement to repair and offer as a candidate.
    effort : float
        Scales the priority orders, the searches' evaluation budgets and the overflow search.
    deadline : float, optional
        ``time.perf_counter()`` value after which optional stages are skipped.

    Returns
    -------
    Solution
        Within peak memory (``feasible``/``optimal``), ``infeasible`` with a proof, or
        ``unknown`` naming the closest candidate's overflow.
    """
    reason = peak_infeasibility(problem)
    if reason is not None:
        return Solution(Status.INFEASIBLE, message=reason, memory_model="peak")
    size = max(1, g.n + problem.n_edges)
    jr = 1 if effort > 0 else 0
    units = memory_units(problem)
    pool = _Pool(problem, g)
    # 1. everything on one device, fastest first (known feasible whenever one device holds it)
    usable = problem.allowed.all(axis=0)
    for d in sorted(range(g.k), key=lambda d: (-g.speed[d], d)):
        if usable[d] and fits(float(problem.param_bytes.sum()), float(problem.device_memory[d])):
            s, f, _, _ = peak_schedule(problem, g, [d] * g.n, jr)
            if pool.offer("single", [d] * g.n, s, f):
                break
    # 2. memory-aware EFT under liveness, several priority orders. The first, HEFT's order,
    #    is exactly HEFT under peak (same engine, order and policy; its unjustified schedule
    #    is offered too), so the answer is never slower than that baseline's.
    rank_u = np.asarray(upward_rank(g))
    from .slicing import levels
    top, bottom = levels(g)
    prios = [rank_u, np.asarray(top) + np.asarray(bottom)]
    rng = np.random.default_rng(seed)
    for _ in range(_MAX_NOISY):
        prios.append(rank_u * rng.uniform(0.9, 1.1, size=g.n))
    n_orders = 1 + int(min(len(prios) - 1, effort * _ORDER_WORK / size))
    for i, pr in enumerate(prios[:n_orders]):
        if i >= 1 and deadline is not None and _time.perf_counter() > deadline:
            break
        res = eft_peak(problem, g, topological_priority(g, pr) if i else heft_order(g))
        if res is not None:
            pool.offer(f"eft-peak-{i}", *res, justify_rounds=jr)
    # 3. m-ETF under liveness: the ``etf`` baseline's schedule under peak (never slower than it)
    from ...schedule import NoRoom, etf_schedule
    from ...schedule.liveness import LivenessPolicy
    try:
        r = etf_schedule(g, rank_u.tolist(), LivenessPolicy(problem))
        pool.offer("etf-peak", r.place, r.start, r.finish, justify_rounds=jr)
    except NoRoom:
        pass
    # the other baselines' answers (topo, metis, the seed method under peak), when the budget
    # pays for priority orders or for them: kept when their schedules fit, so never slower than them
    from .baseline_candidates import baseline_candidates, pays_for_baselines
    if n_orders > 1 or pays_for_baselines(effort, size):
        for name, place, s in baseline_candidates(problem, "peak", seed):
            pool.offer(name, place, s, [s[v] + g.time[v] / g.speed[place[v]] for v in range(g.n)],
                       justify_rounds=jr)
    # 4. the static constructions and the hint, repaired on the memory timeline. Past the
    #    deadline (a time limit) optional stages are skipped once some candidate fits.
    stopped: list[str] = []

    def late(stage: str) -> bool:
        if deadline is None or pool.best is None or _time.perf_counter() <= deadline:
            return False
        stopped.append(stage)
        return True

    starts = []
    from . import _construct, pardnn_placement
    cap = problem.device_memory.astype(float).tolist()
    static = _construct(problem, g, cap, effort, hint, deadline, seed, search=False, baselines=False)
    if static is not None:  # the heuristic's static answer: kept as is when it fits under peak
        _, sp, ss, sf = static
        if not pool.offer("static", sp, ss, sf):
            starts.append(("static", sp))
    pp = None if late("the seed method") else pardnn_placement(problem, g, cap, refine_evals=10,
                                                                 deadline=deadline, units=units)
    if pp is not None:
        starts.append(("pardnn-static", pp))
    if not np.isinf(cap).all() and not late("the unconstrained static answer"):
        # the static answer without memory limits: the fastest schedules, often within peak already
        free = _construct(problem, g, [float("inf")] * g.k, effort, None, deadline, seed, search=False,
                          baselines=False)
        if free is not None:
            _, fp, fs, ff = free
            if not pool.offer("static-free", fp, fs, ff):
                starts.append(("static-free", fp))
    if hint is not None:  # a placement the user knows: its own schedule and the canonical one
        from ...evaluate import canonical_schedule
        ph = project_constraints(problem, g, np.asarray(hint).tolist())
        hs, hf, _, _ = peak_schedule(problem, g, ph, jr)
        cs, cf = canonical_schedule(problem, np.asarray(ph, dtype=np.int64))
        ok_own = pool.offer("hint", ph, hs, hf)
        if not pool.offer("hint-canonical", ph, cs.tolist(), cf.tolist()) and not ok_own:
            starts.append(("hint", ph))
    for tag, place in chunk_placements(problem, g):
        s, f, _, _ = peak_schedule(problem, g, place, jr)
        if not pool.offer(tag, place, s, f):
            starts.append((tag, place))
    if not starts or pool.best is None:
        fill = greedy_fill(problem, None, cap, units) or greedy_fill(problem, None, cap, units, best_fit=True)
        if fill is not None:
            starts.append(("fill", fill))
    for tag, place in starts:
        if late("the memory step"):
            break
        fixed = repair_peak(problem, g, place, units, rounds=max(10, 4 * g.k), justify_rounds=jr)
        if fixed is not None:
            pool.offer(tag + "+repair", fixed[0], fixed[1], fixed[2])
    # 5. improvement under peak
    evals = min(effort * _MAX_EVALS_PER_EFFORT, effort * _WORK_PER_EFFORT / size)
    used = _improve(problem, g, pool, units, int(evals * _EVAL_WORK * size), deadline, jr, seed)
    # 5b. the pipeline-stage placement, a finished answer offered after the search (:mod:`.stage_candidate`)
    stage = None if late("the stage placement") else stage_candidate(problem, "peak", effort, deadline)
    if stage is not None:
        pool.offer("stage-seed", stage[0].tolist(), stage[1].tolist(),
                   (stage[1] + problem.duration(stage[0])).tolist(), justify_rounds=jr)
    stats = {"candidates": len(pool.tried), "improve_work": used}
    if pool.best is None and pool.closest is not None and g.k >= 2 and not late("the overflow search"):
        # 6. no construction fits: search on the overflow itself, from the closest one
        tabu_evals = int(min(effort * _MAX_TABU_EVALS_PER_EFFORT, effort * _TABU_WORK_PER_EFFORT / size))
        stats["overflow_search_evals"] = _overflow_tabu(problem, g, pool, pool.closest[2].tolist(), units,
                                                        tabu_evals, deadline, jr)
    if stopped:
        stats["stopped"] = f"time limit reached before {stopped[0]}"
    best = pool.valid_best()
    if best is None:
        msg = "heuristic: no placement within memory under the peak model was found"
        if pool.fitting:
            msg += f" ({len(pool.fitting)} fitting candidates had invalid schedules)"
        if pool.closest is not None:
            _, tag, pl, st, fi = pool.closest
            line = overflow_message(problem, pl, st, fi, "peak")
            msg += f"; closest ({tag}): {line}"
        return Solution(Status.UNKNOWN, message=msg, memory_model="peak", stats=stats)
    ms, tag, place, s, f = best
    stats["construction"] = tag
    lb = problem_lower_bound(problem)
    status = Status.OPTIMAL if ms <= lb + 1e-9 * max(1.0, ms) else Status.FEASIBLE
    return Solution(status, placement=np.asarray(place, dtype=np.int64), start=np.asarray(s),
                    memory_model="peak", stats=stats)
