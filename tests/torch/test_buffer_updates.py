"""A placed step leaves the module's buffers where eager training leaves them.

A forward may update a buffer in place (``BatchNorm``'s running statistics, a step counter)
or replace it by a new tensor (``self.ema = 0.5 * self.ema + ...``). The traced step must
carry both: its loss and gradients equal eager autograd's on the first batch either way, so
only the module's state after the step, and every later step that reads it, shows a lost
update.
"""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")

from optpart.formats.torch import default_loss, trace_training_step  # noqa: E402
from optpart.formats.torch_import import from_torch  # noqa: E402
from optpart.torch import apply  # noqa: E402


class Ema(torch.nn.Module):
    """A linear layer whose output is centred by a running mean reassigned in the forward."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.register_buffer("ema", torch.zeros(4))
        self.register_buffer("steps", torch.zeros((), dtype=torch.long))

    def forward(self, x):
        h = self.lin(x)
        self.ema = 0.5 * self.ema + 0.5 * h.detach().mean(0)  # a new tensor, not in place
        self.steps += 1  # in place
        return (h - self.ema) * self.steps


class Grows(torch.nn.Module):
    """A buffer that grows by the batch at every step."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.register_buffer("seen", torch.zeros(0, 4))

    def forward(self, x):
        self.seen = torch.cat([self.seen, x.detach()])
        return self.lin(x)


def _placed(model, x):
    problem = from_torch(copy.deepcopy(model), x, check=True)
    plan = {nid: ("a" if i % 2 else "b") for i, nid in enumerate(problem.node_ids)}
    for g in problem.groups:
        for v in g:
            plan[problem.node_ids[v]] = plan[problem.node_ids[g[0]]]
    held = copy.deepcopy(model)
    return held, apply(held, x, plan, {"a": "cpu", "b": "cpu:0"}, problem, step=trace_training_step(model, x))


def test_a_reassigned_buffer_moves_as_in_eager_training():
    torch.manual_seed(0)
    model = Ema()
    batches = [(torch.randn(3, 4, generator=torch.Generator().manual_seed(s)),) for s in range(3)]
    held, gm = _placed(model, batches[0])
    eager = copy.deepcopy(model)
    for x in batches:  # the later steps read the buffer the earlier ones left
        loss, grads = gm(*x)
        eager.zero_grad()
        want = default_loss(eager(*x))
        want.backward()
        assert torch.allclose(loss, want, rtol=1e-5, atol=1e-7)
        for n, p in eager.named_parameters():
            assert torch.allclose(grads[n], p.grad, rtol=1e-5, atol=1e-7), n
    assert int(held.steps) == int(eager.steps) == 3
    assert torch.allclose(held.ema, eager.ema, rtol=1e-6, atol=1e-7) and bool(held.ema.abs().sum() > 0)
    assert model.ema.abs().sum() == 0 and int(model.steps) == 0  # the import changed nothing


def test_a_buffer_reassigned_with_another_shape_is_refused_in_one_line():
    from optpart.errors import FormatError

    with pytest.raises(FormatError) as exc:
        trace_training_step(Grows(), (torch.randn(3, 4),))
    msg = str(exc.value)
    assert "\n" not in msg and "buffer 'seen'" in msg and "(3, 4)" in msg and "(0, 4)" in msg
