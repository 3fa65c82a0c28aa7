"""Storages, aliases and writes in a traced ATen graph, and the check that orders them.

A tensor of an FX graph is a *view* of a storage when its operator returns an alias of
an input (``transpose``, ``as_strided``, ``select``, a ``getitem`` of ``split``...), or
the written input itself for an in-place operator (``copy_``, ``add_``). Every view
resolves to a **storage root**: a placeholder (parameter, buffer, input), or an operator
output that is not an alias. An operator *accesses* a storage when any of its tensor
arguments resolves to it; it *writes* it when its schema marks that argument as written
(``Tensor(a!)``) or, for operators whose schema does not say so (``native_batch_norm``
in training mode updates its running statistics), when this module knows it does.

The property a placed step needs: for every storage, **no two accesses of
which at least one writes are unordered** by the graph's edges (data dependencies plus
the explicit ordering edges of :attr:`TracedStep.order`). Otherwise a scheduler may run
a read before a write it should see, or after one it should not, on any device.

:func:`ordering_edges` adds the edges that make a graph satisfy it (each write after
every access since the previous write, each access after the previous write);
:func:`unordered_accesses` and :func:`check_aliasing` prove it, with one reachability
query per access (see :func:`unordered_accesses` for why that is exact).
"""

from __future__ import annotations

import operator
from typing import Any, Iterable, Sequence

from ...errors import FormatError

__all__ = ["written_args", "alias_source", "storage_accesses", "ordering_edges", "unordered_accesses",
           "check_aliasing", "check_problem_order", "writer_groups"]

#: Operators whose schema does not mark the running statistics they update as written:
#: name -> (positions of the written arguments, position of the ``training`` flag).
_UNDECLARED_WRITES = {
    "native_batch_norm": ((3, 4), 5),
    "cudnn_batch_norm": ((3, 4), 5),
    "miopen_batch_norm": ((3, 4), 5),
}


def _schema(nd):
    return getattr(nd.target, "_schema", None) if nd.op == "call_function" else None


def written_args(nd) -> tuple[int, ...]:
    """Positions of the arguments of FX node ``nd`` that its operator writes (empty for pure ops).

    Parameters
    ----------
    nd : torch.fx.Node

    Returns
    -------
    tuple of int
        Positional argument indices, from the schema's ``(a!)`` annotations plus the
        running statistics of batch norm in training mode.
    """
    schema = _schema(nd)
    if schema is None:
        return ()
    out = [i for i, a in enumerate(schema.arguments) if a.alias_info is not None and a.alias_info.is_write]
    name = getattr(getattr(nd.target, "overloadpacket", None), "__name__", "")
    if name in _UNDECLARED_WRITES:
        pos, flag = _UNDECLARED_WRITES[name]
        if len(nd.args) > flag and nd.args[flag] is True:
            out.extend(p for p in pos if len(nd.args) > p and nd.args[p] is not None)
    return tuple(sorted(set(out)))


def alias_source(nd) -> int | None:
    """Position of the argument that the (first) output of ``nd`` aliases, or None.

    Parameters
    ----------
    nd : torch.fx.Node

    Returns
    -------
    int or None
        ``0`` for ``transpose``, ``view``, ``copy_``, ``add_``...; None when the output is
        a fresh tensor. ``getitem`` is handled by the caller (it projects a tuple).
    """
    schema = _schema(nd)
    if schema is None or not schema.returns:
        return None
    ret = schema.returns[0].alias_info
    if ret is None:
        return None
    for i, a in enumerate(schema.arguments):
        if a.alias_info is not None and set(a.alias_info.before_set) & set(ret.before_set):
            return i
    return None


def _arg_nodes(value) -> list:
    """FX nodes inside one argument (a node, or a list/tuple of them)."""
    if hasattr(value, "op") and hasattr(value, "users"):
        return [value]
    if isinstance(value, (list, tuple)):
        return [v for v in value if hasattr(v, "op") and hasattr(v, "users")]
    return []


def _roots(nodes: Sequence) -> dict:
    """FX node -> storage root ``(node, output index or None)``, following views and getitems."""
    root: dict[Any, tuple] = {}
    for nd in nodes:
        if nd.op == "call_function" and nd.target is operator.getitem:
            base, idx = nd.args[0], nd.args[1]
            b = root.get(base, (base, None))
            # A piece of split / unbind aliases what the op aliases; else it is the op's output idx.
            root[nd] = b if b != (base, None) else (base, idx)
            continue
        src = alias_source(nd) if nd.op == "call_function" else None
        if src is not None and src < len(nd.args) and _arg_nodes(nd.args[src]):
            first = _arg_nodes(nd.args[src])[0]
            root[nd] = root.get(first, (first, None))
        else:
            root[nd] = (nd, None)
    return root


