"""The pipelined plan: stages, their devices and each device's actions (what torch's runtime runs).

A :class:`PipelinePlan` is the plan of ``docs/model.md`` section 7: ``M`` micro-batches, an
ordered chain of **stages** (``stage_of``: the stage of every base-problem node; stage ``s``
runs on device ``stage_device[s]``, a device may hold several stages) and per device a
sequence of **actions** ``Action(stage, kind, micro_batch)``, ``kind`` one of ``F`` (forward),
``B`` (full backward), ``I`` (input-gradient half of a backward) and ``W`` (weight-gradient
half). ``str(Action(0, "F", 1))`` is ``"0F1"``, the string torch's
``torch.distributed.pipelining`` schedules use (``_Action.from_str``), and :meth:`PipelinePlan.csv_rows`
are the rows of its ``_load_csv`` (one row per device holding a stage, the devices in the order
their first stage comes: the torch rank of a device is its position in that order).

A result of a pipelined solve carries the plan as ``result.options["pipeline"]``
(:meth:`PipelinePlan.to_dict`)::

    {"micro_batches": M, "schedule": "1F1B" | ... | "custom",
     "stages": [{"stage": s, "device": "<device id>", "nodes": [<node ids>]}, ...],
     "actions": {"<device id>": ["0F0", "0F1", "0B0", ...], ...}}

and :meth:`PipelinePlan.from_result` reads it back. ``schedule`` names the torch schedule
class the action lists equal (``get_schedule_class(name)``), else ``custom``. The document may
also record the runtime's cost per action it was timed with (``"action_overhead"``, seconds,
:class:`~optpart.pipeline.step.PipelineStep`), which :attr:`PipelinePlan.action_overhead` keeps.

A process of torch's runtime has no problem to read a plan against: :meth:`PlanIds.of` takes the
node and device ids from the document itself (devices in the order their first stage comes,
so device index ``r`` is torch rank ``r``), and :meth:`PipelinePlan.from_dict` reads it against
them with the same checks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Mapping, NamedTuple, Sequence

import numpy as np

from ..errors import ProblemError
from ..model.problem import Problem

__all__ = ["Action", "PipelinePlan", "PlanIds", "KINDS"]

#: Action kinds: forward, full backward, input-gradient half, weight-gradient half.
KINDS = ("F", "B", "I", "W")
_ACTION = re.compile(r"^\s*(\d+)([FBIW])(\d+)\s*$")
#: The one line for a result without a plan.
NO_PLAN = ("the result carries no pipelined plan (options['pipeline']: stages, devices, action lists); "
           "solve with --micro-batches M for one")


class Action(NamedTuple):
    """One action of a device: ``kind`` of ``stage`` for ``micro_batch`` (``str``: ``"0F1"``)."""

    stage: int
    kind: str
    micro_batch: int

    def __str__(self) -> str:
        return f"{self.stage}{self.kind}{self.micro_batch}"

    @classmethod
    def parse(cls, text: str) -> "Action":
        """An action from torch's string form (``"2B0"``).

        Parameters
        ----------
        text : str
            ``{stage}{F|B|I|W}{micro-batch}``.

        Returns
        -------
        Action
        """
        m = _ACTION.match(str(text))
        if m is None:
            raise ProblemError(f"pipeline action {text!r}: expected {{stage}}{{F|B|I|W}}{{micro-batch}}, e.g. '0F1'")
        return cls(int(m.group(1)), m.group(2), int(m.group(3)))


@dataclass(frozen=True)
class PlanIds:
    """The node and device ids a plan is read against: a problem's, or a plan document's own.

    Attributes
    ----------
    node_ids : tuple of str
        Node ids (index = node index).
    device_ids : tuple of str
        Device ids (index = device index).
    """

    node_ids: tuple[str, ...]
    device_ids: tuple[str, ...]

    @property
    def n_nodes(self) -> int:
        """Number of nodes."""
        return len(self.node_ids)

    @property
    def n_devices(self) -> int:
        """Number of devices."""
        return len(self.device_ids)

    @cached_property
    def node_index(self) -> dict[str, int]:
        """Node id -> index."""
        return {n: i for i, n in enumerate(self.node_ids)}

    @cached_property
    def device_index(self) -> dict[str, int]:
        """Device id -> index."""
        return {d: i for i, d in enumerate(self.device_ids)}

    @classmethod
    def of(cls, doc: Mapping[str, Any]) -> "PlanIds":
        """The ids a plan document names: its stages' nodes, and its stages' devices in the order
        their first stage comes (device index ``r`` is torch rank ``r``).

        Parameters
        ----------
        doc : mapping
            A plan document (:meth:`PipelinePlan.to_dict`'s form).

        Returns
        -------
        PlanIds

        Raises
        ------
        ProblemError
            When the stages are not a list of objects (one line).
        """
        stages = doc.get("stages") if isinstance(doc, Mapping) else None
        if not isinstance(stages, Sequence) or isinstance(stages, str) \
                or not all(isinstance(st, Mapping) for st in stages):
            raise ProblemError("pipeline.stages: expected a list of {'stage', 'device', 'nodes'} objects")
        nodes = [n for st in stages for n in (st.get("nodes") or []) if isinstance(n, str)]
        devices = [st.get("device") for st in stages if isinstance(st.get("device"), str)]
        return cls(tuple(dict.fromkeys(nodes)), tuple(dict.fromkeys(devices)))


@dataclass(frozen=True, eq=False)
class PipelinePlan:
    """A pipelined plan (module docstring). Built by the solvers; checked by :meth:`check`.

    Attributes
    ----------
    micro_batches : int
        ``M``.
    stage_of : numpy.ndarray
        Stage index per base-problem node (read-only int64).
    stage_device : tuple of int
        Device index per stage.
    actions : tuple of tuple of Action
        Per device index (every device of the problem), its actions in the order it runs them.
    schedule : str
        The torch schedule class name the actions equal, else ``"custom"``.
    action_overhead : float
        The runtime's seconds per action the plan was timed with (0 when not recorded).
    """

    micro_batches: int
    stage_of: np.ndarray
    stage_device: tuple[int, ...]
    actions: tuple[tuple[Action, ...], ...]
    schedule: str = "custom"
    action_overhead: float = 0.0

    def __post_init__(self) -> None:
        arr = np.array(self.stage_of, dtype=np.int64)
        arr.flags.writeable = False
        object.__setattr__(self, "stage_of", arr)
        object.__setattr__(self, "stage_device", tuple(int(d) for d in self.stage_device))
        object.__setattr__(self, "actions", tuple(tuple(Action(*a) for a in acts) for acts in self.actions))

    @property
    def n_stages(self) -> int:
        """Number of stages."""
        return len(self.stage_device)

    def with_actions(self, actions: Sequence[Sequence[Action]], schedule: str = "custom") -> "PipelinePlan":
        """The same stages with other action lists.

        Parameters
        ----------
        actions : sequence of sequence of Action
            Per device index.
        schedule : str
            The schedule name they equal (``custom`` when none).

        Returns
        -------
        PipelinePlan
        """
        return PipelinePlan(self.micro_batches, self.stage_of, self.stage_device,
                            tuple(tuple(a) for a in actions), schedule, self.action_overhead)

    def ranks(self) -> list[int]:
        """Device indices that hold a stage, in the order their first stage comes (torch rank
        ``r`` is ``ranks()[r]``, so stage 0 is on rank 0).

        Returns
        -------
        list of int
        """
        return list(dict.fromkeys(self.stage_device))

    def stage_ranks(self) -> dict[int, int]:
        """torch's stage-index-to-rank mapping (``stage_index_to_group_rank``).

        Returns
        -------
        dict of int to int
        """
        rank = {d: r for r, d in enumerate(self.ranks())}
        return {s: rank[d] for s, d in enumerate(self.stage_device)}

    def stage_by_id(self, problem: Problem | PlanIds) -> dict[str, int]:
        """``{node id: stage}`` (what the runtime cuts its stage modules by).

        Parameters
        ----------
        problem : Problem or PlanIds
            The ids the plan was read against.

        Returns
        -------
        dict of str to int
        """
        return {problem.node_ids[v]: int(s) for v, s in enumerate(self.stage_of.tolist())}

    def csv_rows(self) -> list[list[str]]:
        """torch's compute-only CSV rows: one row of action strings per rank (``_load_csv``).

        Returns
        -------
        list of list of str
        """
        return [[str(a) for a in self.actions[d]] for d in self.ranks()]

    def same_as(self, other: "PipelinePlan") -> bool:
        """Whether two plans have the same stages, devices, actions and micro-batches.

        Parameters
        ----------
        other : PipelinePlan
            The plan to compare with.

        Returns
        -------
        bool
        """
        return (self.micro_batches == other.micro_batches and self.stage_device == other.stage_device
                and np.array_equal(self.stage_of, other.stage_of) and self.actions == other.actions)

    # ------------------------------------------------------------------ documents
    def to_dict(self, problem: Problem | PlanIds) -> dict[str, Any]:
        """The plan as JSON-able data (module docstring), ids from ``problem``.

        Parameters
        ----------
        problem : Problem or PlanIds
            The base problem the plan is for (or its ids).

        Returns
        -------
        dict
        """
        ids = problem.node_ids
        order = np.argsort(self.stage_of, kind="stable")
        bounds = np.searchsorted(self.stage_of[order], np.arange(self.n_stages + 1))
        stages = [{"stage": s, "device": problem.device_ids[d],
                   "nodes": [ids[v] for v in order[bounds[s]:bounds[s + 1]].tolist()]}
                  for s, d in enumerate(self.stage_device)]
        return {"micro_batches": self.micro_batches, "schedule": self.schedule, "stages": stages,
                "actions": {problem.device_ids[d]: [str(a) for a in self.actions[d]] for d in self.ranks()},
                "action_overhead": self.action_overhead}

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any], problem: Problem | PlanIds) -> "PipelinePlan":
        """Read :meth:`to_dict`'s form back, checked against ``problem`` (:meth:`check`).

        Parameters
        ----------
        doc : mapping
            The plan document.
        problem : Problem or PlanIds
            The base problem, or the ids to read against (:meth:`PlanIds.of`: the document's own).

        Returns
        -------
        PipelinePlan

        Raises
        ------
        ProblemError
            One line naming the field, node, device or action that is wrong.
        """
        if not isinstance(doc, Mapping):
            raise ProblemError("pipeline: the plan must be an object with micro_batches, stages and actions")
        for key in ("micro_batches", "stages", "actions"):
            if key not in doc:
                raise ProblemError(f"pipeline: the plan has no '{key}'")
        m = doc["micro_batches"]
        if isinstance(m, bool) or not isinstance(m, int) or m < 1:
            raise ProblemError(f"pipeline.micro_batches: expected an integer >= 1, got {m!r}")
        stages = doc["stages"]
        if not isinstance(stages, Sequence) or not stages:
            raise ProblemError("pipeline.stages: expected a non-empty list")
        stage_of = np.full(problem.n_nodes, -1, dtype=np.int64)
        devices: list[int] = []
        for s, st in enumerate(stages):
            if not isinstance(st, Mapping) or st.get("stage") != s:
                raise ProblemError(f"pipeline.stages[{s}]: expected {{'stage': {s}, 'device': ..., 'nodes': [...]}}")
            dev = st.get("device")
            if dev not in problem.device_index:
                raise ProblemError(f"pipeline.stages[{s}].device: unknown device {dev!r}")
            devices.append(problem.device_index[dev])
            for nid in st.get("nodes") or []:
                v = problem.node_index.get(nid) if isinstance(nid, str) else None
                if v is None:
                    raise ProblemError(f"pipeline.stages[{s}].nodes: unknown node {nid!r}")
                if stage_of[v] >= 0:
                    raise ProblemError(f"pipeline.stages: node '{nid}' is in stages {stage_of[v]} and {s}")
                stage_of[v] = s
        missing = np.flatnonzero(stage_of < 0)
        if missing.size:
            raise ProblemError(f"pipeline.stages: node '{problem.node_ids[int(missing[0])]}' is in no stage "
                               f"({missing.size} nodes are in none)")
        acts = doc["actions"]
        if not isinstance(acts, Mapping):
            raise ProblemError("pipeline.actions: expected {device id: [action, ...]}")
        per_device: list[list[Action]] = [[] for _ in range(problem.n_devices)]
        for dev, row in acts.items():
            if dev not in problem.device_index:
                raise ProblemError(f"pipeline.actions: unknown device {dev!r}")
            if not isinstance(row, Sequence) or isinstance(row, str):
                raise ProblemError(f"pipeline.actions[{dev!r}]: expected a list of action strings")
            per_device[problem.device_index[dev]] = [Action.parse(a) for a in row]
        overhead = doc.get("action_overhead", 0.0)
        if isinstance(overhead, bool) or not isinstance(overhead, (int, float)) or not 0 <= overhead < float("inf"):
            raise ProblemError(f"pipeline.action_overhead: expected seconds >= 0, got {overhead!r}")
        plan = cls(m, stage_of, tuple(devices), tuple(tuple(r) for r in per_device),
                   str(doc.get("schedule", "custom")), float(overhead))
        plan.check(problem)
        return plan

    @classmethod
    def from_result(cls, result: Any, problem: Problem) -> "PipelinePlan":
        """The plan a pipelined result carries (``result.options["pipeline"]``).

        Parameters
        ----------
        result : Result or mapping
            A result (or a result document) of a pipelined solve.
        problem : Problem
            The base problem.

        Returns
        -------
        PipelinePlan
        """
        options = result.get("options") if isinstance(result, Mapping) else getattr(result, "options", None)
        doc = options.get("pipeline") if isinstance(options, Mapping) else None
        if doc is None:
            raise ProblemError(NO_PLAN)
        return cls.from_dict(doc, problem)

    @classmethod
    def read(cls, result: Any) -> tuple["PipelinePlan", PlanIds, Mapping[str, Any]]:
        """The plan of a result or plan document read against the ids it names (no problem needed:
        what each process of torch's runtime does).

        Parameters
        ----------
        result : Result or mapping
            A pipelined result, its ``options``, or the plan document itself (a stage may list
            only its forward operators, all a process of the runtime needs).

        Returns
        -------
        tuple
            ``(plan, ids, document)``; device index ``r`` of ``ids`` is torch rank ``r``.

        Raises
        ------
        ProblemError
            No plan, or a malformed one: one line naming the field, node, device or action.
        """
        doc = getattr(result, "options", result)
        if isinstance(doc, Mapping) and "pipeline" in doc:
            doc = doc["pipeline"]
        if not isinstance(doc, Mapping) or "stages" not in doc:
            raise ProblemError(NO_PLAN)
        ids = PlanIds.of(doc)
        return cls.from_dict(doc, ids), ids, doc

    # ------------------------------------------------------------------ rules
    def check(self, problem: Problem | PlanIds) -> None:
        """Raise :class:`ProblemError` (one line) unless the actions are a valid runtime order.

        Every stage's device holds all its actions; every ``(stage, micro-batch)`` has one
        ``F`` and either one ``B`` or one ``I`` and one ``W``; on its device ``F`` comes before
        ``B``/``I``, ``I`` before ``W``; a stage's forwards, its backwards (``B`` or ``I``) and
        its weight-gradient actions (``B`` or ``W``) each run in micro-batch order (so the
        gradients accumulate in order, docs/model.md section 7). Deadlocks across devices are
        found by the simulator, not here.

        Parameters
        ----------
        problem : Problem or PlanIds
            The base problem (or its ids).
        """
        m, k = self.micro_batches, self.n_stages
        if self.stage_of.shape != (problem.n_nodes,):
            raise ProblemError(f"pipeline: stage_of has {self.stage_of.size} entries for {problem.n_nodes} nodes")
        if self.stage_of.size and (self.stage_of.min() < 0 or self.stage_of.max() >= k):
            raise ProblemError(f"pipeline: a stage index outside 0..{k - 1}")
        if any(not 0 <= d < problem.n_devices for d in self.stage_device):
            raise ProblemError("pipeline: a stage's device is not a device of the problem")
        if len(self.actions) != problem.n_devices:
            raise ProblemError(f"pipeline: {len(self.actions)} action lists for {problem.n_devices} devices")
        seen: dict[tuple[int, str, int], int] = {}
        for d, acts in enumerate(self.actions):
            last: dict[tuple[int, str], int] = {}
            for pos, a in enumerate(acts):
                dev = problem.device_ids[d]
                if not 0 <= a.stage < k or not 0 <= a.micro_batch < m or a.kind not in KINDS:
                    raise ProblemError(f"pipeline.actions[{dev!r}][{pos}] '{a}': stage or micro-batch out of range")
                if self.stage_device[a.stage] != d:
                    raise ProblemError(f"pipeline.actions[{dev!r}] '{a}': stage {a.stage} runs on "
                                       f"'{problem.device_ids[self.stage_device[a.stage]]}'")
                key = (a.stage, a.kind, a.micro_batch)
                if key in seen:
                    raise ProblemError(f"pipeline.actions[{dev!r}] '{a}' appears twice")
                seen[key] = pos
                for stream in _streams(a.kind):
                    prev = last.get((a.stage, stream), -1)
                    if a.micro_batch != prev + 1:
                        raise ProblemError(f"pipeline.actions[{dev!r}] '{a}': stage {a.stage}'s "
                                           f"{_STREAM_NAME[stream]} must run in micro-batch order (after {prev})")
                    last[(a.stage, stream)] = a.micro_batch
                if a.kind != "F" and (a.stage, "F", a.micro_batch) not in seen:
                    raise ProblemError(f"pipeline.actions[{dev!r}] '{a}' runs before '{a.stage}F{a.micro_batch}'")
                if a.kind == "W" and (a.stage, "I", a.micro_batch) not in seen:
                    raise ProblemError(f"pipeline.actions[{dev!r}] '{a}' runs before '{a.stage}I{a.micro_batch}'")
        for s in range(k):
            for i in range(m):
                full = (s, "B", i) in seen
                split = (s, "I", i) in seen, (s, "W", i) in seen
                if (s, "F", i) not in seen or full == any(split) or (not full and not all(split)):
                    raise ProblemError(f"pipeline.actions: stage {s}, micro-batch {i} needs one F and either "
                                       "one B or one I and one W")


#: Ordered streams an action kind belongs to: forwards, backwards that pass gradients on
#: (B or I), and weight-gradient work (B or W).
_STREAMS = {"F": ("f",), "B": ("b", "w"), "I": ("b",), "W": ("w",)}
_STREAM_NAME = {"f": "forwards", "b": "backwards (B or I)", "w": "weight gradients (B or W)"}


def _streams(kind: str) -> tuple[str, ...]:
    return _STREAMS[kind]
