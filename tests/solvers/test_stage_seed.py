"""Pipeline-stage placements (``solvers/heuristic/stage_seed.py``): the start of ``cpsat``'s windows
and the heuristic's last candidate.

Budgets are evaluation counts (``MAX_EVALS``), never wall time. Every placement returned is
checked by the evaluator under the memory model asked for, with its colocation groups. The
heuristic is never worse than the stage placement at its own budget, under both memory models.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import optpart
from optpart import Device, Status
from optpart.evaluate import canonical_schedule
from optpart.generators import training_graph
from optpart.model.devices import Links
from optpart.model.memory import peak_memory
from optpart.solvers.heuristic import stage_seed as ss

ROOT = Path(__file__).resolve().parents[2]


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
    p = optpart.load(ROOT / "instances" / "lstm-lm-training.json")
    units = ss.parameter_units(p)
    sizes = [float(p.param_bytes[u].sum()) for u in units]
    assert sizes == sorted(sizes, reverse=True) and sum(sizes) == pytest.approx(float(p.param_bytes.sum()))
    packed = ss._pack(p, np.zeros(p.n_nodes, dtype=np.int64), np.arange(p.n_devices), units)
    assert p.respects_constraints(packed)
    held = np.bincount(packed, weights=p.param_bytes, minlength=p.n_devices)
    assert held.max() <= 0.6 * p.device_memory[0] and held.max() < 2.0 * held.min()


# ---------------------------------------------------------------- the heuristic's candidate

def _phases(p: optpart.Problem) -> list[dict]:
    """training_graph's phases from its node names: input, weights, f*, loss forward; b*, u* backward."""
    return [{"phase": "forward" if i.startswith(("f", "w", "input", "loss")) else "backward"} for i in p.node_ids]


def _declared(n_layers: int, k: int, slack: float, seed: int) -> optpart.Problem:
    """A generated training step that declares its phases (static memory only)."""
    p = training_graph(n_layers, width=2, k=k, memory_slack=slack, seed=seed, ccr=2.0)
    return optpart.Problem.from_arrays(p.node_ids, p.time, p.memory, p.edge_src, p.edge_dst, p.edge_bytes,
                                       devices=p.devices, links=p.links, constraints=p.constraints,
                                       node_meta=_phases(p), name=p.name)


def _split(n_layers: int, k: int, slack: float, seed: int) -> optpart.Problem:
    """The same step with the liveness split (weights hold parameters, the rest outputs), devices
    of ``slack`` x the one-device peak / k each: the peak model's path of the heuristic."""
    p = training_graph(n_layers, width=2, seed=seed, ccr=2.0)
    w = np.array([i.startswith("w") for i in p.node_ids])
    arrays = dict(param_bytes=np.where(w, p.memory, 0.0), output_bytes=np.where(w, 0.0, p.memory),
                  temp_bytes=np.zeros(p.n_nodes), constraints=p.constraints, node_meta=_phases(p), links=p.links)

    def build(devices):
        return optpart.Problem.from_arrays(p.node_ids, p.time, None, p.edge_src, p.edge_dst, p.edge_bytes,
                                           devices=devices, name=p.name, **arrays)

    one = build([Device("g0", float("inf"))])
    z = np.zeros(p.n_nodes, dtype=np.int64)
    s, f = canonical_schedule(one, z)
    cap = slack * float(peak_memory(one, z, s, f)[0]) / k
    return build([Device(f"g{d}", cap) for d in range(k)])


def _makespan(p: optpart.Problem, got) -> float:
    return float((got[1] + p.duration(got[0])).max()) if got is not None else float("inf")


def _at_budget(p: optpart.Problem, model: str, effort: float = 1.0):
    """The stage placement at the heuristic's budget for it (None when skipped)."""
    evals = int(min(ss.MAX_EVALS, effort * ss.STAGE_WORK / (p.n_nodes + p.n_edges)))
    return ss.stage_seed(p, model, max_evals=evals) if evals >= ss.MIN_EVALS else None


@pytest.mark.parametrize("model", ["static", "peak"])
def test_the_heuristic_is_never_worse_than_the_stage_placement_on_generated_steps(model):
    p = _declared(5, 3, 1.3, 0)
    assert ss.phase_forward(p).any() and not ss.phase_forward(p).all()
    r = optpart.solve(p, "heuristic", memory_model=model)
    optpart.check(p, r)  # within memory under ``model``, every constraint kept
    stage = _at_budget(p, model)
    assert stage is not None
    assert r.makespan <= _makespan(p, stage) * (1 + 1e-9)


def test_under_the_liveness_split_too_and_the_same_answer_twice():
    p = _split(5, 2, 1.2, 1)
    r = optpart.solve(p, "heuristic", memory_model="peak")
    optpart.check(p, r)
    assert r.makespan <= _makespan(p, _at_budget(p, "peak")) * (1 + 1e-9)
    again = optpart.solve(p, "heuristic", memory_model="peak")
    assert np.array_equal(again.placement, r.placement) and again.makespan == r.makespan


def test_the_budget_is_evaluations_and_skips_only_when_it_does_not_pay(monkeypatch):
    p = _declared(6, 3, 1.3, 0)
    size = p.n_nodes + p.n_edges
    calls = []
    real = ss.stage_seed
    monkeypatch.setattr(ss, "stage_seed", lambda *a, **kw: calls.append(kw["max_evals"]) or real(*a, **kw))
    for effort in (0.0, (ss.MIN_EVALS - 1) * size / ss.STAGE_WORK, ss.MIN_EVALS * size / ss.STAGE_WORK, 1.0):
        optpart.check(p, optpart.solve(p, "heuristic", memory_model="static", effort=effort))
    assert calls == [ss.MIN_EVALS, ss.MAX_EVALS]   # effort 0 and too small a budget: skipped
    monkeypatch.setattr(ss, "stage_seed", real)

    # without a deadline the clock is never read: the result is the input's alone
    def no_clock():
        raise AssertionError("the clock was read without a time limit")

    monkeypatch.setattr(ss.time, "perf_counter", no_clock)
    assert ss.stage_seed(p, "static", max_evals=20) is not None


def test_undeclared_steps_under_static_get_no_stage_placement():
    p = training_graph(6, width=2, k=3, memory_slack=1.3, seed=0)
    assert ss.phase_forward(p) is None
    r = optpart.solve(p, "heuristic", memory_model="static")
    assert "stage-seed" not in r.stats["stages"]


def test_on_resnet50_under_peak_the_stage_placement_is_what_the_heuristic_returns():
    # a bundled graph where the stage placement beats the rest of the heuristic under peak
    p = optpart.load(ROOT / "instances" / "resnet50-training.json")
    r = optpart.solve(p, "heuristic", memory_model="peak")
    optpart.check(p, r)
    assert r.stats["construction"].startswith("stage-seed")
