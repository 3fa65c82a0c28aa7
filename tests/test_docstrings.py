"""Issue 27: every public function documents its parameters (a numpydoc ``Parameters`` section).

The rule (and the ast walk: nothing is imported) is the one of benchmarks/docstring_coverage.py.
``CHECKED`` lists the parts of optpart/ held to it so far; once every owner's files pass,
it becomes ``["optpart"]``.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("docstring_coverage", ROOT / "benchmarks" / "docstring_coverage.py")
coverage = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(coverage)

#: The model wing, its formats (not the torch importers), the bench library (not its plots),
#: and the modules of the public API.
CHECKED = [
    "optpart/model", "optpart/problem.py", "optpart/memory.py", "optpart/devices.py", "optpart/paths.py",
    "optpart/units.py", "optpart/limits.py", "optpart/fit.py", "optpart/generators", "optpart/progress.py",
    "optpart/text.py", "optpart/api.py", "optpart/__init__.py",
    "optpart/solvers/registry.py", "optpart/solvers/spec.py", "optpart/solvers/base.py",
    *(f"optpart/formats/{m}.py" for m in ("__init__", "_io", "costmodel", "dnn_partitioning", "networkx_io",
                                          "npz", "onnx_import", "optpart_json", "stg")),
    *(f"optpart/bench/{m}.py" for m in ("__init__", "db", "executors", "report", "sweep")),
]


@pytest.mark.parametrize("path", CHECKED)
def test_public_functions_document_their_parameters(path):
    assert (ROOT / path).exists(), f"{path} is gone: update CHECKED"
    missing = coverage.undocumented([path], ROOT)
    assert not missing, f"{len(missing)} public function(s) without a numpydoc Parameters section:\n" + \
        "\n".join(missing)


def test_the_rule_sees_functions_methods_and_exemptions(tmp_path):
    (tmp_path / "m.py").write_text(
        'def f(x):\n    """No section."""\n\n'
        'def g(x):\n    """Doc.\n\n    Parameters\n    ----------\n    x : int\n        A value.\n    """\n\n'
        'def h():\n    pass\n\n'
        'def _private(x):\n    pass\n\n'
        'class C:\n    def m(self, y):\n        pass\n\n    def n(self):\n        pass\n\n'
        'class _Hidden:\n    def m(self, y):\n        pass\n')
    assert coverage.undocumented(["m.py"], tmp_path) == ["m.py:1: f", "m.py:20: C.m"]
