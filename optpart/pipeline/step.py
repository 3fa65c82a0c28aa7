"""The pipelined step: one training step of ``M`` micro-batches (``docs/model.md`` section 7).

:class:`PipelineStep` turns a problem (one step of the whole batch) into what every pipelined
plan shares:

* which nodes run **once per step** (the optimizer updates and everything downstream of them)
  and which run **once per micro-batch** (forward and backward operators), and which of those
  are **backward** (labelled ``phase: backward``, or downstream of such a node);
* the per-micro-batch costs (time, ``output_bytes``, ``temp_bytes`` and edge bytes scale by
  ``1/M`` unless the file says its costs are already per micro-batch; ``param_bytes`` never
  scale and are held once; gradients sent to a once-per-step node are parameter-sized);
* the parameters **tied** across modules (:func:`tied_parameters`), replicated by a plan that
  puts their parts on several devices;
* the runtime's own cost per action (``action_overhead``, seconds: :func:`default_action_overhead`),
  part of every action's time;
* the **unrolled problem** a plan is judged on: ``M`` copies of every per-micro-batch node (ids
  ``v@mb<i>``), one of every once-per-step node, gradient accumulation as a chain (copy ``i``
  of a node that feeds an update has an edge to copy ``i + 1``, the last copy to the update),
  and the replicas a plan needs. Where each copy runs is the plan's (its stage's device),
  checked against the plan by ``optpart evaluate``.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field

import numpy as np

from ..errors import ProblemError
from ..model.problem import Problem
from .unrolled import build_micro, build_unrolled

__all__ = ["PipelineStep", "TiedParameter", "check_micro_batches", "recorded_micro_batches", "once_mask",
           "backward_mask", "tied_parameters", "batch_note", "default_action_overhead", "check_action_overhead",
           "CPU_ACTION_SECONDS"]

#: Most tasks (node copies plus edge copies) an unrolled step may have: beyond it the step of
#: ``M`` micro-batches is refused with one line instead of exhausting memory.
MAX_UNROLLED = 20_000_000

#: Seconds torch's pipelining runtime spends of its own on every action when the host runs the
#: operators too (a CPU): the schedule loop's Python dispatch, autograd's set-up of a stage's
#: backward, send and receive set-up. ``benchmarks/pipeline_measured.py`` measures it on a
#: calibration model whose operators cost almost nothing (docs/model.md section 7).
CPU_ACTION_SECONDS = 1.0e-3

#: ``phase`` / ``op`` values that mark a once-per-step (optimizer) node.
_ONCE_PHASES = ("optimizer", "update")


def check_micro_batches(micro_batches, problem: Problem | None = None) -> int:
    """Validate a micro-batch count: an integer >= 1, not above the batch when it is known.

    Parameters
    ----------
    micro_batches
        The requested count (int, or an integral string from the command line). ``None``, a
        flag not given, is the count the problem records (``meta.pipeline.micro_batches``,
        written by an import at the micro-batch size), else 1.
    problem
        When given and its ``meta`` holds ``batch_size``, ``M`` may not exceed it and must
        divide it (a micro-batch is an equal share of the batch).

    Returns
    -------
    int
        The count.

    Raises
    ------
    ProblemError
        With one line naming ``--micro-batches`` and the offending value.
    """
    value = recorded_micro_batches(problem) if micro_batches is None else micro_batches
    if isinstance(value, str):
        try:
            value = int(value.strip())
        except ValueError:
            raise ProblemError(f"--micro-batches must be an integer >= 1, got {micro_batches!r}") from None
    if isinstance(value, bool):
        raise ProblemError(f"--micro-batches must be an integer >= 1, got {micro_batches!r}")
    if not isinstance(value, numbers.Integral):
        if isinstance(value, numbers.Real) and float(value).is_integer():
            value = int(value)
        else:
            raise ProblemError(f"--micro-batches must be an integer >= 1, got {micro_batches!r}")
    value = int(value)
    if value < 1:
        raise ProblemError(f"--micro-batches must be an integer >= 1, got {value}")
    batch = (problem.meta or {}).get("batch_size") if problem is not None else None
    if isinstance(batch, numbers.Integral) and not isinstance(batch, bool) and batch >= 1:
        if value > batch:
            raise ProblemError(f"--micro-batches {value} is larger than the batch ({batch} samples)")
        if batch % value:
            raise ProblemError(f"--micro-batches {value} does not divide the batch of {batch} samples "
                               "into equal micro-batches")
    return value


def default_action_overhead(problem: Problem) -> tuple[float, str]:
    """The runtime's seconds per action a step of ``problem`` assumes, and why.

    Operator times measured on a CPU (``optpart import --profile``): the host that runs the
    operators also runs torch's schedule loop, so every action adds
    :data:`CPU_ACTION_SECONDS`. Otherwise (times priced for an accelerator, or given in the
    file) 0: an accelerator's kernels are queued asynchronously, and the host's work per
    action runs while the device computes the previous one.

    Parameters
    ----------
    problem : Problem
        The base problem (its ``meta.cost_model``).

    Returns
    -------
    tuple
        ``(seconds, what it is)``, the text as printed beside a pipelined step time.
    """
    cm = (problem.meta or {}).get("cost_model")
    prof = cm.get("profile") if isinstance(cm, dict) else None
    if isinstance(prof, dict) and str(prof.get("device", "")).startswith("cpu"):
        return CPU_ACTION_SECONDS, "torch's runtime on a CPU (the default for times measured on a CPU)"
    return 0.0, "none (the host's work per action overlaps the device's)"


def check_action_overhead(value) -> float:
    """Validate seconds per action: a finite number >= 0.

    Parameters
    ----------
    value
        The value given (a number).

    Returns
    -------
    float

    Raises
    ------
    ProblemError
        One line naming ``--action-overhead`` and the value.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 <= float(value) < float("inf"):
        raise ProblemError(f"--action-overhead must be a time >= 0 (e.g. 1ms), got {value!r}")
    return float(value)


