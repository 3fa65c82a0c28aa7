"""The bundled PyTorch-derived instances: committed files against the current importer.

For every ``instances/`` file that ``instances/make.py`` traces from PyTorch, builds it again
with the importer of this checkout (without writing anything) and prints a Markdown table of
nodes, edges, parameter memory, the peak (liveness, ``docs/model.md``) memory of the whole
step on one device, for the committed file and the rebuilt graph, and whether the rebuilt file would be
identical. Use it to see what an
importer change does to the bundled graphs before regenerating them.

    python benchmarks/instance_sizes.py [--only gpt2-training.json ...]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from _common import table

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "instances"))

import make  # noqa: E402

import optpart  # noqa: E402
from optpart.formats.optpart_json import problem_to_json  # noqa: E402
from optpart.model.memory import peak_memory  # noqa: E402
from optpart.model.problem import Problem  # noqa: E402
from optpart.units import format_bytes  # noqa: E402


def one_device_peak(problem: Problem) -> float:
    """Peak memory (bytes) of the whole step on one device, in the single-device schedule.

    Parameters
    ----------
    problem : Problem
        Any problem; its devices are replaced by one device large enough for everything.

    Returns
    -------
    float
        The liveness peak of the single-device placement.
    """
    one = problem.with_devices(1, memory=float(problem.memory.sum()) + 1.0)
    r = optpart.solve(one, "single", memory_model="static")
    return float(peak_memory(one, r.placement, r.start, r.finish).max())


def figures(problem: Problem) -> list:
    """Nodes, edges, parameter memory and one-device peak of ``problem``, as table cells.

    Parameters
    ----------
    problem : Problem
        A bundled instance.

    Returns
    -------
    list
        ``[nodes, edges, parameter memory, one-device peak]``.
    """
    return [problem.n_nodes, problem.n_edges, format_bytes(problem.meta.get("parameter_bytes", 0.0)),
            format_bytes(one_device_peak(problem))]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", nargs="*", default=None, help="instance paths relative to instances/")
    args = ap.parse_args(argv)
    rels = args.only or [rel for rel, (_, kind, _) in make.CATALOGUE.items() if kind == "torch"]
    rows = []
    for rel in rels:
        committed = optpart.load(make.HERE / rel)
        rebuilt = make.build(rel)
        same = problem_to_json(committed) == problem_to_json(rebuilt)
        rows.append([rel, *figures(committed), *figures(rebuilt), "yes" if same else "no"])
        print(f"done {rel}", file=sys.stderr, flush=True)
    print(table(rows, ["instance", "nodes", "edges", "params", "peak 1 dev",
                       "new nodes", "new edges", "new params", "new peak 1 dev", "same file"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
