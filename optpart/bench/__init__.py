"""Benchmark sweeps, their results database, reports and plots (``docs/bench.md``).

``optpart bench`` runs instances x solvers x device counts x memory scales into an
SQLite file and resumes where it stopped; ``optpart report`` summarises the file;
``optpart plot`` draws a schedule or the gap distributions (matplotlib, the ``plot``
extra, imported only when plotting). Re-exports only.
"""

from .db import connect, load_runs
from .report import format_report, summarize
from .sweep import RunSpec, SweepOutcome, plan_sweep, problem_hash, run_sweep, scale_memory
from ..evaluate import memory_timeline

__all__ = ["plan_sweep", "run_sweep", "RunSpec", "SweepOutcome", "scale_memory", "problem_hash",
           "connect", "load_runs", "summarize", "format_report", "memory_timeline"]
