"""PyTorch import: graph shape, FLOPs against independent counts, memory against a hand count."""

from __future__ import annotations

import json

import numpy as np
import pytest

import optpart
from optpart.errors import FormatError, ProblemError
from optpart.formats.costmodel import CostModel, parse_flops

torch = pytest.importorskip("torch")
nn = torch.nn

from optpart.cli import main  # noqa: E402
from optpart.formats.torch_import import cross_entropy, from_torch  # noqa: E402

B, D, H, C = 32, 64, 128, 10


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1, self.l2 = nn.Linear(D, H), nn.Linear(H, C)

    def forward(self, x):
        return self.l2(torch.relu(self.l1(x)))


class Unrolled(nn.Module):
    """One Linear cell applied three times: its weight is shared by three forward operators."""

    def __init__(self):
        super().__init__()
        self.cell = nn.Linear(H, H, bias=False)

    def forward(self, x):
        for _ in range(3):
            x = torch.tanh(self.cell(x))
        return x


class Attention(nn.Module):
    def __init__(self, d=32, heads=4):
        super().__init__()
        self.heads, self.qkv = heads, nn.Linear(d, 3 * d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2)
                   for z in self.qkv(x).split(d, dim=-1))
        return torch.nn.functional.scaled_dot_product_attention(q, k, v)


def _mlp_problem(**kw):
    x, y = torch.empty(B, D), torch.zeros(B, dtype=torch.long)
    return from_torch(MLP(), (x,), loss_fn=cross_entropy, targets=(y,), **kw)


def _by_phase(p, phase):
    return [i for i, m in enumerate(p.node_meta) if m["phase"] == phase]


def _real_flops(module, x, y):
    """FLOPs of a real forward + backward on CPU tensors, counted by torch's own FlopCounterMode."""
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        cross_entropy(module(x), y).backward()
    return counter.get_total_flops()


@pytest.fixture(scope="module")
def mlp():
    return _mlp_problem()


