"""Old home of the list schedulers' shared pieces; they now live in :mod:`optpart.schedule`
(gap structure, static memory policy) and :mod:`optpart.paths` (mean costs, upward rank).
Thin re-exports for callers of the old names."""

from ..memory import overflow_message
from ..paths import mean_costs, upward_rank
from ..schedule.gaps import GapLine
from ..schedule.policy import StaticPolicy as MemoryBook

__all__ = ["mean_costs", "upward_rank", "MemoryBook", "GapLine", "overflow_message"]
