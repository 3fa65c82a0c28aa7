"""The test suite's own rules, checked on its source so that they cannot silently lapse.

* Every hypothesis property takes its example count from the loaded profile: a test that sets
  ``max_examples`` does so through ``strategies.examples(n)``, which ``HYPOTHESIS_PROFILE=thorough``
  enlarges; a literal count would pin it.
* No test swallows errors: no ``except Exception``, ``except BaseException`` or bare ``except:``
  in a test file's own logic (two identical crashes must never compare equal, nor a crash pass).
* Every expected failure is strict and names the exception it expects (``raises=``), so a fix
  turns it into a failure to be removed and another error is not taken for the known one.
* The suite is laid out by package part: ``tests/<part>/test_<concept>.py``, no ``__init__.py``,
  every file's basename unique across the tree (pytest imports them by basename), and no test
  file imports another test file: shared helpers live in ``conftest.py`` or a helper module.
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

import pytest

SUITE = Path(__file__).resolve().parents[1]
TESTS = sorted(SUITE.rglob("*.py"))


def _calls(tree: ast.AST, name: str):
    """Calls to ``name`` or ``anything.name`` in ``tree``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            if (isinstance(f, ast.Name) and f.id == name) or (isinstance(f, ast.Attribute) and f.attr == name):
                yield node


def _broken(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for call in _calls(tree, "settings"):
        for kw in call.keywords:
            if kw.arg == "max_examples" and not (isinstance(kw.value, ast.Call)
                                                 and getattr(kw.value.func, "id", None) == "examples"):
                found.append(f"{path.name}:{call.lineno}: max_examples not from strategies.examples()")
    for node in ast.walk(tree):
        if isinstance(node, ast.ExceptHandler):
            names = [node.type] if not isinstance(node.type, ast.Tuple) else list(node.type.elts)
            if node.type is None or any(getattr(n, "id", None) in ("Exception", "BaseException") for n in names):
                found.append(f"{path.name}:{node.lineno}: catches every exception")
    for call in _calls(tree, "xfail"):
        kws = {kw.arg: kw.value for kw in call.keywords}
        strict = kws.get("strict")
        if "raises" not in kws or not (isinstance(strict, ast.Constant) and strict.value is True):
            found.append(f"{path.name}:{call.lineno}: xfail without raises= and strict=True")
    for node in ast.walk(tree):
        names = ([node.module or ""] if isinstance(node, ast.ImportFrom)
                 else [a.name for a in node.names] if isinstance(node, ast.Import) else [])
        for name in names:
            if name.split(".")[0].startswith("test_") or name.startswith("tests."):
                found.append(f"{path.name}:{node.lineno}: imports the test file {name}")
    return found


def test_the_suite_keeps_its_rules():
    assert len(TESTS) > 40  # the glob found the suite
    found = [line for path in TESTS if path.name != Path(__file__).name for line in _broken(path)]
    assert not found, "\n".join(found)


def test_the_suite_is_laid_out_by_package_part():
    assert not [p for p in TESTS if p.name == "__init__.py"]
    names = Counter(p.name for p in TESTS)
    twins = sorted(str(p.relative_to(SUITE)) for p in TESTS if names[p.name] > 1)
    assert not twins, twins
    flat = [p.name for p in TESTS if p.parent == SUITE and p.name.startswith("test_")]
    assert not flat, flat


@pytest.mark.parametrize("source, needle", [
    ("from hypothesis import settings\n@settings(max_examples=60)\ndef test_x():\n    pass\n", "max_examples"),
    ("def test_x():\n    try:\n        f()\n    except Exception:\n        pass\n", "catches every"),
    ("def test_x():\n    try:\n        f()\n    except:\n        pass\n", "catches every"),
    ("import pytest\n@pytest.mark.xfail(strict=True)\ndef test_x():\n    pass\n", "xfail"),
    ("import pytest\n@pytest.mark.xfail(raises=ValueError)\ndef test_x():\n    pass\n", "xfail"),
    ("from test_apply import plan\n", "imports the test file"),
    ("def test_x():\n    import test_cli\n", "imports the test file"),
])
def test_each_rule_catches_its_breach(tmp_path, source, needle):
    bad = tmp_path / "test_bad.py"
    bad.write_text(source)
    assert any(needle in line for line in _broken(bad))
    good = tmp_path / "test_good.py"
    good.write_text("import pytest\nfrom strategies import examples\nfrom hypothesis import settings\n"
                    "@settings(max_examples=examples(5))\n"
                    "@pytest.mark.xfail(raises=ValueError, strict=True)\ndef test_x():\n"
                    "    try:\n        f()\n    except KeyError:\n        pass\n")
    assert _broken(good) == []
