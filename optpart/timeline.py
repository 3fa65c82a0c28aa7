"""Insertion-based list scheduling of a placement (kept for callers of the old name).

The implementation is :mod:`optpart.schedule` (one idle-gap structure,
:class:`~optpart.schedule.gaps.GapLine`, and one insertion replay,
:func:`~optpart.schedule.insertion.insertion_schedule`); this module re-exports it.
"""

from .paths import priority_order
from .schedule.gaps import GapLine
from .schedule.insertion import insertion_schedule

#: The old name of one device's timeline.
Timeline = GapLine

__all__ = ["Timeline", "GapLine", "insertion_schedule", "priority_order"]
