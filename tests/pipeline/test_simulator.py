"""The stage-level simulator against the one evaluator: same makespan, never less memory; and
no plan below the bounds.

Random training steps (tests/pipeline/pipeline_strategies.py: skip edges, weight views,
updates, tied parameters; zero, tiny, equal and huge times; uniform and per-pair links), random
stage cuts on random devices, random valid action orders: the plan expanded into the unrolled
step passes every rule of :func:`optpart.evaluate.violations`, its makespan is the simulator's,
and its peak memory per device is at most the simulator's; its makespan is at least the bound
over every plan and the bound over every order on its stages.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from pipeline_strategies import random_actions, random_cuts, training_steps
from strategies import examples

import optpart
from optpart.evaluate import time_tolerance
from optpart.pipeline.bound import pipeline_bound, stage_bound
from optpart.pipeline.costs import stage_costs
from optpart.pipeline.expand import score
from optpart.pipeline.plan import PipelinePlan
from optpart.pipeline.simulate import simulate
from optpart.pipeline.stages import forward_chain, stage_of_cuts
from optpart.pipeline.step import PipelineStep


@settings(max_examples=examples(60))
@given(case=training_steps(), data=st.data())
def test_simulated_plan_is_what_the_evaluator_judges(case, data):
    problem, m = case
    step = PipelineStep(problem, m)
    chain = forward_chain(step)
    cuts = random_cuts(data.draw, chain)
    stage_of = stage_of_cuts(chain, cuts)
    n_st = len(cuts) + 1
    stage_device = data.draw(st.lists(st.integers(0, problem.n_devices - 1), min_size=n_st, max_size=n_st))
    actions = random_actions(data.draw(st.integers(0, 2**16)), n_st, stage_device, problem.n_devices, m)
    plan = PipelinePlan(m, stage_of, stage_device, actions)
    plan.check(problem)
    costs = stage_costs(step, stage_of, stage_device)
    tl = simulate(costs, actions)
    assert tl is not None  # a global order consistent with the dependencies never deadlocks
    r = score(costs, plan, tl, solver="test", memory_model="peak")
    unrolled = r.source_problem
    assert optpart.violations(unrolled, r) == []
    assert abs(r.makespan - tl.makespan) <= time_tolerance(r.makespan)
    assert np.all(tl.memory >= r.memory_peak * (1 - 1e-12) - 1e-9), (tl.memory, r.memory_peak)
    # no plan beats the bound over every plan, no order on these stages the bound over orders
    assert tl.makespan >= pipeline_bound(step, chain)[0] * (1 - 1e-9) - 1e-12
    assert tl.makespan >= stage_bound(costs) * (1 - 1e-9) - 1e-12
    # the plan the result carries reads back to the same plan
    again = PipelinePlan.from_result(r, problem)
    assert again.same_as(plan)


def test_deadlock_is_reported_not_hung():
    """Two stages on two devices, device 0 runs its backward before the forward that feeds the
    other device: the lists wait on each other and the simulator says so."""
    nodes = [{"id": "a", "time": 1.0, "phase": "forward", "output_bytes": 1},
             {"id": "b", "time": 1.0, "phase": "forward", "output_bytes": 1},
             {"id": "gb", "time": 1.0, "phase": "backward", "output_bytes": 1},
             {"id": "ga", "time": 1.0, "phase": "backward", "output_bytes": 1}]
    edges = [{"src": "a", "dst": "b", "bytes": 1}, {"src": "b", "dst": "gb", "bytes": 1},
             {"src": "gb", "dst": "ga", "bytes": 1}, {"src": "a", "dst": "ga", "bytes": 1}]
    p = optpart.Problem.build(nodes, edges, name="d").with_devices(2)
    step = PipelineStep(p, 2)
    stage_of = np.array([0, 1, 1, 0])
    costs = stage_costs(step, stage_of, (0, 1))
    from optpart.pipeline.plan import Action
    ok = [[Action(0, "F", 0), Action(0, "F", 1), Action(0, "B", 0), Action(0, "B", 1)],
          [Action(1, "F", 0), Action(1, "B", 0), Action(1, "F", 1), Action(1, "B", 1)]]
    assert simulate(costs, ok) is not None
    # device 1 waits for micro-batch 1's forward before its first backward, device 0 for that
    # backward before sending micro-batch 1's forward
    bad = [[Action(0, "F", 0), Action(0, "B", 0), Action(0, "F", 1), Action(0, "B", 1)],
           [Action(1, "F", 0), Action(1, "F", 1), Action(1, "B", 0), Action(1, "B", 1)]]
    assert simulate(costs, bad) is None
