"""The bundled instances: they load without torch or onnx, carry devices, match the README,
and the cheap ones regenerate byte for byte."""

from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pytest

import optpart

from conftest import INSTANCES, ROOT, budget

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
    assert p.infeasibility("peak") is None, rel  # capacities are sized for peak (instances/make.py)
    assert _readme_rows()[rel] == (p.n_nodes, p.n_edges)
    assert "cost_model" in p.meta
    if p.node_meta is not None and p.meta.get("source") in ("torch", "onnx"):
        phases = {m["phase"] for m in p.node_meta}
        assert phases == {"forward", "backward", "optimizer"}
        assert p.meta["total_flops"] == sum(m["flops"] for m in p.node_meta)
    size = re.search(r"-1e(\d)\.json", rel)
    if size:  # the scale family: about 10^k nodes
        assert abs(p.n_nodes - 10 ** int(size.group(1))) <= 0.05 * 10 ** int(size.group(1))


def test_gpt2_solves_from_the_cli_without_torch(tmp_path):
    """The committed file needs neither torch nor onnx: both are made unimportable. The result
    the CLI writes is then judged by the evaluator, not just its exit code."""
    out_file = tmp_path / "gpt2-result.json"
    code = ("import sys; sys.modules['torch'] = None; sys.modules['onnx'] = None\n"
            "from optpart.cli import main\n"
            "rc = main(['solve', sys.argv[1], '--solver', 'single', '--devices', '4', '--memory', '16GiB',"
            " '-o', sys.argv[2]])\n"
            "assert 'torch' not in [m for m in sys.modules if sys.modules[m] is not None]\n"
            "sys.exit(rc)\n")
    out = subprocess.run([sys.executable, "-c", code, str(INSTANCES / "gpt2-training.json"), str(out_file)],
                         capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "status    feasible" in out.stdout
    file_problem = optpart.load(INSTANCES / "gpt2-training.json")
    assert file_problem.n_devices == 4  # so --devices 4 keeps the file's device ids and speeds
    problem = file_problem.with_devices([optpart.Device(d.id, 16 * 2**30, d.speed) for d in file_problem.devices])
    result = optpart.load_result(out_file, problem)
    optpart.check(problem, result)
    assert result.memory_model == "peak" and set(result.placement.tolist()) == {0}
    assert result.makespan == pytest.approx(problem.time.sum() / problem.device_speed[0])


# ---------------------------------------------------------------- every instance x every solver
#: Instances solved by every solver: all bundled ones but the 1e5-node scale graph (minutes).
SOLVED = [p for p in MADE + [INSTANCES / "small" / "mlp6-training.json"] if "1e5" not in p.name]
BASELINES = ["heft", "etf", "topo", "metis", "single"]


def _problem(path):
    p = optpart.load(path)
    if p.n_devices == 0:  # mlp6 ships without devices: the README's 2 x 8 GiB
        p = p.with_devices(2, memory=8 * 2**30)
    return p


def _judge(problem, result, name):
    """Every result through the checker, under the model it reports."""
    assert result.memory_model in ("static", "peak")
    if result.ok:
        optpart.check(problem, result)
        assert optpart.model.memory.overflow_message(problem, result.placement, result.start, result.finish,
                                               result.memory_model) is None, name
    else:
        assert result.placement is None and result.message, name


@pytest.mark.parametrize("path", SOLVED, ids=lambda p: p.relative_to(INSTANCES).as_posix())
def test_every_solver_on_every_bundled_instance(path):
    problem = _problem(path)
    answers = {}
    for model in ("peak", "static"):
        for name in ["heuristic"] + [b for b in BASELINES if b in optpart.available_solvers()]:
            r = optpart.solve(problem, name, memory_model=model, seed=0)
            assert r.memory_model == model
            _judge(problem, r, name)
            answers[name, model] = r.ok
        # The heuristic answers wherever a baseline does (it is never worse at finding a fit).
        for name in BASELINES:
            if answers.get((name, model)):
                assert answers["heuristic", model], f"heuristic found nothing under {model} where {name} did"
    # The bundled capacities are made for the peak model (instances/make.py): the default solver fits.
    assert answers["heuristic", "peak"], "the default solver finds no peak-feasible placement on the file's devices"


@pytest.mark.parametrize("path", [INSTANCES / "small" / "mlp6-training.json",
                                  INSTANCES / "small" / "mlp4-torch-training.json"], ids=lambda p: p.name)
def test_cpsat_on_the_small_instances_with_a_deterministic_budget(path):
    """CP-SAT with a deterministic-time budget (no wall clock decides the outcome)."""
    problem = _problem(path)
    for model in ("peak", "static"):
        kw = dict(memory_model=model, **budget("cpsat", deterministic_time=2.0))
        r = optpart.solve(problem, "cpsat", **kw)
        _judge(problem, r, "cpsat")
        again = optpart.solve(problem, "cpsat", **kw)
        assert again.status == r.status and (not r.ok or again.makespan == r.makespan)


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


def _make():
    sys.path.insert(0, str(INSTANCES))
    try:
        import make
    finally:
        sys.path.remove(str(INSTANCES))
    return make


def test_round_capacity_rule():
    make = _make()
    mib, gib = 2**20, 2**30
    assert make.round_capacity(1.53 * gib) == 2 * gib  # 1.91 GiB -> the next 256 MiB step
    assert make.round_capacity(1.7 * gib) == int(2.25 * gib)  # 2.125 GiB -> 2.25 GiB
    assert make.round_capacity(706 * mib) == 896 * mib  # under 1 GiB: 64 MiB steps
    assert make.round_capacity(16.5 * mib) == 24 * mib  # under 64 MiB: 4 MiB steps
    for m in (1e6, 13e6, 3e8, 1.2e9, 7e9):
        assert make.HEADROOM * m <= make.round_capacity(m) < make.HEADROOM * m + 256 * mib
    # a module-granular plan's need raises the capacity to it, rounded up the same way ...
    assert make.round_capacity(1.53 * gib, 2.88 * gib) == 3 * gib
    assert make.round_capacity(1.53 * gib, 3 * gib) == 3 * gib
    # ... and never lowers it
    assert make.round_capacity(1.53 * gib, 1.0 * gib) == 2 * gib


@pytest.mark.parametrize("rel", sorted(_make().MIN_CAPACITY))
def test_traced_instances_follow_the_peak_rule_and_carry_modules(rel):
    """Capacity = the rule applied to the recorded minimum (and, for GPT-2, to the recorded
    need of its module-granular plan); one such device cannot hold the whole step under peak
    (memory binds); PyTorch-traced nodes name their module."""
    make = _make()
    p = optpart.load(INSTANCES / rel)
    assert p.n_devices == make.N_DEVICES
    need = make.MODULE_PLAN_NEED.get(rel, 0.0)
    assert set(p.device_memory.tolist()) == {float(make.round_capacity(make.MIN_CAPACITY[rel], need))}
    one = p.with_devices(1, memory=float(p.memory.sum()) + float(p.device_memory[0]))
    r = optpart.solve(one, "single", memory_model="static")
    peak = optpart.model.memory.peak_memory(one, r.placement, r.start, r.finish)
    assert float(peak.max()) > float(p.device_memory[0]), rel
    if p.meta.get("source") == "torch":
        assert all(isinstance(m.get("module"), str) and m.get("module_class") for m in p.node_meta), rel
        assert any("." in m["module"] for m in p.node_meta), rel  # nested paths, not only the root
