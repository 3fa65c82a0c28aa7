"""The one replay of the exact solvers (optpart/schedule/replay.py) and its transfer arithmetic.

The exact solvers' tables divide as the model does (``latency + bytes / bandwidth``), so
their transfers equal :meth:`Problem.transfer_times` bit for bit (multiplying by an inverse
differs in the last bits on about 15% of edges), and a replayed schedule is exactly what
the evaluator scores.
"""

from __future__ import annotations

import numpy as np
import pytest

import optpart
from optpart.generators import layered_dag
from optpart.model.devices import Links
from optpart.schedule.replay import integer_schedule, tighten_schedule
from optpart.solvers.exact.grid import TimeGrid, durations, transfer_table


def _odd_links(seed: int) -> optpart.Problem:
    p = layered_dag(40, k=3, seed=seed, ccr=1.0)
    return p.with_devices(3, links=Links(latency=1e-3 / 3, bandwidth=7.3e6 + seed))


@pytest.mark.parametrize("seed", [0, 1])
def test_transfer_table_is_the_models_arithmetic(seed):
    p = _odd_links(seed)
    table = transfer_table(p)
    rng = np.random.default_rng(seed)
    for _ in range(5):
        place = rng.integers(0, 3, size=p.n_nodes)
        mine = table[np.arange(p.n_edges), place[p.edge_src], place[p.edge_dst]]
        assert np.array_equal(mine, p.transfer_times(place))  # bit for bit


@pytest.mark.parametrize("seed", [0, 1])
def test_replays_keep_the_order_and_never_start_later(seed):
    p = _odd_links(seed)
    place = np.random.default_rng(seed).integers(0, 3, size=p.n_nodes)
    start, finish = optpart.canonical_schedule(p, place)
    tight = tighten_schedule(p, place, start, finish)
    assert (tight <= start + 1e-12).all()
    fin = tight + p.duration(place)
    comm = p.transfer_times(place)
    assert (tight[p.edge_dst] >= fin[p.edge_src] + comm - 1e-12).all()  # precedence with transfers
    for d in range(3):  # each device runs one node at a time
        on = np.flatnonzero(place == d)
        order = on[np.argsort(tight[on], kind="stable")]
        assert (tight[order[1:]] >= fin[order[:-1]] - 1e-12).all()
    # On an exact integer grid the integer replay is the float one, scaled.
    grid = TimeGrid(1e6, False, 0.0)
    dur_u, comm_u = grid.up(durations(p)), grid.up(transfer_table(p))
    units = integer_schedule(p, place, tight, dur_u, comm_u)
    ends = units + dur_u[np.arange(p.n_nodes), place]
    for e in range(p.n_edges):  # a valid integer schedule: every input arrives before its consumer starts
        u, w = int(p.edge_src[e]), int(p.edge_dst[e])
        assert units[w] >= ends[u] + comm_u[e, place[u], place[w]]
    assert units.min() >= 0
