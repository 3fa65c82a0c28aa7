"""Which public functions of optpart/ document their parameters (numpydoc)?

Walks the package with :mod:`ast` (nothing is imported) and counts, per file, the public
functions and methods that take parameters and whether their docstring has a numpydoc
``Parameters`` section. Public: the name does not start with ``_``; methods count when
their class's name does not start with ``_`` either; a function whose only parameters are
``self``/``cls`` is exempt. Prints a Markdown table (files with something missing, then
the total) and the missing functions, and exits 1 when any is missing.

    python benchmarks/docstring_coverage.py [PATH ...]   # default: optpart

tests/test_docstrings.py applies the same rule (it imports :func:`undocumented` from here).
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path
from typing import Iterator, NamedTuple

ROOT = Path(__file__).resolve().parent.parent


class Function(NamedTuple):
    """One public function that takes parameters: where it is and whether it documents them."""

    path: str
    line: int
    name: str
    documented: bool


def _has_parameters(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    a = node.args
    named = [x for x in a.posonlyargs + a.args + a.kwonlyargs if x.arg not in ("self", "cls")]
    return bool(named or a.vararg or a.kwarg)


def _walk(body: list[ast.stmt], owner: str) -> Iterator[tuple[int, str, bool]]:
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if not node.name.startswith("_") and _has_parameters(node):
                yield node.lineno, owner + node.name, "Parameters\n" in (ast.get_docstring(node) or "")
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            yield from _walk(node.body, owner + node.name + ".")


def public_functions(paths: list[str], root: Path = ROOT) -> list[Function]:
    """Every public function with parameters in the given files and folders.

    Parameters
    ----------
    paths : list of str
        Files or folders, relative to ``root`` (``"optpart"``, ``"optpart/model"``,
        ``"optpart/fit.py"``); folders are walked for ``*.py`` files.
    root : pathlib.Path, optional
        The checkout (default: the one holding this script).

    Returns
    -------
    list of Function
        In file order, then line order.
    """
    files: set[Path] = set()
    for p in paths:
        full = root / p
        files.update(full.rglob("*.py") if full.is_dir() else [full])
    out = []
    for f in sorted(files):
        rel = f.relative_to(root).as_posix()
        out.extend(Function(rel, line, name, ok) for line, name, ok in _walk(ast.parse(f.read_text()).body, ""))
    return out


def undocumented(paths: list[str], root: Path = ROOT) -> list[str]:
    """``path:line: name`` of each public function in ``paths`` without a Parameters section.

    Parameters
    ----------
    paths : list of str
        Files or folders relative to ``root`` (see :func:`public_functions`).
    root : pathlib.Path, optional
        The checkout.

    Returns
    -------
    list of str
        One entry per function missing its section; empty when all are documented.
    """
    return [f"{f.path}:{f.line}: {f.name}" for f in public_functions(paths, root) if not f.documented]


def main(argv: list[str] | None = None) -> int:
    """Print the coverage table and the missing functions; 1 when any is missing.

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
    missing = [f for f in funcs if not f.documented]
    for f in missing:
        print(f"{f.path}:{f.line}: {f.name}")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
