"""``topo``: Baechi's m-TOPO, topological fill of one device after another.

m-TOPO (Jeon, Cho et al., "Baechi: Fast Device Placement of Machine Learning
Graphs", ACM SoCC 2020, section 4.1) walks the graph in topological order and puts
each node on the *current* device until that device's memory budget is reached,
then moves on to the next device. The order is the canonical one
(:attr:`optpart.schedule.graph.Graph.canon`: by top level, then decreasing bottom level
under mean costs), so renumbering the nodes does not change the answer. The budget is an even share of the graph's
memory, ``(1 + slack) * total / k`` (capped by the device's capacity), so the graph
is cut into ``k`` consecutive stages; with heterogeneous capacities each device's
share is proportional to its capacity. The method only places: the schedule is the
canonical one (docs/model.md section 2).

Constraints: a node of a colocation group whose group is already placed follows
it; a pinned or restricted node (or a group's first member) takes the first device
from the current one on that it may use and that has budget left, without moving
the current device on. The budget is soft, capacity is hard: when no device has
budget left for a node, it goes to the first device it may use with room (after
the current one, then from the start), and the answer is ``unknown`` with the
reason when none has room. Colocation groups reserve their whole memory when their
first member is placed, so the placement never overflows.

Complexity: O(V k + E) plus the canonical schedule's O((V + E) log V).
"""

from __future__ import annotations


import numpy as np

from ..._docstrings import fill_doc
from ...model.memory import fits
from ...model.problem import Problem
from ...result import Status
from ...schedule import Graph, StaticPolicy
from ..base import Solution
from ..spec import Option, SolverSpec

__all__ = ["solve", "SPEC"]

SPEC = SolverSpec(
    options=(Option("slack", float, 0.1, "fraction a device may exceed its even memory share before moving on",
                    min=0.0, finite=True),),
    memory_models=("static",), uses_hint=False, uses_time_limit=False)


def budgets(problem: Problem, slack: float) -> list[float]:
    """Per-device memory budget: ``(1 + slack)`` times the device's share of the graph's memory.

    Parameters
    ----------
    problem : Problem
    slack : float
        Extra share allowed per device (0.1: 10 % over its share), >= 0.

    Returns
    -------
    list of float
        Bytes per device, never above its capacity.
    """
    total = float(problem.memory.sum())
    cap = problem.device_memory
    k = problem.n_devices
    if np.isfinite(cap).all() and cap.sum() > 0:
        share = total * cap / cap.sum()
    else:
        share = np.full(k, total / k)
    return np.minimum(cap, (1.0 + slack) * share).tolist()


@SPEC.checked("topo")
@fill_doc
def solve(problem: Problem, *, time_limit: float | None = None, seed: int = 0,
          hint: np.ndarray | None = None, memory_model: str = "static", slack: float = 0.1) -> Solution:
    """Place ``problem`` with m-TOPO; see the module docstring.

    Parameters
    ----------
    %(construction_args)s
    memory_model : str
        ``"static"``, the model m-TOPO keeps (its budgets are static sums).
    slack : float
        Fraction by which a device may exceed its even share of the graph's memory
        before m-TOPO moves on to the next device (default 0.1, >= 0).

    Returns
    -------
    %(solution)s
    """
    n, k = problem.n_nodes, problem.n_devices
    budget = budgets(problem, slack)
    book = StaticPolicy(problem, solver="m-TOPO")
    used = book.used  # bytes placed (or reserved by groups) per device
    place = [-1] * n
    cur = 0
    for v in np.argsort(Graph(problem).canon).tolist():
        fixed = book.fixed_device(v)
        if fixed >= 0:
            d = fixed
        else:
            need = book.need(v)
            free = len(book.allowed_list[v]) == k and book.group_of[v] < 0
            d = -1
            if free:
                # The plain m-TOPO step: stay on the current device while its budget lasts.
                while cur < k - 1 and not fits(used[cur] + need, budget[cur]):
                    cur += 1
                if fits(used[cur] + need, budget[cur]) and book.fits(v, cur):
                    d = cur
            else:
                d = next((e for e in book.allowed_list[v] if e >= cur and fits(used[e] + need, budget[e])
                          and book.fits(v, e)), -1)
            if d < 0:  # soft budget exhausted: any device with room, current one first
                room = book.devices_for(v)
                d = next((e for e in room if e >= cur), room[0] if room else -1)
            if d < 0:
                return Solution(Status.UNKNOWN, message=book.no_room_message(v))
        book.place(v, d)
        place[v] = d
    return Solution(Status.FEASIBLE, placement=np.asarray(place, dtype=np.int64),
                    stats={"budget_bytes": budget, "slack": slack})
