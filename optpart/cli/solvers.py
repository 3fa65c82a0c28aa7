"""``optpart solvers``: the registered solvers, what they guarantee and whether they are installed.

``optpart solvers`` prints one line per solver: kind, installed, the memory models it
guarantees, whether it honours a time limit and uses a hint. ``optpart solvers NAME``
(or ``--verbose`` for all) adds its options with types, ranges and defaults, read
from the solver's declared spec (:mod:`optpart.solvers.spec`).

The pipeline orders (:data:`optpart.pipeline.schedules.ORDER_NAMES`: the named schedules of
:mod:`optpart.pipeline.schedules` and ``sequential``) are not registered solvers but are accepted
as ``--solver`` of a pipelined solve (docs/model.md section 7): they get rows of kind
``pipeline order`` and a note saying when they apply.
"""

from __future__ import annotations

import argparse

from ..pipeline.schedules import ORDER_NAMES
from ..pipeline.schedules import SUMMARY
from ..solvers import load_plugins
from ..solvers.registry import solver_info, solver_names, solver_spec
from .common import Command, add_plugin_argument, table

_ORDER_NOTE = ("pipeline orders plan a pipelined step only: optpart solve FILE --solver NAME "
               "[--micro-batches M] (M defaults to the file's own, else 1; docs/model.md section 7). "
               "Each runs on the stages found for its layout (one or two stages per device); the time limit "
               "does not apply.")


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def _time_limit(info, spec, long: bool = False) -> str:
    """The time limit column: ``60 s default``, ``yes (none by default)`` or ``no``."""
    if not spec.uses_time_limit:
        return "not used: it runs until done" if long else "no"
    if info.default_time_limit is not None:
        return (f"{info.default_time_limit:g} s unless --time-limit says otherwise" if long
                else f"yes, {info.default_time_limit:g} s default")
    return "none unless --time-limit gives one (it runs until done)" if long else "yes, none by default"


def _cmd_solvers(args: argparse.Namespace) -> int:
    load_plugins()  # a broken module of $OPTPART_PLUGINS is reported here, in one line
    if args.names:
        names = [n for n in args.names if n not in ORDER_NAMES]
        names = [solver_info(n).name for n in names]
        orders = [n for n in args.names if n in ORDER_NAMES]
    else:
        names, orders = solver_names(), list(ORDER_NAMES)
    rows = []
    for name in names:
        info = solver_info(name)
        spec = solver_spec(name)
        state = "yes" if info.installed else f"no (pip install 'optpart[{info.extra or name}]')"
        kind = ("exact" if info.exact else "heuristic") + (f" (plugin: {info.module})" if info.plugin else "")
        rows.append([name, kind, state, ",".join(spec.memory_models), _time_limit(info, spec),
                     _yes(spec.uses_hint)])
    rows += [[name, "pipeline order", "yes", "static,peak", "no", "no"] for name in orders]
    print(table(rows, ["solver", "kind", "installed", "memory models", "time limit", "hint"]))
    if orders:
        print(f"\n{'/'.join(orders)}: {_ORDER_NOTE}")
    if args.verbose or args.names:
        for name in names:
            info, spec = solver_info(name), solver_spec(name)
            print(f"\n{name}: {info.summary}")
            print(f"  time limit: {_time_limit(info, spec, long=True)}")
            if not spec.options:
                print("  options: none")
            for opt in spec.options:
                print(f"  --option {opt.describe()}")
        for name in orders:
            print(f"\n{name}: {SUMMARY[name]}")
            print("  options: none")
    return 0


def _arguments(p: argparse.ArgumentParser) -> None:
    """The arguments of ``optpart solvers``."""
    p.add_argument("names", nargs="*", metavar="NAME", help="show these solvers with their options")
    p.add_argument("--verbose", "-v", action="store_true", help="show every solver's options")
    add_plugin_argument(p)


#: ``optpart solvers`` (registered by :func:`optpart.cli.build_parser`)
COMMANDS = (Command("solvers", "list the solvers: installed, memory models, time limit, hint, options",
                    _arguments, _cmd_solvers),)
