"""Insertion scheduling: gaps are found and the schedules it makes are valid."""

from __future__ import annotations

import numpy as np

import optpart
from optpart.evaluate import bottom_levels, violations
from optpart.generators import layered_dag, training_graph
from optpart.schedule.gaps import GapLine as Timeline
from optpart.schedule.insertion import insertion_schedule
from optpart.model.paths import priority_order


def test_timeline_finds_the_first_gap_that_fits():
    line = Timeline()
    line.reserve(0.0, 2.0)
    line.reserve(5.0, 6.0)
    assert line.earliest_start(0.0, 3.0) == 2.0      # [2, 5] fits exactly
    assert line.earliest_start(0.0, 3.5) == 6.0      # too long for the gap
    assert line.earliest_start(3.0, 1.0) == 3.0
    assert line.earliest_start(4.5, 1.0) == 6.0
    line.reserve(2.0, 5.0)
    assert line.gaps() == [] and line.end == 6.0


def _append_only_finish(p, placement, order) -> np.ndarray:
    """Finish times when each node in ``order`` starts after everything already on its device."""
    dur, comm = p.duration(placement), p.transfer_times(placement)
    finish, free = np.zeros(p.n_nodes), np.zeros(p.n_devices)
    for v in order:
        into = p.edge_dst == v
        ready = max((finish[p.edge_src[into]] + comm[into]).max(initial=0.0), free[placement[v]])
        finish[v] = free[placement[v]] = ready + dur[v]
    return finish


def test_insertion_schedules_are_valid_and_never_worse_than_append_only_order():
    rng = np.random.default_rng(1)
    for seed in range(15):
        p = (layered_dag(40, k=3, seed=seed, ccr=1.5) if seed % 2 else training_graph(3, k=3, seed=seed))
        placement = rng.integers(0, 3, size=p.n_nodes)
        if p.groups:
            for g in p.groups:
                placement[g] = placement[g[0]]
        prio = bottom_levels(p, placement)
        order = priority_order(p, prio)
        start = insertion_schedule(p, placement, order)
        r = optpart.evaluate(p, placement, start)
        assert violations(p, r) == []
        append_only = _append_only_finish(p, placement, [int(v) for v in order]).max()
        assert r.makespan <= append_only * (1 + 1e-12), (seed, r.makespan, append_only)
