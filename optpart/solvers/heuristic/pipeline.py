"""The heuristic's pipeline: named constructions in order, each offered as a candidate.

A :class:`Run` holds one solve: the problem, the memory model, the budgets, the proven lower
bound and the incumbent (the shortest candidate that fits; only it keeps its lists, tens of MiB
at 10^6 nodes). :data:`CONSTRUCTIONS` runs in order, each a function of the run whose docstring
says when it wins. Once the incumbent is within ``gap`` of the lower bound the rest is skipped,
and a list scheduler given the incumbent's makespan stops as soon as it cannot beat it
(:class:`optpart.schedule.eft.Beaten`). Budgets count work (nodes and edges visited), never
seconds. ``stats["stages"]`` gives the shortest makespan each stage produced (inf: none that fits)
and ``stats["stage_seconds"]`` what each cost (wall time, so kept apart from the deterministic
stats).
"""

from __future__ import annotations

import time as _time
from array import array
from functools import cached_property

import numpy as np

from ...bounds import problem_lower_bound, work_bound
from ...evaluate import canonical_schedule, time_tolerance
from ...model.memory import fits, peak_memory
from ...model.paths import priority_order
from ...model.problem import Problem
from ...schedule import Beaten, Graph, NoRoom, StaticPolicy, TimeUp, eft_schedule, etf_schedule, justify
from ...schedule.forked import Forked
from ...schedule.graph import topological_order
from ...schedule.insertion import schedule_placement
from ...schedule.units import greedy_fill, memory_units, pack_units, project_constraints
from ..._docstrings import fill_doc
from .peak import static_answers

__all__ = ["Run", "CONSTRUCTIONS", "construct"]

#: Nodes + edges from which m-ETF's construction runs in a forked process beside HEFT's.
FORK_SIZE = 200_000
#: (nodes + edges) x noisy orders per unit of effort, the most noisy orders per unit of effort,
#: and at most whatever the effort.
NOISY_WORK, NOISY_ORDERS, MAX_NOISY = 50_000, 24, 2_000
#: Nodes + edges up to which every candidate is justified at effort 1 (above: the winner only).
JUSTIFY_ALL = 30_000
#: Nodes x devices up to which the lower bound is the generic one (above: the work bound only).
BOUND_SIZE = 8_000_000
#: Packing-search evaluations per unit of effort when no greedy fill fits.
PACK_EVALS = 2_000_000


