"""Every public function documents its parameters and its result (numpydoc).

The rule (and the ast walk: nothing is imported) is the one of benchmarks/docstring_coverage.py:
a ``Parameters`` section naming every parameter, a ``Returns`` (``Yields``) section when a value
comes back, inherited docstrings for overriding methods, shared entries (``%(name)s`` lines of
``optpart._docstrings.PARAMS``) only under ``fill_doc``. ``CHECKED`` holds the whole package:
every public function and method of optpart/ must pass, so a new one that does not fails here.
"""

from __future__ import annotations

import importlib.util
import inspect

import pytest

from conftest import ROOT

from optpart._docstrings import PARAMS, expand, fill_doc

_spec = importlib.util.spec_from_file_location("docstring_coverage", ROOT / "benchmarks" / "docstring_coverage.py")
coverage = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(coverage)

#: The whole package (benchmarks/docstring_coverage.py walks every module under it).
CHECKED = ["optpart"]


@pytest.mark.parametrize("path", CHECKED)
def test_public_functions_document_their_parameters_and_results(path):
    assert (ROOT / path).exists(), f"{path} is gone: update CHECKED"
    assert len(coverage.public_functions([path], ROOT)) > 400  # the walk really reaches the package
    missing = coverage.undocumented([path], ROOT)
    assert not missing, f"{len(missing)} public function(s) fail the docstring rule:\n" + "\n".join(missing)


def test_the_rule_sees_functions_methods_and_exemptions(tmp_path):
    (tmp_path / "m.py").write_text(
        'def f(x):\n    """No section."""\n\n'
        'def g(x):\n    """Doc.\n\n    Parameters\n    ----------\n    x : int\n        A value.\n    """\n\n'
        'def h():\n    pass\n\n'
        'def _private(x):\n    pass\n\n'
        'class C:\n    def m(self, y):\n        pass\n\n    def n(self):\n        pass\n\n'
        'class _Hidden:\n    def m(self, y):\n        pass\n')
    assert coverage.undocumented(["m.py"], tmp_path) == ["m.py:1: f (no Parameters section)",
                                                         "m.py:20: C.m (no Parameters section)"]


def test_the_rule_wants_every_parameter_and_the_result(tmp_path):
    (tmp_path / "m.py").write_text(
        'def f(a, b, *rest, **extra) -> int:\n    """Doc.\n\n    Parameters\n    ----------\n'
        '    a : int\n        A.\n    rest : tuple\n        More.\n    """\n\n'
        'def g(a, b):\n    """Doc.\n\n    Parameters\n    ----------\n    a, b : int\n        Two.\n    """\n'
        '    return a + b\n\n'
        'def h(a) -> None:\n    """Doc.\n\n    Parameters\n    ----------\n    a : int\n        A.\n    """\n'
        '    return None\n\n'
        'def gen(a):\n    """Doc.\n\n    Parameters\n    ----------\n    a : int\n        A.\n    """\n'
        '    yield a\n')
    assert coverage.undocumented(["m.py"], tmp_path) == [
        "m.py:1: f (Parameters lack b, extra; no Returns section)",
        "m.py:12: g (no Returns section)",
        "m.py:32: gen (no Yields section)"]


def test_overrides_inherit_and_shared_entries_need_fill_doc(tmp_path):
    (tmp_path / "optpart").mkdir()
    (tmp_path / "optpart" / "_docstrings.py").write_text('PARAMS = {"v": "v : int\\n    Node index."}\n')
    (tmp_path / "optpart" / "m.py").write_text(
        'class Base:\n    def run(self, v) -> int:\n        """Doc.\n\n        Parameters\n        ----------\n'
        '        %(v)s\n\n        Returns\n        -------\n        int\n        """\n\n'
        'class Child(Base):\n    def run(self, v) -> int:\n        return v\n\n'
        '@fill_doc\ndef ok(v):\n    """Doc.\n\n    Parameters\n    ----------\n    %(v)s\n    """\n\n'
        '@fill_doc\ndef typo(v):\n    """Doc.\n\n    Parameters\n    ----------\n    %(w)s\n    """\n')
    assert coverage.undocumented(["optpart/m.py"], tmp_path) == [
        "optpart/m.py:2: Base.run (placeholders without fill_doc)",
        "optpart/m.py:15: Child.run (placeholders without fill_doc)",  # inherits the base's docstring
        "optpart/m.py:28: typo (unknown placeholder %(w)s; Parameters lack v)"]


def test_fill_doc_writes_the_entries_in_at_the_lines_indent():
    @fill_doc
    def f(v):
        """Doc.

        Parameters
        ----------
        %(v)s
        """

    assert "        v : int\n            Node index." in f.__doc__
    assert inspect.getdoc(f).endswith("Parameters\n----------\nv : int\n    Node index.")
    assert set(PARAMS) >= {"g", "v", "node_slot"}
    with pytest.raises(KeyError, match="names no entry"):
        expand("    %(no_such_entry)s\n")
