"""The bundled instances: they load without torch or onnx, carry devices, match the README,
and the cheap ones regenerate byte for byte."""

from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pytest

import optpart

from conftest import INSTANCES, ROOT

MADE = sorted(p for p in INSTANCES.rglob("*.json*")
              if p.name != "mlp6-training.json" and not p.name.endswith("-1m.json.gz"))


def _readme_rows() -> dict[str, tuple[int, int]]:
    rows = {}
    for line in (INSTANCES / "README.md").read_text().splitlines():
        m = re.match(r"^\| `([^`]+)` \|[^|]*\| (\d+) \| (\d+) \|", line)
        if m:
            rows[m.group(1)] = (int(m.group(2)), int(m.group(3)))
    return rows


def test_instances_exist():
    names = {p.relative_to(INSTANCES).as_posix() for p in MADE}
    for expected in ("gpt2-training.json", "gpt2xl-training.json.gz", "resnet50-training.json",
                     "vit-b16-training.json", "lstm-lm-training.json", "densenet121-training.json",
                     "scale/transformer-1e4.json.gz", "scale/transformer-1e5.json.gz"):
        assert expected in names


@pytest.mark.parametrize("path", MADE, ids=lambda p: p.relative_to(INSTANCES).as_posix())
def test_instance_loads_with_devices_and_matches_readme(path):
    rel = path.relative_to(INSTANCES).as_posix()
    p = optpart.load(path)
    assert p.n_devices >= 2 and p.links is not None and np.isfinite(p.device_memory).all()
    assert p.infeasibility() is None, rel
    assert _readme_rows()[rel] == (p.n_nodes, p.n_edges)
    assert "cost_model" in p.meta
    if p.node_meta is not None and p.meta.get("source") in ("torch", "onnx"):
        phases = {m["phase"] for m in p.node_meta}
        assert phases == {"forward", "backward", "optimizer"}
        assert p.meta["total_flops"] == sum(m["flops"] for m in p.node_meta)
    size = re.search(r"-1e(\d)\.json", rel)
    if size:  # the scale family: about 10^k nodes
        assert abs(p.n_nodes - 10 ** int(size.group(1))) <= 0.05 * 10 ** int(size.group(1))


def test_gpt2_solves_from_the_cli_without_torch():
    """The committed file needs neither torch nor onnx: both are made unimportable."""
    code = ("import sys; sys.modules['torch'] = None; sys.modules['onnx'] = None\n"
            "from optpart.cli import main\n"
            "rc = main(['solve', sys.argv[1], '--solver', 'single', '--devices', '4', '--memory', '16GiB'])\n"
            "assert 'torch' not in [m for m in sys.modules if sys.modules[m] is not None]\n"
            "sys.exit(rc)\n")
    out = subprocess.run([sys.executable, "-c", code, str(INSTANCES / "gpt2-training.json")],
                         capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "status    feasible" in out.stdout


def test_device_flags_override_the_file():
    from optpart.cli import main

    assert main(["info", str(INSTANCES / "small" / "squeezenet-training.json"), "--devices", "3",
                 "--memory", "1GiB"]) == 0


def test_cheap_instances_regenerate_byte_identically(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("onnx")
    sys.path.insert(0, str(INSTANCES))
    try:
        import make
    finally:
        sys.path.remove(str(INSTANCES))
    if make._onnx_light("densenet121") is None:
        pytest.skip("the onnx wheel ships no light models")
    for rel in make.CHEAP:
        make.write(rel, tmp_path)
        assert (tmp_path / rel).read_bytes() == (INSTANCES / rel).read_bytes(), rel


def test_scale_graph_is_a_valid_training_graph():
    sys.path.insert(0, str(INSTANCES))
    try:
        import make
    finally:
        sys.path.remove(str(INSTANCES))
    p = make.suggest_devices(make.scale_graph(2000))
    assert abs(p.n_nodes - 2000) <= 100
    result = optpart.solve(p.with_devices(1, memory=float(p.memory.sum())), "single")
    optpart.check(p.with_devices(1, memory=float(p.memory.sum())), result)
    again = make.scale_graph(2000)
    assert np.array_equal(again.time, make.scale_graph(2000).time)
