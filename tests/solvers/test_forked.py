"""A construction in a forked process (optpart.schedule.forked) and the heuristic's use of it:
the same schedule to the bit, the constructions' exceptions passed on, a failed child replaced
by the caller's own run, a child no longer needed killed; Graph.compact's arrays read as the lists.
"""

from __future__ import annotations

import math
import os
import sys
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import optpart
from optpart.generators import planted_dag
from optpart.model.paths import priority_order, upward_rank
from optpart.schedule import Graph, NoRoom, StaticPolicy, TimeUp, eft_schedule, etf_schedule
from optpart.schedule.forked import Forked, cpus_available
from optpart.solvers.heuristic import pipeline

from strategies import examples, problems, zero_time_problems

CAN_FORK = sys.platform.startswith("linux") and cpus_available() >= 2


def _problem(n=600, seed=3, **kw):
    return planted_dag(n, 4, ccr=1.0, seed=seed, window=8, **kw)


def _etf(problem, g=None):
    g = Graph(problem) if g is None else g
    return etf_schedule(g, upward_rank(problem).tolist(), StaticPolicy(problem, solver="t"))


def test_a_forked_construction_returns_the_callers_schedule_to_the_bit():
    problem = _problem()
    want = _etf(problem)
    side = Forked(lambda: _etf(problem))
    assert side.forked == CAN_FORK
    with side:
        got = side.result()
    assert (got.place, got.start, got.finish) == (want.place, want.start, want.finish)
    assert all(type(x) is float for x in got.start) and all(type(d) is int for d in got.place)


def test_a_forked_construction_passes_on_no_room_and_time_up():
    problem = _problem(n=200)
    tight = problem.with_memory_scale(1e-6)  # no node fits anywhere

    def no_room():
        return etf_schedule(Graph(tight), upward_rank(tight).tolist(), StaticPolicy(tight, solver="t"))

    with pytest.raises(NoRoom) as want:
        no_room()
    with Forked(no_room) as side, pytest.raises(NoRoom) as got:
        side.result()
    assert (got.value.node, got.value.message) == (want.value.node, want.value.message)

    big = _problem(n=3000)  # the deadline is read every 1,024 placements

    def time_up():
        return etf_schedule(Graph(big), upward_rank(big).tolist(), StaticPolicy(big), deadline=-math.inf)

    with Forked(time_up) as side, pytest.raises(TimeUp):
        side.result()


@pytest.mark.skipif(not CAN_FORK, reason="no fork here (needs Linux and two CPUs): nothing to fail over")
def test_a_child_that_fails_is_replaced_by_the_callers_own_run():
    problem = _problem(n=200)
    parent = os.getpid()

    def only_here():
        if os.getpid() != parent:
            raise RuntimeError("the child breaks")
        return _etf(problem)

    with Forked(only_here) as side:
        assert side.forked
        got = side.result()
    assert got.finish == _etf(problem).finish


@pytest.mark.skipif(not CAN_FORK, reason="no fork here (needs Linux and two CPUs): no child to stop")
def test_a_child_no_longer_needed_is_killed_and_reaped():
    side = Forked(lambda: time.sleep(600))
    pid = side._pid
    t0 = time.monotonic()
    side.close()
    assert time.monotonic() - t0 < 60  # it did not wait for the child's 600 s
    with pytest.raises(ChildProcessError):  # reaped: no zombie left
        os.waitpid(pid, os.WNOHANG)


def test_the_compact_graph_reads_as_the_lists_and_schedules_alike():
    problem = _problem()
    g = Graph(problem)
    c = g.compact()
    for name in ("time", "in_ptr", "out_ptr", "pred", "succ", "in_link"):
        assert list(getattr(c, name)) == list(getattr(g, name)), name
    order = priority_order(problem, upward_rank(problem)).tolist()
    assert eft_schedule(c, order, StaticPolicy(problem)) == eft_schedule(g, order, StaticPolicy(problem))
    want, got = _etf(problem, g), _etf(problem, c)
    assert (list(got.place), list(got.start)) == (want.place, want.start)


@pytest.mark.parametrize("chains", [False, True])
def test_the_heuristic_with_two_processes_gives_the_one_process_answer(monkeypatch, chains):
    # the fork size lowered so that a small graph takes the two-process path
    monkeypatch.setattr(pipeline, "FORK_SIZE", 0)
    problem = planted_dag(3000, 4, ccr=5.0, seed=11, chains=chains, window=8)
    one = optpart.solve(problem, "heuristic", memory_model="static", workers=1)
    two = optpart.solve(problem, "heuristic", memory_model="static", workers=2)
    assert one.stats["processes"] == 1
    assert two.stats["processes"] == (2 if CAN_FORK else 1)
    assert two.makespan == one.makespan
    assert (two.placement == one.placement).all() and (two.start == one.start).all()


def test_the_workers_option_is_checked():
    with pytest.raises(optpart.SolverError, match="workers"):
        optpart.solve(_problem(n=50), "heuristic", workers=0)


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(problems(max_nodes=16, max_devices=5, pins=True), zero_time_problems(max_nodes=14)))
def test_two_processes_give_one_process_answer_on_random_problems(problem):
    # every problem takes the two-process path (fork size 0): pins, groups, per-pair links (the
    # general m-ETF engine in the child), tight memory (m-ETF finds no room there), zero times
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(pipeline, "FORK_SIZE", 0)
        one = optpart.solve(problem, "heuristic", memory_model="static", workers=1)
        two = optpart.solve(problem, "heuristic", memory_model="static", workers=2)
    assert two.status == one.status
    if one.status.has_solution:
        if problem.n_nodes:
            assert two.stats["processes"] == (2 if CAN_FORK else 1)
        assert two.makespan == one.makespan
        assert (two.placement == one.placement).all() and (two.start == one.start).all()
