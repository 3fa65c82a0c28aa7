"""Export: module-level device maps, pipeline split points, raw placements, the CLI command."""

from __future__ import annotations

import json
import warnings

import pytest

import optpart
from optpart import export
from optpart.cli import main
from optpart.formats import save, save_result


def chain(modules, times, mems, *, devices=2, memory=100.0, extra_nodes=(), extra_edges=(), constraints=None):
    """A chain of nodes n0 -> n1 -> ..., node i in module ``modules[i]``."""
    nodes = [{"id": f"n{i}", "time": t, "memory": m, "phase": "forward", **({"module": mod} if mod else {})}
             for i, (mod, t, m) in enumerate(zip(modules, times, mems))]
    nodes += list(extra_nodes)
    edges = [{"src": f"n{i}", "dst": f"n{i + 1}", "bytes": 10} for i in range(len(modules) - 1)]
    edges += list(extra_edges)
    p = optpart.Problem.build(nodes=nodes, edges=edges, constraints=constraints,
                              links={"latency": 0.1, "bandwidth": 100.0})
    return p.with_devices(devices, memory=memory, links=p.links, constraints=p.constraints)


def place(problem, devs):
    return {nid: problem.device_ids[d] for nid, d in zip(problem.node_ids, devs)}


def test_clean_pipeline_gives_the_coarsest_map_and_the_same_makespan():
    p = chain(["h.0.attn", "h.0.mlp", "h.1.attn", "h.1.mlp"], [1, 1, 1, 1], [1, 1, 1, 1])
    r = optpart.evaluate(p, place(p, [0, 0, 1, 1]))
    plan = export.closest_plan(p, r)
    assert plan.device_map == {"h.0": 0, "h.1": 1}  # children on one device merge into their parent
    assert plan.fits and plan.split_modules == []
    assert plan.makespan == pytest.approx(r.makespan)
    # Run one device at a time (accelerate), the chain is fastest on one device: no move at all.
    assert export.device_map(p, r, values="id") in ({"": "dev0"}, {"": "dev1"})


def test_everything_on_one_device_is_the_whole_model():
    p = chain(["a", "b"], [1, 1], [1, 1])
    assert export.device_map(p, place(p, [1, 1])) == {"": 1}


def test_a_split_module_goes_where_most_of_its_time_and_memory_is_and_both_makespans_are_reported():
    # Module "a" has 3 s on dev0 and 1 s on dev1: the map puts it on dev0.
    p = chain(["a", "a", "b"], [3, 1, 1], [1, 1, 1])
    r = optpart.evaluate(p, place(p, [0, 1, 1]))
    plan = export.closest_plan(p, r)
    assert plan.device_map == {"a": 0, "b": 1}
    assert plan.split_modules == ["a"]
    assert plan.original_makespan == pytest.approx(r.makespan)
    # The coarser plan has no transfer inside "a": 3 + 1 + (0.1 + 10/100) + 1 = 5.2 s.
    assert plan.makespan == pytest.approx(5.2)
    assert "5.2" in plan.summary() and "fits" in plan.summary()
    # Run as accelerate runs it, the same map takes 3 + 1 + 1 s of operators and one move of 0.2 s.
    seq = export.closest_plan(p, r, rule="accelerate")
    assert seq.makespan == pytest.approx(5.2) and seq.run.transfers == 1


def test_a_plan_that_does_not_fit_is_never_called_fitting():
    # Majority puts both modules on dev0 (12 bytes > 8); re-solving with modules colocated fits.
    p = chain(["A", "A", "B", "B"], [5, 1, 5, 1], [3, 3, 3, 3], memory=8.0)
    r = optpart.evaluate(p, place(p, [0, 1, 0, 1]))
    plain = export.closest_plan(p, r)
    assert not plain.fits and plain.method == "closest to the placement"
    assert any("dev0" in msg for msg in plain.problems)
    assert "DOES NOT FIT" in plain.summary()
    fixed = export.module_plan(p, r)
    assert fixed.fits and fixed.method.startswith("contiguous blocks")
    assert sorted(fixed.device_map.values()) == [0, 1]
    assert optpart.violations(p, fixed.result) == []


