"""What the ``optpart`` subcommands share: how a command is declared (:class:`Command`),
device and link arguments, solver options, plain-text tables, and reading a result file
against its problem. The human summary of a result is :mod:`optpart.cli.summary`."""

from __future__ import annotations

import argparse
import json
import re
from dataclasses import dataclass
from functools import partial
from typing import Any, Callable, Sequence

from ..errors import OptpartError
from ..model.devices import DEFAULT_BANDWIDTH, DEFAULT_LATENCY, with_resolved_devices
from ..model.problem import Problem
from ..solvers.registry import SOLVERS
from ..text import safe
from ..units import format_bytes, format_time, parse_bandwidth, parse_bytes, parse_list, parse_time

__all__ = ["Command", "add_device_arguments", "apply_device_arguments", "check_sizes", "check_bandwidth",
           "check_time", "time_argument", "add_plugin_argument", "hardware_options", "load_problem_for_result",
           "parse_option", "table", "DEFAULT_BANDWIDTH", "DEFAULT_LATENCY", "MAX_SEED", "Terminated", "on_sigterm"]


class Terminated(KeyboardInterrupt):
    """Raised in the main thread when the process gets SIGTERM, so that ``finally`` blocks
    run (a sweep stops its workers, drops its claims, closes its database) and a solve keeps
    its best plan as it does on Ctrl-C (:class:`optpart.solvers.incumbent.Interrupted`)."""


def on_sigterm(signum, frame) -> None:
    """The SIGTERM handler of the ``optpart`` command: raise :class:`Terminated`.

    Parameters
    ----------
    signum, frame
        As :func:`signal.signal` passes them.
    """
    raise Terminated()


_DEVICE_FLAGS = ("devices", "memory", "speed", "bandwidth", "latency")
#: ``--device-type/--dtype/--link`` (:mod:`optpart.hardware`), as ``with_hardware`` names them.
_HARDWARE_FLAGS = ("device_type", "dtype", "link")


@dataclass(frozen=True)
class Command:
    """One subcommand of ``optpart``: a command module lists its own in ``COMMANDS``.

    :func:`optpart.cli.build_parser` adds each as ``add_parser(name, help=help,
    description=description)``, lets ``arguments`` add its flags and sets ``run`` as the
    parser's ``func``: the one place where a subcommand is wired in.
    """

    #: the word after ``optpart``
    name: str
    #: one line in ``optpart --help``
    help: str
    #: adds the command's arguments to its parser
    arguments: Callable[[argparse.ArgumentParser], None]
    #: runs the command on the parsed arguments and returns the exit code
    run: Callable[[argparse.Namespace], int]
    #: the longer text of ``optpart NAME --help`` (default: none)
    description: str | None = None


def add_device_arguments(parser: argparse.ArgumentParser, *, hardware: bool = False) -> None:
    """``--devices/--memory/--speed/--bandwidth/--latency``: devices and links for a graph file.

    Parameters
    ----------
    parser : argparse.ArgumentParser
        The subcommand's parser; the flags are added to it (read back by :func:`apply_device_arguments`).
    hardware : bool
        Also ``--device-type/--dtype/--link`` (:mod:`optpart.hardware`): commands that price a
        problem for a solve (``solve``, ``fit``, ``info``, ``bench``).
    """
    g = parser.add_argument_group("devices and links (override the file's)")
    if hardware:
        from ..hardware import DEVICE_TYPES, DTYPES, LINK_TYPES

        g.add_argument("--device-type", metavar="NAME",
                       help="accelerator the devices are: node times priced for it (exact for files imported by "
                            "this optpart), its capacity and its link unless --memory/--link say otherwise "
                            f"(default: the file's own costs; one of {', '.join(DEVICE_TYPES)}; docs/costmodel.md)")
        g.add_argument("--dtype", choices=DTYPES,
                       help="number format kernels run in: its dense peak prices compute (default fp32)")
        g.add_argument("--link", metavar="NAME",
                       help=f"link between devices: {', '.join(LINK_TYPES)}, or nvlink (the device type's own) "
                            "(default: the device type's usual one)")
    g.add_argument("--devices", "-k", type=int, metavar="K",
                   help="number of devices (default: the file's; a file without devices needs it)")
    g.add_argument("--memory", "-m", metavar="SIZE[,SIZE...]",
                   help="capacity, one value or one per device, e.g. 16GiB or 80GiB,40GiB "
                        "(default: the file's, else unlimited)")
    g.add_argument("--speed", metavar="S[,S...]", help="relative speed, one value or one per device (default 1)")
    g.add_argument("--bandwidth", metavar="BW", help=f"link bandwidth, e.g. 25GB/s (default: the file's, else {DEFAULT_BANDWIDTH})")
    g.add_argument("--latency", metavar="T", help=f"link latency, e.g. 10us (default: the file's, else {DEFAULT_LATENCY})")


