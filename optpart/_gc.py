"""Pausing Python's cyclic garbage collector around code that allocates millions of objects.

The cyclic collector runs a pass every few hundred container allocations, each walking
every live container; parsing a big JSON graph or a scheduler's hot loop allocates millions
of acyclic containers that reference counting alone frees.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator

__all__ = ["no_gc"]


@contextmanager
def no_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector inside the block (restored on exit, also on error)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
