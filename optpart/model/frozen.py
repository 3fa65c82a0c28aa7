"""Read-only containers for a frozen :class:`~optpart.model.problem.Problem`.

:class:`FrozenList` and :class:`FrozenDict` are a ``list`` and a ``dict`` (they compare,
index, iterate and serialise as such, with no copy on every access) whose mutating
methods raise: a problem's ids, indices and metadata cannot change under a solver that
cached something about them.
"""

from __future__ import annotations

from typing import Any, NoReturn

import numpy as np

__all__ = ["FrozenList", "FrozenDict", "locked"]


def _refuse(self: Any, *args: Any, **kwargs: Any) -> NoReturn:
    raise TypeError(f"this {type(self).__name__} belongs to a Problem, which is immutable; copy it to change it")


class FrozenList(list):
    """A ``list`` that refuses to change."""

    __slots__ = ()
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse
    append = extend = insert = pop = remove = clear = sort = reverse = _refuse

    def __reduce__(self):
        return (FrozenList, (list(self),))


class FrozenDict(dict):
    """A ``dict`` that refuses to change."""

    __slots__ = ()
    __setitem__ = __delitem__ = __ior__ = _refuse
    update = setdefault = pop = popitem = clear = _refuse

    def __reduce__(self):
        return (FrozenDict, (dict(self),))


def locked(arr: np.ndarray) -> np.ndarray:
    """``arr`` as a view through a read-only buffer, which numpy can never make writeable again.

    Parameters
    ----------
    arr : numpy.ndarray
        Any array (copied only when it is not contiguous).

    Returns
    -------
    numpy.ndarray
        The locked view; ``arr`` itself when it is locked so already.
    """
    if isinstance(arr.base, memoryview) and arr.base.readonly:
        return arr
    arr = np.ascontiguousarray(arr)
    return np.frombuffer(memoryview(arr).toreadonly(), dtype=arr.dtype).reshape(arr.shape)

