"""Numeric node columns, checked once: finite, >= 0, and summing inside the float range.

Every reader ends in :meth:`optpart.model.problem.Problem.from_arrays`, which checks its
columns here, so a bad value is refused with one message naming the node whichever way it
came in (a file, :meth:`~optpart.model.problem.Problem.build`, a tracer).
"""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np

from ..errors import ProblemError

__all__ = ["float_column", "partial_column", "check_sum", "short"]


def short(x: Any, limit: int = 40) -> str:
    """``repr(x)``, cut to ``limit`` characters for an error message.

    Parameters
    ----------
    x : object
        The offending value.
    limit : int, optional
        The most characters of ``repr(x)`` kept before ``...``.

    Returns
    -------
    str
        A one-line representation for a message.
    """
    text = repr(x)
    return text if len(text) <= limit else text[:limit] + "..."


def check_sum(arr: np.ndarray, what: str, name_of: Callable[[int], str]) -> None:
    """Refuse an array of finite values whose sum is not finite (float overflow).

    Parameters
    ----------
    arr : numpy.ndarray
        The values, already checked finite.
    what : str
        The column, for the message (``"node field 'memory'"``).
    name_of : callable
        Maps an index to the name of its node or edge.
    """
    if arr.size == 0:
        return
    with np.errstate(over="ignore", invalid="ignore"):
        total = float(arr.sum())
    if not math.isfinite(total):
        i = int(np.argmax(arr))
        raise ProblemError(f"{what} sums to {total!r} (largest value {float(arr[i])!r} at {name_of(i)}): "
                           "the values overflow the float range when added; use smaller units")


def float_column(values: Any, n: int, what: str, ids: Sequence[str]) -> np.ndarray:
    """``values`` as a float64 array of ``n`` finite numbers >= 0.

    Parameters
    ----------
    values : array_like
        One number per node.
    n : int
        The node count.
    what : str
        The field name, for messages.
    ids : sequence of str
        The node ids, to name the first bad node.

    Returns
    -------
    numpy.ndarray
        The column; a :class:`~optpart.errors.ProblemError` names the first bad node and
        refuses columns whose sum overflows to infinity.
    """
    try:
        arr = np.asarray(values, dtype=np.float64)
    except OverflowError:
        for i, x in enumerate(list(values)):
            try:
                float(x)
            except OverflowError:
                raise ProblemError(f"node '{ids[i]}' has {what}={short(x)}; it is beyond the float range "
                                   "(at most about 1.8e308)") from None
        raise ProblemError(f"node field '{what}' holds a number beyond the float range") from None
    except (TypeError, ValueError) as exc:
        raise ProblemError(f"node field '{what}' must hold numbers: {exc}") from None
    if arr.shape != (n,):
        raise ProblemError(f"node field '{what}' has {arr.size} values for {n} nodes")
    bad = ~np.isfinite(arr) | (arr < 0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ProblemError(f"node '{ids[i]}' has {what}={float(arr[i])!r}; it must be a finite number >= 0")
    check_sum(arr, f"node field '{what}'", lambda i: f"node '{ids[i]}'")
    return arr


def partial_column(values: Any, n: int, what: str, ids: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """A node column where NaN means "not given": ``(values with NaN as 0, given mask)``.

    Parameters
    ----------
    values, n, what, ids
        As for :func:`float_column`.

    Returns
    -------
    tuple of numpy.ndarray
        ``(values, given)``: float64 values (NaN read as 0) and a boolean mask of the given ones.
    """
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        arr = None
    if arr is None or arr.shape != (n,):
        arr = float_column(values, n, what, ids)  # raises the one message for a bad column
    given = ~np.isnan(arr)
    return float_column(np.where(given, arr, 0.0), n, what, ids), given
