"""Communication-aware heads and tails (``_exact_common.heads_tails_comm``) are valid bounds.

On the random tiny problems of ``test_exact.py`` (pins, forbids, colocation, speeds,
per-pair links, non-integral times) the bound never exceeds the brute-force optimum of
``tests/oracle.py``; on communication-heavy shapes it is strictly above the
communication-free critical path.
"""

from __future__ import annotations

import numpy as np
import pytest

import optpart
from optpart import Device
from optpart.evaluate import problem_lower_bound
from optpart.problem import Links
from optpart.solvers import _exact_common as xc

from oracle import brute_force
from test_exact import feasible_random_problem


@pytest.mark.parametrize("seed", range(60))
def test_comm_bound_never_exceeds_the_optimum(seed):
    p, best = feasible_random_problem(seed)
    assert xc.comm_lower_bound(p) <= best * (1 + 1e-9) + 1e-9


def _fork(width: int, nbytes: float) -> optpart.Problem:
    """One source feeding ``width`` unit nodes that feed one sink; transfers of ``nbytes``."""
    n = width + 2
    src = [0] * width + list(range(1, width + 1))
    dst = list(range(1, width + 1)) + [n - 1] * width
    return optpart.Problem.from_arrays([f"v{i}" for i in range(n)], np.ones(n), np.ones(n), src, dst,
                                       np.full(2 * width, nbytes), devices=[Device("a", 1e9), Device("b", 1e9)],
                                       links=Links(0.0, 1.0), name=f"fork-{width}")


@pytest.mark.parametrize("width,nbytes", [(2, 5.0), (3, 10.0), (4, 0.5)])
def test_comm_bound_on_forks_matches_brute_force_reasoning(width, nbytes):
    p = _fork(width, nbytes)
    best, _, _ = brute_force(p)
    bound = xc.comm_lower_bound(p)
    assert bound <= best * (1 + 1e-9)
    # Communication-free critical path: 3. With costly transfers the middle nodes either
    # share the source's device (serialised) or pay two transfers.
    assert problem_lower_bound(p) <= bound
    if nbytes >= width:
        assert bound > 3.0 + 1e-9


def test_comm_heads_reach_cpsat_bound_on_a_chain_of_costly_transfers():
    # A fork of 2 with transfers of 10: running both children on the source's device
    # costs 1 + 2 + 1 = 4 < 1 + 10 + ..., so the head of the sink is 3 and the bound 4.
    p = _fork(2, 10.0)
    assert xc.comm_lower_bound(p) == pytest.approx(4.0)
    r = optpart.solve(p, "cpsat", time_limit=600, deterministic_time=5.0)
    optpart.check(p, r)
    assert r.status is optpart.Status.OPTIMAL and r.makespan == pytest.approx(4.0)
