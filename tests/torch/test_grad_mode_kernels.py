"""A traced step replays as it was traced: with grad mode on.

Some kernels return what their backward reads only when grad mode is on: ``nn.LSTM`` on a
CPU runs ``aten.mkldnn_rnn_layer``, whose oneDNN workspace (read by
``mkldnn_rnn_layer_backward``) is an undefined tensor under ``torch.no_grad()``. The trace
records the forward with grad mode on, so the proof, the functionalization, the profiler and
the placed step must run the graph that way too (nothing in it requires grad, so no autograd
graph is built).
"""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")

from optpart.formats.torch import trace_training_step  # noqa: E402
from optpart.formats.torch_import import from_torch  # noqa: E402
from optpart.torch import apply  # noqa: E402


class Tagger(torch.nn.Module):
    """An embedding, a two-layer bidirectional LSTM and a head."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(11, 4)
        self.rnn = torch.nn.LSTM(4, 3, num_layers=2, batch_first=True, bidirectional=True)
        self.head = torch.nn.Linear(6, 2)

    def forward(self, x):
        out, _ = self.rnn(self.emb(x))
        return self.head(out)


def _batch(seed: int):
    return (torch.randint(0, 11, (2, 5), generator=torch.Generator().manual_seed(seed)),)


def _eager(model, x):
    ref = copy.deepcopy(model)
    loss = ref(*x).mean()
    loss.backward()
    return loss.detach(), {n: p.grad for n, p in ref.named_parameters()}


def test_an_lstm_step_is_proved_and_its_placed_step_equals_autograd_even_under_no_grad():
    torch.manual_seed(0)
    model, x = Tagger(), _batch(0)
    problem = from_torch(copy.deepcopy(model), x, check=True)
    assert problem.meta["trace_check"]["worst_rel_err"] <= 1e-5
    step = trace_training_step(model, x)
    assert any(nd.target is torch.ops.aten.mkldnn_rnn_layer.default for nd in step.graph_module.graph.nodes) \
        or not torch.backends.mkldnn.is_available()
    ids = problem.node_ids
    plan = {nid: ("a" if i % 2 else "b") for i, nid in enumerate(ids)}
    for g in problem.groups:
        for v in g:
            plan[ids[v]] = plan[ids[g[0]]]
    gm = apply(copy.deepcopy(model), x, plan, {"a": "cpu", "b": "cpu:0"}, problem, step=step)
    for seed in (0, 1):  # the traced batch and a second one
        batch = _batch(seed)
        want_loss, want = _eager(model, batch)
        for mode in (torch.enable_grad, torch.no_grad):  # a step returns its gradients: no_grad is natural
            with mode():
                loss, grads = gm(*batch)
            assert torch.allclose(loss, want_loss, rtol=1e-5, atol=1e-6)
            assert sorted(grads) == sorted(want)
            for n, g in want.items():
                assert torch.allclose(grads[n], g, rtol=1e-5, atol=1e-6), n


def test_an_lstm_step_is_profiled_on_real_tensors():
    from optpart.torch.profiling import profile_times

    torch.manual_seed(0)
    model, x = Tagger(), _batch(0)
    step = trace_training_step(model, x)
    times = profile_times(step, "cpu", repeats=1, warmup=0, module=model, example_inputs=x)
    assert set(times) >= set(step.node_names) and all(t >= 0 for t in times.values())