def storage_accesses(graph) -> dict[tuple, list[tuple[Any, bool]]]:
    """Every storage that some operator writes -> its accesses ``(node, writes)`` in graph order.

    Parameters
    ----------
    graph : torch.fx.Graph

    Returns
    -------
    dict
        ``(root node, output index or None) -> [(FX node, writes?), ...]``; only storages
        with at least one write are listed. ``getitem`` projections are not accesses (the
        operator reading the projected tensor is); every other ``call_function`` taking
        an alias of the storage is, views included (run on another device, a view copies
        the data it sees).
    """
    nodes = list(graph.nodes)
    root = _roots(nodes)
    acc: dict[tuple, list[tuple[Any, bool]]] = {}
    written: set[tuple] = set()
    for nd in nodes:
        if nd.op != "call_function" or nd.target is operator.getitem:
            continue
        writes = written_args(nd)
        touched: dict[tuple, bool] = {}
        for i, arg in enumerate(nd.args):
            for a in _arg_nodes(arg):
                r = root.get(a, (a, None))
                touched[r] = touched.get(r, False) or i in writes
        for a in nd.kwargs.values():
            for b in _arg_nodes(a):
                r = root.get(b, (b, None))
                touched.setdefault(r, False)
        for r, w in touched.items():
            acc.setdefault(r, []).append((nd, w))
            if w:
                written.add(r)
    return {r: acc[r] for r in acc if r in written}


def _required_pairs(accesses: Sequence[tuple[Any, bool]]) -> Iterable[tuple[Any, Any]]:
    """(earlier, later) pairs that must be ordered, for accesses in a topological order: each
    access after the previous write, each write after every access since the previous write."""
    last_write = None
    since: list = []
    for nd, w in accesses:
        if w:
            for a in since:
                yield a, nd
            if last_write is not None and not since:
                yield last_write, nd
            last_write, since = nd, []
        else:
            if last_write is not None:
                yield last_write, nd
            since.append(nd)


def ordering_edges(graph, existing: Iterable[tuple[str, str]] = ()) -> tuple[tuple[str, str], ...]:
    """Edges ``(before, after)`` (FX names) that order every write of a storage against its other accesses.

    Parameters
    ----------
    graph : torch.fx.Graph
        A graph whose node order is a valid program order (the traced order).
    existing : iterable of (str, str)
        Ordering edges already present (kept, not repeated).

    Returns
    -------
    tuple of (str, str)
        The existing edges plus, in graph order, one edge per required pair that is not
        already a direct data dependency.
    """
    out = list(dict.fromkeys(tuple(e) for e in existing))
    have = set(out)
    for accesses in storage_accesses(graph).values():
        for a, b in _required_pairs(accesses):
            if a is b or a in b.all_input_nodes:
                continue
            e = (a.name, b.name)
            if e not in have:
                have.add(e)
                out.append(e)
    return tuple(out)


def unordered_accesses(graph, order: Iterable[tuple[str, str]] = ()) -> list[tuple[str, str, str]]:
    """Pairs of accesses to one storage, at least one writing, that no path of edges orders.

    Exact: with the accesses of a storage in graph order (a topological order of the data
    edges and of ``order``, which must point forward), all write/access pairs are
    ordered if and only if each access is reachable from the previous write and each
    write from every access since the previous write (the rest follows by transitivity,
    and a failing pair is unordered because the later one cannot reach the earlier).

    Parameters
    ----------
    graph : torch.fx.Graph
    order : iterable of (str, str)
        Extra ordering edges (FX names), as in :attr:`TracedStep.order`.

    Returns
    -------
    list of (str, str, str)
        ``(storage root, earlier node, later node)`` FX names, empty when the property holds.

    Raises
    ------
    FormatError
        An ordering edge names a node the graph does not have, or points backwards.
    """
    nodes = list(graph.nodes)
    pos = {nd: i for i, nd in enumerate(nodes)}
    by_name = {nd.name: nd for nd in nodes}
    succ: dict[Any, list] = {nd: list(nd.users) for nd in nodes}
    for a, b in order:
        if a not in by_name or b not in by_name:
            raise FormatError(f"ordering edge ({a!r}, {b!r}) names a node the traced graph does not have")
        if pos[by_name[a]] >= pos[by_name[b]]:
            raise FormatError(f"ordering edge ({a!r}, {b!r}) points backwards in the traced order")
        succ[by_name[a]].append(by_name[b])

    def reaches(x, y) -> bool:
        if y in succ[x]:
            return True
        limit, stack, seen = pos[y], [x], {x}
        while stack:
            for u in succ[stack.pop()]:
                if u is y:
                    return True
                if u not in seen and pos[u] < limit:
                    seen.add(u)
                    stack.append(u)
        return False

    bad = []
    for (rn, ri), accesses in storage_accesses(graph).items():
        label = rn.name if ri is None else f"{rn.name}[{ri}]"
        for a, b in _required_pairs(accesses):
            if a is not b and not reaches(a, b):
                bad.append((label, a.name, b.name))
    return bad


