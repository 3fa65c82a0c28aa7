"""The shared hypothesis strategies draw the cases properties need: forbidden devices, a pin
on a colocated node, colocation groups larger than pairs, GiB-scale memories, tiny and huge
time units. Each is searched for with ``hypothesis.find`` (derandomized, no database), so a
strategy that stopped drawing one fails here instead of thinning every property silently."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import Phase, find, settings

from strategies import examples, problems, split_problems

#: Generation only: the first draw that shows the feature is enough (shrinking it costs seconds);
#: the count is only a search bound (all eight searches take under a second together).
FIND = settings(max_examples=examples(2000), database=None, derandomize=True, phases=[Phase.generate])

FEATURES = {
    "forbid": lambda p: bool(p.forbidden),
    "pin on a colocated node": lambda p: any(p.pin[v] >= 0 for g in p.groups for v in g),
    "group of 3 or more": lambda p: any(len(g) >= 3 for g in p.groups),
    "GiB-scale memory": lambda p: float(p.device_memory.max(initial=0.0)) >= 2.0 ** 30,
    "nanosecond-scale times": lambda p: bool(((p.time > 0) & (p.time <= 2.0 ** -27)).any()),
    "huge times": lambda p: float(p.time.max(initial=0.0)) >= 2.0 ** 20,
    "zero-time node": lambda p: bool((p.time == 0).any()) and p.n_nodes > 1,
}


@pytest.mark.parametrize("feature", sorted(FEATURES))
def test_the_problem_strategy_draws(feature):
    found = find(problems(), FEATURES[feature], settings=FIND)
    assert FEATURES[feature](found)


def test_split_problems_draw_gib_scale_outputs_and_temporaries():
    found = find(split_problems(), lambda p: p.has_split and float(np.nanmax(p.output_bytes)) >= 2.0 ** 30,
                 settings=FIND)
    assert found.has_split
