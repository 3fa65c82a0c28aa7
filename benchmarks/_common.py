"""Helpers shared by the benchmark scripts: timing, peak memory, tables, big random graphs."""

from __future__ import annotations

import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from optpart import Problem  # noqa: E402
from optpart.generators import uniform_devices  # noqa: E402
from optpart.model.devices import Links  # noqa: E402


def peak_rss_mib() -> float:
    """Peak resident memory of this process so far, in MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def timed(fn: Callable, repeat: int = 1):
    """(median seconds, last value) over ``repeat`` runs."""
    times, value = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        value = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), value


def table(rows: Sequence[Sequence], header: Sequence[str]) -> str:
    """A Markdown table."""
    cells = [[str(c) for c in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(header)]
    line = lambda r: "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |"
    return "\n".join([line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, cells)])


def random_dag(n: int, edges_per_node: int = 2, window: int = 64, k: int = 8, seed: int = 0) -> Problem:
    """A random DAG of ``n`` nodes and about ``edges_per_node * n`` edges, each edge from one of the
    ``window`` previous nodes (a stand-in for a long operator graph), built with numpy."""
    rng = np.random.default_rng(seed)
    dst = np.repeat(np.arange(1, n), edges_per_node)
    back = rng.integers(1, window + 1, size=dst.size)
    src = np.maximum(dst - back, 0)
    key = np.unique(src * n + dst)
    src, dst = key // n, key % n
    time_s = rng.uniform(1e-4, 1e-3, size=n)
    memory = rng.uniform(1e6, 1e8, size=n)
    nbytes = rng.uniform(1e5, 1e7, size=src.size)
    return Problem.from_arrays([f"v{i}" for i in range(n)], time_s, memory, src, dst, nbytes,
                               devices=uniform_devices(k, float(memory.sum())), links=Links(1e-5, 2.5e10),
                               name=f"random-{n}")
