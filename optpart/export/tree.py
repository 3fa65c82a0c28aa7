"""Module paths of a problem's nodes, and the module tree behind a device map.

Pure bookkeeping on ``named_modules()`` paths (see :mod:`optpart.export`): which module
each node belongs to, modules merged by colocation, the order modules first run, and
the coarsest set of map entries that reproduces a module -> device assignment.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import numpy as np

from ..model.problem import Problem
from .sequential import program_order

__all__ = ["node_modules", "export_modules", "kept_whole", "follow_inputs", "mixed_own_code"]


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

def kept_whole(problem: Problem) -> list[str]:
    """Module paths that every export keeps on one device, none inside another, sorted.

    * every outermost instance of a class the import was asked to keep whole
      (``meta["no_split"]``, instances found in ``meta["module_classes"]``): a device map or a
      pipeline never cuts inside it;
    * every module with children that runs an operator holding parameter bytes it cannot name
      (PyTorch imports: a frozen parameter, or any parameter of an inference graph: the importer
      puts its bytes on its first reader and records no name unless the node's ``params``
      metadata lists them). Such a parameter is almost always read by its own module's
      ``forward``; keeping that module whole gives it a device-map entry (accelerate refuses a
      map that leaves a tensor without one).

    Parameters
    ----------
    problem : Problem
        An imported problem (metadata ``no_split``, ``module_classes``; node ``module``, ``op``).

    Returns
    -------
    list of str
        Paths (``""`` is the whole model), none inside another.
    """
    meta = problem.meta or {}
    wanted = set(meta.get("no_split") or ())
    classes = meta.get("module_classes") or {}
    paths = {p for p, c in classes.items() if c in wanted and p}
    if meta.get("source") == "torch" and problem.has_split and problem.node_meta:
        holders = set()
        for v in np.flatnonzero(problem.param_bytes > 0).tolist():
            m = problem.node_meta[v]
            nid = problem.node_ids[v]
            if (owned_tensor(nid, m) is None and m.get("op") not in PLACEHOLDERS
                    and not nid.startswith(("input.", "target.")) and not m.get("params")
                    and isinstance(m.get("module"), str)):
                holders.add(m["module"])
        if holders:  # a module without children is whole anyway
            below = set(classes) | {m for m in node_modules(problem) if m is not None}
            parents = {b.rsplit(".", 1)[0] if "." in b else "" for b in below if b}
            paths |= holders & parents
    out: list[str] = []
    for p in sorted(paths, key=lambda p: (p.count(".") if p else -1, p)):
        if not any(t == "" or p == t or p.startswith(t + ".") for t in out):
            out.append(p)
    return sorted(out)


def export_modules(problem: Problem, depth: int | None = None) -> list[str | None]:
    """The module of every node as exports place it: :func:`node_modules` cut at
    :func:`kept_whole` paths, then to ``depth`` path components when given.

    Parameters
    ----------
    problem : Problem
        The problem.
    depth : int, optional
        Keep this many path components (``None``: as deep as the modules go).

    Returns
    -------
    list of str or None
        One entry per node, in node order.
    """
    modules = node_modules(problem)
    whole = kept_whole(problem)
    if whole:
        if "" in whole:
            modules = [None if m is None else "" for m in modules]
        else:
            top = set(whole)
            cut: dict[str, str] = {}

            def outer(m: str) -> str:
                if m not in cut:
                    parts, hit = m.split("."), m
                    for i in range(1, len(parts) + 1):
                        if ".".join(parts[:i]) in top:
                            hit = ".".join(parts[:i])
                            break
                    cut[m] = hit
                return cut[m]

            modules = [None if m is None else outer(m) for m in modules]
    if depth is not None:
        modules = [None if m is None else ".".join(m.split(".")[:depth]) if m else m for m in modules]
    return modules


def held_tensors(problem: Problem) -> dict[int, list[str]]:
    """Node index -> the parameter and buffer names the node stands for or holds.

    An optimizer update names its parameter, a buffer node its buffer, and an operator its
    ``params`` metadata when the import recorded the parameters whose bytes it holds.

    Parameters
    ----------
    problem : Problem
        The problem.

    Returns
    -------
    dict
        Only nodes that hold a named tensor.
    """
    out: dict[int, list[str]] = {}
    for v, (nid, meta) in enumerate(zip(problem.node_ids, problem.node_meta or [])):
        names = []
        own = owned_tensor(nid, meta)
        if own is not None:
            names.append(own)
        extra = meta.get("params")
        if isinstance(extra, (list, tuple)):
            names += [n for n in extra if isinstance(n, str) and n]
        if names:
            out[v] = names
    return out


#: Node ``op`` values of nodes that hold their own tensor: graph inputs, buffers, optimizer state.
PLACEHOLDERS = ("input", "buffer", "optimizer.update")


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

def compress(unit_dev: dict[str, int], tensors: Mapping[str, list[tuple[str, int]]], rank: dict[str, int],
             known: Iterable[str] = ()) -> tuple[dict[str, int], set[str], set[str]]:
    """The coarsest ``{module: device}`` reproducing ``unit_dev``, the modules it covers, and
    its keys that name a parameter or buffer (of a module whose children are split) rather than a module.

    Every module of ``known`` (the model's ``named_modules()`` paths) is covered by an entry: one
    that runs nothing under a split parent goes with its parent (accelerate refuses a map that
    leaves any parameter or buffer without a device, even an unused one).

    Parameters
    ----------
    unit_dev : dict
        Device index of every module that runs operators.
    tensors : dict
        For each module, the parameters and buffers it owns itself: ``(name, device)``.
    rank : dict
        :func:`first_seen` ranks, which order the map's entries.
    known : iterable of str
        Module paths of the model (those that run nothing included).

    Returns
    -------
    (dict, set of str, set of str)
        The map, the modules it covers, and its tensor keys.
    """
    children: dict[str, set[str]] = {}
    for m in sorted(set(unit_dev) | set(tensors) | set(known)):
        parts = m.split(".") if m else []
        for i in range(len(parts)):
            parent = ".".join(parts[:i])
            children.setdefault(parent, set()).add(".".join(parts[:i + 1]))
    subtree: dict[str, set[int]] = {}

    def devices(path: str) -> set[int]:
        if path not in subtree:
            s = {unit_dev[path]} if path in unit_dev else set()
            s |= {d for _, d in tensors.get(path, ())}
            for c in children.get(path, ()):
                s |= devices(c)
            subtree[path] = s
        return subtree[path]

    out: list[tuple[int, str, int]] = []
    keys: set[str] = set()
    covered: set[str] = set()
    names: set[str] = set()

    def walk(path: str, fallback: int) -> None:
        devs = devices(path)
        if len(devs) <= 1:
            out.append((rank.get(path, 1 << 60), path, next(iter(devs)) if devs else fallback))
            keys.add(path)
            return
        own = unit_dev.get(path, min(devs))
        for name, d in tensors.get(path, ()):
            full = f"{path}.{name}" if path else name
            out.append((rank.get(path, 1 << 60), full, d))
            names.add(full)
        if path in unit_dev and tensors.get(path):
            covered.add(path)
        for c in sorted(children.get(path, ()), key=lambda c: (rank.get(c, 1 << 60), c)):
            walk(c, own)

    if unit_dev:
        walk("", min(unit_dev.values()))
    for m in unit_dev:  # a module is covered by an entry for itself or for an ancestor
        parts = m.split(".")
        if "" in keys or any(".".join(parts[:i]) in keys for i in range(1, len(parts) + 1)):
            covered.add(m)
    out.sort(key=lambda x: x[0])
    return {name: d for _, name, d in out}, covered, names


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
        Map key to the module where its stage would begin (keys under which nothing runs are left out).
    """
    out = {}
    for key in dmap:
        if key in tensor_keys:
            continue
        under = [m for m in by_module if not key or m == key or m.startswith(key + ".")]
        if under:
            out[key] = min(under, key=lambda m: (rank.get(m, 1 << 60), m.count("."), m))
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


def follow_inputs(problem: Problem, placement: np.ndarray, free: np.ndarray) -> np.ndarray:
    """Place every free node where it runs under accelerate's hooks: beside its heaviest input.

    A node outside every mapped module (an input, the loss, a split parent's own operator)
    goes to the device of its predecessor with the largest edge, else of its successor with the
    largest edge; a colocation group moves as one.

    Parameters
    ----------
    problem : Problem
        The problem.
    placement : numpy.ndarray of int
        Device per node; entries of free nodes are ignored.
    free : numpy.ndarray of bool
        The nodes to place.

    Returns
    -------
    numpy.ndarray of int
        The completed placement (a copy).
    """
    p = placement.copy()
    done = ~free
    allowed = problem.allowed
    src, dst, eb = problem.edge_src, problem.edge_dst, problem.edge_bytes

    def pick(v: int, edges: np.ndarray, ends: np.ndarray) -> bool:
        best, best_b = -1, -1.0
        for e in edges.tolist():
            u = int(ends[e])
            if done[u] and allowed[v, p[u]] and eb[e] > best_b:
                best, best_b = int(p[u]), float(eb[e])
        if best >= 0:
            p[v] = best
            done[v] = True
        return best >= 0

    for v in problem.topo.tolist():
        if not done[v]:
            pick(v, problem.in_edges[problem.in_ptr[v]:problem.in_ptr[v + 1]], src)
    for v in problem.topo[::-1].tolist():
        if not done[v]:
            pick(v, problem.out_edges[problem.out_ptr[v]:problem.out_ptr[v + 1]], dst)
    for v in np.flatnonzero(~done).tolist():
        p[v] = int(np.flatnonzero(allowed[v])[0]) if allowed[v].any() else 0
    # A colocation group moves as one: with its module members (one unit, so one device), else
    # to the device most of its members chose.
    for members in problem.groups:
        if free[members].any() and np.unique(p[members]).size > 1:
            fixed = members[~free[members]]
            p[members] = int(p[fixed[0]]) if fixed.size else int(np.bincount(p[members]).argmax())
    return p


def parents_of(path: str) -> list[str]:
    """The ancestors of a module path, nearest first, ending with ``""`` (the top-level module).

    Parameters
    ----------
    path : str
        A ``named_modules()`` path (``""`` has none).

    Returns
    -------
    list of str
    """
    out = []
    while path:
        path = path.rsplit(".", 1)[0] if "." in path else ""
        out.append(path)
    return out


def mixed_own_code(problem: Problem, modules: list[str | None],
                   by_module: Mapping[str, int]) -> tuple[list[str], dict[str, int]]:
    """Split modules whose own code would read tensors on two devices as accelerate runs the map.

    ``accelerate.dispatch_model`` hooks every module of a device map (its inputs move to its
    device) but not a module whose children are split: that module's own code (the operators
    whose innermost module it is) runs on the tensors where they are. Over the forward nodes in
    program order, a node of a module whose subtree is on one device runs there; a node of a
    split module runs on the device of its inputs (edges of 0 bytes read no data). Such a module
    mixes devices when one of its nodes reads bytes from two devices, or when it owns parameters
    or buffers (which go to one device) and its nodes run on two. The top-level module (``""``)
    and nodes outside every module are exempt: accelerate's hook on the model moves its inputs
    and its own tensors to the main device.

    Parameters
    ----------
    problem : Problem
        The problem.
    modules : list of str or None
        The module of every node.
    by_module : mapping
        Device index of every module that runs operators.

    Returns
    -------
    (list of str, dict)
        The outermost split modules whose own code mixes devices (by depth, then name), and for every other
        split module that runs forward operators, the device its own code runs on (where its
        own tensors go).
    """
    mask: dict[str, int] = {}
    for m, d in by_module.items():
        for p in [m] + parents_of(m):
            mask[p] = mask.get(p, 0) | (1 << int(d))
    split = {p for p, b in mask.items() if p and b & (b - 1)}
    if not split:
        return [], {}
    meta = problem.node_meta or [{}] * problem.n_nodes
    owners = {n.rpartition(".")[0] for names in held_tensors(problem).values() for n in names}
    dev = np.full(problem.n_nodes, -1, dtype=np.int64)
    own: dict[str, set[int]] = {}
    bad: set[str] = set()
    src, eb = problem.edge_src, problem.edge_bytes
    for v in program_order(problem).tolist():
        if meta[v].get("phase", "forward") != "forward":
            continue
        m = modules[v]
        if m is not None and m not in split and m in by_module:
            dev[v] = by_module[m]
            continue
        edges = problem.in_edges[problem.in_ptr[v]:problem.in_ptr[v + 1]]
        edges = edges[(eb[edges] > 0) & (dev[src[edges]] >= 0)]
        if not edges.size:
            continue
        reads = sorted(set(dev[src[edges]].tolist()))
        dev[v] = int(dev[src[edges[np.argmax(eb[edges])]]])
        if m and m in split:
            own.setdefault(m, set()).update(reads)
            if len(reads) > 1:
                bad.add(m)
    bad |= {m for m, ds in own.items() if len(ds) > 1 and m in owners}
    outer = sorted((m for m in bad if not any(p in bad for p in parents_of(m))), key=lambda m: (m.count("."), m))
    return outer, {m: min(ds) for m, ds in own.items() if m not in bad and ds}
