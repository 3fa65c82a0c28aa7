"""The trace proof: the traced graph, replayed, computes eager autograd's loss and gradients.

On by default for real-tensor traces, with ``check=True`` (``--check``) for every trace; a graph
that computes something else is one line naming the worst parameter, and exit 2 on the CLI.
"""

from __future__ import annotations

import contextlib
import re

import pytest

import optpart

torch = pytest.importorskip("torch")
tf = pytest.importorskip("transformers")

from optpart.errors import FormatError  # noqa: E402
from optpart.formats.torch import trace_training_step  # noqa: E402
from optpart.formats.torch.proof import TOLERANCE, prove_step, relative_error  # noqa: E402
from optpart.formats.torch_import import from_torch  # noqa: E402


def deepseek_v3():
    """The configuration whose real-tensor trace once recorded ``as_strided`` views in autograd's
    backward (17 of 30 gradients off by up to 2e-2)."""
    cfg = tf.DeepseekV3Config(vocab_size=500, hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                              num_attention_heads=4, num_key_value_heads=4, kv_lora_rank=16, q_lora_rank=32,
                              qk_rope_head_dim=8, v_head_dim=16, qk_nope_head_dim=16, first_k_dense_replace=1,
                              max_position_embeddings=64, rope_scaling=None, use_cache=False)
    torch.manual_seed(0)
    ids = torch.randint(0, 500, (2, 16), generator=torch.Generator().manual_seed(0))
    return tf.DeepseekV3ForCausalLM(cfg), {"input_ids": ids, "labels": ids}


def test_deepseek_v3_real_trace_is_proved_and_the_proof_sees_the_view_replay_bug(monkeypatch):
    module, batch = deepseek_v3()
    problem = from_torch(module, batch, trace_mode="real")
    proof = problem.meta["trace_check"]  # on by default for a real-tensor trace
    assert problem.meta["trace_mode"] == "real" and proof["compared"] == 1 + len(list(module.parameters()))
    assert proof["loss_rel_err"] <= TOLERANCE["float32"] and proof["worst_rel_err"] <= TOLERANCE["float32"]
    assert proof["worst_parameter"] in dict(module.named_parameters())
    # Without the original-view tracking the real trace records as_strided views of a transposed
    # gradient, which functionalization scatters wrongly: the proof refuses it in one line.
    monkeypatch.setattr(torch.autograd, "_force_original_view_tracking", lambda on: contextlib.nullcontext())
    with pytest.raises(FormatError) as info:
        from_torch(module, batch, trace_mode="real")
    text = str(info.value)
    assert "\n" not in text and text.startswith("trace proof failed: the traced graph's gradient of '")
    assert "relative (tolerance 1e-05" in text


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(6, 8), torch.nn.Linear(8, 3)
        self.drop = torch.nn.Dropout(0.3)

    def forward(self, x):
        h = self.drop(torch.tanh(self.a(x)))
        return self.b(h.transpose(0, 1).contiguous().transpose(0, 1)) * 2


def test_a_wrong_graph_is_one_line_naming_the_worst_parameter():
    torch.manual_seed(0)
    module, x = Net(), torch.randn(5, 6)
    step = trace_training_step(module, (x,))
    assert prove_step(step, module, (x,))["worst_rel_err"] == 0  # same kernels, same seeded dropout mask
    graph = step.graph_module.graph
    tanh = next(nd for nd in graph.nodes if nd.op == "call_function" and "tanh" in str(nd.target)
                and "backward" not in str(nd.target))
    with graph.inserting_after(tanh):  # the graph now computes 1.001 * tanh in the forward only
        scaled = graph.call_function(torch.ops.aten.mul.Tensor, (tanh, 1.001))
    tanh.replace_all_uses_with(scaled, delete_user_cb=lambda user: user is not scaled and "backward" not in str(
        user.target))
    step.graph_module.recompile()
    with pytest.raises(FormatError) as info:
        prove_step(step, module, (x,))
    text = str(info.value)
    assert "\n" not in text
    assert re.match(r"trace proof failed: the traced graph's gradient of '[ab]\.weight' differs from eager "
                    r"autograd's by 0\.001\d* relative \(tolerance 1e-05; the loss by 0\.000\d+\)", text)
    assert "draws random numbers (1 random operator(s), seeded alike in both runs)" in text


