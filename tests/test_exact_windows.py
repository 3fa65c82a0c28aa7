"""Windowed CP-SAT large-neighbourhood search (optpart/solvers/lns_window.py) on large graphs.

Budgets are counted in windows (each with a CP-SAT deterministic budget), never in wall time.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

import optpart
from optpart import Status
from optpart.evaluate import canonical_schedule
from optpart.generators import layered_dag
from optpart.model.memory import overflow_message
from optpart.solvers.exact import _exact_common as xc
from optpart.solvers.exact import lns_window as lw


def _valid(problem: optpart.Problem, place: np.ndarray, start: np.ndarray, memory_model: str) -> float:
    """The schedule's makespan after the evaluator accepted it."""
    r = optpart.evaluate(problem, place, start, memory_model=memory_model)
    assert r.status is Status.FEASIBLE, r.message
    assert overflow_message(problem, place, start, start + problem.duration(place), memory_model) is None
    return float(r.makespan)


def test_windows_improve_a_one_device_schedule_and_stay_valid():
    p = layered_dag(160, k=4, seed=5, memory_slack=2.0)
    place = (p.topo_rank % 4).astype(np.int64)  # round robin: valid, and far from good
    assert np.all(optpart.static_memory(p, place) <= p.device_memory)
    start = canonical_schedule(p, place)[0]
    ms0 = float((start + p.duration(place)).max())
    new_place, new_start, stats = lw.improve_windows(p, place, start, xc.Budget(math.inf), memory_model="static",
                                                     reserve=0.0, size=60, max_windows=4)
    ms = _valid(p, new_place, new_start, "static")
    assert stats["window_solves"] >= 1 and stats["window_end_makespan"] == ms
    assert ms < ms0 * (1 - 1e-3), (ms, ms0)


def test_tails_meet_the_makespan_on_the_critical_path():
    p = layered_dag(40, k=3, seed=2)
    place = np.asarray(optpart.solve(p, "heft").placement, dtype=np.int64)
    start = canonical_schedule(p, place)[0]
    ms = float((start + p.duration(place)).max())
    tail = lw.schedule_tails(p, place, start)
    assert np.all(start + tail <= ms * (1 + 1e-12))
    assert np.isclose((start + tail).max(), ms, rtol=1e-12)


def test_cpsat_searches_windows_on_a_large_peak_graph_never_worse_than_the_heuristic():
    p = optpart.load(Path(__file__).resolve().parent.parent / "instances" / "resnet50-training.json")
    assert p.n_nodes >= 600 and p.has_split
    r = optpart.solve(p, "cpsat", memory_model="peak", deterministic_time=0.3, seed=0)
    optpart.check(p, r)
    assert r.status is Status.FEASIBLE
    assert r.stats["window_solves"] >= 1
    assert r.makespan <= r.stats["heuristic_makespan"] * (1 + 1e-12)
    assert 0 < r.lower_bound <= r.makespan
    _valid(p, np.asarray(r.placement), np.asarray(r.start), "peak")
