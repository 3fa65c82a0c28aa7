"""The memory-policy protocol of the scheduling engine, its base class, and the static policy.

The EFT engine (:mod:`optpart.schedule.eft`) and the other list schedulers never do
memory arithmetic themselves: they ask a *memory policy*, a :class:`MemoryPolicy`. The
protocol is four calls, kept small and stable so other memory models (the peak/liveness
policy) plug in, documented once on the base class:

``devices_for(v) -> list[int]``
    The devices ``v`` may go to now, in increasing index order: its constraints (pin,
    forbid), its colocation group (once a member is placed, only that device), and
    room left. Empty means stuck. The caller must not modify the list.
``admits(v, d, start, finish) -> bool``
    A finer check at the slot the engine chose on ``d``. The engine only offers a slot
    on a device from ``devices_for(v)``; when it returns False the engine tries the
    node's next best device. The base (and so the static policy) always says True.
``place(v, d, start, finish) -> None``
    Record the decision.
``no_room_message(v) -> str``
    One line saying why ``v`` could not be placed (used as the ``unknown`` reason).

The class attribute ``admits_everything`` tells the engine that ``admits`` always says
True, so it may skip the call: True on the base, False on every subclass that overrides
``admits``. Optional: a method ``memory_filter(v) -> (base, need, room)`` with
``devices_for(v) == [d for d in base if need <= room[d]]`` lets the engine's ``near`` mode
test a few devices instead of building the list (the static policy has one).

The base class also keeps what every memory model needs: capacities, the devices each node
may use and the device each colocation group settled on (:meth:`MemoryPolicy.fixed_device`).

:class:`StaticPolicy` is the static model of docs/model.md section 3: a device holds
the sum of its nodes' ``memory``; the first member of a colocation group reserves the
whole group's memory on its device, so later members never find it full and the
placement never overflows. Every comparison goes through :func:`optpart.model.memory.fits`.
With ``memory_aware=False`` capacities are ignored (the classic memory-blind
baselines), constraints still hold. The liveness policy is
:class:`optpart.schedule.liveness.LivenessPolicy`.
"""

from __future__ import annotations

import math
from itertools import compress
from typing import Sequence

import numpy as np

from .._docstrings import fill_doc
from ..model.memory import MEMORY_RTOL
from ..model.problem import Problem
from ..units import format_bytes

__all__ = ["MemoryPolicy", "StaticPolicy"]

_NEG_INF = -math.inf


@fill_doc
class MemoryPolicy:
    """What the engine asks about memory (see the module docstring), and what every policy shares.

    The base keeps the bookkeeping both memory models need: capacities, the devices each
    node may use (its pin and forbids; unconstrained nodes share one list of every device)
    and the device each colocation group settled on. A policy fills in
    :meth:`devices_for`, :meth:`place` and :meth:`no_room_message`; it overrides
    :meth:`admits` when memory depends on the slot, and then ``admits_everything`` becomes
    False by itself (see :meth:`__init_subclass__`).

    Parameters
    ----------
    %(problem)s
    capacity : sequence of float, optional
        Bytes usable per device (default: the devices' memory).
    solver : str
        Name used in :meth:`no_room_message`.
    """

    #: the engine may skip :meth:`admits`: True while a policy keeps the default, which admits every slot
    admits_everything = True

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        if "admits" in vars(cls) and "admits_everything" not in vars(cls):
            cls.admits_everything = False  # a policy that may refuse a slot is always asked

    def __init__(self, problem: Problem, capacity: Sequence[float] | None = None, solver: str = "solver") -> None:
        self.problem = problem
        self.solver = solver
        cap = problem.device_memory if capacity is None else np.asarray(capacity, dtype=np.float64)
        self.capacity = cap.tolist()
        self.group_of = problem.group_of.tolist()
        self.group_device = [-1] * len(problem.groups)
        all_devices = self.all_devices = list(range(problem.n_devices))
        allowed = problem.allowed
        self.allowed_list: list[list[int]] = [all_devices] * problem.n_nodes
        for v in np.flatnonzero(~allowed.all(axis=1)).tolist():
            self.allowed_list[v] = np.flatnonzero(allowed[v]).tolist()

    def fixed_device(self, v: int) -> int:
        """The device ``v``'s colocation group already sits on, or -1.

        Parameters
        ----------
        %(v)s

        Returns
        -------
        int
        """
        g = self.group_of[v]
        return self.group_device[g] if g >= 0 else -1

    def devices_for(self, v: int) -> list[int]:
        """The devices ``v`` may use now (constraints, group, memory).

        Parameters
        ----------
        %(v)s

        Returns
        -------
        list of int
            Ascending device indices; empty when none is left (the engine raises NoRoom).
            The caller must not modify the list.
        """
        raise NotImplementedError

    def admits(self, v: int, d: int, start: float, finish: float) -> bool:
        """Whether ``v`` may run on ``d`` at that slot; this default admits every slot.

        Parameters
        ----------
        %(node_slot)s

        Returns
        -------
        bool
        """
        return True

    def place(self, v: int, d: int, start: float, finish: float) -> None:
        """Record that ``v`` runs on ``d`` at ``[start, finish)``.

        Parameters
        ----------
        %(node_slot)s
        """
        raise NotImplementedError

    def no_room_message(self, v: int) -> str:
        """One line saying why ``v`` found no device (the ``unknown`` reason).

        Parameters
        ----------
        %(v)s

        Returns
        -------
        str
        """
        raise NotImplementedError


