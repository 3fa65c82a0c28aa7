"""Small models placed and run by the tests of ``optpart.torch.apply``, and autograd's reference.

``MODELS`` maps a name to a factory ``() -> (module, inputs, extra)`` (``extra``: the loss
function and targets ``from_torch`` and ``apply`` take); ``plan`` places one with the
heuristic; ``reference`` and ``assert_same`` compare a placed step with plain autograd.
"""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")

import optpart  # noqa: E402
from optpart.formats.torch import default_loss  # noqa: E402
from optpart.formats.torch_import import cross_entropy, from_torch  # noqa: E402


def gpt2():
    """A two-layer GPT-2 (random weights) and a batch of token ids."""
    transformers = pytest.importorskip("transformers")
    cfg = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=61, n_positions=16,
                                  resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0)
    torch.manual_seed(0)
    return transformers.GPT2LMHeadModel(cfg), (torch.randint(0, 61, (2, 8)),), {}


def bert():
    """A two-layer BERT for masked LM with its labels and loss."""
    transformers = pytest.importorskip("transformers")
    cfg = transformers.BertConfig(num_hidden_layers=2, hidden_size=32, num_attention_heads=2, intermediate_size=64,
                                  vocab_size=53, max_position_embeddings=16, hidden_dropout_prob=0.0,
                                  attention_probs_dropout_prob=0.0, pad_token_id=0)
    torch.manual_seed(0)
    labels = torch.randint(0, 53, (2, 8))
    return (transformers.BertForMaskedLM(cfg), (torch.randint(1, 53, (2, 8)),),
            {"loss_fn": lambda out, y: cross_entropy(out.logits, y), "targets": (labels,)})


def cnn():
    """A small CNN with batch norm (its statistics update in training)."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
        torch.nn.Conv2d(8, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(), torch.nn.Linear(8, 5))
    return net, (torch.randn(4, 3, 8, 8),), {}


MODELS = {"gpt2": gpt2, "bert": bert, "cnn": cnn}


def reference(module, inputs, extra):
    """Loss and gradients of plain autograd, on a copy (batch norm updates its statistics)."""
    ref = copy.deepcopy(module).train()
    out = ref(*inputs, **({"use_cache": False} if hasattr(ref, "config") else {}))
    loss = extra["loss_fn"](out, *extra["targets"]) if "loss_fn" in extra else default_loss(out)
    loss.backward()
    return loss.detach(), {n: p.grad for n, p in ref.named_parameters()}


def plan(module, inputs, extra, devices=2):
    """The module imported with ``extra`` on ``devices`` devices and the heuristic's placement."""
    problem = from_torch(module, inputs, devices=devices, **extra)
    result = optpart.solve(problem, "heuristic", seed=0)
    assert result.ok
    return problem, result


def assert_same(loss, grads, ref_loss, ref_grads):
    """The placed step's loss and gradients equal autograd's (same names, close values)."""
    torch.testing.assert_close(loss.cpu(), ref_loss, rtol=1e-4, atol=1e-6)
    assert sorted(grads) == sorted(ref_grads)
    for name, g in ref_grads.items():
        torch.testing.assert_close(grads[name].cpu(), g, rtol=1e-4, atol=1e-6, msg=f"gradient of {name}")
