"""Peak bytes of live tensor storage during a piece of PyTorch code: :class:`LiveBytes`.

A ``TorchDispatchMode`` that sees every tensor an operator returns and keeps a weak reference
to its storage: the bytes of every storage alive (the tensors given at entry, such as
parameters, gradients and optimizer state, plus every output still referenced) are summed,
and the maximum is the peak. This is what ``torch.distributed._tools.mem_tracker.MemTracker``
counts, without its per-module statistics (which refuse a module called once per micro-batch).
CPU tensors have no allocator statistics in torch; this count is the storage the program holds,
not the allocator's cached or fragmented bytes.
"""

from __future__ import annotations

import weakref
from typing import Any, Iterable

from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map_only

__all__ = ["LiveBytes"]


class LiveBytes(TorchDispatchMode):
    """Count live storage bytes; ``peak`` is the most seen while the mode was active.

    Parameters
    ----------
    held : iterable of torch.Tensor
        Tensors alive at entry (parameters, gradients, optimizer state) counted from the start.

    Attributes
    ----------
    now : int
        Bytes alive.
    peak : int
        The maximum of ``now``.
    """

    def __init__(self, held: Iterable[Any] = ()):
        super().__init__()
        self._live: dict[int, int] = {}
        self._refs: dict[int, Any] = {}
        self.now = 0
        self.peak = 0
        for t in held:
            self._add(t)

    def _drop(self, key: int, _ref=None) -> None:
        self.now -= self._live.pop(key, 0)
        self._refs.pop(key, None)

    def _add(self, t) -> None:
        import torch

        if not isinstance(t, torch.Tensor) or t.is_meta:
            return
        st = t.untyped_storage()
        key = st.data_ptr() or id(st)
        if key in self._live:
            return
        try:
            self._refs[key] = weakref.ref(st, lambda ref, key=key: self._drop(key))
        except TypeError:  # a storage without weak references: counted, never released
            pass
        self._live[key] = st.nbytes()
        self.now += st.nbytes()
        self.peak = max(self.peak, self.now)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        """Run the operator and count the storage of every tensor it returns."""
        import torch

        out = func(*args, **(kwargs or {}))
        tree_map_only(torch.Tensor, self._add, out)
        return out
