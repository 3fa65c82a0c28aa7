"""The model-to-plan notebook runs top to bottom: a Hugging Face model imported, placed, shown per module."""

from __future__ import annotations

import pytest

from conftest import ROOT, execute_notebook

NOTEBOOK = ROOT / "notebooks" / "from_model_to_plan.ipynb"

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
for _module in ("ipykernel", "matplotlib", "pandas", "torch", "transformers"):
    pytest.importorskip(_module)


@pytest.mark.slow
def test_model_to_plan_notebook_runs_and_checks_itself(tmp_path, monkeypatch):
    outputs = execute_notebook(NOTEBOOK, tmp_path, monkeypatch)
    text = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
    assert "traced with fake tensors" in text and "status feasible" in text
    assert "placement per module checked: every GPT2Block on one device" in text
    assert "figures checked: titles, axis labels and legends present" in text
    assert sum("image/png" in o.get("data", {}) for o in outputs) == 1  # the Gantt chart, shown once
    assert not [o for o in outputs if o.get("name") == "stderr"]  # no TqdmWarning in an output cell
