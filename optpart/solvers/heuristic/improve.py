"""Phases 3 and 6: schedule-aware moves of nodes (colocation groups as one unit).

Both phases share :func:`local_search`. A placement is scored by the schedule the
heuristic would return for it (bottom-level order with insertion,
:func:`.schedule.list_schedule`), compared lexicographically by (makespan, sum of
finish times): the second key lets the search walk across plateaus of equal makespan
without ever cycling, because every accepted move strictly lowers the pair.

* Phase 3, *refinement* (ParDNN, Qararyah et al. 2021, section 4.3): take the nodes on
  the critical chain of the simulated schedule and try moving each to the device of
  the chain neighbour it waits for; keep a move when it lowers the score. A bounded
  number of evaluations.
* Phase 6, *improvement* (ours): the same loop, but every allowed device with room is
  tried for each node of the critical chain, and when no chain move pays, every other
  unit is tried too ("first improvement" hill climbing) -- before those, moves that gather
  several units (a join's producers, a chain segment; :func:`_gather_moves`); then swaps of two units on
  different devices, which free memory on tight instances where no single move fits.
  :func:`iterated_search` wraps it in an iterated local search (seeded random moves and
  swaps, then hill climbing again, keeping the best). Runs for ``max_evals`` schedule
  evaluations (the ``effort`` option sets it) or until the ``deadline``. With
  ``keep_order`` moves are scored by replaying the incumbent schedule's start order.

Each evaluation reschedules the whole graph, O((V + E) log V); the evaluation budget
is therefore set from the graph size so that the default effort stays near-linear.
"""

from __future__ import annotations

import time as _time

import numpy as np

from ..._docstrings import fill_doc
from ...model.memory import fits as fits_memory
from .schedule import Graph, bottom_levels, critical_chain, justify, list_schedule, priority_order

__all__ = ["score", "local_search", "iterated_search"]


@fill_doc
def score(g: Graph, place: list[int], justified: bool = False, order: list[int] | None = None
          ) -> tuple[float, float, list[float], list[float]]:
    """(makespan, sum of finishes, start, finish) of the insertion schedule of ``place`` in
    ``order`` (default: bottom-level order), double-justified when ``justified``.

    Parameters
    ----------
    %(g_place)s
    justified : bool
        Double-justify the schedule (three replays instead of one).
    order : list of int, optional
        A topological order to replay (default: decreasing bottom level under ``place``).

    Returns
    -------
    tuple
        ``(makespan, sum of finishes, start, finish)``.
    """
    if order is None:
        order = priority_order(g, bottom_levels(g, place))
    s, f = list_schedule(g, place, order)
    if justified:
        s, f, _ = justify(g, place, s, f)
    return (max(f) if f else 0.0), sum(f), s, f


def start_order(g: Graph, start: list[float]) -> list[int]:
    """Nodes by start time, ties by topological position: a topological order.

    Parameters
    ----------
    g : Graph
        The problem as plain lists (:class:`optpart.schedule.graph.Graph`).
    start : list of float
        Start time of every node.

    Returns
    -------
    list of int
    """
    return np.lexsort((g.rank, np.asarray(start))).tolist()


class _Budget:
    def __init__(self, max_evals: int, deadline: float | None) -> None:
        self.left = max_evals
        self.deadline = deadline

    def take(self) -> bool:
        if self.left <= 0:
            return False
        if self.deadline is not None and _time.perf_counter() > self.deadline:
            self.left = 0
            return False
        self.left -= 1
        return True


