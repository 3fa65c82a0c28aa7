"""Placement functions of one's own, registered as optpart solvers (docs/plugins.md).

Each function takes a :class:`optpart.Problem` and returns a placement, a device index per
node; :func:`register` makes them solvers that ``optpart solve``, ``optpart bench`` and
``optpart.solve`` run and score like the built-in ones::

    optpart solve instances/gpt2-training.json --plugin examples/placers.py --solver fill
    optpart bench instances/small/ --plugin examples/placers.py --solvers heuristic,fill,round-robin ...

Importing this module registers both (the ``--plugin`` flag imports it; so does a sweep's
worker process, through ``$OPTPART_PLUGINS``).
"""

from __future__ import annotations

import numpy as np

import optpart


def round_robin(problem: optpart.Problem) -> np.ndarray:
    """Node ``v`` on device ``v mod K``, colocated nodes with their group's first member.

    Parameters
    ----------
    problem : optpart.Problem
        The problem, with devices.

    Returns
    -------
    numpy.ndarray
        A device index per node; memory is not looked at (a placement that overflows is
        answered ``unknown`` by optpart, never ``feasible``).
    """
    place = np.arange(problem.n_nodes) % problem.n_devices
    for members in problem.groups:
        place[members] = place[members[0]]
    return place


def fill(problem: optpart.Problem, *, memory_model: str = "static") -> np.ndarray | None:
    """Fill the devices one after the other in topological order (a pipeline's stages), each up
    to its capacity under the static model; a colocation group goes whole.

    Parameters
    ----------
    problem : optpart.Problem
        The problem, with devices.
    memory_model : str
        The model optpart asks for (this placer keeps the static sum within capacity only).

    Returns
    -------
    numpy.ndarray or None
        A device index per node, or None when the last device is full.
    """
    place = np.full(problem.n_nodes, -1)
    used = np.zeros(problem.n_devices)
    d = 0
    for v in problem.topo.tolist():
        if place[v] >= 0:
            continue
        g = problem.group_of[v]
        members = problem.groups[g] if g >= 0 else np.array([v])
        need = float(problem.memory[members].sum())
        while d < problem.n_devices and used[d] + need > problem.device_memory[d]:
            d += 1
        if d == problem.n_devices:
            return None
        place[members] = d
        used[d] += need
    return place


def register() -> None:
    """Register :func:`round_robin` as ``round-robin`` and :func:`fill` as ``fill``."""
    optpart.register_solver("round-robin", round_robin, memory_models=("static", "peak"),
                            summary="node v on device v mod K (a baseline that ignores memory)")
    optpart.register_solver("fill", fill, memory_models=("static",),
                            summary="devices filled one after the other in topological order")


register()
