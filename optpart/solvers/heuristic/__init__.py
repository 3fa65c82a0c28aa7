"""``heuristic``: the deterministic critical-path partitioner with EFT constructions.

After ParDNN (Qararyah, Wahib, Dikbayir, Belviranli, Unat, "A computational-graph
partitioning method for training memory-constrained DNNs", Parallel Computing 2021),
with HEFT- and ETF-style constructions from the shared engine (:mod:`optpart.schedule`)
and schedule-aware improvement on top. Candidates, each scheduled and scored, the
shortest kept (ties: the earlier candidate):

1. HEFT's construction (:mod:`.eft`: upward-rank order, earliest finish with insertion,
   every device a candidate) -- the very schedule ``heft`` returns, so the heuristic is
   never worse than ``heft``.
2. m-ETF's earliest-start construction (:func:`optpart.schedule.etf.etf_schedule`, the
   very schedule ``etf`` returns), which often reaches the optimum where communication is
   cheap or joins are wide; run at every size (one shared ready structure under uniform
   links, :mod:`optpart.schedule.etf_shared`).
3. EFT with other priority orders (rank_u + rank_d, seeded noisy ranks), as many as a
   work budget of ``effort * _VARIANT_WORK`` (nodes + edges) pays for.
4. The ParDNN seed method (phases 1-4: :mod:`.slicing`, :mod:`.mapping`, :mod:`.refine`,
   :mod:`.memory`; also the ``pardnn`` solver, :mod:`optpart.solvers.heuristic.pardnn_seed`), run at
   every size; its placement is scheduled when its busiest device could still beat the best.
5. The hint (projected onto the constraints, memory repaired) and "everything on the
   fastest device that holds it" (so never worse than ``single``).
6. The other baselines' answers (``topo``, ``metis``, the ``pardnn`` solver;
   :mod:`.baseline_candidates`) while the variants' budget allows.
7. After the search, a training step's pipeline-stage placement (:mod:`.stage_candidate`).

Only the best candidate keeps its placement and schedule (at 10^6 nodes each list is tens
of MiB). Then :mod:`.search` improves the best schedule: a critical-path-driven search
whose moves gather tasks (chains, data-edge paths, a device's content), scored by
incremental re-simulation (:mod:`.incremental`) within a budget of replay visits of nodes
and edges set by ``effort`` and the graph's size.

Every candidate is double-justified on graphs up to ``effort * _JUSTIFY_ALL_SIZE`` nodes +
edges, above that only the shortest one (justification never lengthens a schedule).

Time limit: construction stages after the first check the deadline (``0.5 *
time_limit``; m-ETF also while it runs), the improvement checks it before every
evaluation; nothing is allocated in proportion to ``effort``. When the heuristic stops early ``Solution.stats["stopped"]``
says where and why. Without a time limit it is deterministic: randomness only from
``seed``, ties to the lower node or device index.

Statuses: ``feasible``; ``optimal`` only when the makespan meets the generic lower
bound; ``infeasible`` when the pinned nodes alone overflow a device; ``unknown`` when
no placement within memory was found. The peak (liveness) model is delegated to
:mod:`.peak` when present. See ``docs/heuristic.md``.
"""

from __future__ import annotations

import time as _time

import numpy as np

from ...bounds import work_bound
from ...evaluate import peak_memory, problem_lower_bound, time_tolerance
from ...model.memory import fits
from ...model.problem import Problem
from ...result import Status
from ..._gc import no_gc
from ...units import format_bytes
from ..base import Solution
from ..spec import Option, SolverSpec
from .eft import eft_schedule, heft_order, topological_priority
from .baseline_constructions import first_constructions
from .baseline_candidates import WORK_PER_EFFORT, baseline_candidates, pays_for_baselines
from .search import improve_schedule
from .memory import greedy_fill, memory_units, project_constraints, repair_memory
from .packing import pack_units
from .schedule import Graph, justify, schedule_placement
from .slicing import levels
from .stage_candidate import static_stage_candidate
from .candidates import Candidates, busiest_device_time, may_win
from .seed_variant import pardnn_placement

__all__ = ["solve", "pardnn_placement", "SPEC"]

