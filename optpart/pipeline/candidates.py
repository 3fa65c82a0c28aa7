"""Stage layouts to schedule and their action orders timed by the simulator.

:func:`stage_candidates` cuts the forward chain (:mod:`optpart.pipeline.partition`) for each
family of layouts: one stage per device over every device (and over half of them), two per
device looped as interleaved schedules use them, two per device in a V. :func:`time_orders`
times the named schedules, 1F1B orders that keep fewer micro-batches in flight and one
micro-batch at a time on a layout (:class:`Scored`: plan, timeline, whether memory fits).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..model.memory import fits
from ..model.problem import Problem
from .costs import StageCosts, stage_costs
from .partition import partitions
from .plan import Action, PipelinePlan
from .schedules import NAMED, STYLE, TORCH_NAME, _one_f_one_b, accepts, loop_stage_ranks, named_actions, sequential, v_stage_ranks
from .simulate import Timeline, simulate
from .stages import ForwardChain, forward_chain, stage_of_cuts
from .step import PipelineStep

__all__ = ["Candidate", "Scored", "stage_candidates", "orders_for", "time_orders", "memory_fits"]


@dataclass
class Candidate:
    """One stage layout: ``stage_of`` per base node, ``stage_device`` per stage, and its family."""

    stage_of: np.ndarray
    stage_device: tuple[int, ...]
    local: int
    style: str
    label: str
    costs: StageCosts | None = None


@dataclass
class Scored:
    """A timed plan: its candidate, plan, timeline and whether its memory fits (simulated)."""

    cand: Candidate
    plan: PipelinePlan
    tl: Timeline
    fits: bool
    #: CP-SAT's bound on every order of these stages and whether it proved its order optimal
    #: (:mod:`optpart.pipeline.exact`), when it ran.
    exact_bound: float | None = None
    exact_proven: bool = False

    @property
    def makespan(self) -> float:
        """Simulated step time (the evaluator's)."""
        return self.tl.makespan


def _ranks(p: Problem, k: int) -> list[int]:
    """The ``k`` devices a layout of ``k`` ranks uses: the largest memories, in device order."""
    order = sorted(range(p.n_devices), key=lambda d: (-p.device_memory[d], d))[:k]
    return sorted(order)


def stage_candidates(step: PipelineStep, chain: ForwardChain | None = None,
                     families: tuple[tuple[int, str, int], ...] | None = None) -> list[Candidate]:
    """Stage layouts to schedule (module docstring), each allowed by pins and forbidden devices.

    Parameters
    ----------
    step : PipelineStep
        The pipelined step.
    chain : ForwardChain, optional
        Its chain (computed when not given).
    families : tuple of (stages per rank, style, ranks), optional
        Default: one stage per device on all devices (and on half when there are at least
        four), two per device looped and in a V.

    Returns
    -------
    list of Candidate
    """
    p = step.base
    chain = forward_chain(step) if chain is None else chain
    k = p.n_devices
    if families is None:
        families = ((1, "loop", k), (2, "loop", k), (2, "v", k)) + (((1, "loop", k // 2),) if k >= 4 else ())
    out: list[Candidate] = []
    seen: set[tuple] = set()
    for local, style, ranks in families:
        if ranks < 1 or (local * ranks > 1 and chain.n_positions < local * ranks):
            continue
        devs = _ranks(p, ranks)
        stage_ranks = v_stage_ranks(ranks) if style == "v" else loop_stage_ranks(ranks, local)
        stage_device = tuple(devs[r] for r in stage_ranks)
        for cuts in partitions(chain, step, stage_device):
            stage_of = stage_of_cuts(chain, cuts)
            if not _allowed(p, stage_of, stage_device):
                continue
            key = (stage_device, tuple(cuts))
            if key in seen:
                continue
            seen.add(key)
            out.append(Candidate(stage_of, stage_device, local, style,
                                 f"{len(stage_device)} stages on {ranks} devices ({style})"))
    return out


def _allowed(p: Problem, stage_of: np.ndarray, stage_device) -> bool:
    dev = np.asarray(stage_device, dtype=np.int64)[stage_of]
    return bool(p.allowed[np.arange(p.n_nodes), dev].all())


def orders_for(cand: Candidate, m: int, names) -> list[tuple[str, list[list[Action]]]]:
    """Named and memory-aware action orders for one candidate, per device index.

    Parameters
    ----------
    cand : Candidate
        The stage layout.
    m : int
        Micro-batches.
    names : iterable of str
        Schedule names wanted (keys of :data:`~optpart.pipeline.schedules.NAMED`,
        ``sequential``, ``1f1b-cap<q>`` for 1F1B keeping at most ``q`` in flight).

    Returns
    -------
    list of (str, list of list of Action)
        ``(schedule name, actions per device)``; names that do not apply to the layout are skipped.
    """
    ranks = list(dict.fromkeys(cand.stage_device))  # torch ranks: devices in the order their first stage comes
    k = len(ranks)
    stage_ranks = [ranks.index(d) for d in cand.stage_device]
    n_dev = max(cand.stage_device) + 1
    out = []
    for name in names:
        if name == "sequential":
            per_rank = sequential(stage_ranks, k, m)
        elif name.startswith("1f1b-cap"):
            if cand.local != 1:
                continue
            per_rank = _one_f_one_b(k, m, cap=int(name[len("1f1b-cap"):]))
        elif name in NAMED:
            local, style = STYLE[name]
            if (local, style) != (cand.local, cand.style if local > 1 else "loop") or not accepts(name, k, m):
                continue
            per_rank = named_actions(name, k, m)
        else:
            continue
        actions: list[list[Action]] = [[] for _ in range(n_dev)]
        for r, acts in enumerate(per_rank):
            actions[ranks[r]] = acts
        out.append((name, actions))
    return out


def time_orders(step: PipelineStep, cand: Candidate, names, memory_model: str) -> list[Scored]:
    """Every applicable order of ``names`` on ``cand`` timed by the simulator (deadlocks dropped).

    Parameters
    ----------
    step : PipelineStep
        The step.
    cand : Candidate
        The stage layout (its costs are computed and kept on it).
    names : iterable of str
        As :func:`orders_for`.
    memory_model : {"peak", "static"}
        The model ``fits`` is judged under.

    Returns
    -------
    list of Scored
    """
    if cand.costs is None:
        cand.costs = stage_costs(step, cand.stage_of, cand.stage_device)
    p = step.base
    out = []
    for name, actions in orders_for(cand, step.micro_batches, names):
        actions = actions + [[] for _ in range(p.n_devices - len(actions))]
        tl = simulate(cand.costs, actions)
        if tl is None:
            continue
        schedule = TORCH_NAME.get(name, "custom")
        plan = PipelinePlan(step.micro_batches, cand.stage_of, cand.stage_device, tuple(map(tuple, actions)),
                            schedule, step.action_overhead)
        out.append(Scored(cand, plan, tl, memory_fits(cand.costs, tl, memory_model)))
    return out


def memory_fits(costs: StageCosts, tl: Timeline, memory_model: str) -> bool:
    """Whether the simulated memory (an upper bound of the evaluator's) fits every device.

    Parameters
    ----------
    costs : StageCosts
        The stage costs.
    tl : Timeline
        The timed plan (with memory).
    memory_model : {"peak", "static"}
        The model.

    Returns
    -------
    bool
    """
    use = tl.memory if memory_model == "peak" else costs.static
    cap = costs.step.base.device_memory
    return bool(fits(use, cap).all())
