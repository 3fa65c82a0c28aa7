"""Example models for ``optpart import`` (the README's commands): factories returning (model, inputs).

Each function builds a model from a small configuration with random weights (nothing is
downloaded) and returns ``(torch module, example inputs)``, what ``optpart import
file.py:function`` expects::

    optpart import examples/zoo.py:gpt2 -o gpt2.json --no-split GPT2Block   # Hugging Face (extra hf)
    optpart import examples/zoo.py:mlp -o mlp.json                          # torch.nn only (extra torch)

Run as a script to write an ONNX file of :func:`mlp` for ``optpart import model.onnx``::

    python examples/zoo.py model.onnx                                       # extras torch, onnx
"""

from __future__ import annotations

import sys


def mlp():
    """A 4-layer perceptron (torch.nn only).

    Returns
    -------
    (torch.nn.Module, tuple of torch.Tensor)
        The model and a batch of 32 inputs of width 256.
    """
    import torch

    torch.manual_seed(0)
    layers = []
    for _ in range(4):
        layers += [torch.nn.Linear(256, 256), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers[:-1]), (torch.randn(32, 256),)


def gpt2():
    """GPT-2 with 4 layers of width 128 (Hugging Face transformers, random weights).

    Returns
    -------
    (torch.nn.Module, tuple of torch.Tensor)
        ``GPT2LMHeadModel`` and a batch of 4 sequences of 64 token ids.
    """
    import torch
    import transformers

    torch.manual_seed(0)
    cfg = transformers.GPT2Config(n_layer=4, n_embd=128, n_head=4, vocab_size=1024, n_positions=64,
                                  use_cache=False, bos_token_id=0, eos_token_id=0)
    return transformers.GPT2LMHeadModel(cfg), (torch.randint(0, 1024, (4, 64)),)


def write_onnx(path: str) -> None:
    """Write :func:`mlp` as an ONNX file (torch's TorchScript exporter).

    Parameters
    ----------
    path : str
        The ``.onnx`` file to write.
    """
    import warnings

    import onnx  # noqa: F401  (torch's exporter needs it; imported here to name it when missing)
    import torch

    model, inputs = mlp()
    with warnings.catch_warnings():  # torch announces its newer exporter, which needs onnxscript
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.onnx.export(model, inputs, path, dynamo=False, input_names=["x"], output_names=["y"])


if __name__ == "__main__":
    if len(sys.argv) != 2 or not sys.argv[1].endswith(".onnx"):
        sys.exit("usage: python examples/zoo.py FILE.onnx")
    try:
        write_onnx(sys.argv[1])
    except ModuleNotFoundError as exc:
        sys.exit(f"examples/zoo.py: writing an ONNX file needs torch and onnx ({exc.name} is not installed): "
                 "pip install -e \".[torch,onnx]\"")
    print(f"wrote {sys.argv[1]}")