@fill_doc
class StaticPolicy(MemoryPolicy):
    """Static-model memory left per device, with pins, forbids and colocation groups.

    Static memory does not depend on the slot, so :meth:`admits` keeps the default (and the
    engine skips the call).

    Parameters
    ----------
    %(problem)s
    capacity : sequence of float, optional
        Bytes usable per device (default: the devices' memory). The heuristic passes a
        smaller budget to leave room for another model.
    memory_aware : bool
        False: ignore capacities (constraints still hold).
    solver : str
        Name used in :meth:`no_room_message`.
    """

    def __init__(self, problem: Problem, capacity: Sequence[float] | None = None, memory_aware: bool = True,
                 solver: str = "solver") -> None:
        super().__init__(problem, capacity, solver)
        self.memory_aware = memory_aware
        cap = np.asarray(self.capacity, dtype=np.float64)
        # room with the one fit rule's slack folded in: fits(used + need, cap) <=> need <= room
        self.room = (cap + MEMORY_RTOL * np.maximum(1.0, np.abs(cap))).tolist()
        self.min_room = min(self.room, default=0.0)
        self.used = [0.0] * problem.n_devices
        self.mem = problem.memory.tolist()
        n_groups = len(problem.groups)
        grouped = problem.group_of >= 0
        self.group_need = np.bincount(problem.group_of[grouped], weights=problem.memory[grouped],
                                      minlength=n_groups).tolist() if n_groups else []

    def need(self, v: int) -> float:
        """Bytes placing ``v`` now adds: the whole group for a group's first member, else its own.

        Parameters
        ----------
        %(v)s

        Returns
        -------
        float
            Bytes (0 when ``v``'s group already sits on a device).
        """
        g = self.group_of[v]
        if g < 0:
            return self.mem[v]
        return 0.0 if self.group_device[g] >= 0 else self.group_need[g]

    def fits(self, v: int, d: int) -> bool:
        """May ``v`` go to device ``d`` now (constraints, group, memory)?

        Parameters
        ----------
        %(v_d)s

        Returns
        -------
        bool
        """
        g = self.group_of[v]
        if g >= 0:
            gd = self.group_device[g]
            if gd >= 0:
                return d == gd
            need = self.group_need[g]
        else:
            need = self.mem[v]
        allowed = self.allowed_list[v]  # the shared all-devices list holds every d: no scan
        if allowed is not self.all_devices and d not in allowed:
            return False
        return not self.memory_aware or need <= self.room[d]

    def devices_for(self, v: int) -> list[int]:
        # Its group's device once settled, else the allowed devices with room for need(v) bytes;
        # the shared allowed list itself when every device has room (callers do not mutate it).
        g = self.group_of[v]
        if g >= 0:
            if self.group_device[g] >= 0:
                return [self.group_device[g]]
            need = self.group_need[g]
        else:
            need = self.mem[v]  # :meth:`need`, inlined: one call less per node in the hot loops
        if not self.memory_aware:
            return self.allowed_list[v]
        if need <= self.min_room:  # room everywhere: the shared list, no copy
            return self.allowed_list[v]
        allowed = self.allowed_list[v]
        if allowed is self.all_devices:  # filter in C: same list as the comprehension below
            return list(compress(allowed, map(float(need).__le__, self.room)))
        room = self.room
        return [d for d in allowed if need <= room[d]]

    def memory_filter(self, v: int) -> tuple[list[int], float, list[float]]:
        """``(base, need, room)`` with ``devices_for(v) == [d for d in base if need <= room[d]]``.

        Lets the engine's ``near`` mode test only the few devices it considers instead of
        building the whole list (see :func:`optpart.schedule.eft._near_devices`). ``need``
        is ``-inf`` when every device of ``base`` qualifies. The caller must not modify
        ``base`` or ``room``.

        Parameters
        ----------
        %(v)s

        Returns
        -------
        tuple
            ``(base, need, room)`` as above.
        """
        g = self.group_of[v]
        if g < 0:
            need = self.mem[v]
        elif self.group_device[g] >= 0:
            return [self.group_device[g]], _NEG_INF, self.room
        else:
            need = self.group_need[g]
        if not self.memory_aware or need <= self.min_room:
            return self.allowed_list[v], _NEG_INF, self.room
        return self.allowed_list[v], need, self.room

    def place(self, v: int, d: int, start: float = 0.0, finish: float = 0.0) -> None:
        # Charge v's bytes (a group's first member: the whole group's) to d; the slot is unused.
        g = self.group_of[v]
        if g >= 0:
            if self.group_device[g] >= 0:
                return
            self.group_device[g] = d
            b = self.group_need[g]
        else:
            b = self.mem[v]
        self.used[d] += b
        self.room[d] -= b
        if self.room[d] < self.min_room:
            self.min_room = self.room[d]

    def no_room_message(self, v: int) -> str:
        # Names v, the bytes it needs and the most free memory on a device it may use.
        problem = self.problem
        need = self.need(v)
        free = max((self.capacity[d] - self.used[d] for d in self.allowed_list[v]), default=0.0)
        what = f"node '{problem.node_ids[v]}'"
        if self.group_of[v] >= 0:
            what += " (with its colocation group)"
        return (f"{self.solver} found no device with room for {what}: it needs {format_bytes(need)}, "
                f"the most free memory on a device it may use is {format_bytes(max(free, 0.0))}")
