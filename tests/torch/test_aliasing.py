"""A placed step computes the model's loss and gradients under ANY valid placement and
ANY topological order, also for models full of in-place operators and views; the aliasing
checker proves that no two operators touching one storage, at least one writing, are unordered."""

from __future__ import annotations

import copy
import dataclasses
import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from strategies import examples  # noqa: E402

from optpart.errors import FormatError  # noqa: E402
from optpart.formats.torch import (check_aliasing, default_loss, ordering_edges, trace_training_step,  # noqa: E402
                                   unordered_accesses)
from optpart.formats.torch import trace as trace_mod  # noqa: E402
from optpart.formats.torch.aliasing import written_args  # noqa: E402
from optpart.formats.torch_import import from_torch, problem_from_traced  # noqa: E402
from optpart.result import Result, Status  # noqa: E402
from optpart.torch import apply  # noqa: E402
from placed_models import assert_same  # noqa: E402  (loss and gradients equal autograd's)

DEVICES = {"dev0": "cpu", "dev1": "cpu:0"}  # two torch devices: every crossing edge is a real copy


class PoolNet(torch.nn.Module):
    """Linear, Linear, AdaptiveAvgPool1d(1) on a transposed tensor: its backward copies into an
    as_strided view of a new_zeros buffer (weight gradient 0x on an unordered schedule)."""

    def __init__(self):
        super().__init__()
        self.a, self.b, self.pool = torch.nn.Linear(4, 6), torch.nn.Linear(6, 3), torch.nn.AdaptiveAvgPool1d(1)

    def forward(self, x):
        return self.pool(self.b(self.a(x)).transpose(1, 2)).flatten(1)


class GRUNet(torch.nn.Module):
    """Conv1d + BatchNorm (train mode: running statistics) + nn.GRU (the CPU composite)."""

    def __init__(self, rnn=torch.nn.GRU):
        super().__init__()
        self.conv, self.bn = torch.nn.Conv1d(3, 4, 3), torch.nn.BatchNorm1d(4)
        self.rnn, self.head = rnn(4, 5, batch_first=True), torch.nn.Linear(5, 2)

    def forward(self, x):
        h = torch.relu(self.bn(self.conv(x))).transpose(1, 2)
        out, _ = self.rnn(h)
        return self.head(out[:, -1])


class InPlace(torch.nn.Module):
    """index_put_, scatter_, copy_ into slices, masked_fill_ and an in-place ReLU on activations."""

    def __init__(self):
        super().__init__()
        self.lin, self.act = torch.nn.Linear(4, 6), torch.nn.ReLU(inplace=True)

    def forward(self, x):
        h = self.lin(x)
        b = h.shape[0]
        z = h.clone()
        z.masked_fill_(h > 0.2, 0.0)
        s = h.new_zeros(b, 8).scatter_(1, torch.arange(6).flip(0).expand(b, 6), h * 3)
        t = h.new_zeros(b, 8)
        t.index_put_((torch.arange(b), torch.zeros(b, dtype=torch.long)), h[:, 0] * h[:, 1], accumulate=True)
        u = h.new_zeros(b, 8)
        u[:, 1:7].copy_(h * 2)
        u[:, 0] += h[:, 5]
        return self.act(z).sum(1) + s.pow(2).sum(1) + t.sum(1) + (u * s).sum(1)


class Tied(torch.nn.Module):
    """An embedding whose weight is also the output projection's."""

    def __init__(self):
        super().__init__()
        self.emb, self.out = torch.nn.Embedding(11, 4), torch.nn.Linear(4, 11, bias=False)
        self.out.weight = self.emb.weight

    def forward(self, ids):
        return self.out(torch.tanh(self.emb(ids)))


def swin():
    transformers = pytest.importorskip("transformers")
    cfg = transformers.SwinConfig(image_size=8, patch_size=2, num_channels=3, embed_dim=8, depths=[1, 1],
                                  num_heads=[1, 2], window_size=2, mlp_ratio=1.0, hidden_dropout_prob=0.0,
                                  attention_probs_dropout_prob=0.0, drop_path_rate=0.0)
    return transformers.SwinModel(cfg), (torch.randn(2, 3, 8, 8),)