class Run:
    """One solve's state (see the module docstring).

    Parameters
    ----------
    problem : Problem
        The problem, with devices.
    g : Graph
        ``problem`` as plain lists.
    model : {"static", "peak"}
        The memory model every candidate must fit (under ``peak`` on its own schedule).
    effort, seed, hint, deadline, gap, workers
        As for :func:`optpart.solvers.heuristic.solve` (``deadline`` a ``time.perf_counter()`` value).
    """

    def __init__(self, problem: Problem, g: Graph, model: str, effort: float, seed: int, hint, deadline,
                 gap: float, workers: int) -> None:
        self.problem, self.g, self.effort, self.seed, self.hint = problem, g, effort, seed, hint
        self.deadline, self.gap, self.workers, self.side = deadline, gap, workers, None
        self.peak = model == "peak" and problem.has_split
        self.capacity = problem.device_memory.astype(float).tolist()
        self.size = g.n + problem.n_edges
        self.lower = problem_lower_bound(problem) if g.n * g.k <= BOUND_SIZE else work_bound(problem)
        self.jr = 1 if effort > 0 else 0
        self.justify_all = self.jr and effort * JUSTIFY_ALL >= self.size
        self.best: tuple | None = None        # (makespan, name, place, start, finish)
        self.closest: tuple | None = None     # peak: (worst peak / capacity, name, place, start)
        self.stages: dict[str, float] = {}          # stage -> the shortest makespan it produced
        self.stage_seconds: dict[str, float] = {}   # stage -> its wall seconds
        self.stats: dict = {"stages": self.stages, "stage_seconds": self.stage_seconds}
        self.unit = 0.0                       # seconds of HEFT's construction: the yardstick of `late`
        self._units = None
        self.noisy = _noisy_orders(g, seed)    # one stream: the constructions, then the search's restarts

    # ------------------------------------------------------------------ bookkeeping
    def units(self):
        """The memory units, built on first use.

        Returns
        -------
        tuple
            :func:`optpart.schedule.units.memory_units` of the problem.
        """
        if self._units is None:
            self._units = memory_units(self.problem)
        return self._units

    def policy(self):
        """A fresh memory policy for one construction.

        Returns
        -------
        MemoryPolicy
            Liveness under peak, else static within :attr:`capacity`.
        """
        if self.peak:
            from ...schedule.liveness import LivenessPolicy
            return LivenessPolicy(self.problem)
        return StaticPolicy(self.problem, capacity=self.capacity, solver="heuristic")

    @cached_property
    def heft_order(self) -> list[int]:
        """HEFT's node order: decreasing upward rank, ties by topological position."""
        return priority_order(self.problem, np.asarray(self.g.mean_bottom)).tolist()

    @property
    def makespan(self) -> float:
        """The incumbent's makespan (inf before any candidate)."""
        return self.best[0] if self.best else float("inf")

    def bound(self) -> float | None:
        """What a construction must beat to matter.

        Returns
        -------
        float or None
            The incumbent's makespan (None before any candidate).
        """
        return self.best[0] if self.best else None

    def settled(self) -> bool:
        """Whether the incumbent meets the lower bound, or is within ``gap`` of it: no later stage
        can shorten it by more than that (``stats`` says which).

        Returns
        -------
        bool
        """
        ms = self.makespan
        if self.lower <= 0 or not np.isfinite(ms):
            return False
        if ms <= self.lower + time_tolerance(self.lower):
            self.stats.setdefault("proven_optimal", "a candidate meets the lower bound; later stages skipped")
            return True
        if ms <= self.lower * (1.0 + self.gap):
            self.stats.setdefault("within_gap", f"a candidate is within {self.gap:g} of the lower bound "
                                                f"({ms / self.lower - 1:.3g}); later stages skipped")
            return True
        return False

    def late(self, stage: str, cost: float = 0.0) -> bool:
        """Whether the deadline has passed, or a stage costing ``cost`` HEFT constructions would
        pass it (then said in ``stats["stopped"]``).

        Parameters
        ----------
        stage : str
            The stage, as the message names it.
        cost : float
            Its cost in HEFT constructions.

        Returns
        -------
        bool
        """
        if self.deadline is not None and _time.perf_counter() + cost * self.unit > self.deadline:
            self.stats.setdefault("stopped", f"time limit reached before {stage}")
            return True
        return False

    def fits_peak(self, place, start, finish) -> bool:
        """Whether a schedule's liveness peak fits every device (always under static); the
        closest overflowing one is remembered for the overflow search.

        Parameters
        ----------
        place, start, finish : sequence
            The placement and its schedule.

        Returns
        -------
        bool
        """
        if not self.peak:
            return True
        p = self.problem
        peak = peak_memory(p, np.asarray(place, dtype=np.int64), np.asarray(start), np.asarray(finish))
        ok = fits(peak, p.device_memory)
        if not ok.all():
            worst = float(np.max(peak / np.maximum(p.device_memory, 1e-300)))
            if self.closest is None or worst < self.closest[0]:
                self.closest = (worst, "", list(place), list(start))
        return bool(ok.all())

    def offer(self, name: str, place, start, finish, seconds: float = 0.0) -> bool:
        """A candidate: justified when every candidate is (never longer), kept when it fits and
        beats the incumbent (ties: the earlier one).

        Parameters
        ----------
        name : str
            Its stage.
        place, start, finish : sequence
            The placement and its schedule.
        seconds : float
            What building it took (added to the stage's).

        Returns
        -------
        bool
            Whether it fits the memory model.
        """
        g = self.g
        tried = []
        if self.justify_all:
            tried.append(justify(g, place, start, finish, self.jr)[:2])
        tried.append((start, finish))
        if self.peak:  # another order of the same placement may shorten the lifetimes that overflow
            cs, cf = canonical_schedule(self.problem, np.asarray(place, dtype=np.int64))
            tried.append((cs.tolist(), cf.tolist()))
        self.stages.setdefault(name, float("inf"))
        self.stage_seconds[name] = self.stage_seconds.get(name, 0.0) + seconds
        for s, f in tried:
            if self.fits_peak(place, s, f):
                ms = max(f) if len(f) else 0.0
                self.stages[name] = min(self.stages[name], ms)
                if ms < self.makespan:
                    self.best = (ms, name, list(place), list(s), list(f))
                return True
        return False

    def timed(self, name: str, build) -> None:
        """Build a candidate and offer it, timed; a construction that dead-ends or is beaten offers
        nothing.

        Parameters
        ----------
        name : str
            Its stage.
        build : callable
            Returns ``(place, start, finish)``; may raise ``NoRoom``, ``Beaten`` or ``TimeUp``.
        """
        t0 = _time.perf_counter()
        try:
            got = build()
        except (NoRoom, Beaten):
            got = None
        except TimeUp:
            got = None
            self.stats.setdefault("stopped", f"time limit reached during {name}")
        if got is not None:
            self.offer(name, *got, seconds=_time.perf_counter() - t0)
        else:
            self.stages.setdefault(name, float("inf"))
            self.stage_seconds[name] = self.stage_seconds.get(name, 0.0) + _time.perf_counter() - t0


