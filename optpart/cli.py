"""The ``optpart`` command line: a thin shell over the Python API.

Commands: ``solve``, ``evaluate``, ``info`` and ``solvers`` live here; other
modules add theirs through :data:`COMMAND_MODULES` (each exposes
``register(subparsers)`` and sets ``func`` on its parser).

Exit codes: 0 a placement was found (or the command succeeded); 1 no placement
(status ``infeasible`` or ``unknown``, or an invalid result under ``evaluate``);
2 bad input or usage. Errors print one line on stderr, never a traceback
(set ``OPTPART_DEBUG=1`` to see one).
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import sys
from typing import Any, Sequence

import numpy as np

from . import __version__
from .bounds import all_bounds
from .errors import OptpartError
from .evaluate import violations
from .formats import load, load_result, read_text, result_to_json, save_result
from .problem import Device, Links, Problem
from .result import Result
from .solvers.registry import SOLVERS, solve, solver_names
from .units import format_bandwidth, format_bytes, format_time, parse_bandwidth, parse_bytes, parse_time

__all__ = ["main", "build_parser", "add_device_arguments", "apply_device_arguments", "COMMAND_MODULES"]

#: Modules that add subcommands: each has ``register(subparsers)``.
COMMAND_MODULES: list[str] = ["optpart.bench.commands", "optpart.importcli"]

#: Links used when neither the file nor the command line gives any.
DEFAULT_BANDWIDTH = "25GB/s"
DEFAULT_LATENCY = "10us"


# ---------------------------------------------------------------------- shared arguments
def add_device_arguments(parser: argparse.ArgumentParser) -> None:
    """``--devices/--memory/--speed/--bandwidth/--latency``: devices and links for a graph file."""
    g = parser.add_argument_group("devices and links (override the file's)")
    g.add_argument("--devices", "-k", type=int, metavar="K", help="number of devices")
    g.add_argument("--memory", "-m", metavar="SIZE", help="capacity of each device, e.g. 16GiB (default: the file's, else unlimited)")
    g.add_argument("--speed", metavar="S[,S...]", help="relative speed, one value or one per device (default 1)")
    g.add_argument("--bandwidth", metavar="BW", help=f"link bandwidth, e.g. 25GB/s (default: the file's, else {DEFAULT_BANDWIDTH})")
    g.add_argument("--latency", metavar="T", help=f"link latency, e.g. 10us (default: the file's, else {DEFAULT_LATENCY})")


def apply_device_arguments(problem: Problem, args: argparse.Namespace) -> Problem:
    """The problem with the devices and links the command line asks for."""
    if args.devices is not None and args.devices < 1:
        raise OptpartError(f"--devices {args.devices} must be at least 1")
    links = problem.links
    if args.bandwidth is not None or args.latency is not None or links is None:
        base = links or Links(parse_time(DEFAULT_LATENCY), parse_bandwidth(DEFAULT_BANDWIDTH))
        links = Links(parse_time(args.latency) if args.latency is not None else base.latency,
                      parse_bandwidth(args.bandwidth) if args.bandwidth is not None else base.bandwidth,
                      base.pairs if links is not None else ())
    if args.devices is None and args.memory is None and args.speed is None:
        if problem.n_devices == 0:
            raise OptpartError(f"'{problem.name}' has no devices; give them with --devices K --memory SIZE")
        if links is problem.links:
            return problem
        return problem.with_devices(list(problem.devices), links=links, constraints=problem.constraints)
    k = args.devices if args.devices is not None else (problem.n_devices or None)
    if k is None:
        raise OptpartError(f"'{problem.name}' has no devices; give their number with --devices K")
    if args.memory is not None:
        memory = parse_bytes(args.memory)
    elif problem.n_devices:
        memory = float(problem.device_memory.min())
    else:
        memory = math.inf
    if args.speed is not None:
        try:
            speeds = [float(s) for s in args.speed.split(",")]
        except ValueError:
            raise OptpartError(f"--speed {args.speed!r}: expected numbers separated by commas") from None
        if len(speeds) == 1:
            speeds = speeds * k
        if len(speeds) != k:
            raise OptpartError(f"--speed gives {len(speeds)} values for {k} devices")
        if any(not (0 < s < math.inf) for s in speeds):
            raise OptpartError(f"--speed {args.speed!r}: speeds must be positive")
    elif problem.n_devices == k:
        speeds = problem.device_speed.tolist()
    else:
        speeds = [1.0] * k
    # Keep the file's device ids (pins and link overrides name them); number any extra ones.
    old = problem.devices
    devices = [Device(old[i].id if i < len(old) else f"dev{i}",
                      memory if args.memory is not None or i >= len(old) else old[i].memory, speeds[i])
               for i in range(k)]
    if len(old) > k:
        links = Links(links.latency, links.bandwidth,
                      tuple(o for o in links.pairs if o.src in {d.id for d in devices} and o.dst in {d.id for d in devices}))
    return problem.with_devices(devices, links=links)


def _parse_option(text: str) -> tuple[str, Any]:
    if "=" not in text:
        raise OptpartError(f"--option {text!r}: expected KEY=VALUE")
    key, value = text.split("=", 1)
    try:
        return key.strip(), json.loads(value)
    except json.JSONDecodeError:
        return key.strip(), value


# ---------------------------------------------------------------------- output
def _table(rows: Sequence[Sequence[str]], header: Sequence[str]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(str(h).ljust(w) for h, w in zip(header, widths)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    for r in rows:
        lines.append("  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip())
    return "\n".join(lines)


def format_summary(problem: Problem, result: Result) -> str:
    """The human summary of a result: headline figures and one row per device."""
    lines = [
        f"problem   {problem.name}: {problem.n_nodes} nodes, {problem.n_edges} edges, {problem.n_devices} devices",
        f"solver    {result.solver}",
        f"status    {result.status.value}" + (f" ({result.message})" if result.message else ""),
    ]
    if result.ok:
        lines.append(f"makespan  {format_time(result.makespan)}   lower bound {format_time(result.lower_bound)}   "
                     f"gap {result.gap:.2%}")
    else:
        lines.append(f"lower bound {format_time(result.lower_bound)}")
    lines.append(f"time      {format_time(result.wall_seconds)}")
    if result.ok:
        other = "peak" if result.memory_model == "static" else "static"
        lines.append(f"memory    {result.memory_model} model respected; {other} shown for reference")
    if result.ok:
        busy = np.bincount(result.placement, weights=problem.duration(result.placement),
                           minlength=problem.n_devices)
        count = np.bincount(result.placement, minlength=problem.n_devices)
        rows = []
        for d, dev in enumerate(problem.devices):
            rows.append([dev.id, str(count[d]), format_time(busy[d]),
                         f"{busy[d] / result.makespan:.0%}" if result.makespan > 0 else "-",
                         format_bytes(result.memory_static[d]), format_bytes(result.memory_peak[d]),
                         format_bytes(dev.memory), f"{dev.speed:g}"])
        lines += ["", _table(rows, ["device", "nodes", "busy", "util", "static mem", "peak mem", "capacity", "speed"])]
    return "\n".join(lines)


# ---------------------------------------------------------------------- commands
def _cmd_solve(args: argparse.Namespace) -> int:
    problem = apply_device_arguments(load(args.file), args)
    options = dict(_parse_option(o) for o in args.option or [])
    result = solve(problem, args.solver, time_limit=args.time_limit, seed=args.seed, **options)
    if args.out:
        save_result(result, problem, args.out)
    if args.json:
        sys.stdout.write(result_to_json(result, problem))
    else:
        print(format_summary(problem, result))
        if args.out:
            print(f"\nresult written to {args.out}")
    if not result.ok:
        print(f"optpart: {result.status.value}: {result.message or 'no placement found'}", file=sys.stderr)
        return 1
    return 0


def _cmd_evaluate(args: argparse.Namespace) -> int:
    problem = load(args.problem)
    if any(getattr(args, a) is not None for a in ("devices", "memory", "speed", "bandwidth", "latency")) \
            or problem.n_devices == 0 or problem.links is None:
        problem = apply_device_arguments(problem, args)
    result = load_result(args.result, problem)
    found = violations(problem, result)
    reported = json.loads(read_text(args.result)).get("makespan")
    if args.json:
        sys.stdout.write(result_to_json(result, problem))
    else:
        print(format_summary(problem, result))
        if reported is not None:
            same = abs(reported - result.makespan) <= 1e-9 * max(1.0, abs(reported))
            print(f"\nreported makespan {format_time(reported)}; re-scored {format_time(result.makespan)}"
                  + ("" if same else "  (DIFFERENT)"))
    if found:
        print("optpart: invalid result: " + "; ".join(found), file=sys.stderr)
        return 1
    return 0 if result.ok else 1


def _cmd_info(args: argparse.Namespace) -> int:
    problem = load(args.file)
    if any(getattr(args, a) is not None for a in ("devices", "memory", "speed", "bandwidth", "latency")):
        problem = apply_device_arguments(problem, args)
    bounds = all_bounds(problem)
    info: dict[str, Any] = {
        "name": problem.name, "nodes": problem.n_nodes, "edges": problem.n_edges,
        "total_time_s": float(problem.time.sum()), "total_memory_bytes": float(problem.memory.sum()),
        "largest_node_memory_bytes": float(problem.memory.max()) if problem.n_nodes else 0.0,
        "total_edge_bytes": float(problem.edge_bytes.sum()),
        "colocation_groups": len(problem.groups), "pinned_nodes": int((problem.pin >= 0).sum()),
        "devices": [{"id": d.id, "memory": d.memory, "speed": d.speed} for d in problem.devices],
        "bounds_s": bounds, "lower_bound_s": max(bounds.values()),
    }
    if problem.links is not None:
        info["links"] = {"latency_s": problem.links.latency, "bandwidth_bytes_per_s": problem.links.bandwidth,
                         "pairs": len(problem.links.pairs)}
    reason = problem.infeasibility() if problem.n_devices else None
    info["infeasible"] = reason
    if args.json:
        print(json.dumps(info, indent=2, default=lambda x: "inf" if x == math.inf else str(x)))
        return 0
    rows = [
        ["nodes", f"{problem.n_nodes}"], ["edges", f"{problem.n_edges}"],
        ["total work", format_time(info["total_time_s"])],
        ["total memory", format_bytes(info["total_memory_bytes"])],
        ["largest node", format_bytes(info["largest_node_memory_bytes"])],
        ["tensor bytes", format_bytes(info["total_edge_bytes"])],
        ["colocation groups", str(len(problem.groups))],
    ]
    if problem.links is not None:
        rows.append(["links", f"{format_time(problem.links.latency)} latency, "
                              f"{format_bandwidth(problem.links.bandwidth)}"
                              + (f", {len(problem.links.pairs)} pair overrides" if problem.links.pairs else "")])
    if problem.n_devices:
        caps = sorted({format_bytes(d.memory) for d in problem.devices})
        rows.append(["devices", f"{problem.n_devices} ({', '.join(caps)})"])
    rows += [["bound: critical path", format_time(bounds["critical_path"])],
             ["bound: work / speed", format_time(bounds["work"])],
             ["bound: largest node", format_time(bounds["largest_node"])],
             ["lower bound", format_time(info["lower_bound_s"])]]
    if reason:
        rows.append(["infeasible", reason])
    print(f"{problem.name}\n" + _table(rows, ["", ""]).split("\n", 2)[2])
    return 0


def _cmd_solvers(args: argparse.Namespace) -> int:
    rows = []
    for name in solver_names():
        info = SOLVERS[name]
        state = "yes" if info.installed else f"no (pip install 'optpart[{info.extra}]')"
        rows.append([name, "exact" if info.exact else "heuristic", state, info.summary])
    print(_table(rows, ["solver", "kind", "installed", "what it does"]))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="optpart", description="Place a DNN operator graph on memory-limited devices.")
    parser.add_argument("--version", action="version", version=f"optpart {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("solve", help="place a problem with a solver and print the result")
    p.add_argument("file", help="problem file: optpart JSON (.json, .json.gz), STG (.stg) or dnn-partitioning JSON")
    p.add_argument("--solver", "-s", default="single", help=f"solver name (default single); one of: {', '.join(solver_names())}")
    add_device_arguments(p)
    p.add_argument("--time-limit", "-t", type=float, metavar="S", help="seconds the solver may use")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--option", "-o", action="append", metavar="KEY=VALUE", help="solver option, repeatable")
    p.add_argument("--out", metavar="FILE", help="write the result as optpart JSON")
    p.add_argument("--json", action="store_true", help="print the result JSON instead of the table")
    p.set_defaults(func=_cmd_solve)

    p = sub.add_parser("evaluate", help="re-score a result file against its problem and check it")
    p.add_argument("problem")
    p.add_argument("result")
    add_device_arguments(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_cmd_evaluate)

    p = sub.add_parser("info", help="size, work, memory and lower bounds of a problem")
    p.add_argument("file")
    add_device_arguments(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_cmd_info)

    p = sub.add_parser("solvers", help="list the solvers and whether they are installed")
    p.set_defaults(func=_cmd_solvers)

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
