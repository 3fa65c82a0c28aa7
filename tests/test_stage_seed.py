"""Pipeline-stage placements (``solvers/heuristic/stage_seed.py``), the start of ``cpsat``'s windows.

Budgets are evaluation counts (``MAX_EVALS``), never wall time. Every placement returned is
checked by the evaluator under the memory model asked for, with its colocation groups.
"""

from __future__ import annotations

import numpy as np
import pytest

import optpart
from optpart import Device, Status
from optpart.generators import training_graph
from optpart.model.devices import Links
from optpart.solvers.heuristic import stage_seed as ss


def _valid(problem: optpart.Problem, got, memory_model: str) -> float:
    assert got is not None
    place, start = got
    r = optpart.evaluate(problem, place, start, memory_model=memory_model)
    assert r.status is Status.FEASIBLE, r.message
    return float(r.makespan)


def _step() -> optpart.Problem:
    """Forward a -> b -> c, loss l, backward c' -> b' -> a' reading the saved a, b, c.

    Each forward output is 4 B and lives until its backward reader: when c' runs one device
    would hold 4 + 4 + 4 + 1 + 1 = 14 B, more than its 10 B, so the step needs two stages.
    """
    ids = ["a", "b", "c", "l", "c'", "b'", "a'"]
    src = [0, 1, 2, 3, 4, 5, 2, 1, 0]
    dst = [1, 2, 3, 4, 5, 6, 4, 5, 6]
    meta = [{"phase": "forward"}] * 4 + [{"phase": "backward"}] * 3
    return optpart.Problem.from_arrays(
        ids, np.ones(7), None, src, dst, np.full(9, 4.0), devices=[Device("g0", 10.0), Device("g1", 10.0)],
        links=Links(0.0, 4.0), param_bytes=np.zeros(7), output_bytes=np.array([4.0] * 3 + [1.0] * 4),
        temp_bytes=np.zeros(7), node_meta=meta, name="step")


def test_anchors_put_each_backward_node_beside_the_activation_it_reads():
    p = _step()
    forward = ss.forward_set(p)[0]
    assert forward.tolist() == [True] * 4 + [False] * 3
    anchor = ss.stage_anchors(p, forward)
    # a, b, c, l at 0..3; c' reads l (3, the latest forward node it reads), b' reads b
    # (1), a' reads a (0).
    assert anchor.tolist() == [0, 1, 2, 3, 3, 1, 0]


def test_stage_seed_splits_a_step_that_one_device_cannot_hold():
    p = _step()
    assert optpart.evaluate(p, np.zeros(7, dtype=np.int64), memory_model="peak").status is Status.INVALID
    got = ss.stage_seed(p, "peak")
    _valid(p, got, "peak")
    assert np.unique(got[0]).size == 2
    assert ss.stage_seed(p, "peak")[0].tolist() == got[0].tolist()  # same input, same output


def test_the_liveness_split_finds_the_forward_pass_without_metadata():
    p = _step()
    bare = optpart.Problem.from_arrays(p.node_ids, p.time, None, p.edge_src, p.edge_dst, p.edge_bytes,
                                       devices=p.devices, links=p.links, param_bytes=p.param_bytes,
                                       output_bytes=p.output_bytes, temp_bytes=p.temp_bytes, name="bare")
    (forward,) = ss.forward_set(bare)
    assert forward.tolist() == [True] * 4 + [False] * 3


@pytest.mark.parametrize("seed", range(3))
def test_stage_seed_keeps_memory_and_colocation_on_generated_training_steps(seed):
    # training_graph colocates each weight with its update and weight-gradient node.
    p = training_graph(10, width=2, k=4, memory_slack=1.4, seed=seed)
    assert p.groups
    for model in ("static", "peak"):
        got = ss.stage_seed(p, model)
        if got is not None:
            _valid(p, got, model)
            assert p.respects_constraints(got[0])


def test_chain_moves_only_keep_improvements():
    p = training_graph(8, width=2, k=3, memory_slack=3.5, seed=4)
    score = ss._Scorer(p, "static", None)
    first = score(np.zeros(p.n_nodes, dtype=np.int64))
    assert first[0][0] == 0  # one device holds it
    better = ss._chain_moves(score, first)
    assert better[0][0] == 0 and better[0][1] < 0.8 * first[0][1]  # the parallel work spreads out
    assert _valid(p, (better[1], better[2]), "static") == pytest.approx(better[0][1])
    assert score.evals <= score.limit


def test_parameter_units_are_packed_largest_first_onto_the_emptiest_device():
    # lstm-lm: six weight groups (a weight's gradient accumulation with its update) hold
    # 156 + 156 + 4 x 64 MiB, more than one 384 MiB device; packed they spread evenly.
    from pathlib import Path
    p = optpart.load(Path(__file__).resolve().parent.parent / "instances" / "lstm-lm-training.json")
    units = ss.parameter_units(p)
    sizes = [float(p.param_bytes[u].sum()) for u in units]
    assert sizes == sorted(sizes, reverse=True) and sum(sizes) == pytest.approx(float(p.param_bytes.sum()))
    packed = ss._pack(p, np.zeros(p.n_nodes, dtype=np.int64), np.arange(p.n_devices), units)
    assert p.respects_constraints(packed)
    held = np.bincount(packed, weights=p.param_bytes, minlength=p.n_devices)
    assert held.max() <= 0.6 * p.device_memory[0] and held.max() < 2.0 * held.min()
