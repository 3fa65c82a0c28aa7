"""``optpart solvers``: the registered solvers, what they guarantee and whether they are installed.

``optpart solvers`` prints one line per solver: kind, installed, the memory models it
guarantees, whether it honours a time limit and uses a hint. ``optpart solvers NAME``
(or ``--verbose`` for all) adds its options with types, ranges and defaults, read
from the solver's declared spec (:mod:`optpart.solvers.spec`).
"""

from __future__ import annotations

import argparse

from ..solvers.registry import solver_info, solver_names, solver_spec
from .common import table


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def _cmd_solvers(args: argparse.Namespace) -> int:
    names = [solver_info(n).name for n in args.names] if args.names else solver_names()
    rows = []
    for name in names:
        info = solver_info(name)
        spec = solver_spec(name)
        state = "yes" if info.installed else f"no (pip install 'optpart[{info.extra or name}]')"
        rows.append([name, "exact" if info.exact else "heuristic", state, ",".join(spec.memory_models),
                     _yes(spec.uses_time_limit), _yes(spec.uses_hint)])
    print(table(rows, ["solver", "kind", "installed", "memory models", "time limit", "hint"]))
    if args.verbose or args.names:
        for name in names:
            info, spec = solver_info(name), solver_spec(name)
            print(f"\n{name}: {info.summary}")
            if not spec.options:
                print("  options: none")
            for opt in spec.options:
                print(f"  --option {opt.describe()}")
    return 0


def register(sub) -> None:
    """Add ``optpart solvers`` to the command line.

    Parameters
    ----------
    sub : argparse._SubParsersAction
        The ``optpart`` command's subcommand parsers (``ArgumentParser.add_subparsers()``).
    """
    p = sub.add_parser("solvers", help="list the solvers: installed, memory models, time limit, hint, options")
    p.add_argument("names", nargs="*", metavar="NAME", help="show these solvers with their options")
    p.add_argument("--verbose", "-v", action="store_true", help="show every solver's options")
    p.set_defaults(func=_cmd_solvers)
