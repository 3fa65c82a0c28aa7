"""The heuristic's effort: more effort never loses the placement found with less."""

from __future__ import annotations

import pytest
from conftest import INSTANCES

import optpart


def test_more_effort_never_loses_the_placement_found_with_less():
    torch = pytest.importorskip("torch")
    from optpart.fit import min_capacity
    from optpart.formats.torch_import import from_torch

    torch.manual_seed(0)
    net = torch.nn.Transformer(d_model=16, nhead=2, num_encoder_layers=1, num_decoder_layers=1,
                               dim_feedforward=32, batch_first=True)
    graph = from_torch(net, (torch.randn(2, 5, 16), torch.randn(2, 4, 16)))
    k = 8
    cap = min_capacity(graph.with_devices(k), k, "heuristic").capacity
    p = graph.with_devices(k, memory=cap)
    quick = optpart.solve(p, "heuristic", effort=0)
    assert quick.status.has_solution
    optpart.check(p, quick)
    default = optpart.solve(p, "heuristic")
    assert default.status.has_solution, default.message
    assert default.makespan <= quick.makespan * (1 + 1e-12)


def test_effort_five_is_never_worse_than_the_default_on_the_bundled_mlp():
    p = optpart.load(INSTANCES / "small" / "mlp4-torch-training.json")
    r1 = optpart.solve(p, "heuristic")
    r5 = optpart.solve(p, "heuristic", effort=5)
    optpart.check(p, r5)
    assert r1.status.has_solution and r5.status.has_solution
    assert r5.makespan <= r1.makespan * (1 + 1e-12), (r1.makespan, r5.makespan)
