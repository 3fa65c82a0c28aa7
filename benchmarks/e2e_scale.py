"""Where the time of ``optpart solve`` goes on big graphs: read / screen / solve / check / write.

For each file (default: the bundled ``instances/scale/transformer-1e5.json.gz`` and, when
built with ``python instances/make.py scale``, ``transformer-1m.npz`` and
``transformer-1m.json.gz``) two fresh processes run, so each peak RSS is that of one run:

* a staged run doing what the CLI does, one step at a time: ``read`` (parse, build and
  validate the :class:`~optpart.model.problem.Problem`: :func:`optpart.formats.load`), ``screen``
  (:meth:`Problem.infeasibility`, the registry's pre-check), ``solve`` (the solver module
  alone), ``check`` (:func:`optpart.solvers.base.finalize`: evaluate + every rule of
  docs/model.md + the memory model asked for), ``write`` (:func:`optpart.formats.save_result`);
  Wall and CPU seconds are both reported;
* the command line itself, ``optpart solve FILE --solver S -o OUT``, timed from outside
  (wall and CPU seconds, and its peak RSS, as ``/usr/bin/time -v`` reports it; :func:`cli` can
  also sample the sum of PSS over its processes, in a run of its own).

The machine this runs on may be shared: repeat (``--repeat``) and read medians.

    python benchmarks/e2e_scale.py
    python benchmarks/e2e_scale.py --files instances/scale/transformer-1m.npz instances/scale/transformer-1m.json.gz
    python benchmarks/e2e_scale.py --files instances/scale/transformer-1m.npz --devices 8 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

_STAGED = r"""
import json, resource, sys, time
sys.path.insert(0, {root!r})
t = [time.perf_counter()]
c = [time.process_time()]
from optpart.formats import load, save_result
from optpart.model.devices import with_resolved_devices
from optpart.solvers.registry import get_solver, solver_spec, _run_model, DEFAULT_MEMORY_MODEL
from optpart.solvers.base import finalize

t.append(time.perf_counter()); c.append(time.process_time())
p = with_resolved_devices(load({file!r}), devices={devices!r})
rss_read = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
t.append(time.perf_counter()); c.append(time.process_time())
model = DEFAULT_MEMORY_MODEL
reason = p.infeasibility(model)
t.append(time.perf_counter()); c.append(time.process_time())
status = "infeasible (screened)"
if reason is None:  # as the registry: a screened-out problem never reaches the solver
    sol = get_solver({solver!r})(p, memory_model=_run_model(p, solver_spec({solver!r}), model))
    t.append(time.perf_counter()); c.append(time.process_time())
    r = finalize(p, sol, {solver!r}, 0.0, {{}}, memory_model=model)
    t.append(time.perf_counter()); c.append(time.process_time())
    save_result(r, p, {out!r})
    status = r.status.value
while len(t) < 7:
    t.append(time.perf_counter()); c.append(time.process_time())
