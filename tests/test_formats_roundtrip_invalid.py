"""An ``invalid`` result (a placement over memory, kept for inspection) survives a save and a load."""

from __future__ import annotations

import numpy as np

import optpart
from optpart.evaluate import evaluate
from optpart.generators import layered_dag


def test_an_invalid_result_keeps_its_placement_and_schedule_through_a_file(tmp_path):
    p = layered_dag(20, k=3, seed=1, memory_slack=1.05)
    r = evaluate(p, np.zeros(p.n_nodes, dtype=int))  # everything on one device: over its memory
    assert r.status is optpart.Status.INVALID
    path = tmp_path / "r.json"
    optpart.save_result(r, p, path)
    back = optpart.load_result(path, p)
    assert back.status is optpart.Status.INVALID and "holds" in back.message
    assert np.array_equal(back.placement, r.placement) and np.array_equal(back.start, r.start)
    assert back.makespan == r.makespan
    # re-scored against a problem where the placement fits, the same file reads feasible
    roomy = p.with_memory_scale(10.0)
    again = optpart.load_result(path, roomy)
    assert again.status is optpart.Status.FEASIBLE and np.array_equal(again.placement, r.placement)
