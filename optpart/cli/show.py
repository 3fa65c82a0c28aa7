"""``optpart show``: where each module (or phase, or operator type) of a model was placed.

``optpart show result.json --problem gpt2.json --by module --depth 3`` prints one row per
module, cut at ``--depth`` levels of its ``named_modules()`` path (``transformer.h.0`` is
depth 3), with its class when the import recorded it: the devices its nodes run on (with
node counts), its run time and its memory (static: what its nodes hold for the whole step).
Nodes without the key (``module`` is written by the PyTorch importer and, from scoped node
names, the ONNX one; ``phase`` and ``op`` by both) are grouped under ``-``.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import numpy as np

from ..errors import OptpartError
from ..formats import load_result
from ..model.problem import Problem
from ..units import format_bytes, format_time
from .common import Command, add_device_arguments, load_problem_for_result, table
from .summary import costs_line

__all__ = ["COMMANDS", "group_rows", "block_depth"]

_KEYS = ("module", "phase", "op", "module_class")


def _key(meta: dict, by: str, depth: int) -> str:
    value = meta.get(by)
    if value is None:
        return "-"
    value = str(value)
    if by == "module":
        if value == "":
            return "(root)"
        if depth > 0:
            return ".".join(value.split(".")[:depth])
    return value


def group_rows(problem: Problem, placement: np.ndarray, *, by: str = "module", depth: int = 2) -> list[dict[str, Any]]:
    """One dict per group, in first-appearance order: ``group``, ``nodes``, ``devices``
    (device id -> node count), ``time_s`` (run time on the devices chosen) and
    ``memory_bytes`` (static memory of its nodes).

    Parameters
    ----------
    problem : Problem
        The problem; ``by="module"`` needs ``module`` node metadata (a graph imported from PyTorch).
    placement : numpy.ndarray
        A device index per node.
    by : {"module", "phase", "op", "module_class"}
        The node metadata key to group by.
    depth : int
        Module paths are cut to this many components (``by="module"`` only).

    Returns
    -------
    list of dict
        The rows described above.
    """
    if by not in _KEYS:
        raise OptpartError(f"--by {by!r}: choose one of {', '.join(_KEYS)}")
    meta = problem.node_meta or [{}] * problem.n_nodes
    if by == "module" and not any("module" in m for m in meta):
        raise OptpartError(f"'{problem.name}' has no node metadata 'module' (import the model with "
                           f"`optpart import` from PyTorch); try --by op")
    duration = problem.duration(placement)
    rows: dict[str, dict[str, Any]] = {}
    for v in range(problem.n_nodes):
        key = _key(meta[v], by, depth)
        row = rows.setdefault(key, {"group": key, "nodes": 0, "devices": {}, "time_s": 0.0, "memory_bytes": 0.0})
        dev = problem.device_ids[int(placement[v])]
        row["nodes"] += 1
        row["devices"][dev] = row["devices"].get(dev, 0) + 1
        row["time_s"] += float(duration[v])
        row["memory_bytes"] += float(problem.memory[v])
    return list(rows.values())


def block_depth(problem: Problem) -> int:
    """The module depth where a model's repeated blocks appear: one more than the position of
    the first numeric component of a module path (``transformer.h.0`` -> 3, ``model.layers.0``
    -> 3, ``blocks.0`` -> 2), the shallowest over the model; 2 when no path has one.

    Parameters
    ----------
    problem : Problem
        A problem with ``module`` node metadata (or ``meta.module_classes``).

    Returns
    -------
    int
        The depth ``optpart show`` uses by default.
    """
    paths = set((problem.meta or {}).get("module_classes") or {})
    paths |= {str(m["module"]) for m in (problem.node_meta or []) if m.get("module")}
    found = [next((i + 1 for i, part in enumerate(p.split(".")) if part.isdigit()), None) for p in paths]
    found = [d for d in found if d is not None]
    return min(found) if found else 2


def _cmd_show(args: argparse.Namespace) -> int:
    if args.depth is not None and args.depth < 0:
        raise OptpartError(f"--depth {args.depth} must be >= 0 (0: full module paths)")
    problem = load_problem_for_result(args, args.problem, args.result)
    if args.depth is None:
        args.depth = block_depth(problem)
    result = load_result(args.result, problem)
    if not result.ok:
        raise OptpartError(f"result {args.result!r} has no placement (status {result.status.value})")
    rows = group_rows(problem, result.placement, by=args.by, depth=args.depth)
    classes = problem.meta.get("module_classes") or {}
    if args.by == "module" and classes:
        for r in rows:
            r["class"] = classes.get("" if r["group"] == "(root)" else r["group"], "-")
    if args.json:
        json.dump(rows, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 0
    order = {d: i for i, d in enumerate(problem.device_ids)}
    with_class = any("class" in r for r in rows)
    body = [[r["group"], *([r["class"]] if with_class else []), str(r["nodes"]),
             ", ".join(f"{d} ({n})" for d, n in sorted(r["devices"].items(), key=lambda kv: order[kv[0]])),
             format_time(r["time_s"]), format_bytes(r["memory_bytes"])] for r in rows]
    print(table(body, [args.by, *(["class"] if with_class else []), "nodes", "devices (nodes)", "time",
                       "static memory"]))
    print(f"\n{costs_line(problem)}" + (f"\nmodules cut at depth {args.depth} (--depth: 0 for full paths)"
                                         if args.by == "module" else ""))
    return 0


def _arguments(p: argparse.ArgumentParser) -> None:
    """The arguments of ``optpart show``."""
    p.add_argument("result", help="result file (optpart JSON)")
    p.add_argument("--problem", "-p", required=True, metavar="FILE", help="the problem file the result is for")
    p.add_argument("--by", choices=_KEYS, default="module", help="group nodes by this metadata key (default module)")
    p.add_argument("--depth", type=int, default=None,
                   help="module path levels to keep, e.g. 3 for transformer.h.0 (default: the depth where the "
                        "model's repeated blocks appear, else 2; 0 = full paths)")
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    add_device_arguments(p)
    from .pipeline import add_micro_batch_argument  # a pipelined result: every micro-batch's copies counted

    add_micro_batch_argument(p, "default: the result's own options.micro_batches, else 1")


#: ``optpart show`` (registered by :func:`optpart.cli.build_parser`)
COMMANDS = (Command("show", "a result per module (or phase, op): devices, time, memory", _arguments, _cmd_show),)