@fill_doc
def local_search(g: Graph, place: list[int], allowed: np.ndarray, unit_of: list[int],
                 members: list[list[int]], unit_mem: list[float], capacity: list[float],
                 max_evals: int, deadline: float | None = None, mode: str = "all",
                 swaps: bool = True, justified: bool = False, keep_order: bool = False,
                 start: list[float] | None = None, out: dict | None = None, admit=None,
                 max_accepts: int | None = None, finish: list[float] | None = None) -> tuple[list[int], int]:
    """Hill-climb ``place`` by unit moves (and swaps); returns ``(place, evaluations used)``.

    ``mode="neighbors"`` is phase 3 (chain nodes to their chain neighbours' devices);
    ``mode="all"`` is phase 6; ``mode="chain"`` is phase 6 without the moves of units off
    the critical chain and without swaps (a neighbourhood small enough to exhaust). Memory (static, per ``capacity``) and constraints
    (``allowed``) hold after every accepted move. With ``keep_order`` a placement is
    scored by replaying the incumbent schedule's start order (a topological order)
    instead of its own bottom-level order: that keeps what a better scheduler (the EFT
    construction) found about the order, which the bottom-level order may lose; ``start``
    gives the incumbent schedule. ``out`` (a dict) receives the final ``start``/``finish``.

    Parameters
    ----------
    %(unit_search)s
    max_evals : int
        Schedule evaluations at most (the deterministic budget).
    deadline : float, optional
        ``time.perf_counter()`` value after which no evaluation starts.
    mode : {"all", "chain", "neighbors"}
        Phase 6, phase 6 on the critical chain only, or phase 3 (above).
    swaps : bool
        Try swaps of two units when no move pays.
    justified : bool
        Score double-justified schedules.
    keep_order : bool
        Score by replaying the incumbent's start order.
    start : list of float, optional
        The incumbent's start times (with ``keep_order``).
    finish : list of float, optional
        With ``start``: the incumbent's schedule is the reference a move must beat when it
        is shorter than the placement's replays.
    out : dict, optional
        Receives ``start``, ``finish``, ``makespan`` and ``accepts`` (moves kept) of the result.
    admit : callable, optional
        ``admit(place, start, finish) -> bool``: memory beyond the static bytes (the peak
        model), asked only for moves that pay.
    max_accepts : int, optional
        Stop after this many accepted moves.

    Returns
    -------
    tuple
        ``(place, evaluations used)``.
    """
    k = g.k
    place = list(place)
    if g.n == 0 or k < 2 or max_evals <= 0:
        return place, 0
    budget = _Budget(max_evals, deadline)
    n_units = len(members)
    unit_dev = [place[m[0]] for m in members]
    used = [0.0] * k
    for u in range(n_units):
        used[unit_dev[u]] += unit_mem[u]
    ok_rows = [allowed[m[0]].tolist() for m in members] if n_units * k <= 4_000_000 else None

    def ok(u: int, d: int) -> bool:
        return (ok_rows[u] if ok_rows is not None else allowed[members[u][0]].tolist())[d]

    def fits(u: int, d: int, freed: float = 0.0) -> bool:
        return fits_memory(used[d] - freed + unit_mem[u], capacity[d])

    def move(u: int, d: int) -> None:
        a = unit_dev[u]
        used[a] -= unit_mem[u]
        used[d] += unit_mem[u]
        unit_dev[u] = d
        for v in members[u]:
            place[v] = d

    order = None
    if keep_order:
        ms, tot, s, f = score(g, place, justified)
        order = start_order(g, s if start is None else start)
        ms2, tot2, s2, f2 = score(g, place, justified, order)
        if ms2 <= ms:
            ms, tot, s, f = ms2, tot2, s2, f2
        else:
            order = None
    else:
        ms, tot, s, f = score(g, place, justified)
    if start is not None and finish is not None and finish:
        ms0, tot0 = max(finish), sum(finish)
        if ms0 < ms or (ms0 == ms and tot0 < tot):
            ms, tot, s, f = ms0, tot0, list(start), list(finish)
    evals = 0
    tol = 1e-12
    accepts = [0]

    def done() -> tuple[list[int], int]:
        if out is not None:
            out["start"], out["finish"], out["makespan"], out["accepts"] = s, f, ms, accepts[0]
        return place, evals

    def better(a: float, b: float) -> bool:
        return a < ms - tol * max(1.0, ms) or (a <= ms + tol * max(1.0, ms) and b < tot - tol * max(1.0, tot))

    def attempt(moves: list[tuple[int, int]]) -> bool | None:
        """Apply ``moves`` ((unit, device) pairs) and score the result: keep it when better
        (True), else undo it (False); None when the budget is spent (nothing applied)."""
        nonlocal ms, tot, s, f, order, evals
        if not budget.take():
            return None
        evals += 1
        back = [(u, unit_dev[u]) for u, _ in moves]
        for u, d in moves:
            move(u, d)
        ms2, tot2, s2, f2 = score(g, place, justified, order)
        if better(ms2, tot2) and (admit is None or admit(place, s2, f2)):
            ms, tot, s, f = ms2, tot2, s2, f2
            if order is not None:
                order = start_order(g, s)
            accepts[0] += 1
            return True
        for u, a in reversed(back):
            move(u, a)
        return False

    def first_kept(candidates) -> bool | None:
        """:func:`attempt` each move list in turn (first improvement): True at the first one
        kept, False when none pays, None when the budget ran out."""
        for moves in candidates:
            kept = attempt(moves)
            if kept is not False:
                return kept
        return False

    # The neighbourhoods, generated lazily: a candidate is checked (constraints, memory)
    # after the previous one was scored and undone, so it sees the incumbent's state.
    def gather_moves(chain: list[int]):
        for group, d in _gather_moves(g, chain, place, unit_of):
            if not all(ok(u, d) for u in group):
                continue
            add = sum(unit_mem[u] for u in group if unit_dev[u] != d)
            if fits_memory(used[d] + add, capacity[d]):
                yield [(u, d) for u in group if unit_dev[u] != d]

    def unit_moves(units: list[int]):
        for u in units:
            a = unit_dev[u]
            if mode == "neighbors":
                targets = set()
                for v in members[u]:
                    for i in range(g.in_ptr[v], g.in_ptr[v + 1]):
                        targets.add(place[g.pred[i]])
                    for i in range(g.out_ptr[v], g.out_ptr[v + 1]):
                        targets.add(place[g.succ[i]])
                targets = sorted(targets)
            else:
                targets = range(k)
            for d in targets:
                if d != a and ok(u, d) and fits(u, d):
                    yield [(u, d)]

    def swap_moves(units: list[int]):
        for u in units:
            a = unit_dev[u]
            for w in range(n_units):
                b = unit_dev[w]
                if b == a or not ok(u, b) or not ok(w, a):
                    continue
                if fits(u, b, unit_mem[w]) and fits(w, a, unit_mem[u]):
                    yield [(u, b), (w, a)]

    while budget.left > 0 and (max_accepts is None or accepts[0] < max_accepts):
        chain = critical_chain(g, place, s, f)
        chain_units: list[int] = []
        seen = set()
        for v in chain:
            u = unit_of[v]
            if u not in seen:
                seen.add(u)
                chain_units.append(u)
        accepted = False
        trial_lists = [chain_units]
        if mode == "all":
            rest = [u for u in range(n_units) if u not in seen]
            trial_lists.append(rest)
        elif mode == "chain":  # the chain's units and the gather moves only
            trial_lists.append([])
        for li, units in enumerate(trial_lists):
            if li == 1:  # no single chain move pays: gather tasks first (see _gather_moves)
                accepted = first_kept(gather_moves(chain))
                if accepted is None:
                    return done()
                if accepted:
                    break
            accepted = first_kept(unit_moves(units))
            if accepted is None:
                return done()
            if accepted:
                break
        if accepted:
            continue
        if not (swaps and mode == "all" and n_units <= 3000):
            break
        # Swaps: a chain unit (then, on small graphs, any unit) with a unit on another device,
        # when neither move alone fits or pays.
        swap_units = chain_units + ([u for u in range(n_units) if u not in seen] if n_units <= 60 else [])
        accepted = first_kept(swap_moves(swap_units))
        if accepted is None:
            return done()
        if not accepted:
            break
    return done()


