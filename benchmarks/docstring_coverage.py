"""Which public functions of optpart/ document their parameters and results (numpydoc)?

Walks the package with :mod:`ast` (nothing is imported) and checks, per file, every public
function and method. Public: the name does not start with ``_``; methods count when their
class's name does not start with ``_`` either. The rule:

* a function that takes parameters (``self``/``cls`` aside) has a numpydoc ``Parameters``
  section naming each of them (``a, b : float`` names two; ``*args`` and ``**kwargs`` by
  their names);
* a function that returns a value (a return annotation other than ``None``, else a
  ``return`` with a value) has a ``Returns`` section, a generator that yields values a
  ``Yields`` section; properties are exempt (numpydoc documents them as attributes);
* a method without a docstring inherits the one of the method it overrides in a base class
  of the package (as :func:`inspect.getdoc` and Sphinx do), which must pass the rule;
* a line holding only ``%(name)s`` stands for the entry ``name`` of
  ``optpart._docstrings.PARAMS`` (read here with :mod:`ast`); the entry must exist and the
  function, or its class, must be decorated with ``fill_doc``, which writes it in.

Prints a Markdown table (files with something missing, then the total) and what is missing,
and exits 1 when anything is.

    python benchmarks/docstring_coverage.py [PATH ...]   # default: optpart

tests/package/test_docstrings.py applies the same rule (it imports :func:`undocumented` from here).
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from pathlib import Path
from typing import Iterator, NamedTuple

ROOT = Path(__file__).resolve().parent.parent
#: Where the shared parameter entries live, relative to the checkout.
SHARED = Path("optpart") / "_docstrings.py"

_PLACEHOLDER = re.compile(r"^([ \t]*)%\((\w+)\)s[ \t]*$", re.M)
_SECTION = re.compile(r"^(\w[\w ]*)\n-{3,}[ \t]*$", re.M)


class Function(NamedTuple):
    """One public function: where it is and what its docstring lacks (nothing: documented)."""

    path: str
    line: int
    name: str
    missing: tuple[str, ...]

    @property
    def documented(self) -> bool:
        """True when the docstring passes the rule."""
        return not self.missing


def shared_params(root: Path = ROOT) -> dict[str, str]:
    """The ``PARAMS`` dict literal of ``optpart/_docstrings.py`` under ``root`` (empty without one).

    Parameters
    ----------
    root : pathlib.Path, optional
        The checkout.

    Returns
    -------
    dict of str to str
        Placeholder name -> numpydoc entry.
    """
    path = root / SHARED
    if not path.exists():
        return {}
    for node in ast.parse(path.read_text()).body:
        target = node.target if isinstance(node, ast.AnnAssign) else \
            node.targets[0] if isinstance(node, ast.Assign) else None
        if isinstance(target, ast.Name) and target.id == "PARAMS":
            return ast.literal_eval(node.value)
    return {}


def _sections(doc: str) -> dict[str, str]:
    """Numpydoc section title -> its body (``doc`` as :func:`ast.get_docstring` cleans it)."""
    heads = list(_SECTION.finditer(doc))
    return {m.group(1).strip(): doc[m.end():heads[i + 1].start() if i + 1 < len(heads) else len(doc)]
            for i, m in enumerate(heads)}


def _named(section: str) -> set[str]:
    """Parameter names a Parameters section documents (its entries' ``name : type`` lines)."""
    lines = [ln for ln in section.split("\n") if ln.strip()]
    if not lines:
        return set()
    indent = min(len(ln) - len(ln.lstrip()) for ln in lines)
    out: set[str] = set()
    for ln in lines:
        if len(ln) - len(ln.lstrip()) == indent:
            out.update(n.strip().lstrip("*") for n in ln.split(":", 1)[0].split(","))
    return out


def _own_nodes(fn: ast.AST) -> Iterator[ast.AST]:
    """The nodes of ``fn``'s body, nested functions and classes left out."""
    stack = list(ast.iter_child_nodes(fn))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        yield node
        stack.extend(ast.iter_child_nodes(node))


def _result_section(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    """``"Returns"``, ``"Yields"`` or None: the section ``fn``'s result calls for."""
    if any(isinstance(d, ast.Name) and d.id in ("property", "cached_property") or
           isinstance(d, ast.Attribute) and d.attr in ("setter", "cached_property") for d in fn.decorator_list):
        return None
    nodes = list(_own_nodes(fn))
    yields = [n for n in nodes if isinstance(n, (ast.Yield, ast.YieldFrom))]
    if yields:
        return "Yields" if any(getattr(n, "value", None) is not None for n in yields) else None
    if fn.returns is not None:
        return None if ast.unparse(fn.returns) in ("None", "NoReturn", "Never") else "Returns"
    returns = [n for n in nodes if isinstance(n, ast.Return) and n.value is not None]
    return "Returns" if any(not (isinstance(n.value, ast.Constant) and n.value.value is None)
                            for n in returns) else None


def _decorated(node: ast.AST, name: str) -> bool:
    return any((isinstance(d, ast.Name) and d.id == name) or (isinstance(d, ast.Attribute) and d.attr == name)
               for d in getattr(node, "decorator_list", ()))


def _check(fn: ast.FunctionDef | ast.AsyncFunctionDef, doc: str, filled: bool,
           params: dict[str, str]) -> tuple[str, ...]:
    """What ``fn``'s docstring ``doc`` lacks under the rule (empty: nothing)."""
    missing: list[str] = []
    holes = _PLACEHOLDER.findall(doc)
    if holes:
        unknown = sorted({name for _, name in holes if name not in params})
        if unknown:
            missing.append("unknown placeholder " + ", ".join(f"%({n})s" for n in unknown))
        if not filled:
            missing.append("placeholders without fill_doc")
        doc = _PLACEHOLDER.sub(lambda m: "\n".join(m.group(1) + ln for ln in params.get(m.group(2), "").split("\n")),
                               doc)
    sections = _sections(doc)
    a = fn.args
    names = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs if x.arg not in ("self", "cls")]
    names += [x.arg for x in (a.vararg, a.kwarg) if x is not None]
    if names:
        if "Parameters" not in sections:
            missing.append("no Parameters section")
        else:
            left = [n for n in names if n not in _named(sections["Parameters"])]
            if left:
                missing.append("Parameters lack " + ", ".join(left))
    want = _result_section(fn)
    if want and want not in sections and not (want == "Returns" and "Yields" in sections):
        missing.append(f"no {want} section")
    return tuple(missing)


class _Class(NamedTuple):
    bases: tuple[str, ...]
    docs: dict[str, tuple[str, bool]]  # method name -> (docstring, filled by fill_doc) for documented methods


def _base_names(node: ast.ClassDef) -> tuple[str, ...]:
    out = []
    for b in node.bases:
        if isinstance(b, ast.Subscript):
            b = b.value
        if isinstance(b, ast.Name):
            out.append(b.id)
        elif isinstance(b, ast.Attribute):
            out.append(b.attr)
    return tuple(out)


def _classes(trees: dict[str, ast.Module]) -> dict[str, list[_Class]]:
    """Every class of the package by simple name, with its bases and documented methods."""
    out: dict[str, list[_Class]] = {}
    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                docs = {m.name: (ast.get_docstring(m), _decorated(node, "fill_doc") or _decorated(m, "fill_doc"))
                        for m in node.body
                        if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)) and ast.get_docstring(m)}
                out.setdefault(node.name, []).append(_Class(_base_names(node), docs))
    return out


