"""The PyTorch models of the bundled instances, in plain ``torch.nn`` (no downloads).

``instances/make.py`` traces them on fake tensors (:func:`optpart.formats.torch_import.from_torch`).
"""

from __future__ import annotations


def torch_models() -> dict:
    """The model classes, by name (ResNet50, GPT2, ViT, LSTMLM, MLP), built when called.

    Returns
    -------
    dict
        Class name -> ``torch.nn.Module`` subclass (torch is imported here: it is optional).
    """
    import torch
    import torch.nn.functional as F
    from torch import nn

    class Bottleneck(nn.Module):
        def __init__(self, cin, width, stride):
            super().__init__()
            cout = width * 4
            self.c1, self.b1 = nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width)
            self.c2, self.b2 = nn.Conv2d(width, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width)
            self.c3, self.b3 = nn.Conv2d(width, cout, 1, bias=False), nn.BatchNorm2d(cout)
            self.down = None
            if stride != 1 or cin != cout:
                self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x):
            y = F.relu(self.b1(self.c1(x)))
            y = F.relu(self.b2(self.c2(y)))
            y = self.b3(self.c3(y))
            return F.relu(y + (x if self.down is None else self.down(x)))

    class ResNet50(nn.Module):
        """He et al., "Deep residual learning for image recognition", CVPR 2016 (50 layers)."""

        def __init__(self, classes=1000):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
                                      nn.MaxPool2d(3, 2, 1))
            layers, cin = [], 64
            for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
                for b in range(blocks):
                    layers.append(Bottleneck(cin, width, stride if b == 0 else 1))
                    cin = width * 4
            self.layers = nn.Sequential(*layers)
            self.fc = nn.Linear(2048, classes)

        def forward(self, x):
            return self.fc(self.layers(self.stem(x)).mean(dim=(2, 3)))

    class Block(nn.Module):
        def __init__(self, d, heads, causal):
            super().__init__()
            self.heads, self.causal = heads, causal
            self.ln1, self.qkv, self.proj = nn.LayerNorm(d), nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.ln2, self.fc, self.out = nn.LayerNorm(d), nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
            q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
            a = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
            x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
            return x + self.out(F.gelu(self.fc(self.ln2(x))))

    class GPT2(nn.Module):
        """Radford et al., "Language models are unsupervised multitask learners", 2019 (tied head)."""

        def __init__(self, layers=12, d=768, heads=12, vocab=50257, ctx=1024):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(ctx, d)
            self.blocks = nn.ModuleList(Block(d, heads, True) for _ in range(layers))
            self.ln = nn.LayerNorm(d)
            self.head = nn.Linear(d, vocab, bias=False)
            self.head.weight = self.wte.weight

        def forward(self, idx):
            pos = torch.arange(idx.shape[1], device=idx.device)
            x = self.wte(idx) + self.wpe(pos)
            for blk in self.blocks:
                x = blk(x)
            return self.head(self.ln(x))

    class ViT(nn.Module):
        """Dosovitskiy et al., "An image is worth 16x16 words", ICLR 2021 (ViT-B/16 shape)."""

        def __init__(self, layers=12, d=768, heads=12, patch=16, image=224, classes=1000):
            super().__init__()
            self.embed = nn.Conv2d(3, d, patch, patch)
            self.cls = nn.Parameter(torch.zeros(1, 1, d))
            self.pos = nn.Parameter(torch.zeros(1, (image // patch) ** 2 + 1, d))
            self.blocks = nn.ModuleList(Block(d, heads, False) for _ in range(layers))
            self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, classes)

        def forward(self, img):
            x = self.embed(img).flatten(2).transpose(1, 2)
            x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
            for blk in self.blocks:
                x = blk(x)
            return self.head(self.ln(x)[:, 0])

    class LSTMLM(nn.Module):
        """Zaremba et al., "Recurrent neural network regularization", 2014 (unrolled, shared cells)."""

        def __init__(self, layers=2, hidden=1024, vocab=10000, steps=32):
            super().__init__()
            self.steps = steps
            self.emb = nn.Embedding(vocab, hidden)
            self.cells = nn.ModuleList(nn.LSTMCell(hidden, hidden) for _ in range(layers))
            self.dec = nn.Linear(hidden, vocab)

        def forward(self, idx):
            b = idx.shape[0]
            x = self.emb(idx)
            states = [(x.new_zeros(b, c.hidden_size), x.new_zeros(b, c.hidden_size)) for c in self.cells]
            outs = []
            for t in range(self.steps):
                h = x[:, t]
                for i, cell in enumerate(self.cells):
                    states[i] = cell(h, states[i])
                    h = states[i][0]
                outs.append(self.dec(h))
            return torch.stack(outs, dim=1)

    class MLP(nn.Module):
        def __init__(self, sizes=(784, 1024, 1024, 1024, 10)):
            super().__init__()
            self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(sizes[:-1], sizes[1:]))

        def forward(self, x):
            for i, layer in enumerate(self.layers):
                x = layer(x)
                if i + 1 < len(self.layers):
                    x = F.relu(x)
            return x

    return dict(ResNet50=ResNet50, GPT2=GPT2, ViT=ViT, LSTMLM=LSTMLM, MLP=MLP)


def gpt2_training(layers: int = 12, d: int = 768, heads: int = 12, vocab: int = 50257, ctx: int = 1024,
                  batch: int = 8, seq: int = 512, seed: int = 0) -> dict:
    """GPT-2 as ``instances/gpt2-training.json`` traces it, with weights and a batch: a model factory.

    ``optpart run PLAN --model instances/torch_models.py:gpt2_training`` calls it in every
    process; the fixed seed gives every process the same weights and tokens. The defaults are
    the bundled instance's (GPT-2 small, 8 sequences of 512 tokens, the loss ``make.py`` uses);
    the model has no dropout.

    Parameters
    ----------
    layers, d, heads, vocab, ctx : int
        Depth, width, attention heads, vocabulary and positions.
    batch, seq : int
        Sequences and tokens per sequence.
    seed : int
        Seed of the weights (``seed``) and of the tokens and targets (``seed + 1``).

    Returns
    -------
    dict
        ``{"module", "inputs", "targets", "loss_fn"}`` (``optpart import``'s convention).
    """
    import torch

    from optpart.formats.torch_import import cross_entropy

    torch.manual_seed(seed)
    model = torch_models()["GPT2"](layers=layers, d=d, heads=heads, vocab=vocab, ctx=ctx)
    g = torch.Generator().manual_seed(seed + 1)
    x = torch.randint(0, vocab, (batch, seq), generator=g)
    y = torch.randint(0, vocab, (batch, seq), generator=g)
    return {"module": model, "inputs": (x,), "targets": (y,), "loss_fn": cross_entropy}
