"""The best plan found so far, kept while a solver runs, so that an interrupt does not lose it.

A solve can take minutes (``cpsat`` defaults to 60 s, and its incumbent comes from the
heuristic within seconds). :func:`keeping_best` opens a record for one call of
:func:`optpart.solvers.registry.solve`; every :class:`~optpart.solvers.base.Solution` with a
placement made during the call (the solver's own, and those of solvers it calls, such as the
heuristic that starts ``cpsat``) and every :func:`offer` of a solver's search lands in it.
When the call is interrupted (Ctrl-C, or SIGTERM on the command line), the registry scores
the offers with the evaluator and raises :class:`Interrupted` carrying the shortest one that
fits memory as a ``feasible`` :class:`~optpart.result.Result` (or ``unknown`` when nothing
was found yet), so the command line can write it to ``--out`` and Python code can catch it.
"""

from __future__ import annotations

import contextvars
from contextlib import contextmanager
from typing import Iterator

import numpy as np

__all__ = ["Interrupted", "keeping_best", "offer", "offers"]


class Interrupted(KeyboardInterrupt):
    """A solve stopped by the user; :attr:`result` is the best plan found before the stop.

    A ``KeyboardInterrupt`` (code that does not know it stops as before); ``result`` is a
    :class:`~optpart.result.Result` (status ``feasible``, or ``unknown`` when no plan was
    found yet) whose message and ``stats["interrupted"]`` say it was interrupted.
    """

    def __init__(self, result) -> None:
        super().__init__("interrupted")
        self.result = result


#: The plans offered during the current :func:`keeping_best` block, or ``None`` outside one.
_OFFERS: contextvars.ContextVar[list | None] = contextvars.ContextVar("optpart_offers", default=None)

#: The most plans kept: the newest win ties of count (later plans of a search are not worse).
_KEEP = 8


@contextmanager
def keeping_best() -> Iterator[list]:
    """Collect the plans offered inside the block (nested blocks share the outermost record).

    Yields
    ------
    list of (numpy.ndarray, numpy.ndarray or None)
        The offered ``(placement, start)`` pairs, oldest first (at most :data:`_KEEP`).
    """
    record = _OFFERS.get()
    if record is not None:  # a solver called by a solver: its plans go to the caller's record
        yield record
        return
    record = []
    token = _OFFERS.set(record)
    try:
        yield record
    finally:
        _OFFERS.reset(token)


def offer(placement: np.ndarray | None, start: np.ndarray | None = None) -> None:
    """Record a plan a solver holds (a copy), if a :func:`keeping_best` block is open.

    Parameters
    ----------
    placement : numpy.ndarray or None
        A device index per node (``None``: nothing to record).
    start : numpy.ndarray, optional
        The solver's start times for it (``None``: the canonical schedule).
    """
    record = _OFFERS.get()
    if record is None or placement is None:
        return
    record.append((np.array(placement, dtype=np.int64), None if start is None else np.array(start, dtype=float)))
    del record[:-_KEEP]


def offers() -> list:
    """The plans of the open :func:`keeping_best` block (empty outside one).

    Returns
    -------
    list of (numpy.ndarray, numpy.ndarray or None)
        ``(placement, start)`` pairs, oldest first.
    """
    return list(_OFFERS.get() or [])
