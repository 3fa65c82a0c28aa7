"""The cheap part of the family sweep: each step proved, placed at random, and run on a second batch.

``benchmarks/apply_exactness.py`` sweeps 50 families (tiny random-weight configs, no
download) through :func:`sweep`; these are the cheap ones that cover its patterns: DeepSeek-V3
with a mixture-of-experts layer (a real-tensor trace whose second batch is refused in one line),
GPT-2 with gradient checkpointing and dropout (recomputed masks), Whisper (a frozen parameter),
ViT-MAE (random masking), ConvNeXt, ``nn.MultiheadAttention`` with dropout, a custom
``autograd.Function``, a BatchNorm CNN with in-place ReLU and blocks under ``torch.utils.checkpoint``
(their recomputation reads the step's parameters).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

_path = Path(__file__).resolve().parents[2] / "benchmarks" / "apply_exactness.py"
_spec = importlib.util.spec_from_file_location("apply_exactness", _path)
sweep_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sweep_module)

CHEAP = ["deepseek_v3", "gpt2_checkpointing", "whisper", "vit_mae", "convnext", "multihead_attention",
         "autograd_function", "bn_cnn_inplace_relu", "checkpointed_blocks"]


@pytest.mark.parametrize("name", CHEAP)
def test_family_is_proved_placed_and_runs_or_refuses_a_second_batch(name):
    from optpart.formats.torch.proof import TOLERANCE

    r = sweep_module.sweep(name, sweep_module.families()[name], trials=2, seed=0)
    tol = TOLERANCE["float32"]
    assert r["proof"] <= tol and r["apply"] <= tol, r
    step, problem, module = r["step"], r["problem"], r["module"]
    if name == "deepseek_v3":  # routed: a real trace, its reads recorded, another routing refused
        assert step.trace_mode == "real" and r["second_refused"] and "\n" not in r["second"]
        assert r["second"].startswith("this step was traced on one path of its data: aten.")
        assert "model.layers.1.mlp" in problem.meta["data_dependent"]["modules"].__repr__()
    else:
        assert step.trace_mode == "fake" and not step.reads and r["second"] <= tol
    frozen = {n for n, p in module.named_parameters() if not p.requires_grad}
    assert step.frozen == frozen and (name != "whisper" or frozen)  # Whisper's sinusoidal table
    assert not any(nid == f"update.{n}" for n in frozen for nid in problem.node_ids)
    assert r["ok"]