def _gather_moves(g: Graph, chain: list[int], place: list[int], unit_of: list[int]):
    """Moves of several units at once, along the critical ``chain`` (last node first):
    ``(units, device)``. One-node moves cannot pull a join together when each of its
    producers alone would only add a transfer elsewhere, which is why wide joins under
    costly communication stay split; so, for each chain node:

    * its *producers*: every predecessor's unit goes to the node's device (a join's inputs
      gathered where it runs);
    * its *path*: the run of chain nodes before it that share a device (a chain segment)
      goes to the device of the chain node after the run (the segment follows its reader).

    Each group is offered once, in chain order; deterministic."""
    seen: set[tuple] = set()
    for v in chain:
        d = place[v]
        group = sorted({unit_of[g.pred[i]] for i in range(g.in_ptr[v], g.in_ptr[v + 1])
                        if place[g.pred[i]] != d})
        if len(group) >= 2 and (tuple(group), d) not in seen:
            seen.add((tuple(group), d))
            yield group, d
    for i in range(1, len(chain)):  # chain[i] runs before chain[i - 1]
        d, b = place[chain[i - 1]], place[chain[i]]
        if d == b:
            continue
        run = []
        j = i
        while j < len(chain) and place[chain[j]] == b:
            run.append(unit_of[chain[j]])
            j += 1
        group = sorted(set(run))
        if len(group) >= 2 and (tuple(group), d) not in seen:
            seen.add((tuple(group), d))
            yield group, d