def add_run_arguments(parser: argparse.ArgumentParser, *, who: str = "the solver",
                      option_metavar: str = "KEY=VALUE") -> None:
    """``--time-limit/--seed/--option``: the budget, seed and options of the solves a command runs.

    Parameters
    ----------
    parser : argparse.ArgumentParser
        The subcommand's parser; the flags are added to it (``args.time_limit``, ``args.seed``,
        ``args.option``, the last read by :func:`parse_option`).
    who : str
        What the time limit is for, in the help (``"the solver"``, ``"each solve"``, ``"each run"``).
    option_metavar : str
        How an option is written (``SOLVER.KEY=VALUE`` where one command runs several solvers).
    """
    parser.add_argument("--time-limit", "-t", type=time_argument, metavar="T",
                        help=f"time {who} may use, with a unit (90s, 5m, 1h); default: each solver's own: "
                             f"{_default_time_limits()}")
    parser.add_argument("--seed", type=int, default=0, help="solver seed (default 0)")
    parser.add_argument("--option", action="append", metavar=option_metavar,
                        help="solver option, repeatable (default: none, each solver's own defaults; optpart solvers NAME)")


def add_plugin_argument(parser: argparse.ArgumentParser) -> None:
    """``--plugin MODULE``: import a module that registers solvers (docs/plugins.md).

    Parameters
    ----------
    parser : argparse.ArgumentParser
        The subcommand's parser (read back by :func:`optpart.cli.main`, which loads the
        modules and adds them to ``$OPTPART_PLUGINS`` for worker processes).
    """
    parser.add_argument("--plugin", action="append", metavar="MODULE",
                        help="import MODULE (package.module, package.module:register or path/to/file.py), which "
                             "registers solvers with optpart.register_solver; repeatable (default: none; installed "
                             "packages' optpart.solvers entry points and $OPTPART_PLUGINS are always found)")


def hardware_options(args: argparse.Namespace) -> dict[str, str]:
    """The ``--device-type/--dtype/--link`` a command was given, as a result records them
    (``options``), so that ``evaluate``, ``show`` and ``plot`` price its problem the same way.

    Parameters
    ----------
    args : argparse.Namespace
        Parsed flags of :func:`add_device_arguments` with ``hardware=True``.

    Returns
    -------
    dict
        ``{"device_type": ..., "dtype": ..., "link": ...}``, the flags given only.
    """
    return {name: getattr(args, name) for name in _HARDWARE_FLAGS if getattr(args, name, None) is not None}


def _default_time_limits() -> str:
    """``'cpsat 60 s, milp 60 s; the others run until done'`` (no solver module is imported)."""
    timed = [f"{n} {SOLVERS[n].default_time_limit:g} s" for n in sorted(SOLVERS)
             if SOLVERS[n].default_time_limit is not None]
    return ", ".join(timed) + "; the others run until done"


def apply_device_arguments(problem: Problem, args: argparse.Namespace) -> Problem:
    """The problem with the devices and links the command line asks for: the flags go to
    :func:`optpart.model.devices.resolve_devices` (the rules live there), and its errors name
    the flag (``--memory: size '-5GiB' must be a non-negative number``).

    Parameters
    ----------
    problem : Problem
        The problem as read from its file.
    args : argparse.Namespace
        Parsed flags of :func:`add_device_arguments` (unset flags keep the file's values).

    Returns
    -------
    Problem
        The problem on the requested devices and links (``problem`` itself when no flag is set).
    """
    flags = {name: getattr(args, name, None) for name in _DEVICE_FLAGS}
    if isinstance(flags["memory"], str):
        check_sizes(flags["memory"], "--memory")
    if isinstance(flags["bandwidth"], str):
        check_bandwidth(flags["bandwidth"], "--bandwidth")
    if isinstance(flags["latency"], str):
        check_time(flags["latency"], "--latency")
    names = {name: getattr(args, name, None) for name in _HARDWARE_FLAGS}
    try:
        if any(v is not None for v in names.values()):
            from ..hardware import with_hardware

            return with_hardware(problem, **names, **flags)
        return with_resolved_devices(problem, **flags)
    except OptpartError as exc:
        msg = str(exc)
        for name in _DEVICE_FLAGS:
            if msg.startswith(name + " ") or msg.startswith(name + ":"):
                raise OptpartError("--" + msg) from None
        raise


def check_sizes(text: str, flag: str) -> list[float]:
    """The sizes of a command-line flag, each with a unit (``--memory 16`` is refused, not read as 16 bytes).

    Parameters
    ----------
    text : str
        One size or a comma-separated list.
    flag : str
        The flag, named in the error.

    Returns
    -------
    list of float
        Bytes per entry.
    """
    try:
        return parse_list(text, partial(parse_bytes, unit_required=True), flag)
    except OptpartError as exc:
        msg = str(exc)
        raise OptpartError(msg if msg.startswith(flag) else f"{flag}: {msg}") from None