def test_nodes_outside_modules_follow_their_inputs():
    extra = [{"id": "input.0", "time": 0, "memory": 1}, {"id": "loss", "time": 1, "memory": 0}]
    edges = [{"src": "input.0", "dst": "n0", "bytes": 4}, {"src": "n1", "dst": "loss", "bytes": 4}]
    p = chain(["a", "b"], [1, 1], [1, 1], extra_nodes=extra, extra_edges=edges)
    # The raw placement puts the input and the loss elsewhere; the map's plan moves them.
    plan = export.closest_plan(p, place(p, [1, 0, 0, 1]))
    assert plan.device_map == {"a": 1, "b": 0}
    got = dict(zip(p.node_ids, plan.placement.tolist()))
    assert got["input.0"] == 1 and got["loss"] == 0


def test_colocated_modules_share_one_device():
    # Tied weights: "wte" and "lm_head" read one parameter, so the importer colocates them.
    p = chain(["wte", "h", "lm_head"], [1, 5, 1], [1, 1, 1],
              constraints={"colocate": [["n0", "n2"]]})
    plan = export.closest_plan(p, place(p, [1, 0, 1]))
    assert plan.device_map["wte"] == plan.device_map["lm_head"] == 1
    assert plan.fits


def test_split_points_name_the_first_module_of_each_stage():
    p = chain(["emb", "h.0", "h.1", "h.2", "head"], [1] * 5, [1] * 5, devices=3)
    sp = export.split_points(p, place(p, [0, 0, 1, 2, 2]))
    assert sp.stages == [("emb", "dev0"), ("h.1", "dev1"), ("h.2", "dev2")]
    assert sp.split_points == ["h.1", "h.2"]
    assert sp.to_dict()["split_points"] == ["h.1", "h.2"]


def test_a_plan_that_comes_back_to_a_device_gets_contiguous_stages_instead():
    p = chain(["emb", "h.0", "head"], [1] * 3, [1] * 3)
    sp = export.split_points(p, place(p, [0, 1, 0]))
    assert "module 'head' runs on 'dev0' after module 'h' on 'dev1'" in sp.plan.method
    assert sp.plan.fits and [d for _, d in sp.stages] == sorted({d for _, d in sp.stages})
    devs = [sp.plan.placement[p.node_index[f"n{i}"]] for i in range(3)]
    assert devs == sorted(devs)  # stages in the order modules run


def test_stages_that_share_a_tied_weight_are_scored_with_a_replica_and_say_so():
    # "emb" and "head" use one weight (colocated with its update "update.w"); head runs last.
    extra = [{"id": "update.w", "time": 0, "memory": 30, "phase": "optimizer", "param": "emb.w"}]
    p = chain(["emb", "h.0", "h.1", "head"], [1] * 4, [30, 20, 20, 5], memory=100.0, extra_nodes=extra,
              extra_edges=[{"src": "n3", "dst": "update.w", "bytes": 1}],
              constraints={"colocate": [["update.w", "n0", "n3"]]})
    sp = export.split_points(p, place(p, [0, 1, 1, 0, 0]))
    assert sp.plan.fits and len(sp.stages) == 2
    assert sp.plan.shared == [("update.w", ["emb", "head"])]
    assert "replicates it on each stage" in sp.notes()[0] and sp.to_dict()["shared_parameters"][0]["parameter"] == "w"


def test_placement_map_and_missing_metadata():
    p = chain([None, None], [1, 1], [1, 1])
    assert export.placement_map(p, place(p, [0, 1])) == {"n0": "dev0", "n1": "dev1"}
    with pytest.raises(export.ExportError, match="no node with 'module' metadata"):
        export.device_map(p, place(p, [0, 1]))


