"""Our ``pardnn`` (the seed method) side by side with the authors' C++ ParDNN; prints a Markdown table.

Graphs: planted-optimum DAGs (:func:`optpart.generators.planted_dag`: K = 4 devices,
CCR 1, capacities 1.05x the planted loads, i.e. tight memory), 2,000 and 20,000 nodes
(``--sizes``), several seeds (``--seeds``); static memory model. Every placement is
scored by optpart's evaluator against the planted optimum: gap = makespan / optimum - 1.

Columns: the original's gap in memory mode (``BALANCE_MEMORY``: keeps memory on these
graphs) and without it (breaks memory; the largest device's static memory over its
capacity is shown), ours, whether each respects memory, and the time of each (the
binary's wall time; ours through ``optpart.solve``).

The original is run through the shared tools, never built here:

* ``pardnn_run.py`` (converts the problem, runs the binary, scores its placement) from
  ``$PARDNN_TOOLS`` or, by default, ``../shared/tools`` next to the repository;
* the binary from ``$PARDNN_BIN``, built beforehand with the shared ``pardnn_build.sh``
  (``PARDNN_BIN=$(pardnn_build.sh GIT_DIR)``).

When either is missing the script says so and prints our column alone. The original's
placement is scored with the canonical schedule (``--schedule insertion``: with the
insertion schedule our solvers use); ours with the schedule ``pardnn`` returns.

    PARDNN_BIN=/tmp/pardnn-build/pardnn python benchmarks/pardnn_vs_original.py
    python benchmarks/pardnn_vs_original.py --sizes 2000 --seeds 11 12 13
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _common import table

import optpart
from optpart.generators import planted_dag

ROOT = Path(__file__).resolve().parent.parent
TOOLS = Path(os.environ.get("PARDNN_TOOLS", ROOT.parent / "shared" / "tools"))


def find_original() -> tuple[Path | None, Path | None, str]:
    """``(runner, binary, why-not)``: the shared runner and the built binary, when both exist."""
    runner = TOOLS / "pardnn_run.py"
    if not runner.is_file():
        return None, None, f"the shared runner {runner} is missing (set PARDNN_TOOLS)"
    binary = os.environ.get("PARDNN_BIN")
    if not binary:
        return runner, None, ("PARDNN_BIN is not set; build the original with "
                              f"{TOOLS / 'pardnn_build.sh'} GIT_DIR and set PARDNN_BIN to the binary it prints")
    path = Path(binary)
    if not (path.is_file() and os.access(path, os.X_OK)):
        return runner, None, f"PARDNN_BIN={binary} is not an executable"
    return runner, path, ""


def run_original(runner: Path, binary: Path, problem_file: Path, memory: bool, schedule: str) -> dict:
    """Run the C++ ParDNN on ``problem_file``; its makespan, memory verdict and times."""
    with tempfile.TemporaryDirectory(prefix="pardnn-vs-") as tmp:
        out = Path(tmp) / "result.json"
        cmd = [sys.executable, str(runner), str(problem_file), "--bin", str(binary), "--out", str(out),
               "--keep-invalid", "--schedule", schedule] + (["--memory"] if memory else [])
        proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
        if proc.returncode != 0 or not out.exists():
            return {"error": (proc.stdout + proc.stderr).strip().splitlines()[-1:] or ["failed"]}
        res = json.loads(out.read_text())
    meta = res["meta"]["pardnn"]
    ratio = max(v for v in meta["static_memory_ratio"].values() if v is not None)
    return {"makespan": float(res["makespan"]), "memory_ok": bool(meta["memory_respected"]),
            "memory_ratio": ratio, "seconds": float(meta["wall_seconds"])}


def run_ours(problem) -> dict:
    """Our ``pardnn`` under the static model: its makespan, memory verdict and solve time."""
    t0 = time.perf_counter()
    r = optpart.solve(problem, "pardnn", memory_model="static")
    dt = time.perf_counter() - t0
    if not r.status.has_solution:
        return {"error": [r.message]}
    ok = not optpart.violations(problem, r)
    return {"makespan": float(r.makespan), "memory_ok": ok, "seconds": dt}


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def main(argv=None) -> int:
    """Run both on every graph and print the table (exit 0)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[2000, 20000], help="node counts (default 2000 20000)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3], help="generator seeds (default 1 2 3)")
    ap.add_argument("--k", type=int, default=4, help="devices (default 4)")
    ap.add_argument("--ccr", type=float, default=1.0, help="communication-to-computation ratio (default 1)")
    ap.add_argument("--schedule", choices=("canonical", "insertion"), default="canonical",
                    help="schedule the original's placement is scored with (default canonical)")
    args = ap.parse_args(argv)
    runner, binary, why = find_original()
    if binary is None:
        print(f"original ParDNN not available, its columns are skipped: {why}\n")
    rows, ours_gaps, orig_gaps, wins = [], [], [], []
    for n in args.sizes:
        for seed in args.seeds:
            p = planted_dag(n, args.k, ccr=args.ccr, seed=seed)
            opt = float(p.meta["optimum"])
            ours = run_ours(p)
            mem = nomem = None
            if binary is not None:
                with tempfile.TemporaryDirectory(prefix="pardnn-vs-") as tmp:
                    f = Path(tmp) / f"{p.name}.json"
                    optpart.save(p, f)
                    mem = run_original(runner, binary, f, True, args.schedule)
                    nomem = run_original(runner, binary, f, False, args.schedule)
            row = [f"{n:,}", seed]
            for res in (mem, nomem):
                if res is None:
                    row += ["-", "-"]
                elif "error" in res:
                    row += ["failed: " + " ".join(res["error"])[:60], "-"]
                else:
                    note = "" if res["memory_ok"] else f" (memory {res['memory_ratio']:.3f}x)"
                    row += [_pct(res["makespan"] / opt - 1) + note, f"{res['seconds']:.2f} s"]
            if "error" in ours:
                row += ["failed: " + ours["error"][0][:60], "-", "-"]
            else:
                g = ours["makespan"] / opt - 1
                ours_gaps.append(g)
                row += [_pct(g), "yes" if ours["memory_ok"] else "NO", f"{ours['seconds']:.2f} s"]
                if mem and "makespan" in mem:
                    og = mem["makespan"] / opt - 1
                    orig_gaps.append(og)
                    wins.append(g <= og and ours["memory_ok"])
            rows.append(row)
    print(f"## pardnn vs the original C++ ParDNN: planted DAGs, K={args.k}, CCR {args.ccr:g}, "
          "capacity 1.05x the planted loads, static model\n")
    print(table(rows, ["nodes", "seed", "original, memory mode: gap", "time", "original, no memory mode: gap",
                       "time", "ours: gap", "ours within memory", "ours: time"]))
    if ours_gaps:
        line = f"\nmean gap: ours {_pct(float(np.mean(ours_gaps)))}"
        if orig_gaps:
            line += (f", original (memory mode) {_pct(float(np.mean(orig_gaps)))}; ours at or below the "
                     f"original's memory-mode gap and within memory on {sum(wins)} of {len(wins)} graphs")
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
