"""Sweeps of pipelined steps: ``optpart bench ... --micro-batches 1,4,8`` (docs/bench.md).

A run of ``M > 1`` micro-batches has ``micro_batches: M`` among its options (so it is its
own run in the database, resumed like any other) and solves through :func:`optpart.solve`.
Its step is another problem than the one-step problem of the same file, so its
``problem_hash`` is the file's hash combined with ``M`` (:func:`pipelined_hash`): best known
makespans and bounds are compared between runs of one ``M`` only, and the report names
the solver of such runs ``solver (M=8)`` (:func:`run_label`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any, Mapping, Sequence

from ..pipeline.step import check_micro_batches

__all__ = ["pipelined_hash", "pipelined_specs", "run_label"]


def pipelined_hash(problem_hash: str, micro_batches: int) -> str:
    """The identity of a step of ``micro_batches`` micro-batches of a problem.

    Parameters
    ----------
    problem_hash
        The one-step problem's hash (:func:`optpart.bench.sweep.problem_hash`).
    micro_batches
        ``M``.

    Returns
    -------
    str
        ``problem_hash`` itself for ``M = 1``, else a SHA-256 (hex) of it and ``M``.
    """
    if micro_batches == 1:
        return problem_hash
    return hashlib.sha256(f"{problem_hash}|micro_batches={micro_batches}".encode()).hexdigest()


def pipelined_specs(specs: Sequence[Any], micro_batches: Sequence[Any]) -> list[Any]:
    """Every run of ``specs`` once per micro-batch count (in the order given, counts inner).

    Parameters
    ----------
    specs
        :class:`~optpart.bench.sweep.RunSpec` from :func:`~optpart.bench.sweep.plan_sweep`.
    micro_batches
        Counts ``M`` (each checked by :func:`~optpart.pipeline.step.check_micro_batches`
        against the run's problem: it must divide a recorded batch).

    Returns
    -------
    list
        New specs: ``M = 1`` leaves a spec as it is; ``M > 1`` adds ``micro_batches`` to its
        options and combines its hash with ``M``.
    """
    out = []
    for spec in specs:
        for raw in micro_batches:
            m = check_micro_batches(raw, spec.problem)
            if m == 1:
                out.append(spec)
                continue
            options = dict(sorted({**spec.options, "micro_batches": m}.items()))
            out.append(dataclasses.replace(spec, options=options, problem_hash=pipelined_hash(spec.problem_hash, m)))
    return out


def run_label(row: Mapping[str, Any]) -> str:
    """The solver name of a database row, with ``(M=...)`` for a pipelined run.

    Parameters
    ----------
    row
        A row of :func:`optpart.bench.db.load_runs` (``solver`` and ``options`` JSON).

    Returns
    -------
    str
        For example ``heuristic`` or ``heuristic (M=8)``.
    """
    try:
        options = json.loads(row.get("options") or "{}")
    except (TypeError, ValueError):
        options = {}
    m = options.get("micro_batches") if isinstance(options, dict) else None
    return f"{row['solver']} (M={m})" if m not in (None, 1) else str(row["solver"])
