"""Reading, validating and writing big graphs: seconds and peak memory at 10^5 and 10^6 nodes.

Each step runs in a fresh Python process (so each peak RSS is that step's own):

* ``read json.gz``: gunzip + JSON parse (orjson when installed);
* ``validate``: the parsed document to a checked :class:`optpart.Problem`;
* ``load json.gz``: both, through :func:`optpart.load`;
* ``write npz`` / ``load npz``: the columnar format (``docs/formats.md``);
* ``write result``: a placement's result JSON (``optpart solve -o``), from a trivial placement.

Usage::

    python benchmarks/io_scale.py                 # 10^5 and 10^6 (builds the 10^6 graph in a temp dir if
                                                  # instances/scale/transformer-1m.json.gz is absent, ~1 min)
    python benchmarks/io_scale.py --sizes 1e5     # quick
    python benchmarks/io_scale.py --e2e           # also `optpart solve FILE.npz -o r.json` under /usr/bin/time -v

Timings depend on the machine and its load; compare steps within one run.
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

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, {root!r})
import numpy as np
import optpart
from optpart.formats import _io, load, save
from optpart.formats.optpart_json import problem_from_dict, result_to_json
step, src, out = sys.argv[1], sys.argv[2], sys.argv[3]
t0 = time.perf_counter()
if step == "read json.gz":
    doc = _io.parse_json(_io.read_bytes(src), src)
elif step == "validate":
    doc = _io.parse_json(_io.read_bytes(src), src)
    t0 = time.perf_counter()
    problem_from_dict(doc)
elif step in ("load json.gz", "load npz"):
    load(src)
elif step == "write npz":
    p = load(src)
    t0 = time.perf_counter()
    save(p, out)
elif step == "write result":
    p = load(src)
    r = optpart.evaluate(p, np.arange(p.n_nodes) % p.n_devices, solver="bench")
    t0 = time.perf_counter()
    _io.write_bytes(out, result_to_json(r, p).encode("utf-8"))
seconds = time.perf_counter() - t0
print(json.dumps({{"seconds": seconds, "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}))
"""


def _child(step: str, src: Path, out: Path) -> dict:
    code = CHILD.format(root=str(ROOT))
    proc = subprocess.run([sys.executable, "-c", code, step, str(src), str(out)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{step} failed: {proc.stderr.strip().splitlines()[-1] if proc.stderr else proc.returncode}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _instance(size: str, tmp: Path) -> Path:
    if size == "1e5":
        return ROOT / "instances" / "scale" / "transformer-1e5.json.gz"
    committed = ROOT / "instances" / "scale" / "transformer-1m.json.gz"
    if committed.exists():
        return committed
    import importlib.util

    spec = importlib.util.spec_from_file_location("make", ROOT / "instances" / "make.py")
    make = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make)
    print("building the 10^6-node graph (about a minute)...", file=sys.stderr)
    make.write("scale/transformer-1m.json.gz", root=tmp)
    return tmp / "scale" / "transformer-1m.json.gz"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1e5,1e6", help="comma list of 1e5 and/or 1e6")
    ap.add_argument("--e2e", action="store_true", help="also time `optpart solve FILE.npz -o r.json` (default solver)")
    args = ap.parse_args()
    try:
        import orjson  # noqa: F401
        parser = "orjson"
    except ImportError:
        parser = "json (install optpart[fast] for orjson)"
    print(f"JSON parser: {parser}")
    print("| graph | step | seconds | peak RSS (MiB) |")
    print("|---|---|---:|---:|")
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        for size in args.sizes.split(","):
            src = _instance(size.strip(), tmp)
            npz = tmp / f"{size}.npz"
            for step, source, out in (("read json.gz", src, tmp / "x"), ("validate", src, tmp / "x"),
                                      ("load json.gz", src, tmp / "x"), ("write npz", src, npz),
                                      ("load npz", npz, tmp / "x"), ("write result", npz, tmp / "r.json")):
                m = _child(step, source, out)
                print(f"| {size} | {step} | {m['seconds']:.2f} | {m['rss_mib']:.0f} |", flush=True)
            if args.e2e:
                cmd = ["/usr/bin/time", "-v", sys.executable, "-m", "optpart", "solve", str(npz),
                       "-o", str(tmp / "r.json")]
                t0 = time.perf_counter()
                proc = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))
                wall = time.perf_counter() - t0
                rss = next((line.split(":")[1].strip() for line in proc.stderr.splitlines()
                            if "Maximum resident set size" in line), "?")
                print(f"| {size} | optpart solve .npz -o (exit {proc.returncode}) | {wall:.2f} | "
                      f"{int(rss) / 1024:.0f} |" if rss.isdigit() else f"| {size} | e2e | {wall:.2f} | ? |")


if __name__ == "__main__":
    main()
