"""A step that reads its data is traced on one path, says so, and refuses another path in one line.

A real-tensor trace records every read of the data (ATen's ``nonzero``-like operators, ``.item()``,
a tensor handed to Python) with what the traced batch gave; the placed step checks each read
before anything traced after it runs. A batch on the traced path runs and equals autograd.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from optpart.errors import OptpartError  # noqa: E402
from optpart.formats.torch import default_loss, trace_training_step  # noqa: E402
from optpart.formats.torch.datadep import describe_routing  # noqa: E402
from optpart.formats.torch_import import from_torch, problem_from_traced  # noqa: E402
from optpart.result import Result, Status  # noqa: E402
from optpart.torch import apply  # noqa: E402


class Router(torch.nn.Module):
    """Rows whose first feature is positive go through ``expert``; their count scales the result."""

    def __init__(self):
        super().__init__()
        self.gate, self.expert, self.head = torch.nn.Linear(4, 4), torch.nn.Linear(4, 4), torch.nn.Linear(4, 2)

    def forward(self, x):
        h = self.gate(x)
        rows = (h[:, 0] > 0).nonzero()[:, 0]            # a shape read: how many rows are routed
        picked = self.expert(h[rows])
        out = torch.zeros_like(h).index_add(0, rows, picked)
        scale = int((h[:, 1] > 0).sum())                 # a value read, baked into the graph
        return self.head(out).sum() * scale + h.mean()


class Lister(torch.nn.Module):
    """Hands a tensor to Python (``tolist``, or ``numpy``: a matcher written with NumPy)."""

    def __init__(self, numpy: bool = False):
        super().__init__()
        self.lin, self.numpy = torch.nn.Linear(3, 3), numpy

    def forward(self, x):
        y = self.lin(x)
        if self.numpy:
            best = int(y[0].detach().numpy().argmax())
        else:
            best = max(range(3), key=y[0].tolist().__getitem__)  # a Python decision on the values
        return y[:, best].sum()


def _router():
    torch.manual_seed(0)
    module = Router()
    gen = torch.Generator().manual_seed(1)
    return module, torch.randn(8, 4, generator=gen)


def _same_path(module, x, seed):
    """A batch with other values that takes ``x``'s path: the same rows routed, the same count read."""
    with torch.no_grad():
        h = module.gate(x)
        want = (h[:, 0] > 0, h[:, 1] > 0)
    gen = torch.Generator().manual_seed(seed)
    for _ in range(2000):
        y = x + 0.05 * torch.randn(x.shape, generator=gen)
        with torch.no_grad():
            g = module.gate(y)
        if torch.equal(g[:, 0] > 0, want[0]) and int((g[:, 1] > 0).sum()) == int(want[1].sum()):
            return y
    raise AssertionError("no batch on the traced path found")


def _other_count(module, x):
    """A batch that routes another number of rows."""
    with torch.no_grad():
        h = module.gate(x)
    n = int((h[:, 0] > 0).sum())
    for sign in (1, -1):
        for shift in np.linspace(0.5, 20, 40):
            y = x + sign * shift * module.gate.weight[0].detach() / module.gate.weight[0].detach().norm()
            with torch.no_grad():
                if int((module.gate(y)[:, 0] > 0).sum()) != n:
                    return y
    raise AssertionError("no batch with another routing found")


def _eager(module, x):
    ref = copy.deepcopy(module)
    loss = default_loss(ref(x))
    loss.backward()
    return loss.detach(), {n: p.grad for n, p in ref.named_parameters()}


def _plan(problem, k, seed):
    rng = np.random.default_rng(seed)
    placement = rng.integers(0, k, problem.n_nodes)
    for g in problem.groups:
        placement[list(g)] = rng.integers(0, k)
    return Result(problem=problem.name, solver="random", status=Status.FEASIBLE,
                  placement=placement.astype(np.int64), start=rng.random(problem.n_nodes))


