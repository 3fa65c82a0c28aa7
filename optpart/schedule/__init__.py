"""The one scheduling engine every list scheduler and the heuristic share.

* :mod:`.gaps`: :class:`GapLine`, one device's idle gaps with a true earliest fit and
  exact zero-duration semantics;
* :mod:`.policy`: the memory-policy protocol and :class:`StaticPolicy`;
* :mod:`.graph`: :class:`Graph` (a problem as plain lists) and the data-arrival rule;
* :mod:`.eft`: the earliest-finish-time engine (HEFT's insertion policy);
* :mod:`.etf`: the earliest-start ready-list engine (m-ETF);
* :mod:`.insertion`: schedule a fixed placement in an order, and justification;
* :mod:`.units`: memory units (colocation groups as one), constraint projection, greedy fill
  and the packing search.
"""

from .eft import Beaten, EftSchedule, NoRoom, TimeUp, eft_schedule
from .etf import etf_schedule
from .gaps import GapLine
from .graph import Graph, arrival, arrivals
from .insertion import insertion_schedule, insertion_times, justify, schedule_placement
from .policy import MemoryPolicy, StaticPolicy

__all__ = ["GapLine", "MemoryPolicy", "StaticPolicy", "Graph", "arrival", "arrivals", "Beaten", "EftSchedule", "NoRoom",
           "TimeUp",
           "eft_schedule", "etf_schedule", "insertion_schedule", "insertion_times", "justify",
           "schedule_placement"]
