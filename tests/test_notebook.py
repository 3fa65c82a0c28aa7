"""The heuristic-quality notebook runs from top to bottom with a kernel of this interpreter."""

from __future__ import annotations

import json
import sys

import pytest

from conftest import ROOT

NOTEBOOK = ROOT / "notebooks" / "heuristic_quality.ipynb"

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")
pytest.importorskip("matplotlib")
pytest.importorskip("pandas")


@pytest.mark.slow
def test_notebook_runs_and_its_figures_are_labelled(tmp_path, monkeypatch):
    # A kernel spec pointing at this interpreter, so the notebook imports the optpart under test.
    spec = tmp_path / "kernels" / "optpart-test"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "optpart test", "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="optpart-test",
                                     resources={"metadata": {"path": str(NOTEBOOK.parent)}})
    client.execute()  # raises CellExecutionError when a cell fails
    outputs = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    text = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
    assert "solvers installed:" in text
    assert "figures checked: titles, axis labels and legends present" in text
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(images) >= 3  # small-graph bars, real-graph bars, gap boxes, Gantt chart
