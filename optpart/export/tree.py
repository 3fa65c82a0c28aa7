"""Module paths of a problem's nodes, and the module tree behind a device map.

Pure bookkeeping on ``named_modules()`` paths (see :mod:`optpart.export`): which module
each node belongs to, modules merged by colocation, the order modules first run, and
the coarsest set of map entries that reproduces a module -> device assignment.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from ..model.problem import Problem

__all__ = ["node_modules"]


def node_modules(problem: Problem) -> list[str | None]:
    """The module path of every node (None outside every module; see the module docstring).

    ``""`` (the top-level module) for the optimizer update or buffer node of a parameter or
    buffer the top-level module owns itself, so a device map gives it an entry.

    An optimizer node ``update.<param>`` and a buffer node ``buffer.<name>`` without a
    module of their own belong to the module that owns that parameter or buffer.

    Parameters
    ----------
    problem : Problem
        The problem (an imported PyTorch model: nodes with ``module``, ``param`` or buffer metadata).

    Returns
    -------
    list of str or None
        One entry per node, in node order.
    """
    out: list[str | None] = []
    for nid, meta in zip(problem.node_ids, problem.node_meta or [{}] * problem.n_nodes):
        mod = meta.get("module")
        tensor = owned_tensor(nid, meta)
        if isinstance(mod, str) and mod:
            out.append(mod)
        elif tensor is not None:  # "" for a tensor the top-level module owns (BART's final_logits_bias)
            out.append(tensor.rsplit(".", 1)[0] if "." in tensor else "")
        else:
            out.append(None)
    return out

def owned_tensor(nid: str, meta: Mapping[str, Any]) -> str | None:
    """The parameter or buffer name a node stands for (its optimizer update, or the buffer itself).

    Parameters
    ----------
    nid : str
        The node id (a buffer node is ``buffer.<name>``).
    meta : mapping
        The node's metadata (an optimizer node carries ``param``).

    Returns
    -------
    str or None
        The ``named_parameters()``/``named_buffers()`` name, or None for an operator.
    """
    if isinstance(meta.get("param"), str):
        return meta["param"]
    if meta.get("op") == "buffer" and nid.startswith("buffer."):
        return nid[len("buffer."):]
    return None

class Units:
    """Modules (merged when colocation ties them) and the nodes each one holds."""

    def __init__(self, problem: Problem, modules: list[str | None]):
        names = sorted({m for m in modules if m is not None})
        parent = {m: m for m in names}

        def find(x: str) -> str:
            while parent[x] != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        for members in problem.groups:
            mods = sorted({modules[v] for v in members.tolist() if modules[v] is not None})
            for m in mods[1:]:
                a, b = find(mods[0]), find(m)
                if a != b:
                    parent[max(a, b)] = min(a, b)
        self.root = {m: find(m) for m in names}
        self.unit_of = np.array([-1 if m is None else 0 for m in modules], dtype=np.int64)
        keys = sorted(set(self.root.values()))
        index = {k: i for i, k in enumerate(keys)}
        for v, m in enumerate(modules):
            if m is not None:
                self.unit_of[v] = index[self.root[m]]
        self.n = len(keys)
        self.keys = keys
        # Members of every unit, by one stable sort (no per-unit scan of all nodes).
        order = np.argsort(self.unit_of, kind="stable")
        bounds = np.searchsorted(self.unit_of[order], np.arange(-1, self.n + 1))
        self.members = [order[bounds[u + 1]:bounds[u + 2]] for u in range(self.n)]

def first_seen(problem: Problem, modules: list[str | None]) -> dict[str, int]:
    """Rank at which each module (and its ancestors) first runs: forward operators first, in node order.

    Importers write nodes in program order (the order the forward pass ran them), so the
    node order is the order modules run; a topological order would not do, since it puts
    every node without inputs (a view of a weight) first.

    Parameters
    ----------
    problem : Problem
        The problem, nodes in program order.
    modules : list of str or None
        The module of every node.

    Returns
    -------
    dict
        Module path (ancestors included) to its rank.
    """
    meta = problem.node_meta or [{}] * problem.n_nodes
    rank: dict[str, int] = {}
    fwd = [v for v in range(problem.n_nodes) if meta[v].get("phase", "forward") == "forward"]
    rest = [v for v in range(problem.n_nodes) if meta[v].get("phase", "forward") != "forward"]
    for r, v in enumerate(fwd + rest):
        m = modules[v]
        while m is not None and m not in rank:
            rank[m] = r
            m = m.rsplit(".", 1)[0] if "." in m else None
    return rank

def compress(unit_dev: dict[str, int], direct_params: dict[str, list[str]],
              rank: dict[str, int]) -> tuple[dict[str, int], set[str]]:
    """The coarsest ``{module: device}`` reproducing ``unit_dev``, the modules it covers, and
    its keys that name a parameter or buffer (of a module whose children are split) rather than a module.

    Parameters
    ----------
    unit_dev : dict
        Device index of every module that runs operators.
    direct_params : dict
        For each module, the names of the parameters and buffers it owns itself.
    rank : dict
        :func:`first_seen` ranks, which order the map's entries.

    Returns
    -------
    (dict, set of str, set of str)
        The map, the modules it covers, and its tensor keys.
    """
    children: dict[str, set[str]] = {}
    for m in unit_dev:
        parts = m.split(".") if m else []
        for i in range(len(parts)):
            parent = ".".join(parts[:i])
            children.setdefault(parent, set()).add(".".join(parts[:i + 1]))
    subtree: dict[str, set[int]] = {}

    def devices(path: str) -> set[int]:
        if path not in subtree:
            s = {unit_dev[path]} if path in unit_dev else set()
            for c in children.get(path, ()):
                s |= devices(c)
            subtree[path] = s
        return subtree[path]

    out: list[tuple[int, str, int]] = []
    keys: set[str] = set()
    covered: set[str] = set()
    tensors: set[str] = set()

    def walk(path: str) -> None:
        devs = devices(path)
        if len(devs) == 1:
            out.append((rank.get(path, 1 << 60), path, next(iter(devs))))
            keys.add(path)
            return
        if path in unit_dev and direct_params.get(path):
            for name in direct_params[path]:
                out.append((rank.get(path, 1 << 60), f"{path}.{name}" if path else name, unit_dev[path]))
                tensors.add(f"{path}.{name}" if path else name)
            covered.add(path)
        for c in sorted(children.get(path, ()), key=lambda c: (rank.get(c, 1 << 60), c)):
            walk(c)

    if unit_dev:
        walk("")
    for m in unit_dev:  # a module is covered by an entry for itself or for an ancestor
        parts = m.split(".")
        if "" in keys or any(".".join(parts[:i]) in keys for i in range(1, len(parts) + 1)):
            covered.add(m)
    out.sort(key=lambda x: x[0])
    return {name: d for _, name, d in out}, covered, tensors

def entry_modules(dmap: dict[str, int], tensor_keys: set[str], by_module: dict[str, int],
                   rank: dict[str, int]) -> dict[str, str]:
    """For each module key of the map, the shallowest of the modules that run operators
    themselves under it and run first.

    Parameters
    ----------
    dmap : dict
        A device map from :func:`compress`.
    tensor_keys : set of str
        Its keys that name a tensor (skipped).
    by_module : dict
        Device index of every module that runs operators.
    rank : dict
        :func:`first_seen` ranks.

    Returns
    -------
    dict
        Map key to the module where its stage would begin.
    """
    out = {}
    for key in dmap:
        if key in tensor_keys:
            continue
        under = [m for m in by_module if not key or m == key or m.startswith(key + ".")]
        out[key] = min(under, key=lambda m: (rank.get(m, 1 << 60), m.count("."), m)) if under else key
    return out

def split_modules(problem: Problem, modules: list[str | None], placement: np.ndarray) -> list[str]:
    """Modules whose operators the placement spread over more than one device.

    Parameters
    ----------
    problem : Problem
        The problem.
    modules : list of str or None
        The module of every node.
    placement : numpy.ndarray
        A device index per node.

    Returns
    -------
    list of str
        The split modules, sorted.
    """
    names = sorted({m for m in modules if m is not None})
    index = {m: i for i, m in enumerate(names)}
    ids = np.array([-1 if m is None else index[m] for m in modules], dtype=np.int64)
    keep = ids >= 0
    pairs = np.unique(ids[keep] * problem.n_devices + placement[keep])
    count = np.bincount(pairs // problem.n_devices, minlength=len(names))
    return [names[i] for i in np.flatnonzero(count > 1).tolist()]