def check_aliasing(step) -> None:
    """Prove that no two operators touching one storage, at least one writing, are unordered.

    Parameters
    ----------
    step : TracedStep or torch.fx.GraphModule
        A traced step (its graph and its :attr:`~TracedStep.order` edges) or a bare graph module.

    Raises
    ------
    FormatError
        One line naming the storage, the two unordered operators and how many pairs are unordered.

    Examples
    --------
    >>> import torch
    >>> from optpart.formats.torch import trace_training_step
    >>> check_aliasing(trace_training_step(torch.nn.Linear(3, 2), (torch.ones(4, 3),)))
    """
    gm = getattr(step, "graph_module", step)
    bad = unordered_accesses(gm.graph, getattr(step, "order", ()))
    if bad:
        storage, a, b = bad[0]
        raise FormatError(f"aliasing check failed: operators '{a}' and '{b}' both touch storage '{storage}', "
                          f"at least one writing, and no edge orders them ({len(bad)} unordered pair(s))")


def writer_groups(step, ids: Sequence[str]) -> list[tuple[str, ...]]:
    """Colocation groups that make every write land in the storage it writes.

    An operator writing a storage runs where the storage lives: a buffer's or input's
    node, a parameter's update node, the operator that made the storage. When the step
    could not be functionalized, every other access of a written storage (views
    included) goes there too: a copy fetched to another device would miss later writes.

    Parameters
    ----------
    step : TracedStep
    ids : sequence of str
        The problem's node ids (FX names for operators, ``buffer.<name>``, ``update.<param>``...).

    Returns
    -------
    list of tuple of str
        One group per written storage with more than one member.
    """
    placeholders = [nd for nd in step.graph_module.graph.nodes if nd.op == "placeholder"]
    holder_of = {nd.name: f"update.{step.param_names[i]}" for i, nd in enumerate(placeholders)
                 if i < len(step.param_names)}
    fx_to_id = {fx: nid for nid, fx in step.node_names.items()}
    known = set(ids)
    groups: list[tuple[str, ...]] = []
    for (rn, _), accesses in storage_accesses(step.graph_module.graph).items():
        holder = holder_of.get(rn.name, fx_to_id.get(rn.name, rn.name))
        members = [holder] + [nd.name for nd, w in accesses if w or not step.functional]
        members = list(dict.fromkeys(m for m in members if m in known))  # inference: no update node
        if len(members) > 1:
            groups.append(tuple(members))
    return groups


def check_problem_order(problem, step) -> dict[str, int]:
    """Prove the aliasing property on the edges of ``problem`` (what solvers schedule).

    Parameters
    ----------
    problem : Problem
        Imported from ``step`` (:func:`optpart.formats.torch_import.problem_from_traced`).
    step : TracedStep

    Returns
    -------
    dict
        ``{"written_storages": ..., "ordered_pairs": ...}``: how much was proved.

    Raises
    ------
    FormatError
        One line naming the first pair of problem nodes that no path of edges orders.
    """
    ids = {nid: i for i, nid in enumerate(problem.node_ids)}
    rank = problem.topo_rank
    out_ptr, out_edges, dst = problem.out_ptr, problem.out_edges, problem.edge_dst

    def reaches(x: int, y: int) -> bool:
        limit, stack, seen = rank[y], [x], {x}
        while stack:
            v = stack.pop()
            for e in out_edges[out_ptr[v]:out_ptr[v + 1]].tolist():
                u = int(dst[e])
                if u == y:
                    return True
                if u not in seen and rank[u] < limit:
                    seen.add(u)
                    stack.append(u)
        return False

    storages = storage_accesses(step.graph_module.graph)
    pairs, bad = 0, []
    for (rn, _), accesses in storages.items():
        for a, b in _required_pairs(accesses):
            if a is b:
                continue
            if a.name not in ids or b.name not in ids:
                raise FormatError(f"aliasing check: operator '{a.name if a.name not in ids else b.name}' of "
                                  f"the traced step is not a node of problem '{problem.name}'")
            x, y = ids[a.name], ids[b.name]
            if rank[x] > rank[y]:
                x, y = y, x
            pairs += 1
            if not reaches(x, y):
                bad.append((rn.name, a.name, b.name))
    if bad:
        storage, a, b = bad[0]
        raise FormatError(f"aliasing check failed on problem '{problem.name}': nodes '{a}' and '{b}' both touch "
                          f"storage '{storage}', at least one writing, and no edge orders them "
                          f"({len(bad)} unordered pair(s))")
    return {"written_storages": len(storages), "ordered_pairs": pairs}
