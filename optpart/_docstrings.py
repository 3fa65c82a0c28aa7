"""Parameter descriptions that many docstrings share, each written once.

Families of functions take the same arguments with the same meaning (the engine's
``g``, ``v``, ``d`` and slot). Their numpydoc
entries live in :data:`PARAMS`; a docstring line holding only ``%(name)s`` stands for the
entry ``name``, and :func:`fill_doc` writes it in at import time, indented like the line.
``help()`` and Sphinx then show the whole entry, and a description is changed in one place.
This is the pattern of MNE-Python's ``fill_doc``/``docdict`` and SciPy's ``doccer``.

``PARAMS`` must stay a plain dict literal: benchmarks/docstring_coverage.py (and so
tests/package/test_docstrings.py) reads it with :mod:`ast`, without importing optpart, to check
the filled docstrings.
"""

from __future__ import annotations

import re
from typing import TypeVar

__all__ = ["PARAMS", "fill_doc"]

#: ``name -> numpydoc entry``: the ``name : type`` line, then the description indented 4.
PARAMS: dict[str, str] = {
    # the scheduling engine (optpart/schedule/) and the heuristic built on it
    "g": "g : Graph\n    The problem as plain lists (:class:`optpart.schedule.graph.Graph`).",
    "problem_g": "problem : Problem\n    The problem.\n"
                 "g : Graph\n    ``problem`` as plain lists (:class:`optpart.schedule.graph.Graph`).",
    "v": "v : int\n    Node index.",
    "d": "d : int\n    Device index.",
    "v_d": "v, d : int\n    Node index and device index.",
    "node_slot": "v, d : int\n    Node index and device index.\nstart, finish : float\n"
                 "    The slot considered, in seconds.",
    "extra_param": "extra_param : float, optional\n"
                   "    Parameter bytes to count instead of ``param_bytes[v]`` (a colocation group's first\n"
                   "    member reserves the whole group's).",
    "g_place": "g : Graph\n    The problem as plain lists (:class:`optpart.schedule.graph.Graph`).\n"
               "place : sequence of int\n    Device index of every node.",
    "problem": "problem : Problem\n    The problem (graph, devices, links, constraints).",
    "problem_dag": "problem : Problem\n    The problem (its DAG).",
    # the heuristic's pipeline (optpart/solvers/heuristic/pipeline.py)
    "run": "run : optpart.solvers.heuristic.pipeline.Run\n"
           "    The solve: its problem, memory model, budgets and incumbent (a candidate is offered to it).",
    # the common signature of the construction baselines (optpart/solvers/: heft, etf, topo, single)
    "construction_args": "problem : Problem\n    The instance, with devices.\n"
                         "time_limit : float, optional\n"
                         "    Accepted for the common solver signature; the construction is one pass and ignores it.\n"
                         "seed : int\n    Accepted for the common signature (the construction is deterministic).\n"
                         "hint : numpy.ndarray, optional\n    Ignored (the baseline starts from nothing).",
    "solution": "Solution\n    The placement and status (``unknown`` with a one-line reason when nothing fits).",
    # the command line (optpart/cli/)
    "args": "args : argparse.Namespace\n    The parsed command line.",
}

_PLACEHOLDER = re.compile(r"^([ \t]*)%\((\w+)\)s[ \t]*$", re.M)

T = TypeVar("T")


def expand(doc: str, params: dict[str, str] | None = None) -> str:
    """``doc`` with every placeholder line replaced by its entry, indented like the line.

    Parameters
    ----------
    doc : str
        A docstring.
    params : dict of str to str, optional
        The entries (default :data:`PARAMS`).

    Returns
    -------
    str
        The filled docstring.

    Raises
    ------
    KeyError
        For a placeholder that names no entry (at import time, so a typo cannot ship).
    """
    table = PARAMS if params is None else params

    def entry(m: re.Match) -> str:
        if m.group(2) not in table:
            raise KeyError(f"docstring placeholder %({m.group(2)})s names no entry of optpart._docstrings.PARAMS")
        return "\n".join(m.group(1) + line for line in table[m.group(2)].split("\n"))

    return _PLACEHOLDER.sub(entry, doc)


def fill_doc(obj: T) -> T:
    """Write the :data:`PARAMS` entries into ``obj``'s docstring (a class: its methods' too).

    Parameters
    ----------
    obj : function or class
        What to fill; returned itself, so this serves as a decorator.

    Returns
    -------
    function or class
        ``obj``, its ``__doc__`` filled.
    """
    if obj.__doc__:
        obj.__doc__ = expand(obj.__doc__)
    if isinstance(obj, type):
        for member in vars(obj).values():
            func = getattr(member, "__func__", member)  # staticmethod / classmethod
            if callable(func) and getattr(func, "__doc__", None):
                func.__doc__ = expand(func.__doc__)
    return obj
