"""``optpart evaluate``: judge a result file against its problem.

Everything is recomputed and compared with every claim of the file (makespan,
finish times, status, lower bound, gap, memory per device; see :mod:`optpart.judge`).
Verdict "invalid" only for a false claim; "valid; optimality not re-proved" when a
certificate (a bound above the evaluator's, an optimal or infeasible claim) cannot be
re-proved here. Exit 0: no false claim and there is a placement; 1: a false claim, or
no placement; 2: bad input.
"""

from __future__ import annotations

import argparse
import json
import sys

from ..errors import FormatError
from ..formats import read_text, result_to_json
from ..formats.optpart_json import result_from_dict
from ..judge import judge
from .pipeline import add_micro_batch_argument, pipelined_for_result, plan_false_claims
from .common import Command, add_device_arguments, load_problem_for_result
from .summary import format_summary


def _cmd_evaluate(args: argparse.Namespace) -> int:
    base = load_problem_for_result(args, args.problem, args.result, judge=True, unrolled=False)
    problem = pipelined_for_result(base, args.micro_batches, args.result)
    try:
        doc = json.loads(read_text(args.result))
    except json.JSONDecodeError as exc:
        raise FormatError(f"{args.result}: not JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(doc, dict):
        raise FormatError(f"{args.result}: a result is a JSON object")
    result = result_from_dict(doc, problem)
    verdict = judge(problem, doc, result, trust_bound=args.trust_bound)
    if result.placement is not None:  # a pipelined result runs its plan: devices and action order
        verdict.false_claims += plan_false_claims(base, problem, doc, result)
        verdict.valid = not verdict.false_claims
    if args.json:
        out = json.loads(result_to_json(result, problem))
        out["verdict"] = verdict.to_dict()
        sys.stdout.write(json.dumps(out, indent=1) + "\n")
    else:
        print(format_summary(problem, result))
        print("\nverdict   " + verdict.wording)
        for line in verdict.false_claims:
            print(f"  false claim: {line}")
        for line in verdict.unverifiable:
            print(f"  not verifiable: {line}")
        for line in verdict.notes:
            print(f"  note: {line}")
    if verdict.false_claims:
        print(f"optpart: false claim: {verdict.false_claims[0]}"
              + (f" (and {len(verdict.false_claims) - 1} more)" if len(verdict.false_claims) > 1 else ""),
              file=sys.stderr)
        return 1
    return 0 if result.ok else 1


def _arguments(p: argparse.ArgumentParser) -> None:
    """The arguments of ``optpart evaluate``."""
    p.add_argument("problem", help="the problem file the result is for")
    p.add_argument("result", help="result file to judge (optpart solve -o ...)")
    add_device_arguments(p)
    add_micro_batch_argument(p, "default: the result's own options.micro_batches, else 1")
    p.add_argument("--trust-bound", action="store_true",
                   help="accept a stated lower bound (and so an optimal claim) the evaluator cannot check: "
                        "listed as a note, not as 'not verifiable'")
    p.add_argument("--json", action="store_true", help="print the recomputed result with a 'verdict' field")


#: ``optpart evaluate`` (registered by :func:`optpart.cli.build_parser`)
COMMANDS = (Command("evaluate", "judge a result file: recompute everything and compare every claim",
                    _arguments, _cmd_evaluate),)
