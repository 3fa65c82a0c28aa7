"""The package's floors: which part of optpart may import which.

Every ``import`` and ``from ... import`` of every module under ``optpart/`` is read with
:mod:`ast` (imports inside functions, the lazy ones, included) and resolved to the
``optpart`` module it names. The rules:

* ``optpart.model`` imports only ``errors``, ``units``, ``limits`` and itself;
* ``optpart.schedule`` imports no solver, evaluator or format;
* ``optpart.solvers`` imports no format, CLI, bench, export or torch module; within it the
  groups are floors too: ``baselines`` imports neither ``exact`` nor ``heuristic``, and
  ``heuristic`` imports no ``exact`` module (the exact solvers start from the heuristic);
* outside ``optpart.solvers`` a library module reaches the solvers through the registry (it
  imports only ``optpart.solvers``, its ``registry``, ``spec`` and ``base``);
* ``optpart.formats`` imports no solver;
* no library module imports the CLI (``optpart.cli`` is the shell over the library);
* the imports form no circle, lazy ones included (a package's ``__init__`` re-exporting
  its own submodules is not a circle; imports under ``if TYPE_CHECKING:`` never run and
  are left out).

An edge that breaks a rule today and is owned by another branch is listed, with the
reason, in :data:`ALLOWED`; the list is meant to shrink to nothing.

And modules are concept-sized: a module over :data:`LONG_MODULE_LINES` lines is reported (it
should be one concept, not two glued together), one over :data:`MAX_MODULE_LINES` fails.
"""

from __future__ import annotations

import ast
from pathlib import Path
from conftest import ROOT as REPO

ROOT = REPO / "optpart"

#: ``(importer prefix, imported prefix)`` pairs a rule forbids.
FORBIDDEN: list[tuple[str, tuple[str, ...]]] = [
    ("optpart.schedule", ("optpart.solvers", "optpart.evaluate", "optpart.formats")),
    ("optpart.solvers", ("optpart.formats", "optpart.cli", "optpart.bench", "optpart.export", "optpart.torch")),
    ("optpart.formats", ("optpart.solvers",)),
    ("optpart.solvers.baselines", ("optpart.solvers.exact", "optpart.solvers.heuristic")),
    ("optpart.solvers.heuristic", ("optpart.solvers.exact",)),
]
#: What a library module outside ``optpart.solvers`` may import of it.
SOLVERS_FRONT = ("optpart.solvers", "optpart.solvers.registry", "optpart.solvers.spec", "optpart.solvers.base")
#: What ``optpart.model`` may import besides itself.
MODEL_MAY_IMPORT = ("optpart.errors", "optpart.units", "optpart.limits")