MODELS = {
    "pool1d": lambda: (PoolNet(), (torch.randn(2, 5, 4),)),
    "pool2d": lambda: (torch.nn.Sequential(torch.nn.Conv2d(2, 3, 3), torch.nn.AdaptiveAvgPool2d((2, 1)),
                                           torch.nn.Flatten(), torch.nn.Linear(6, 2)), (torch.randn(2, 2, 7, 6),)),
    "gru_bn": lambda: (GRUNet(), (torch.randn(3, 3, 6),)),
    "lstm": lambda: (GRUNet(torch.nn.LSTM), (torch.randn(2, 3, 5),)),
    "inplace": lambda: (InPlace(), (torch.randn(3, 4),)),
    "tied": lambda: (Tied(), (torch.randint(0, 11, (2, 5)),)),
    "swin": swin,
}


def reference(module, inputs):
    """Loss, gradients and buffers after one eager autograd step, on a copy."""
    ref = copy.deepcopy(module).train()
    loss = default_loss(ref(*inputs))
    loss.backward()
    return loss.detach(), {n: p.grad for n, p in ref.named_parameters()}, dict(ref.named_buffers())


def random_plan(problem, rng) -> Result:
    """A random valid placement (colocation groups kept whole) and a random topological order
    (random start times; the placed step runs ops by start time, dependencies kept)."""
    n = problem.n_nodes
    placement = rng.integers(0, 2, n)
    for g in getattr(problem, "groups", None) or []:
        placement[g] = rng.integers(0, 2)
    return Result(problem=problem.name, solver="random", status=Status.FEASIBLE,
                  placement=placement.astype(np.int64), start=rng.random(n))


def run_placed(module, inputs, step, problem, rng):
    gm = apply(module, inputs, random_plan(problem, rng), DEVICES, problem.with_devices(2), step=step)
    return gm(*inputs)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_placed_step_is_exact_under_random_placements_and_orders(name):
    torch.manual_seed(0)
    module, inputs = MODELS[name]()
    ref_loss, ref_grads, _ = reference(module, inputs)
    step = trace_training_step(module, inputs)
    assert step.functional and not step.notes
    check_aliasing(step)
    # Functionalized: nothing writes but the closing copy_ into a buffer (batch norm's statistics).
    writers = [nd for nd in step.graph_module.graph.nodes if written_args(nd)]
    assert all(w.target is torch.ops.aten.copy_.default and w.args[0].op == "placeholder" for w in writers)
    problem = problem_from_traced(step)
    rng = np.random.default_rng(22)
    for _ in range(3):
        loss, grads = run_placed(copy.deepcopy(module), inputs, step, problem, rng)
        assert_same(loss, grads, ref_loss, ref_grads)


def test_batch_norm_statistics_are_an_explicit_ordered_side_effect():
    torch.manual_seed(0)
    module, inputs = MODELS["gru_bn"]()
    _, _, ref_buffers = reference(module, inputs)
    step = trace_training_step(module, inputs)
    problem = problem_from_traced(step)
    writes = {nd.name: nd.args[0].name for nd in step.graph_module.graph.nodes
              if nd.op == "call_function" and nd.target is torch.ops.aten.copy_.default}
    buffer_of = {fx: nid for nid, fx in step.node_names.items() if nid.startswith("buffer.")}
    assert sorted(buffer_of[b] for b in writes.values()) == \
        ["buffer.bn.num_batches_tracked", "buffer.bn.running_mean", "buffer.bn.running_var"]
    # Each write is colocated with its buffer, ordered after every reader, and owned by the module.
    groups = [set(problem.node_ids[i] for i in g) for g in problem.groups]
    for w, b in writes.items():
        assert any({w, buffer_of[b]} <= g for g in groups)
        assert step.node_module[w][0] == "bn"
    placed = copy.deepcopy(module)
    run_placed(placed, inputs, step, problem, np.random.default_rng(1))
    for name, value in ref_buffers.items():  # the placed step updates the module like eager
        torch.testing.assert_close(dict(placed.named_buffers())[name], value)


def _unfunctionalized(monkeypatch, module, inputs):
    """The trace without functionalization (in-place ops kept): the fallback path."""
    def refuse(*args, **kwargs):
        raise RuntimeError("no functional variant (test)")
    monkeypatch.setattr(trace_mod, "functionalize_graph", refuse)
    return trace_training_step(module, inputs)


