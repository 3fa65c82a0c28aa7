"""optpart.torch.apply: the placed training step gives the loss and gradients of plain autograd."""

from __future__ import annotations

import copy

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import optpart  # noqa: E402
from optpart.errors import OptpartError  # noqa: E402
from optpart.formats.torch import trace_training_step  # noqa: E402
from optpart.formats.torch_import import from_torch  # noqa: E402
from optpart.torch import apply, check_devices, profile_times  # noqa: E402
from placed_models import MODELS, assert_same, plan, reference  # noqa: E402


@pytest.mark.parametrize("name", sorted(MODELS))
def test_placed_step_matches_autograd_on_cpu(name):
    module, inputs, extra = MODELS[name]()
    problem, result = plan(module, inputs, extra)
    used = np.unique(result.placement).size
    # "cpu" and "cpu:0" are different torch devices on one CPU memory: running cannot show a
    # missing copy (the tensor is there anyway), so check_devices follows every operator's
    # arguments by device tag instead (test_a_missing_transfer_is_caught shows it failing).
    gm = apply(module, inputs, result, {"dev0": "cpu", "dev1": "cpu:0"}, problem, **extra)
    loss, grads = gm(*inputs, *extra.get("targets", ()))
    assert_same(loss, grads, *reference(module, inputs, extra))
    assert (gm.meta["optpart"]["transfers"] > 0) == (used > 1)
    assert check_devices(gm)["transfers"] == gm.meta["optpart"]["transfers"]