# ---------------------------------------------------------------------- the constructions

@fill_doc
def heft(run: Run) -> None:
    """HEFT (Topcuoglu, Hariri, Wu, TPDS 2002): upward-rank order, earliest finish with insertion,
    every device a candidate: exactly the ``heft`` baseline's schedule, so the answer is never
    worse than it. Wins where transfers are cheap and the critical path sets the makespan. On
    large graphs m-ETF's construction is started in a forked process first (:mod:`.forked`), and
    HEFT's time is the yardstick of the later stages' deadline checks.

    Parameters
    ----------
    %(run)s
    """
    g = run.g
    if run.workers > 1 and run.size >= FORK_SIZE and not run.peak:
        # both processes read arrays (:meth:`Graph.compact`): pages only read stay shared
        priority, hg = array("d", g.mean_bottom), g.compact()
        side = Forked(lambda: etf_schedule(hg, priority, run.policy(), deadline=run.deadline))
        run.side, g = (side, hg) if side.forked else (None, g)
    run.stats["processes"] = 2 if run.side else 1
    t0 = _time.perf_counter()
    run.timed("heft", lambda: _as_tuple(eft_schedule(g, run.heft_order, run.policy())))
    run.unit = _time.perf_counter() - t0


@fill_doc
def etf(run: Run) -> None:
    """m-ETF (Hwang et al., SIAM J. Comput. 1989; Baechi, SoCC 2020): the ready node and device
    that can start earliest: exactly the ``etf`` baseline's schedule (the answer is never worse
    than it). Wins on most planted graphs, where every device is busy and a greedy that keeps
    them busy reaches the optimum within a fraction of a percent.

    Parameters
    ----------
    %(run)s
    """
    side = run.side
    if side is not None:
        try:
            run.timed("etf", lambda: _as_tuple(side.result()))
        finally:
            side.close()
            run.side = None
        return
    run.timed("etf", lambda: _as_tuple(etf_schedule(run.g, run.g.mean_bottom, run.policy(), run.deadline,
                                                    bound=run.bound())))


@fill_doc
def heft_near(run: Run) -> None:
    """HEFT with each node's candidates cut to its predecessors' devices and the device that
    frees first: a node follows its data unless a device is idle. Wins where tight edges join
    neighbours of one device (the planted ``local`` rule), which HEFT's full choice splits.

    Parameters
    ----------
    %(run)s
    """
    g = run.g
    if g.k > 2:
        run.timed("heft-near", lambda: _as_tuple(eft_schedule(g, run.heft_order, run.policy(), "near",
                                                              bound=run.bound())))


@fill_doc
def noisy_eft(run: Run) -> None:
    """HEFT's construction in other orders: the upward rank times seeded noise in [0.9, 1.1],
    drawn in the canonical order (:attr:`optpart.schedule.graph.Graph.canon`), as many as
    ``effort x NOISY_WORK / (nodes + edges)`` pays for (the search's restarts continue
    them). Wins on small graphs (a few hundred nodes) where one order's ties and near-ties
    decide the makespan.

    Parameters
    ----------
    %(run)s
    """
    count = int(min(NOISY_ORDERS * max(1.0, run.effort) + 1, MAX_NOISY, run.effort * NOISY_WORK / max(1, run.size)))
    for _ in range(count):
        if run.settled() or run.late("a noisy order", 1.2):
            break
        order = next(run.noisy)
        run.timed("noisy-eft", lambda: _as_tuple(eft_schedule(run.g, order, run.policy(), bound=run.bound())))


@fill_doc
def hint(run: Run) -> None:
    """The user's placement, projected onto the constraints (and under static refilled within
    memory): a known answer the heuristic never does worse than.

    Parameters
    ----------
    %(run)s
    """
    if run.hint is None:
        return
    p = run.problem
    place = project_constraints(p, np.asarray(run.hint).tolist())
    if not run.peak and not fits(np.bincount(place, weights=p.memory, minlength=p.n_devices),
                                 np.asarray(run.capacity)).all():
        place = greedy_fill(p, place, run.capacity, run.units())
    if place is not None:
        run.offer("hint", place, *schedule_placement(run.g, place, run.jr)[:2])


@fill_doc
def single(run: Run) -> None:
    """Everything on the fastest device that holds it (the ``single`` baseline): wins when
    transfers cost more than the parallelism saves. Skipped when its run time alone (a bound on
    its makespan) exceeds the incumbent.

    Parameters
    ----------
    %(run)s
    """
    p, g = run.problem, run.g
    usable = p.allowed.all(axis=0)
    if not run.peak:
        usable &= fits(float(p.memory.sum()), np.asarray(run.capacity))
    for d in sorted(np.flatnonzero(usable).tolist(), key=lambda d: (-g.speed[d], d)):
        if float(np.sum(p.time)) / g.speed[d] > run.makespan * (1 + 1e-6):
            return
        place = [d] * g.n
        if run.offer("single", place, *schedule_placement(g, place, 0)[:2]):
            return