def test_cli_export_writes_each_format(tmp_path, capsys):
    p = chain(["emb", "h.0", "h.1"], [1, 2, 1], [1, 1, 1])
    r = optpart.evaluate(p, place(p, [0, 0, 1]))
    save(p, tmp_path / "p.json")
    save_result(r, p, tmp_path / "r.json")
    base = [str(tmp_path / "r.json"), "--problem", str(tmp_path / "p.json")]
    assert main(["export", *base, "-o", str(tmp_path / "dm.json")]) == 0
    out = capsys.readouterr().out
    assert "as accelerate runs it" in out and "fits" in out
    # One device at a time, the chain is fastest with no move: the whole model on one device.
    assert list(json.loads((tmp_path / "dm.json").read_text()).items()) == [("", 0)]
    assert main(["export", *base, "--ids"]) == 0  # no -o: the JSON alone on standard output
    captured = capsys.readouterr()
    assert json.loads(captured.out) == {"": "dev0"}
    assert "as accelerate runs it" in captured.err
    assert main(["export", *base, "--format", "split_points", "-o", str(tmp_path / "sp.json")]) == 0
    assert json.loads((tmp_path / "sp.json").read_text())["split_points"] == ["h.1"]
    assert main(["export", *base, "--format", "placement", "-o", str(tmp_path / "pl.json")]) == 0
    assert json.loads((tmp_path / "pl.json").read_text()) == {"n0": "dev0", "n1": "dev0", "n2": "dev1"}