def test_an_operator_that_fails_on_real_tensors_is_one_line_naming_it():
    torch.manual_seed(0)
    module, x = Net(), torch.randn(5, 6)
    step = trace_training_step(module, (x,))
    tanh = next(nd for nd in step.graph_module.graph.nodes if nd.op == "call_function" and "tanh" in str(nd.target)
                and "backward" not in str(nd.target))
    x_in = next(nd for nd in step.graph_module.graph.nodes if nd.name == step.node_names["input.0"])
    tanh.args = (x_in,)  # tanh of the (5, 6) input where the graph expects (5, 8): a later operator fails
    step.graph_module.recompile()
    with pytest.raises(FormatError) as info:
        prove_step(step, module, (x,))
    text = str(info.value)
    assert "\n" not in text
    assert text.startswith("trace proof: operator '")
    assert "fails on real tensors: RuntimeError: " in text


def test_dropout_is_seeded_alike_and_leaves_the_callers_generator_alone():
    torch.manual_seed(0)
    module, x = Net(), torch.randn(5, 6)
    torch.manual_seed(123)
    state = torch.get_rng_state()
    problem = from_torch(module, (x,), check=True)
    assert torch.equal(torch.get_rng_state(), state)
    proof = problem.meta["trace_check"]
    assert proof["random_operators"] == 1 and proof["worst_rel_err"] == 0 and proof["seed"] == 0


class Checkpointed(torch.nn.Module):
    """Activation checkpointing of a block with dropout: the backward recomputes the block and must
    draw the forward's mask again (checkpoint restores the generator state)."""

    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(6, 16), torch.nn.Linear(16, 2)

    def block(self, x):
        return torch.nn.functional.dropout(torch.relu(self.a(x)), 0.5, self.training)

    def forward(self, x):
        return self.b(torch.utils.checkpoint.checkpoint(self.block, x, use_reentrant=False))


def test_a_checkpointed_recomputation_draws_the_forward_mask_again():
    torch.manual_seed(0)
    module, x = Checkpointed(), torch.randn(4, 6)
    problem = from_torch(module, (x,), check=True)
    proof = problem.meta["trace_check"]
    assert proof["worst_rel_err"] == 0 and proof["random_operators"] == 1  # the replayed draw reads the first


def test_a_checkpointed_recomputation_reads_the_steps_parameters_not_the_modules():
    """The recomputation runs in the backward pass, after the forward's call returned: the module
    must still hold the step's parameters then, or the graph bakes the module's own tensors in as
    constants (meta ones for a model built on the meta device, stale ones after an update)."""
    torch.manual_seed(0)
    with torch.device("meta"):
        module = Checkpointed()
    x = torch.randn(4, 6)
    step = trace_training_step(module, (x,))
    assert [nd.target for nd in step.graph_module.graph.nodes if nd.op == "get_attr"] == []
    proof = prove_step(step, module, (x,))
    assert proof["worst_rel_err"] == 0 and proof["init"] == "fixed-seed random init (meta tensors)"


class ReentrantCheckpointed(torch.nn.Module):
    """``torch.utils.checkpoint`` with ``use_reentrant=True`` (torch's default when the flag is not passed)."""

    def __init__(self):
        super().__init__()
        self.stem, self.a, self.b = torch.nn.Linear(6, 6), torch.nn.Linear(6, 16), torch.nn.Linear(16, 2)

    def forward(self, x):
        return self.b(torch.utils.checkpoint.checkpoint(self.a, self.stem(x), use_reentrant=True))


def test_a_reentrant_checkpoint_is_refused_in_one_line_that_says_what_to_do():
    module = ReentrantCheckpointed()
    with pytest.raises(FormatError) as info:
        from_torch(module, (torch.randn(4, 6),))
    text = str(info.value)
    assert "\n" not in text and text.startswith("cannot trace ReentrantCheckpointed")
    assert "use_reentrant=False" in text
    assert all(p.grad is None for p in module.parameters())  # the user's module is left alone


