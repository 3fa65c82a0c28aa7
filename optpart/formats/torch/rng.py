"""Random draws of a traced step: which ones replay an earlier draw (activation checkpointing).

A traced graph records each random operator (``bernoulli`` of dropout, ``rand``), but not
the generator state it drew from: ``torch.get_rng_state`` / ``set_rng_state`` are not
operators. Activation checkpointing (``torch.utils.checkpoint``, Hugging Face's
``gradient_checkpointing_enable``) saves the state before a block's forward and restores
it to recompute the block in the backward pass, so that its dropout draws the same masks;
a graph that merely records the recomputation's ``bernoulli`` draws new masks, and its
gradients are wrong (the trace proof catches it).

:func:`tracking_draws` numbers the draws while a step is traced: every random operator's FX
node is stamped with its position in the generator's stream, and a state handed back to
``set_rng_state`` that ``get_rng_state`` gave out earlier moves the position back to where
it was then. :func:`merge_replayed_draws` then reads a draw at a position already drawn
(same operator, arguments and shape) as the replay it is: its users read (a copy of) the
first draw's result, as they do in eager mode, and the graph draws what eager autograd draws.
The first draw's numbers are then kept from the forward pass to the recomputation (the
memory checkpointing saves on them is spent; the problem's memory model counts it).
"""

from __future__ import annotations

from contextlib import contextmanager

__all__ = ["DRAW_KEY", "COPY_KEY", "tracking_draws", "merge_replayed_draws", "drop_replay_copies", "draws_random"]

#: ``node.meta["custom"]`` key of a random operator's position in the generator's stream.
DRAW_KEY = "optpart_draw"
#: ``node.meta["custom"]`` key of the copies that carry a draw to its replays.
COPY_KEY = "optpart_draw_copy"


def draws_random(nd) -> bool:
    """Whether FX node ``nd`` draws from a random generator (ATen's ``nondeterministic_seeded`` tag).

    Parameters
    ----------
    nd : torch.fx.Node

    Returns
    -------
    bool
    """
    import torch

    return nd.op == "call_function" and torch.Tag.nondeterministic_seeded in getattr(nd.target, "tags", ())


@contextmanager
def tracking_draws():
    """Stamp every random operator traced inside this context with its position in the stream.

    Enter it inside the function ``make_fx`` traces. ``torch.get_rng_state`` and
    ``torch.set_rng_state`` are wrapped while it is active (and restored on exit) so that a
    restored state restores the position.

    Returns
    -------
    contextlib.AbstractContextManager
    """
    import torch
    import torch.random
    from torch.utils._python_dispatch import TorchDispatchMode

    from .datadep import _last_node, _stamp

    seeded = torch.Tag.nondeterministic_seeded
    state = {"pos": 0, "fresh": 1 << 40}
    handed_out: dict[int, tuple] = {}
    real_get, real_set = torch.get_rng_state, torch.set_rng_state

    def get_rng_state():
        value = real_get()
        handed_out[id(value)] = (value, state["pos"])  # the tensor is kept: its id stays unique
        return value

    def set_rng_state(new_state):
        real_set(new_state)
        known = handed_out.get(id(new_state))
        if known is not None and known[0] is new_state:
            state["pos"] = known[1]
        else:  # a state we never handed out: a stream no earlier draw is part of
            state["pos"], state["fresh"] = state["fresh"], state["fresh"] + (1 << 40)

    class _Draws(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if seeded not in getattr(func, "tags", ()):
                return func(*args, **(kwargs or {}))
            since = _last_node()
            out = func(*args, **(kwargs or {}))
            _stamp(func, state["pos"], since, key=DRAW_KEY)
            state["pos"] += 1
            return out

    torch.get_rng_state = torch.random.get_rng_state = get_rng_state
    torch.set_rng_state = torch.random.set_rng_state = set_rng_state
    try:
        with _Draws():
            yield
    finally:
        torch.get_rng_state = torch.random.get_rng_state = real_get
        torch.set_rng_state = torch.random.set_rng_state = real_set


def _signature(nd) -> tuple:
    """What a draw depends on besides the generator: its operator, non-tensor arguments, output shape."""
    import torch.fx

    def plain(a):
        return "<tensor>" if isinstance(a, torch.fx.Node) else a

    val = nd.meta.get("val")
    shape = (tuple(val.shape), val.dtype) if hasattr(val, "shape") else None
    args = torch.fx.node.map_aggregate(nd.args, plain)
    kwargs = torch.fx.node.map_aggregate(dict(nd.kwargs), plain)
    return nd.target, repr(args), repr(sorted(kwargs.items())), shape


def merge_replayed_draws(graph) -> int:
    """Let every draw that replays an earlier one (same position, same signature) read that draw.

    The first draw's result is copied right after it is drawn (before an in-place operator,
    such as dropout's ``div_``, changes it), and each replay becomes a copy of that copy, so
    the replay's users get the first draw's numbers in a graph with mutations too; in a
    functionalized graph :func:`drop_replay_copies` then removes both copies.

    Parameters
    ----------
    graph : torch.fx.Graph
        A traced step's graph, stamped by :func:`tracking_draws`.

    Returns
    -------
    int
        How many replayed draws were replaced (and erased).
    """
    import torch

    clone = torch.ops.aten.clone.default
    first: dict[tuple, object] = {}
    saved: dict[object, object] = {}
    merged = 0

    def copy_of(src, like):
        out = graph.call_function(clone, (src,))
        out.meta = {k: v for k, v in like.meta.items() if k in ("val", "tensor_meta", "custom", "seq_nr")}
        out.meta["custom"] = {**(like.meta.get("custom") or {}), COPY_KEY: True}
        out.meta["custom"].pop(DRAW_KEY, None)
        return out

    for nd in list(graph.nodes):
        pos = (nd.meta.get("custom") or {}).get(DRAW_KEY) if draws_random(nd) else None
        if pos is None:
            continue
        key = (pos, _signature(nd))
        if key not in first:
            first[key] = nd
            continue
        drawn = first[key]
        if drawn not in saved:
            with graph.inserting_after(drawn):
                saved[drawn] = copy_of(drawn, drawn)
        with graph.inserting_before(nd):
            replay = copy_of(saved[drawn], nd)
        nd.replace_all_uses_with(replay)
        graph.erase_node(nd)
        merged += 1
    return merged


def drop_replay_copies(graph) -> int:
    """Remove the copies :func:`merge_replayed_draws` made, in a functionalized graph (no
    operator writes a tensor there, so a copy is its source).

    Parameters
    ----------
    graph : torch.fx.Graph
        A functionalized graph.

    Returns
    -------
    int
        How many copies were removed.
    """
    dropped = 0
    for nd in list(graph.nodes):
        if nd.op == "call_function" and (nd.meta.get("custom") or {}).get(COPY_KEY) and nd.args:
            nd.replace_all_uses_with(nd.args[0])
            graph.erase_node(nd)
            dropped += 1
    return dropped