SPEC = SolverSpec(
    options=(Option("effort", float, 1.0, "0: constructions only; 1: default; higher: more improvement", min=0.0,
                    finite=True),
             Option("gap", float, 1e-4, "skip the later stages once a candidate is within this fraction of the "
                    "proven lower bound (0: only at the bound)", min=0.0, finite=True),
             Option("workers", int, 2, "processes for the first constructions (1: one process)", min=1)),
    memory_models=("static", "peak"), uses_hint=True, uses_time_limit=True)

_SEARCH_WORK = WORK_PER_EFFORT  # search budget per unit of effort, in replay visits of nodes and edges
_SEARCH_PER_SIZE = 6_000   # ... at most this many per node and edge (small graphs)
_SEARCH_FROM = 600_000     # the search runs when effort x this pays for _MIN_EVALS reschedules (two
                           # replays each): up to 30,000 nodes + edges at effort 1
_MAX_SEARCH_WORK = 10 ** 10  # at most, whatever the effort (a time limit stops earlier)
_MIN_EVALS = 10            # no search below the cost of this many reschedules: at 20,000 nodes (5 of
                           # them) it tripled the solve time against heft's for no gain (docs/heuristic.md)
_JUSTIFY_ALL_SIZE = 30_000  # nodes + edges up to which every candidate is double-justified at effort 1
                            # (above: the shortest candidate only; justification never lengthens)
_FULL_CANDIDATES = 2_000_000  # nodes x devices up to which EFT tries every device (as heft does)
_JUSTIFIED_SCORE_NODES = 300
_VARIANT_WORK = 50_000     # (nodes + edges) x extra EFT priority orders per unit of effort
_NOISY_ORDERS = 24         # noisy orders per unit of effort (fewer on larger graphs)
_MAX_NOISY_ORDERS = 2_000
_BOUND_SIZE = 8_000_000    # nodes x devices up to which the optimality test uses every generic bound
_PACK_EVALS = 2_000_000     # packing-search evaluations (O(1) each) per unit of effort when no fill fits
_DEFAULT_EFFORT = 1.0      # more effort keeps this effort's answer (and effort 0's) as a candidate
_DEADLINE_SHARE = 0.5      # share of the time limit the search may use (the rest: an overrunning
                           # stage, the final check, output)


def _pinned_overflow(problem: Problem, capacity: list[float]) -> str | None:
    pinned = problem.pin >= 0
    if not pinned.any():
        return None
    load = np.bincount(problem.pin[pinned], weights=problem.memory[pinned], minlength=problem.n_devices)
    for d in range(problem.n_devices):
        if not fits(load[d], capacity[d]):
            return (f"the nodes pinned to device '{problem.device_ids[d]}' need {format_bytes(load[d])} "
                    f"but it has {format_bytes(capacity[d])}")
    return None