def test_cli_export_errors_are_one_line(tmp_path, capsys):
    p = chain(["emb", "h.0", "head"], [1] * 3, [1] * 3)
    save(p, tmp_path / "p.json")
    save_result(optpart.evaluate(p, place(p, [0, 1, 0])), p, tmp_path / "r.json")
    r2 = optpart.evaluate(p.with_devices(3, memory=100.0), place(p, [0, 1, 0]))
    save_result(r2, p.with_devices(3, memory=100.0), tmp_path / "r3.json")
    code = main(["export", str(tmp_path / "r3.json"), "--problem", str(tmp_path / "p.json")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "was computed for devices" in err and "r3.json" in err
    # Device flags that name other devices than the result's are refused the same way by export,
    # show and plot; flags that change only capacities are taken, with one note naming both.
    for cmd in (["export", str(tmp_path / "r3.json"), "--problem", str(tmp_path / "p.json")],
                ["show", str(tmp_path / "r3.json"), "--problem", str(tmp_path / "p.json")],
                ["plot", str(tmp_path / "r3.json"), "--problem", str(tmp_path / "p.json"), "-o",
                 str(tmp_path / "g.png")]):
        assert main([*cmd, "--devices", "2", "--memory", "100B"]) == 2, cmd
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "the device flags give [dev0 100 B, dev1 100 B]" in err, cmd
    assert not (tmp_path / "g.png").exists()
    assert main(["export", str(tmp_path / "r3.json"), "--problem", str(tmp_path / "p.json"), "--devices", "3",
                 "--memory", "50B", "-q"]) == 0
    err = capsys.readouterr().err
    assert err.startswith("note: ") and "read on [dev0 50 B, dev1 50 B, dev2 50 B]" in err


def test_cli_export_exits_1_when_the_module_plan_does_not_fit(tmp_path, capsys):
    p = chain(["A", "A", "B", "B"], [5, 1, 5, 1], [3, 3, 3, 3], memory=5.0)
    save(p, tmp_path / "p.json")
    save_result(optpart.evaluate(p, place(p, [0, 1, 0, 1])), p, tmp_path / "r.json")
    code = main(["export", str(tmp_path / "r.json"), "--problem", str(tmp_path / "p.json"),
                 "-o", str(tmp_path / "dm.json")])
    err = capsys.readouterr().err
    assert code == 1 and "DOES NOT FIT" in err
    assert "it fits devices of 6B (static): solve and export with --memory 6B" in err  # one module: 2 x 3 B
    assert json.loads((tmp_path / "dm.json").read_text()) == {"A": 0, "B": 1}  # written all the same


@pytest.mark.parametrize("name", ["gpt2", "bert"])
def test_hugging_face_device_map_covers_every_parameter_and_buffer(name):
    """Our map gives every parameter and buffer exactly one device, and accelerate's own
    ``check_device_map`` accepts it, while it refuses the same map with one entry dropped."""
    pytest.importorskip("torch")
    utils = pytest.importorskip("accelerate.utils", reason="accelerate (extra 'accelerate') is not installed: "
                                "its check_device_map is this test's referee")
    from placed_models import MODELS, plan

    module, inputs, extra = MODELS[name]()
    problem, result = plan(module, inputs, extra)
    mp = export.module_plan(problem, result)
    assert mp.fits
    dm = mp.device_map
    tensors = [n for n, _ in module.named_parameters()] + [n for n, _ in module.named_buffers()]
    for t in tensors:
        owners = [k for k in dm if k == "" or t == k or t.startswith(k + ".")]
        assert len(owners) == 1, (t, owners)
    modules = dict(module.named_modules())
    assert all(k in modules or k.rsplit(".", 1)[0] in modules for k in dm)
    assert all(k in modules or k in tensors for k in dm)  # every key is a module or one tensor
    dropped = max(dm, key=lambda k: (sum(t == k or t.startswith(k + ".") or k == "" for t in tensors), k))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # it warns on tensor-level keys (bert's position_ids buffer)
        utils.check_device_map(module, dm)  # raises ValueError on a tensor without a device
        with pytest.raises(ValueError, match="does not give any device"):
            utils.check_device_map(module, {k: d for k, d in dm.items() if k != dropped})


def test_split_points_of_a_torch_pipeline_follow_program_order():
    torch = pytest.importorskip("torch")
    from optpart.formats.torch_import import from_torch

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 8), torch.nn.ReLU(),
                              torch.nn.Linear(8, 2))
    p = from_torch(net, (torch.randn(3, 4),), devices=2)
    mods = export.node_modules(p)
    # Modules "0" and "1" on dev0, the rest on dev1; the loss and inputs follow their data.
    mapping = {nid: ("dev0" if m in ("0", "1") else "dev1") for nid, m in zip(p.node_ids, mods)}
    sp = export.split_points(p, mapping)
    assert sp.split_points == ["2"]
    assert sp.plan.device_map == {"0": 0, "1": 0, "2": 1, "3": 1, "4": 1}
    assert sp.plan.fits
    # torch's own pipeline splitter accepts the split points and makes the same stages.
    pipelining = pytest.importorskip("torch.distributed.pipelining")
    spec = {name: pipelining.SplitPoint.BEGINNING for name in sp.split_points}
    pipe = pipelining.pipeline(net, mb_args=(torch.randn(3, 4),), split_spec=spec)
    assert pipe.num_stages == len(sp.stages) == 2
    stage1 = sorted(name for name, _ in pipe.split_gm.submod_pp_1.named_children())
    assert stage1 == ["2", "3", "4"]


def test_depth_keeps_modules_whole_and_prices_the_coarser_map():
    p = chain(["h.0.attn", "h.0.mlp", "h.1.attn", "h.1.mlp"], [1, 3, 3, 1], [1, 1, 1, 1])
    r = optpart.evaluate(p, place(p, [0, 1, 1, 0]))
    fine = export.closest_plan(p, r)
    assert fine.device_map == {"h.0.attn": 0, "h.0.mlp": 1, "h.1.attn": 1, "h.1.mlp": 0}
    coarse = export.closest_plan(p, r, depth=2)
    # h.0: 1 s on dev0, 3 s on dev1 -> dev1; h.1: 3 s on dev1 -> dev1; both on dev1 is the whole model.
    assert coarse.device_map == {"": 1}
    assert coarse.makespan == pytest.approx(8.0) and fine.makespan > 0
    with pytest.raises(export.ExportError, match="depth=0"):
        export.module_plan(p, r, depth=0)