def _inherited(classes: dict[str, list[_Class]], bases: tuple[str, ...], method: str,
               seen: frozenset[str] = frozenset()) -> tuple[str, bool] | None:
    """``(docstring, filled)`` of ``method`` in the nearest base class of the package that documents it."""
    for base in bases:
        if base in seen:
            continue
        for cls in classes.get(base, ()):
            if method in cls.docs:
                return cls.docs[method]
            found = _inherited(classes, cls.bases, method, seen | {base})
            if found is not None:
                return found
    return None


def _walk(body: list[ast.stmt], owner: str, ctx: tuple, bases: tuple[str, ...] = (),
          filled: bool = False) -> Iterator[tuple[int, str, tuple[str, ...]]]:
    classes, params = ctx
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if node.name.startswith("_"):
                continue
            doc, filled_here = ast.get_docstring(node), filled or _decorated(node, "fill_doc")
            if doc is None and owner:
                doc, filled_here = _inherited(classes, bases, node.name) or (None, False)
            yield node.lineno, owner + node.name, _check(node, doc or "", filled_here, params)
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            yield from _walk(node.body, owner + node.name + ".", ctx, _base_names(node),
                             _decorated(node, "fill_doc"))


def public_functions(paths: list[str], root: Path = ROOT) -> list[Function]:
    """Every public function in the given files and folders, with what its docstring lacks.

    Parameters
    ----------
    paths : list of str
        Files or folders, relative to ``root`` (``"optpart"``, ``"optpart/model"``,
        ``"optpart/fit.py"``); folders are walked for ``*.py`` files.
    root : pathlib.Path, optional
        The checkout (default: the one holding this script). Base classes are looked up
        among every ``*.py`` file of ``root / "optpart"`` and of ``paths``.

    Returns
    -------
    list of Function
        In file order, then line order.
    """
    files: set[Path] = set()
    for p in paths:
        full = root / p
        files.update(full.rglob("*.py") if full.is_dir() else [full])
    package = set((root / "optpart").rglob("*.py")) if (root / "optpart").is_dir() else set()
    trees = {f: ast.parse(f.read_text()) for f in sorted(files | package)}
    ctx = (_classes({str(f): t for f, t in trees.items()}), shared_params(root))
    out = []
    for f in sorted(files):
        rel = f.relative_to(root).as_posix()
        out.extend(Function(rel, line, name, miss) for line, name, miss in _walk(trees[f].body, "", ctx))
    return out


