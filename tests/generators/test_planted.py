"""The planted-optimum generator (:func:`optpart.generators.planted_dag`): the planted schedule is
valid and meets the work bound, so its makespan is the optimum; nothing in the problem's order
tells the planted schedule; the rules, the memory models and the seeds behave as documented."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from optpart.evaluate import evaluate, problem_lower_bound, violations
from optpart.generators import planted_dag
from optpart.generators.planted import EDGE_RULES
from optpart.model.memory import fits, peak_memory, static_memory
from strategies import examples


@settings(max_examples=examples(30), deadline=None)
@given(n=st.integers(1, 120), k=st.integers(1, 8), ccr=st.sampled_from([0.0, 0.1, 1.0, 5.0, 50.0]),
       rule=st.sampled_from(EDGE_RULES), model=st.sampled_from(["static", "peak"]),
       slack=st.sampled_from([None, 0.0, 0.05, 0.5]), chains=st.booleans(), seed=st.integers(0, 2**31 - 1))
def test_the_planted_schedule_is_valid_and_optimal(n, k, ccr, rule, model, slack, chains, seed):
    n = max(n, k)
    p = planted_dag(n, k, ccr=ccr, edges=rule, memory_model=model, memory_slack=slack, chains=chains, seed=seed)
    place, start = np.asarray(p.meta["planted_placement"]), np.asarray(p.meta["planted_start"])
    res = evaluate(p, place, start, memory_model=model)
    assert not violations(p, res)
    opt = p.meta["optimum"]
    assert float((start + p.time).max()) == pytest.approx(opt, rel=1e-12)
    # every device busy from 0 to the optimum: the work bound meets it, so no schedule is shorter
    busy = np.bincount(place, weights=p.time, minlength=k)
    assert busy == pytest.approx(np.full(k, opt), rel=1e-9)
    assert problem_lower_bound(p) == pytest.approx(opt, rel=1e-9)
    # capacities: equal, and the planted placement fits them under its model
    cap = p.device_memory
    assert np.all(cap == cap[0])
    need = peak_memory(p, place, start, start + p.time) if model == "peak" else static_memory(p, place)
    assert fits(need, cap).all()
    if slack is None:
        assert np.isinf(cap).all()
    assert p.has_split == (model == "peak")


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1])


@pytest.mark.parametrize("rule", EDGE_RULES)
def test_nothing_in_the_order_tells_the_planted_schedule(rule):
    p = planted_dag(2000, 4, ccr=1.0, edges=rule, seed=3)
    start = np.asarray(p.meta["planted_start"])
    place = np.asarray(p.meta["planted_placement"])
    idx = np.arange(p.n_nodes)
    assert abs(_spearman(idx, start)) < 0.1           # node order
    assert abs(_spearman(idx, place)) < 0.1
    assert abs(_spearman(np.arange(p.n_edges), start[p.edge_dst])) < 0.1   # edge order
    assert [p.node_ids[i] for i in range(3)] == ["v0", "v1", "v2"]        # ids follow the shuffled order
    # no device chains: a node rarely reads the node just before it on its planted device
    order = np.lexsort((start, place))
    before = np.full(p.n_nodes, -1)
    same = place[order[1:]] == place[order[:-1]]
    before[order[1:][same]] = order[:-1][same]
    chained = np.count_nonzero(before[p.edge_dst] == p.edge_src)
    assert chained < (0.4 if rule == "local" else 0.2) * p.n_nodes
    q = planted_dag(2000, 4, ccr=1.0, edges=rule, seed=3, chains=True)
    qs, qp = np.asarray(q.meta["planted_start"]), np.asarray(q.meta["planted_placement"])
    order = np.lexsort((qs, qp))
    same = qp[order[1:]] == qp[order[:-1]]
    pairs = set(zip(order[:-1][same].tolist(), order[1:][same].tolist()))
    assert pairs <= set(zip(q.edge_src.tolist(), q.edge_dst.tolist()))


def test_rules_make_their_shapes():
    n = 4000
    near = planted_dag(n, 4, edges="near", seed=1)
    far = planted_dag(n, 4, edges="long", seed=1)
    fj = planted_dag(n, 4, edges="forkjoin", width=8, seed=1)

    def slack(p):
        s = np.asarray(p.meta["planted_start"])
        return np.median(s[p.edge_dst] - (s[p.edge_src] + p.time[p.edge_src]))

    assert slack(near) * 10 < slack(far)               # near-critical against long-range edges
    local, near8 = planted_dag(n, 8, edges="local", seed=1), planted_dag(n, 8, edges="near", seed=1)

    def same_device(p):
        d = np.asarray(p.meta["planted_placement"])
        return np.mean(d[p.edge_src] == d[p.edge_dst])

    # a near tensor comes from the reader's own device more often than by chance (1/8): no
    # transfer delays it there; the local rule makes half the edges such
    assert same_device(local) > 0.5 > 0.3 > same_device(near8) > 0.15
    indeg = np.bincount(fj.edge_dst, minlength=n)
    assert np.count_nonzero(indeg >= 6) > n / 16          # the joins
    assert np.count_nonzero(indeg >= 6) < n / 4
    with pytest.raises(ValueError, match="edges="):
        planted_dag(10, 2, edges="grid")
    with pytest.raises(ValueError, match="memory_model"):
        planted_dag(10, 2, memory_model="dynamic")
    with pytest.raises(ValueError, match="k <= n"):
        planted_dag(3, 4)


def test_seeded_and_deterministic():
    a = planted_dag(300, 3, ccr=5.0, edges="mixed", memory_model="peak", seed=7)
    b = planted_dag(300, 3, ccr=5.0, edges="mixed", memory_model="peak", seed=7)
    c = planted_dag(300, 3, ccr=5.0, edges="mixed", memory_model="peak", seed=8)
    for x in ("time", "param_bytes", "output_bytes", "edge_src", "edge_dst", "edge_bytes", "device_memory"):
        assert np.array_equal(getattr(a, x), getattr(b, x))
    assert not np.array_equal(a.time, c.time)
    assert a.meta["optimum"] == b.meta["optimum"]


def test_tight_memory_binds():
    # equal capacities at 1.0x the largest planted need: the lightest planted device has room,
    # but together the devices hold little more than the graph
    p = planted_dag(400, 4, memory_slack=0.0, seed=2)
    assert p.device_memory.sum() < 1.1 * p.memory.sum()
