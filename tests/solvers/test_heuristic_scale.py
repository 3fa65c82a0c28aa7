"""The heuristic at every size: the scalable ETF engine, the stages skipped within the gap, and
never worse than the baselines it keeps as candidates (heft, etf, topo, metis, pardnn, single).

Budgets are work counts (``effort``), never wall time.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import optpart
from optpart.generators import planted_dag
from optpart.model.paths import upward_rank
from optpart.schedule import Graph, NoRoom, StaticPolicy, etf_schedule

from strategies import examples, problems, zero_time_problems


def _reference_etf(problem, priority):
    """Textbook m-ETF, O(V^2 k): every step, every ready (node, device) pair the policy allows
    is scored afresh; the earliest start wins, then the higher priority, node, device."""
    g = Graph(problem)
    policy = StaticPolicy(problem, solver="reference")
    n, k = g.n, g.k
    place, start, finish, avail = [-1] * n, [0.0] * n, [0.0] * n, [0.0] * k
    for _ in range(n):
        best = None
        for v in range(n):
            preds = range(g.in_ptr[v], g.in_ptr[v + 1])
            if place[v] >= 0 or any(place[g.pred[i]] < 0 for i in preds):
                continue
            for d in policy.devices_for(v):
                r = 0.0
                for i in preds:
                    pu = place[g.pred[i]]
                    r = max(r, finish[g.pred[i]] + (g.lat[pu][d] + g.in_bytes[i] / g.bw[pu][d]))
                key = (max(r, avail[d]), -float(priority[v]), v, d)
                best = key if best is None or key < best else best
        if best is None:
            return None
        t, _, v, d = best
        place[v], start[v] = d, t
        finish[v] = avail[d] = t + g.time[v] / g.speed[d]
        policy.place(v, d, t, finish[v])
    return place, start, finish


@settings(max_examples=examples(120), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems(max_nodes=14, max_devices=5, pins=True))
def test_the_cached_etf_engine_makes_the_textbook_schedule(problem):
    # the per-device candidate cache and the uniform-link arrival shortcut change nothing
    pr = upward_rank(problem).tolist()
    want = _reference_etf(problem, pr)
    try:
        got = etf_schedule(Graph(problem), pr, StaticPolicy(problem, solver="t"))
    except NoRoom:
        assert want is None
        return
    assert want is not None
    assert got.place == want[0]
    np.testing.assert_allclose(got.start, want[1], rtol=1e-12, atol=1e-12)


#: the baselines the heuristic keeps as candidates (heft and etf are its first constructions)
KEPT = [b for b in ("heft", "etf", "topo", "metis", "pardnn", "single") if b in optpart.available_solvers()]


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(problems(max_nodes=12, max_devices=4), zero_time_problems(max_nodes=14, max_devices=4)),
       st.sampled_from(["static", "peak"]))
def test_the_heuristic_is_never_worse_than_any_baseline_it_keeps(problem, model):
    # every shape (chains, joins, layers, series-parallel, training steps), zero, equal, tiny
    # and huge times: the heuristic's answer is valid within memory under the model, and no
    # baseline it keeps finds a shorter one
    # (gap=0: strictly; the default gap of 1e-4 may skip the stages after heft's and etf's
    # constructions within that fraction of the bound)
    h = optpart.solve(problem, "heuristic", memory_model=model, effort=0.1, gap=0)
    d = optpart.solve(problem, "heuristic", memory_model=model, effort=0.1)
    for r in (h, d):
        if r.status.has_solution:
            optpart.check(problem, r)
    for base in KEPT:
        b = optpart.solve(problem, base, memory_model=model)
        if b.status.has_solution:
            assert h.status.has_solution and d.status.has_solution, (base, model, b.makespan)
            assert h.makespan <= b.makespan * (1 + 1e-9) + 1e-9, (base, model, h.makespan, b.makespan)
            within = 1e-9 if base in ("heft", "etf") else 1e-4   # heft and etf always run
            assert d.makespan <= b.makespan * (1 + within) + 1e-9, (base, model, d.makespan, b.makespan)


def test_the_etf_construction_runs_on_large_graphs_even_at_effort_zero():
    # wide joins: HEFT lands above the planted optimum, ETF on it; past 30,000 nodes + edges
    p = planted_dag(11_000, 4, ccr=5.0, seed=3, edges="forkjoin", window=8)
    assert p.n_nodes + p.n_edges > 30_000
    heft = optpart.solve(p, "heft", memory_model="static")
    etf = optpart.solve(p, "etf", memory_model="static")
    h = optpart.solve(p, "heuristic", memory_model="static", effort=0)
    opt = p.meta["optimum"]
    assert etf.makespan < heft.makespan
    assert h.makespan <= etf.makespan * (1 + 1e-12)
    assert h.makespan <= opt * 1.01 and math.isfinite(h.makespan)


def _both_etf_engines(problem, capacity=None):
    """The shared-structure engine's and the per-device engine's answers (schedule or NoRoom)."""
    from optpart.schedule import etf as etf_module
    from optpart.schedule.etf_shared import etf_shared

    g = Graph(problem)
    pr = upward_rank(problem).tolist()
    out = []
    for engine in (etf_shared, etf_module._etf):
        try:
            r = engine(g, pr, StaticPolicy(problem, capacity=capacity, solver="t"))
            out.append((r.place, r.start, r.finish))
        except NoRoom as stuck:
            out.append(("no room", stuck.node, stuck.message))
    return out


@pytest.mark.parametrize("chains", [True, False])
def test_the_shared_etf_engine_makes_the_per_device_engines_schedule_when_memory_binds(chains):
    # Capacities a little above total / k: devices fill up during the schedule, so optimistic
    # shared entries fail their fit and are demoted to per-device entries (or nothing fits)
    stuck = 0
    for seed in range(6):
        p = planted_dag(400, 4, ccr=1.0, seed=seed, chains=chains, window=8, memory_slack=None)
        total = float(p.memory.sum())
        for share in (0.26, 0.3, 0.5):
            shared, general = _both_etf_engines(p, [total * share] * 4)
            assert shared == general, (seed, share)
            stuck += shared[0] == "no room"
    assert stuck < 18  # most cases place everything: the comparison is not all dead ends


@settings(max_examples=examples(80), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems(max_nodes=16, max_devices=5, pins=True), st.floats(0.2, 1.5))
def test_the_shared_etf_engine_matches_the_per_device_engine_with_constraints(problem, share):
    # pins, forbidden devices, colocation groups, tight memory: every node kind and every path
    from optpart.schedule.etf import _shared_applies

    assume(_shared_applies(Graph(problem), StaticPolicy(problem)))  # uniform links, k > 1: where it runs
    total = float(problem.memory.sum())
    shared, general = _both_etf_engines(problem, [total * share] * problem.n_devices)
    assert shared == general


def test_the_etf_engine_stops_at_its_deadline_and_the_heuristic_says_so(monkeypatch):
    import optpart.solvers.heuristic as heuristic_module
    from optpart.schedule import TimeUp, etf_schedule
    from optpart.schedule import etf_shared as shared_module

    p = planted_dag(3000, 4, ccr=1.0, seed=2, window=8)
    g = Graph(p)
    with pytest.raises(TimeUp):  # a deadline already passed: stopped at the first check (1,024 nodes)
        etf_schedule(g, upward_rank(p).tolist(), StaticPolicy(p), deadline=-math.inf)
    # The heuristic's own clock stands still (no stage is ever late) while the engine's clock is
    # past every deadline: the ETF construction starts and stops part-way, and the result says so
    still = type("Still", (), {"perf_counter": staticmethod(lambda: 0.0)})
    from optpart.solvers.heuristic import pipeline
    monkeypatch.setattr(heuristic_module, "_time", still)
    monkeypatch.setattr(pipeline, "_time", still)
    monkeypatch.setattr(shared_module, "perf_counter", lambda: math.inf)
    r = optpart.solve(p, "heuristic", time_limit=10.0, gap=0)
    optpart.check(p, r)
    assert r.stats["stopped"] == "time limit reached during etf", r.stats
    assert r.message == "stopped early: time limit reached during etf"
    assert not r.stats["construction"].startswith("etf")


def test_the_later_stages_are_skipped_only_within_the_gap_of_the_proven_bound():
    # m-ETF lands within 1e-4 of the lower bound on this graph, so the later constructions and
    # the search are skipped and the result says so; the answer is within the gap of the bound,
    # so no skipped stage could have shortened it by more
    from optpart.evaluate import problem_lower_bound

    p = planted_dag(6000, 4, ccr=5.0, seed=4, edges="forkjoin", window=8)
    lb = float(problem_lower_bound(p))
    r = optpart.solve(p, "heuristic", effort=0.2)
    assert "within_gap" in r.stats and set(r.stats["stages"]) == {"heft", "etf"}, r.stats
    assert r.makespan <= lb * (1 + 1e-4)
    assert r.status is optpart.Status.FEASIBLE  # within the gap is no certificate
    full = optpart.solve(p, "heuristic", effort=0.2, gap=0)
    assert "within_gap" not in full.stats and len(full.stats["stages"]) > 2
    assert r.makespan <= full.makespan * (1 + 1e-4)
    again = optpart.solve(p, "heuristic", effort=0.2, gap=0)
    assert np.array_equal(full.placement, again.placement) and np.array_equal(full.start, again.start)


@pytest.mark.parametrize("model", ["static", "peak"])
def test_the_baselines_are_candidates_where_the_budget_pays_and_the_answer_no_slower(monkeypatch, model):
    # on training steps of 2*10^4 operators the seed method alone beat every other construction
    # by a fifth: the baselines are candidates as far as the work budget pays (4*10^5 nodes +
    # edges at effort 1), and the answer is no slower than any of them
    from optpart import generators as gen
    from optpart.solvers.heuristic import pipeline

    p = gen.training_graph(30, width=2, ccr=0.1, k=2, memory_slack=1.1, seed=7)
    h = optpart.solve(p, "heuristic", memory_model=model, gap=0)
    assert {"topo", "pardnn"} <= set(h.stats["stages"]), h.stats["stages"]
    for base in KEPT:
        b = optpart.solve(p, base, memory_model=model)
        if b.status.has_solution:
            assert h.makespan <= b.makespan * (1 + 1e-9), (base, h.makespan, b.makespan)
    # the budget: nothing at effort 0, up to 4*10^5 nodes + edges at effort 1, more with effort
    monkeypatch.setattr(pipeline, "BASELINE_COST", (1.0 * pipeline.BASELINE_WORK) / (p.n_nodes + p.n_edges) * 1.01)
    past = optpart.solve(p, "heuristic", memory_model=model, gap=0)
    assert not {"topo", "metis", "pardnn"} & set(past.stats["stages"]), past.stats["stages"]
    assert "topo" in optpart.solve(p, "heuristic", memory_model=model, gap=0, effort=2.0).stats["stages"]
    assert "topo" not in optpart.solve(p, "heuristic", memory_model=model, effort=0).stats["stages"]