def test_a_split_parent_keeps_its_own_parameters_and_pipelines_split_at_modules_only():
    # "blk" owns parameter "blk.scale" and children "blk.a" (dev0) and "blk.b" (dev1).
    extra = [{"id": "update.blk.scale", "time": 0.5, "memory": 1, "param": "blk.scale", "phase": "optimizer"}]
    p = chain(["blk.a", "blk.b"], [1, 1], [1, 1], extra_nodes=extra,
              extra_edges=[{"src": "n1", "dst": "update.blk.scale", "bytes": 4}])
    plan = export.closest_plan(p, place(p, [0, 1, 0]))
    assert plan.device_map == {"blk.scale": 0, "blk.a": 0, "blk.b": 1}
    assert plan.tensor_keys == {"blk.scale"}
    assert export.split_points(p, place(p, [0, 1, 0])).split_points == ["blk.b"]


def test_a_result_without_a_placement_cannot_be_exported():
    p = chain(["a", "b"], [1, 1], [1, 1])
    empty = optpart.Result(problem=p.name, solver="cpsat", status=optpart.Status.UNKNOWN)
    with pytest.raises(export.ExportError, match="status 'unknown' and no placement"):
        export.device_map(p, empty)


def test_gpt2_split_points_feed_torch_pipelining():
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    pipelining = pytest.importorskip("torch.distributed.pipelining")
    from optpart.formats.torch_import import from_torch

    cfg = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=61, n_positions=16,
                                  tie_word_embeddings=False, use_cache=False, bos_token_id=0, eos_token_id=0)
    torch.manual_seed(0)
    model, ids = transformers.GPT2LMHeadModel(cfg), torch.randint(0, 61, (2, 8))
    p = from_torch(model, (ids,), devices=2)
    first = ("transformer.wte", "transformer.wpe", "transformer.drop", "transformer.h.0")
    mapping = {nid: ("dev0" if m and m.startswith(first) else "dev1")
               for nid, m in zip(p.node_ids, export.node_modules(p))}
    sp = export.split_points(p, mapping)
    assert sp.stages == [("transformer.wte", "dev0"), ("transformer.h.1", "dev1")]
    pipe = pipelining.pipeline(model, mb_args=(ids,),
                               split_spec={name: pipelining.SplitPoint.BEGINNING for name in sp.split_points})
    assert pipe.num_stages == 2


def test_a_stage_that_begins_with_a_container_begins_at_its_first_child_that_runs():
    # "h" is a container (a ModuleList: never called); the stage on dev1 begins at "h.0".
    p = chain(["emb", "h.0", "h.1"], [1, 1, 1], [1, 1, 1])
    sp = export.split_points(p, place(p, [0, 1, 1]))
    assert sp.plan.device_map == {"emb": 0, "h": 1}
    assert sp.split_points == ["h.0"]


def test_when_no_module_plan_fits_the_answer_says_so():
    # Each module needs 6 bytes; devices hold 5: no module-consistent plan fits.
    p = chain(["A", "A", "B", "B"], [1, 1, 1, 1], [3, 3, 3, 3], memory=5.0)
    r = place(p, [0, 1, 0, 1])
    plan = export.module_plan(p, r)
    assert not plan.fits and "least overflow" in plan.method
    assert "DOES NOT FIT" in plan.summary()
    # The advice names a memory at which this very plan fits (its use does not depend on capacity).
    assert "--memory 6B" in plan.advice
    bigger = p.with_devices(2, memory=6.0)
    assert optpart.evaluate(bigger, plan.placement, memory_model=plan.memory_model).ok


