"""``optpart solvers``: the registered solvers, what they guarantee and whether they are installed."""

from __future__ import annotations

import argparse

from ..solvers.registry import SOLVERS, solver_names
from .common import table


def _cmd_solvers(args: argparse.Namespace) -> int:
    rows = []
    for name in solver_names():
        info = SOLVERS[name]
        state = "yes" if info.installed else f"no (pip install 'optpart[{info.extra}]')"
        rows.append([name, "exact" if info.exact else "heuristic", state, info.summary])
    print(table(rows, ["solver", "kind", "installed", "what it does"]))
    return 0


def register(sub) -> None:
    p = sub.add_parser("solvers", help="list the solvers and whether they are installed")
    p.set_defaults(func=_cmd_solvers)
