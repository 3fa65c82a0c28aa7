"""``optpart evaluate``: re-score a result file against its problem and check every claim."""

from __future__ import annotations

import argparse
import json
import sys

from ..evaluate import violations
from ..formats import load, load_result, read_text, result_to_json
from ..units import format_time
from .common import add_device_arguments, apply_device_arguments, format_summary


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


def register(sub) -> None:
    p = sub.add_parser("evaluate", help="re-score a result file against its problem and check it")
    p.add_argument("problem")
    p.add_argument("result")
    add_device_arguments(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_cmd_evaluate)
