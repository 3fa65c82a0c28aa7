"""Every time ``solve`` prints names how its plan runs: an operator placement that
``optpart.torch.apply`` runs for a step imported from PyTorch, no framework for other graphs."""

from __future__ import annotations

import optpart
from optpart.cli import main


def _runs_line(capsys) -> str:
    out = capsys.readouterr().out
    lines = [ln for ln in out.splitlines() if ln.startswith("runs ")]
    assert len(lines) == 1, out
    return lines[0]


def test_a_torch_step_names_the_runtime_and_another_graph_says_none(tmp_path, capsys):
    assert main(["solve", "instances/small/mlp6-training.json", "--solver", "heft", "--devices", "2",
                 "--memory", "8GiB"]) == 0
    assert "no framework runs this graph" in _runs_line(capsys)
    torch_step = optpart.Problem.build(
        nodes=[{"id": "a", "time": 1.0, "memory": 1}, {"id": "b", "time": 1.0, "memory": 1}],
        edges=[{"src": "a", "dst": "b", "bytes": 8}], devices=[{"id": "d0", "memory": 100}],
        meta={"source": "torch"})
    path = tmp_path / "torch.json"
    optpart.save(torch_step, path)
    assert main(["solve", str(path), "--solver", "heft"]) == 0
    line = _runs_line(capsys)
    assert "optpart.torch.apply" in line and "no framework" not in line
