"""The problems a pipelined step is judged and bounded on, built from a :class:`PipelineStep`.

:func:`build_unrolled` is the unrolled step (``docs/model.md`` section 7): ``M`` copies of
every per-micro-batch node (``v@mb<i>``), one of every once-per-step node, gradient
accumulation as a chain, tied parameters' groups split and the replicas a plan needs;
:func:`build_micro` is one micro-batch on the base graph. Both read a step's arrays only.
"""

from __future__ import annotations

import numpy as np

from ..model.constraints import Constraints
from ..model.problem import Problem

__all__ = ["build_unrolled", "build_micro", "SEP", "RECORD_KEYS"]

#: Separator between a node id and its micro-batch index in the unrolled problem.
SEP = "@mb"

#: ``meta`` keys of a problem traced at the micro-batch size (``from_torch(...,
#: micro_batches=M)``): ``pipeline`` records ``{"micro_batches": M, "micro_batch_size": b,
#: "batch_size": B}`` (the default ``M`` of every solve of the file) and ``per_micro_batch``
#: says the costs are already those of one micro-batch. The unrolled step drops both.
RECORD_KEYS = ("pipeline", "per_micro_batch")


def build_micro(step) -> Problem:
    """One micro-batch of ``step`` as a problem (see :meth:`PipelineStep.micro_problem`).

    Parameters
    ----------
    step : PipelineStep
        The step.

    Returns
    -------
    Problem
    """
    p = step.base
    tied = {t.group: t for t in step.tied()}
    groups = []
    for g, grp in enumerate(p.groups):
        parts = tied[g].parts if g in tied else (grp,)
        groups += [tuple(p.node_ids[v] for v in part.tolist()) for part in parts if part.size > 1]
    c = p.constraints
    return Problem.from_arrays(
        list(p.node_ids), step.time, None, p.edge_src, p.edge_dst, step.edge_bytes,
        devices=p.devices if p.has_devices else None, links=p.links,
        constraints=Constraints(pin=dict(c.pin), colocate=tuple(groups), forbid=dict(c.forbid)),
        param_bytes=p.param_bytes, output_bytes=step.output_bytes, temp_bytes=step.temp_bytes,
        name=p.name, copy=False)


def build_unrolled(step, replicas: tuple[tuple[int, int], ...]) -> Problem:
    """The unrolled step with ``replicas`` (see :meth:`PipelineStep.unrolled`).

    Parameters
    ----------
    step : PipelineStep
        The step.
    replicas : tuple of (int, int)
        ``(update node, device index)`` per replica, sorted.

    Returns
    -------
    Problem
    """
    p, m = step.base, step.micro_batches
    node, mb, task_of = step.task_index()
    per = ~step.once
    ids = [p.node_ids[v] + (f"{SEP}{i}" if per[v] and m > 1 else "") for v, i in zip(node.tolist(), mb.tolist())]
    # param_bytes are held once: by copy 0 of a per-micro-batch node, or by the once node
    first = (mb == 0) | step.once[node]
    param = np.where(first, p.param_bytes[node], 0.0)
    src, dst, eb = [], [], []
    es, ed = p.edge_src, p.edge_dst
    both = per[es] & per[ed]
    into = per[es] & step.once[ed]
    # gradient accumulation: copy i of a gradient producer hands its sum to copy i + 1, the
    # last copy to the update (the accumulator lives one hop, not M gradients at once)
    grad = np.unique(es[into])
    grad_bytes = np.zeros(p.n_nodes)
    np.maximum.at(grad_bytes, es[into], step.edge_bytes[into])
    for i in range(m):
        src.append(task_of[i, es[both]]); dst.append(task_of[i, ed[both]]); eb.append(step.edge_bytes[both])
        if i + 1 < m:
            src.append(task_of[i, grad]); dst.append(task_of[i + 1, grad]); eb.append(grad_bytes[grad])
    src.append(task_of[m - 1, es[into]]); dst.append(task_of[m - 1, ed[into]]); eb.append(step.edge_bytes[into])
    oo = step.once[es] & step.once[ed]
    src.append(task_of[0, es[oo]]); dst.append(task_of[0, ed[oo]]); eb.append(step.edge_bytes[oo])
    meta_rows = None
    if p.node_meta is not None:
        meta_rows = [dict(p.node_meta[v], micro_batch=i) if per[v] and m > 1 else dict(p.node_meta[v])
                     for v, i in zip(node.tolist(), mb.tolist())]
    c = p.constraints
    copies = lambda nid: ([nid] if step.once[p.node_index[nid]] or m == 1
                          else [f"{nid}{SEP}{i}" for i in range(m)])
    tied = {t.group: t for t in step.tied()}
    groups = []
    for g, grp in enumerate(p.groups):
        parts = tied[g].parts if g in tied else (grp,)
        groups += [[x for v in part.tolist() for x in copies(p.node_ids[v])] for part in parts]
    groups = [grp for grp in groups if len(grp) > 1]
    pin = {x: d for nid, d in c.pin.items() for x in copies(nid)}
    forbid = {x: ds for nid, ds in c.forbid.items() for x in copies(nid)}
    # replicas of tied parameters: the update node again, on another device
    n_rows = len(ids)
    rep_src, rep_dst, rep_bytes = [], [], []
    for j, (owner, dev) in enumerate(replicas):
        rid = f"{p.node_ids[owner]}@{p.device_ids[dev]}"
        ids.append(rid)
        pin[rid] = p.device_ids[dev]
        ins = p.in_edges[p.in_ptr[owner]:p.in_ptr[owner + 1]]
        rep_src.append(task_of[m - 1, es[ins]]); rep_dst.append(np.full(ins.size, n_rows + j))
        rep_bytes.append(step.edge_bytes[ins])
        if meta_rows is not None:
            meta_rows.append(dict(p.node_meta[owner], replica_of=p.node_ids[owner]))
    rep = np.array([o for o, _ in replicas], dtype=np.int64)
    order = np.concatenate([node, rep])
    param = np.concatenate([param, p.param_bytes[rep]])
    meta = {key: value for key, value in p.meta.items() if key not in RECORD_KEYS}
    meta.update(micro_batches=m, pipelined_from=p.name)  # the unrolled step is not pipelined again
    return Problem.from_arrays(
        ids, step.time[order], p.memory[order] if m == 1 and not replicas else None,
        np.concatenate(src + rep_src), np.concatenate(dst + rep_dst), np.concatenate(eb + rep_bytes),
        devices=p.devices if p.has_devices else None, links=p.links,
        constraints=Constraints(pin=pin, colocate=tuple(map(tuple, groups)), forbid=forbid),
        param_bytes=param, output_bytes=step.output_bytes[order], temp_bytes=step.temp_bytes[order],
        node_meta=meta_rows, name=f"{p.name}", meta=meta, copy=False)
