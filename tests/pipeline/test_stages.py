"""Stages cut from the forward chain: a pipeline for every cut, groups whole, tied parameters
replicated; the dynamic programs over the cut points are exact."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from pipeline_strategies import random_cuts, training_steps
from strategies import examples

import optpart
from optpart.pipeline.costs import replicas_of
from optpart.pipeline.partition import _min_max, _weights, candidate_cuts, partitions
from optpart.pipeline.stages import forward_chain, stage_of_cuts
from optpart.pipeline.step import PipelineStep, tied_parameters


@settings(max_examples=examples(40))
@given(case=training_steps(), data=st.data())
def test_every_cut_is_a_pipeline_that_keeps_groups_whole(case, data):
    problem, m = case
    step = PipelineStep(problem, m)
    chain = forward_chain(step)
    stage = stage_of_cuts(chain, random_cuts(data.draw, chain))
    src, dst = problem.edge_src, problem.edge_dst
    per = ~step.once
    fwd, bwd = step.forward, step.backward
    e = per[src] & per[dst]
    assert np.all(stage[dst[e & fwd[src]]] >= stage[src[e & fwd[src]]])  # forward tensors go on
    assert np.all(stage[dst[e & bwd[src]]] <= stage[src[e & bwd[src]]])  # gradients go back
    tied = {t.group: t.parts for t in tied_parameters(problem)}
    for g, members in enumerate(problem.groups):
        for part in tied.get(g, (members,)):
            assert np.unique(stage[part]).size == 1  # no cut inside a group (or a tied part)


def test_gpt2_tied_head_is_replicated_and_groups_stay_whole():
    p = optpart.load("instances/gpt2-training.json")
    step = PipelineStep(p, 8)
    tied = tied_parameters(p)
    assert [p.node_ids[t.owner] for t in tied] == ["update.wte.weight"]
    head = tied[0].parts[1]
    assert {p.node_meta[v]["module"] for v in head.tolist()} == {"head"}
    chain = forward_chain(step)
    cuts = partitions(chain, step, (0, 1, 2, 3))[0]
    stage = stage_of_cuts(chain, cuts)
    assert stage[tied[0].owner] == 0 and stage[head].min() == stage[head].max() == 3
    assert replicas_of(step, stage, (0, 1, 2, 3)) == ((tied[0].owner, 3),)
    unrolled = step.unrolled(((tied[0].owner, 3),))
    rep = unrolled.node_index["update.wte.weight@gpu3"]
    assert unrolled.param_bytes[rep] == p.param_bytes[tied[0].owner]  # the replica holds its state
    assert unrolled.pin[rep] == 3


@settings(max_examples=examples(20))
@given(case=training_steps(max_layers=5), n_stages=st.integers(2, 3), comm=st.sampled_from([0.0, 1.0]))
def test_min_max_program_is_exact(case, n_stages, comm):
    """The dynamic program's heaviest stage equals the best over every set of cuts."""
    problem, m = case
    step = PipelineStep(problem, m)
    chain = forward_chain(step)
    cuts = candidate_cuts(chain)
    if cuts.size < n_stages - 1:
        return
    sdev = np.arange(n_stages) % problem.n_devices
    ends = np.concatenate([[0], cuts, [chain.n_positions]])
    work = np.concatenate([[0.0], np.cumsum(chain.fwd_time + chain.bwd_time)])[ends]
    param = np.concatenate([[0.0], np.cumsum(chain.param_bytes)])[ends]
    act = np.concatenate([[0.0], np.cumsum(chain.act_bytes)])[ends]
    crossing = (chain.cut_fwd + chain.cut_bwd)[ends]
    crossing[0] = crossing[-1] = 0.0
    share = problem.device_memory[sdev]
    weight = _weights(problem, sdev, work, param, act, crossing, share, m, comm, False)
    got = _min_max(weight)
    best = min(max(weight[s][path[s], path[s + 1]] for s in range(n_stages))
               for inner in itertools.combinations(range(1, ends.size - 1), n_stages - 1)
               for path in [(0,) + inner + (ends.size - 1,)])
    assert got is not None and abs(got[0] - best) <= 1e-9 * max(1.0, abs(best))