def test_reads_are_recorded_with_their_module_and_what_the_batch_gave():
    module, x = _router()
    step = trace_training_step(module, (x,))
    assert step.trace_mode == "real"
    with torch.no_grad():
        h = module.gate(x)
    by_op = {r.op: r for r in step.reads}
    # Indexing with integer rows has a shape fake tensors can tell: it is not a read.
    assert set(by_op) == {"aten.nonzero", "aten._local_scalar_dense"} and len(step.reads) == 2
    assert by_op["aten.nonzero"].traced == ((int((h[:, 0] > 0).sum()), 1),)
    assert by_op["aten._local_scalar_dense"].traced == int((h[:, 1] > 0).sum())
    assert all(r.module == "" for r in step.reads)  # the router's own forward (the root)
    problem = from_torch(module, (x,))
    summary = problem.meta["data_dependent"]
    assert summary["reads"] == len(step.reads) and summary["modules"][""]["aten.nonzero"] == [
        [list(by_op["aten.nonzero"].traced[0])]]
    line = describe_routing(summary)
    assert "\n" not in line and "follow the example batch's path" in line and "aten.nonzero x1" in line


@pytest.mark.parametrize("k", [1, 3])
def test_placed_step_runs_the_traced_path_and_refuses_another_in_one_line(k):
    module, x = _router()
    step = trace_training_step(module, (x,))
    problem = problem_from_traced(step)
    devices = {f"dev{i}": ("cpu" if i == 0 else f"cpu:{i - 1}") for i in range(k)}
    gm = apply(copy.deepcopy(module), (x,), _plan(problem.with_devices(k), k, 5), devices, problem.with_devices(k),
               step=step)
    assert gm.meta["optpart"]["data_reads_checked"] == len(step.reads)
    for batch in (x, _same_path(module, x, 3)):  # the traced batch, and another batch on its path
        loss, grads = gm(batch)
        want_loss, want_grads = _eager(module, batch)
        torch.testing.assert_close(loss, want_loss, rtol=1e-6, atol=1e-7)
        for name, g in want_grads.items():
            torch.testing.assert_close(grads[name], g, rtol=1e-6, atol=1e-7)
    other = _other_count(module, x)
    with pytest.raises(OptpartError) as info:
        gm(other)
    text = str(info.value)
    assert "\n" not in text and text.startswith("this step was traced on one path of its data: aten.nonzero in "
                                                "the root module gives")
    assert "rows here" in text and "in the traced batch" in text


