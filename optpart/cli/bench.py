"""The ``bench``, ``report`` and ``plot`` subcommands of ``optpart`` (see ``docs/bench.md``).

Registered through :data:`optpart.cli.COMMAND_MODULES` (this module's :data:`COMMANDS`).
The commands are thin: the work is in :mod:`~optpart.bench.sweep`,
:mod:`~optpart.bench.report` and :mod:`~optpart.bench.plots`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ..errors import OptpartError
from .common import Command

__all__ = ["COMMANDS"]


def _list(text: str, kind: type, flag: str) -> list:
    try:
        values = [kind(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise OptpartError(f"{flag} {text!r}: expected {kind.__name__} values separated by commas") from None
    if not values:
        raise OptpartError(f"{flag} {text!r}: no value given")
    return values


def _solver_options(items: list[str] | None) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for item in items or []:
        head, sep, value = item.partition("=")
        solver, dot, key = head.partition(".")
        if not sep or not dot or not solver or not key:
            raise OptpartError(f"--option {item!r}: expected SOLVER.KEY=VALUE, e.g. cpsat.workers=2")
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError:
            parsed = value
        out.setdefault(solver.strip(), {})[key.strip()] = parsed
    return out


def _cmd_bench(args: argparse.Namespace) -> int:
    from ..bench import db as _db
    from ..bench.report import format_report, summarize
    from ..bench.sweep import iter_instances, plan_sweep, run_sweep
    from .common import check_bandwidth, check_sizes, check_time

    files = iter_instances(args.instances)
    if not files:
        raise OptpartError("no problem files found in " + " ".join(args.instances))
    devices = _list(args.devices, int, "--devices") if args.devices else None
    scales = _list(args.memory_scale, float, "--memory-scale")
    solvers = _list(args.solvers, str, "--solvers")
    # --devices here is a list: plan_sweep resolves one count at a time.
    if args.memory is not None:
        check_sizes(args.memory, "--memory")
    if args.bandwidth is not None:
        check_bandwidth(args.bandwidth, "--bandwidth")
    if args.latency is not None:
        check_time(args.latency, "--latency")
    device_args = {"memory": args.memory, "speed": args.speed, "bandwidth": args.bandwidth,
                   "latency": args.latency, "device_type": args.device_type, "dtype": args.dtype, "link": args.link}
    options = _solver_options(args.option)
    if args.memory_model != "peak":  # the registry's default; a per-solver --option wins
        for name in solvers:
            options.setdefault(name, {}).setdefault("memory_model", args.memory_model)
    specs = plan_sweep(files, solvers, devices=devices, memory_scales=scales, time_limit=args.time_limit,
                       seed=args.seed, solver_options=options, device_args=device_args)
    if args.micro_batches:  # every run once per micro-batch count (docs/model.md section 7)
        from ..bench.pipeline import pipelined_specs

        specs = pipelined_specs(specs, _list(args.micro_batches, str, "--micro-batches"))
    outcome = run_sweep(specs, args.db, executor=args.executor, jobs=args.jobs,
                        retry_errors=args.retry_errors, progress=sys.stderr)
    all_rows = _db.load_runs(args.db)
    mine = _db.load_runs(args.db, keys=outcome.keys)
    print(f"{outcome.planned} runs: {outcome.ran} run now, {outcome.skipped} already in {args.db}, "
          f"{outcome.errors} errors")
    print(format_report(summarize(mine, reference=all_rows), "markdown", legend=True), end="")
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    from ..bench import db as _db
    from ..bench.report import format_report, per_instance, summarize

    rows = _db.load_runs(args.db)
    table = summarize(rows) if args.by == "setting" else per_instance(rows)
    text = format_report(table, args.format, view=args.by, legend=args.format == "markdown")
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
        print(f"report written to {args.out}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


def _cmd_plot(args: argparse.Namespace) -> int:
    from ..bench import plots

    path = Path(args.source)
    suffix = Path(args.out).suffix.lower().lstrip(".")
    formats = plots.image_formats()
    if suffix not in formats:
        raise OptpartError(f"--out {args.out}: matplotlib writes {', '.join(sorted(formats))}; give one of these "
                           "extensions (e.g. gantt.png)")
    if plots.is_sqlite(path):
        plots.save_figure(plots.plot_gaps(args.source), args.out)
    else:
        if not args.problem:
            raise OptpartError(f"{path} is a result file: give its problem with --problem FILE")
        from .common import load_problem_for_result
        from ..formats import load_result

        problem = load_problem_for_result(args, args.problem, args.source)
        result = load_result(args.source, problem)
        if not result.ok:
            raise OptpartError(f"{path}: status '{result.status.value}' has no schedule to draw")
        plots.save_figure(plots.plot_schedule(problem, result), args.out)
    print(f"plot written to {args.out}", file=sys.stderr)
    return 0


def _bench_arguments(p: argparse.ArgumentParser) -> None:
    """The arguments of ``optpart bench``."""
    from .common import add_device_arguments, add_plugin_argument, add_run_arguments

    p.add_argument("instances", nargs="+", metavar="INSTANCE", help="problem files, or directories of them")
    p.add_argument("--solvers", "-s", default="heuristic", metavar="A,B",
                   help="solver names (default heuristic)")
    add_device_arguments(p, hardware=True)
    # add_device_arguments defines --devices K; here it is a list of counts.
    for action in p._actions:
        if action.dest == "devices":
            action.type, action.metavar = str, "K[,K...]"
            action.help = "device counts to sweep, e.g. 2,4,8 (default: each instance's own)"
    p.add_argument("--memory-scale", default="1.0", metavar="S[,S...]",
                   help="capacity = S x the instance's capacity, or S x total memory / K when unlimited (default 1.0)")
    p.add_argument("--memory-model", choices=("peak", "static"), default="peak",
                   help="memory model every placement must respect (default peak; docs/model.md section 3)")
    p.add_argument("--micro-batches", "-M", metavar="M[,M...]",
                   help="micro-batch counts to sweep: each run pipelines one step as M micro-batches through a "
                        "chain of stages (docs/model.md section 7; solvers also the named schedules, e.g. gpipe, "
                        "1f1b, zbv); default: each file's own count (optpart import --micro-batches), else 1")
    add_run_arguments(p, who="each run", option_metavar="SOLVER.KEY=VALUE")
    p.add_argument("--db", default="results.sqlite", help="results database (default results.sqlite)")
    p.add_argument("--jobs", "-j", type=int, default=1, help="worker processes (default 1)")
    p.add_argument("--executor", default="local", metavar="local|inline|dask://HOST:PORT",
                   help="where runs execute (default: a local process pool of --jobs workers)")
    p.add_argument("--retry-errors", action="store_true", help="rerun the runs recorded as errors")
    add_plugin_argument(p)


def _report_arguments(p: argparse.ArgumentParser) -> None:
    """The arguments of ``optpart report``."""
    from ..bench.report import FORMATS, VIEWS

    p.add_argument("db", help="results database written by optpart bench")
    p.add_argument("--format", "-f", choices=FORMATS, default="markdown", help="output format (default markdown)")
    p.add_argument("--by", choices=VIEWS, default="setting",
                   help="one line per solver and setting, or one per run (instance) (default setting)")
    p.add_argument("--out", "-o", metavar="FILE", help="write to FILE (default: standard output)")


def _plot_arguments(p: argparse.ArgumentParser) -> None:
    """The arguments of ``optpart plot``."""
    from .common import add_device_arguments
    from .pipeline import add_micro_batch_argument

    p.add_argument("source", help="a result JSON (needs --problem) or a results database")
    p.add_argument("--problem", "-p", metavar="FILE",
                   help="the problem of a result file (default: none; required with a result file)")
    add_device_arguments(p)
    add_micro_batch_argument(p, "default: the result's own options.micro_batches; bars coloured by micro-batch")
    p.add_argument("--out", "-o", required=True, metavar="FILE", help="image file, e.g. gantt.png")


#: ``optpart bench``, ``report`` and ``plot`` (registered by :func:`optpart.cli.build_parser`)
COMMANDS = (
    Command("bench", "run solvers over instances x device counts x memory scales into SQLite", _bench_arguments,
            _cmd_bench, description="Run the cross product of instances, solvers, device counts and memory "
                                    "scales; one row per run in an SQLite file. Rerunning skips finished runs."),
    Command("report", "summarise a results database per solver and setting", _report_arguments, _cmd_report),
    Command("plot", "draw a result's schedule and memory, or a database's gaps (PNG, SVG, PDF)", _plot_arguments,
            _cmd_plot),
)
