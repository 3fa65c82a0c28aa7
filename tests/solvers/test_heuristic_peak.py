"""The heuristic under the liveness (peak) memory model and the incremental liveness tracker.

Guards: the tracker equals ``optpart.peak_memory`` once a schedule is complete; every
placement the heuristic returns under peak fits under peak on its own schedule; a
placement known to fit (everything on one device that holds the graph, HEFT's answer
under peak) is never missed and never beaten by a slower answer; every ``infeasible``
claim is confirmed by a brute force over placements and integer schedules.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import budget
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from strategies import draw_placement, examples, problems
from oracle import brute_force_peak

import optpart
from optpart import Device, Status
from optpart.evaluate import canonical_schedule
from optpart.model.memory import fits, memory_timeline
from optpart.model.devices import Links
from optpart.schedule.liveness import LivenessPolicy, LivenessTracker
from optpart.model.screening import live_at_start, running_need


@st.composite
def split_problems(draw, max_nodes: int = 9, max_devices: int = 3, min_time: int = 0, cap_scale=(30, 130),
                   integral: bool = False, constraints: bool = True):
    """A problem whose nodes give the param/output/temp split; capacities from a fraction
    of the single-device total (param + output + temp), so some instances are tight.
    ``integral``: speed 1 and integer transfer times (what the brute force needs);
    ``constraints=False``: no pins, forbids or colocation groups."""
    base = draw(problems(max_nodes=max_nodes, max_devices=max_devices, memory=("loose",), constraints=constraints))
    n = base.n_nodes
    ints = st.lists(st.integers(0, 12), min_size=n, max_size=n)
    param, out, temp = (np.array(draw(ints), dtype=float) for _ in range(3))
    time = np.maximum(base.time, float(min_time))
    total = float((param + out + temp).sum())
    caps = [float(max(1, total * draw(st.integers(*cap_scale)) // 100)) for _ in range(base.n_devices)]
    devices = [Device(d.id, caps[i], 1.0 if integral else d.speed) for i, d in enumerate(base.devices)]
    links = Links(float(draw(st.integers(0, 2))), 1.0) if integral else base.links
    return optpart.Problem.from_arrays(
        base.node_ids, time, None, base.edge_src, base.edge_dst, base.edge_bytes, devices=devices,
        links=links, constraints=base.constraints, param_bytes=param, output_bytes=out, temp_bytes=temp,
        name="hyp-split")


def _fits_peak(problem, result) -> bool:
    used = optpart.peak_memory(problem, result.placement, result.start, result.finish)
    return bool(fits(used, problem.device_memory).all())


# ---------------------------------------------------------------- the tracker


@given(split_problems(max_nodes=10), st.data())
def test_tracker_equals_peak_memory(problem, data):
    k = problem.n_devices
    place = np.array(data.draw(st.lists(st.integers(0, k - 1), min_size=problem.n_nodes,
                                        max_size=problem.n_nodes)), dtype=np.int64)
    start, finish = canonical_schedule(problem, place)
    tracker = LivenessTracker(problem)
    for v in problem.topo.tolist():  # any topological order: consumers after producers
        tracker.place(v, int(place[v]), float(start[v]), float(finish[v]))
    tracker.close_sinks()
    np.testing.assert_allclose(tracker.peaks(), optpart.peak_memory(problem, place, start, finish))


@given(split_problems(max_nodes=8), st.data())
def test_tracker_is_conservative_while_scheduling(problem, data):
    # Before a tensor's last consumer is placed it is counted to +inf, so the running
    # peak never falls below the final exact one on the nodes placed so far.
    k = problem.n_devices
    place = np.array(data.draw(st.lists(st.integers(0, k - 1), min_size=problem.n_nodes,
                                        max_size=problem.n_nodes)), dtype=np.int64)
    start, finish = canonical_schedule(problem, place)
    tracker = LivenessTracker(problem)
    running = np.zeros(k)
    for v in problem.topo.tolist():
        predicted = tracker.peak_if(v, int(place[v]), float(start[v]), float(finish[v]))
        tracker.place(v, int(place[v]), float(start[v]), float(finish[v]))
        # the prediction is exact: it closes the inputs whose last consumer v is (a zero-time
        # v frees them at the instant its output appears), as place() then does
        assert predicted == pytest.approx(tracker.peaks()[place[v]], rel=1e-12, abs=1e-9)
        running = np.maximum(running, tracker.peaks())
    tracker.close_sinks()
    assert (running >= tracker.peaks() - 1e-9).all()


def test_policy_rejects_an_overflow_and_names_the_node():
    p = optpart.Problem.build(
        nodes=[{"id": "a", "time": 1, "param_bytes": 1, "output_bytes": 10, "temp_bytes": 0},
               {"id": "b", "time": 1, "param_bytes": 1, "output_bytes": 10, "temp_bytes": 0}],
        edges=[{"src": "a", "dst": "b", "bytes": 0}], devices=[Device("x", 21)])
    pol = LivenessPolicy(p)
    assert pol.admits(0, 0, 0.0, 1.0)
    pol.place(0, 0, 0.0, 1.0)
    assert pol.peak_if(1, 0, 1.0, 2.0) == pytest.approx(22.0)  # params 2 + a's and b's outputs
    assert not pol.admits(1, 0, 1.0, 2.0)
    assert "'b'" in pol.no_room_message(1)


# ---------------------------------------------------------------- the heuristic under peak


@settings(max_examples=examples(40))
@given(split_problems())
def test_every_returned_placement_fits_under_peak(problem):
    r = optpart.solve(problem, "heuristic", memory_model="peak", effort=0.5)
    if r.status.has_solution:
        assert r.memory_model == "peak"
        assert _fits_peak(problem, r)
        optpart.check(problem, r)
    else:
        assert r.message


@settings(max_examples=examples(30))
@given(split_problems(cap_scale=(100, 160)))
def test_single_device_fit_is_never_missed_nor_beaten(problem):
    # Every device holds param + output + temp of the whole graph: one device alone fits
    # under peak whatever its schedule, so the heuristic must answer, never slower than it.
    total = float(problem.memory.sum())
    assume(problem.allowed.all())
    assert (problem.device_memory >= total).all()  # cap_scale >= 100: every device holds it all
    r = optpart.solve(problem, "heuristic", memory_model="peak", effort=0.5)
    assert r.status.has_solution and _fits_peak(problem, r)
    holds = np.flatnonzero(problem.device_memory >= total)
    single = min(optpart.evaluate(problem, np.full(problem.n_nodes, d)).makespan for d in holds)
    assert r.makespan <= single * (1 + 1e-9) + 1e-12


@settings(max_examples=examples(25))
@given(split_problems(max_nodes=5, max_devices=2, min_time=1, cap_scale=(20, 80), integral=True, constraints=False))
def test_infeasible_claims_confirmed_by_brute_force(problem):
    assert not problem.has_constraints  # brute_force_peak knows no pins or groups: none are drawn
    r = optpart.solve(problem, "heuristic", memory_model="peak", effort=0.5)
    if r.status is Status.INFEASIBLE:
        assert brute_force_peak(problem) == float("inf"), r.message
    elif r.status.has_solution:
        assert r.makespan >= brute_force_peak(problem) - 1e-9


@given(split_problems(max_nodes=10, max_devices=3), st.data())
def test_live_at_start_is_held_by_the_devices_together(problem, data):
    # For any placement and its schedule, the devices together hold at least
    # live_at_start(v) on the segment starting at S(v) (nodes that run a positive time).
    k = problem.n_devices
    place = np.array(data.draw(st.lists(st.integers(0, k - 1), min_size=problem.n_nodes,
                                        max_size=problem.n_nodes)), dtype=np.int64)
    start, finish = canonical_schedule(problem, place)
    live = live_at_start(problem)
    timeline = memory_timeline(problem, place, start, finish)
    for v in range(problem.n_nodes):
        if problem.time[v] <= 0:
            assert live[v] == pytest.approx(problem.param_bytes.sum() + problem.temp_bytes[v] + problem.output_bytes[v])
            continue
        held = 0.0
        for times, level in timeline:  # the level of the segment starting at S(v)
            held += float(level[np.searchsorted(times, start[v], side="right") - 1])
        assert held >= live[v] - 1e-9


def test_running_need_is_what_a_node_surely_holds():
    p = optpart.Problem.build(
        nodes=[{"id": "a", "time": 1, "param_bytes": 2, "output_bytes": 5, "temp_bytes": 0},
               {"id": "b", "time": 1, "param_bytes": 0, "output_bytes": 7, "temp_bytes": 0},
               {"id": "c", "time": 1, "param_bytes": 1, "output_bytes": 3, "temp_bytes": 4},
               {"id": "z", "time": 0, "param_bytes": 0, "output_bytes": 1, "temp_bytes": 0}],
        edges=[{"src": "a", "dst": "c"}, {"src": "b", "dst": "c"}, {"src": "c", "dst": "z"}],
        devices=[Device("x", 22)])
    np.testing.assert_allclose(running_need(p), [7, 7, 1 + 4 + 3 + 5 + 7, 1])  # z runs 0 s: no inputs
    # together: all 3 parameter bytes, c's temporaries and output, a's and b's outputs
    np.testing.assert_allclose(live_at_start(p), [3 + 5, 3 + 7, 3 + 4 + 3 + 5 + 7, 3 + 1])
    assert p.infeasibility("peak") is None  # one device of 22 holds it: a, b, c, z in turn
    assert optpart.solve(p, "heuristic", memory_model="peak").status.has_solution
    one_less = p.with_devices([Device("x", 21)])
    msg = one_less.infeasibility("peak")
    assert msg is not None and "'c'" in msg and "together" in msg
    tight = p.with_devices([Device("x", 20.5), Device("y", 10)])
    assert tight.infeasibility("peak") is None
    small = p.with_devices([Device("x", 19), Device("y", 10)])
    msg = small.infeasibility("peak")
    assert msg is not None and "'c'" in msg
    assert optpart.solve(small, "heuristic", memory_model="peak").status is Status.INFEASIBLE


def _chain(cap: float) -> optpart.Problem:
    return optpart.Problem.build(
        nodes=[{"id": c, "time": 1, "param_bytes": 1, "output_bytes": 10, "temp_bytes": 0} for c in "abc"],
        edges=[{"src": "a", "dst": "b", "bytes": 0}, {"src": "b", "dst": "c", "bytes": 0}],
        devices=[Device("x", cap)])


def test_chain_fits_exactly_at_its_peak_and_not_a_byte_below():
    # Peak 23 (see tests/test_cpsat_peak.py); static 33 would not fit.
    r = optpart.solve(_chain(23), "heuristic", memory_model="peak")
    assert r.status.has_solution and r.makespan == pytest.approx(3.0)
    assert r.memory_peak[0] == pytest.approx(23.0)
    r22 = optpart.solve(_chain(22), "heuristic", memory_model="peak")
    # one byte less: proven (as CP-SAT proves in test_cpsat_peak.py): when b starts, the
    # 3 parameter bytes and the outputs of a and b, 23 bytes, are live together
    assert r22.status is Status.INFEASIBLE and "'b'" in r22.message


def test_bundled_small_training_graph_fits_under_peak():
    p = optpart.load(str(__import__("conftest").INSTANCES / "small" / "squeezenet-training.json"))
    r = optpart.solve(p, "heuristic", memory_model="peak", effort=0.5)
    assert r.status.has_solution and r.memory_model == "peak" and _fits_peak(p, r)
    # At the capacity where the static answer's own schedule peaks, that placement is
    # known to fit: the heuristic under peak must find one at least as fast.
    s = optpart.solve(p, "heuristic", memory_model="static", effort=0.5)
    cap = float(s.memory_peak.max())
    q = p.with_devices([Device(d.id, cap, d.speed) for d in p.devices])
    rq = optpart.solve(q, "heuristic", memory_model="peak", effort=0.5)
    assert rq.status.has_solution and _fits_peak(q, rq)


# ---------------------------------------------------------------- HEFT and m-ETF under peak


@settings(max_examples=examples(30))
@given(split_problems(cap_scale=(40, 130)))
def test_heft_and_etf_under_peak_fit_and_the_heuristic_is_never_slower(problem):
    r = optpart.solve(problem, "heuristic", memory_model="peak", effort=0.5)
    for name in ("heft", "etf"):
        b = optpart.solve(problem, name, memory_model="peak")
        if b.status.has_solution:
            assert b.memory_model == "peak" and _fits_peak(problem, b)
            optpart.check(problem, b)
            if name == "heft":  # HEFT under peak is one of the heuristic's candidates
                assert r.status.has_solution and r.makespan <= b.makespan * (1 + 1e-9) + 1e-12


def test_heft_and_etf_track_liveness_on_a_bundled_graph():
    # at four times its devices' memory (HEFT's greedy dead-ends at its own and at twice it)
    p = optpart.load(str(__import__("conftest").INSTANCES / "small" / "mlp4-torch-training.json")).with_memory_scale(4.0)
    for name in ("heft", "etf"):
        static = optpart.solve(p, name)
        b = optpart.solve(p, name, memory_model="peak")
        assert b.status.has_solution and b.memory_model == "peak" and _fits_peak(p, b)
        # tighter than the static answer's own peak: only a liveness-aware scheduler fits there
        cap = float(static.memory_peak.max()) * 0.9
        q = p.with_devices([Device(d.id, cap, d.speed) for d in p.devices])
        bq = optpart.solve(q, name, memory_model="peak")
        assert not bq.status.has_solution or _fits_peak(q, bq)


@settings(max_examples=examples(30))
@given(split_problems(max_nodes=9, max_devices=3), st.data())
def test_a_known_placement_given_as_hint_is_never_beaten_by_a_slower_answer(problem, data):
    # Any placement fits under peak at its own canonical peak: given as hint at that
    # capacity, the heuristic must answer, never slower than it. (Without the hint it
    # answered on 300 of 300 random draws, but not on every case hypothesis finds.)
    place = draw_placement(data, problem)
    assume(problem.allowed[np.arange(problem.n_nodes), place].all())
    start, finish = canonical_schedule(problem, place)
    cap = float(optpart.peak_memory(problem, place, start, finish).max())
    q = problem.with_devices([Device(d.id, cap, d.speed) for d in problem.devices])
    rh = optpart.solve(q, "heuristic", memory_model="peak", effort=0.5, hint=place)
    assert rh.status.has_solution and _fits_peak(q, rh)
    known = float(finish.max()) if finish.size else 0.0
    assert rh.makespan <= known * (1 + 1e-9) + 1e-12


@settings(max_examples=examples(60), deadline=None, derandomize=True)
@given(split_problems(max_nodes=12, max_devices=4, min_time=1, cap_scale=(15, 60), integral=True))
def test_no_unknown_where_cpsat_finds_a_placement_under_peak(problem):
    # A quality claim of a heuristic, not an invariant, so on a fixed sample (derandomized):
    # at these tight capacities, without the overflow search, 6 in 300 problems had a
    # placement (found by cpsat) that the heuristic missed; with it, about 2 in 700 remain
    # (placements that fit only with a schedule the heuristic does not build).
    r = optpart.solve(problem, "heuristic", memory_model="peak", effort=0.5)
    if r.status.has_solution:
        assert _fits_peak(problem, r)
        return
    if r.status is Status.INFEASIBLE:
        return  # the screening's proof, refereed by test_infeasible_claims_confirmed_by_brute_force
    c = optpart.solve(problem, "cpsat", memory_model="peak", **budget("cpsat", deterministic_time=5))
    assert not c.status.has_solution, f"cpsat found a placement with makespan {c.makespan}; heuristic: {r.message}"
