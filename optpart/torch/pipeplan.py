"""A pipelined plan as torch's pipeline runtime takes it: stages, devices, ranks and action lists.

A pipelined :class:`~optpart.result.Result` carries ``result.options["pipeline"]``::

    {"micro_batches": M, "schedule": "1F1B" | "GPipe" | ... | "custom",
     "stages": [{"stage": s, "device": "<device id>", "nodes": [<problem node ids>]}, ...],
     "actions": {"<device id>": ["0F0", "0F1", "0B0", ...]}}

Stage ``s`` runs on one device; a device may hold several stages. Actions are in the string
format of torch's ``_Action`` (``F`` forward, ``B`` full backward, ``I`` input gradient, ``W``
weight gradient). :class:`PipelinePlan` reads and checks that record and gives what the
runner needs: the rank of every device (devices in the order their first stage comes, so
stage 0 is on rank 0), the stage-index-to-rank mapping and the action lists by rank.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping

from ..errors import OptpartError

__all__ = ["PipelinePlan", "named_actions", "SCHEDULES", "ONE_STAGE_PER_RANK"]

#: Schedule names torch's ``get_schedule_class`` knows and that a plan may name.
SCHEDULES = ("GPipe", "1F1B", "Interleaved1F1B", "LoopedBFS", "InterleavedZeroBubble", "ZBVZeroBubble", "DualPipeV")
#: The named schedules whose class runs one stage per rank (``PipelineScheduleSingle``).
ONE_STAGE_PER_RANK = ("GPipe", "1F1B")

_ACTION = re.compile(r"^(\d+)([FBIW])(\d+)$")


@dataclass(frozen=True)
class PipelinePlan:
    """The ``pipeline`` record of a result, checked.

    Attributes
    ----------
    micro_batches : int
        ``M``.
    schedule : str
        A name of :data:`SCHEDULES`, or ``"custom"``.
    stage_devices : tuple of str
        Device id of every stage, by stage index.
    stage_nodes : tuple of tuple of str
        Problem node ids of every stage (forward, backward and update nodes).
    actions : dict of str to tuple of str
        Action strings per device id.
    """

    micro_batches: int
    schedule: str
    stage_devices: tuple[str, ...]
    stage_nodes: tuple[tuple[str, ...], ...]
    actions: dict[str, tuple[str, ...]]

    @classmethod
    def of(cls, result: Any) -> "PipelinePlan":
        """Read the record of a Result, of its options dict, or the record itself.

        Parameters
        ----------
        result : Result, dict
            A pipelined result, its ``options``, or ``options["pipeline"]``.

        Returns
        -------
        PipelinePlan

        Raises
        ------
        OptpartError
            No record (not a pipelined result), or a malformed one: one line naming the field.
        """
        rec = getattr(result, "options", result)
        if isinstance(rec, Mapping) and "pipeline" in rec:
            rec = rec["pipeline"]
        if not isinstance(rec, Mapping) or "stages" not in rec:
            raise OptpartError("this result has no options['pipeline'] record (stages, devices, action lists): "
                               "solve with --micro-batches M for a plan torch's pipeline runtime runs")
        try:
            m = int(rec["micro_batches"])
            stages = sorted(rec["stages"], key=lambda s: int(s["stage"]))
            devices = tuple(str(s["device"]) for s in stages)
            nodes = tuple(tuple(str(n) for n in s["nodes"]) for s in stages)
            actions = {str(d): tuple(str(a) for a in acts) for d, acts in dict(rec.get("actions") or {}).items()}
            schedule = str(rec.get("schedule", "custom"))
        except (KeyError, TypeError, ValueError) as exc:
            raise OptpartError(f"options['pipeline'] is malformed: {type(exc).__name__}: {exc}") from None
        if [int(s["stage"]) for s in stages] != list(range(len(stages))):
            raise OptpartError(f"options['pipeline'].stages are numbered {[int(s['stage']) for s in stages]}; "
                               f"expected 0..{len(stages) - 1}")
        if m < 1:
            raise OptpartError(f"options['pipeline'].micro_batches is {m}; it must be at least 1")
        if schedule != "custom" and schedule not in SCHEDULES:
            raise OptpartError(f"options['pipeline'].schedule '{schedule}' is none of {', '.join(SCHEDULES)}, custom")
        plan = cls(micro_batches=m, schedule=schedule, stage_devices=devices, stage_nodes=nodes, actions=actions)
        plan._check_actions()
        return plan

    @property
    def n_stages(self) -> int:
        """Number of stages."""
        return len(self.stage_devices)

    @property
    def devices(self) -> list[str]:
        """Device ids in rank order: the order in which their first stage comes."""
        return list(dict.fromkeys(self.stage_devices))

    @property
    def stage_ranks(self) -> dict[int, int]:
        """The stage-index-to-rank mapping."""
        rank = {d: r for r, d in enumerate(self.devices)}
        return {s: rank[d] for s, d in enumerate(self.stage_devices)}

    def rank_actions(self) -> dict[int, list[str]]:
        """Action strings per rank (the rows of torch's schedule CSV).

        Returns
        -------
        dict of int to list of str
            Rank -> its actions, in order.
        """
        return {r: list(self.actions.get(d, ())) for r, d in enumerate(self.devices)}

    def stage_of(self) -> dict[str, int]:
        """``{problem node id: stage}``; a node named by two stages is an error.

        Returns
        -------
        dict
            Every node of every stage.
        """
        out: dict[str, int] = {}
        for s, nodes in enumerate(self.stage_nodes):
            for n in nodes:
                if out.setdefault(n, s) != s:
                    raise OptpartError(f"options['pipeline'] puts node '{n}' in stages {out[n]} and {s}")
        return out

    def to_options(self) -> dict[str, Any]:
        """The record as ``result.options["pipeline"]`` holds it.

        Returns
        -------
        dict
            JSON-ready.
        """
        return {"micro_batches": self.micro_batches, "schedule": self.schedule,
                "stages": [{"stage": s, "device": d, "nodes": list(n)}
                           for s, (d, n) in enumerate(zip(self.stage_devices, self.stage_nodes))],
                "actions": {d: list(a) for d, a in self.actions.items()}}

    def _check_actions(self) -> None:
        """Every action names a stage of its own device and a micro-batch below ``M``, and every stage
        runs a forward and a backward (``B``, or ``I`` and ``W``) of every micro-batch."""
        done: dict[tuple[int, str], set[int]] = {}
        for dev, acts in self.actions.items():
            if dev not in self.stage_devices:
                raise OptpartError(f"options['pipeline'].actions names device '{dev}', which holds no stage")
            for a in acts:
                hit = _ACTION.match(a)
                if hit is None:
                    raise OptpartError(f"options['pipeline'].actions['{dev}'] has '{a}'; expected actions like "
                                       "'0F1' (stage, F/B/I/W, micro-batch)")
                s, kind, i = int(hit.group(1)), hit.group(2), int(hit.group(3))
                if s >= self.n_stages or self.stage_devices[s] != dev:
                    raise OptpartError(f"options['pipeline'].actions['{dev}'] runs '{a}', but stage {s} is "
                                       f"{'not a stage' if s >= self.n_stages else 'on ' + repr(self.stage_devices[s])}")
                if i >= self.micro_batches:
                    raise OptpartError(f"options['pipeline'].actions['{dev}'] runs '{a}' of {self.micro_batches} "
                                       "micro-batches")
                done.setdefault((s, kind), set()).add(i)
        if not self.actions:
            return
        full = set(range(self.micro_batches))
        for s in range(self.n_stages):
            back = done.get((s, "B"), set()) | (done.get((s, "I"), set()) & done.get((s, "W"), set()))
            if done.get((s, "F"), set()) != full or back != full:
                raise OptpartError(f"options['pipeline'].actions do not run the forward and backward of every "
                                   f"micro-batch on stage {s}")


def named_actions(schedule: str, n_stages: int, micro_batches: int) -> dict[int, list[str]]:
    """The action lists torch's ``ScheduleGPipe`` / ``Schedule1F1B`` run, stage ``s`` on rank ``s``.

    GPipe: every forward, then every backward. 1F1B (as ``Schedule1F1B._step_microbatches``):
    ``min(M, S - s)`` forwards, then a backward and a forward in turn while forwards remain,
    then the remaining backwards.

    Parameters
    ----------
    schedule : {'GPipe', '1F1B'}
        The schedule.
    n_stages : int
        ``S``, one per rank.
    micro_batches : int
        ``M``.

    Returns
    -------
    dict of int to list of str
        Action strings per rank.
    """
    if schedule not in ONE_STAGE_PER_RANK:
        raise OptpartError(f"named_actions knows {', '.join(ONE_STAGE_PER_RANK)}; got '{schedule}'")
    m = micro_batches
    out: dict[int, list[str]] = {}
    for s in range(n_stages):
        if schedule == "GPipe":
            out[s] = [f"{s}F{i}" for i in range(m)] + [f"{s}B{i}" for i in range(m)]
            continue
        warm = min(m, n_stages - s)
        acts = [f"{s}F{i}" for i in range(warm)]
        f, b = warm, 0
        while b < m:
            acts.append(f"{s}B{b}")
            b += 1
            if f < m:
                acts.append(f"{s}F{f}")
                f += 1
        out[s] = acts
    return out
