"""What the ``optpart`` subcommands share: device and link arguments, solver options,
plain-text tables and the human summary of a result."""

from __future__ import annotations

import argparse
import json
import math
from typing import Any, Sequence

import numpy as np

from ..errors import OptpartError
from ..problem import Device, Links, Problem
from ..result import Result
from ..units import format_bytes, format_time, parse_bandwidth, parse_bytes, parse_list, parse_speed, parse_time

__all__ = ["add_device_arguments", "apply_device_arguments", "parse_option", "table", "format_summary",
           "DEFAULT_BANDWIDTH", "DEFAULT_LATENCY"]

#: Links used when neither the file nor the command line gives any.
DEFAULT_BANDWIDTH = "25GB/s"
DEFAULT_LATENCY = "10us"


def add_device_arguments(parser: argparse.ArgumentParser) -> None:
    """``--devices/--memory/--speed/--bandwidth/--latency``: devices and links for a graph file."""
    g = parser.add_argument_group("devices and links (override the file's)")
    g.add_argument("--devices", "-k", type=int, metavar="K", help="number of devices")
    g.add_argument("--memory", "-m", metavar="SIZE[,SIZE...]", help="device capacity, one value or one per device, e.g. 16GiB or 80GiB,40GiB (default: the file's, else unlimited)")
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
    memories = parse_list(args.memory, parse_bytes, "--memory") if args.memory is not None else None
    k = args.devices if args.devices is not None else (
        len(memories) if memories is not None and len(memories) > 1 else (problem.n_devices or None))
    if k is None:
        raise OptpartError(f"'{problem.name}' has no devices; give their number with --devices K")
    if memories is not None:
        if len(memories) == 1:
            memories = memories * k
        if len(memories) != k:
            raise OptpartError(f"--memory gives {len(memories)} values for {k} devices")
    memory = float(problem.device_memory.min()) if problem.n_devices else math.inf
    if args.speed is not None:
        speeds = parse_list(args.speed, parse_speed, "--speed")
        if len(speeds) == 1:
            speeds = speeds * k
        if len(speeds) != k:
            raise OptpartError(f"--speed gives {len(speeds)} values for {k} devices")
    elif problem.n_devices == k:
        speeds = problem.device_speed.tolist()
    else:
        speeds = [1.0] * k
    # Keep the file's device ids (pins and link overrides name them); number any extra ones.
    old = problem.devices
    devices = [Device(old[i].id if i < len(old) else f"dev{i}",
                      memories[i] if memories is not None else (memory if i >= len(old) else old[i].memory),
                      speeds[i])
               for i in range(k)]
    if len(old) > k:
        links = Links(links.latency, links.bandwidth,
                      tuple(o for o in links.pairs if o.src in {d.id for d in devices} and o.dst in {d.id for d in devices}))
    return problem.with_devices(devices, links=links)


def parse_option(text: str) -> tuple[str, Any]:
    if "=" not in text:
        raise OptpartError(f"--option {text!r}: expected KEY=VALUE")
    key, value = text.split("=", 1)
    try:
        return key.strip(), json.loads(value)
    except json.JSONDecodeError:
        return key.strip(), value


def table(rows: Sequence[Sequence[str]], header: Sequence[str]) -> str:
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
        lines += ["", table(rows, ["device", "nodes", "busy", "util", "static mem", "peak mem", "capacity", "speed"])]
    return "\n".join(lines)
