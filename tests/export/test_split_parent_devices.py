"""A device map never splits a module whose own code would then read tensors on two devices.

accelerate hooks every module of a map but not a split parent: the parent's own operators run
on the tensors where they are, and on GPUs torch refuses tensors of two devices. The checker
here replays accelerate's device of every tensor over the traced forward graph from the map
alone (independent of the export's own rule)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import examples

import optpart

torch = pytest.importorskip("torch")

from optpart import export
from optpart.export.tree import node_modules
from optpart.formats.torch_import import from_torch


class Head(torch.nn.Module):
    """``out(dense(x)) + bias``: its own code reads a child's output and its own parameter."""

    def __init__(self):
        super().__init__()
        self.dense, self.out = torch.nn.Linear(4, 4), torch.nn.Linear(4, 3)
        self.bias = torch.nn.Parameter(torch.zeros(3))

    def forward(self, x):
        return self.out(self.dense(x)) + self.bias


class HeadModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(4, 4)
        self.head = Head()
        self.w = torch.nn.Parameter(torch.ones(4))

    def forward(self, x):
        return self.head(self.a(x) * self.w)


class Block(torch.nn.Module):
    """Two residuals: ``h = x + attn(x)``, ``h + ff(h)``."""

    def __init__(self):
        super().__init__()
        self.attn, self.ff = torch.nn.Linear(8, 8), torch.nn.Linear(8, 8)

    def forward(self, x):
        h = x + self.attn(x)
        return h + self.ff(h)


class BlockModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.pre, self.block, self.post = torch.nn.Linear(8, 8), Block(), torch.nn.Linear(8, 8)

    def forward(self, x):
        return self.post(self.block(self.pre(x)))


def imported(model, width):
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return from_torch(model, (torch.randn(4, width),), name=type(model).__name__).with_devices(2)


def mixed_reads(problem, model, dmap, names=None):
    """Forward operators that read tensors on two devices when accelerate runs ``dmap``.

    A node of a module at or under a module key runs on that key's device (its hook moves the
    inputs); any other node of a module runs where its inputs and its module's own tensor keys
    are; nodes of the top-level module or of none are left out (accelerate's hook on the model).
    """
    names = {m for m, _ in model.named_modules()} if names is None else names
    module_keys = {k: d for k, d in dmap.items() if k in names}
    mods = node_modules(problem)
    dev = {}
    found = []
    for v, nid in enumerate(problem.node_ids):
        if problem.node_meta[v].get("phase", "forward") != "forward":
            continue
        m = mods[v]
        hook = [k for k in module_keys if m is not None and (k == "" or m == k or m.startswith(k + "."))]
        if hook:
            dev[v] = module_keys[max(hook, key=len)]
            continue
        reads = {dev[int(problem.edge_src[e])] for e in problem.in_edges[problem.in_ptr[v]:problem.in_ptr[v + 1]]
                 if problem.edge_bytes[e] > 0 and int(problem.edge_src[e]) in dev}
        if m:  # a split module's own code also reads its own tensors
            reads |= {d for k, d in dmap.items() if k.rpartition(".")[0] == m and k not in names}
            if len(reads) > 1:
                found.append((nid, m, sorted(reads)))
        if reads:
            dev[v] = min(reads)
    return found


CASES = [(HeadModel, 4, "head.out"), (HeadModel, 4, "head.dense"), (BlockModel, 8, "block.attn"),
         (BlockModel, 8, "block.ff")]


@pytest.mark.parametrize("model_cls,width,pushed", CASES)
def test_a_module_pushed_alone_to_another_device_never_leaves_its_parent_mixing_devices(model_cls, width, pushed):
    model = model_cls()
    problem = imported(model, width)
    mods = node_modules(problem)
    placement = {nid: "dev1" if (m or "").startswith(pushed) else "dev0" for nid, m in zip(problem.node_ids, mods)}
    parent = pushed.rpartition(".")[0]
    for plan in (export.closest_plan(problem, placement, rule="accelerate"), export.module_plan(problem, placement)):
        assert mixed_reads(problem, model, plan.device_map) == []
        devices = {d for k, d in plan.device_map.items() if k == parent or k.startswith(parent + ".")}
        split = len(devices) > 1
        if split:  # the parent's own code runs where its own tensors and its inputs are
            own = [v for v, m in enumerate(mods) if m == parent and problem.node_meta[v].get("phase") == "forward"]
            assert len({int(plan.placement[v]) for v in own}) == 1
        # The placement scored is the one accelerate runs: every module node on its map device.
        for v, m in enumerate(mods):
            key = [k for k in plan.device_map if k not in plan.tensor_keys and m is not None
                   and (k == "" or m == k or m.startswith(k + "."))]
            if key:
                assert plan.placement[v] == plan.device_map[max(key, key=len)]


