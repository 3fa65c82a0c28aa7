"""The named schedules are the orders torch 2.13 runs, and every one is valid and deadlock-free.

GPipe and 1F1B (``PipelineScheduleSingle``) run their own ``_step_microbatches`` loop: it is
run here with a recording stage (no process group, no tensors). The multi-stage classes run
their ``pipeline_order``, built by ``_calculate_single_rank_operations`` (and, for
InterleavedZeroBubble, ``_add_bubbles_to_actions``); their compute actions are compared.
"""

from __future__ import annotations

import numpy as np
import pytest

import optpart
from optpart.pipeline.plan import Action, PipelinePlan
from optpart.pipeline.schedules import NAMED, STYLE, accepts, loop_stage_ranks, named_actions, sequential, \
    v_stage_ranks

CASES = [(k, m) for k in (1, 2, 3, 4, 8) for m in (1, 2, 3, 4, 5, 8, 12, 16)]


class _Recorder:
    """The parts of a pipeline stage a single-stage schedule's loop touches, recording F and B."""

    def __init__(self, rank: int, k: int, log: list):
        self.stage_index, self.num_stages, self.log = rank, k, log
        self.is_first, self.is_last = rank == 0, rank == k - 1
        self.output_chunks: list = []

    def get_fwd_recv_ops(self, i): return []  # noqa: E704
    def get_fwd_send_ops(self, i): return []  # noqa: E704
    def get_bwd_recv_ops(self, i): return []  # noqa: E704
    def get_bwd_send_ops(self, i): return []  # noqa: E704
    def perform_reduce_grad(self, *a): pass  # noqa: E704

    def forward_one_chunk(self, i, *args, **kwargs):
        self.log.append(Action(self.stage_index, "F", i))

    def backward_one_chunk(self, i, **kwargs):
        self.log.append(Action(self.stage_index, "B", i))


def _runtime_single(cls, k: int, m: int) -> list[list[Action]]:
    out = []
    for r in range(k):
        log: list[Action] = []
        sched = object.__new__(cls)
        sched._n_microbatches, sched._num_stages, sched._stage = m, k, _Recorder(r, k, log)
        sched._loss_fn, sched._has_backward, sched.scale_grads = None, True, True
        sched._initialize_stage = lambda *a, **kw: None
        sched._maybe_compute_loss = sched._maybe_get_loss = sched._update_losses = lambda *a, **kw: None
        sched._step_microbatches()
        out.append(log)
    return out


def _runtime_multi(cls, name: str, k: int, m: int) -> list[list[Action]]:
    local = STYLE[name][0]
    sched = object.__new__(cls)
    sched._n_microbatches, sched._num_stages, sched.num_stages = m, k * local, k * local
    sched.pp_group_size, sched.n_local_stages = k, local
    sched.number_of_rounds = max(1, m // k)
    sched.microbatches_per_round = m // sched.number_of_rounds
    order = {r: sched._calculate_single_rank_operations(r) for r in range(k)}
    if name == "zbh1":
        sched.pipeline_order = order
        order = sched._add_bubbles_to_actions(k * local)
    out = []
    for r in range(k):
        acts = []
        for a in order[r]:
            for b in (a.sub_actions or (a,)) if a is not None else ():
                if b.computation_type.value in ("F", "B", "I", "W"):
                    acts.append(Action(b.stage_index, b.computation_type.value, b.microbatch_index))
        out.append(acts)
    return out


@pytest.mark.parametrize("name", sorted(NAMED))
def test_each_named_schedule_is_torchs_order(name):
    schedules = pytest.importorskip("torch.distributed.pipelining.schedules")
    cls = {"gpipe": schedules.ScheduleGPipe, "1f1b": schedules.Schedule1F1B,
           "zbh1": schedules.ScheduleInterleavedZeroBubble, "interleaved1f1b": schedules.ScheduleInterleaved1F1B,
           "zbv": schedules.ScheduleZBVZeroBubble, "dualpipev": schedules.ScheduleDualPipeV}[name]
    checked = 0
    for k, m in CASES:
        if not accepts(name, k, m):
            continue
        torch_order = _runtime_single(cls, k, m) if name in ("gpipe", "1f1b") else _runtime_multi(cls, name, k, m)
        assert named_actions(name, k, m) == torch_order, (name, k, m)
        checked += 1
    assert checked >= 10


def _two_device_problem(k: int) -> optpart.Problem:
    """A chain of ``2k`` forward layers mirrored by their backward, on ``k`` devices."""
    n = 2 * k
    nodes = [{"id": f"f{i}", "time": 1.0 + i % 3, "phase": "forward", "output_bytes": 4} for i in range(n)]
    nodes += [{"id": f"b{i}", "time": 2.0, "phase": "backward", "output_bytes": 4} for i in range(n)]
    edges = [{"src": f"f{i}", "dst": f"f{i + 1}", "bytes": 4} for i in range(n - 1)]
    edges += [{"src": f"f{i}", "dst": f"b{i}", "bytes": 4} for i in range(n)]
    edges += [{"src": f"b{i + 1}", "dst": f"b{i}", "bytes": 4} for i in range(n - 1)]
    return optpart.Problem.build(nodes, edges, name="chain").with_devices(k)


@pytest.mark.parametrize("name", sorted(NAMED) + ["sequential"])
def test_named_orders_are_valid_plans_without_deadlock(name):
    """Each order is a valid plan on its layout, runs without deadlock, and is never faster
    than the bound over every order on those stages."""
    from optpart.pipeline.bound import stage_bound
    from optpart.pipeline.costs import stage_costs
    from optpart.pipeline.simulate import simulate
    from optpart.pipeline.step import PipelineStep

    for k, m in ((2, 4), (3, 6), (4, 8)):
        p = _two_device_problem(k)
        local, style = STYLE.get(name, (1, "loop"))
        ranks = v_stage_ranks(k) if style == "v" else loop_stage_ranks(k, local)
        n_st = len(ranks)
        stage_of = np.array([i * n_st // (2 * k) for i in range(2 * k)] * 2)
        if name == "sequential":
            actions = sequential(ranks, k, m)
        elif accepts(name, k, m):
            actions = named_actions(name, k, m)
        else:
            continue
        plan = PipelinePlan(m, stage_of, ranks, actions)
        plan.check(p)
        costs = stage_costs(PipelineStep(p, m), stage_of, ranks)
        tl = simulate(costs, actions)
        assert tl is not None, (name, k, m)
        assert tl.makespan >= stage_bound(costs) * (1 - 1e-9), (name, k, m)
