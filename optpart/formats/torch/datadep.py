"""Data-dependent steps: what a real-tensor trace read of its data, recorded and guarded.

A traced graph is one path through the model's Python code. Python sees tensor *data*
only through a few doors, and ATen tags each of them (the tags fake tensors use to
refuse them, which is what sends such a model to real-tensor tracing):

* ``data_dependent_output``: ``_local_scalar_dense`` (``.item()``, ``if t:``, ``int(t)``,
  an index given as a 0-d tensor), ``equal``, ``allclose``: a Python value that the
  trace bakes into later operators as a constant;
* ``dynamic_output_shape``: ``nonzero``, ``masked_select``, ``unique``, ``bincount``,
  ``repeat_interleave``, indexing with a boolean mask: an output whose *shape* the trace
  bakes into later operators (an operator of this tag whose output shape, for the given
  argument shapes, fake tensors can tell is not counted: ``x[int_index]``);
* and outside ATen, ``Tensor.numpy``, ``Tensor.tolist`` and ``Tensor.__array__``: data
  handed to Python (a Hungarian matcher in NumPy/SciPy), whose results come back as constants.

While a step is traced with real tensors, :func:`recording_reads` watches these doors
and stamps each operator's FX node with what it gave in the traced batch (the output
shapes, the value, or a copy of the tensor handed to Python; a tensor handed to Python
gets an ``aten.alias`` node to carry the stamp). The stamps survive functionalization
(node metadata) and dead-code elimination (:func:`is_read`); :func:`reads_of` lists them
as :class:`DataRead` records. A placed step (:func:`optpart.torch.apply`) checks each
read as soon as it is made (:func:`check_read`) and refuses, in one line naming the
operator and its module, a batch whose data takes another path, before any operator
traced after that read runs.

Mixture-of-experts layers of Hugging Face (the per-expert loop of the ``eager`` experts)
read ``nonzero`` (which experts any token went to), one ``.item()`` per expert index,
and one ``nonzero`` per expert (its tokens): the traced routing.
"""

from __future__ import annotations

import math
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any, Sequence

from ...errors import OptpartError

__all__ = ["DataRead", "DataDependentEscape", "READ_KEY", "recording_reads", "reads_of", "is_read", "keep_node", "read_mismatch", "path_error",
           "check_read", "routing_summary", "describe_routing"]

#: ``node.meta["custom"]`` key of a read's stamp: ``(kind, what the traced batch gave)``.
READ_KEY = "optpart_read"

_ESCAPES = ("numpy", "tolist", "__array__")


@dataclass(frozen=True)
class DataRead:
    """One place where a traced step read its data.

    Attributes
    ----------
    node : str
        FX name of the operator (an ``aten.alias`` of the tensor for ``kind='tensor'``).
    op : str
        ``aten.nonzero``, ``aten._local_scalar_dense``, ... or ``Tensor.numpy``.
    module : str
        ``named_modules()`` path of the module that ran it (``''``: the root).
    kind : str
        ``'shape'`` (the output shapes), ``'value'`` (a Python number) or ``'tensor'``
        (a tensor handed to Python).
    traced : Any
        What the traced batch gave: a tuple of output shapes, a number, or a tensor.
    """

    node: str
    op: str
    module: str
    kind: str
    traced: Any

    def to_meta(self) -> dict:
        """The read as JSON-ready values (a tensor handed to Python as its shape).

        Returns
        -------
        dict
            ``{"node", "op", "module", "kind", "traced"}``.
        """
        traced = self.traced
        if self.kind == "shape":
            traced = [list(s) for s in traced]
        elif self.kind == "tensor":
            traced = {"shape": list(traced.shape), "dtype": str(traced.dtype).replace("torch.", "")}
        return {"node": self.node, "op": self.op, "module": self.module, "kind": self.kind, "traced": traced}


def _tags(func) -> tuple:
    return tuple(getattr(func, "tags", ()) or ())


def _aten(name: str):
    import torch

    return getattr(torch.ops.aten, name)


def _shapes(out) -> tuple:
    import torch

    items = out if isinstance(out, (tuple, list)) else [out]
    return tuple(tuple(int(d) for d in o.shape) for o in items if isinstance(o, torch.Tensor))


def _op_name(target) -> str:
    packet = getattr(target, "overloadpacket", None)
    return f"aten.{packet.__name__}" if packet is not None else str(target)


def _last_node():
    """The newest node of the graph ``make_fx`` is building (None outside a trace or for an empty graph)."""
    from torch.fx.experimental.proxy_tensor import get_proxy_mode

    mode = get_proxy_mode()
    if mode is None:
        return None
    return next(reversed(mode.tracer.graph.nodes), None)