def test_the_checker_sees_the_mixed_map_the_export_used_to_print():
    """The map that reads ``head.out``'s output on device 1 beside ``head.bias`` on device 0."""
    model = HeadModel()
    problem = imported(model, 4)
    bad = {"a": 0, "head.bias": 0, "head.dense": 0, "head.out": 1, "w": 0}
    assert [(m, d) for _, m, d in mixed_reads(problem, model, bad)] == [("head", [0, 1])]
    residual = {"pre": 0, "block.attn": 1, "block.ff": 0, "post": 0}
    block = BlockModel()
    assert {m for _, m, _ in mixed_reads(imported(block, 8), block, residual)} == {"block"}


def test_a_split_parent_whose_own_code_reads_one_device_stays_split():
    """``head.dense`` on 0 and ``head.out`` with ``head.bias`` on 1: the add reads device 1 only."""
    model = HeadModel()
    problem = imported(model, 4)
    mods = node_modules(problem)
    placement = {nid: "dev1" if (m or "").startswith("head.out") else "dev0" for nid, m in zip(problem.node_ids, mods)}
    plan = export.closest_plan(problem, placement, rule="accelerate")
    assert plan.device_map["head.dense"] == 0 and plan.device_map["head.out"] == 1
    assert plan.device_map["head.bias"] == 1
    assert mixed_reads(problem, model, plan.device_map) == []


@st.composite
def residual_stacks(draw):
    """``blocks.i`` each with sub-layers ``blocks.i.s0..`` and a residual add of its own reading the
    block's input and its last sub-layer; memory with zero, tiny, huge and equal values; 2-3 devices."""
    unit = draw(st.sampled_from([1.0, 2.0 ** 30]))
    size = st.sampled_from([0, 1, 1, 3, 8])
    nodes, edges, prev = [], [], None
    for b in range(draw(st.integers(1, 4))):
        block_in = prev
        for j in range(draw(st.integers(1, 3))):
            nid = f"b{b}.s{j}"
            pb = draw(size) * unit
            nodes.append({"id": nid, "time": draw(st.sampled_from([0.0, 1e-9, 1.0, 5.0])), "memory": pb + unit,
                          "param_bytes": pb, "output_bytes": unit, "temp_bytes": 0.0, "module": f"blocks.{b}.s{j}"})
            if prev is not None:
                edges.append({"src": prev, "dst": nid, "bytes": 4 * unit})
            prev = nid
        if block_in is not None and draw(st.booleans()):
            add = f"b{b}.add"
            nodes.append({"id": add, "time": 1.0, "memory": unit, "param_bytes": 0.0, "output_bytes": unit,
                          "temp_bytes": 0.0, "module": f"blocks.{b}"})
            edges += [{"src": block_in, "dst": add, "bytes": 4 * unit}, {"src": prev, "dst": add, "bytes": 4 * unit}]
            prev = add
    k = draw(st.integers(2, 3))
    total = sum(n["memory"] for n in nodes)
    p = optpart.Problem.build(nodes=nodes, edges=edges, links={"latency": 0.0, "bandwidth": 2.0 ** 30 / unit})
    return p.with_devices(k, memory=draw(st.sampled_from([0.3, 0.6, 1.0, 2.0])) * total, links=p.links)


@settings(max_examples=examples(40), deadline=None)
@given(residual_stacks(), st.data())
def test_no_map_leaves_a_residual_reading_two_devices(problem, data):
    placement = np.array(data.draw(st.lists(st.integers(0, problem.n_devices - 1), min_size=problem.n_nodes,
                                            max_size=problem.n_nodes)), dtype=np.int64)
    mods = node_modules(problem)
    names = {""} | {".".join(m.split(".")[:i]) for m in mods if m for i in range(1, m.count(".") + 2)}
    for plan in (export.closest_plan(problem, placement, rule="accelerate"), export.module_plan(problem, placement)):
        assert mixed_reads(problem, None, plan.device_map, names) == []