class Permuted(torch.nn.Module):
    """Dropout on a permuted tensor: eager fills its memory in order, a functional draw its logical order."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv1d(3, 8, 1)

    def forward(self, x):
        h = torch.nn.functional.dropout(self.conv(x).permute(0, 2, 1), 0.5, self.training)
        return (h * torch.arange(h.shape[-1])).sum(-1)


def test_dropout_on_a_permuted_tensor_draws_eagers_mask():
    torch.manual_seed(0)
    module, x = Permuted(), torch.randn(2, 3, 7)
    assert from_torch(module, (x,), check=True).meta["trace_check"]["worst_rel_err"] == 0


def test_a_meta_model_is_proved_on_the_fixed_seed_init_or_skipped_in_one_line():
    with torch.device("meta"):
        module = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.GELU(), torch.nn.Linear(8, 2))
    x = torch.empty(3, 6, device="meta")
    assert "trace_check" not in from_torch(module, (x,)).meta  # a fake trace is proved on request
    proof = from_torch(module, (x,), check=True).meta["trace_check"]
    assert proof["init"] == "fixed-seed random init (meta tensors)" and proof["worst_rel_err"] <= 1e-5
    step = trace_training_step(module, (x,))
    skipped = prove_step(step, module, (x,), memory_limit=1000.0)
    assert list(skipped) == ["skipped"] and "\n" not in skipped["skipped"]
    assert skipped["skipped"].startswith("the proof needs about ") and "GiB are available" in skipped["skipped"]
    assert "trace_check" not in from_torch(module, (x,), check=False, trace_mode="real").meta


def test_relative_error_reads_zero_and_missing_gradients_strictly():
    z = torch.zeros(3)
    assert relative_error(None, None) == 0 and relative_error(None, z) == 0 and relative_error(z, z) == 0
    assert relative_error(torch.tensor([0.0, 1e-30]), z) == float("inf")  # eager zero must stay zero
    assert relative_error(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.5])) == pytest.approx(0.2)
    assert relative_error(torch.ones(2), torch.ones(3)) == float("inf")


def test_cli_check_prints_the_proof_and_a_wrong_graph_exits_2(tmp_path, monkeypatch, capsys):
    from optpart.cli import main
    from optpart.formats.torch import functional

    (tmp_path / "proof_zoo_test.py").write_text(
        "import torch\n"
        "def mlp():\n"
        "    torch.manual_seed(0)\n"
        "    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1)), "
        "(torch.randn(3, 4),)\n")
    out = tmp_path / "mlp.json"
    spec = str(tmp_path / "proof_zoo_test.py") + ":mlp"
    assert main(["import", spec, "-o", str(out), "--check"]) == 0
    printed = capsys.readouterr().out
    assert "trace proof: worst relative error 0 (tolerance 1e-05) over the loss and 4 gradient(s)" in printed
    assert optpart.load(out).meta["trace_check"]["compared"] == 5
    real = functional.functionalize_graph

    def wrong(gm, args, mode):  # a functionalization that returns 1.01 times the loss
        out = real(gm, args, mode)
        end = next(nd for nd in out.graph.nodes if nd.op == "output")
        with out.graph.inserting_before(end):
            bad = out.graph.call_function(torch.ops.aten.mul.Tensor, (end.args[0][0], 1.01))
        end.args = ([bad, *end.args[0][1:]],)
        out.recompile()
        return out

    monkeypatch.setattr(functional, "functionalize_graph", wrong)
    monkeypatch.setattr("optpart.formats.torch.trace.functionalize_graph", wrong)
    assert main(["import", spec, "-o", str(out), "--check"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "trace proof failed: the traced graph's loss differs from eager autograd's" in err
    assert main(["import", spec, "-o", str(out), "--no-check"]) == 0  # nothing proved, nothing refused
    assert "trace_check" not in optpart.load(out).meta
