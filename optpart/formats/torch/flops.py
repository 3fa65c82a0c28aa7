"""FLOPs of one traced ATen operator, the compute term of the cost model (``docs/costmodel.md``).

``torch.utils.flop_counter``'s formula registry prices matmuls, convolutions and attention
from the traced shapes; the few kernels it has no formula for (CPU flash attention, fused
RNN layers) are priced here. Elementwise operators count 0 FLOPs: the cost model prices
them by the bytes they move.
"""

from __future__ import annotations

import math

from ...errors import FormatError

__all__ = ["operator_flops"]


def operator_flops(nd, label: str) -> int:
    """The FLOPs of the FX node ``nd`` (a ``call_function`` on an ATen operator).

    Parameters
    ----------
    nd : torch.fx.Node
        The traced operator; its inputs carry fake or real tensors in ``meta["val"]``.
    label : str
        The operator's name for the error message (``aten.<op>.<overload>``).

    Returns
    -------
    int
        From torch's formula registry when it has one, else from :func:`_extra_flops`,
        else 0.

    Raises
    ------
    FormatError
        A registry formula that fails on the traced shapes (one line naming the node).
    """
    import torch
    from torch.utils.flop_counter import flop_registry

    packet = getattr(nd.target, "overloadpacket", None)
    if packet not in flop_registry:
        return _extra_flops(nd) or 0
    args = torch.fx.node.map_arg(nd.args, lambda a: a.meta.get("val"))
    kwargs = torch.fx.node.map_arg(nd.kwargs, lambda a: a.meta.get("val"))
    try:
        return int(flop_registry[packet](*args, **kwargs, out_val=nd.meta.get("val")))
    except Exception as exc:
        raise FormatError(f"cannot count the FLOPs of node '{nd.name}' ({label}): {exc}") from None


def _extra_flops(nd) -> int | None:
    """FLOPs of operators that ``torch.utils.flop_counter`` has no formula for.

    The CPU flash-attention kernels (what ``scaled_dot_product_attention`` becomes when
    traced with CPU fake tensors) count with torch's generic SDPA formulas: ``4 b h s t d``
    forward and 2.5 times that backward, which recomputes the attention matrix (Dao et al.,
    "FlashAttention", NeurIPS 2022, section 3.1).
    """
    from torch.utils.flop_counter import sdpa_backward_flop_count, sdpa_flop_count

    name = getattr(getattr(nd.target, "overloadpacket", None), "__name__", "")
    shapes = [tuple(a.meta["val"].shape) for a in nd.args if hasattr(a, "meta") and hasattr(a.meta.get("val"), "shape")]
    if name == "_scaled_dot_product_flash_attention_for_cpu" and len(shapes) >= 3:
        return int(sdpa_flop_count(*shapes[:3]))
    if name == "_scaled_dot_product_flash_attention_for_cpu_backward" and len(shapes) >= 4:
        return int(sdpa_backward_flop_count(*shapes[:4]))
    if name in ("mkldnn_rnn_layer", "mkldnn_rnn_layer_backward") and len(shapes) >= 3:
        # One fused RNN layer (torch.nn.LSTM/GRU on CPU): per time step and batch row, the
        # input and recurrent matmuls, 2 (I + H) G H FLOPs for G gates; backward twice that.
        x, w_ih, w_hh = shapes[0], shapes[1], shapes[2]
        steps = math.prod(x[:-1]) if len(x) >= 2 else 1
        fwd = 2 * steps * (math.prod(w_ih) + math.prod(w_hh))
        return int(fwd if name == "mkldnn_rnn_layer" else 2 * fwd)
    return None
