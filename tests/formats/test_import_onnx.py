"""ONNX import: a hand-built model counted by hand, the onnx wheel's light CNNs, the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import optpart
from optpart.cli import main
from optpart.errors import FormatError

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

from optpart.formats.onnx_import import from_onnx  # noqa: E402

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"

N, CIN, COUT, HW, K, CLS = 2, 3, 8, 16, 3, 10


def light(name: str) -> Path:
    path = LIGHT / f"light_{name}.onnx"
    if not path.exists():
        pytest.skip(f"{path} is not shipped by this onnx wheel")
    return path


def tiny_cnn() -> "onnx.ModelProto":
    """x -> Conv(3x3, pad 1) -> Relu -> GlobalAveragePool -> Flatten -> Gemm: hand-countable."""
    w = helper.make_tensor("w", TensorProto.FLOAT, [COUT, CIN, K, K], np.zeros(COUT * CIN * K * K).tolist())
    fc = helper.make_tensor("fc", TensorProto.FLOAT, [COUT, CLS], np.zeros(COUT * CLS).tolist())
    fb = helper.make_tensor("fb", TensorProto.FLOAT, [CLS], np.zeros(CLS).tolist())
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv", kernel_shape=[K, K], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("GlobalAveragePool", ["r"], ["g"], name="gap"),
        helper.make_node("Flatten", ["g"], ["f"], name="flat"),
        helper.make_node("Gemm", ["f", "fc", "fb"], ["y"], name="fc"),
    ]
    graph = helper.make_graph(nodes, "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [N, CIN, HW, HW])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [N, CLS])], [w, fc, fb])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


CONV = 2 * N * COUT * HW * HW * CIN * K * K
ACT = N * COUT * HW * HW  # elements of the conv and relu outputs
GEMM = 2 * N * COUT * CLS + N * CLS
PARAMS = COUT * CIN * K * K + COUT * CLS + CLS


def test_tiny_inference_counts():
    p = from_onnx(tiny_cnn())
    assert p.node_ids == ["input.x", "conv", "relu", "gap", "flat", "fc"]
    assert p.n_edges == 5
    flops = {p.node_ids[i]: m["flops"] for i, m in enumerate(p.node_meta)}
    assert flops == {"input.x": 0, "conv": CONV, "relu": ACT, "gap": ACT, "flat": 0, "fc": GEMM}
    assert p.meta["parameters"] == PARAMS
    assert p.memory.sum() == 4 * PARAMS + 4 * N * CIN * HW * HW  # weights on their readers, plus the input
    assert p.memory[p.node_index["conv"]] == 4 * COUT * CIN * K * K
    assert p.edge_bytes[0] == 4 * N * CIN * HW * HW
    assert p.time[p.node_index["flat"]] == 0  # a view


def test_tiny_training_counts():
    p = from_onnx(tiny_cnn(), training=True)
    phases = [m["phase"] for m in p.node_meta]
    assert phases.count("forward") == 6 and phases.count("backward") == 5 and phases.count("optimizer") == 3
    # backward: twice the forward for Conv and Gemm, once for the others
    assert p.meta["total_flops"] == 3 * CONV + 3 * GEMM + 2 * (2 * ACT)
    saved = 4 * (ACT + ACT + N * COUT)  # outputs of conv, relu, gap (flat is a view of gap's output)
    assert p.memory.sum() == 4 * 4 * PARAMS + 4 * N * CIN * HW * HW + saved
    # every weight's update is colocated with its forward and backward operator
    groups = sorted(tuple(sorted(p.node_ids[i] for i in g)) for g in p.groups)
    assert ("conv", "grad.conv", "update.w") in groups
    assert ("fc", "grad.fc", "update.fb", "update.fc") in groups
    problem = p.with_devices(2, memory=float(p.memory.sum()))
    result = optpart.solve(problem, "single", memory_model="static")  # capacity = the static total
    optpart.check(problem, result)
    assert result.makespan == pytest.approx(problem.time.sum())


def test_resnet50_light_matches_published_counts():
    p = from_onnx(light("resnet50"))
    assert p.meta["parameters"] == 25_557_032  # trainable: batch-norm running statistics excluded
    assert p.meta["parameter_bytes"] == 4 * (25_557_032 + 2 * 26_560)  # ... but held in memory
    conv_gemm = sum(m["flops"] for m in p.node_meta if m["op"] in ("Conv", "Gemm"))
    assert abs(conv_gemm - 2 * 4.089e9) <= 0.02 * 2 * 4.089e9  # 4.09 GMACs (He et al. 2016, torchvision)
    assert sum(m["op"] == "Conv" for m in p.node_meta) == 53
    t = from_onnx(light("resnet50"), training=True)
    assert sum(m["phase"] == "optimizer" for m in t.node_meta) == 53 + 2 * 53 + 2  # conv w, bn scale/bias, fc w/b


def test_input_shapes_change_the_batch():
    one = from_onnx(light("squeezenet"))
    eight = from_onnx(light("squeezenet"), input_shapes={"data_0": [8, 3, 224, 224]})
    assert eight.meta["total_flops"] == 8 * one.meta["total_flops"]
    with pytest.raises(FormatError, match="unknown graph input 'nope'"):
        from_onnx(light("squeezenet"), input_shapes={"nope": [1]})


def test_every_light_model_imports_and_checks():
    paths = sorted(LIGHT.glob("light_*.onnx")) if LIGHT.exists() else []
    if not paths:
        pytest.skip("no light models in this onnx wheel")
    for path in paths:
        p = from_onnx(path, training=True)
        assert p.n_nodes > 10 and p.meta["total_flops"] > 0, path.name
        problem = p.with_devices(1, memory=float(p.memory.sum()))
        optpart.check(problem, optpart.solve(problem, "single"))


def test_cli_import(tmp_path, capsys):
    src = light("squeezenet")
    out = tmp_path / "sq.json"
    rc = main(["import", str(src), "-o", str(out), "--training", "--peak-flops", "312TFLOP/s",
               "--efficiency", "0.4", "--link-latency", "5us", "--devices", "2", "--memory", "1GiB"])
    assert rc == 0
    printed = capsys.readouterr().out
    doc = json.loads(out.read_text())
    assert doc["meta"]["cost_model"]["peak_flops"] == 312e12
    assert doc["meta"]["cost_model"]["efficiency"] == 0.4
    assert doc["links"]["latency"] == pytest.approx(5e-6) and len(doc["devices"]) == 2
    p = optpart.load(out)
    assert f"{p.n_nodes} nodes" in printed, printed  # the summary tells the file's count, not a pinned one
    assert p.n_nodes == from_onnx(src, training=True).n_nodes
    # counted from the ONNX file itself: one optimizer update per weight (every initializer of
    # squeezenet is trainable), one backward node per forward operator (the graph input has none)
    phases = [m["phase"] for m in p.node_meta]
    inits = {t.name for t in onnx.load(str(src)).graph.initializer}
    assert phases.count("optimizer") == len(inits) > 0
    assert phases.count("backward") == phases.count("forward") - 1
    assert main(["solve", str(out), "--solver", "single"]) == 0
    assert main(["import", str(tmp_path / "missing.onnx"), "-o", str(out)]) == 2
    assert "no such ONNX file" in capsys.readouterr().err
    assert main(["import", str(src), "-o", str(out), "--efficiency", "2"]) == 2
    assert "efficiency" in capsys.readouterr().err


def test_scoped_node_names_give_the_module_forward_backward_and_optimizer():
    """``torch.onnx.export`` names nodes ``/scope/.../Op``; those scopes become ``module``."""
    model = tiny_cnn()
    for nd, name in zip(model.graph.node, ["/features/conv/Conv", "/features/act/Relu", "/GlobalAveragePool",
                                           "flat", "/head/Gemm"]):
        nd.name = name
    p = from_onnx(model, training=True)
    module = {nid: m.get("module") for nid, m in zip(p.node_ids, p.node_meta)}
    assert module["/features/conv/Conv"] == "features.conv" and module["/head/Gemm"] == "head"
    assert module["grad./features/conv/Conv"] == "features.conv" and module["update.fc"] == "head"
    assert module["flat"] is None and module["/GlobalAveragePool"] is None  # no scope, no module
