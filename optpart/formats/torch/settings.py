"""How a module is set up while it is traced (and restored afterwards).

Split from :mod:`optpart.formats.torch.trace`: ``train()``/``eval()`` mode, a Hugging Face
config's key/value cache, and mixture-of-experts kernels without a CPU implementation.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Mapping

__all__ = ["tracing_settings", "experts_implementation"]


@contextmanager
def tracing_settings(module, training: bool, notes: list[str]):
    """The module set up for tracing one step, and restored afterwards.

    ``train()`` (``training``) or ``eval()`` mode, a Hugging Face config's ``use_cache`` off,
    and ``grouped_mm`` experts (no float32 CPU kernel, fake or real) replaced by the
    reference per-expert loop.

    Parameters
    ----------
    module : torch.nn.Module
        The module to trace.
    training : bool
        Trace in training mode (else eval mode).
    notes : list of str
        Appended with one line per setting changed (the tracer reports them).

    Returns
    -------
    contextlib.AbstractContextManager
        Restores the module's mode, cache and experts implementation on exit.
    """
    cls = type(module).__name__
    config = getattr(module, "config", None)
    cache_was = getattr(config, "use_cache", None) if config is not None else None
    was_training = module.training
    experts_was = experts_implementation(module)
    switch_experts = bool(experts_was) and "grouped_mm" in experts_was.values()
    try:
        if cache_was:
            config.use_cache = False
            notes.append(f"{cls}: traced with config.use_cache=False (one step, no key/value cache kept)")
        if switch_experts:
            module.set_experts_implementation({k: ("eager" if v == "grouped_mm" else v)
                                               for k, v in experts_was.items()})
            notes.append(f"{cls}: mixture-of-experts layers traced with experts_implementation='eager' "
                         f"(instead of 'grouped_mm')")
        module.train(training)
        yield
    finally:
        module.train(was_training)
        if switch_experts:
            module.set_experts_implementation(experts_was)
        if cache_was:
            config.use_cache = cache_was


def experts_implementation(module) -> dict | None:
    """A Hugging Face model's per-(sub)config mixture-of-experts implementation.

    Parameters
    ----------
    module : torch.nn.Module
        Any module.

    Returns
    -------
    dict or None
        ``{config name: implementation}``, or None for a model without the setting.
    """
    get = getattr(module, "get_experts_implementation", None)
    if get is None or not callable(getattr(module, "set_experts_implementation", None)):
        return None
    try:
        impl = get()
    except Exception:  # a model without experts may refuse; then there is nothing to switch
        return None
    return dict(impl) if isinstance(impl, Mapping) else None