def _construct(problem: Problem, g: Graph, capacity: list[float], effort: float, hint, deadline,
               seed: int = 0, stats: dict | None = None, lower: float = 0.0, search: bool = True,
               baselines: bool = True, gap: float = 0.0, workers: int = 1):
    """Every construction within ``capacity`` (static), improved; (makespan, place, start, finish) or None.

    ``lower`` is a proven lower bound on the makespan: once a candidate meets it, the later
    stages (priority variants, the seed method, the search) cannot beat it and are skipped; once
    one is within ``gap`` of it (a fraction), they could beat it by less than that and are
    skipped too.
    ``search=False`` leaves the search out and ``baselines=False`` the other baselines (the
    peak model's starting points: its own search pays more for the time, and it offers the
    baselines' peak answers itself)."""
    stats = {} if stats is None else stats
    n, m = g.n, problem.n_edges
    size = max(1, n + m)
    # the search's budget in replay visits of nodes and edges (:mod:`.search`)
    # small graphs score moves with justified schedules (three replays each): 1.5 times the work
    small = g.n <= _JUSTIFIED_SCORE_NODES
    work = int(min(effort * min(_SEARCH_WORK, _SEARCH_PER_SIZE * size) * (1.5 if small else 1.0), _MAX_SEARCH_WORK))
    evals = work // ((6 if small else 2) * size)   # as many whole reschedules (the seed method's refinement)
    cache: dict = {}

    def units():
        """Memory units (colocation groups as one), built on first use."""
        if "units" not in cache:
            cache["units"] = memory_units(problem)
        return cache["units"]

    found = Candidates()  # (makespan, tag, place, start, finish); only the best keeps its lists
    jr = 1 if effort > 0 else 0
    justify_all = jr and effort * _JUSTIFY_ALL_SIZE >= size

    unit = [0.0]  # seconds the first construction took: the yardstick for later stages

    def late(stage: str, cost: float = 0.0) -> bool:
        """True (and say why) when the deadline has passed or a stage of ``cost`` first
        constructions would pass it."""
        if deadline is not None and _time.perf_counter() + cost * unit[0] > deadline:
            stats.setdefault("stopped", f"time limit reached before {stage}")
            return True
        return False

    def proven(gap_too: bool = True) -> bool:
        """True (and say so) when a candidate already meets the lower bound (optimal) or, with
        ``gap_too``, is within ``gap`` of it."""
        return bool(found) and close_enough(min(x[0] for x in found), gap_too)

    def close_enough(ms: float, gap_too: bool = True) -> bool:
        if lower <= 0:
            return False
        if ms <= lower + time_tolerance(lower):
            stats.setdefault("proven_optimal", "a construction meets the lower bound; later stages skipped")
            return True
        if gap_too and ms <= lower * (1.0 + gap):
            stats.setdefault("within_gap", f"a candidate is within {gap:g} of the lower bound "
                                           f"({ms / lower - 1:.3g}); later stages skipped")
            return True
        return False

    def add(tag: int, place, s, f) -> None:
        if justify_all and not (found and late("a justification", 0.5)):
            s, f, ms = justify(g, place, s, f, jr)
        else:
            ms = max(f) if f else 0.0
        found.append((ms, tag, place, s, f))

    # 1-2. HEFT's own construction, its ``near`` variant (many devices) and m-ETF's earliest-start
    #      construction (:mod:`.baseline_constructions`): never worse than heft or etf
    # ``near`` tests about (mean in-degree + 1) devices per node instead of k: it pays only when
    # that is well below k (at k = 4 its bookkeeping made it twice as slow as every device)
    near_pays = g.k > 2 * (problem.n_edges / max(1, g.n) + 1)
    full = effort * _FULL_CANDIDATES >= g.n * g.k or not near_pays
    stats["candidates"] = "all devices" if full else "predecessors' devices + the first free"
    order = heft_order(g)
    # effort 0 builds HEFT with the ``near`` candidates: one candidate here too (the near variant),
    # so that with the other constructions (effort 0's, justified, refined) no effort loses what
    # effort 0 finds, and :func:`solve` need not run effort 0 again on the static model
    unit[0] = first_constructions(problem, g, capacity, order, full, full and near_pays and effort > 0, deadline,
                                  workers, add, lambda: proven(False), late, stats)
    # 3. other EFT priority orders, as many as the work budget pays for: rank_u + rank_d,
    #    then seeded noisy rank_u
    count = int(min(_NOISY_ORDERS * max(1.0, effort) + 1, _MAX_NOISY_ORDERS, effort * _VARIANT_WORK / size))
    orders = _variant_orders(g, seed)
    if count > 0 and not proven() and not late("the EFT priority variants", 1.2):
        for tag in range(count):
            if late("the EFT priority variants", 1.2):
                break
            rv = eft_schedule(g, capacity, topological_priority(g, next(orders)))
            if rv is not None:
                add(10 + tag, *rv)
    # 4. the seed method (phases 1-4; the ``pardnn`` baseline's placement)
    if not (found and (proven() or late("the seed method", 1.0))):
        refine_evals = min(20, evals // 4)
        if refine_evals < _MIN_EVALS:  # as for the search: fewer evaluations are not worth a
            refine_evals = 0           # refinement (2 of them cost 3x the mapping at 2e4 nodes)
        place = pardnn_placement(problem, g, capacity, refine_evals=refine_evals, deadline=deadline,
                                 units=units)
        if place is not None:  # justified here only when every candidate is (else: the winner, below)
            busy = busiest_device_time(problem, place, g.speed)
            if may_win(busy, found):
                s, f, ms = schedule_placement(g, place, jr if justify_all else 0)
                found.append((ms, 0, place, s, f))
            else:
                stats["pardnn_bound"] = busy  # its makespan is at least this, above the best candidate
        place = None
        # the units are rebuilt if a later stage needs them (same lists): at 10^6 nodes they are
        # 90 MiB that the winner's justification would otherwise hold on to
        cache.pop("units", None)
    # 6. the other baselines' answers (topo, metis, the seed method alone), as the work budget
    #    allows (the variants' or the search's): never worse than them
    if baselines and (count > 0 or pays_for_baselines(effort, size)) \
            and not (found and (proven() or late("the other baselines", 2.0))):
        for name, place, s in baseline_candidates(problem, "static", seed):
            if fits(np.bincount(place, weights=problem.memory, minlength=g.k), np.asarray(capacity)).all():
                f = [s[v] + g.time[v] / g.speed[place[v]] for v in range(n)]
                add(_BASELINE_TAGS[name], place, s, f)
    # 5. the hint, and everything on the fastest device that holds it
    if hint is not None:
        ph = project_constraints(problem, g, np.asarray(hint).tolist())
        ph = repair_memory(problem, g, ph, capacity, units()) or greedy_fill(problem, ph, capacity, units())
        if ph is not None:
            s3, f3, ms3 = schedule_placement(g, ph, jr)
            found.append((ms3, 2, ph, s3, f3))
    usable = problem.allowed.all(axis=0) & fits(float(problem.memory.sum()), np.asarray(capacity))
    if usable.any():
        d = int(np.argmax(np.where(usable, problem.device_speed, -np.inf)))
        # One device runs everything back to back, so its makespan is at least the sum of the
        # run times there (up to rounding, <= n ulps): when that sum is clearly above the best
        # candidate it cannot win, and its O((V + E) log V) schedule is not built.
        busy = float(np.sum(problem.time)) / g.speed[d]
        if may_win(busy, found):
            p1 = [d] * g.n
            s1, f1, ms1 = schedule_placement(g, p1, 0)
            found.append((ms1, 4, p1, s1, f1))
        else:
            stats["single_device_bound"] = busy  # the candidate's makespan is at least this
    if not found:
        place = greedy_fill(problem, None, capacity, units())
        if place is None:
            place = greedy_fill(problem, None, capacity, units(), best_fit=True)
        if place is None and not late("the packing search"):
            place = pack_units(problem, capacity, units(), int(max(1.0, effort) * _PACK_EVALS),
                               lambda: late("the end of the packing search"), effort=effort)
        if place is None:
            return None
        s, f, ms = schedule_placement(g, place, jr)
        found.append((ms, 3, place, s, f))
    found.sort(key=lambda x: (x[0], x[1]))
    ms, tag, place, s, f = found[0]
    if jr and not justify_all and not proven() and not late("the final justification"):
        s, f, ms = justify(g, place, s, f, jr)
    stats["construction"] = _TAGS.get(tag, "eft-variant")
    stats["constructions_tried"] = len(found)
    used = 0
    if (search and effort * _SEARCH_FROM >= 2 * _MIN_EVALS * size and g.k > 1 and not proven()
            and not late("the improvement", 0.5)):
        def restarts():
            """The search's restarts: the EFT priority variants above, continued."""
            for order in orders:
                rv = eft_schedule(g, capacity, topological_priority(g, order))
                if rv is not None:
                    yield rv[0], (justify(g, *rv, jr)[0] if jr else rv[1])

        out = improve_schedule(g, place, s, problem.allowed, units(), capacity, work, deadline, seed=seed,
                               perturb=small, justify_rounds=jr, justified=small, lower=lower,
                               restarts=None if small else restarts(), restart_cost=(g.k + 2 + 2 * jr) * size)
        used = out["work"]
        if out["makespan"] < ms:
            s2, f2, ms2 = justify(g, out["place"], out["start"], out["finish"], jr)
            ms, place, s, f = ms2, out["place"], s2, f2
            stats["construction"] += "+search"
        if out["stopped"]:
            late("the end of the improvement budget")
    stats["search_work"] = used
    stats["search_budget"] = work
    # 7. a declared training step's pipeline-stage placement, a finished answer (:mod:`.stage_candidate`)
    got = None if not baselines or close_enough(ms) or late("the stage placement") \
        else static_stage_candidate(problem, g, capacity, effort, deadline, jr)
    if got is not None and got[0] < ms:
        (ms, place, s, f), stats["construction"] = got, "stage-seed"
    return ms, place, s, f


def _variant_orders(g: Graph, seed: int):
    """EFT priorities beyond HEFT's: rank_u + rank_d, then rank_u times seeded noise in
    [0.9, 1.1] (one stream: more effort, or the search's restarts, continue it)."""
    top, bottom = levels(g)
    base = np.asarray(bottom)
    yield np.asarray(top) + base
    rng = np.random.default_rng(seed)
    while True:
        yield base * rng.uniform(0.9, 1.1, size=g.n)


_BASELINE_TAGS = {"topo": 6, "metis": 7, "pardnn": 8}
_TAGS = {6: "topo", 7: "metis", 8: "pardnn-baseline", 9: "heft-near", 0: "pardnn", 1: "heft", 2: "hint", 3: "greedy-fill", 4: "single", 5: "etf", 10: "eft-rank-sum"}


def _single_device(problem: Problem, g: Graph):
    """Everything on one device: peak memory there is at most the static total (no copies)."""
    usable = problem.allowed.all(axis=0)
    best = None
    for d in sorted(range(g.k), key=lambda d: (-g.speed[d], d)):
        if not usable[d]:
            continue
        place = [d] * g.n
        s, f, ms = schedule_placement(g, place, 0)
        peak = peak_memory(problem, np.asarray(place), np.asarray(s), np.asarray(f))
        if fits(peak[d], problem.device_memory[d]):
            best = (ms, place, s, f)
            break
    return best


@SPEC.checked("heuristic")
def solve(problem: Problem, *, time_limit: float | None = None, seed: int = 0, hint=None,
          memory_model: str = "static", effort: float = 1.0, gap: float = 1e-4, workers: int = 2) -> Solution:
    """Place and schedule ``problem`` (see the module docstring).

    Parameters
    ----------
    problem : Problem
        The instance, with devices.
    seed : int
        Seeds the randomised improvement (equal seeds, equal results without a time limit).
    hint : placement, optional
        A starting placement, one of the candidates (projected onto the constraints).
    memory_model : {"static", "peak"}
        The memory model every returned placement respects.
    effort : float
        0: constructions only; 1 (default): bounded improvement sized for the speed
        targets; higher: proportionally more schedule evaluations (capped). Less effort's
        answers are candidates: above effort 1 the default's, above 0 the constructions'
        alone (effort 0), so more effort never returns a worse answer, nor none where
        effort 0 finds one.
    time_limit : float, optional
        Wall-clock cap (makes the result depend on timing); the call returns within
        about ``time_limit`` plus the time of the first construction.
    gap : float
        Once a candidate is within this fraction of the proven lower bound, the later stages
        (variants, the seed method, the other baselines, the search) are skipped: none could
        shorten the answer by more than that. Default 1e-4 (as a MIP solver's relative gap);
        0 skips them only at the bound (``stats["within_gap"]`` says when it applied).
    workers : int
        Processes the first constructions may use (default 2): from 2*10^5 nodes + edges, on
        Linux with two CPUs or more, m-ETF's construction runs in a forked process beside HEFT's
        (:mod:`.baseline_constructions`; ``stats["processes"]``). The answer is the same with 1.

    Returns
    -------
    Solution
        The best placement found and its schedule (``unknown`` with the reason when no
        construction fits memory).
    """
    t0 = _time.perf_counter()
    deadline = None if time_limit is None else t0 + _DEADLINE_SHARE * float(time_limit)
    if problem.n_nodes == 0:
        return Solution(Status.OPTIMAL, placement=np.zeros(0, dtype=np.int64), start=np.zeros(0))
    capacity = problem.device_memory.astype(float).tolist()
    reason = None if memory_model == "peak" and problem.has_split else _pinned_overflow(problem, capacity)  # peak: .peak checks
    if reason is not None:
        return Solution(Status.INFEASIBLE, message=reason, memory_model=memory_model)
    g = Graph(problem)
    sol = _solve_at(problem, g, capacity, memory_model, effort, hint, seed, time_limit, deadline, gap, workers)
    # more effort never returns a worse answer than less: above the default the default's
    # answer is a candidate, and above 0 the constructions' alone (effort 0). Under the static
    # model every effort-0 construction is a candidate of any effort's own run (_construct), so
    # effort 0 runs again only when that found no placement; the peak model's search differs.
    peak = memory_model == "peak" and problem.has_split
    for low_effort in [e for e in (_DEFAULT_EFFORT, 0.0) if e < effort]:
        if sol.status in (Status.OPTIMAL, Status.INFEASIBLE):
            break
        if low_effort == 0.0 and not peak and sol.status.has_solution:
            continue
        low = _solve_at(problem, g, problem.device_memory.astype(float).tolist(), memory_model, low_effort,
                        hint, seed, time_limit, deadline, gap, workers)
        if _makespan(g, low) < _makespan(g, sol):
            low.stats["kept"] = f"the answer at effort {low_effort:g} (shorter than at effort {effort:g})"
            low.stats["effort_makespan"] = _makespan(g, sol)
            sol = low
    return sol


def _makespan(g: Graph, sol: Solution) -> float:
    """Makespan of a solution's own schedule; inf without a placement."""
    if not sol.status.has_solution or sol.placement is None or sol.start is None:
        return float("inf")
    if len(sol.placement) == 0:
        return 0.0
    return float(np.max(sol.start + np.asarray(g.time) / np.asarray(g.speed)[sol.placement]))


def _solve_at(problem: Problem, g: Graph, capacity: list[float], memory_model: str, effort: float, hint,
              seed: int, time_limit, deadline, gap: float = 0.0, workers: int = 1) -> Solution:
    """The heuristic at one effort (:func:`solve` after its checks)."""
    if memory_model == "peak" and problem.has_split:
        try:
            from .peak import solve_peak
        except ImportError:
            solve_peak = None
        if solve_peak is not None:   # (an answer effort 0 finds is kept by :func:`solve`)
            return solve_peak(problem, g, time_limit=time_limit, seed=seed, hint=hint, effort=effort,
                              deadline=deadline)
    stats: dict = {}
    best = None
    # the generic bounds cost O(n k) with constraints; on huge instances only the work bound
    lb = problem_lower_bound(problem) if g.n * g.k <= _BOUND_SIZE else work_bound(problem)
    rounds = 6 if memory_model == "peak" else 1
    for _ in range(rounds):
        with no_gc():  # millions of small lists and tuples at 10^6 nodes: cyclic passes were 7x memory_units
            best = _construct(problem, g, capacity, effort, hint, deadline, seed, stats, lower=lb, gap=gap,
                              workers=workers)
        if best is None or memory_model == "static":
            break
        _, place, s, f = best
        peak = peak_memory(problem, np.asarray(place), np.asarray(s), np.asarray(f))
        over = ~fits(peak, problem.device_memory)
        if not over.any():
            break
        # Leave the excess free under the static model and try again.
        for d in np.flatnonzero(over).tolist():
            capacity[d] = max(0.0, capacity[d] - float(peak[d] - problem.device_memory[d]) * 1.05)
        best = None
    if best is None and memory_model == "peak":
        best = _single_device(problem, g)
    if best is None:
        msg = ("no placement within memory was found"
               + (" under the peak model" if memory_model == "peak" else "")
               + " (the heuristic's guarantee needs every device to hold total/k plus the largest "
                 "colocation group, and no forbidden devices)")
        return Solution(Status.UNKNOWN, message=msg, memory_model=memory_model, stats=stats)
    ms, place, s, f = best
    status = Status.OPTIMAL if ms <= lb + time_tolerance(ms) else Status.FEASIBLE
    message = f"stopped early: {stats['stopped']}" if "stopped" in stats else ""
    return Solution(status, placement=np.asarray(place, dtype=np.int64), start=np.asarray(s),
                    memory_model=memory_model, stats=stats, message=message)