def recorded_micro_batches(problem: Problem | None) -> object:
    """The micro-batch count a problem file records (``meta.pipeline.micro_batches``), else 1.

    Parameters
    ----------
    problem
        A problem, or ``None``.

    Returns
    -------
    object
        The recorded value as the file gives it (validated by :func:`check_micro_batches`),
        or 1.
    """
    record = (problem.meta or {}).get("pipeline") if problem is not None else None
    return record.get("micro_batches", 1) if isinstance(record, dict) else 1


def _meta_value(problem: Problem, v: int, key: str) -> str:
    if problem.node_meta is None:
        return ""
    x = problem.node_meta[v].get(key, "")
    return x if isinstance(x, str) else ""


def once_mask(problem: Problem) -> np.ndarray:
    """Nodes that run once per step: optimizer nodes and everything downstream of them.

    A node is an optimizer node when its ``phase`` is ``optimizer`` or its ``op`` starts with
    ``optimizer`` (what the torch importer writes, one ``optimizer.update`` per parameter).
    Downstream nodes must follow the last micro-batch's update, so they run once too.

    Parameters
    ----------
    problem
        One step of the whole batch, with node metadata ``phase`` / ``op``.

    Returns
    -------
    numpy.ndarray
        Boolean per node: runs once per step.
    """
    n = problem.n_nodes
    once = np.zeros(n, dtype=bool)
    for v in range(n):
        phase = _meta_value(problem, v, "phase").lower()
        op = _meta_value(problem, v, "op").lower()
        once[v] = phase in _ONCE_PHASES or op.startswith("optimizer")
    return _downstream(problem, once)


def backward_mask(problem: Problem) -> np.ndarray:
    """Nodes labelled ``phase: backward`` and every node downstream of one.

    Parameters
    ----------
    problem
        One step of the whole batch, with node metadata ``phase``.

    Returns
    -------
    numpy.ndarray
        Boolean per node: belongs to the backward pass.
    """
    n = problem.n_nodes
    bwd = np.array([_meta_value(problem, v, "phase").lower() == "backward" for v in range(n)], dtype=bool)
    return _downstream(problem, bwd)


def _downstream(problem: Problem, mask: np.ndarray) -> np.ndarray:
    out = mask.copy()
    src, dst = problem.edge_src, problem.edge_dst
    for v in problem.topo.tolist():
        if out[v]:
            continue
        ins = problem.in_edges[problem.in_ptr[v]:problem.in_ptr[v + 1]]
        if ins.size and out[src[ins]].any():
            out[v] = True
    del dst
    return out


@dataclass(frozen=True)
class TiedParameter:
    """A parameter shared by modules that are not nested (a language model head tied to the
    token embedding): its colocation group split by module.

    Attributes
    ----------
    group : int
        Index of the colocation group in ``problem.groups``.
    owner : int
        The parameter's update node (optimizer node).
    parts : tuple of numpy.ndarray
        Node indices per part, the owner's part (the update's module, with the members outside
        every module) first; each part stays on one stage.
    """

    group: int
    owner: int
    parts: tuple