#: Known violations, each ``(importer, imported)``: an explicit, commented allow-list.
ALLOWED: set[tuple[str, str]] = set()
#: Lazy edges left out of the circle search, each commented.
CIRCLE_ALLOWED: set[tuple[str, str]] = set()
#: Modules longer than this are reported (a module may exceed it when it is one concept).
LONG_MODULE_LINES = 500
#: The most lines any module may have, one concept or not.
MAX_MODULE_LINES = 1000


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> list[tuple[str, int, bool]]:
    """``(imported optpart module, line, at module level)`` for every import in ``path``."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    top = {id(node) for node in tree.body}
    typing_only: set[int] = set()
    for node in tree.body:  # imports under a module-level ``if``/``try`` still run at import time
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            typing_only.update(id(n) for n in ast.walk(node))  # annotations only: never run
        elif isinstance(node, (ast.If, ast.Try)):
            top.update(id(n) for n in ast.walk(node))
    out = []
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            # ``from . import x`` may import the submodule ``x``: count both.
            targets = [mod] + [f"{mod}.{a.name}" for a in node.names]
        else:
            continue
        for t in targets:
            if t == "optpart" or t.startswith("optpart."):
                out.append((t, node.lineno, id(node) in top))
    return out


def _existing(mod: str, modules: set[str]) -> str | None:
    """The longest known module that ``mod`` names (``optpart.model.devices.Device`` -> the module)."""
    while mod and mod not in modules:
        mod = mod.rpartition(".")[0]
    return mod or None


def _graph() -> tuple[dict[str, list[tuple[str, int, bool]]], set[str]]:
    files = sorted(ROOT.rglob("*.py"))
    modules = {_module_name(f) for f in files}
    graph = {}
    for f in files:
        edges = []
        for target, line, at_top in _imports(f):
            mod = _existing(target, modules)
            if mod and mod != _module_name(f):
                edges.append((mod, line, at_top))
        graph[_module_name(f)] = edges
    return graph, modules


def _under(mod: str, prefix: str) -> bool:
    return mod == prefix or mod.startswith(prefix + ".")


def test_layers_hold() -> None:
    graph, _ = _graph()
    bad = []
    for src, edges in graph.items():
        for dst, line, _ in edges:
            if (src, dst) in ALLOWED:
                continue
            if _under(src, "optpart.model") and not (_under(dst, "optpart.model")
                                                     or any(_under(dst, m) for m in MODEL_MAY_IMPORT)):
                bad.append(f"{src}:{line} imports {dst} (model/ may import only errors, units, limits)")
            for importer, banned in FORBIDDEN:
                if _under(src, importer) and any(_under(dst, b) for b in banned):
                    bad.append(f"{src}:{line} imports {dst} ({importer} may not import {', '.join(banned)})")
            if not _under(src, "optpart.cli") and src != "optpart.__main__" and _under(dst, "optpart.cli"):
                bad.append(f"{src}:{line} imports {dst} (library code may not import the CLI)")
            if not _under(src, "optpart.solvers") and _under(dst, "optpart.solvers") and dst not in SOLVERS_FRONT:
                bad.append(f"{src}:{line} imports {dst} (outside solvers/, go through the registry)")
    assert not bad, "import layers broken:\n" + "\n".join(bad)


def test_no_import_circle() -> None:
    """No circle among module-level imports, nor through lazy ones (a lazy import that
    closes a circle hides it from Python but not from the reader)."""
    graph, _ = _graph()

    def parent_package(src: str, dst: str) -> bool:
        # A module importing its own package (``from . import x`` inside ``pkg/x.py``'s
        # siblings) reaches ``pkg/__init__``, which re-exports the siblings: not a design circle.
        return src.startswith(dst + ".")

    adj = {src: sorted({d for d, _, _ in edges if not parent_package(src, d) and (src, d) not in CIRCLE_ALLOWED}) for src, edges in graph.items()}
    state: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        state[v] = 1
        stack.append(v)
        for w in adj.get(v, ()):
            if state.get(w, 0) == 0:
                visit(w)
            elif state[w] == 1:
                cycles.append(stack[stack.index(w):] + [w])
        stack.pop()
        state[v] = 2

    for v in sorted(adj):
        if state.get(v, 0) == 0:
            visit(v)
    assert not cycles, "import circles:\n" + "\n".join(" -> ".join(c) for c in cycles[:10])


def test_the_checker_sees_lazy_and_relative_imports(tmp_path) -> None:
    """The parser resolves ``from ..x import y`` inside a function to ``optpart.x`` (a
    checker that missed lazy imports would pass on a circle closed by a lazy import)."""
    graph, _ = _graph()
    edges = {(dst, at_top) for dst, _, at_top in graph["optpart.cli.bench"]}
    assert ("optpart.bench.sweep", False) in edges  # lazy, relative, two dots
    assert ("optpart.errors", True) in edges


def test_every_module_is_concept_sized() -> None:
    """Modules are split by concept, not by line count: those over :data:`LONG_MODULE_LINES` lines
    are reported as a warning (each should be one concept), and none may pass :data:`MAX_MODULE_LINES`."""
    import warnings

    sizes = {f.relative_to(ROOT.parent).as_posix(): len(f.read_text(encoding="utf-8").splitlines())
             for f in sorted(ROOT.rglob("*.py"))}
    assert len(sizes) > 100  # the walk reaches the package
    long = [f"{path}: {n} lines" for path, n in sizes.items() if n > LONG_MODULE_LINES]
    if long:
        warnings.warn(f"modules over {LONG_MODULE_LINES} lines (one concept each?): " + "; ".join(long))
    big = [f"{path}: {n} lines" for path, n in sizes.items() if n > MAX_MODULE_LINES]
    assert not big, f"modules over {MAX_MODULE_LINES} lines:\n" + "\n".join(big)


def test_no_module_only_re_exports() -> None:
    """A module that moved leaves nothing behind: every module below ``optpart/`` other than a
    package's ``__init__`` defines something (a function, a class or a value) besides imports."""
    hollow = []
    for f in sorted(ROOT.rglob("*.py")):
        if f.name == "__init__.py":
            continue
        body = ast.parse(f.read_text(encoding="utf-8")).body
        own = [node for node in body
               if not isinstance(node, (ast.Import, ast.ImportFrom))
               and not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))
               and not (isinstance(node, ast.Assign) and [ast.unparse(t) for t in node.targets] == ["__all__"])]
        if not own:
            hollow.append(f.relative_to(ROOT.parent).as_posix())
    assert not hollow, "modules that only re-export:\n" + "\n".join(hollow)
