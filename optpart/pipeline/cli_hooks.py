"""Command-line hooks of the pipelined step: the ``--micro-batches`` flag and the problem a
pipelined result file is read against (``evaluate``, ``show``, ``export``)."""

from __future__ import annotations

import json
from pathlib import Path

from ..model.problem import Problem
from .step import PipelineStep, check_micro_batches

__all__ = ["add_micro_batch_argument", "pipelined_for_result", "micro_batches_in_result"]


def add_micro_batch_argument(parser, default_help: str = "default 1: one step of the whole batch") -> None:
    """Add ``--micro-batches M`` to a command (validated later by :func:`check_micro_batches`).

    Parameters
    ----------
    parser
        An argparse (sub)parser.
    default_help
        What happens without the flag.
    """
    parser.add_argument("--micro-batches", "-M", metavar="M", default=None,
                        help="pipeline one step as M micro-batches through one placement, the schedule "
                             f"found (docs/model.md section 7; {default_help})")


def pipelined_for_result(problem: Problem, micro_batches, doc: dict | str | Path | None = None) -> Problem:
    """The problem a result is judged on: the unrolled step for ``M > 1``, else ``problem``.

    Parameters
    ----------
    problem
        One step of the whole batch.
    micro_batches
        The command line's ``--micro-batches`` (``None``: not given).
    doc
        The result file's JSON, or its path; without the flag its ``options.micro_batches``
        is used.

    Returns
    -------
    Problem
        ``problem`` itself when ``M`` is 1.
    """
    if micro_batches is None:
        micro_batches = _options_micro_batches(doc)
    m = check_micro_batches(micro_batches, problem)
    return problem if m == 1 else PipelineStep(problem, m).unrolled()


def _options_micro_batches(doc) -> object:
    if isinstance(doc, (str, Path)):
        return micro_batches_in_result(doc)
    opts = doc.get("options") if isinstance(doc, dict) else None
    return opts.get("micro_batches", 1) if isinstance(opts, dict) else 1


def micro_batches_in_result(path: str | Path) -> object:
    """``options.micro_batches`` of a result file (1 when absent or unreadable here: the
    file's own reader reports what is wrong with it). The JSON is parsed only when the text
    mentions ``micro_batches``, so an ordinary result of 10^6 nodes is not read twice.

    Parameters
    ----------
    path
        The result file (optpart JSON, optionally gzipped).

    Returns
    -------
    object
        The recorded count as the file gives it (validated later by
        :func:`~optpart.pipeline.step.check_micro_batches`), or 1.
    """
    from ..formats import read_bytes

    try:
        raw = read_bytes(Path(path))
    except Exception:  # noqa: BLE001 -- the result's reader names the problem
        return 1
    if b'"micro_batches"' not in raw:
        return 1
    try:
        return _options_micro_batches(json.loads(raw))
    except ValueError:
        return 1
