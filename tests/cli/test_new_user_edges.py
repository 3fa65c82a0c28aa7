"""What a new user meets on the command line: hardware named, figures under the model in force,
numbers for people, defaults said, units required, one-line errors, README commands that parse."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

import optpart
from optpart.cli import build_parser, main
from optpart.cli.show import block_depth
from optpart.formats.costmodel import CostModel

ROOT = Path(__file__).resolve().parents[2]
INSTANCES = ROOT / "instances"
MLP4 = INSTANCES / "small" / "mlp4-torch-training.json"  # imported from PyTorch: FLOPs and bytes per node


def _cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def _one_line(err: str, *words: str) -> None:
    assert err.count("\n") == 1 and err.startswith("optpart: "), err
    for w in words:
        assert w in err, (w, err)


@pytest.fixture
def split_problem(tmp_path) -> Path:
    """Two devices, a graph whose static sums exceed what liveness needs, modules at depth 3."""
    nodes = [{"id": f"n{i}", "time": 1e-3, "param_bytes": 0, "output_bytes": 600, "temp_bytes": 0,
              "module": f"transformer.h.{i % 2}.mlp", "flops": 0} for i in range(6)]
    edges = [{"src": f"n{i}", "dst": f"n{i + 1}", "bytes": 600} for i in range(5)]
    p = optpart.Problem.build(nodes=nodes, edges=edges, devices=[{"id": "gpu0", "memory": 2000},
                                                                {"id": "gpu1", "memory": 2000}],
                              links={"latency": 1e-5, "bandwidth": 25e9}, name="split")
    path = tmp_path / "split.json"
    optpart.save(p, path)
    return path


# ---------------------------------------------------------------------- hardware named
def test_solve_on_named_hardware_says_so_and_evaluate_prices_the_file_the_same_way(capsys, tmp_path):
    out = tmp_path / "r.json"
    code, text, _ = _cli(capsys, "solve", MLP4, "--device-type", "A100-80GB", "--dtype", "bf16", "--devices", "2",
                         "-o", out)
    assert code == 0
    assert "costs     A100-80GB bf16: 312 TFLOP/s at 50%, 2.039 TB/s; links 300 GB/s, 10 us (nvlink3)" in text
    assert re.search(r"gpu0 .* 80 GiB", text)
    doc = json.loads(out.read_text())
    assert doc["options"]["device_type"] == "A100-80GB" and doc["options"]["dtype"] == "bf16"
    # The problem file is priced for a V100 at fp32; the result records the hardware, so evaluate
    # re-prices the file and finds every claim true.
    code, text, err = _cli(capsys, "evaluate", MLP4, out)
    assert code == 0 and "verdict   valid" in text and "A100-80GB bf16" in text, err
    code, text, _ = _cli(capsys, "solve", MLP4, "--devices", "2", "--memory", "80GiB")
    assert code == 0 and "costs     V100 fp32 (the default): 15.7 TFLOP/s at 50%, 900 GB/s" in text


def test_named_hardware_makes_compute_faster_and_links_of_its_kind(capsys):
    v100 = optpart.load(MLP4)
    from optpart.hardware import with_hardware

    h100 = with_hardware(v100, "H100-SXM", dtype="bf16")
    assert h100.time.sum() < v100.time.sum() and h100.links.bandwidth == 450e9
    assert (h100.time <= v100.time).all()  # every roofline term shrinks on the faster part
    code, text, _ = _cli(capsys, "info", MLP4, "--device-type", "H100-SXM", "--dtype", "bf16")
    assert code == 0 and "H100-SXM bf16" in text and "4 (80 GiB)" in text and "450 GB/s, 10 us (nvlink4)" in text


def test_import_on_named_hardware_writes_the_profile_and_notes_the_dtype(capsys, tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "mlp.json"
    code, text, err = _cli(capsys, "import", f"{ROOT / 'examples' / 'zoo.py'}:mlp", "-o", out, "--device-type",
                           "RTX4090", "--dtype", "bf16", "--devices", "4")
    assert code == 0, err
    p = optpart.load(out)
    assert p.meta["cost_model"]["hardware"] == "RTX4090 bf16" and p.meta["cost_model"]["peak_flops"] == 165.2e12
    assert p.device_memory.tolist() == [24 * 2**30] * 4 and p.links.bandwidth == 32e9
    assert "costs: RTX4090 bf16" in text and "4 x 24 GiB" in text and re.search(r"\d+(\.\d+)? [kMGT]?FLOP,", text)
    assert "e+" not in text and "note: the model's parameters are 32-bit" in err


# ---------------------------------------------------------------------- what is shown
def test_memory_is_shown_under_the_model_in_force_and_the_other_is_labelled(capsys, split_problem):
    code, text, _ = _cli(capsys, "solve", split_problem, "-s", "heft")
    assert code == 0
    header = next(line for line in text.splitlines() if line.startswith("device"))
    assert "peak mem" in header and "static" not in header  # only the checked figure beside the capacity
    other = next(line for line in text.splitlines() if line.startswith("static model"))
    assert "not the one in force" in other and "gpu0" in other
    code, text, _ = _cli(capsys, "solve", split_problem, "-s", "heft", "--memory-model", "static", "--memory", "4KiB")
    header = next(line for line in text.splitlines() if line.startswith("device"))
    assert code == 0 and "static mem" in header and "peak" not in header


def test_numbers_read_as_people_write_them(capsys, split_problem):
    code, text, _ = _cli(capsys, "solve", split_problem, "-s", "single", "--devices", "1", "--memory", "1MiB")
    assert code == 0 and "1 device\n" in text and "6 nodes, 5 edges, 1 device" in text
    assert re.search(r"time      \d+(\.\d+)? (s|ms|us) \(wall", text)
    assert not re.search(r"\d\.\d{4,} ", text)  # no 3.11024 s
    code, text, _ = _cli(capsys, "fit", split_problem, "--memory", "1MiB")
    assert re.search(r"\), (1 solve|[02-9]\d* solves)\n", text)
    assert optpart.units.format_time(3.11024) == "3.11 s"


def test_fit_never_prints_a_proven_answer_beside_unknown(capsys, split_problem):
    code, text, err = _cli(capsys, "fit", split_problem, "--memory", "100B")
    assert code == 1
    assert "devices      none: no number of 100 B devices fits (proven for any placement)" in text
    _one_line(err, "optpart: infeasible:", "needs")
    assert "unknown" not in err and "unknown" not in text


def test_show_cuts_at_the_depth_of_the_repeated_blocks(capsys, split_problem, tmp_path):
    out = tmp_path / "r.json"
    assert _cli(capsys, "solve", split_problem, "-o", out)[0] == 0
    code, text, _ = _cli(capsys, "show", out, "--problem", split_problem)
    assert code == 0 and "transformer.h.0 " in text and "transformer.h.1 " in text and "modules cut at depth 3" in text
    assert block_depth(optpart.Problem.build(nodes=[{"id": "a", "time": 1, "memory": 1, "module": "model.layers.11.mlp"},
                                                    {"id": "b", "time": 1, "memory": 1, "module": "lm_head"}])) == 3
    assert block_depth(optpart.Problem.build(nodes=[{"id": "a", "time": 1, "memory": 1, "module": "fc"}])) == 2


# ---------------------------------------------------------------------- defaults said, units required
def test_help_states_the_solvers_own_time_limits(capsys):
    with pytest.raises(SystemExit):
        main(["solve", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "cpsat 60 s" in text and "milp 60 s" in text
    assert "default: the count the file records" in text  # --micro-batches
    code, text, _ = _cli(capsys, "solvers", "cpsat")
    assert code == 0 and "time limit: 60 s unless --time-limit" in text


@pytest.mark.parametrize("argv, words", [
    (["solve", MLP4, "--latency", "10"], ["--latency 10", "unit", "10us"]),
    (["import", "x.onnx", "-o", "y.json", "--link-latency", "5"], ["--link-latency 5", "unit"]),
    (["solve", MLP4, "--device-type", "H1000"], ["--device-type 'H1000'", "H100-SXM"]),
    (["solve", MLP4, "--dtype", "bf16"], ["--dtype bf16", "--device-type"]),
])
def test_bad_values_are_one_line_errors(capsys, argv, words):
    code, _, err = _cli(capsys, *argv)
    assert code == 2
    _one_line(err, *words)


def test_a_time_limit_without_a_unit_is_refused(capsys):
    with pytest.raises(SystemExit) as info:
        main(["solve", str(MLP4), "--time-limit", "60"])
    err = capsys.readouterr().err
    assert info.value.code == 2 and err.count("\n") == 1 and "'60' needs a unit: write 60s" in err


# ---------------------------------------------------------------------- clear errors
def test_plot_to_an_unknown_image_type_is_bad_input(capsys, split_problem, tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "r.json"
    assert _cli(capsys, "solve", split_problem, "-o", out)[0] == 0
    code, _, err = _cli(capsys, "plot", out, "--problem", split_problem, "-o", tmp_path / "x.bmpx")
    assert code == 2
    _one_line(err, "x.bmpx", "png", "svg")


def test_import_of_a_python_file_without_its_function_asks_for_it(capsys, tmp_path):
    script = tmp_path / "raising.py"
    script.write_text("raise SystemExit('must not run')\n")
    code, _, err = _cli(capsys, "import", script, "-o", tmp_path / "p.json")
    assert code == 2
    _one_line(err, f"{script}:FUNCTION", "(module, example inputs)")


def test_a_missing_package_names_the_extra_that_installs_it(capsys, tmp_path):
    script = tmp_path / "needs_hf.py"
    script.write_text("def model():\n    raise ModuleNotFoundError(\"No module named 'transformers'\", "
                      "name='transformers')\n")
    code, _, err = _cli(capsys, "import", f"{script}:model", "-o", tmp_path / "p.json")
    assert code == 2
    _one_line(err, "transformers is not installed", "optpart[hf]")


def test_evaluate_against_another_problem_names_the_one_the_result_is_for(capsys, split_problem, tmp_path):
    out = tmp_path / "r.json"
    assert _cli(capsys, "solve", split_problem, "-o", out)[0] == 0
    other = tmp_path / "other.json"
    optpart.save(optpart.load(split_problem).with_name("another"), other)
    code, _, err = _cli(capsys, "evaluate", other, out)
    assert "is a result for problem 'split'" in err and "holds 'another'" in err


def test_zoo_without_torch_says_which_extras_to_install():
    blocker = ("import sys, runpy\n"
               "class Block:\n"
               "    def find_spec(self, name, path=None, target=None):\n"
               "        if name.split('.')[0] in ('torch', 'onnx'):\n"
               "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
               "sys.meta_path.insert(0, Block())\n"
               f"sys.argv = ['zoo.py', 'model.onnx']\n"
               f"runpy.run_path({str(ROOT / 'examples' / 'zoo.py')!r}, run_name='__main__')\n")
    proc = subprocess.run([sys.executable, "-c", blocker], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1, proc.stderr
    assert "pip install -e \".[torch,onnx]\"" in proc.stderr and "Traceback" not in proc.stderr


# ---------------------------------------------------------------------- the README's commands
def _readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Use it", 1)[1].split("\n## ", 1)[0]
    commands, pending = [], ""
    for block in re.findall(r"```bash\n(.*?)```", section, flags=re.S):
        for line in block.splitlines():
            line = re.sub(r"\s+#.*$", "", line).strip()
            pending = (pending + " " + line.rstrip("\\")).strip() if pending or line else ""
            if line.endswith("\\"):
                continue
            for part in re.split(r"\s*&&\s*", pending):
                if part.startswith("optpart "):
                    commands.append(part)
            pending = ""
    return commands


def test_every_optpart_command_of_the_readme_use_it_section_parses():
    commands = _readme_commands()
    assert len(commands) > 15 and any("--device-type" in c for c in commands)
    parser = build_parser()
    for cmd in commands:
        try:
            args = parser.parse_args(shlex.split(cmd)[1:])
        except SystemExit:
            pytest.fail(f"the README command does not parse: {cmd}")
        assert args.func is not None, cmd
        latency = getattr(args, "latency", None)  # time limits are read with their unit by the parser
        assert latency is None or not re.fullmatch(r"[\d.]+", latency), cmd


def test_the_default_cost_model_is_named_as_the_default():
    assert CostModel().describe() == "V100 fp32 (the default): 15.7 TFLOP/s at 50%, 900 GB/s"


def test_a_result_on_another_link_is_judged_on_it_with_the_files_pins(capsys, tmp_path):
    p = optpart.Problem.build(nodes=[{"id": "a", "time": 1.0, "memory": 1}, {"id": "b", "time": 1.0, "memory": 1}],
                              edges=[{"src": "a", "dst": "b", "bytes": 10**9}],
                              devices=[{"id": "g0", "memory": 10}, {"id": "g1", "memory": 10}],
                              constraints={"pin": {"a": "g1"}}, links={"latency": 1e-5, "bandwidth": 25e9})
    path, out = tmp_path / "pinned.json", tmp_path / "r.json"
    optpart.save(p, path)
    code, text, _ = _cli(capsys, "solve", path, "--link", "nvlink4", "-s", "heft", "-o", out)
    assert code == 0 and "links 450 GB/s, 10 us (nvlink4)" in text
    code, text, err = _cli(capsys, "evaluate", path, out)
    assert code == 0 and "verdict   valid" in text and "nvlink4" in text, err
