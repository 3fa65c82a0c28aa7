"""``optpart export``: write a result as a file a framework reads (docs/apply.md).

``--format device_map`` writes the accelerate/transformers ``device_map`` that runs fastest
as accelerate runs it (one device at a time) within memory, and prints that time with the
hardware profile it assumes; ``--format split_points`` writes the modules where pipeline stages
begin; ``--format placement`` writes ``{node id: device id}``; ``--format pipeline`` writes a
pipelined result's stages, ranks and action lists for ``torch.distributed.pipelining`` (and
``optpart run``) with its predicted step time. Each module-level format is one builder in
:data:`BUILDERS` (problem, result, arguments) -> (document, plan or None, notes).

Exit codes: 0 written; 1 written, but the module-level plan does not fit memory or
constraints (the reason is printed); 2 bad input, or the plan is not a pipeline.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

from .. import export
from ..errors import OptpartError
from ..progress import progress, set_quiet
from ..text import safe
from ..formats import load_result
from .common import Command, add_device_arguments, load_problem_for_result

def _device_map(problem, result, args: argparse.Namespace):
    plan = export.module_plan(problem, result, depth=args.depth)
    doc = {k: (problem.device_ids[d] if args.ids else d) for k, d in plan.device_map.items()}
    return doc, plan, []


def _split_points(problem, result, args: argparse.Namespace):
    sp = export.split_points(problem, result, depth=args.depth)
    return sp.to_dict(), sp.plan, sp.notes()


def _placement(problem, result, args: argparse.Namespace):
    return export.placement_map(problem, result), None, []


#: ``--format`` -> builder of (JSON document, module-level plan or None, notes to print).
BUILDERS = {"device_map": _device_map, "split_points": _split_points, "placement": _placement}
FORMATS = (*BUILDERS, "pipeline")


def _cmd_export(args: argparse.Namespace) -> int:
    if args.quiet:
        set_quiet(True)
    if args.format == "pipeline":
        return _export_pipeline(args)
    # A live line with elapsed time on a terminal (silent when piped or with -q): the search scores
    # a few dozen module-level plans.
    with progress(f"export {safe(Path(args.result).name)}") as bar:
        bar.stage("reading")
        problem = load_problem_for_result(args, args.problem, args.result)
        result = load_result(args.result, problem)
        bar.stage(f"building the {args.format}")
        doc, plan, notes = BUILDERS[args.format](problem, result, args)
    text = json.dumps(doc, indent=1) + "\n"
    to_stdout = args.out in (None, "-")
    if to_stdout:
        sys.stdout.write(text)
    else:
        with open(args.out, "w", encoding="utf-8") as fh:
            fh.write(text)
    info = sys.stderr if to_stdout else sys.stdout
    if plan is not None:
        if not args.quiet or not plan.fits:
            out = info if plan.fits else sys.stderr
            print(plan.summary(problem), file=out)
            print("\n".join(plan.memory_lines(problem)), file=out)
            if plan.advice:
                print(plan.advice, file=out)
        if plan.kept_whole and not args.quiet:
            shown = ", ".join(repr(m) for m in plan.kept_whole[:5]) + (" ..." if len(plan.kept_whole) > 5 else "")
            print(f"kept whole: {len(plan.kept_whole)} module(s) ({shown}): --no-split classes, or modules holding "
                  "parameters the import did not name", file=info)
        if plan.split_modules and not args.quiet:
            shown = ", ".join(plan.split_modules[:5]) + (" ..." if len(plan.split_modules) > 5 else "")
            print(f"the operator placement split {len(plan.split_modules)} module(s) across devices: {shown}",
                  file=info)
    for line in notes:
        print(line, file=info)
    if not to_stdout and not args.quiet:
        print(f"wrote {args.format} -> {args.out}", file=info)
    return 0 if plan is None or plan.fits else 1


def _export_pipeline(args: argparse.Namespace) -> int:
    """``--format pipeline``: ``pipeline.json`` (and ``schedule.csv`` for the plan's own order) in a
    folder, or ``FILE.json`` with ``FILE.csv`` beside it."""
    if args.out in (None, "-"):
        raise OptpartError("--format pipeline writes a folder or a .json file: give -o DIR or -o FILE.json")
    base = load_problem_for_result(args, args.problem, args.result, unrolled=False)
    result = load_result(args.result, load_problem_for_result(args, args.problem, args.result))
    exp = export.torch_pipeline(base, result)
    out = Path(args.out)
    if out.suffix == ".json":
        out.parent.mkdir(parents=True, exist_ok=True)
        doc_path, csv_path = out, out.with_suffix(".csv")
    else:
        out.mkdir(parents=True, exist_ok=True)
        doc_path, csv_path = out / "pipeline.json", out / "schedule.csv"
    if exp.custom:
        with open(csv_path, "w", newline="", encoding="utf-8") as fh:
            csv.writer(fh).writerows(exp.rows)
        exp.doc["schedule_csv"] = csv_path.name
    doc_path.write_text(json.dumps(exp.doc, indent=1) + "\n", encoding="utf-8")
    if not args.quiet:
        print(exp.summary())
        for line in exp.notes:
            print(line)
        print(f"wrote pipeline -> {doc_path}" + (f" and {csv_path}" if exp.custom else ""))
    return 0


def _depth(text: str):
    if text == "auto":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer or 'auto', got {text!r}") from None


def _arguments(p: argparse.ArgumentParser) -> None:
    """The arguments of ``optpart export``."""
    p.add_argument("result", help="result file (optpart solve -o ...)")
    p.add_argument("--problem", "-p", required=True, metavar="FILE", help="the problem file the result is for")
    p.add_argument("--format", "-f", choices=FORMATS, default="device_map",
                   help="device_map (accelerate/transformers), split_points (torch pipelining), placement "
                        "(node id -> device id) or pipeline (a pipelined result's stages and action lists for "
                        "torch's pipeline runtime and optpart run; -o DIR or FILE.json); default device_map")
    p.add_argument("-o", "--out", metavar="FILE", help="output JSON file (default: standard output)")
    p.add_argument("--ids", action="store_true", help="device_map values are device ids, not indices")
    p.add_argument("--depth", type=_depth, metavar="N|auto",
                   help="keep modules whole down to N path components (3: each transformer.h.N block of GPT-2); "
                        "auto: the coarsest that fits and is as fast; default: as fine as the modules go")
    p.add_argument("-q", "--quiet", action="store_true", help="print only problems")
    add_device_arguments(p)


#: ``optpart export`` (registered by :func:`optpart.cli.build_parser`)
COMMANDS = (Command("export", "write a result as a device map, pipeline split points, a placement or a pipeline",
                    _arguments, _cmd_export),)
