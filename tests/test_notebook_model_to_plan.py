"""The model-to-plan notebook runs top to bottom: a Hugging Face model imported, placed, shown per module."""

from __future__ import annotations

import json
import sys

import pytest

from conftest import ROOT

NOTEBOOK = ROOT / "notebooks" / "from_model_to_plan.ipynb"

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
for _module in ("ipykernel", "matplotlib", "pandas", "torch", "transformers"):
    pytest.importorskip(_module)


@pytest.mark.slow
def test_model_to_plan_notebook_runs_and_checks_itself(tmp_path, monkeypatch):
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
    client.execute()  # raises CellExecutionError when a cell fails (the notebook asserts its own claims)
    outputs = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]
    text = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
    assert "traced with fake tensors" in text and "status feasible" in text
    assert "placement per module checked: every GPT2Block on one device" in text
    assert "figures checked: titles, axis labels and legends present" in text
    assert any("image/png" in o.get("data", {}) for o in outputs)
