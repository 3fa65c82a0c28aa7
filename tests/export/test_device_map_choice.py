"""Which device map export chooses: the fastest as accelerate runs it within memory, and a map
that covers every tensor of the model (named, unnamed, unused) and never cuts a kept-whole module."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import examples
from oracle import oracle_run

import optpart
from optpart import export
from optpart.export.tree import kept_whole


@st.composite
def module_chains(draw):
    """Modules m0, m1, ... run in order, each 1-3 nodes in a chain, some skip edges (residuals),
    memory split with zero, tiny, huge and equal values; 2-3 equal devices, uniform links."""
    n_mod = draw(st.integers(1, 6))
    unit = draw(st.sampled_from([1.0, 2.0 ** 30]))
    size = st.sampled_from([0, 1, 1, 3, 8])
    nodes, edges, prev = [], [], None
    for m in range(n_mod):
        for j in range(draw(st.integers(1, 3))):
            nid = f"m{m}.n{j}"
            pb, ob = draw(size) * unit, draw(size) * unit
            nodes.append({"id": nid, "time": draw(st.sampled_from([0.0, 1e-9, 1.0, 1.0, 5.0])), "memory": pb + ob,
                          "param_bytes": pb, "output_bytes": ob, "temp_bytes": 0.0, "module": f"m{m}"})
            if prev is not None:
                edges.append({"src": prev, "dst": nid, "bytes": draw(st.sampled_from([0, 4, 1000])) * unit})
            prev = nid
    for a, b in draw(st.lists(st.tuples(st.integers(0, len(nodes) - 1), st.integers(0, len(nodes) - 1)),
                              max_size=3)):
        if a + 1 < b:
            edges.append({"src": nodes[a]["id"], "dst": nodes[b]["id"], "bytes": 8 * unit})
    k = draw(st.integers(2, 3))
    total = sum(n["memory"] for n in nodes)
    memory = draw(st.sampled_from([0.3, 0.5, 0.7, 1.0, 2.0])) * max(total, 1.0)
    p = optpart.Problem.build(nodes=nodes, edges=edges,
                              links={"latency": draw(st.sampled_from([0.0, 0.5])), "bandwidth": 2.0 ** 30 / unit})
    return p.with_devices(k, memory=memory, links=p.links), n_mod


@settings(max_examples=examples(40))
@given(module_chains(), st.data())
def test_the_map_is_at_least_as_fast_as_every_contiguous_split_that_fits(case, data):
    problem, n_mod = case
    placement = np.array(data.draw(st.lists(st.integers(0, problem.n_devices - 1), min_size=problem.n_nodes,
                                            max_size=problem.n_nodes)), dtype=np.int64)
    plan = export.module_plan(problem, placement)
    # Its time is the oracle's one-node-at-a-time run of its own placement.
    assert plan.makespan == pytest.approx(oracle_run(problem, plan.placement)[1], rel=1e-9, abs=0.0)
    # Brute force: every split of the modules in run order into at most k blocks.
    module_of = np.array([int(nid.split(".")[0][1:]) for nid in problem.node_ids])
    best = np.inf
    for cuts in range(1 << max(n_mod - 1, 0)):
        block = np.concatenate([[0], np.cumsum([(cuts >> i) & 1 for i in range(n_mod - 1)])]).astype(np.int64)
        if block[-1] >= problem.n_devices:
            continue
        p = block[module_of]
        start, total, _ = oracle_run(problem, p)
        if optpart.evaluate(problem, p, start).ok:
            best = min(best, total)
    if np.isfinite(best):
        assert plan.fits
        assert plan.makespan <= best * (1 + 1e-9)
    if plan.fits:
        assert optpart.evaluate(problem, plan.placement, plan.run.start).ok
    else:
        assert "--memory" in plan.advice


def test_a_placement_that_alternates_devices_gives_one_block_per_device_not_a_move_per_module():
    """The concurrent schedule's favourite, layer by layer over the devices, is the slowest map
    under accelerate: every layer boundary a move. Export keeps contiguous blocks instead."""
    layers = 12
    nodes = [{"id": f"l{i}", "time": 1.0, "memory": 10.0, "module": f"layers.{i}"} for i in range(layers)]
    edges = [{"src": f"l{i}", "dst": f"l{i + 1}", "bytes": 100.0} for i in range(layers - 1)]
    p = optpart.Problem.build(nodes=nodes, edges=edges, links={"latency": 0.1, "bandwidth": 1000.0})
    p = p.with_devices(3, memory=45.0, links=p.links)  # 4 layers per device at most: 3 devices needed
    alternating = np.arange(layers) % 3
    closest = export.closest_plan(p, alternating, rule="accelerate")
    assert closest.run.transfers == layers - 1
    plan = export.module_plan(p, alternating)
    assert plan.fits and plan.run.transfers == 2 and len(set(plan.device_map.values())) == 3
    assert plan.makespan == pytest.approx(layers + 2 * (0.1 + 0.1))
    assert plan.makespan < closest.makespan


def test_parameters_named_by_the_import_get_entries_of_their_own_and_unused_modules_are_covered():
    # Module "enc" owns the frozen "enc.pos" (held by its operator, named in ``params``) and children
    # "enc.a" and "enc.b"; the model also has "pool", which runs nothing.
    nodes = [{"id": "x", "time": 1, "memory": 2, "param_bytes": 1, "output_bytes": 1, "module": "enc",
              "params": ["enc.pos"]},
             {"id": "a", "time": 1, "memory": 1, "module": "enc.a"},
             {"id": "b", "time": 1, "memory": 1, "module": "enc.b"}]
    classes = {"": "Model", "enc": "Enc", "enc.a": "Linear", "enc.b": "Linear", "pool": "Pool"}
    p = optpart.Problem.build(nodes=nodes, edges=[{"src": "x", "dst": "a", "bytes": 1},
                                                  {"src": "a", "dst": "b", "bytes": 1}], meta={"module_classes": classes, "source": "torch"})
    p = p.with_devices(2, memory=10.0)
    assert kept_whole(p) == []  # the import named it: "enc" may be split
    plan = export.closest_plan(p, np.array([0, 0, 1]))
    assert plan.device_map["enc.pos"] == 0 and plan.device_map["enc.a"] == 0 and plan.device_map["enc.b"] == 1
    assert "pool" in plan.device_map and "enc.pos" in plan.tensor_keys
    # Without the name, "enc" holds bytes of a parameter it cannot name: it is kept whole.
    unnamed = [dict(n) for n in nodes]
    del unnamed[0]["params"]
    q = optpart.Problem.build(nodes=unnamed, edges=[{"src": "x", "dst": "a", "bytes": 1},
                                                    {"src": "a", "dst": "b", "bytes": 1}],
                              meta={"module_classes": classes, "source": "torch"}).with_devices(2, memory=10.0)
    assert kept_whole(q) == ["enc"]
    plan = export.closest_plan(q, np.array([0, 0, 1]))
    assert not any(k.startswith("enc.") for k in plan.device_map) and set(plan.placement.tolist()) == {0}
    assert plan.kept_whole == ["enc"]


def test_no_split_classes_recorded_by_the_import_are_kept_whole():
    nodes = [{"id": f"{m}.{j}", "time": 1, "memory": 1, "module": m}
             for m in ("emb", "h.0.attn", "h.0.mlp", "h.1.attn", "h.1.mlp") for j in range(2)]
    edges = [{"src": nodes[i]["id"], "dst": nodes[i + 1]["id"], "bytes": 1} for i in range(len(nodes) - 1)]
    classes = {"": "M", "emb": "Embedding", "h": "ModuleList", "h.0": "Block", "h.1": "Block",
               "h.0.attn": "Attn", "h.0.mlp": "MLP", "h.1.attn": "Attn", "h.1.mlp": "MLP"}
    p = optpart.Problem.build(nodes=nodes, edges=edges, meta={"module_classes": classes, "no_split": ["Block"]})
    p = p.with_devices(3, memory=100.0)
    assert kept_whole(p) == ["h.0", "h.1"]
    inside = np.array([0, 0, 1, 1, 2, 2, 1, 1, 2, 2])  # cuts each block between attn and mlp
    for plan in (export.closest_plan(p, inside), export.module_plan(p, inside),
                 export.split_points(p, inside).plan):
        assert not any(k.startswith(("h.0.", "h.1.")) for k in plan.device_map), plan.device_map
        assert len(set(plan.placement[2:6].tolist())) == 1 and len(set(plan.placement[6:].tolist())) == 1
    assert all(not s.startswith(("h.0.", "h.1.")) for s in export.split_points(p, inside).split_points)


def test_cli_prints_the_rule_the_costs_and_the_modules_kept_whole(tmp_path, capsys):
    from optpart.cli import main
    from optpart.formats import save, save_result

    nodes = [{"id": f"{ph}.{m}.{j}", "time": 1, "memory": 1, "module": m, "phase": ph}
             for ph in ("forward", "backward") for m in ("emb", "h.0.attn", "h.0.mlp") for j in range(2)]
    edges = [{"src": nodes[i]["id"], "dst": nodes[i + 1]["id"], "bytes": 1} for i in range(len(nodes) - 1)]
    classes = {"": "M", "emb": "Embedding", "h": "ModuleList", "h.0": "Block", "h.0.attn": "Attn", "h.0.mlp": "MLP"}
    p = optpart.Problem.build(nodes=nodes, edges=edges, links={"latency": 1e-5, "bandwidth": 25e9},
                              meta={"module_classes": classes, "no_split": ["Block"]}).with_devices(2, memory=8.0)
    save(p, tmp_path / "p.json")
    save_result(optpart.evaluate(p, np.arange(p.n_nodes) % 2), p, tmp_path / "r.json")
    base = [str(tmp_path / "r.json"), "-p", str(tmp_path / "p.json"), "-o", str(tmp_path / "out.json")]
    assert main(["export", *base]) == 0
    out = capsys.readouterr().out
    assert "per step (forward and backward) as accelerate runs it, one device at a time" in out
    assert "costs: node times as given in the problem; links 25 GB/s, 10 us" in out
    assert "kept whole: 1 module(s) ('h.0')" in out
    assert main(["export", *base, "-f", "split_points"]) == 0
    out = capsys.readouterr().out
    assert "with the devices working at once" in out and "stages share" not in out


def test_the_costs_line_names_measured_times_and_links_that_differ():
    from optpart.export.costs import cost_profile

    measured = {"peak_flops": 15.7e12, "efficiency": 0.5, "times": "measured",
                "profile": {"device": "cpu", "repeats": 5, "warmup": 1}}
    p = optpart.Problem.build(nodes=[{"id": "a", "time": 1, "memory": 1}], edges=[], meta={"cost_model": measured},
                              devices=[{"id": f"d{i}", "memory": 1} for i in range(3)],
                              links={"latency": 1e-5, "bandwidth": 25e9,
                                     "pairs": [{"src": "d0", "dst": "d1", "bandwidth": 1e9, "latency": 2e-6}]})
    assert cost_profile(p) == ("costs: operator times measured on cpu (median of 5 runs); "
                               "links 1 GB/s to 25 GB/s, 2 us to 10 us")
