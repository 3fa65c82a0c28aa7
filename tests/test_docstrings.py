"""Issue 27: every public function documents its parameters (a numpydoc ``Parameters`` section).

The rule (and the ast walk: nothing is imported) is the one of benchmarks/docstring_coverage.py.
``CHECKED`` holds the whole package: every public function and method of optpart/ must pass,
so a new one without a Parameters section fails here.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("docstring_coverage", ROOT / "benchmarks" / "docstring_coverage.py")
coverage = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(coverage)

#: The whole package (benchmarks/docstring_coverage.py walks every module under it).
CHECKED = ["optpart"]


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
