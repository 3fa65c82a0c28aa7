"""The heuristic-quality notebook runs from top to bottom with a kernel of this interpreter."""

from __future__ import annotations


import pytest

from conftest import ROOT, execute_notebook

NOTEBOOK = ROOT / "notebooks" / "heuristic_quality.ipynb"

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")
pytest.importorskip("matplotlib")
pytest.importorskip("pandas")


@pytest.mark.slow
def test_notebook_runs_and_its_figures_are_labelled(tmp_path, monkeypatch):
    outputs = execute_notebook(NOTEBOOK, tmp_path, monkeypatch)
    assert not [o for o in outputs if o.get("output_type") == "error"]
    text = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
    assert "solvers installed:" in text
    assert "figures checked: titles, axis labels and legends present" in text
    assert "round-robin:" in text  # a registered placer compared on the same evaluator
    assert not [o for o in outputs if o.get("name") == "stderr"]  # no warning lands in an output cell
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(images) >= 3  # small-graph bars, real-graph bars, gap boxes, Gantt chart