def _aten_ops(module, x, y):
    """The ATen operators torch itself dispatches for the loss and the parameters' gradients
    (``torch.autograd.grad``: no gradient accumulation), counted by a TorchDispatchMode on real
    CPU tensors, apart from the importer's ``make_fx`` trace."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Record(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops: list[str] = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops.append(str(func))
            return func(*args, **(kwargs or {}))

    with Record() as rec:
        torch.autograd.grad(cross_entropy(module(x), y), list(module.parameters()))
    return rec.ops


def test_mlp_structure(mlp):
    module = MLP()
    params = [name for name, _ in module.named_parameters()]
    linears = sum(isinstance(m, nn.Linear) for m in module.modules())
    ops = [m["op"] for m in mlp.node_meta]
    matmuls = [o for o in ops if o in ("aten.mm.default", "aten.addmm.default")]
    # one forward product and one weight gradient per Linear, an input gradient for all but the
    # first (the input needs none)
    assert len(matmuls) == 3 * linears - 1
    assert [mlp.node_meta[i].get("param") for i in _by_phase(mlp, "optimizer")] == params
    assert mlp.node_ids[:2] == ["input.0", "target.0"]
    # every backward node comes after the loss: it has a forward or backward predecessor
    phases = [m["phase"] for m in mlp.node_meta]
    for e in range(mlp.n_edges):
        s, d = int(mlp.edge_src[e]), int(mlp.edge_dst[e])
        assert not (phases[s] == "backward" and phases[d] == "forward")
    # the nodes: the two inputs, every ATen operator torch runs, one update per parameter
    aten = _aten_ops(module, torch.randn(B, D), torch.zeros(B, dtype=torch.long))
    assert [o for o in ops if o not in ("input", "optimizer.update")] == aten
    assert mlp.n_nodes == 2 + len(aten) + len(params)
    # every update reads a gradient: a backward predecessor
    fed = {int(d) for s, d in zip(mlp.edge_src, mlp.edge_dst) if phases[int(s)] == "backward"}
    assert set(_by_phase(mlp, "optimizer")) <= fed


def test_mlp_flops_match_hand_count_and_torch_counter(mlp):
    hand = 2 * B * (D * H + H * C) + 2 * B * D * H + 2 * 2 * B * H * C  # forward + weight grads + input grad
    assert mlp.meta["total_flops"] == hand == sum(m["flops"] for m in mlp.node_meta)
    real = _real_flops(MLP(), torch.randn(B, D), torch.zeros(B, dtype=torch.long))
    assert abs(mlp.meta["total_flops"] - real) <= 0.02 * real


def test_mlp_memory_is_params_times_optimizer_factor_plus_saved_activations(mlp):
    param_bytes = 4 * (D * H + H + H * C + C)
    inputs = 4 * B * D + 8 * B
    saved = 4 * B * H + 4 * B * C  # relu output (threshold_backward, weight grad) and log-softmax output
    assert mlp.meta["parameter_bytes"] == param_bytes
    assert mlp.memory.sum() == pytest.approx(4 * param_bytes + inputs + saved, rel=0, abs=0)
    sgd = _mlp_problem(cost_model=CostModel(optimizer_bytes_per_param=0))
    assert sgd.memory.sum() == 2 * param_bytes + inputs + saved
    upd = _by_phase(mlp, "optimizer")
    assert mlp.memory[upd].sum() == 4 * param_bytes
    assert (mlp.param_bytes[upd] == mlp.memory[upd]).all()


def test_inference_has_forward_only(mlp):
    p = from_torch(MLP(), (torch.empty(B, D),), training=False)
    assert {m["phase"] for m in p.node_meta} == {"forward"}
    assert p.meta["total_flops"] == 2 * B * (D * H + H * C)
    assert p.memory.sum() == 4 * (D * H + H + H * C + C) + 4 * B * D


def test_shared_parameter_charged_once_and_users_colocated():
    p = from_torch(Unrolled(), (torch.empty(B, H),))
    upd = _by_phase(p, "optimizer")
    assert len(upd) == 1 and p.memory[upd[0]] == 4 * 4 * H * H
    # besides the weight's state: the input and the three tanh outputs saved for the backward
    assert p.memory.sum() - p.memory[upd[0]] == 4 * B * H * (1 + 3)
    assert len(p.groups) == 1
    members = {p.node_ids[i] for i in p.groups[0]}
    fwd_mm = [p.node_ids[i] for i in _by_phase(p, "forward") if p.node_meta[i]["op"] == "aten.mm.default"]
    assert len(fwd_mm) == 3 and set(fwd_mm) <= members
    assert p.node_ids[upd[0]] in members
    # FLOPs: 3 forward mm, 3 weight-grad mm, 2 input-grad mm (the first input needs no gradient)
    assert p.meta["total_flops"] == (3 + 3 + 2) * 2 * B * H * H


def test_attention_flops_are_counted():
    p = from_torch(Attention(), (torch.empty(2, 16, 32),))
    att = [m for m in p.node_meta if "attention" in m["op"]]
    assert att and all(m["flops"] > 0 for m in att)
    fwd = [m["flops"] for m in att if m["phase"] == "forward"]
    assert fwd == [4 * 2 * 4 * 16 * 16 * 8]  # 4 b h s t d


def test_solvers_accept_and_checker_passes(mlp):
    problem = mlp.with_devices(2, memory=float(mlp.memory.sum()))
    result = optpart.solve(problem, "single", memory_model="static")  # capacity = the static total
    optpart.check(problem, result)
    assert result.status is optpart.Status.FEASIBLE
    assert result.makespan == pytest.approx(problem.time.sum())
    # a placement honouring colocation spreads the graph; the checker judges it
    place = np.zeros(problem.n_nodes, dtype=np.int64)
    place[_by_phase(problem, "optimizer")] = 1
    for members in problem.groups:
        place[members] = 1
    # the static total does not bound the peak (received copies); every parameter, temporary and tensor, each
    # held and received once, does
    bound = mlp.param_bytes.sum() + mlp.temp_bytes.sum() + 2 * mlp.output_bytes.sum()
    ample = problem.with_devices(2, memory=float(bound))
    assert not optpart.violations(ample, optpart.evaluate(ample, place))


def test_cost_model_prices_nodes_and_is_stored(mlp):
    cm = CostModel().replace(peak_flops="100TFLOP/s", efficiency=0.25, min_op_time="1us",
                             memory_bandwidth="inf")
    p = _mlp_problem(cost_model=cm)
    assert p.meta["cost_model"]["peak_flops"] == 1e14
    i = p.node_ids.index("addmm")
    assert p.time[i] == pytest.approx(max(1e-6, p.node_meta[i]["flops"] / 25e12))
    views = [i for i, m in enumerate(p.node_meta) if m["op"] == "aten.t.default"]
    assert views and (p.time[views] == 0).all()
    assert p.links.bandwidth == cm.link_bandwidth and p.links.latency == cm.link_latency
    assert parse_flops("15.7 TFLOPS") == 15.7e12
    with pytest.raises(ProblemError, match="efficiency"):
        CostModel(efficiency=1.5)
    with pytest.raises(ProblemError, match="unknown cost model field 'speed'"):
        CostModel().replace(speed=2)


def test_round_trip_and_determinism(tmp_path, mlp):
    again = _mlp_problem()
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    optpart.save(mlp, a)
    optpart.save(again, b)
    assert a.read_bytes() == b.read_bytes()
    back = optpart.load(a)
    assert back.node_ids == mlp.node_ids and np.array_equal(back.memory, mlp.memory)
    doc = json.loads(a.read_text())
    assert doc["meta"]["cost_model"]["optimizer_bytes_per_param"] == 8.0


def test_bad_input_names_the_problem():
    with pytest.raises(FormatError, match="no parameters"):
        from_torch(nn.ReLU(), (torch.empty(2, 2),))
    with pytest.raises(FormatError, match=r"cannot trace MLP in module 'l1' \(Linear\) at operator aten.mm.default "
                                          r"with fake tensors: RuntimeError"):
        from_torch(MLP(), (torch.empty(B, D + 1),))


def test_cli_imports_a_torch_factory(tmp_path, monkeypatch, capsys):
    (tmp_path / "zoo_for_optpart_test.py").write_text(
        "import torch\n"
        "def mlp():\n"
        "    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1)), "
        "(torch.empty(4, 8),)\n")
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "mlp.json.gz"
    assert main(["import", "zoo_for_optpart_test:mlp", "--path", ".", "-o", str(out),
                 "--optimizer-bytes-per-param", "0", "--devices", "2", "--memory", "1MiB"]) == 0
    p = optpart.load(out)
    assert p.name == "mlp" and p.n_devices == 2
    assert p.meta["parameter_bytes"] == 4 * (8 * 16 + 16 + 16 + 1)
    upd = _by_phase(p, "optimizer")
    assert p.memory[upd].sum() == 2 * p.meta["parameter_bytes"]  # weights + gradients, no optimizer state
    assert main(["import", "zoo_for_optpart_test:nope", "--path", ".", "-o", str(out)]) == 2
    assert "has no function 'nope'" in capsys.readouterr().err
    # Sizes and bandwidths without a unit are refused, as on every command (not read as bytes).
    for flags, needle in ((["--devices", "2", "--memory", "16"], "--memory"),
                          (["--link-bandwidth", "25"], "--link-bandwidth"),
                          (["--memory-bandwidth", "900"], "--memory-bandwidth")):
        assert main(["import", "zoo_for_optpart_test:mlp", "--path", ".", "-o", str(out), *flags]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and needle in err and "has no unit" in err
    # Without --path the working directory is not searched, and the error says how to ask for it.
    (tmp_path / "zoo_unsearched_test.py").write_text("def mlp():\n    raise AssertionError('ran')\n")
    assert main(["import", "zoo_unsearched_test:mlp", "-o", str(out)]) == 2
    assert "--path ." in capsys.readouterr().err
    # A file path works without --path.
    assert main(["import", str(tmp_path / "zoo_for_optpart_test.py") + ":mlp", "-o", str(out), "-q"]) == 0
    # The user's module failing its own import, or failing to compile, is bad input naming the file and line.
    (tmp_path / "zoo_needs_dep_test.py").write_text("import torch\nimport no_such_dependency_xyz\ndef mlp():\n    pass\n")
    assert main(["import", "zoo_needs_dep_test:mlp", "--path", ".", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no_such_dependency_xyz" in err and "zoo_needs_dep_test.py, line 2" in err
    assert "--path ." not in err
    (tmp_path / "zoo_syntax_test.py").write_text("def mlp(:\n")
    assert main(["import", str(tmp_path / "zoo_syntax_test.py") + ":mlp", "-o", str(out)]) == 2
    assert "SyntaxError" in capsys.readouterr().err


_FORWARD_RAISES = ("import torch\nclass Broken(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                   "        self.lin = torch.nn.Linear(2, 2)\n    def forward(self, x):\n"
                   "        raise ValueError('my model is broken')\n"
                   "def make():\n    return Broken(), (torch.ones(3, 2),)\n")


@pytest.mark.parametrize("body, where", [("def make():\n    raise ValueError('my model is broken')\n", "make"),
                                         ("raise ValueError('my model is broken')\ndef make():\n    pass\n", "make"),
                                         (_FORWARD_RAISES, "cannot trace Broken")],
                         ids=["factory", "module top level", "forward"])
def test_an_exception_in_the_users_factory_is_bad_input(tmp_path, capsys, body, where):
    """The user's own exception (in the factory, the module's top level, or the model's forward)
    is bad input: one line naming it and where, exit 2 (never 3, an optpart bug)."""
    (tmp_path / "zoo_broken.py").write_text(body)
    code = main(["import", f"{tmp_path / 'zoo_broken.py'}:make", "-o", str(tmp_path / "x.json")])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and where in err and "ValueError: my model is broken" in err


def test_cli_import_never_lets_the_working_directory_shadow_a_package(tmp_path, monkeypatch, capsys):
    """A stray torch.py in the working directory must not run in place of the real torch."""
    (tmp_path / "torch.py").write_text("raise SystemExit('the stray torch.py ran')\n")
    (tmp_path / "zoo_shadow_test.py").write_text(
        "import torch\n"
        "def mlp():\n"
        "    return torch.nn.Linear(4, 2), (torch.empty(3, 4),)\n")
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "m.json"
    assert main(["import", "zoo_shadow_test:mlp", "--path", ".", "-o", str(out), "-q"]) == 0
    assert optpart.load(out).n_nodes > 0


# ---------------------------------------------------------------- trace_training_step, modules, fallbacks
from optpart.formats.torch import DEFAULT_LOSS, default_loss, trace_training_step  # noqa: E402


class Named(nn.Module):
    """Submodules at two depths, and a function call (torch.relu) outside any submodule."""

    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(D, H), nn.Tanh())
        self.head = nn.Linear(H, C)

    def forward(self, x):
        return {"logits": self.head(torch.relu(self.enc(x))), "hidden": self.enc[0].weight.sum()}


class ItemWidth(nn.Module):
    """The output width is read from a tensor value (``.item()``): fake tensors cannot trace it."""

    def __init__(self):
        super().__init__()
        self.l = nn.Linear(4, 4)

    def forward(self, x):
        return self.l(x)[:, : int((x > 0).sum().item()) % 3 + 1]


def test_traced_step_graph_computes_the_loss_and_gradients_of_eager_autograd():
    """The TracedStep contract plan export builds on: placeholders (params, buffers, inputs,
    targets) and outputs (loss, grads) as documented; running the graph on real tensors gives
    what eager PyTorch gives."""
    torch.manual_seed(0)
    model, x = Named(), torch.randn(B, D)
    step = trace_training_step(model, (x,))
    assert step.param_names == tuple(n for n, _ in model.named_parameters())
    assert step.loss == DEFAULT_LOSS and step.trace_mode == "fake" and step.input_names == ("0",)
    params = [p.detach() for p in model.parameters()]
    loss, *grads = step.graph_module(params, [], *step.flatten_inputs((x,)))
    ref = default_loss(model(x))
    ref_grads = torch.autograd.grad(ref, list(model.parameters()))
    assert torch.allclose(loss, ref)
    assert all(torch.allclose(g, r, atol=1e-6) for g, r in zip(grads, ref_grads))
    fx = {n.name for n in step.graph_module.graph.nodes}
    assert set(step.node_names.values()) <= fx and step.node_names["input.0"] in fx


def test_every_node_knows_its_module_forward_and_backward():
    p = from_torch(Named(), (torch.empty(B, D),))
    by = {}
    for nid, m in zip(p.node_ids, p.node_meta):
        by.setdefault((m["module"], m["phase"]), []).append(m["op"])
        assert m["module_class"] == {"": "Named", "enc": "Sequential", "enc.0": "Linear", "enc.1": "Tanh",
                                     "head": "Linear"}[m["module"]], nid
    assert "aten.addmm.default" in by[("enc.0", "forward")] and "aten.tanh.default" in by[("enc.1", "forward")]
    assert "aten.tanh_backward.default" in by[("enc.1", "backward")]
    assert "aten.mm.default" in by[("head", "backward")] and "aten.mm.default" in by[("enc.0", "backward")]
    assert "aten.relu.default" in by[("", "forward")]  # a function call belongs to the caller
    upd = {m["param"]: m["module"] for m in p.node_meta if m["phase"] == "optimizer"}
    assert upd == {"enc.0.weight": "enc.0", "enc.0.bias": "enc.0", "head.weight": "head", "head.bias": "head"}


def test_no_split_colocates_every_node_of_each_instance():
    p = from_torch(Named(), (torch.empty(B, D),), no_split="Linear")
    for path in ("enc.0", "head"):
        members = {i for i, m in enumerate(p.node_meta) if m["module"] == path}
        assert len(members) > 5 and any(members <= set(g) for g in p.groups), path
    with pytest.raises(FormatError, match="no_split class 'GPT2Block' is not in the model; .*Linear"):
        from_torch(Named(), (torch.empty(B, D),), no_split=["GPT2Block"])


def test_data_dependent_model_falls_back_to_real_tensors_and_says_so():
    p = from_torch(ItemWidth(), (torch.randn(2, 4),))
    assert p.meta["trace_mode"] == "real"
    assert "data-dependent" in p.meta["trace_notes"][0] and "real CPU tensors" in p.meta["trace_notes"][0]
    with pytest.raises(FormatError, match=r"cannot trace ItemWidth with fake tensors: .*_local_scalar_dense"):
        from_torch(ItemWidth(), (torch.randn(2, 4),), trace_mode="fake")


def test_torch_transformer_and_lstm_import_with_tuple_outputs():
    tr = nn.Transformer(d_model=16, nhead=2, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=32,
                        batch_first=True)
    p = from_torch(tr, (torch.empty(2, 4, 16), torch.empty(2, 4, 16)))
    assert {m["module"].split(".")[0] for m in p.node_meta} >= {"encoder", "decoder"}
    assert p.meta["loss"] == DEFAULT_LOSS
    lstm = nn.LSTM(8, 16, num_layers=2, batch_first=True)  # returns (output, (h, c))
    for training in (True, False):
        q = from_torch(lstm, (torch.empty(2, 5, 8),), training=training)
        assert q.meta["trace_mode"] == "fake" and q.meta["total_flops"] > 0
    assert sum(1 for m in q.node_meta if m["op"] == "optimizer.update") == 0  # inference: no optimizer
    # the fused LSTM layers: 2 FLOPs per weight per (time step, batch row); 4 gates of 16
    assert q.meta["total_flops"] == 2 * 5 * 2 * (64 * 8 + 64 * 16) + 2 * 5 * 2 * (64 * 16 + 64 * 16)


def test_keyword_inputs_and_a_non_scalar_loss_fn():
    p = from_torch(MLP(), {"x": torch.empty(B, D)})
    assert p.node_ids[0] == "input.x"
    with pytest.raises(FormatError, match=r"loss of MLP must be a scalar tensor, got \(32, 10\)"):
        from_torch(MLP(), (torch.empty(B, D),), loss_fn=lambda out: out)


def test_cli_import_per_device_memory_no_split_and_show_by_module(tmp_path, monkeypatch, capsys):
    (tmp_path / "zoo_show_test.py").write_text(
        "import torch\n"
        "class Block(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.fc, self.act = torch.nn.Linear(16, 16), torch.nn.Tanh()\n"
        "    def forward(self, x):\n"
        "        return self.act(self.fc(x))\n"
        "def net():\n"
        "    return torch.nn.Sequential(Block(), Block(), torch.nn.Linear(16, 2)), (torch.empty(4, 16),)\n")
    monkeypatch.chdir(tmp_path)
    prob, res = tmp_path / "net.json", tmp_path / "r.json"
    assert main(["import", "zoo_show_test:net", "--path", ".", "-o", str(prob), "--no-split", "Block", "-q",
                 "-m", "1MiB,1MiB,512KiB", "--speed", "1,1,0.5"]) == 0
    assert capsys.readouterr().out == ""  # -q: nothing on stdout
    p = optpart.load(prob)
    assert [(d.memory, d.speed) for d in p.devices] == [(2**20, 1.0), (2**20, 1.0), (2**19, 0.5)]
    assert main(["solve", str(prob), "-o", str(res)]) == 0
    capsys.readouterr()
    assert main(["show", str(res), "--problem", str(prob), "--depth", "1", "--json"]) == 0
    rows = {r["group"]: r for r in json.loads(capsys.readouterr().out)}
    assert set(rows) == {"(root)", "0", "1", "2"} and rows["0"]["class"] == "Block"
    assert len(rows["0"]["devices"]) == 1 and len(rows["1"]["devices"]) == 1  # no_split blocks stay whole
    assert sum(r["nodes"] for r in rows.values()) == p.n_nodes
    assert sum(r["memory_bytes"] for r in rows.values()) == pytest.approx(float(p.memory.sum()))
    assert main(["show", str(res), "--problem", str(prob)]) == 0
    assert "devices (nodes)" in capsys.readouterr().out
    assert main(["import", "zoo_show_test:net", "-o", str(prob), "-k", "2", "-m", "1MiB,1MiB,1MiB"]) == 2
    assert "--memory gives 3 values for 2 devices" in capsys.readouterr().err
    mixed = str(tmp_path / "mixed.json")
    assert main(["import", "zoo_show_test:net", "--path", ".", "-o", mixed, "-m", "1MiB,1MiB,512KiB"]) == 0
    assert "; devices 1 MiB, 1 MiB, 512 KiB" in capsys.readouterr().out  # each capacity as imported


def test_nested_and_non_tensor_inputs():
    """``LSTM(x, (h0, c0))``: a tuple inside the inputs gives one graph input per tensor;
    a number stays a constant."""
    lstm = nn.LSTM(8, 16, batch_first=True)
    p = from_torch(lstm, (torch.empty(2, 5, 8), (torch.zeros(1, 2, 16), torch.zeros(1, 2, 16))))
    assert [i for i in p.node_ids if i.startswith("input.")] == ["input.0", "input.1.0", "input.1.1"]

    class Scaled(nn.Module):
        def __init__(self):
            super().__init__()
            self.l = nn.Linear(4, 4)

        def forward(self, x, scale, mask=None):
            return self.l(x) * scale

    step = trace_training_step(Scaled(), (torch.empty(2, 4), 3.0, None))
    assert step.input_names == ("0",)
    with pytest.raises(FormatError, match=r"these inputs give graph inputs \['0', '1'\]; the traced step has \['0'\]"):
        step.flatten_inputs((torch.empty(2, 4), torch.empty(1)))
