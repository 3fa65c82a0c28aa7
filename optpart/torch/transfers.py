"""Every transfer of a placed step is there: :func:`check_devices`.

Split from :mod:`optpart.torch.placed`, which builds the placed graph and runs this proof on it.
"""

from __future__ import annotations

import operator
from typing import Any

from ..errors import OptpartError

__all__ = ["check_devices"]


def check_devices(gm) -> dict[str, int]:
    """Prove that every operator of a placed step reads only tensors held on its own device.

    Two torch devices may share one memory (``cpu`` and ``cpu:0``, or any ``cpu:i``), so
    running the step on a CPU cannot show a missing transfer: the tensor is simply there.
    This check tags every value of the graph with the optpart device that holds it instead
    (the ``optpart_device`` of the operator, attribute or ``Tensor.to`` copy that made it;
    a ``getitem`` projection has its source's) and follows each operator's tensor arguments:
    each must carry the operator's own tag. A graph input must pass through its ``Tensor.to``
    first. The write-back of a batch-norm statistic into the module's own buffer is the one
    operator allowed to read another device (``copy_`` is itself the transfer).

    :func:`optpart.torch.apply` runs it on every graph it builds; tests run it on graphs they break.

    Parameters
    ----------
    gm : torch.fx.GraphModule
        A graph made by :func:`apply` (its nodes carry ``meta["optpart_device"]``).

    Returns
    -------
    dict
        ``{"operators": operators checked, "transfers": Tensor.to copies between devices}``.

    Raises
    ------
    OptpartError
        An operator reading a tensor of another device (or an untagged value, such as a raw
        graph input), naming the operator, the argument and both devices.
    """
    tag: dict[Any, str | None] = {}
    n_ops = n_to = 0
    for nd in gm.graph.nodes:
        if nd.op == "placeholder":
            tag[nd] = None  # the caller's tensor, wherever it is: it must be copied before use
        elif nd.op == "call_function" and nd.target is operator.getitem:
            tag[nd] = tag.get(nd.args[0])
        elif nd.op in ("get_attr", "call_method", "call_function"):
            tag[nd] = nd.meta.get("optpart_device")
            if nd.op == "call_method" and nd.target == "to":
                n_to += nd.args[0].op != "placeholder"
                continue
            if nd.op != "call_function" or nd.meta.get("optpart_writeback"):
                continue
            n_ops += 1
            for arg in _node_args(nd):
                if tag.get(arg) != tag[nd]:
                    where = "no device (a graph input used without its copy)" if tag.get(arg) is None \
                        else f"device {tag.get(arg)}"
                    raise OptpartError(f"placed step: operator '{nd.name}' on {tag[nd]} reads '{arg.name}' "
                                       f"from {where}: a cross-device transfer is missing")
    return {"operators": n_ops, "transfers": n_to}


def _node_args(nd) -> list:
    """The distinct FX nodes among ``nd``'s arguments and keyword arguments, in order."""
    import torch.fx as fx

    found: dict[Any, None] = {}
    fx.node.map_arg((nd.args, nd.kwargs), lambda a: found.setdefault(a))
    return list(found)
