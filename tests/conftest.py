"""Shared fixtures: hypothesis profiles, paths to shared data, tiny hand-made problems."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

import optpart

# Hypothesis: "ci" keeps the suite within minutes on 2 cores and never fails on timing;
# "thorough" is for local runs (HYPOTHESIS_PROFILE=thorough). Failing examples are kept in
# the default database (.hypothesis/) and replayed first on the next run.
settings.register_profile("ci", max_examples=40, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("thorough", max_examples=500, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = ROOT.parent / "shared" / "data"
INSTANCES = ROOT / "instances"


def shared_data(*parts: str) -> Path:
    """A path under ../shared/data, or skip the test (saying why) when it is not there."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"shared data not found at {path} (it sits beside the project checkout)")
    return path


@pytest.fixture
def diamond() -> optpart.Problem:
    """a -> (b, c) -> d on two devices; transfers take 0.5 + 10 B / 10 B/s = 1.5 s."""
    return optpart.Problem.build(
        nodes=[{"id": "a", "time": 1.0, "memory": 4}, {"id": "b", "time": 2.0, "memory": 4},
               {"id": "c", "time": 3.0, "memory": 4}, {"id": "d", "time": 1.0, "memory": 4}],
        edges=[{"src": "a", "dst": "b", "bytes": 10}, {"src": "a", "dst": "c", "bytes": 10},
               {"src": "b", "dst": "d", "bytes": 10}, {"src": "c", "dst": "d", "bytes": 10}],
        devices=[optpart.Device("gpu0", 12), optpart.Device("gpu1", 12)],
        links={"latency": 0.5, "bandwidth": 10},
        name="diamond",
    )