names = ["import", "read", "screen", "solve", "check", "write"]
row = {{n: b - a for n, a, b in zip(names, t, t[1:])}}
row.update({{"cpu_" + n: b - a for n, a, b in zip(names, c, c[1:])}})
row.update(nodes=p.n_nodes, devices=p.n_devices, status=status,
           screen_reason=reason, rss_read_mib=rss_read, rss_mib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
print(json.dumps(row))
"""


def staged(file: str, solver: str, devices: int | None, out: str) -> dict:
    """One staged run in a fresh process: seconds per step and its peak RSS."""
    code = _STAGED.format(root=str(ROOT), file=file, solver=solver, devices=devices, out=out)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(res.stdout.strip().splitlines()[-1])


def cli(file: str, solver: str, devices: int | None, out: str, options: list[str] | None = None,
        sample_memory: bool = False) -> dict:
    """``optpart solve`` end to end in a fresh process: wall seconds, CPU seconds (user + system,
    its reaped children's included) and its peak memory.

    Peak memory (``rss_mib``) is the kernel's peak RSS of the process (``os.wait4``, as
    ``/usr/bin/time -v`` reports it). With ``sample_memory`` it is the larger of that and the
    sum of the proportional set sizes (PSS) of the process and its children, sampled every
    0.25 s: the heuristic forks a second process on large graphs, and the kernel's figure is
    then the larger of the two processes', not what both hold together (PSS splits each shared
    page between the processes sharing it, so the sum counts every page once). Reading a 1 GiB
    process's PSS costs the kernel 15-30 ms and holds up that process's page faults, so a
    sampled run's times are not the clean ones: time a run without sampling. ``processes`` is
    how many were seen at once (1 when not sampled); ``options`` are ``KEY=VALUE`` solver
    options."""
    cmd = [sys.executable, "-m", "optpart", "solve", file, "--solver", solver, "-q", "-o", out]
    if devices is not None:
        cmd += ["--devices", str(devices)]
    for option in options or []:
        cmd += ["--option", option]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, env=env)
        summed, seen = 0, 1
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG if sample_memory else 0)
            if pid:
                break
            tree = _process_tree(proc.pid)
            summed = max(summed, sum(_pss_kib(p) for p in tree))
            seen = max(seen, len(tree))
            time.sleep(0.25)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode not in (0, 1):
            err.seek(0)
            raise SystemExit(f"optpart solve failed ({proc.returncode}): "
                             f"{err.read().decode(errors='replace').strip()[-300:]}")
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "user": usage.ru_utime,
            "sys": usage.ru_stime, "rss_mib": max(usage.ru_maxrss, summed) / 1024, "processes": seen}


def _process_tree(pid: int) -> list[int]:
    """``pid`` and its descendants (Linux ``/proc``; just ``pid`` elsewhere)."""
    out = [pid]
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                for child in f.read().split():
                    out += _process_tree(int(child))
    except OSError:
        pass
    return out


def _pss_kib(pid: int) -> int:
    """A process's proportional set size in KiB (0 when unknown or gone)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    scale = ROOT / "instances/scale"
    default = [str(scale / "transformer-1e5.json.gz")]
    default += [str(f) for f in (scale / "transformer-1m.npz", scale / "transformer-1m.json.gz") if f.exists()]
    ap.add_argument("--files", nargs="+", default=default)
    ap.add_argument("--solver", default="heuristic")
    ap.add_argument("--devices", type=int, default=None,
                    help="--devices K as on the command line (default: the file's suggested devices)")
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args(argv)
    steps = ["read", "screen", "solve", "check", "write"]
    print(f"Wall seconds of the staged run, and the CLI end to end:\n"
          f"| file | devices | status | {' | '.join(steps)} | staged total | RSS after read MiB | staged RSS MiB "
          f"| CLI wall | CLI CPU (user+sys) | CLI RSS MiB |")
    print("|" + "---|" * (len(steps) + 9))
    cpu_lines: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        out = str(Path(tmp) / "r.json")
        for f in args.files:
            rows = [staged(f, args.solver, args.devices, out) for _ in range(args.repeat)]
            clis = [cli(f, args.solver, args.devices, out) for _ in range(args.repeat)]
            med = {s: statistics.median(r[s] for r in rows) for s in steps + ["import"]}
            total = statistics.median(sum(r[s] for s in steps + ["import"]) for r in rows)
            print(f"| {Path(f).name} | {rows[0]['devices']} | {rows[0]['status']} | "
                  + " | ".join(f"{med[s]:.2f}" for s in steps)
                  + f" | {total:.2f} | {max(r['rss_read_mib'] for r in rows):.0f} | {max(r['rss_mib'] for r in rows):.0f} | "
                  f"{statistics.median(c['wall'] for c in clis):.2f} | {statistics.median(c['cpu'] for c in clis):.2f} "
                  f"({statistics.median(c['user'] for c in clis):.2f}+{statistics.median(c['sys'] for c in clis):.2f}) | "
                  f"{max(c['rss_mib'] for c in clis):.0f} |")
            cpu = {s: statistics.median(r["cpu_" + s] for r in rows) for s in steps + ["import"]}
            cpu_lines.append(f"| {Path(f).name} | {rows[0]['devices']} | " + " | ".join(f"{cpu[s]:.2f}" for s in steps)
                             + f" | {sum(cpu.values()):.2f} |")
    print(f"\nCPU seconds of the staged run (less sensitive to a busy machine than wall time):\n"
          f"| file | devices | {' | '.join(steps)} | total |\n" + "|" + "---|" * (len(steps) + 3))
    print("\n".join(cpu_lines))
    print(f"\nmedians of {args.repeat} run(s) each; seconds; staged total includes importing optpart; "
          f"solver {args.solver}, memory model peak")


if __name__ == "__main__":
    main()
