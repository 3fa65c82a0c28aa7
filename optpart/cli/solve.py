"""``optpart solve``: place a problem with a solver and print (or write) the result."""

from __future__ import annotations

import argparse
import sys

from ..errors import OptpartError
from ..formats import load, result_to_json, save_result
from ..progress import progress, set_quiet
from ..api import solve
from ..pipeline.schedules import ORDER_NAMES
from ..solvers import Interrupted
from ..solvers.registry import DEFAULT_MEMORY_MODEL, DEFAULT_SOLVER, solver_names
from ..solvers.spec import MEMORY_MODELS
from .common import (Command, Terminated, add_device_arguments, add_plugin_argument, add_run_arguments,
                     apply_device_arguments, check_time, hardware_options, parse_option)
from .summary import format_summary
from ..text import safe
from ..pipeline.step import CPU_ACTION_SECONDS, batch_note, check_micro_batches
from ..units import format_time
from .pipeline import add_micro_batch_argument, pipeline_lines


def _cmd_solve(args: argparse.Namespace) -> int:
    if args.out and "=" in args.out and not args.out.endswith((".json", ".json.gz", ".gz")):
        raise OptpartError(f"--out {safe(args.out)!r} looks like a solver option; solver options are "
                           "--option KEY=VALUE (-o is --out, the result file)")
    if args.quiet:
        set_quiet(True)
    # A live "reading / solving / writing" line with elapsed time on a terminal (silent when
    # piped or with -q): a large graph takes seconds to read and a solver may run minutes.
    with progress(f"optpart solve {safe(args.file)}") as bar:
        bar.stage("reading")
        problem = apply_device_arguments(load(args.file), args)
        options = dict(parse_option(o) for o in args.option or [])
        micro_batches = check_micro_batches(args.micro_batches, problem)
        if args.action_overhead is not None:
            if micro_batches == 1 and args.solver not in ORDER_NAMES:
                raise OptpartError("--action-overhead is the pipeline runtime's cost per action: it needs "
                                   "--micro-batches M (M > 1)")
            options["action_overhead"] = check_time(args.action_overhead, "--action-overhead")
        note = batch_note(problem, micro_batches)
        bar.stage(f"solving with {safe(args.solver)}"
                  + (f" (time limit {args.time_limit:g} s)" if args.time_limit else ""))
        stopped: KeyboardInterrupt | None = None
        try:
            result = solve(problem, args.solver, memory_model=args.memory_model, time_limit=args.time_limit,
                           seed=args.seed, micro_batches=micro_batches, **options)
        except Interrupted as exc:  # Ctrl-C or SIGTERM: the best plan so far is still written
            result, stopped = exc.result, exc.__context__ if isinstance(exc.__context__, KeyboardInterrupt) else exc
        result.options.update(hardware_options(args))  # evaluate/show/plot price the problem the same way
        base = problem
        if result.source_problem is not None and micro_batches > 1:  # over its plan's unrolled step
            problem = result.source_problem
        if args.out:
            bar.stage("writing")
            save_result(result, problem, args.out)
    if args.json:
        sys.stdout.write(result_to_json(result, problem))
    else:
        print(format_summary(problem, result))
        lines = pipeline_lines(base, result) if micro_batches > 1 else []
        if lines:
            print()
            print("\n".join(lines))
        if args.out:
            print(f"\nresult written to {args.out}")
    if note:
        print(f"optpart: {note}", file=sys.stderr)
    if stopped is not None:
        kept = f"; it is written to {args.out}" if args.out and result.ok else ""
        print(f"optpart: {safe(result.message)} ({result.status.value}){kept}", file=sys.stderr)
        return 143 if isinstance(stopped, Terminated) else 130
    if not result.ok:
        print(f"optpart: {result.status.value}: {safe(result.message or 'no placement found')}", file=sys.stderr)
        return 1
    return 0


def _arguments(p: argparse.ArgumentParser) -> None:
    """The arguments of ``optpart solve``."""
    p.add_argument("file", help="problem file: optpart JSON (.json, .json.gz), STG (.stg) or dnn-partitioning JSON")
    p.add_argument("--solver", "-s", default=DEFAULT_SOLVER,
                   help=f"solver name (default {DEFAULT_SOLVER}); one of: {', '.join(solver_names())}")
    p.add_argument("--memory-model", choices=MEMORY_MODELS, default=DEFAULT_MEMORY_MODEL,
                   help=f"memory model the placement must respect (default {DEFAULT_MEMORY_MODEL}: liveness; "
                        "equal to static on graphs without the param/output/temp split); see docs/model.md")
    add_device_arguments(p, hardware=True)
    add_micro_batch_argument(p, "default: the count the file records (optpart import --micro-batches), else 1")
    p.add_argument("--action-overhead", metavar="TIME",
                   help="with --micro-batches: seconds torch's pipeline runtime spends of its own on every action, "
                        f"e.g. 1ms (default: {format_time(CPU_ACTION_SECONDS)} when the file's operator times were "
                        "measured on a CPU, else 0; docs/model.md section 7)")
    add_run_arguments(p)
    add_plugin_argument(p)
    p.add_argument("--out", "-o", metavar="FILE", help="write the result as optpart JSON (default: not written)")
    p.add_argument("--json", action="store_true", help="print the result JSON instead of the table")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress display on the terminal")


#: ``optpart solve`` (registered by :func:`optpart.cli.build_parser`)
COMMANDS = (Command("solve", "place a problem with a solver and print the result", _arguments, _cmd_solve),)