def _stamp(func, what, since, key: str = READ_KEY) -> None:
    """Stamp the node of ``func`` that the tracer made after node ``since`` with ``what`` (under ``key``).

    An operator on tensors the trace does not track (a constant) makes no node: nothing is stamped.
    """
    from torch.fx.experimental.proxy_tensor import get_proxy_mode

    mode = get_proxy_mode()
    if mode is None:  # not under make_fx: nothing to stamp
        return
    for nd in reversed(mode.tracer.graph.nodes):
        if nd is since:
            return
        if nd.target is func:
            nd.meta["custom"] = {**(nd.meta.get("custom") or {}), key: what}
            return


class DataDependentEscape(RuntimeError):
    """A fake-tensor trace reached a tensor handed to Python (``Tensor.numpy``): trace with real tensors."""


@contextmanager
def recording_reads(real: bool = True):
    """Stamp every data read of the step traced inside this context (under ``make_fx``).

    Enter it inside the function ``make_fx`` traces, so that its modes sit above the tracer's.

    Parameters
    ----------
    real : bool
        Real tensors: record every read. Fake tensors (which refuse ATen's reads themselves):
        raise :class:`DataDependentEscape` where a tensor is handed to Python, so that the
        tracer falls back to real tensors as for any other read.

    Returns
    -------
    contextlib.AbstractContextManager
        A dispatch mode (ATen reads) and a function mode (tensors handed to Python), both active.
    """
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes
    from torch.utils._pytree import tree_map

    tag = torch.Tag
    fake = []

    def data_dependent_shape(func, args, kwargs) -> bool:
        """Whether fake tensors cannot tell the output shape of this call (a boolean mask: yes)."""
        with _disable_current_modes():
            if not fake:
                fake.append(FakeTensorMode())
            conv = lambda t: fake[0].from_tensor(t) if isinstance(t, torch.Tensor) else t  # noqa: E731
            try:
                fa, fk = tree_map(conv, args), tree_map(conv, kwargs)
                with fake[0]:
                    func(*fa, **fk)
            except Exception:  # DynamicOutputShapeException, or anything fake cannot do: a read
                return True
        return False

    class _Reads(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            tags = _tags(func)
            if tag.data_dependent_output not in tags and tag.dynamic_output_shape not in tags:
                return func(*args, **kwargs)
            since = _last_node()
            out = func(*args, **kwargs)
            if tag.data_dependent_output in tags:
                value = out.item() if isinstance(out, torch.Tensor) else out
                _stamp(func, ("value", value), since)
            elif data_dependent_shape(func, args, kwargs):
                _stamp(func, ("shape", _shapes(out)), since)
            return out

    class _Escapes(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            if not real and getattr(func, "__name__", "") in _ESCAPES:
                raise DataDependentEscape(f"Tensor.{func.__name__} hands the data to Python")
            out = func(*args, **(kwargs or {}))
            if getattr(func, "__name__", "") in _ESCAPES and args and isinstance(args[0], torch.Tensor):
                with _disable_current_modes():
                    copy = args[0].detach().clone()
                since = _last_node()
                torch.ops.aten.alias.default(args[0])
                _stamp(torch.ops.aten.alias.default, ("tensor", f"Tensor.{func.__name__}", copy), since)
            return out

    with (_Reads() if real else nullcontext()), _Escapes():
        yield


def is_read(nd) -> bool:
    """Whether FX node ``nd`` carries a read stamp (dead-code elimination must keep it).

    Parameters
    ----------
    nd : torch.fx.Node

    Returns
    -------
    bool
    """
    stamp = (nd.meta.get("custom") or {}).get(READ_KEY) if nd.op == "call_function" else None
    if stamp is None:
        return False
    # Functionalization stamps every node it makes while running a read (a view it replays
    # first): the read is the node of the stamped kind's operator.
    if stamp[0] == "tensor":
        return getattr(nd.target, "overloadpacket", None) is _aten("alias")
    import torch

    wanted = torch.Tag.data_dependent_output if stamp[0] == "value" else torch.Tag.dynamic_output_shape
    return wanted in _tags(nd.target)


def keep_node(nd) -> bool:
    """Dead-code elimination's test: impure nodes, and the reads (nobody uses a baked ``.item()``).

    Parameters
    ----------
    nd : torch.fx.Node

    Returns
    -------
    bool
    """
    return nd.is_impure() or is_read(nd)


def reads_of(graph, node_module: dict) -> tuple[DataRead, ...]:
    """The data reads of a traced graph, in graph order.

    Parameters
    ----------
    graph : torch.fx.Graph
        A traced step's graph (stamped by :func:`recording_reads`).
    node_module : dict
        FX name -> ``(module path, class)`` (:attr:`TracedStep.node_module`).

    Returns
    -------
    tuple of DataRead
    """
    out = []
    for nd in graph.nodes:
        if not is_read(nd):
            continue
        stamp = nd.meta["custom"][READ_KEY]
        module = node_module.get(nd.name, ("", ""))[0]
        if stamp[0] == "tensor":
            out.append(DataRead(nd.name, stamp[1], module, "tensor", stamp[2]))
        else:
            out.append(DataRead(nd.name, _op_name(nd.target), module, stamp[0], stamp[1]))
    return tuple(out)


def read_mismatch(value, read: DataRead) -> str | None:
    """How ``value`` (what the read gives now) differs from the traced batch's, or None.

    Parameters
    ----------
    value : Any
        The operator's output now (tensors, a number, or the tensor handed to Python).
    read : DataRead
        The read as traced.

    Returns
    -------
    str or None
        ``"gives 10 rows here, 16 in the traced batch"`` and the like.
    """
    import torch

    if read.kind == "shape":
        got = _shapes(value)
        if got == read.traced:
            return None
        if len(got) == len(read.traced) == 1 and got[0][1:] == read.traced[0][1:] and got[0]:
            return f"gives {got[0][0]} rows here, {read.traced[0][0]} in the traced batch"
        return f"gives output shape(s) {list(got)} here, {list(read.traced)} in the traced batch"
    if read.kind == "value":
        same = value == read.traced or (isinstance(value, float) and isinstance(read.traced, float)
                                        and math.isnan(value) and math.isnan(read.traced))
        return None if same else f"reads the value {value!r} here, {read.traced!r} in the traced batch"
    t = value.detach().to("cpu")
    if t.shape == read.traced.shape and t.dtype == read.traced.dtype and torch.equal(t, read.traced):
        return None
    return (f"hands Python a tensor of shape {list(t.shape)} with other values here than in the traced batch"
            if t.shape == read.traced.shape else
            f"hands Python a tensor of shape {list(t.shape)} here, {list(read.traced.shape)} in the traced batch")


def path_error(read: DataRead, mismatch: str) -> str:
    """The one-line refusal of a batch whose data takes another path than the traced one.

    Parameters
    ----------
    read : DataRead
        The first read that differs.
    mismatch : str
        :func:`read_mismatch`'s phrase.

    Returns
    -------
    str
    """
    where = f" in module '{read.module}'" if read.module else " in the root module"
    return (f"this step was traced on one path of its data: {read.op}{where} {mismatch}; the graph (and the "
            f"plan's costs) follow the traced batch, so only batches and parameters that take its path run "
            f"(import and place this batch to run it)")


def check_read(value, read: DataRead):
    """The placed step's guard: ``value`` itself when the read gives what the traced batch gave.

    Parameters
    ----------
    value : Any
        The output of the read's operator in this call.
    read : DataRead
        The read as traced.

    Returns
    -------
    Any
        ``value`` (consumers of the operator read it through the guard).

    Raises
    ------
    OptpartError
        The data takes another path (:func:`path_error`).
    """
    mismatch = read_mismatch(value, read)
    if mismatch is not None:
        raise OptpartError(path_error(read, mismatch))
    return value


def routing_summary(reads: Sequence[DataRead]) -> dict:
    """What the traced batch's path was, per module, for ``problem.meta["data_dependent"]``.

    Parameters
    ----------
    reads : sequence of DataRead

    Returns
    -------
    dict
        ``{"reads": n, "modules": {path: {op: [traced, ...]}}}``: for ``nonzero`` in a
        mixture-of-experts loop, the first list is the experts the batch reached and the
        next ones the ``(token, slot)`` rows of each expert, i.e. its tokens.
    """
    modules: dict[str, dict[str, list]] = {}
    for r in reads:
        modules.setdefault(r.module, {}).setdefault(r.op, []).append(r.to_meta()["traced"])
    return {"reads": len(reads), "modules": modules}


def describe_routing(summary: dict) -> str:
    """One line for the import summary: how many reads, in which modules, which shapes.

    Parameters
    ----------
    summary : dict
        :func:`routing_summary`'s result.

    Returns
    -------
    str
    """
    parts = []
    for module, ops in summary["modules"].items():
        rows = [s[0][0] for s in ops.get("aten.nonzero", []) if s and s[0]]
        text = ", ".join(f"{op} x{len(v)}" for op, v in ops.items())
        if rows:
            text += f" (nonzero rows {' '.join(map(str, rows[:12]))}{' ...' if len(rows) > 12 else ''})"
        parts.append(f"{module or '(root)'}: {text}")
    shown = "; ".join(parts[:3]) + (f"; and {len(parts) - 3} more module(s)" if len(parts) > 3 else "")
    return (f"data-dependent step: {summary['reads']} read(s) of the data ({shown}); the graph and its costs "
            f"follow the example batch's path, and optpart.torch.apply refuses a batch that takes another")