def test_depth_auto_is_the_coarsest_map_that_fits_and_loses_nothing():
    mods = ["emb", "h.0.a", "h.0.b", "h.1.a", "h.1.b"]
    # A chain runs faster on one device (no transfer): with room for it, auto keeps it whole.
    roomy = chain(mods, [1] * 5, [1] * 5)
    assert export.module_plan(roomy, place(roomy, [0, 0, 0, 1, 1]), depth="auto").device_map == {"": 0}
    # With 3 bytes per device the whole model does not fit; blocks (depth 2) do, at no loss.
    tight = chain(mods, [1] * 5, [1] * 5, memory=3.0)
    r = place(tight, [0, 0, 0, 1, 1])
    auto = export.module_plan(tight, r, depth="auto")
    assert auto.fits and auto.device_map == {"emb": 0, "h.0": 0, "h.1": 1}
    assert auto.makespan == pytest.approx(export.module_plan(tight, r).makespan)


def _root_owned():
    """A net with parameters and buffers of the top-level module itself (BART's final_logits_bias, CLIP's logit_scale)."""
    import torch

    class RootOwned(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(4, 8)
            self.b = torch.nn.Linear(8, 3)
            self.logit_scale = torch.nn.Parameter(torch.tensor(2.0))
            self.register_buffer("final_bias", torch.arange(3.0))

        def forward(self, x):
            return self.b(self.a(x).relu()) * self.logit_scale + self.final_bias

    return RootOwned()


def test_tensors_of_the_top_level_module_get_a_device_and_accelerate_dispatches_the_map():
    torch = pytest.importorskip("torch")
    utils = pytest.importorskip("accelerate.utils")
    accelerate = pytest.importorskip("accelerate")
    from optpart.formats.torch_import import from_torch

    torch.manual_seed(0)
    net, x = _root_owned(), torch.randn(5, 4)
    p = from_torch(net, (x,), devices=2)
    mods = export.node_modules(p)
    assert mods[p.node_index["update.logit_scale"]] == ""
    # Module "a" on dev0, everything else on dev1: the root's own tensors need their own entries.
    mapping = {nid: ("dev0" if m == "a" else "dev1") for nid, m in zip(p.node_ids, mods)}
    dm = export.closest_plan(p, mapping).device_map
    assert dm["a"] == 0 and dm["logit_scale"] == 1 and dm["final_bias"] == 1 and dm["b"] == 1
    utils.check_device_map(net, dm)  # raises when a parameter or buffer has no entry
    want = net(x)
    placed = accelerate.dispatch_model(net, device_map={k: "cpu" for k in dm})
    assert torch.equal(placed(x), want)


def test_accelerates_own_map_becomes_a_scored_placement_and_never_fits_by_decree():
    torch = pytest.importorskip("torch")
    pytest.importorskip("accelerate")
    from optpart.export.accelerate import accelerate_baseline, placement_from_device_map
    from optpart.formats.torch_import import from_torch

    torch.manual_seed(0)
    net, x = _root_owned(), torch.randn(5, 4)
    graph = from_torch(net, (x,))
    # A map by hand: "a" on device 1, the rest on 0 (offloaded "final_bias" runs on the first device of the map).
    p = graph.with_devices(2, memory=1e9)
    placement, offloaded = placement_from_device_map(p, {"b": "dev0", "a": 1, "logit_scale": 0, "final_bias": "cpu"})
    mods = export.node_modules(p)
    assert offloaded == ["final_bias"]
    assert all(placement[v] == (1 if m == "a" else 0) for v, m in enumerate(mods) if m is not None)
    with pytest.raises(export.ExportError, match="'b': 7 is not a device"):
        placement_from_device_map(p, {"": 0, "b": 7})
    # accelerate fills device 0 by parameter size alone: on roomy devices that fits ...
    roomy, dmap = accelerate_baseline(p, net)
    assert dmap == {"": 0} and roomy.status is optpart.Status.FEASIBLE and roomy.solver == "accelerate"
    # ... and where the step's activations do not fit the first device, the scored map is invalid, not feasible.
    need = float(roomy.memory_peak.max())
    tight = graph.with_devices(2, memory=need * 0.9)
    over, _ = accelerate_baseline(tight, net, reserve=0.0)
    assert not over.ok and over.status is optpart.Status.INVALID and "but has" in over.message
