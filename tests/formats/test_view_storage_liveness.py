"""A storage read through a view lives until its last reader (docs/model.md section 3).

A view has 0 output bytes, so under the peak model the bytes are the storage's: a backward
operator that reads a forward tensor only through a view (GPT-2's ``_log_softmax`` output,
read by its backward through a ``detach``) must keep that storage live until it runs.
"""

from __future__ import annotations

import torch

from optpart.formats.torch.reading import VIEW_OPS
from optpart.formats.torch_import import from_torch


class _LM(torch.nn.Module):
    """A language-model head shaped like GPT-2's: 3-D logits flattened by views before the loss."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = torch.nn.Linear(16, 32)
        self.head = torch.nn.Linear(32, 50)

    def forward(self, x):
        return self.head(torch.nn.functional.gelu(self.inner(x)))


def _loss(out, target):
    return torch.nn.functional.cross_entropy(out.view(-1, out.shape[-1]), target.view(-1))


def _problem():
    torch.manual_seed(0)
    x = torch.randn(2, 5, 16)
    y = torch.randint(0, 50, (2, 5))
    return from_torch(_LM(), (x,), targets=(y,), loss_fn=_loss)


def _is_view(meta: dict) -> bool:
    op = meta.get("op", "")
    return op.startswith("aten.") and op.split(".")[1] in VIEW_OPS


def test_every_reader_of_a_view_keeps_the_viewed_storage_live():
    p = _problem()
    preds: dict[int, list[tuple[int, float]]] = {}
    succ: dict[int, set[int]] = {}
    for s, d, b in zip(p.edge_src, p.edge_dst, p.edge_bytes):
        preds.setdefault(int(d), []).append((int(s), float(b)))
        succ.setdefault(int(s), set()).add(int(d))

    def root(v: int) -> int:
        while _is_view(p.node_meta[v]):
            data = [u for u, b in preds.get(v, []) if b > 0]
            if len(data) != 1:
                break
            v = data[0]
        return v

    checked = 0
    for v in range(p.n_nodes):
        if not _is_view(p.node_meta[v]):
            continue
        assert p.output_bytes[v] == 0, p.node_ids[v]
        r = root(v)
        if r == v or p.output_bytes[r] == 0:
            continue  # an input or parameter holds its own bytes all step
        for w in succ.get(v, ()):
            assert w in succ[r], f"{p.node_ids[w]} reads {p.node_ids[r]} through {p.node_ids[v]} without keeping it live"
            checked += 1
    assert checked > 0


def test_log_softmax_output_lives_until_its_backward():
    p = _problem()
    ids = list(p.node_ids)
    ls = next(i for i, m in enumerate(p.node_meta) if m.get("op", "").startswith("aten._log_softmax.default"))
    bwd = next(i for i, m in enumerate(p.node_meta) if m.get("op", "").startswith("aten._log_softmax_backward_data"))
    readers = {int(d) for s, d in zip(p.edge_src, p.edge_dst) if s == ls}
    assert p.output_bytes[ls] > 0
    assert bwd in readers, f"{ids[ls]} dies before {ids[bwd]}, which reads it"