def tied_parameters(problem: Problem) -> tuple[TiedParameter, ...]:
    """Colocation groups of one parameter used by modules that are not nested.

    A group qualifies when its members' ``module`` paths fall into more than one subtree
    (modules nested in each other count as one) and exactly one subtree holds optimizer
    nodes, the parameter's update. torch's pipelining replicates such a parameter on every
    stage that uses it and the gradients are summed; the pipelined plan may put the parts on
    different stages, each part on one (``docs/model.md`` section 7). Without ``module``
    metadata nothing qualifies: a group is never cut.

    Parameters
    ----------
    problem : Problem
        The base problem.

    Returns
    -------
    tuple of TiedParameter
    """
    if problem.node_meta is None:
        return ()
    out = []
    for g, grp in enumerate(problem.groups):
        mods = {v: _meta_value(problem, v, "module") for v in grp.tolist()}
        named = sorted({m for m in mods.values() if m})
        roots = [m for m in named if not any(o != m and m.startswith(o + ".") for o in named)]
        if len(roots) < 2:
            continue
        root_of = {v: next((r for r in roots if m == r or m.startswith(r + ".")), None) for v, m in mods.items()}
        updates = {root_of[v] for v in mods if _meta_value(problem, v, "op").lower().startswith("optimizer")
                   or _meta_value(problem, v, "phase").lower() in _ONCE_PHASES}
        if len(updates) != 1 or None in updates:
            continue
        owner_root = updates.pop()
        owner = next(v for v in grp.tolist() if root_of[v] == owner_root
                     and (_meta_value(problem, v, "op").lower().startswith("optimizer")
                          or _meta_value(problem, v, "phase").lower() in _ONCE_PHASES))
        parts = [np.array([v for v in grp.tolist() if root_of[v] in (owner_root, None)], dtype=np.int64)]
        parts += [np.array([v for v in grp.tolist() if root_of[v] == r], dtype=np.int64) for r in roots
                  if r != owner_root]
        out.append(TiedParameter(g, owner, tuple(parts)))
    return tuple(out)


def batch_note(problem: Problem, micro_batches: int) -> str | None:
    """One line for a step of ``M > 1`` micro-batches of a file that records no batch size.

    Parameters
    ----------
    problem : Problem
        The base problem.
    micro_batches : int
        ``M``.

    Returns
    -------
    str or None
        ``None`` when ``M`` is 1 or the file records ``meta.batch_size`` (or its costs are per
        micro-batch).
    """
    meta = problem.meta or {}
    if micro_batches <= 1 or "batch_size" in meta or _per_micro_batch_file(problem):
        return None
    return (f"note: '{problem.name}' records no batch size (meta.batch_size); --micro-batches {micro_batches} "
            f"assumes its costs divide into {micro_batches} equal micro-batches")


def _per_micro_batch_file(problem: Problem) -> bool:
    """True when the file states that its costs are already those of one micro-batch."""
    return bool((problem.meta or {}).get("per_micro_batch", False))


