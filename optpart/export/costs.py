"""What a printed time assumes: the step's phases and the hardware profile of the problem's costs.

Node times and link costs come from the import's cost model (``meta["cost_model"]``: peak
FLOP/s, efficiency, memory bandwidth, kernel floor) or from measured operator times (``optpart
import --profile``), and from the problem's links; a time printed without them cannot be read.
"""

from __future__ import annotations

import math

import numpy as np

from ..model.problem import Problem

__all__ = ["cost_profile", "phases"]


def phases(problem: Problem | None) -> str:
    """``(forward, backward and optimizer)``: the phases of the step, as the problem's nodes say.

    Parameters
    ----------
    problem : Problem, optional
        The problem (node metadata ``phase``; a node without one is forward).

    Returns
    -------
    str
        The phases in parentheses; ``""`` without a problem.
    """
    if problem is None:
        return ""
    phases = {str(m.get("phase", "forward")) for m in (problem.node_meta or [{}] * problem.n_nodes)}
    named = [p for p in ("forward", "backward", "optimizer") if p in phases] or ["forward"]
    return "(" + (", ".join(named[:-1]) + " and " + named[-1] if len(named) > 1 else named[0]) + ")"


def cost_profile(problem: Problem) -> str:
    """The hardware the problem's costs assume, from what the import recorded, and its links.

    Parameters
    ----------
    problem : Problem
        The problem (``meta["cost_model"]`` from ``optpart import``; links from its devices).

    Returns
    -------
    str
        For example ``costs: cost model 15.7 TFLOP/s x 0.5, 900 GB/s memory, 5 us per kernel;
        links 25 GB/s, 10 us``.
    """
    from ..units import format_bandwidth, format_time

    cm = (problem.meta or {}).get("cost_model") or {}
    if cm.get("times") == "measured" and isinstance(cm.get("profile"), dict):
        prof = cm["profile"]
        node = f"operator times measured on {prof.get('device', '?')} (median of {prof.get('repeats', '?')} runs)"
    elif cm:
        node = (f"cost model {_number(cm.get('peak_flops')) / 1e12:.3g} TFLOP/s x {cm.get('efficiency', '?')}, "
                f"{format_bandwidth(_number(cm.get('memory_bandwidth')))} memory, "
                f"{format_time(_number(cm.get('min_op_time')))} per kernel")
    else:
        node = "node times as given in the problem"
    lat, bw = problem.latency, problem.bandwidth
    off = ~np.eye(problem.n_devices, dtype=bool) if problem.n_devices > 1 else None
    if off is None or not off.any():
        links = "one device, no links"
    elif np.all(lat[off] == lat[off][0]) and np.all(bw[off] == bw[off][0]):
        links = f"links {format_bandwidth(float(bw[off][0]))}, {format_time(float(lat[off][0]))}"
    else:
        links = (f"links {format_bandwidth(float(bw[off].min()))} to {format_bandwidth(float(bw[off].max()))}, "
                 f"{format_time(float(lat[off].min()))} to {format_time(float(lat[off].max()))}")
    return f"costs: {node}; {links}"


def _number(value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan
