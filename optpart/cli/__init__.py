"""The ``optpart`` command line: a thin shell over the Python API.

One module per command (or family of commands); each declares its subcommands as
``COMMANDS``, a tuple of :class:`~optpart.cli.common.Command` (name, help, arguments,
run), and is listed in :data:`COMMAND_MODULES`; :func:`build_parser` wires them in. Shared arguments and output
helpers live in :mod:`optpart.cli.common`. Flag letters mean one thing everywhere:
``-o`` is ``--out``, ``-s`` the solver, ``-t`` the time limit, ``-k`` the device
count, ``-m`` the memory; solver options are ``--option KEY=VALUE``.

Exit codes: 0 a placement was found (or the command succeeded); 1 no placement
(status ``infeasible`` or ``unknown``, or an invalid result under ``evaluate``);
2 bad input or usage; 3 a bug in optpart. Errors print one line on stderr, never a
traceback (set ``OPTPART_DEBUG=1`` to see one), with text from input files escaped
(:func:`optpart.text.safe`).

Negative values reach their flag: ``--memory -5GiB`` is read as ``--memory=-5GiB``
(argparse alone takes ``-5GiB`` for an unknown flag), so the value's validator words
the error.
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import signal
import sys
from pathlib import Path
from typing import Sequence

from .. import __version__
from ..errors import OptpartError
from ..text import safe
from .common import MAX_SEED, Terminated, on_sigterm, add_device_arguments, apply_device_arguments
from .summary import format_summary

__all__ = ["main", "build_parser", "add_device_arguments", "apply_device_arguments", "format_summary",
           "COMMAND_MODULES"]

#: Modules that add subcommands: each has ``COMMANDS``, a tuple of :class:`~optpart.cli.common.Command`.
COMMAND_MODULES: list[str] = [
    "optpart.cli.solve",
    "optpart.cli.evaluate",
    "optpart.cli.info",
    "optpart.cli.solvers",
    "optpart.cli.fit",
    "optpart.cli.bench",
    "optpart.cli.import_",
    "optpart.cli.show",
    "optpart.cli.export",
    "optpart.cli.run",
]


class _Parser(argparse.ArgumentParser):
    """argparse with usage errors on one line (``optpart: error: ...``), exit code 2."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"optpart: error: {safe(message)} (see '{self.prog} --help')\n")


def build_parser() -> argparse.ArgumentParser:
    """The ``optpart`` parser, with every command of :data:`COMMAND_MODULES`.

    Returns
    -------
    argparse.ArgumentParser
        Each subparser's ``func`` default is its command's ``run``.
    """
    parser = _Parser(prog="optpart", description="Place a DNN operator graph on memory-limited devices.")
    parser.add_argument("--version", action="version", version=f"optpart {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in COMMAND_MODULES:
        for command in importlib.import_module(module).COMMANDS:
            p = sub.add_parser(command.name, help=command.help, description=command.description)
            command.arguments(p)
            p.set_defaults(func=command.run)
    return parser


_NEGATIVE = re.compile(r"^-(\d|\.\d|inf)")


def _value_flags(parser: argparse.ArgumentParser) -> set[str]:
    """Option strings, over every subcommand, that take exactly one value."""
    out: set[str] = set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                out |= _value_flags(sub)
        elif action.option_strings and action.nargs is None and \
                isinstance(action, (argparse._StoreAction, argparse._AppendAction)):
            out.update(action.option_strings)
    return out


def _join_negative_values(parser: argparse.ArgumentParser, argv: list[str]) -> list[str]:
    """``--memory -5GiB`` -> ``--memory=-5GiB`` (and ``-m -5GiB`` -> ``-m-5GiB``), for flags
    that take one value, so that negative values reach their validator."""
    flags = _value_flags(parser)
    out: list[str] = []
    i = 0
    while i < len(argv):
        tok = argv[i]
        if tok == "--":
            out += argv[i:]
            break
        if tok in flags and i + 1 < len(argv) and _NEGATIVE.match(argv[i + 1]):
            out.append(f"{tok}={argv[i + 1]}" if tok.startswith("--") else tok + argv[i + 1])
            i += 2
            continue
        out.append(tok)
        i += 1
    return out


def _check_args(args: argparse.Namespace) -> None:
    """Checks worth doing before any work: a repeated solver option, an output file
    in a missing directory (found now, not after an hour of solving)."""
    seen: dict[str, str] = {}
    for item in getattr(args, "option", None) or []:
        key = item.split("=", 1)[0].strip()
        if key in seen:
            raise OptpartError(f"--option {key} is given twice ({seen[key]!r} and {item!r})")
        seen[key] = item
    seed = getattr(args, "seed", None)
    if isinstance(seed, int) and not 0 <= seed <= MAX_SEED:
        raise OptpartError(f"--seed {seed} must be between 0 and {MAX_SEED}")
    plugins = getattr(args, "plugin", None)
    if plugins:
        from ..solvers import load_plugins

        load_plugins(plugins)  # and into $OPTPART_PLUGINS: a sweep's worker processes load them too
    out = getattr(args, "out", None)
    if isinstance(out, str) and out:
        parent = Path(out).parent
        if not parent.is_dir():
            raise OptpartError(f"--out {out}: directory '{parent}' does not exist")
        if Path(out).is_dir():
            raise OptpartError(f"--out {out} is a directory; give a file name")


def main(argv: Sequence[str] | None = None) -> int:
    """The ``optpart`` command: parse ``argv`` and run the subcommand; every error is one line on
    standard error.

    Parameters
    ----------
    argv : sequence of str, optional
        The arguments after the program name (default: ``sys.argv[1:]``).

    Returns
    -------
    int
        The exit code: 0 done (a placement found), 1 none found or a claim refuted, 2 bad input,
        3 an internal error.
    """
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(_join_negative_values(parser, argv))
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        previous = signal.signal(signal.SIGTERM, on_sigterm)
    except ValueError:  # not the main thread: leave signals alone
        previous = None
    try:
        _check_args(args)
        return int(args.func(args) or 0)
    except OptpartError as exc:
        print(f"optpart: error: {safe(exc)}", file=sys.stderr)
        return 2
    except Terminated:
        print("optpart: terminated by SIGTERM; results written so far are kept", file=sys.stderr)
        return 143
    except KeyboardInterrupt:
        print("optpart: interrupted; results written so far are kept", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into `head` and the like: stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except Exception as exc:  # a bug: still one line, unless debugging
        if os.environ.get("OPTPART_DEBUG"):
            raise
        print(f"optpart: internal error: {type(exc).__name__}: {safe(exc)} (set OPTPART_DEBUG=1 for a traceback)",
              file=sys.stderr)
        return 3
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())