def check_bandwidth(text: str, flag: str) -> float:
    """A bandwidth flag's value, with a unit (``--bandwidth 25`` is refused, not read as 25 B/s).

    Parameters
    ----------
    text : str
        The flag's value.
    flag : str
        The flag, named in the error.

    Returns
    -------
    float
        Bytes per second.
    """
    try:
        return parse_bandwidth(text, unit_required=True)
    except OptpartError as exc:
        raise OptpartError(f"{flag}: {exc}") from None


_BARE_NUMBER = re.compile(r"^\s*[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?\s*$")


def check_time(text: str, flag: str) -> float:
    """A duration flag's value, with a unit (``--latency 10`` is refused, not read as 10 seconds).

    Parameters
    ----------
    text : str
        The flag's value, e.g. ``10us`` or ``5m``.
    flag : str
        The flag, named in the error.

    Returns
    -------
    float
        Seconds.
    """
    if _BARE_NUMBER.match(str(text)):
        raise OptpartError(f"{flag} {text.strip()}: a time needs its unit (s, ms, us, ns, m, h): write "
                           f"{text.strip()}s or {text.strip()}us")
    try:
        return parse_time(text)
    except OptpartError as exc:
        raise OptpartError(f"{flag}: {exc}") from None


def time_argument(text: str) -> float:
    """An argparse type for durations with a unit (``90s``, ``5m``, ``1.5h``), in seconds; a bare
    number is refused like a size without a unit.

    Parameters
    ----------
    text : str
        The flag's value.

    Returns
    -------
    float
        Seconds.
    """
    if _BARE_NUMBER.match(str(text)):
        raise argparse.ArgumentTypeError(f"{text.strip()!r} needs a unit: write {text.strip()}s (or m, h)")
    try:
        return parse_time(text)
    except OptpartError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


#: Settings that have their own flag; ``--option`` may not give them a second time.
_RESERVED_OPTIONS = {"time_limit": "--time-limit", "seed": "--seed", "hint": "a hint",
                     "memory_model": "--memory-model"}

#: Seeds reach OR-Tools and numpy, which take 32-bit non-negative integers.
MAX_SEED = 2**31 - 1


