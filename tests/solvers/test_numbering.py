"""No solver's answer depends on how the nodes are numbered: the same problem with its node ids,
node order and edge order permuted gets the same makespan from every solver that is cheap on
small graphs.

Ties are broken by the canonical order (top level, then decreasing bottom level under mean
costs, depth, decreasing memory, then the input's topological position; docs/heuristic.md):
the planted graphs here have continuous random memories, so they have no such ties and the
answers must be equal.
"""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import optpart
from optpart import Problem
from optpart.generators import planted_dag
from optpart.generators.planted import EDGE_RULES
from strategies import examples

SOLVERS = [s for s in ("heuristic", "pardnn", "heft", "etf", "topo", "metis", "single")
           if s in optpart.available_solvers()]


def renumbered(p: Problem, seed: int) -> tuple[Problem, np.ndarray]:
    """``p`` with its nodes in a random order under permuted ids and its edges in a random order,
    and where each node went."""
    rng = np.random.default_rng(seed)
    n = p.n_nodes
    perm = rng.permutation(n)             # old node i is new node perm[i]
    old = np.empty(n, dtype=np.int64)
    old[perm] = np.arange(n)
    ids = rng.permutation(n)              # new node j gets the id of old node ids[j]
    edges = rng.permutation(p.n_edges)
    split = {} if not p.has_split else dict(param_bytes=p.param_bytes[old], output_bytes=p.output_bytes[old],
                                             temp_bytes=p.temp_bytes[old])
    q = Problem.from_arrays([p.node_ids[i] for i in ids], p.time[old], None if p.has_split else p.memory[old],
                            perm[p.edge_src[edges]], perm[p.edge_dst[edges]], p.edge_bytes[edges],
                            devices=p.devices, links=p.links, name=p.name, **split)
    return q, perm


@settings(max_examples=examples(16), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(2, 40), k=st.integers(1, 4), ccr=st.sampled_from([0.0, 0.1, 1.0, 5.0]),
       rule=st.sampled_from(EDGE_RULES), model=st.sampled_from(["static", "peak"]),
       slack=st.sampled_from([None, 0.05, 0.5]), seed=st.integers(0, 2**16), shuffle=st.integers(0, 2**16))
def test_renumbering_changes_no_solvers_answer(n, k, ccr, rule, model, slack, seed, shuffle):
    p = planted_dag(max(n, k), k, ccr=ccr, edges=rule, memory_model=model, memory_slack=slack, seed=seed)
    q, _ = renumbered(p, shuffle)
    for solver in SOLVERS:
        a, b = optpart.solve(p, solver, memory_model=model), optpart.solve(q, solver, memory_model=model)
        assert a.status is b.status, (solver, a.status, b.status)
        if a.status.has_solution:
            assert b.makespan == a.makespan, (solver, a.makespan, b.makespan)


def test_the_renumbering_is_the_same_graph_in_another_order():
    p = planted_dag(50, 3, edges="forkjoin", seed=1)
    q, perm = renumbered(p, 7)
    assert sorted(q.node_ids) == sorted(p.node_ids) and q.node_ids != p.node_ids
    assert not np.array_equal(perm, np.arange(p.n_nodes))
    assert np.array_equal(q.time[perm], p.time) and np.array_equal(q.memory[perm], p.memory)
    pe = set(zip(perm[p.edge_src].tolist(), perm[p.edge_dst].tolist(), p.edge_bytes.tolist()))
    assert pe == set(zip(q.edge_src.tolist(), q.edge_dst.tolist(), q.edge_bytes.tolist()))
