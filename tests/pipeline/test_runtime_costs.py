"""The runtime's cost per action is part of the pipelined step: every action pays it, it is
recorded in the result, and a plan's torch class is recognised from its lists alone."""

from __future__ import annotations

import numpy as np
import pytest

import optpart
from optpart.errors import ProblemError
from optpart.pipeline.plan import Action, PipelinePlan
from optpart.pipeline.schedules import named_actions, torch_schedule
from optpart.pipeline.solve import score_plan
from optpart.pipeline.step import CPU_ACTION_SECONDS, PipelineStep


def _chain(layers: int = 4, devices: int = 2) -> optpart.Problem:
    """A chain of forward layers, their mirrored backward and one update per layer."""
    nodes, edges = [], []
    for i in range(layers):
        nodes += [{"id": f"f{i}", "time": 1.0, "phase": "forward", "output_bytes": 8, "module": f"m{i}"},
                  {"id": f"b{i}", "time": 2.0, "phase": "backward", "output_bytes": 8, "module": f"m{i}"},
                  {"id": f"u{i}", "time": 0.5, "phase": "optimizer", "param_bytes": 4, "module": f"m{i}"}]
        edges += [{"src": f"f{i}", "dst": f"b{i}", "bytes": 8}, {"src": f"b{i}", "dst": f"u{i}", "bytes": 4}]
        if i:
            edges += [{"src": f"f{i - 1}", "dst": f"f{i}", "bytes": 8}, {"src": f"b{i}", "dst": f"b{i - 1}", "bytes": 8}]
    return optpart.Problem.build(nodes, edges, name="chain").with_devices(devices)


@pytest.mark.parametrize("overhead", [0.0, 1e-9, 0.25, 1e3])
def test_every_action_pays_the_runtime_cost(overhead):
    p = _chain()
    m = 4
    base = optpart.solve(p, "1f1b", micro_batches=m, action_overhead=0.0)
    got = score_plan(p, PipelinePlan.from_result(base, p), action_overhead=overhead)
    assert got.ok and optpart.violations(got.source_problem, got) == []
    assert got.options["pipeline"]["action_overhead"] == overhead
    # each device runs its 2M actions one after another, each at least the overhead; no action
    # waits for more than every action before it in the dependency order (4M of them)
    assert got.makespan >= max(base.makespan, 2 * m * overhead) * (1 - 1e-12)
    assert got.makespan <= base.makespan + 4 * m * overhead + 1e-9 * (1 + overhead)
    assert got.lower_bound <= got.makespan * (1 + 1e-12)
    if overhead:
        # the nodes of an action start after the runtime's own part of it
        first = {n: s for n, s in zip(got.source_problem.node_ids, got.start)}
        assert first["f0@mb0"] == pytest.approx(overhead)


def test_the_default_follows_where_the_times_come_from():
    p = _chain()
    assert PipelineStep(p, 2).action_overhead == 0.0
    cpu = p.with_meta(cost_model={"times": "measured", "profile": {"device": "cpu", "threads": 1}})
    step = PipelineStep(cpu, 2)
    assert step.action_overhead == CPU_ACTION_SECONDS and "CPU" in step.overhead_source
    assert PipelineStep(cpu, 2, 0.0).action_overhead == 0.0
    with pytest.raises(ProblemError, match="--action-overhead must be a time >= 0"):
        PipelineStep(p, 2, -1.0)
    r = optpart.solve(cpu, micro_batches=2)
    assert r.options["pipeline"]["action_overhead"] == CPU_ACTION_SECONDS


def test_a_plan_is_a_torch_class_only_when_its_lists_are_that_class_order():
    p = _chain()
    for name, torch_name in (("gpipe", "GPipe"), ("1f1b", "1F1B"), ("zbh1", "InterleavedZeroBubble")):
        r = optpart.solve(p, name, micro_batches=4)
        plan = PipelinePlan.from_result(r, p)
        assert torch_schedule(plan) == torch_name == r.options["schedule"]
    lists = named_actions("1f1b", 2, 4)
    swapped = [lists[0], lists[1][:2][::-1] + lists[1][2:]]  # 1F0 after 1B0: not 1F1B's order
    plan = PipelinePlan.from_result(optpart.solve(p, "1f1b", micro_batches=4), p)
    assert torch_schedule(plan.with_actions(lists)) == "1F1B"
    with pytest.raises(ProblemError):
        plan.with_actions(swapped).check(p)
    custom = [lists[0], [Action(1, "F", 0), Action(1, "F", 1), Action(1, "B", 0), Action(1, "F", 2),
                         Action(1, "B", 1), Action(1, "F", 3), Action(1, "B", 2), Action(1, "B", 3)]]
    assert torch_schedule(plan.with_actions(custom)) == "custom"
    assert score_plan(p, plan.with_actions(custom)).options["schedule"] == "custom"


def test_lists_that_wait_on_each_other_are_one_line_naming_them():
    p = _chain()
    plan = PipelinePlan.from_result(optpart.solve(p, "1f1b", micro_batches=2), p)
    bad = [[Action(0, "F", 0), Action(0, "B", 0), Action(0, "F", 1), Action(0, "B", 1)],
           [Action(1, "F", 0), Action(1, "F", 1), Action(1, "B", 0), Action(1, "B", 1)]]
    with pytest.raises(ProblemError, match=r"deadlock: '0B0' on 'dev0', '1F1' on 'dev1' wait") as err:
        score_plan(p, plan.with_actions(bad))
    assert "\n" not in str(err.value)
    assert np.array_equal(plan.stage_of, PipelinePlan.read(plan.to_dict(p))[0].stage_of)