def test_a_missing_transfer_is_caught_although_the_cpu_step_still_computes():
    """Remove one cross-device copy from a placed graph: on a CPU the numbers stay right (both
    'devices' share one memory), and the device-tag check is what fails, naming the operator."""
    module, inputs, extra = MODELS["cnn"]()
    problem = from_torch(module, inputs, devices=2)
    mapping = {nid: ("dev0" if m.get("phase") == "forward" else "dev1")
               for nid, m in zip(problem.node_ids, problem.node_meta)}
    gm = apply(module, inputs, mapping, {"dev0": "cpu", "dev1": "cpu:0"})
    copies = [nd for nd in gm.graph.nodes if nd.op == "call_method" and nd.target == "to"
              and nd.args[0].op != "placeholder"]
    assert copies and check_devices(gm)["transfers"] == len(copies)
    victim = copies[len(copies) // 2]
    reader, source = next(iter(victim.users)).name, victim.args[0].name
    victim.replace_all_uses_with(victim.args[0])
    gm.graph.erase_node(victim)
    gm.recompile()
    assert_same(*gm(*inputs), *reference(module, inputs, extra))  # a CPU cannot tell
    with pytest.raises(OptpartError, match=rf"operator '{reader}' on cpu(:0)? reads '{source}' "
                                           r"from device cpu(:0)?: a cross-device transfer is missing"):
        check_devices(gm)
    # A graph input used without its copy to the operator's device is caught too.
    gm = apply(module, inputs, mapping, {"dev0": "cpu", "dev1": "cpu:0"})
    to_in = next(nd for nd in gm.graph.nodes if nd.op == "call_method" and nd.args[0].op == "placeholder")
    to_in.replace_all_uses_with(to_in.args[0])
    gm.graph.erase_node(to_in)
    with pytest.raises(OptpartError, match="no device"):
        check_devices(gm)


def test_operators_come_in_schedule_order_and_on_their_devices():
    module, inputs, extra = MODELS["gpt2"]()
    problem, result = plan(module, inputs, extra)
    gm = apply(module, inputs, result, {"dev0": "cpu", "dev1": "cpu:0"}, problem)
    start = dict(zip(problem.node_ids, result.start.tolist()))
    dev = dict(zip(problem.node_ids, result.placement.tolist()))
    seen = [nd for nd in gm.graph.nodes if "optpart_node" in nd.meta]
    assert len(seen) == sum(1 for nid in problem.node_ids if not nid.startswith(("input.", "update.")))
    times = [start[nd.meta["optpart_node"]] for nd in seen]
    assert times == sorted(times)
    for nd in seen:
        assert nd.meta["optpart_device"] == ("cpu" if dev[nd.meta["optpart_node"]] == 0 else "cpu:0")
    assert check_devices(gm)["operators"] == len(seen)


def test_a_bare_placement_dict_runs_in_graph_order():
    module, inputs, extra = MODELS["cnn"]()
    problem = from_torch(module, inputs, devices=2)
    half = problem.n_nodes // 2
    mapping = {nid: ("dev0" if i < half else "dev1") for i, nid in enumerate(problem.node_ids)}
    gm = apply(module, inputs, mapping, {"dev0": "cpu", "dev1": "cpu:0"})
    assert gm.meta["optpart"]["transfers"] > 0
    assert_same(*gm(*inputs), *reference(module, inputs, extra))


def test_bad_plans_and_devices_are_one_clear_error():
    module, inputs, _ = MODELS["cnn"]()
    problem = from_torch(module, inputs, devices=2)
    mapping = {nid: "dev0" for nid in problem.node_ids}
    with pytest.raises(OptpartError, match="devices= has no entry for device 'dev0'"):
        apply(module, inputs, mapping, {"gpu0": "cpu"})
    with pytest.raises(OptpartError, match="device 'dev0' maps to 'tpu9'"):
        apply(module, inputs, mapping, {"dev0": "tpu9"})
    with pytest.raises(OptpartError, match="names node 'ghost'"):
        apply(module, inputs, {**mapping, "ghost": "dev0"}, {"dev0": "cpu"})
    missing = dict(mapping)
    missing.pop(problem.node_ids[3])
    with pytest.raises(OptpartError, match=f"leaves node '{problem.node_ids[3]}'"):
        apply(module, inputs, missing, {"dev0": "cpu"})


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine")
@pytest.mark.parametrize("name", sorted(MODELS))
def test_placed_step_matches_autograd_on_gpus(name):
    module, inputs, extra = MODELS[name]()
    problem, result = plan(module, inputs, extra)
    n = torch.cuda.device_count()
    gm = apply(module, inputs, result, {"dev0": "cuda:0", "dev1": f"cuda:{min(1, n - 1)}"}, problem, **extra)
    loss, grads = gm(*inputs, *extra.get("targets", ()))
    assert_same(loss, grads, *reference(module, inputs, extra))


def split_result(problem):
    """A valid placement over both devices (alternating nodes, colocation groups whole), scored."""
    placement = np.arange(problem.n_nodes) % 2
    for g in problem.groups:
        placement[list(g)] = placement[g[0]]
    result = optpart.evaluate(problem, placement)
    assert np.unique(result.placement).size == 2
    return result


def test_a_result_knows_its_problem_and_the_step_also_gives_the_forward_outputs():
    module, inputs, extra = MODELS["cnn"]()
    problem, result = plan(module, inputs, extra)
    for res in (result, split_result(problem)):  # from solve, and from evaluate
        gm = apply(module, inputs, res, {"dev0": "cpu", "dev1": "cpu:0"}, outputs=True)  # no problem=
        loss, grads, outputs = gm(*inputs)
        assert_same(loss, grads, *reference(module, inputs, extra))
        want = copy.deepcopy(module).train()(*inputs)  # batch norm on batch statistics, as the step
        assert len(outputs) == 1 and outputs[0].shape == want.shape
        torch.testing.assert_close(outputs[0].cpu(), want.detach(), rtol=1e-5, atol=1e-6)
    # A Result built by hand does not know its problem: one clear error.
    bare = optpart.Result(problem=problem.name, solver="hand", status=optpart.Status.FEASIBLE,
                          placement=result.placement, start=result.start)
    with pytest.raises(OptpartError, match="does not know its problem"):
        apply(module, inputs, bare, {"dev0": "cpu", "dev1": "cpu"})
    assert apply(module, inputs, bare, {"dev0": "cpu", "dev1": "cpu:0"}, problem=problem)(*inputs)[0].ndim == 0


@pytest.mark.parametrize("name", ["gpt2", "cnn"])
def test_the_training_plan_places_an_inference_module_that_computes_the_eval_forward(name):
    from optpart.torch import apply_inference

    module, inputs, extra = MODELS[name]()
    problem = from_torch(module, inputs, devices=2, **extra)
    result = split_result(problem)
    gm = apply_inference(module, inputs, result, {"dev0": "cpu", "dev1": "cpu:0"})
    ref = copy.deepcopy(module).eval()
    with torch.no_grad():
        want = ref(*inputs)
    want = want.logits if hasattr(want, "logits") else want
    got = gm(*inputs)[0]
    torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-6)
    meta = gm.meta["optpart"]
    # Operators the training step also runs sit where the plan put them, over both devices.
    assert meta["matched"] > 0 and meta["transfers"] > 0 and set(meta["devices"].values()) == {"cpu", "cpu:0"}
    dev = result.placement_ids()
    named = {nd.meta["optpart_node"] for nd in gm.graph.nodes if "optpart_node" in nd.meta}
    same = [n for n in named if n in dev]
    assert len(same) == meta["matched"]
    assert all(meta["devices"][n] == ("cpu" if dev[n] == "dev0" else "cpu:0") for n in same)
    assert check_devices(gm)["operators"] == len(named)
    assert module.training  # the module's own mode is restored