@dataclass
class PipelineStep:
    """A step of ``micro_batches`` micro-batches over ``base`` (see the module docstring).

    Attributes
    ----------
    base : Problem
        The problem as given (one step of the whole batch).
    micro_batches : int
        ``M``.
    once : numpy.ndarray
        Boolean per base node: runs once per step.
    backward : numpy.ndarray
        Boolean per base node: belongs to the backward pass.
    forward : numpy.ndarray
        Boolean per base node: the forward pass (neither once per step nor backward).
    time, output_bytes, temp_bytes, edge_bytes : numpy.ndarray
        Per-micro-batch costs of the base nodes and edges (once-per-step nodes unscaled).
    action_overhead : float
        Seconds the runtime spends of its own on every action (given, else
        :func:`default_action_overhead`).
    overhead_source : str
        What that figure is (``"given"`` or the default's reason).
    """

    base: Problem
    micro_batches: int
    action_overhead: float | None = None
    overhead_source: str = field(init=False, default="given")
    once: np.ndarray = field(init=False)
    backward: np.ndarray = field(init=False)
    forward: np.ndarray = field(init=False)
    time: np.ndarray = field(init=False)
    output_bytes: np.ndarray = field(init=False)
    temp_bytes: np.ndarray = field(init=False)
    edge_bytes: np.ndarray = field(init=False)
    _unrolled: dict = field(init=False, default_factory=dict, repr=False)
    _tied: tuple | None = field(init=False, default=None, repr=False)
    _micro: Problem | None = field(init=False, default=None, repr=False)

    def __post_init__(self) -> None:
        p, m = self.base, check_micro_batches(self.micro_batches, self.base)
        self.micro_batches = m
        if self.action_overhead is None:
            self.action_overhead, self.overhead_source = default_action_overhead(p)
        else:
            self.action_overhead = check_action_overhead(self.action_overhead)
        size = m * (p.n_nodes + p.n_edges)
        if size > MAX_UNROLLED:
            raise ProblemError(f"--micro-batches {m}: the step of {m} micro-batches of '{p.name}' has about "
                               f"{size:.3g} node and edge copies, more than the {MAX_UNROLLED:.3g} optpart "
                               "unrolls; use fewer micro-batches")
        self.once = once_mask(p)
        self.backward = backward_mask(p) & ~self.once
        self.forward = ~self.once & ~self.backward
        scale = 1.0 if _per_micro_batch_file(p) else 1.0 / m
        per = ~self.once
        self.time = np.where(per, p.time * scale, p.time)
        # a node whose output feeds a once-per-step node sends a parameter-sized gradient
        grad = np.zeros(p.n_nodes, dtype=bool)
        to_once = self.once[p.edge_dst] & per[p.edge_src]
        grad[p.edge_src[to_once]] = True
        self.output_bytes = np.where(per & ~grad, p.output_bytes * scale, p.output_bytes)
        self.temp_bytes = np.where(per, p.temp_bytes * scale, p.temp_bytes)
        self.edge_bytes = np.where(per[p.edge_src] & per[p.edge_dst], p.edge_bytes * scale, p.edge_bytes)

    # ------------------------------------------------------------------ tasks
    @property
    def n_tasks(self) -> int:
        """Nodes of the unrolled step: ``M`` per per-micro-batch node, one per once node."""
        return int((~self.once).sum()) * self.micro_batches + int(self.once.sum())

    def task_index(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(node, micro_batch, task_of)`` of the unrolled problem's node order.

        Unrolled node ``t`` is copy ``micro_batch[t]`` of base node ``node[t]`` (once nodes
        have micro-batch ``M - 1``, the last); ``task_of[i, v]`` is the unrolled index of copy
        ``i`` of ``v`` (for once nodes the same index for every ``i``). Order: micro-batch 0's
        copies in base order, then micro-batch 1's, ..., then the once nodes.

        Returns
        -------
        tuple of numpy.ndarray
            ``(node, micro_batch, task_of)`` as above.
        """
        p, m = self.base, self.micro_batches
        if m == 1:  # one micro-batch: the base problem's own order (M = 1 is the ordinary step)
            order = np.arange(p.n_nodes, dtype=np.int64)
            return order, np.zeros(p.n_nodes, dtype=np.int64), order[None, :].copy()
        per = np.flatnonzero(~self.once)
        one = np.flatnonzero(self.once)
        node = np.concatenate([np.tile(per, m), one]).astype(np.int64)
        mb = np.concatenate([np.repeat(np.arange(m), per.size), np.full(one.size, m - 1)]).astype(np.int64)
        task_of = np.empty((m, p.n_nodes), dtype=np.int64)
        for i in range(m):
            task_of[i, per] = i * per.size + np.arange(per.size)
        task_of[:, one] = m * per.size + np.arange(one.size)
        return node, mb, task_of

    def tile(self, placement: np.ndarray) -> np.ndarray:
        """A base placement as the unrolled problem's placement (every copy on its node's device).

        Parameters
        ----------
        placement
            Device index per base node.

        Returns
        -------
        numpy.ndarray
            Device index per unrolled node (every copy on its node's device).
        """
        node, _, _ = self.task_index()
        return np.asarray(placement, dtype=np.int64)[node]

    def tied(self) -> tuple["TiedParameter", ...]:
        """Parameters tied across modules (cached): see :func:`tied_parameters`.

        Returns
        -------
        tuple of TiedParameter
        """
        if self._tied is None:
            self._tied = tied_parameters(self.base)
        return self._tied

    def micro_problem(self) -> Problem:
        """One micro-batch of the step as a problem (cached): the base graph with the
        per-micro-batch costs, tied parameters' groups split. Its infeasibility screen and its
        bounds (critical path, largest node) hold for the pipelined step, at a fraction of the
        unrolled problem's size.

        Returns
        -------
        Problem
        """
        if self._micro is None:
            self._micro = build_micro(self)
        return self._micro

    def unrolled(self, replicas: tuple[tuple[int, int], ...] = ()) -> Problem:
        """The unrolled problem (cached per ``replicas``): what a pipelined result is scored and judged on.

        Colocation groups of tied parameters (:meth:`tied`) are split into their parts, so the
        parts may run on different stages; each ``(owner, device)`` of ``replicas`` adds a copy
        of the parameter's update node ``owner`` (base node index) pinned to ``device``, id
        ``<owner id>@<device id>``: the parameter replicated on that device, holding its
        ``param_bytes`` (weights, gradient, optimizer state) and running its update after the
        summed gradient arrives (the owner's input edges).

        Parameters
        ----------
        replicas : tuple of (int, int)
            ``(update node, device index)`` per replica, sorted.

        Returns
        -------
        Problem
        """
        key = tuple(sorted((int(a), int(b)) for a, b in replicas))
        if key not in self._unrolled:
            self._unrolled[key] = build_unrolled(self, key)
        return self._unrolled[key]

    def work(self) -> float:
        """Total run time of the step at speed 1 (every micro-batch, once nodes once).

        Returns
        -------
        float
            Seconds.
        """
        per = ~self.once
        return float(self.time[per].sum() * self.micro_batches + self.time[self.once].sum())

