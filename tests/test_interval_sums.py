"""The seed method's overlap sums (:mod:`optpart.solvers.heuristic.interval_sums`) against a
direct sum over the intervals."""

from __future__ import annotations

import importlib

from hypothesis import given, settings
from hypothesis import strategies as st

from strategies import examples

OverlapSums = importlib.import_module("optpart.solvers.heuristic.interval_sums").OverlapSums

times = st.sampled_from([0.0, 1e-9, 0.5, 1.0, 1.0, 2.5, 3.0, 7.0, 1e6, 1e6 + 1.0])


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.tuples(times, times), max_size=30), st.lists(st.tuples(times, times), min_size=1, max_size=10))
def test_overlap_sums_equal_the_direct_sum_while_intervals_are_added(intervals, queries):
    coords = [x for ab in intervals + queries for x in ab]
    sums = OverlapSums(coords)
    sibling = OverlapSums.empty_like(sums)  # shares the coordinates, not the intervals
    added = []
    for step in range(len(intervals) + len(queries)):
        if step < len(intervals):
            a, z = sorted(intervals[step])
            sums.add(a, z)
            added.append((a, z))
        lo, hi = sorted(queries[step % len(queries)])
        want = sum(max(0.0, min(hi, z) - max(lo, a)) for a, z in added)
        assert abs(sums.overlap(lo, hi) - want) <= 1e-9 * max(1.0, len(added) * abs(hi)), (added, lo, hi)
        assert sibling.overlap(lo, hi) == 0.0
