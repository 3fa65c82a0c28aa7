"""The baseline solvers heft, etf (m-ETF), topo (m-TOPO) and metis, through the checker."""

from __future__ import annotations

import math

import numpy as np
import pytest

import optpart
from optpart import Constraints, Device, LinkOverride, Links, Status
from optpart.generators import chain, layered_dag, training_graph
from optpart.model.paths import mean_costs, upward_rank

BASELINES = [name for name in ("heft", "etf", "topo", "metis") if name in optpart.available_solvers()]


def _devices(total: float, k: int, slack: float | None, speeds=None) -> list[Device]:
    cap = math.inf if slack is None else slack * total / k
    speeds = speeds or [1.0] * k
    return [Device(f"dev{i}", cap, speeds[i]) for i in range(k)]


def _cases() -> list[optpart.Problem]:
    """Random problems: tight and loose memory, pins, forbids, colocation, speeds, per-pair links."""
    out = []
    for seed in range(3):
        g = layered_dag(24 + 6 * seed, seed=seed, ccr=1.0)
        total = float(g.memory.sum())
        links = g.links
        pair_links = Links(links.latency + 1e-3, links.bandwidth, pairs=(
            LinkOverride("dev0", "dev1", 0.0, links.bandwidth * 10),
            LinkOverride("dev2", "dev0", 0.5, links.bandwidth / 4)))
        out.append(g.with_devices(_devices(total, 3, None)))                 # loose
        out.append(g.with_devices(_devices(total, 3, 1.15)))                 # tight
        out.append(g.with_devices(_devices(total, 3, 1.6, [1.0, 2.0, 0.5]), links=pair_links,
                                  constraints=Constraints(pin={"n0": "dev2", "n5": "dev1"},
                                                          forbid={"n7": ("dev0", "dev1")},
                                                          colocate=(("n3", "n9", "n12"),))))
        t = training_graph(3 + seed, width=2, seed=seed)
        ttotal = float(t.memory.sum())
        out.append(t.with_devices(_devices(ttotal, 2, None)))
        out.append(t.with_devices(_devices(ttotal, 3, 1.3, [1.0, 1.5, 1.5]), links=pair_links,
                                  constraints=Constraints(pin={"input": "dev1"},
                                                          colocate=t.constraints.colocate)))
    return out


CASES = _cases()


@pytest.mark.parametrize("name", BASELINES)
@pytest.mark.parametrize("case", range(len(CASES)))
def test_baseline_results_are_valid_within_memory_and_deterministic(name, case):
    problem = CASES[case]
    first = optpart.solve(problem, name, seed=0)
    again = optpart.solve(problem, name, seed=0)
    assert first.status is again.status and first.message == again.message
    if first.ok:
        assert first.status is Status.FEASIBLE  # a heuristic never claims optimality
        optpart.check(problem, first)
        assert (first.memory_static <= problem.device_memory * (1 + 1e-9)).all()
        assert problem.allowed[np.arange(problem.n_nodes), first.placement].all()
        for members in problem.groups:
            assert np.unique(first.placement[members]).size == 1
        assert np.array_equal(first.placement, again.placement)
        assert np.array_equal(first.start, again.start)
        assert first.makespan >= first.lower_bound - 1e-9
    else:
        assert first.status is Status.UNKNOWN and first.placement is None and first.message
    if np.isinf(problem.device_memory).all():
        assert first.status is Status.FEASIBLE  # nothing can stop a baseline without memory limits


# ---------------------------------------------------------------------------------------- HEFT
def _hand_example() -> optpart.Problem:
    """Six tasks on two identical devices; a transfer of b bytes takes b seconds (1 B/s, no latency)."""
    nodes = [{"id": i, "time": t, "memory": 1} for i, t in
             (("A", 2.0), ("B", 3.0), ("C", 4.0), ("D", 2.0), ("E", 1.0), ("F", 1.5))]
    edges = [{"src": s, "dst": d, "bytes": b} for s, d, b in
             (("A", "B", 1), ("A", "C", 1), ("A", "E", 5), ("B", "D", 2), ("C", "D", 1))]
    return optpart.Problem.build(nodes=nodes, edges=edges,
                                 devices=[Device("p0", 100), Device("p1", 100)],
                                 links={"latency": 0.0, "bandwidth": 1.0}, name="heft-by-hand")


