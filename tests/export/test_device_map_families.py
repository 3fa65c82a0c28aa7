"""Device maps of held-out families that accelerate accepts, dispatches and runs forward and backward.

Families from ``benchmarks/export_families.py`` (tiny random-weight configs, nothing downloaded):
Llama with a tied embedding/head imported with ``--no-split LlamaDecoderLayer``, ViT-MAE (frozen
position embeddings owned by modules whose children may sit elsewhere), T5, Mixtral (mixture of
experts), DETR and a BatchNorm ResNet. No solve: an operator placement that spreads every
module over the devices, on devices too small for the whole step, so the map must split the model.
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("accelerate")

import optpart  # noqa: E402
from optpart import export  # noqa: E402
from optpart.export.accelerate import accelerate_baseline  # noqa: E402
from optpart.formats.torch_import import from_torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import export_families as fam  # noqa: E402

SWEEP = ["llama_tied", "vit_mae", "t5", "mixtral_moe", "detr", "resnet_bn"]
_CACHE: dict = {}


def imported(name: str):
    """(model, inputs, problem on 3 devices, spread placement), imported once per family."""
    if name not in _CACHE:
        torch.manual_seed(0)
        model, inputs = fam.families()[name]()
        graph = from_torch(copy.deepcopy(model), inputs, name=name, no_split=fam.NO_SPLIT.get(name, ()))
        roomy = graph.with_devices(3, memory=float(graph.memory.sum()))
        whole = export.closest_plan(roomy, np.zeros(graph.n_nodes, dtype=np.int64), rule="accelerate")
        problem = graph.with_devices(3, memory=0.6 * float(whole.memory.max()))  # one device cannot hold it
        placement = np.arange(problem.n_nodes, dtype=np.int64) % 3  # every module's operators everywhere
        for g in problem.groups:
            placement[g] = placement[g[0]]
        _CACHE[name] = (model, inputs, problem, placement)
    return _CACHE[name]


@pytest.mark.parametrize("name", SWEEP)
def test_the_device_map_passes_accelerates_check_and_dispatch_with_equal_gradients(name):
    model, inputs, problem, placement = imported(name)
    plan = export.module_plan(problem, placement)
    assert len(set(plan.device_map.values())) > 1, plan.summary(problem)  # the model really is split
    assert fam.tensors_without_entry(model, plan.device_map) == []
    check, err = fam.apply_check(model, inputs, plan.device_map)
    assert check == "ok" and err <= 1e-5, (check, err)
    # The map closest to the placement splits modules further, and must pass just the same.
    closest = export.closest_plan(problem, placement, rule="accelerate")
    check, err = fam.apply_check(model, inputs, closest.device_map)
    assert check == "ok" and err <= 1e-5, (check, err)


def test_frozen_position_embeddings_of_a_split_module_get_an_entry():
    """ViT-MAE's frozen ``vit.embeddings.position_embeddings`` and ``decoder.decoder_pos_embed``."""
    model, inputs, problem, placement = imported("vit_mae")
    frozen = [n for n, p in model.named_parameters() if not p.requires_grad]
    assert frozen == ["vit.embeddings.position_embeddings", "decoder.decoder_pos_embed"]
    for plan in (export.closest_plan(problem, placement), export.module_plan(problem, placement)):
        assert all(any(t == k or t.startswith(k + ".") for k in plan.device_map) or "" in plan.device_map
                   for t in frozen), plan.device_map
    # The import names them on their holders, so their modules may be split: each gets its own entry.
    closest = export.closest_plan(problem, placement)
    assert not {"vit.embeddings", "decoder"} & set(closest.kept_whole)
    assert fam.tensors_without_entry(model, closest.device_map) == []
    check, err = fam.apply_check(model, inputs, closest.device_map)
    assert check == "ok" and err <= 1e-5, (check, err)


def test_no_split_layers_are_never_cut_and_only_the_tied_weight_is_called_shared():
    model, inputs, problem, placement = imported("llama_tied")
    layers = [p for p, c in problem.meta["module_classes"].items() if c == "LlamaDecoderLayer"]
    assert len(layers) == 2
    sp = export.split_points(problem, placement)
    inside = [s for s, _ in sp.stages if any(s.startswith(layer + ".") for layer in layers)]
    assert inside == [] and len(sp.stages) > 1
    # Each layer's operators share one device under the split points and under every map.
    mods = export.node_modules(problem)
    for plan in (sp.plan, export.module_plan(problem, placement), export.closest_plan(problem, placement)):
        for layer in layers:
            devs = {int(plan.placement[v]) for v, m in enumerate(mods) if m and m.startswith(layer + ".")}
            assert len(devs) == 1, (layer, devs)
        assert not any(k.startswith(layer + ".") for k in plan.device_map for layer in layers)
    # The advice names weights used by modules of different stages: at most the tied embedding/head.
    for line in sp.notes():
        assert "model.embed_tokens.weight" in line and "lm_head" in line, line


def test_the_map_is_scored_and_chosen_as_accelerate_runs_it():
    """One device at a time: the export beats the map closest to the placement and accelerate's
    balanced map on the same rule, says so, and names the hardware its costs assume."""
    model, inputs, problem, placement = imported("llama_tied")
    plan = export.module_plan(problem, placement)
    closest = export.closest_plan(problem, placement, rule="accelerate")
    assert plan.rule == "accelerate" and plan.fits
    assert plan.makespan == pytest.approx(plan.run.time) and plan.run.transfers < closest.run.transfers
    assert plan.makespan < closest.makespan
    acc, _ = accelerate_baseline(problem, model, balanced=True)
    assert acc.makespan >= plan.makespan or not acc.ok
    line = plan.summary(problem)
    assert "as accelerate runs it, one device at a time" in line and "(forward, backward and optimizer)" in line
    cm = problem.meta["cost_model"]
    assert f"costs: cost model {cm['peak_flops'] / 1e12:.3g} TFLOP/s x {cm['efficiency']}" in line
    assert "links 25 GB/s, 10 us" in line
    # The time printed is the evaluator's score of the one-node-at-a-time schedule.
    again = optpart.evaluate(problem, plan.placement, plan.run.start)
    assert again.makespan == pytest.approx(plan.makespan)
    assert np.allclose(again.memory_peak, plan.memory)