def test_checker_finds_the_unordered_write_and_the_fallback_edges_fix_it(monkeypatch):
    torch.manual_seed(0)
    module, inputs = MODELS["pool1d"]()
    step = _unfunctionalized(monkeypatch, module, inputs)
    assert not step.functional and "functionalization failed" in step.notes[0]
    bare = dataclasses.replace(step, order=())
    bad = unordered_accesses(bare.graph_module.graph)
    assert bad and any(n.startswith("copy_") for _, a, b in bad for n in (a, b))
    with pytest.raises(FormatError, match=r"^aliasing check failed: operators '.+' and '.+' both touch storage"):
        check_aliasing(bare)
    assert set(step.order) == set(ordering_edges(bare.graph_module.graph))
    check_aliasing(step)
    with pytest.raises(FormatError, match="points backwards"):
        check_aliasing(dataclasses.replace(step, order=tuple((b, a) for a, b in step.order)))


def test_fallback_graph_is_exact_under_random_plans(monkeypatch):
    """Where functionalization fails, ordering edges plus colocation of every access of a written
    storage keep the in-place graph exact (the CPU GRU composite: hundreds of in-place ops)."""
    torch.manual_seed(0)
    module, inputs = MODELS["gru_bn"]()
    ref_loss, ref_grads, _ = reference(module, inputs)
    step = _unfunctionalized(monkeypatch, module, inputs)
    problem = problem_from_traced(step)
    rng = np.random.default_rng(5)
    for _ in range(2):
        assert_same(*run_placed(copy.deepcopy(module), inputs, step, problem, rng), ref_loss, ref_grads)


_POOL = {}


def _pool_fallback():
    if not _POOL:
        torch.manual_seed(0)
        module, inputs = MODELS["pool1d"]()
        mp = pytest.MonkeyPatch()
        try:
            step = _unfunctionalized(mp, module, inputs)
        finally:
            mp.undo()
        _POOL.update(module=module, inputs=inputs, step=step, problem=problem_from_traced(step).with_devices(2),
                     ref=reference(module, inputs)[:2])
    return _POOL


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), ties=st.booleans())
def test_any_topological_order_of_a_graph_with_mutations_is_exact(seed, ties):
    """Hypothesis over orders (random start times, or all equal: graph order) and placements."""
    c = _pool_fallback()
    problem, rng = c["problem"], np.random.default_rng(seed)
    plan = random_plan(problem, rng)
    if ties:
        plan = dataclasses.replace(plan, start=np.zeros(problem.n_nodes))
    gm = apply(c["module"], c["inputs"], plan, DEVICES, problem, step=c["step"])
    assert_same(*gm(*c["inputs"]), *c["ref"])


def test_problem_edges_are_proved_and_cli_check(tmp_path, monkeypatch, capsys):
    from optpart.cli import main

    torch.manual_seed(0)
    module, inputs = MODELS["gru_bn"]()
    problem = from_torch(module, inputs, check=True)
    c = problem.meta["aliasing_check"]
    assert c["written_storages"] == 3 and c["ordered_pairs"] >= 3
    (tmp_path / "zoo_alias_test.py").write_text(
        "import torch\n"
        "class Net(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.bn, self.lin = torch.nn.BatchNorm1d(5), torch.nn.Linear(4, 3)\n"
        "    def forward(self, x):\n"
        "        return torch.nn.functional.adaptive_avg_pool1d(self.lin(self.bn(x)).transpose(1, 2), 1)\n"
        "def net():\n"
        "    return Net(), (torch.empty(2, 5, 4),)\n")
    out = tmp_path / "p.json"
    assert main(["import", str(tmp_path / "zoo_alias_test.py") + ":net", "-o", str(out), "--check"]) == 0
    assert "aliasing check: ok (3 written storage(s)" in capsys.readouterr().out
    assert json.loads(out.read_text())["name"] == "net"
    # A graph whose edges miss an order is refused with one line and exit 2.
    monkeypatch.setattr(trace_mod, "functionalize_graph", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("x")))
    monkeypatch.setattr(trace_mod, "ordering_edges", lambda graph: ())
    assert main(["import", str(tmp_path / "zoo_alias_test.py") + ":net", "-o", str(out), "--check", "-q"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "aliasing check failed" in err[0]