def test_a_value_read_differing_is_refused_before_anything_traced_after_it_runs():
    """Same routed rows, another count read by ``int()``: without the check the graph would scale by the
    traced count, silently. The refusal names the value; no operator traced after the read has run."""
    module, x = _router()
    step = trace_training_step(module, (x,))
    problem = problem_from_traced(step)
    with torch.no_grad():
        h = module.gate(x)
    y = x.clone()
    # Move one row across the second gate's threshold only (the first feature's sign kept).
    w = module.gate.weight.detach()
    for i in range(8):
        for t in np.linspace(-6, 6, 121):
            cand = x.clone()
            cand[i] += t * w[1] / w[1].norm()
            with torch.no_grad():
                g = module.gate(cand)
            if torch.equal(g[:, 0] > 0, h[:, 0] > 0) and int((g[:, 1] > 0).sum()) != int((h[:, 1] > 0).sum()):
                y = cand
                break
        if not torch.equal(y, x):
            break
    assert not torch.equal(y, x)
    gm = apply(copy.deepcopy(module), (x,), _plan(problem.with_devices(2), 2, 9), {"dev0": "cpu", "dev1": "cpu:0"},
               problem.with_devices(2), step=step)
    # In the placed order (random start times), every operator before a read's check was traced before the read.
    traced = {nd.name: i for i, nd in enumerate(step.graph_module.graph.nodes)}
    placed = [nd for nd in gm.graph.nodes if nd.op == "call_function"]
    for read in step.reads:
        guard = next(i for i, nd in enumerate(placed) if nd.meta.get("optpart_node") == read.node) + 1
        assert placed[guard].target.__name__ == "check_read"
        assert all(traced[nd.meta["optpart_node"]] <= traced[read.node] for nd in placed[:guard]
                   if "optpart_node" in nd.meta)
    ran = []

    class Spy(torch.utils._python_dispatch.TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            ran.append(str(func))
            return func(*args, **(kwargs or {}))

    with Spy(), pytest.raises(OptpartError, match=r"aten\._local_scalar_dense in the root module reads the value "
                                                  r"\d+ here, \d+ in the traced batch"):
        gm(y)
    assert ran[-1] == "aten._local_scalar_dense.default"  # refused right after the read


@pytest.mark.parametrize("numpy", [False, True])
def test_a_tensor_handed_to_python_is_a_read(numpy):
    torch.manual_seed(0)
    module = Lister(numpy)
    x = torch.randn(2, 3)
    step = trace_training_step(module, (x,))  # fake tensors cannot hand data to Python: real ones are used
    assert step.trace_mode == "real"
    reads = [r for r in step.reads if r.kind == "tensor"]
    op = "Tensor.numpy" if numpy else "Tensor.tolist"
    assert [r.op for r in reads] == [op] and torch.equal(reads[0].traced, module.lin(x)[0].detach())
    problem = problem_from_traced(step)
    gm = apply(copy.deepcopy(module), (x,), {nid: "dev0" for nid in problem.node_ids}, {"dev0": "cpu"}, step=step)
    loss, _ = gm(x)
    torch.testing.assert_close(loss, module(x).detach())
    with pytest.raises(OptpartError, match=f"{op} in the root module hands Python a tensor of shape"):
        gm(x + 1)
    assert problem.meta["data_dependent"]["modules"][""][op] == [{"shape": [3], "dtype": "float32"}]


def test_fake_traces_read_nothing_and_check_nothing():
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1))
    x = torch.randn(5, 3)
    step = trace_training_step(module, (x,))
    assert step.trace_mode == "fake" and step.reads == ()
    problem = problem_from_traced(step)
    assert "data_dependent" not in problem.meta
    gm = apply(module, (x,), {nid: "dev0" for nid in problem.node_ids}, {"dev0": "cpu"}, step=step)
    assert gm.meta["optpart"]["data_reads_checked"] == 0
    gm(torch.randn(5, 3))  # any batch of the traced shapes


def test_cli_summary_says_the_costs_follow_the_example_batchs_path(tmp_path, capsys):
    from optpart.cli import main

    (tmp_path / "router_zoo_test.py").write_text(
        "import torch\n"
        "class Gate(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.lin = torch.nn.Linear(4, 4)\n"
        "    def forward(self, x):\n"
        "        h = self.lin(x)\n"
        "        return h[h[:, 0] > 0].sum() + h.mean()\n"
        "def gate():\n"
        "    torch.manual_seed(0)\n"
        "    return Gate(), (torch.randn(6, 4, generator=torch.Generator().manual_seed(2)),)\n")
    out = tmp_path / "gate.json"
    assert main(["import", str(tmp_path / "router_zoo_test.py") + ":gate", "-o", str(out)]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert "traced with real tensors, trace proof: worst relative error 0 (tolerance 1e-05) over the loss and " \
           "2 gradient(s)" in printed[0]
    routing = [line for line in printed if "data-dependent" in line]
    assert len(routing) == 1 and routing[0].startswith(
        "  data-dependent step: 1 read(s) of the data ((root): aten.index x1); the graph and its costs follow the "
        "example batch's path")


def test_inference_step_is_proved_and_checked_too():
    from optpart.torch import apply_inference

    module, x = _router()
    problem = from_torch(module, (x,), training=False)
    assert problem.meta["trace_check"]["compared"] == 1 and problem.meta["trace_check"]["worst_rel_err"] == 0
    gm = apply_inference(module, (x,), {nid: "dev0" for nid in problem.node_ids}, {"dev0": "cpu"}, problem)
    assert gm.meta["optpart"]["data_reads_checked"] == 2
    torch.testing.assert_close(gm(x)[0], module.eval()(x))
    with pytest.raises(OptpartError, match="this step was traced on one path of its data"):
        gm(_other_count(module, x))