def test_heft_matches_a_schedule_derived_by_hand():
    # No published HEFT example fits a speed model (Topcuoglu et al. 2002, Fig. 2, uses an
    # arbitrary cost matrix), so this one is derived by hand.
    # Mean costs: two identical devices, so wbar = time and cbar = bytes (one pair, 1 B/s).
    #   rank(D) = 2, rank(E) = 1, rank(F) = 1.5
    #   rank(B) = 3 + 2 + 2 = 7, rank(C) = 4 + 1 + 2 = 7
    #   rank(A) = 2 + max(1 + 7, 1 + 7, 5 + 1) = 10
    # Order: A, B, C (tie with B, broken by topological position), D, F, E.
    #   A: EFT 2 on both -> p0 [0, 2] (lower index).
    #   B: p0 ready 2 -> [2, 5]; p1 ready 2 + 1 = 3 -> finish 6.  -> p0 [2, 5].
    #   C: p0 busy until 5 -> finish 9; p1 ready 3 -> [3, 7].     -> p1 [3, 7].
    #   D: p0 ready max(5, 7 + 1) = 8 -> finish 10; p1 ready max(5 + 2, 7) = 7 -> [7, 9]. -> p1.
    #   F: no inputs. p0 free from 5 -> finish 6.5; p1 has the idle gap [0, 3] -> [0, 1.5]
    #      (the insertion policy).                                  -> p1 [0, 1.5].
    #   E: p0 ready 2, busy until 5 -> [5, 6]; p1 ready 2 + 5 = 7 -> finish 10. -> p0 [5, 6].
    # Makespan 9.
    p = _hand_example()
    assert upward_rank(p).tolist() == [10.0, 7.0, 7.0, 2.0, 1.0, 1.5]
    r = optpart.solve(p, "heft")
    optpart.check(p, r)
    assert r.placement_ids(p) == {"A": "p0", "B": "p0", "C": "p1", "D": "p1", "E": "p0", "F": "p1"}
    assert r.start.tolist() == [0.0, 2.0, 3.0, 7.0, 5.0, 0.0]
    assert r.makespan == 9.0


def test_heft_mean_costs_average_over_allowed_devices_and_device_pairs():
    p = _hand_example().with_devices(
        [Device("a", 100, 1.0), Device("b", 100, 4.0), Device("c", 100, 2.0)],
        links=Links(1.0, 2.0, pairs=(LinkOverride("a", "b", 0.0, 1.0),)),
        constraints=Constraints(forbid={"A": ("b",)}))
    wbar, cbar = mean_costs(p)
    assert wbar[0] == pytest.approx(2.0 * (1 + 1 / 2) / 2)          # A on a or c
    assert wbar[1] == pytest.approx(3.0 * (1 + 1 / 4 + 1 / 2) / 3)  # B anywhere
    # ordered pairs: a<->b latency 0, 1 B/s; the other four latency 1, 2 B/s
    assert cbar[2] == pytest.approx((2 * (0 + 5 / 1) + 4 * (1 + 5 / 2)) / 6)  # A -> E, 5 bytes


def test_memory_blind_heft_does_not_return_an_overflowing_placement():
    p = layered_dag(40, k=3, memory_slack=1.3, seed=1)
    blind = optpart.solve(p, "heft", memory_aware=False)
    aware = optpart.solve(p, "heft")
    assert blind.status is Status.UNKNOWN and blind.placement is None
    assert blind.message.startswith("heft (memory-blind): device 'dev")
    assert "(static) but has " in blind.message
    assert aware.status is Status.FEASIBLE
    optpart.check(p, aware)
    loose = layered_dag(40, k=3, seed=1)  # unlimited memory: both forms agree
    a, b = optpart.solve(loose, "heft"), optpart.solve(loose, "heft", memory_aware=False)
    assert np.array_equal(a.placement, b.placement) and a.makespan == b.makespan


