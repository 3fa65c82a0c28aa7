"""Segments between cut nodes: a lower bound from small exact sub-solves, and span rows.

A *cut node* is comparable to every other node (each other node is its ancestor or its
descendant): the join of one fork-join stage that forks the next, the layer boundary of
a chain of blocks. Every schedule runs all ancestors of a cut node ``c`` before ``S(c)``
and all its descendants after ``F(c)``, so consecutive cut nodes cut the schedule into
*segments*: the nodes from ``c_j`` to ``c_{j+1}``, plus a prefix before the first cut
node and a suffix after the last. The span ``F(c_{j+1}) - S(c_j)`` of a segment is at
least the optimum of the segment alone (its nodes and the edges between them, every
device, the same allowed devices, static memory of its nodes only: a full schedule
restricted to the segment is a schedule of that smaller problem), and the makespan is the
sum of the spans minus the cut nodes counted twice. So

    makespan >= sum_j OPT_j - sum over shared cut nodes of their longest run time,

a bound that a fork-join chain meets (or nearly: the stages couple only through memory),
where the critical path with communication stays 9-10% below (docs/exact.md).

:func:`segment_bounds` solves each segment with ``cpsat`` itself (a strictly smaller
problem, so the recursion ends), keeps a segment's optimum only when proven (proofs are
confirmed as always) and its closed-form bound otherwise; :func:`add_span_rows` puts the
spans in the model. Static memory only: under peak a tensor consumed across a cut node
would outlive its segment's sub-problem, which then is no relaxation.

Reference: the decomposition of a precedence graph at its articulation points of the
comparability graph, e.g. series decomposition in series-parallel scheduling (Lawler,
"Sequencing jobs to minimize total weighted completion time subject to precedence
constraints", Ann. Discrete Math. 2, 1978).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..._docstrings import fill_doc
from ...evaluate import problem_lower_bound
from ...model.constraints import Constraints
from ...model.problem import Problem
from . import _exact_common as xc

__all__ = ["Segments", "cut_nodes", "segments", "segment_bounds", "add_span_rows"]


@dataclass
class Segments:
    """Segments of a graph: ``first``/``last`` node per segment (``-1``: the graph's start or
    end), their node lists, and the proven bound of each (seconds) once solved."""

    first: list = field(default_factory=list)
    last: list = field(default_factory=list)
    nodes: list = field(default_factory=list)
    bounds: list = field(default_factory=list)
    proven: list = field(default_factory=list)
    lower_bound: float = 0.0


@fill_doc
def cut_nodes(problem: Problem) -> list[int]:
    """Nodes comparable to every other node, in topological order.

    Parameters
    ----------
    %(problem_dag)s

    Returns
    -------
    list of int
        The cut nodes; ``n_desc + n_anc == n - 1`` for each (bitset reachability).
    """
    n = problem.n_nodes
    desc = xc.reachability(problem)
    n_anc = [0] * n
    for v in range(n):
        d = desc[v]
        while d:
            low = d & -d
            n_anc[low.bit_length() - 1] += 1
            d ^= low
    return [v for v in problem.topo.tolist() if bin(desc[v]).count("1") + n_anc[v] == n - 1]


@fill_doc
def segments(problem: Problem) -> Segments:
    """The segments between consecutive cut nodes (with a prefix and a suffix when not empty).

    Only when they split the graph: with fewer than two segments of two or more nodes the
    result is empty.

    Parameters
    ----------
    %(problem)s

    Returns
    -------
    Segments
        First and last node and the nodes of each segment (bounds not filled in).
    """
    cuts = cut_nodes(problem)
    out = Segments()
    if not cuts:
        return out
    pos = np.full(problem.n_nodes, -1, dtype=np.int64)
    pos[cuts] = np.arange(len(cuts))
    rank = problem.topo_rank
    # Between cut nodes c_j and c_{j+1} (topological ranks r_j < r_{j+1}) lie exactly the
    # nodes of rank in between: each is a descendant of c_j and an ancestor of c_{j+1}.
    bounds_r = [-1] + [int(rank[c]) for c in cuts] + [problem.n_nodes]
    firsts = [-1] + cuts
    lasts = cuts + [-1]
    topo = problem.topo
    for j in range(len(bounds_r) - 1):
        lo, hi = bounds_r[j], bounds_r[j + 1]
        inner = topo[lo + 1:hi].tolist()
        ends = [v for v in (firsts[j], lasts[j]) if v >= 0]
        members = sorted(set(inner) | set(ends))
        if len(members) >= 2:
            out.first.append(firsts[j])
            out.last.append(lasts[j])
            out.nodes.append(members)
    if len(out.nodes) < 2:
        return Segments()
    return out


def sub_problem(problem: Problem, nodes: list[int]) -> Problem:
    """The problem restricted to ``nodes``: their edges, every device, the same allowed
    devices (as forbidden ones), colocation groups cut to the members present, static memory.

    Parameters
    ----------
    problem : Problem
        The whole problem.
    nodes : list of int
        Node ids of the segment (sorted).

    Returns
    -------
    Problem
        The segment as a problem of its own.
    """
    idx = {v: i for i, v in enumerate(nodes)}
    src, dst = problem.edge_src.tolist(), problem.edge_dst.tolist()
    edges = [e for e in range(problem.n_edges) if src[e] in idx and dst[e] in idx]
    ids = [problem.node_ids[v] for v in nodes]
    dev_ids = problem.device_ids
    allowed = problem.allowed
    forbid = {problem.node_ids[v]: tuple(dev_ids[d] for d in range(problem.n_devices) if not allowed[v, d])
              for v in nodes if not allowed[v].all()}
    groups = tuple(tuple(problem.node_ids[v] for v in g.tolist() if v in idx) for g in problem.groups)
    constraints = Constraints(colocate=tuple(g for g in groups if len(g) >= 2), forbid=forbid)
    return Problem.from_arrays(ids, problem.time[nodes], problem.memory[nodes],
                               [idx[src[e]] for e in edges], [idx[dst[e]] for e in edges],
                               problem.edge_bytes[edges], devices=problem.devices, links=problem.links,
                               constraints=constraints, name=f"{problem.name}:segment")


def segment_bounds(problem: Problem, segs: Segments, budget: xc.Budget, seconds: float,
                   deterministic_time: float | None, seed: int, solve) -> Segments:
    """Solve every segment with ``cpsat`` and fill in its bound and the bound they give together.

    A segment proven optimal (proof confirmed) gives its makespan; otherwise its closed-form
    bound (generic and communication-aware). The whole problem's bound is the sum minus
    the longest run of every cut node two segments share.

    Parameters
    ----------
    problem : Problem
        The whole problem.
    segs : Segments
        From :func:`segments` (changed in place).
    budget : Budget
        The call's wall budget (each sub-solve gets an equal part of ``seconds``).
    seconds : float
        Wall seconds for all segments together.
    deterministic_time : float or None
        Deterministic seconds for all segments together (None: one per segment).
    seed : int
        Seed of the sub-solves.
    solve : callable
        :func:`optpart.solvers.exact.cpsat.solve` (passed in: this module is below it).

    Returns
    -------
    Segments
        ``segs``, with ``bounds``, ``proven`` and ``lower_bound`` set.
    """
    from ...result import Status
    left = len(segs.nodes)
    dur_max = np.where(problem.allowed, xc.durations(problem), 0.0).max(axis=1)
    for first, last, nodes in zip(segs.first, segs.last, segs.nodes):
        sub = sub_problem(problem, nodes)
        share = max(0.05, min(seconds, budget.left()) / left)
        dt = 1.0 if deterministic_time is None else max(1e-3, deterministic_time / len(segs.nodes))
        r = solve(sub, time_limit=share, seed=seed, use_hint=False, deterministic_time=dt, lns=False)
        proven = r.status is Status.OPTIMAL
        bound = xc.solution_makespan(sub, r) if proven else max(problem_lower_bound(sub), xc.comm_lower_bound(sub))
        segs.bounds.append(float(bound))
        segs.proven.append(proven)
        seconds -= share
        left -= 1
    shared = sum(float(dur_max[c]) for c in segs.last if c >= 0 and c in set(segs.first))
    segs.lower_bound = max(0.0, float(sum(segs.bounds)) - shared)
    return segs


def add_span_rows(model, mv, segs: Segments, scale: float) -> None:
    """``F(last) - S(first) >= bound`` per segment, in grid units (rounded down, so valid on
    the rounded-up grid, whose schedules are real schedules at least as long).

    Parameters
    ----------
    model : ortools.sat.python.cp_model.CpModel
        The model (changed in place).
    mv : CpModelVars
        Its variables (starts, ends, makespan).
    segs : Segments
        Solved segments (:func:`segment_bounds`).
    scale : float
        Grid units per second.
    """
    for first, last, bound in zip(segs.first, segs.last, segs.bounds):
        units = int(np.floor(bound * scale * (1 - 1e-9)))
        begin = 0 if first < 0 else mv.S[first]
        end = mv.makespan if last < 0 else mv.E[last]
        model.add(end - begin >= units)