def parse_option(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` -> ``(key, value)``; the value is read as JSON when it parses, else kept as text.

    Parameters
    ----------
    text : str
        One ``--option`` value, e.g. ``effort=2`` or ``deterministic=false``.

    Returns
    -------
    (str, object)
        The key and the value (JSON-decoded when it parses: numbers, booleans, lists).

    Raises
    ------
    OptpartError
        Without ``=``, with an empty key, or for a setting that has its own flag (``time_limit``).
    """
    if "=" not in text:
        raise OptpartError(f"--option {text!r}: expected KEY=VALUE")
    key, value = text.split("=", 1)
    key = key.strip()
    if not key:
        raise OptpartError(f"--option {text!r}: the key is empty; expected KEY=VALUE")
    if key in _RESERVED_OPTIONS:
        raise OptpartError(f"--option {key}={value}: {key} has its own flag ({_RESERVED_OPTIONS[key]})")
    try:
        return key, json.loads(value)
    except (json.JSONDecodeError, RecursionError, ValueError):
        return key, value


def table(rows: Sequence[Sequence[str]], header: Sequence[str]) -> str:
    """A plain-text table: columns padded to their widest cell, a dashed rule under the header.

    Parameters
    ----------
    rows : sequence of sequence of str
        The cells, one sequence per row.
    header : sequence of str
        The column titles.

    Returns
    -------
    str
        The table, one line per row, without a trailing newline.
    """
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(str(h).ljust(w) for h, w in zip(header, widths)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    for r in rows:
        lines.append("  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip())
    return "\n".join(lines)


def load_problem_for_result(args: argparse.Namespace, problem_path: str, result_path: str, *,
                            judge: bool = False, unrolled: bool = True) -> Problem:
    """The problem a result file is read against: the problem file, with the devices and
    links the result was computed for when the file has none, and the command line's
    device flags applied on top (``evaluate``, ``show``, ``export``, ``plot``).

    Parameters
    ----------
    args : argparse.Namespace
        The command's flags (device flags from :func:`add_device_arguments`).
    problem_path : str
        The problem file.
    result_path : str
        The result file (its ``devices`` and ``links`` are read when the problem file has none).
    judge : bool
        ``evaluate``: device flags that name other devices than the result's are judged (a false
        claim), not refused. Otherwise such flags are refused in one line; flags that change only
        capacities or speeds are taken, with one note on stderr naming both sets of devices.
    unrolled : bool
        For a pipelined result, return its plan's unrolled step (default); else the step of
        the problem file itself.

    Returns
    -------
    Problem
        The problem to read and judge the result against.
    """
    from ..formats import load, with_result_devices
    from ..formats._io import parse_json, read_bytes

    problem = load(problem_path)
    doc = parse_json(read_bytes(result_path), result_path)
    doc = doc if isinstance(doc, dict) else {}
    if isinstance(doc.get("problem"), str) and doc["problem"] != problem.name:
        import sys

        print(f"note: {safe(result_path)} is a result for problem '{safe(doc['problem'])}'; {safe(problem_path)} "
              f"holds '{safe(problem.name)}'", file=sys.stderr)
    from ..hardware import as_solved

    solved = as_solved(problem, doc)  # solved with --device-type/--dtype/--link: priced as the solve did
    if solved is not None:
        problem = solved
    else:
        problem = with_result_devices(problem, result_path)
        if problem.n_devices and getattr(args, "bandwidth", None) is None and getattr(args, "latency", None) is None:
            problem = _solved_links(problem, problem_path, result_path)
    given = any(getattr(args, a, None) is not None for a in _DEVICE_FLAGS)
    if given or problem.n_devices == 0 or problem.links is None:
        problem = apply_device_arguments(problem, args)
        if given and not judge:  # evaluate's judge reports other devices as a false claim itself
            _check_result_devices(problem, "the command line", result_path, doc, flags=True)
    else:
        _check_result_devices(problem, problem_path, result_path, doc)
    if not unrolled:
        return problem
    from .pipeline import pipelined_for_result  # a pipelined result is over the unrolled step
    return pipelined_for_result(problem, getattr(args, "micro_batches", None), result_path)


def _solved_links(problem: Problem, problem_path: str, result_path: str) -> Problem:
    """``problem`` on the links its result file records, when they differ from the problem's own.

    A result is judged against what it was solved for: a solve on the command line with
    ``--bandwidth``/``--latency`` records those links in its result file. One note on stderr
    names both when they differ.
    """
    import sys

    from ..formats import result_links
    from ..model.devices import default_links

    recorded = result_links(result_path)
    own = problem.links if problem.links is not None else default_links()
    if recorded is None or recorded == own:
        return problem
    try:
        moved = problem.with_devices(list(problem.devices), links=recorded, constraints=problem.constraints)
    except OptpartError:  # the recorded overrides name other devices: the device check reports it
        return problem
    print(f"optpart: note: {safe(result_path)} was solved for links {_links_text(recorded)}; judged against "
          f"them, not {safe(problem_path)}'s {_links_text(own)} (give --bandwidth/--latency to choose)",
          file=sys.stderr)
    return moved


def _links_text(links) -> str:
    from ..units import format_bandwidth

    pairs = f" and {len(links.pairs)} per-pair values" if links.pairs else ""
    return f"{format_bandwidth(links.bandwidth)} + {format_time(links.latency)}{pairs}"


def _check_result_devices(problem: Problem, problem_path: str, result_path: str, doc: dict, *,
                          flags: bool = False) -> None:
    """Refuse, in one line, a result document ``doc`` computed for other devices than ``problem``'s;
    with ``flags`` (devices from the command line) only other device ids are refused, other
    capacities or speeds are taken with one note on stderr."""
    recorded = doc.get("devices")
    if not isinstance(recorded, list):
        return  # an older or hand-written result: judged against the problem's devices
    theirs = [(str(d.get("id")), float(d.get("memory", 0)), float(d.get("speed", 1.0)))
              for d in recorded if isinstance(d, dict)]
    ours = [(dev.id, float(dev.memory), float(dev.speed)) for dev in problem.devices]
    if theirs != ours:
        def brief(devs: list[tuple[str, float, float]]) -> str:
            return ", ".join(f"{i} {format_bytes(m)}" + (f" x{s:g}" if s != 1 else "") for i, m, s in devs[:4]) + \
                (f" ... ({len(devs)} devices)" if len(devs) > 4 else "")

        if flags:
            if [t[0] for t in theirs] != [o[0] for o in ours]:
                raise OptpartError(f"{result_path} was computed for devices [{brief(theirs)}] but the device flags "
                                   f"give [{brief(ours)}]: a placement cannot move to other devices; drop "
                                   "--devices, or solve again on these devices")
            import sys

            print(f"note: {safe(result_path)} was computed for devices [{brief(theirs)}]; read on [{brief(ours)}] "
                  "as the device flags ask", file=sys.stderr)
            return

        raise OptpartError(f"{result_path} was computed for devices [{brief(theirs)}] but {problem_path} has "
                           f"[{brief(ours)}]: give the problem the result was solved on, or set the devices with "
                           "--devices/--memory/--speed")
