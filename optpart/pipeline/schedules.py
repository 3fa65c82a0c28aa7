"""Named pipeline schedules as action lists, the orders torch 2.13's schedule classes generate.

Each generator takes the number of ranks ``K`` (devices holding stages) and micro-batches
``M`` and returns, per rank, its compute actions in the order the class's
``pipeline_order`` lists them (torch's ``None`` bubbles dropped, its ``REDUCE_GRAD``
bookkeeping left out, DualPipeV's ``OVERLAP_F_B`` pairs flattened into their two actions, which
torch's runtime runs one after the other when no overlap function is registered).
``tests/pipeline/test_named_schedules.py`` compares every generator with torch's own.

===================  =========================  ===================  ============================
name                 torch class                stages per rank      stage of rank ``r``
===================  =========================  ===================  ============================
``gpipe``            ``GPipe``                  1                    ``r``
``1f1b``             ``1F1B`` (``M >= K``)    1                    ``r``
``zbh1``             ``InterleavedZeroBubble``  1                    ``r``
``interleaved1f1b``  ``Interleaved1F1B``        2 (loop)             ``r``, ``K + r``
``zbv``              ``ZBVZeroBubble``          2 (V)                ``r``, ``2K - 1 - r``
``dualpipev``        ``DualPipeV`` (``M >= 2K``)  2 (V)              ``r``, ``2K - 1 - r``
``sequential``       (custom)                   any                  any
===================  =========================  ===================  ============================

``sequential`` runs the micro-batches one after another (every stage's forward of
micro-batch 0, every backward, then micro-batch 1, ...): one micro-batch in flight, the
least memory, always runnable.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Callable

from .plan import Action

__all__ = ["NAMED", "STYLE", "TORCH_NAME", "ORDER_NAMES", "SUMMARY", "named_actions", "v_stage_ranks",
           "loop_stage_ranks", "accepts", "sequential", "torch_schedule"]

Lists = list[list[Action]]


def _gpipe(k: int, m: int) -> Lists:
    return [[Action(r, "F", i) for i in range(m)] + [Action(r, "B", i) for i in range(m)] for r in range(k)]


def _one_f_one_b(k: int, m: int, cap: int | None = None) -> Lists:
    """torch's ``Schedule1F1B._step_microbatches``: ``min(M, K - r)`` forwards, then one
    backward and one forward at a time, then the remaining backwards. ``cap`` bounds the
    micro-batches in flight per stage (at least one); None is torch's order."""
    out = []
    for r in range(k):
        warm = min(m, k - r) if cap is None else max(1, min(m, k - r, cap))
        acts = [Action(r, "F", i) for i in range(warm)]
        f = warm
        for b in range(m):
            acts.append(Action(r, "B", b))
            if f < m:
                acts.append(Action(r, "F", f))
                f += 1
        out.append(acts)
    return out