def test_heft_uses_the_faster_device_and_cheap_links():
    p = chain(4, time=1.0, nbytes=10.0).with_devices([Device("slow", 100, 1.0), Device("fast", 100, 4.0)],
                                                     links=Links(0.0, 1.0))
    r = optpart.solve(p, "heft")
    optpart.check(p, r)
    assert set(r.placement.tolist()) == {1} and r.makespan == 1.0


def test_greedy_baselines_that_dead_end_answer_unknown_with_the_reason():
    # Two devices of 10 bytes. A fit exists: {a, b} and {c, z, e} (group c+z holds 8 bytes).
    # HEFT and m-ETF put the two long nodes a, b (5 bytes each) first, on different devices
    # (a on d0 at 0; b starts at 0 on d1, earlier than after a), after which no device has the
    # 8 bytes the group needs: they must say so, not return an overflowing placement.
    nodes = [{"id": "a", "time": 10.0, "memory": 5}, {"id": "b", "time": 10.0, "memory": 5},
             {"id": "c", "time": 1.0, "memory": 4}, {"id": "z", "time": 1.0, "memory": 4},
             {"id": "e", "time": 1.0, "memory": 2}]
    p = optpart.Problem.build(nodes=nodes, edges=[{"src": "c", "dst": "z", "bytes": 0}],
                              devices=[Device("d0", 10), Device("d1", 10)],
                              constraints={"colocate": [["c", "z"]]})
    assert p.infeasibility() is None
    for name in ("heft", "etf"):
        r = optpart.solve(p, name)
        assert r.status is Status.UNKNOWN and r.placement is None, name
        assert "node 'c' (with its colocation group)" in r.message and "needs 8 B" in r.message
    for name in BASELINES:  # whatever the others answer, it is honest
        r = optpart.solve(p, name)
        if r.ok:
            optpart.check(p, r)
        else:
            assert r.status is Status.UNKNOWN and r.placement is None and r.message


# ---------------------------------------------------------------------------------------- m-ETF
def test_etf_starts_the_earliest_pair_first():
    # src -> p0, p1, p2 -> sink on two devices, free links: ETF starts two branches at 1,
    # the third at 1 + its length on the first device free, and never idles a device.
    p = optpart.Problem.build(
        nodes=[{"id": "s", "time": 1.0, "memory": 1}, {"id": "p0", "time": 3.0, "memory": 1},
               {"id": "p1", "time": 2.0, "memory": 1}, {"id": "p2", "time": 1.0, "memory": 1},
               {"id": "t", "time": 1.0, "memory": 1}],
        edges=[{"src": a, "dst": b} for a, b in
               (("s", "p0"), ("s", "p1"), ("s", "p2"), ("p0", "t"), ("p1", "t"), ("p2", "t"))],
        devices=[Device("d0", 10), Device("d1", 10)], links=Links(0.0, float("inf")))
    r = optpart.solve(p, "etf")
    optpart.check(p, r)
    # s on d0 at 0; at time 1 both devices are free: p0 (highest rank) on d0, p1 on d1;
    # p2 next on d1 at 3 (d1 frees first), t at max(4, 4) = 4 on d0 (lower index).
    assert r.placement_ids(p) == {"s": "d0", "p0": "d0", "p1": "d1", "p2": "d1", "t": "d0"}
    assert r.start.tolist() == [0.0, 1.0, 1.0, 3.0, 4.0]