def test_constants_baked_into_the_trace_move_with_their_operator():
    class Scaled(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(2, 2)

        def forward(self, x):
            return self.lin(x) * torch.tensor([1.0, 2.0])  # a tensor made in forward: a graph constant

    torch.manual_seed(0)
    module, inputs = Scaled(), (torch.randn(3, 2),)
    problem = from_torch(module, inputs, devices=2)
    mapping = {nid: ("dev1" if m.get("phase") == "backward" else "dev0")
               for nid, m in zip(problem.node_ids, problem.node_meta)}
    gm = apply(module, inputs, mapping, {"dev0": "cpu", "dev1": "cpu:0"})
    assert any(nd.op == "get_attr" and nd.target.startswith("constant_") for nd in gm.graph.nodes)
    assert_same(*gm(*inputs), *reference(module, inputs, {}))


def test_keyword_inputs_are_keyword_arguments_of_the_placed_step():
    module, (x,), _ = MODELS["cnn"]()
    inputs = {"input": x}  # nn.Sequential.forward(input)
    problem = from_torch(module, inputs, devices=2)
    mapping = {nid: ("dev0" if i % 2 else "dev1") for i, nid in enumerate(problem.node_ids)}
    gm = apply(module, inputs, mapping, {"dev0": "cpu", "dev1": "cpu:0"})
    assert_same(*gm(**inputs), *reference(module, (x,), {}))


def test_nested_inputs_are_flattened_depth_first():
    class Pair(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(3, 3)

        def forward(self, x, extra):
            y, scale = extra
            return (self.lin(x) * y + scale).sum()

    torch.manual_seed(0)
    module = Pair()
    x, y, scale = torch.randn(2, 3), torch.randn(2, 3), torch.randn(3)
    inputs = (x, (y, scale))
    problem = from_torch(module, inputs, devices=2)
    gm = apply(module, inputs, {nid: "dev0" for nid in problem.node_ids}, {"dev0": "cpu", "dev1": "cpu"})
    loss, grads = gm(x, y, scale)
    ref = copy.deepcopy(module)
    ref_loss = ref(x, (y, scale))
    ref_loss.backward()
    assert_same(loss, grads, ref_loss.detach(), {n: p.grad for n, p in ref.named_parameters()})
    times = profile_times(trace_training_step(module, inputs), "cpu", repeats=1, module=module,
                          example_inputs=inputs)
    assert set(times) == set(problem.node_ids)
