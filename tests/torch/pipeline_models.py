"""Tiny model factories for the pipeline tests (``optpart import``'s convention); every process of
a pipelined run imports this file by path and calls the same factory (fixed seeds, dropout off)."""

import torch
import transformers


def gpt2():
    """GPT-2 with tied input/output embeddings (``wte`` read by the first and the last stage)."""
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=100, n_positions=32,
                                  resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0)
    ids = torch.randint(0, 100, (4, 16), generator=torch.Generator().manual_seed(1))
    return {"module": transformers.GPT2LMHeadModel(cfg), "inputs": {"input_ids": ids, "labels": ids}}


def llama():
    """A Llama-style model: rotary embeddings, RMSNorm, SwiGLU, grouped-query attention."""
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32)
    ids = torch.randint(0, 64, (4, 8), generator=torch.Generator().manual_seed(1))
    return {"module": transformers.LlamaForCausalLM(cfg), "inputs": {"input_ids": ids, "labels": ids}}


class CNN(torch.nn.Module):
    """Two convolutions with batch norm and a linear head."""

    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = torch.nn.BatchNorm2d(8)
        self.conv2 = torch.nn.Conv2d(8, 16, 3, padding=1, stride=2)
        self.bn2 = torch.nn.BatchNorm2d(16)
        self.head = torch.nn.Linear(16, 10)

    def forward(self, x):
        x = torch.relu(self.bn1(self.conv1(x)))
        x = torch.relu(self.bn2(self.conv2(x)))
        return self.head(x.mean((2, 3)))


def _cross_entropy(out, target):
    return torch.nn.functional.cross_entropy(out, target)


def cnn():
    """The CNN on 8 images with class labels (a loss_fn and targets)."""
    torch.manual_seed(0)
    x = torch.randn(8, 3, 16, 16, generator=torch.Generator().manual_seed(1))
    y = torch.randint(0, 10, (8,), generator=torch.Generator().manual_seed(2))
    return {"module": CNN(), "inputs": (x,), "targets": (y,), "loss_fn": _cross_entropy}


def gpt2_plain():
    """``instances/torch_models.py``'s GPT-2 (the headline instance's model) at a tiny size."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "instances"))
    from torch_models import gpt2_training

    return gpt2_training(layers=2, d=32, heads=2, vocab=100, ctx=32, batch=4, seq=16)
