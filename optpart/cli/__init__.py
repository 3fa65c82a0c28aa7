"""The ``optpart`` command line: a thin shell over the Python API.

One module per command; each exposes ``register(subparsers)`` and sets ``func`` on
its parser, and is listed in :data:`COMMAND_MODULES`. Shared arguments and output
helpers live in :mod:`optpart.cli.common`. Flag letters mean one thing everywhere:
``-o`` is ``--out``, ``-s`` the solver, ``-t`` the time limit, ``-k`` the device
count, ``-m`` the memory; solver options are ``--option KEY=VALUE``.

Exit codes: 0 a placement was found (or the command succeeded); 1 no placement
(status ``infeasible`` or ``unknown``, or an invalid result under ``evaluate``);
2 bad input or usage. Errors print one line on stderr, never a traceback
(set ``OPTPART_DEBUG=1`` to see one).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Sequence

from .. import __version__
from ..errors import OptpartError
from .common import add_device_arguments, apply_device_arguments, format_summary

__all__ = ["main", "build_parser", "add_device_arguments", "apply_device_arguments", "format_summary",
           "COMMAND_MODULES"]

#: Modules that add subcommands: each has ``register(subparsers)``.
COMMAND_MODULES: list[str] = [
    "optpart.cli.solve",
    "optpart.cli.evaluate",
    "optpart.cli.info",
    "optpart.cli.solvers",
    "optpart.bench.commands",
    "optpart.cli.import_",
    "optpart.cli.show",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="optpart", description="Place a DNN operator graph on memory-limited devices.")
    parser.add_argument("--version", action="version", version=f"optpart {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in COMMAND_MODULES:
        importlib.import_module(module).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except OptpartError as exc:
        print(f"optpart: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("optpart: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into `head` and the like: stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except Exception as exc:  # a bug: still one line, unless debugging
        if os.environ.get("OPTPART_DEBUG"):
            raise
        print(f"optpart: internal error: {type(exc).__name__}: {exc} (set OPTPART_DEBUG=1 for a traceback)",
              file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())
