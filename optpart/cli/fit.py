"""``optpart fit``: will it fit? The smallest capacity per device, or the smallest device count.

``optpart fit FILE --devices K`` bisects the capacity (see :mod:`optpart.fit`);
``optpart fit FILE --memory SIZE`` searches the device count (``--devices`` then caps it).
Both print the answer, a proven lower bound and the placement found there.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from pathlib import Path

from ..errors import OptpartError
from ..fit import min_capacity, min_devices, on_devices
from ..formats import load, save_result
from ..solvers.registry import solver_names
from ..pipeline import check_micro_batches
from .pipeline import add_micro_batch_argument
from ..progress import progress
from ..solvers.spec import MEMORY_MODELS
from ..text import safe
from ..units import format_bytes
from .common import (
    Command,
    add_device_arguments,
    add_plugin_argument,
    add_run_arguments,
    apply_device_arguments,
    check_sizes,
    hardware_options,
    parse_option,
)
from .summary import costs_line, format_summary, plural


def _cmd_fit(args: argparse.Namespace) -> int:
    options = dict(parse_option(o) for o in args.option or [])
    model = args.memory_model
    if not args.tolerance > 0:
        raise OptpartError(f"--tolerance {args.tolerance} must be > 0")
    raw = load(args.file)
    base = copy.copy(args)
    base.memory = None
    if args.memory is not None:
        memory = check_sizes(args.memory, "--memory")
        if len(memory) != 1:
            raise OptpartError(f"--memory {args.memory!r}: fit --memory takes one size (the device it counts)")
        memory = memory[0]
        base.devices = args.devices if args.devices is not None else (raw.n_devices or 1)
        problem = apply_device_arguments(raw, base)
        micro_batches = check_micro_batches(args.micro_batches, problem)
        with progress(f"fit {safe(Path(args.file).name)}") as bar:
            fit = min_devices(problem, memory, args.solver, memory_model=model, max_devices=args.devices,
                              seed=args.seed, time_limit=args.time_limit, options=options,
                              micro_batches=micro_batches, report=bar.stage)
    else:
        problem = apply_device_arguments(raw, base)
        micro_batches = check_micro_batches(args.micro_batches, problem)
        # A live line on a terminal (silent when piped): elapsed time and the last probe (each a whole solve).
        with progress(f"fit {safe(Path(args.file).name)}") as bar:
            fit = min_capacity(problem, problem.n_devices, args.solver, memory_model=model, tolerance=args.tolerance,
                               seed=args.seed, time_limit=args.time_limit, options=options,
                               micro_batches=micro_batches, report=bar.stage)
    placed = None if fit.result is None else on_devices(problem, fit.devices, fit.capacity)
    if placed is not None and micro_batches > 1:  # a pipelined result is over its plan's unrolled step
        placed = fit.result.source_problem
    if fit.result is not None:
        fit.result.options.update(hardware_options(args))  # evaluate/show/plot price the problem the same way
    if args.out and fit.result is not None:
        save_result(fit.result, placed, args.out)
    if args.json:
        sys.stdout.write(json.dumps(fit.to_dict(placed if placed is not None else problem), indent=1) + "\n")
    else:
        print(_text(problem, fit))
        if fit.result is not None:
            print()
            print(format_summary(placed, fit.result))
    if fit.result is None:
        proven = fit.searched == "devices" and fit.lower_bound == float("inf")
        print(f"optpart: {'infeasible' if proven else 'unknown'}: {fit.reason}", file=sys.stderr)
        return 1
    return 0


def _text(problem, fit) -> str:
    lines = [f"problem      {problem.name}: {plural(problem.n_nodes, 'node')}, {plural(problem.n_edges, 'edge')}",
             f"solver       {fit.solver} ({fit.memory_model} memory model), {plural(len(fit.probes), 'solve')}",
             costs_line(problem).replace("costs     ", "costs        ", 1)]
    if fit.searched == "capacity":
        got = "none found" if fit.capacity is None else f"{format_bytes(fit.capacity)} per device"
        lines.append(f"capacity     {got} on {plural(fit.devices, 'device')}")
        lines.append(f"lower bound  {format_bytes(fit.lower_bound)} per device (proven for any placement)")
    elif fit.lower_bound == float("inf"):  # proven: no count of these devices holds the graph
        lines.append(f"devices      none: no number of {format_bytes(fit.capacity)} devices fits (proven for any "
                     "placement)")
    else:
        got = "none found" if fit.devices is None else str(fit.devices)
        lines.append(f"devices      {got} of {format_bytes(fit.capacity)}")
        lines.append(f"lower bound  {plural(int(fit.lower_bound), 'device')} (proven for any placement)")
    if fit.reason:
        lines.append(f"{'reason' if fit.lower_bound == float('inf') else 'note'}       {fit.reason}")
    return "\n".join(lines)


def _arguments(p: argparse.ArgumentParser) -> None:
    """The arguments of ``optpart fit``."""
    p.add_argument("file", help="problem file: optpart JSON (.json, .json.gz), STG (.stg) or dnn-partitioning JSON")
    p.add_argument("--solver", "-s", default="heuristic",
                   help=f"solver name (default heuristic); one of: {', '.join(solver_names())}")
    add_device_arguments(p, hardware=True)
    add_micro_batch_argument(p, "default: the count the file records, else 1")
    p.add_argument("--tolerance", type=float, default=0.01, help="relative precision of the capacity (default 0.01)")
    p.add_argument("--memory-model", choices=MEMORY_MODELS, default=None,
                   help="memory model the placement must fit (default peak: liveness; equal to static on graphs "
                        "without the param/output/temp split; see docs/model.md)")
    add_run_arguments(p, who="each solve")
    add_plugin_argument(p)
    p.add_argument("--out", "-o", metavar="FILE", help="write the placement found as optpart result JSON (default: not written)")
    p.add_argument("--json", action="store_true", help="print JSON (keys capacity, devices, lower_bound, result)")


#: ``optpart fit`` (registered by :func:`optpart.cli.build_parser`)
COMMANDS = (Command("fit", "smallest capacity per device (or device count) at which a solver places the graph",
                    _arguments, _cmd_fit),)