def test_etf_skips_devices_without_room():
    p = chain(6, time=1.0, memory=4.0).with_devices([Device("a", 8), Device("b", 8), Device("c", 8)])
    r = optpart.solve(p, "etf")
    optpart.check(p, r)
    assert np.bincount(r.placement, minlength=3).tolist() == [2, 2, 2]


# ---------------------------------------------------------------------------------------- m-TOPO
def test_topo_fills_devices_one_after_another():
    p = chain(10, memory=1.0).with_devices(2)  # unlimited memory: budget 1.1 * 10 / 2 = 5.5
    r = optpart.solve(p, "topo")
    optpart.check(p, r)
    assert r.placement.tolist() == [0] * 5 + [1] * 5
    r = optpart.solve(p, "topo", slack=0.25)  # budget 6.25
    assert r.placement.tolist() == [0] * 6 + [1] * 4


def test_topo_rejects_a_bad_slack():
    with pytest.raises(optpart.SolverError, match="slack"):
        optpart.solve(chain(3).with_devices(2), "topo", slack=-1.0)


# ---------------------------------------------------------------------------------------- METIS
@pytest.mark.skipif("metis" not in BASELINES, reason="pymetis is not installed (extra 'metis')")
def test_metis_honours_pins_groups_and_memory():
    p = layered_dag(50, seed=7)
    total = float(p.memory.sum())
    p = p.with_devices(3, memory=0.45 * total, constraints=Constraints(
        pin={"n0": "dev2", "n49": "dev0"}, colocate=(("n1", "n2", "n30"),), forbid={"n10": ("dev1",)}))
    r = optpart.solve(p, "metis", seed=3)
    assert r.status is Status.FEASIBLE, r.message
    optpart.check(p, r)
    assert r.placement_ids(p)["n0"] == "dev2" and r.placement_ids(p)["n49"] == "dev0"
    assert len(set(r.placement_ids(p)[v] for v in ("n1", "n2", "n30"))) == 1
    assert np.unique(r.placement).size == 3  # it really partitions


@pytest.mark.skipif("metis" not in BASELINES, reason="pymetis is not installed (extra 'metis')")
def test_metis_repairs_a_balanced_cut_that_overflows_the_small_device():
    # METIS balances memory across parts; dev0 holds only 20% of the graph, so its part must
    # be emptied into dev1 by the repair, and the result must fit.
    p = layered_dag(60, seed=4)
    total = float(p.memory.sum())
    p = p.with_devices([Device("dev0", 0.2 * total), Device("dev1", 0.9 * total)])
    r = optpart.solve(p, "metis")
    assert r.status is Status.FEASIBLE, r.message
    assert r.stats["repair_moves"] > 0
    optpart.check(p, r)
    assert np.unique(r.placement).size == 2  # repaired, not collapsed onto one device


@pytest.mark.skipif("metis" not in BASELINES, reason="pymetis is not installed (extra 'metis')")
def test_metis_reports_memory_it_cannot_repair():
    # Three 6 B nodes on two 10 B devices: the total fits but no split does, and the
    # screening does not prove it, so metis itself runs, repairs, and must say it failed.
    p = chain(3, memory=6.0).with_devices([Device("dev0", 10), Device("dev1", 10)])
    r = optpart.solve(p, "metis")
    assert r.status is Status.UNKNOWN and r.placement is None
    assert "after repair" in r.message and "needs 12 B of 10 B" in r.message


def test_pinned_overflow_is_proven_before_metis_runs():
    # Everything forced onto dev0 by pins, which cannot hold it: the registry's screening
    # proves it before any solver runs (issue 15).
    p = chain(6, memory=4.0)
    p = p.with_devices([Device("dev0", 16), Device("dev1", 100)],
                       constraints=Constraints(pin={f"c{i}": "dev0" for i in range(5)}))
    r = optpart.solve(p, "metis" if "metis" in BASELINES else "heft")
    assert r.status is Status.INFEASIBLE and r.placement is None
    assert "pinned to device 'dev0' need 20 B" in r.message

