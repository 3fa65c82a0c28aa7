"""Phase 3, *refinement* against the simulated schedule (ParDNN, section 4.3).

The C++ port of ParDNN (ParCoreLab/pardnn) has no refinement; the authors' Python
research code (``src/preprocessing/v5_pardnn.py``) refines the mapping in up to
``k + 1`` rounds (one when the critical path is ten times longer than the second
path: "strongly uni-critical-path" graphs). Each round:

1. simulates the schedule of the placement (start times ``T``) and its reverse
   (``B(v)``: from the start of ``v`` to the end of the reversed schedule);
2. takes the critical path of the placement's levels (an edge inside one device is
   free), traced from the heaviest sink back through the heaviest predecessors;
3. for every edge ``u -> w`` of that path that crosses devices, estimates what moving
   ``u`` to ``w``'s device saves: ``u`` would start once its inputs are there and each
   child ``a`` of ``u`` would then finish its path by ``start + d(u) + c(u, a) + B(a)``
   instead of ``max(T(w) + B(w), T(a) + B(a))``; the smallest gain over the children
   counts;
4. even rounds move the single best ``u`` (gain > 0), odd rounds every ``u`` with a
   positive gain, in path order.

Here a node moves with its colocation group (a unit) and only to a device the unit may
use, the schedule is our insertion replay (:func:`optpart.schedule.insertion.schedule_placement`), and,
unlike the research code, a round is kept only when the rescheduled makespan (then the
sum of finish times) is lower; otherwise refinement stops. Each round costs two
schedules, ``O((V + E) log V)``.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ..._docstrings import fill_doc
from ...model.paths import bottom_levels_csr, top_levels_csr
from ...schedule.insertion import edge_comm
from ...schedule import Graph, schedule_placement
from ...schedule.insertion import insertion_times

__all__ = ["refine", "refinement_rounds"]


@fill_doc
def refinement_rounds(g: Graph, paths: list[list[int]]) -> int:
    """``k + 1`` rounds, or one when the critical path is over ten times longer than the next path.

    Parameters
    ----------
    %(g)s
    paths : list of list of int
        Phase 1's paths (``paths[0]`` the critical path).

    Returns
    -------
    int
        The research code's ``iterations_threshold``.
    """
    if len(paths) > 1 and len(paths[0]) / (max(len(p) for p in paths[1:]) + 1) > 10:
        return 1
    return g.k + 1


def _critical_path(g: Graph, place: Sequence[int]) -> list[int]:
    """The heaviest path under ``place`` (transfers between devices only), last node first."""
    dur = [g.time[v] / g.speed[place[v]] for v in range(g.n)]
    c_out = edge_comm(g, place, reverse=True)
    topo = g.topo.tolist()
    top = top_levels_csr(topo, g.out_ptr, g.succ, dur, c_out)
    bot = bottom_levels_csr(topo, g.out_ptr, g.succ, dur, c_out)
    wl = [a + b for a, b in zip(top, bot)]
    sinks = [v for v in range(g.n) if g.out_ptr[v] == g.out_ptr[v + 1]]
    canon = g.canon
    v = max(sinks, key=lambda x: (wl[x], -canon[x]))
    path = [v]
    while g.in_ptr[v] < g.in_ptr[v + 1]:
        v = max(g.pred[g.in_ptr[v]:g.in_ptr[v + 1]], key=lambda x: (wl[x], -canon[x]))
        path.append(v)
    return path


def _gain(g: Graph, place: Sequence[int], u: int, w: int, start: list[float], back: list[float],
          finish: list[float]) -> float:
    """Estimated saving of moving ``u`` to the device of its child ``w`` (step 3)."""
    d = place[w]
    ready = 0.0
    for i in range(g.in_ptr[u], g.in_ptr[u + 1]):
        r = g.pred[i]
        x = finish[r] + (g.comm(g.in_bytes[i], place[r], d) if place[r] != d else 0.0)
        ready = max(ready, x)
    end_u = ready + g.duration(u, d)
    now = start[w] + back[w]
    gain = float("inf")
    ob = g.out_bytes
    for i in range(g.out_ptr[u], g.out_ptr[u + 1]):
        a = g.succ[i]
        c = g.comm(ob[i], d, place[a]) if place[a] != d else 0.0
        gain = min(gain, max(now, start[a] + back[a]) - (end_u + c + back[a]))
    return gain if gain != float("inf") else 0.0


def _move(place: list[int], u: int, d: int, unit_of: Sequence[int], members: Sequence[Sequence[int]],
          allowed: np.ndarray) -> bool:
    """Move ``u``'s unit to ``d`` when every member may use it."""
    grp = members[unit_of[u]]
    if place[u] == d or not all(allowed[v, d] for v in grp):
        return False
    for v in grp:
        place[v] = d
    return True


@fill_doc
def refine(g: Graph, place: list[int], unit_of: Sequence[int], members: Sequence[Sequence[int]],
           allowed: np.ndarray, rounds: int) -> tuple[list[int], int]:
    """Refine ``place`` for up to ``rounds`` rounds (see the module docstring).

    Parameters
    ----------
    %(g)s
    place : list of int
        Device of every node (constraints already projected).
    unit_of, members
        Colocation units (:func:`optpart.schedule.units.memory_units`): a node moves with its unit.
    allowed : numpy.ndarray
        ``allowed[v, d]``: node ``v`` may run on device ``d``.
    rounds : int
        Rounds at most (:func:`refinement_rounds`).

    Returns
    -------
    (place, kept) : tuple
        The refined placement (a new list) and the number of rounds kept. Memory is not
        considered (phase 4 follows).
    """
    place = list(place)
    if g.n == 0 or g.k < 2:
        return place, 0
    s, f, ms = schedule_placement(g, place, 0)
    score = (ms, sum(f))
    kept = 0
    for r in range(rounds):
        order = np.lexsort((-np.asarray(g.canon), -np.asarray(f))).tolist()  # latest finish first: reversed topological
        _rs, back = insertion_times(g, place, order, reverse=True)
        path = _critical_path(g, place)
        new = list(place)
        best, best_u, best_d = 0.0, -1, -1
        for i in range(len(path) - 1, 0, -1):
            u, w = path[i], path[i - 1]
            if new[u] == new[w]:
                continue
            gain = _gain(g, new, u, w, s, back, f)
            if gain <= 0.0:
                continue
            if r % 2:
                _move(new, u, new[w], unit_of, members, allowed)
            elif gain > best:
                best, best_u, best_d = gain, u, new[w]
        if best_u >= 0:
            _move(new, best_u, best_d, unit_of, members, allowed)
        if new == place:
            break
        s2, f2, ms2 = schedule_placement(g, new, 0)
        if (ms2, sum(f2)) >= score:
            break
        place, s, f, score = new, s2, f2, (ms2, sum(f2))
        kept += 1
    return place, kept