def undocumented(paths: list[str], root: Path = ROOT) -> list[str]:
    """``path:line: name (what is missing)`` of each public function in ``paths`` that fails the rule.

    Parameters
    ----------
    paths : list of str
        Files or folders relative to ``root`` (see :func:`public_functions`).
    root : pathlib.Path, optional
        The checkout.

    Returns
    -------
    list of str
        One entry per function that fails; empty when all pass.
    """
    return [f"{f.path}:{f.line}: {f.name} ({'; '.join(f.missing)})"
            for f in public_functions(paths, root) if f.missing]


def main(argv: list[str] | None = None) -> int:
    """Print the coverage table and what is missing; 1 when anything is.

    Parameters
    ----------
    argv : list of str, optional
        Command-line arguments (default ``sys.argv[1:]``).

    Returns
    -------
    int
        The exit status.
    """
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="*", default=["optpart"], help="files or folders (default: optpart)")
    args = ap.parse_args(argv)
    funcs = public_functions(args.paths)
    per_file: dict[str, list[int]] = {}
    for f in funcs:
        counts = per_file.setdefault(f.path, [0, 0])
        counts[0] += f.documented
        counts[1] += 1
    rows = [(path, f"{ok} / {n}") for path, (ok, n) in per_file.items() if ok < n]
    documented = sum(f.documented for f in funcs)
    rows.append(("**total**", f"{documented} / {len(funcs)}"))
    width = max(len(r[0]) for r in rows)
    print(f"| {'file'.ljust(width)} | documented |")
    print(f"| {'-' * width} | ---------- |")
    for path, cell in rows:
        print(f"| {path.ljust(width)} | {cell.rjust(10)} |")
    for line in undocumented(args.paths):
        print(line)
    return 1 if documented < len(funcs) else 0


if __name__ == "__main__":
    sys.exit(main())