def _rounds(k: int, m: int) -> int:
    rounds = max(1, m // k)
    return m // rounds


def _interleaved(k: int, m: int, local: int, zero_bubble: bool) -> Lists:
    """torch's ``_get_1f1b_rank_ops`` for Interleaved1F1B / InterleavedZeroBubble."""
    per_round = _rounds(k, m)
    out = []
    for r in range(k):
        factor = 1 if zero_bubble else 2
        warm = min((local - 1) * per_round + factor * (k - 1 - r), m * local)
        ops = local * m
        fwd_bwd = ops - warm
        total = warm + fwd_bwd + warm
        fwd_stage = lambda op: ((op // per_round) % local) * k + r  # noqa: E731
        bwd_stage = lambda op: (local - 1 - ((op - warm) // per_round) % local) * k + r  # noqa: E731
        f_mb: dict[int, int] = defaultdict(int)
        b_mb: dict[int, int] = defaultdict(int)
        w_mb: dict[int, int] = defaultdict(int)
        kind = "I" if zero_bubble else "B"
        acts: list[Action] = []
        backward_ops: list[int] = []
        w_count = 0

        def weight(op: int) -> None:
            nonlocal w_count
            if zero_bubble and op - warm >= r:
                s = bwd_stage(backward_ops[w_count])
                acts.append(Action(s, "W", w_mb[s]))
                w_mb[s] += 1
                w_count += 1

        for op in range(total):
            if op < warm + fwd_bwd:
                s = fwd_stage(op)
                acts.append(Action(s, "F", f_mb[s]))
                f_mb[s] += 1
            if op >= warm:
                s = bwd_stage(op)
                acts.append(Action(s, kind, b_mb[s]))
                b_mb[s] += 1
                backward_ops.append(op)
                weight(op)
        while zero_bubble and w_count < len(backward_ops):
            s = bwd_stage(backward_ops[w_count])
            acts.append(Action(s, "W", w_mb[s]))
            w_mb[s] += 1
            w_count += 1
        out.append(acts)
    return out


def _zbv(k: int, m: int) -> Lists:
    """torch's ``ScheduleZBVZeroBubble._calculate_single_rank_operations``."""
    n_micro = max(2 * k - 1, m)
    out = []
    for r in range(k):
        c0, c1 = r, 2 * k - 1 - r
        acts: list[Action] = []
        f0 = f1 = b0 = b1 = 0
        for _ in range(2 * (k - r) - 1):
            acts.append(Action(c0, "F", f0)); f0 += 1
        for _ in range(r):
            acts.append(Action(c1, "F", f1)); f1 += 1
            acts.append(Action(c0, "F", f0)); f0 += 1
        for _ in range(k - r):
            acts += [Action(c1, "F", f1), Action(c1, "I", b1), Action(c1, "W", b1)]
            f1 += 1; b1 += 1
        while f1 < f0 or f0 < n_micro:
            if f0 < n_micro:
                acts.append(Action(c0, "F", f0)); f0 += 1
            acts += [Action(c0, "I", b0), Action(c0, "W", b0)]; b0 += 1
            acts += [Action(c1, "F", f1), Action(c1, "I", b1), Action(c1, "W", b1)]
            f1 += 1; b1 += 1
        w0, w1 = b0, b1
        for _ in range(r):
            acts.append(Action(c0, "I", b0)); b0 += 1
            acts.append(Action(c1, "I", b1)); b1 += 1
        for _ in range(k - r):
            acts.append(Action(c0, "I", b0)); b0 += 1
            acts.append(Action(c0, "W", w0)); w0 += 1
        while w1 < b1:
            acts.append(Action(c1, "W", w1)); w1 += 1
        while w0 < b0:
            acts.append(Action(c0, "W", w0)); w0 += 1
        out.append([a for a in acts if a.micro_batch < m])
    return out


def _dualpipev(k: int, m: int) -> Lists:
    """torch's ``ScheduleDualPipeV._calculate_single_rank_operations``, overlaps flattened."""
    out = []
    for r in range(k):
        s0, s1 = r, 2 * k - 1 - r
        count: dict[tuple[int, str], int] = defaultdict(int)
        queue: list[tuple[int, int]] = []
        acts: list[Action] = []

        def add(s: int, kind: str) -> None:
            key = (s, "I" if kind == "B" else kind)
            i = count[key]
            acts.append(Action(s, kind, i))
            if kind == "B":
                count[(s, "I")] += 1
                count[(s, "W")] += 1
            else:
                if kind == "I":
                    queue.append((s, i))
                count[key] = i + 1

        def overlap(fs: int, bs: int) -> None:
            acts.append(Action(fs, "F", count[(fs, "F")]))
            acts.append(Action(bs, "B", count[(bs, "I")]))
            count[(fs, "F")] += 1
            count[(bs, "I")] += 1
            count[(bs, "W")] += 1

        def weight() -> None:
            if queue:
                s, i = queue.pop(0)
                acts.append(Action(s, "W", i))
                count[(s, "W")] += 1

        for _ in range((k - r - 1) * 2):
            add(s0, "F")
        for _ in range(r + 1):
            add(s0, "F"); add(s1, "F")
        for _ in range(k - r - 1):
            add(s1, "I"); weight(); add(s1, "F")
        for i in range(m - k * 2 + r + 1):
            if i == 0 and r == k - 1:
                add(s0, "F"); add(s1, "B")
            else:
                overlap(s0, s1)
            overlap(s1, s0)
        for _ in range(k - r - 1):
            add(s1, "B"); overlap(s1, s0)
        zb = False
        steps = r + 1
        for i in range(steps):
            if i == steps // 2 and r % 2 == 1:
                zb = True
            add(s1, "I" if zb else "B")
            if i == steps // 2 and r % 2 == 0:
                zb = True
            add(s0, "I" if zb else "B")
        for _ in range(k - r - 1):
            weight(); add(s0, "I" if zb else "B")
        for _ in range(r + 1):
            weight()
        out.append(acts)
    return out


def loop_stage_ranks(k: int, local: int) -> list[int]:
    """Rank of each stage when ``local`` stages per rank loop over ``k`` ranks (stage ``s`` on ``s % k``).

    Parameters
    ----------
    k : int
        Ranks.
    local : int
        Stages per rank.

    Returns
    -------
    list of int
    """
    return [s % k for s in range(k * local)]


def v_stage_ranks(k: int) -> list[int]:
    """Rank of each of ``2k`` stages in a V (stage ``s`` and ``2k - 1 - s`` on rank ``s``).

    Parameters
    ----------
    k : int
        Ranks.

    Returns
    -------
    list of int
    """
    return [s if s < k else 2 * k - 1 - s for s in range(2 * k)]


def sequential(stage_ranks: list[int], k: int, m: int) -> Lists:
    """Micro-batches one after another: per micro-batch every forward in stage order, then every
    backward in reverse; each rank keeps its share of that order (never deadlocks).

    Parameters
    ----------
    stage_ranks : list of int
        Rank per stage.
    k : int
        Ranks.
    m : int
        Micro-batches.

    Returns
    -------
    list of list of Action
        Per rank.
    """
    out: Lists = [[] for _ in range(k)]
    n = len(stage_ranks)
    for i in range(m):
        for s in range(n):
            out[stage_ranks[s]].append(Action(s, "F", i))
        for s in reversed(range(n)):
            out[stage_ranks[s]].append(Action(s, "B", i))
    return out


#: name -> generator ``(K, M) -> per-rank actions``.
NAMED: dict[str, Callable[[int, int], Lists]] = {
    "gpipe": _gpipe,
    "1f1b": _one_f_one_b,
    "zbh1": lambda k, m: _interleaved(k, m, 1, True),
    "interleaved1f1b": lambda k, m: _interleaved(k, m, 2, False),
    "zbv": _zbv,
    "dualpipev": _dualpipev,
}
#: Solver names of :func:`optpart.solve` that exist only for pipelined steps: each named
#: schedule alone, and one micro-batch at a time.
ORDER_NAMES = tuple(NAMED) + ("sequential",)
#: One line per order name, for ``optpart solvers``.
SUMMARY = {
    "gpipe": "GPipe order: every forward, then every backward (all micro-batches in flight)",
    "1f1b": "1F1B order (torch Schedule1F1B): K - r forwards, then one backward and one forward at a time",
    "zbh1": "ZB-H1 (torch InterleavedZeroBubble, one stage per device): 1F1B's memory, weight gradients "
            "deferred into the bubbles",
    "interleaved1f1b": "Interleaved 1F1B (torch Interleaved1F1B): two stages per device, looped",
    "zbv": "ZB-V (torch ZBVZeroBubble): two stages per device in a V, split backwards",
    "dualpipev": "DualPipeV (torch DualPipeV): two stages per device in a V, forward and backward paired",
    "sequential": "one micro-batch at a time through every stage (the least memory)",
}
#: name -> (stages per rank, "loop" or "v").
STYLE = {"gpipe": (1, "loop"), "1f1b": (1, "loop"), "zbh1": (1, "loop"), "interleaved1f1b": (2, "loop"),
         "zbv": (2, "v"), "dualpipev": (2, "v")}
#: name -> the torch schedule class name (``get_schedule_class``).
TORCH_NAME = {"gpipe": "GPipe", "1f1b": "1F1B", "zbh1": "InterleavedZeroBubble",
              "interleaved1f1b": "Interleaved1F1B", "zbv": "ZBVZeroBubble", "dualpipev": "DualPipeV"}


def accepts(name: str, k: int, m: int) -> bool:
    """Whether torch's class of ``name`` accepts ``K`` ranks and ``M`` micro-batches.

    Parameters
    ----------
    name : str
        A key of :data:`NAMED`.
    k, m : int
        Ranks and micro-batches.

    Returns
    -------
    bool
    """
    if name == "1f1b":
        return m >= k
    if name == "dualpipev":
        return m >= 2 * k
    if name in ("zbh1", "interleaved1f1b"):
        return m % max(1, m // k) == 0
    return True


def named_actions(name: str, k: int, m: int) -> Lists:
    """Per-rank actions of the named schedule (module docstring), stage numbers torch's.

    Parameters
    ----------
    name : str
        A key of :data:`NAMED`.
    k, m : int
        Ranks and micro-batches.

    Returns
    -------
    list of list of Action
    """
    return NAMED[name](k, m)


def torch_schedule(plan) -> str:
    """The torch schedule class a plan's action lists are exactly, else ``"custom"``.

    A plan is a named schedule when its stages sit on the ranks that class puts them on
    (one per rank, looped, or in a V) and every rank's list is the class's order
    (:func:`named_actions`); torch's runtime then runs that class, otherwise it runs the lists
    themselves (``_PipelineScheduleRuntime``).

    Parameters
    ----------
    plan : PipelinePlan
        The plan.

    Returns
    -------
    str
        A value of :data:`TORCH_NAME`, or ``"custom"``.
    """
    ranks = plan.ranks()
    k, m = len(ranks), plan.micro_batches
    mapping = plan.stage_ranks()
    stage_ranks = [mapping[s] for s in range(plan.n_stages)]
    lists = [list(plan.actions[d]) for d in ranks]
    for name in NAMED:
        local, style = STYLE[name]
        want = v_stage_ranks(k) if style == "v" else loop_stage_ranks(k, local)
        if stage_ranks == want and accepts(name, k, m) and lists == named_actions(name, k, m):
            return TORCH_NAME[name]
    return "custom"
