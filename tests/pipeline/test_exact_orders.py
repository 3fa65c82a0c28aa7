"""CP-SAT's action order on given stages: optimal against every order, enumerated, on tiny steps;
its bound below every order; and the pipelined ``cpsat`` solver end to end."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pipeline_strategies import training_steps
from strategies import examples

import optpart
from optpart.pipeline.candidates import Candidate, Scored
from optpart.pipeline.costs import stage_costs
from optpart.pipeline.exact import exact_orders
from optpart.pipeline.plan import Action, PipelinePlan
from optpart.pipeline.simulate import simulate
from optpart.pipeline.stages import forward_chain, stage_of_cuts
from optpart.pipeline.step import PipelineStep

pytest.importorskip("ortools")


def _all_orders(n_stages: int, stage_device, n_devices: int, m: int):
    """Every per-device list of split actions (F, I, W) the stage chain allows, each once."""
    seen = set()

    def walk(done, lists):
        ready = []
        for s in range(n_stages):
            for i in range(m):
                if (s, "F", i) not in done and (i == 0 or (s, "F", i - 1) in done) \
                        and (s == 0 or (s - 1, "F", i) in done):
                    ready.append(Action(s, "F", i))
                if (s, "I", i) not in done and (s, "F", i) in done and (i == 0 or (s, "I", i - 1) in done) \
                        and (s == n_stages - 1 or (s + 1, "I", i) in done):
                    ready.append(Action(s, "I", i))
                if (s, "W", i) not in done and (s, "I", i) in done and (i == 0 or (s, "W", i - 1) in done):
                    ready.append(Action(s, "W", i))
        if not ready:
            key = tuple(tuple(x) for x in lists)
            if key not in seen:
                seen.add(key)
                yield [list(x) for x in lists]
            return
        for a in ready:
            lists[stage_device[a.stage]].append(a)
            yield from walk(done | {tuple(a)}, lists)
            lists[stage_device[a.stage]].pop()

    yield from walk(frozenset(), [[] for _ in range(n_devices)])


@settings(max_examples=examples(8))
@given(case=training_steps(max_layers=3, max_devices=2), data=st.data())
def test_cpsat_order_is_optimal_on_tiny_steps(case, data):
    problem, _ = case
    m = 2
    step = PipelineStep(problem, m)
    chain = forward_chain(step)
    allowed = np.flatnonzero(chain.allowed)
    if allowed.size == 0 or problem.n_devices < 2:
        return
    cuts = [int(data.draw(st.sampled_from(allowed.tolist())))]
    stage_of = stage_of_cuts(chain, cuts)
    sdev = (0, 1)
    costs = stage_costs(step, stage_of, sdev)
    best_t, best_acts = np.inf, None
    for acts in _all_orders(2, sdev, problem.n_devices, m):
        tl = simulate(costs, acts)
        if tl is not None and tl.makespan < best_t:
            best_t, best_acts = tl.makespan, acts
    cand = Candidate(stage_of, sdev, 1, "loop", "tiny", costs)
    start = Scored(cand, PipelinePlan(m, stage_of, sdev, best_acts), simulate(costs, best_acts), True)
    worst = max(_all_orders(2, sdev, problem.n_devices, m), key=lambda a: simulate(costs, a).makespan)
    start = Scored(cand, PipelinePlan(m, stage_of, sdev, worst), simulate(costs, worst), True)
    got, bound, proven = exact_orders(step, start, "peak", effort=0.5)
    tol = 1e-5 * max(best_t, 1e-12) + 1e-12
    assert bound is not None and bound <= best_t + tol  # a lower bound of every order
    found = got.makespan if got is not None else start.makespan
    assert found >= best_t - tol
    if proven:
        assert found <= best_t + tol  # proven optimal: as good as the best enumerated order


def test_cpsat_solver_proves_a_small_step():
    p = optpart.load("instances/small/mlp4-torch-training.json")
    r = optpart.solve(p, "cpsat", micro_batches=4, effort=0.5)
    assert r.ok and optpart.violations(r.source_problem, r) == []
    assert r.stats["exact"] in ("proven optimal order", "bound only")
    assert r.stats["stage_bound"] <= r.makespan * (1 + 1e-9)
    h = optpart.solve(p, micro_batches=4, effort=0.5)
    assert r.makespan <= h.makespan * (1 + 1e-9)