@fill_doc
def iterated_search(g: Graph, place: list[int], allowed: np.ndarray, unit_of: list[int],
                    members: list[list[int]], unit_mem: list[float], capacity: list[float],
                    max_evals: int, deadline: float | None = None, seed: int = 0,
                    justified: bool = False, keep_order: bool = False) -> tuple[list[int], int]:
    """Iterated local search (Lourenco, Martin, Stuetzle, 2003): hill-climb, then repeatedly
    move a few random units to random allowed devices with room and hill-climb again,
    keeping the best placement; until ``max_evals`` evaluations. Seeded, so deterministic.

    Parameters
    ----------
    %(unit_search)s
    max_evals : int
        Schedule evaluations at most, every round's hill climb and score included.
    deadline : float, optional
        ``time.perf_counter()`` value after which no round starts.
    seed : int
        Seed of the perturbations.
    justified, keep_order : bool
        As in :func:`local_search`.

    Returns
    -------
    tuple
        ``(best placement, evaluations used)``.
    """
    rng = np.random.default_rng(seed)
    best, used = local_search(g, place, allowed, unit_of, members, unit_mem, capacity, max_evals, deadline,
                              justified=justified, keep_order=keep_order)
    best_ms, best_tot, _, _ = score(g, best, justified)
    k, n_units = g.k, len(members)
    strength = max(2, n_units // 8)
    while used + 2 <= max_evals and (deadline is None or _time.perf_counter() < deadline):
        # each round: a hill climb of at most ``max_evals - used - 1`` evaluations, then one score
        cand = list(best)
        mem = [0.0] * k
        for u in range(n_units):
            mem[cand[members[u][0]]] += unit_mem[u]
        for u in rng.choice(n_units, size=min(strength, n_units), replace=False).tolist():
            ok = np.flatnonzero(allowed[members[u][0]]).tolist()
            d = ok[int(rng.integers(len(ok)))]
            a = cand[members[u][0]]
            if d == a:
                continue
            if fits_memory(mem[d] + unit_mem[u], capacity[d]):
                mem[a] -= unit_mem[u]
                mem[d] += unit_mem[u]
                for v in members[u]:
                    cand[v] = d
                continue
            # no room: swap with a random unit of that device when both fit
            others = [w for w in range(n_units) if cand[members[w][0]] == d and allowed[members[w][0], a]]
            if not others:
                continue
            w = others[int(rng.integers(len(others)))]
            if (fits_memory(mem[d] - unit_mem[w] + unit_mem[u], capacity[d])
                    and fits_memory(mem[a] - unit_mem[u] + unit_mem[w], capacity[a])):
                mem[a] += unit_mem[w] - unit_mem[u]
                mem[d] += unit_mem[u] - unit_mem[w]
                for v in members[u]:
                    cand[v] = d
                for v in members[w]:
                    cand[v] = a
        cand, more = local_search(g, cand, allowed, unit_of, members, unit_mem, capacity, max_evals - used - 1,
                                  deadline, justified=justified, keep_order=keep_order)
        used += more + 1
        ms, tot, _, _ = score(g, cand, justified)
        if ms < best_ms - 1e-12 * max(1.0, best_ms) or (ms <= best_ms and tot < best_tot):
            best, best_ms, best_tot = cand, ms, tot
    return best, used
