"""Old home of the longest-path levels: re-exports :mod:`optpart.model.paths` (kept for one release)."""

from .model.paths import (bottom_levels_by_edge, bottom_levels_csr, mean_costs, priority_order, top_levels_csr,
                          upward_rank)

__all__ = ["bottom_levels_csr", "bottom_levels_by_edge", "top_levels_csr", "mean_costs", "upward_rank",
           "priority_order"]