def _baseline(run: Run, name: str) -> None:
    """Offer the answer of the baseline ``name`` (its placement with its own schedule, else the
    canonical one) when the work budget pays: :data:`BASELINE_COST` per node and edge (up to
    4*10^5 nodes + edges at the default effort)."""
    if run.effort * BASELINE_WORK < BASELINE_COST * run.size:
        return
    from importlib import import_module

    from ...errors import SolverError
    module = import_module(f"optpart.solvers.{'pardnn' if name == 'pardnn' else 'baselines.' + name}")
    t0 = _time.perf_counter()
    try:
        sol = module.solve(run.problem, seed=run.seed, memory_model="peak" if run.peak and name == "pardnn"
                           else "static")
    except (ImportError, SolverError):   # metis without pymetis
        return
    if sol.status.has_solution and sol.placement is not None:
        place = np.asarray(sol.placement, dtype=np.int64)
        start = np.asarray(sol.start if sol.start is not None else canonical_schedule(run.problem, place)[0])
        if run.peak or fits(np.bincount(place, weights=run.problem.memory, minlength=run.g.k),
                            np.asarray(run.capacity)).all():
            run.offer(name, place.tolist(), start.tolist(), (start + run.problem.duration(place)).tolist(),
                      seconds=_time.perf_counter() - t0)


@fill_doc
def topo(run: Run) -> None:
    """m-TOPO's consecutive stages (``topo``): wins on training steps of 10^4 nodes and more, whose
    forward and backward passes pipeline over the devices.

    Parameters
    ----------
    %(run)s
    """
    _baseline(run, "topo")


@fill_doc
def metis(run: Run) -> None:
    """METIS's balanced partition (``metis``, with pymetis): wins on some fork-join graphs, where
    cutting few bytes matters more than the order.

    Parameters
    ----------
    %(run)s
    """
    _baseline(run, "metis")


@fill_doc
def pardnn(run: Run) -> None:
    """The seed method (:mod:`optpart.solvers.pardnn`, under either model): wins on training steps of
    10^4 nodes and more, by up to a fifth, where its clusters keep each layer's chain on one device.

    Parameters
    ----------
    %(run)s
    """
    _baseline(run, "pardnn")


#: The work budget per unit of effort that pays for the baselines' answers, and their cost per node and edge.
BASELINE_WORK, BASELINE_COST = 1_200_000, 3
#: The constructions, in the order they run (the search and the memory fallback follow).
CONSTRUCTIONS = (("heft", heft), ("etf", etf), ("heft-near", heft_near), ("noisy-eft", noisy_eft),
                 ("static", static_answers), ("topo", topo), ("metis", metis), ("pardnn", pardnn), ("hint", hint),
                 ("single", single))


def construct(run: Run) -> None:
    """Every construction of :data:`CONSTRUCTIONS` (HEFT's and m-ETF's always; the others until
    the incumbent is settled or the deadline passes), then the static fallback when nothing fits.

    Parameters
    ----------
    run : Run
        The solve (updated: its incumbent and ``stats``).
    """
    for name, build in CONSTRUCTIONS:
        if name not in ("heft", "etf") and (run.settled() or run.late(name, 1.0)):
            continue
        build(run)
    if run.best is None and not run.peak:
        fill(run)


@fill_doc
def fill(run: Run) -> None:
    """The static model's last resort: units by decreasing memory, worst then best fit, then a
    packing search (:func:`optpart.schedule.units.pack_units`); the guarantee of docs/heuristic.md.

    Parameters
    ----------
    %(run)s
    """
    p, units = run.problem, run.units()
    place = greedy_fill(p, None, run.capacity, units) or greedy_fill(p, None, run.capacity, units, best_fit=True)
    if place is None and not run.late("the packing search"):
        place = pack_units(p, run.capacity, units, int(max(1.0, run.effort) * PACK_EVALS),
                           lambda: run.late("the end of the packing search"), effort=run.effort)
    if place is not None:
        run.offer("fill", place, *schedule_placement(run.g, place, run.jr)[:2])


# ---------------------------------------------------------------------- helpers

def _as_tuple(res) -> tuple:
    return res.place, res.start, res.finish


def _noisy_orders(g: Graph, seed: int):
    """Endless topological orders by the upward rank times seeded noise in [0.9, 1.1], drawn in the
    canonical order so that renumbering the nodes changes nothing."""
    rng = np.random.default_rng(seed)
    base, canon = np.asarray(g.mean_bottom), np.asarray(g.canon)
    while True:
        yield topological_order(g, base * rng.uniform(0.9, 1.1, size=g.n)[canon])
