"""``optpart info``: size, work, memory and lower bounds of a problem."""

from __future__ import annotations

import argparse
import json
import math
from typing import Any

from ..bounds import all_bounds
from ..formats import load
from ..hardware import costs_label, links_label
from ..units import format_bytes, format_flops, format_time
from .common import Command, add_device_arguments, apply_device_arguments, table
from ..text import safe


def _cmd_info(args: argparse.Namespace) -> int:
    problem = load(args.file)
    if any(getattr(args, a) is not None for a in ("devices", "memory", "speed", "bandwidth", "latency",
                                                  "device_type", "dtype", "link")):
        problem = apply_device_arguments(problem, args)
    bounds = all_bounds(problem)
    info: dict[str, Any] = {
        "name": problem.name, "nodes": problem.n_nodes, "edges": problem.n_edges,
        "total_time_s": float(problem.time.sum()), "total_memory_bytes": float(problem.memory.sum()),
        "largest_node_memory_bytes": float(problem.memory.max()) if problem.n_nodes else 0.0,
        "total_edge_bytes": float(problem.edge_bytes.sum()),
        "colocation_groups": len(problem.groups), "pinned_nodes": int((problem.pin >= 0).sum()),
        "devices": [{"id": d.id, "memory": d.memory, "speed": d.speed} for d in problem.devices],
        "bounds_s": bounds, "lower_bound_s": max(bounds.values()), "costs": costs_label(problem),
    }
    if problem.links is not None:
        info["links"] = {"latency_s": problem.links.latency, "bandwidth_bytes_per_s": problem.links.bandwidth,
                         "pairs": len(problem.links.pairs)}
    # The screening of Problem.infeasibility under both memory models (peak is the default).
    reasons = {m: problem.infeasibility(m) if problem.n_devices else None for m in ("peak", "static")}
    info["infeasible"] = reasons["peak"]
    info["infeasible_static"] = reasons["static"]
    if args.json:
        print(json.dumps(info, indent=2, default=lambda x: "inf" if x == math.inf else str(x)))
        return 0
    rows = [
        ["nodes", f"{problem.n_nodes}"], ["edges", f"{problem.n_edges}"],
        ["costs", costs_label(problem).removeprefix("costs ")],
        *([["total FLOPs", format_flops(problem.meta["total_flops"])]] if "total_flops" in problem.meta else []),
        ["total work", format_time(info["total_time_s"])],
        ["total memory", format_bytes(info["total_memory_bytes"])],
        ["largest node", format_bytes(info["largest_node_memory_bytes"])],
        ["tensor bytes", format_bytes(info["total_edge_bytes"])],
        ["colocation groups", str(len(problem.groups))],
    ]
    if problem.links is not None:
        rows.append(["links", links_label(problem.links)])
    if problem.n_devices:
        caps = sorted({format_bytes(d.memory) for d in problem.devices})
        rows.append(["devices", f"{problem.n_devices} ({', '.join(caps)})"])
    rows += [["bound: critical path", format_time(bounds["critical_path"])],
             ["bound: work / speed", format_time(bounds["work"])],
             ["bound: largest node", format_time(bounds["largest_node"])],
             ["lower bound", format_time(info["lower_bound_s"])]]
    if problem.n_devices:
        # Name both models: a graph sized for peak (the default) may be infeasible under the
        # static sum, which counts every tensor for the whole step (docs/model.md section 3).
        for model in ("peak", "static"):
            label = f"memory ({model}{', default' if model == 'peak' else ''})"
            rows.append([label, f"infeasible: {reasons[model]}" if reasons[model]
                         else "no obstruction found (a solve decides)"])
    print(f"{safe(problem.name)}\n" + table(rows, ["", ""]).split("\n", 2)[2])
    return 0


def _arguments(p: argparse.ArgumentParser) -> None:
    """The arguments of ``optpart info``."""
    p.add_argument("file", help="problem file: optpart JSON (.json, .json.gz, .npz), STG (.stg) or dnn-partitioning JSON")
    add_device_arguments(p, hardware=True)
    p.add_argument("--json", action="store_true", help="print the figures as JSON (default: a table)")


#: ``optpart info`` (registered by :func:`optpart.cli.build_parser`)
COMMANDS = (Command("info", "size, work, memory and lower bounds of a problem", _arguments, _cmd_info),)
