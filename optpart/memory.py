"""Old home of memory accounting: re-exports :mod:`optpart.model.memory` (kept for one release)."""

from .model.memory import (MEMORY_RTOL, as_placement, device_memory, fits, memory_timeline, overflow_message,
                           peak_memory, static_memory)

__all__ = ["MEMORY_RTOL", "as_placement", "fits", "static_memory", "peak_memory", "memory_timeline",
           "device_memory", "overflow_message"]
