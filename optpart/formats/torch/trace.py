"""Trace one training step (or one forward pass) of a PyTorch module into a flat ATen FX graph.

This is the part of the PyTorch importer that other code builds on (plan export and
``optpart.torch.apply`` run the graph it returns); :func:`trace_training_step` is its
public, stable entry point. :func:`optpart.formats.torch_import.from_torch` turns the
result into a :class:`~optpart.Problem`.

How (torch 2.3 and later; checked on 2.13):

* the step ``loss = loss_fn(module(*inputs), *targets); grads = torch.autograd.grad(loss, params)``
  is traced by ``torch.fx.experimental.proxy_tensor.make_fx``, the tracer ``torch.export``
  and AOTAutograd are built on: one flat graph with the forward and the backward ATen
  operators (the joint graph of AOTAutograd);
* first with **fake tensors** (shapes and dtypes only, no storage: large models trace in
  little memory). When the model reads tensor *values* to decide shapes or control flow
  (``.item()``, mixture-of-experts routing, masks built from values) fake tracing cannot
  go on; the step is then traced again with **real** CPU tensors (parameters on the meta
  device are filled with a fixed-seed random init), which records the path those values
  take. :attr:`TracedStep.trace_mode` says which one was used;
* models whose config has ``use_cache`` (Hugging Face) are traced with it off: a training
  step keeps no key/value cache;
* **module attribution**: forward pre/post hooks on every submodule stamp the nodes the
  submodule creates with its ``named_modules()`` path (through ``torch.fx.traceback``'s
  node metadata, as ``torch.export`` does); autograd pre-hooks on the backward graph stamp
  each backward node with the sequence number of the forward operator it differentiates,
  and the backward node inherits that operator's module (AOTAutograd's
  ``copy_fwd_metadata_to_bw_nodes`` does the same).

References: PyTorch ``torch.fx`` (Reed et al., "torch.fx: Practical Program Capture and
Transformation for Deep Learning in Python", MLSys 2022); AOTAutograd (``functorch``).
"""

from __future__ import annotations

import dataclasses
import logging
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from ...errors import FormatError
from .aliasing import check_aliasing, ordering_edges, written_args
from .attribution import _ModuleStamper
from .functional import SEQ_KEY, functionalize_graph
from .datadep import keep_node, reads_of, recording_reads
from .inputs import DEFAULT_LOSS, _split_inputs, drop_outputs, materialized
from .rng import drop_replay_copies, merge_replayed_draws, tracking_draws
from .settings import tracing_settings
from .step import StepFunction, seeded

__all__ = ["TracedStep", "trace_training_step"]

_DATA_DEPENDENT_HINTS = ("DataDependent", "DynamicOutputShape", "_local_scalar_dense", "data-dependent",
                         "data dependent", "GuardOnDataDependent")


@dataclass(frozen=True)
class TracedStep:
    """One traced training step (or forward pass) and how it maps to problem nodes.

    Attributes
    ----------
    graph_module : torch.fx.GraphModule
        The flat ATen graph. Its placeholders are, in this order: one per parameter
        (``param_names`` order), one per buffer (``buffer_names`` order), one per example
        input (``input_names`` order), one per target. Training: it returns
        ``(loss, grad_0, ..., grad_{P-1})`` (a gradient is ``None`` for a parameter the
        loss does not use). Inference: it returns the flat tuple of the tensors of the
        module's output, in :func:`output_tensors` order.
    node_names : dict[str, str]
        Problem node id -> FX node name, for every problem node that is an FX node: each
        operator (id == FX name; ``getitem`` projections are not nodes), each example input
        (``input.<i>`` or ``input.<keyword>``) and target (``target.<i>``) and each buffer
        (``buffer.<name>``). The optimizer nodes ``update.<param name>`` of a training
        problem have no FX node; ``update.<p>`` belongs to ``param_names``' ``p``.
    param_names, buffer_names : tuple of str
        ``module.named_parameters()`` / ``named_buffers()`` names, in that order.
    input_names : tuple of str
        One per tensor of the example inputs: ``'0'``, ``'1'``... for positional inputs,
        the keyword for keyword inputs (example inputs given as a dict), plus ``.j`` per
        nesting level for tensors inside tuples, lists or dicts (``'1.0'``). Non-tensor
        inputs (numbers, ``None``) are constants of the trace, not graph inputs.
    n_targets : int
        Number of targets (extra inputs of ``loss_fn``).
    training : bool
        Whether the graph is a training step (forward, backward) or a forward pass.
    loss : str
        How the loss is defined: ``'loss_fn'`` (the user's), :data:`OUTPUT_LOSS` (the
        output's own ``loss``), :data:`DEFAULT_LOSS`, or ``'none'`` (inference).
    trace_mode : str
        ``'fake'`` (fake tensors, the default) or ``'real'`` (real CPU tensors, the
        fallback for data-dependent models).
    node_module : dict[str, tuple[str, str]]
        FX node name -> ``(module path, module class name)`` for every ``call_function``
        and ``placeholder`` node. The path is as in ``named_modules()`` (``''`` is the
        root: inputs, and the loss when it is computed outside the module).
    module_classes : dict[str, str]
        Every ``named_modules()`` path -> its class name.
    notes : tuple of str
        What the tracer chose on the way (a fallback taken, a cache switched off).
    backward : frozenset of str
        FX names of the operators autograd ran while differentiating the loss (the
        backward pass), as stamped during tracing; empty for inference.
    order : tuple of (str, str)
        Ordering edges ``(before, after)`` between FX nodes beyond the data dependencies:
        every write of a storage after the accesses it must follow, and before those that
        must see it (:func:`~optpart.formats.torch.aliasing.ordering_edges`). In a
        functionalized step they order the few true side effects (a buffer's ``copy_``,
        e.g. batch norm's running statistics) after every reader of that buffer.
    functional : bool
        Whether the graph was functionalized (no in-place operator but the writes to
        its inputs); False when functionalization failed and the traced mutations stay,
        ordered by :attr:`order` (a note says why).
    frozen : frozenset of str
        Names of parameters with ``requires_grad=False`` (frozen embeddings, e.g. Whisper's
        sinusoidal positions): the step does not differentiate them (their gradient output
        is ``None``) and they get no optimizer node.
    forward_outputs : tuple of (str or None)
        FX names of the tensors of the module's output (:func:`output_tensors` order); in a
        training step ``None`` for an output the loss does not use (the step does not compute it).
    reads : tuple of DataRead
        Every place where a real-tensor trace read its data (``nonzero``'s shape, an ``.item()``,
        a tensor handed to NumPy), with what the traced batch gave
        (:mod:`~optpart.formats.torch.datadep`); empty for a fake trace, which reads no data.
        The graph is the path these reads took: :func:`optpart.torch.apply` checks them on every call.
    """

    graph_module: Any
    node_names: dict[str, str]
    param_names: tuple[str, ...]
    buffer_names: tuple[str, ...]
    input_names: tuple[str, ...]
    n_targets: int
    training: bool
    loss: str
    trace_mode: str
    node_module: dict[str, tuple[str, str]]
    module_classes: dict[str, str]
    notes: tuple[str, ...] = field(default=())
    backward: frozenset = field(default=frozenset())
    order: tuple = field(default=())
    functional: bool = False
    frozen: frozenset = field(default=frozenset())
    forward_outputs: tuple = field(default=())
    reads: tuple = field(default=())

    @property
    def n_inputs(self) -> int:
        """Number of graph inputs made from the example inputs (one per tensor)."""
        return len(self.input_names)

    def flatten_inputs(self, example_inputs) -> list:
        """The tensors of ``example_inputs`` (shaped like the traced ones) in placeholder order,
        so that ``graph_module(params, buffers, *step.flatten_inputs(x), *targets)`` runs.

        Parameters
        ----------
        example_inputs : tensor, sequence or dict
            Inputs structured like the traced ones (same names and nesting).

        Returns
        -------
        list of torch.Tensor
            One tensor per graph input, in :attr:`input_names` order.

        Raises
        ------
        FormatError
            The inputs name or nest tensors differently from the traced ones.
        """
        names, tensors, _, _ = _split_inputs(example_inputs)
        if names != self.input_names:
            raise FormatError(f"these inputs give graph inputs {list(names)}; the traced step has "
                              f"{list(self.input_names)}")
        return tensors

class _MetaFailureFilter(logging.Filter):
    """Keeps torch's fake-tensor logger from printing a traceback when an operator's meta
    kernel fails (the failure is raised to us anyway), and remembers which operator it was."""

    LOGGER = "torch._subclasses.fake_tensor"
    PREFIX = "failed while attempting to run meta for "

    def __init__(self):
        super().__init__()
        self.operator: str | None = None

    def filter(self, record: logging.LogRecord) -> bool:
        msg = record.getMessage()
        if msg.startswith(self.PREFIX):
            self.operator = msg[len(self.PREFIX):].split()[0] if msg[len(self.PREFIX):].split() else None
            return False
        return True

    def __enter__(self):
        logging.getLogger(self.LOGGER).addFilter(self)
        return self

    def __exit__(self, *exc):
        logging.getLogger(self.LOGGER).removeFilter(self)
        return False


@contextmanager
def _shared_fake_mode(mode: str):
    """Real-tensor tracing with one fake-tensor mode for the shapes ``make_fx`` keeps of every value.

    Without a tracing context, ``make_fx`` builds a new ``FakeTensorMode`` (and its stack
    trace) for every real value it describes, which is most of a real trace's time.
    """
    if mode != "real":
        yield
        return
    from torch._guards import TracingContext, tracing
    from torch._subclasses.fake_tensor import FakeTensorMode

    with tracing(TracingContext(FakeTensorMode(allow_fallback_kernels=True))):
        yield


def _where(module, path: str, operator: str | None) -> str:
    """`` in module 'a.b' (Linear) at operator aten.mm.default`` (the parts that are known)."""
    text = f" in module '{path}' ({type(module.get_submodule(path)).__name__})" if path else ""
    return text + (f" at operator {operator}" if operator else "")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def _is_data_dependent(exc: BaseException) -> bool:
    names = " ".join(c.__name__ for c in type(exc).__mro__)
    text = f"{names} {exc}"
    return any(h in text for h in _DATA_DEPENDENT_HINTS)

def trace_training_step(
    module,
    example_inputs,
    *,
    training: bool = True,
    loss_fn: Callable[..., Any] | None = None,
    targets: Sequence[Any] = (),
    trace_mode: str = "auto",
    progress=None,
) -> TracedStep:
    """Trace one training step (or forward pass) of ``module`` into a flat ATen FX graph.

    Parameters
    ----------
    module : torch.nn.Module
        The model, real or built under ``with torch.device("meta"):``. It is not changed
        (a config's ``use_cache`` is switched off during tracing and restored).
    example_inputs : tensor, sequence, or dict of keyword inputs
        Inputs of ``module.forward`` (items may nest tuples, lists and dicts of tensors, and
        may be numbers or ``None``); only shapes and dtypes matter unless the model reads
        values (then they matter for the real-tensor fallback: give realistic ones).
    training : bool
        Trace forward + backward (``torch.autograd.grad`` of the loss with respect to every
        parameter) when True; the forward pass only when False.
    loss_fn : callable, optional
        ``loss_fn(output, *targets) -> scalar tensor``. Default :func:`default_loss`: the
        output's own scalar ``loss`` when it has one (Hugging Face with ``labels``), else the
        sum of the means of every floating tensor in the output (tensors, tuples, lists,
        dicts, dataclasses, Hugging Face ``ModelOutput`` are all understood).
    targets : sequence of tensors
        Extra inputs of ``loss_fn`` (labels); they become placeholders after the inputs.
    trace_mode : {'auto', 'fake', 'real'}
        ``'auto'`` (default) tries fake tensors and falls back to real CPU tensors when the
        model's control flow or shapes depend on tensor values; ``'fake'``/``'real'`` force one.
    progress : optpart.progress.Progress, optional
        Where to report stages and notes.

    Returns
    -------
    TracedStep
        The graph module, the problem-node-id to FX-name mapping, names and attribution;
        see :class:`TracedStep` for the exact placeholder and output layout.

    Raises
    ------
    FormatError
        torch missing, bad inputs, a loss that is not a scalar, or a tracing failure (one
        line naming the module being run and the tracer's message, which names the operator).

    Examples
    --------
    >>> import torch
    >>> step = trace_training_step(torch.nn.Linear(4, 2), (torch.empty(3, 4),))
    >>> step.param_names, step.trace_mode, step.loss == DEFAULT_LOSS
    (('weight', 'bias'), 'fake', True)
    >>> sorted({m for m, _ in step.node_module.values()})
    ['']
    """
    try:
        import torch
        import torch.fx.traceback as fxt
        from torch._subclasses.fake_tensor import FakeTensorMode
        from torch.fx.experimental.proxy_tensor import make_fx
    except ImportError:  # pragma: no cover - exercised only without torch
        raise FormatError("importing a PyTorch model needs torch: pip install 'optpart[torch]'") from None
    if trace_mode not in ("auto", "fake", "real"):
        raise FormatError(f"trace_mode={trace_mode!r} must be 'auto', 'fake' or 'real'")
    if not isinstance(module, torch.nn.Module):
        raise FormatError(f"expected a torch.nn.Module, got {type(module).__name__}")
    cls = type(module).__name__
    input_names, input_vals, as_kw, structure = _split_inputs(example_inputs)
    targets = list(targets)
    pnames = tuple(n for n, _ in module.named_parameters())
    pvals = [p for _, p in module.named_parameters()]
    bnames = tuple(n for n, _ in module.named_buffers())
    bvals = [b for _, b in module.named_buffers()]
    frozen = frozenset(n for n, p in module.named_parameters() if not p.requires_grad)
    if training and len(frozen) == len(pnames):
        raise FormatError(f"{cls} has no parameters to train ({'all are requires_grad=False' if pnames else 'none'}); "
                          "use training=False")
    n_in = len(input_vals)
    notes: list[str] = []
    stamper = _ModuleStamper(module)
    step = StepFunction(module, pnames, bnames, frozen, structure, as_kw, n_in, training, loss_fn, stamper)

    def run(mode: str):
        stamper.stack.clear()
        if mode == "fake":
            fake = FakeTensorMode(allow_non_fake_inputs=True)

            def conv(t, grad=False):
                if not isinstance(t, torch.Tensor):
                    return t
                with fake:
                    return torch.empty(t.shape, dtype=t.dtype, device="cpu", requires_grad=grad)
            params = [conv(p, training and n not in frozen) for n, p in zip(pnames, pvals)]
            buffers = [conv(b) for b in bvals]
            xs = [conv(x) for x in input_vals] + [conv(t) for t in targets]
        else:
            params, buffers, xs = materialized(pvals, bvals, [*input_vals, *targets],
                                               [training and n not in frozen for n in pnames])

        def recorded(*args):  # random draws numbered (rng); real tensors: every read of the data stamped (datadep)
            with tracking_draws(), recording_reads(real=mode == "real"):
                return step(*args)

        with fxt.preserve_node_meta(), torch.enable_grad(), torch.autograd._force_original_view_tracking(True), \
                seeded(), _shared_fake_mode(mode):
            fxt.current_meta["custom"] = {_ModuleStamper.KEY: ""}
            if mode == "fake":
                traced = make_fx(recorded, tracing_mode="fake")(params, buffers, *xs)
            else:  # real tensors: values read by the model (``.item()``) become constants of this trace
                traced = make_fx(recorded, tracing_mode="real", _error_on_data_dependent_ops=False)(
                    params, buffers, *xs)
        return traced, [*params, *buffers, *xs]

    def functional(traced, flat, mode: str):
        """The functionalized graph, or (with a note) the traced one when functionalization fails."""
        if progress is not None:
            progress.stage("functionalizing")
        try:
            with seeded(), _shared_fake_mode(mode):  # the same random draws as the trace: the same path
                return functionalize_graph(traced, flat, mode), True
        except Exception as exc:  # an operator without a functional form: keep it, ordered by edges
            note = (f"{cls}: functionalization failed ({_first_line(exc)[:160]}); the traced in-place "
                    f"operators stay, ordered by explicit edges and colocated with what they write")
            notes.append(note)
            if progress is not None:
                progress.note(note)
            return traced, False

    try:
        with tracing_settings(module, training, notes):
            modes = ["fake", "real"] if trace_mode == "auto" else [trace_mode]
            traced, flat, used = None, [], None
            for i, mode in enumerate(modes):
                if progress is not None:
                    progress.stage(f"tracing with {mode} tensors")
                meta_failure = _MetaFailureFilter()
                try:
                    with meta_failure:
                        (traced, flat), used = run(mode), mode
                    break
                except FormatError:
                    raise
                except Exception as exc:  # the tracer raises many types; each becomes one line
                    where_txt = _where(module, stamper.current(), meta_failure.operator)
                    if i + 1 < len(modes) and _is_data_dependent(exc):
                        note = (f"{cls}: fake-tensor tracing stopped{where_txt} on a data-dependent operator "
                                f"({_first_line(exc)[:160]}); traced again with real CPU tensors")
                        notes.append(note)
                        if progress is not None:
                            progress.note(note)
                        continue
                    raise FormatError(f"cannot trace {cls}{where_txt} with {mode} tensors: "
                                      f"{_first_line(exc)[:300]}") from None
    finally:
        stamper.close()
    if merge_replayed_draws(traced.graph):  # a checkpointed block's recomputation draws its forward's masks
        traced.recompile()
    gm, is_functional = functional(traced, flat, used)
    if is_functional and drop_replay_copies(gm.graph):
        gm.recompile()
    outs = drop_outputs(gm, step.n_outputs) if training else list(next(
        nd for nd in gm.graph.nodes if nd.op == "output").args[0])
    gm.graph.eliminate_dead_code(is_impure_node=keep_node)
    gm.recompile()
    alive = set(gm.graph.nodes)
    traced_step = _describe(gm, module, pnames, bnames, input_names, len(targets), training, step.loss, used,
                            tuple(notes))
    traced_step = dataclasses.replace(traced_step, order=ordering_edges(gm.graph), functional=is_functional,
                                      reads=reads_of(gm.graph, traced_step.node_module),
                                      frozen=frozen if training else frozenset(),
                                      forward_outputs=tuple(o.name if isinstance(o, torch.fx.Node) and o in alive else None
                                                            for o in outs))
    check_aliasing(traced_step)  # proves the edges order every write; a failure is a bug of ours
    return traced_step


def _describe(gm, module, pnames, bnames, input_names, n_targets, training, loss, mode, notes) -> TracedStep:
    """Name the problem nodes and attribute every FX node to a module."""
    import operator

    classes = {path: type(m).__name__ for path, m in module.named_modules()}
    nodes = list(gm.graph.nodes)
    placeholders = [nd for nd in nodes if nd.op == "placeholder"]
    expected = len(pnames) + len(bnames) + len(input_names) + n_targets
    if len(placeholders) != expected:
        raise FormatError(f"traced graph has {len(placeholders)} inputs; expected {len(pnames)} parameters, "
                          f"{len(bnames)} buffers, {len(input_names)} inputs and {n_targets} targets")
    names: dict[str, str] = {}
    for j, nd in enumerate(placeholders[len(pnames):]):
        if j < len(bnames):
            names[f"buffer.{bnames[j]}"] = nd.name
        elif j < len(bnames) + len(input_names):
            names[f"input.{input_names[j - len(bnames)]}"] = nd.name
        else:
            names[f"target.{j - len(bnames) - len(input_names)}"] = nd.name
    # Forward operators carry their module; backward ones the sequence number of their forward.
    fwd_module: dict[int, str] = {}
    module_of: dict[str, str] = {}
    for nd in nodes:
        custom = nd.meta.get("custom") or {}
        if _ModuleStamper.KEY in custom and nd.op == "call_function":
            path = custom[_ModuleStamper.KEY]
            module_of[nd.name] = path
            seq = custom.get(SEQ_KEY, nd.meta.get("seq_nr", -1))
            if path and isinstance(seq, int) and seq >= 0:
                fwd_module.setdefault(seq, path)
    backward: set[str] = set()
    for nd in nodes:
        custom = nd.meta.get("custom") or {}
        if _ModuleStamper.BW_KEY in custom and nd.op == "call_function":
            module_of[nd.name] = fwd_module.get(custom[_ModuleStamper.BW_KEY], "")
            backward.add(nd.name)
    # Parameters and buffers belong to the module that owns them (``rotary_emb.inv_freq``
    # -> ``rotary_emb``), as in accelerate's device maps.
    for j, nd in enumerate(placeholders[:len(pnames) + len(bnames)]):
        owned = pnames[j] if j < len(pnames) else bnames[j - len(pnames)]
        module_of.setdefault(nd.name, owned.rpartition(".")[0])
    # A write into a placeholder that no module stamped (functionalization's closing ``copy_``
    # into a buffer) belongs to the placeholder's module.
    for nd in nodes:
        if nd.op == "call_function" and nd.name not in module_of:
            for i in written_args(nd):
                if i < len(nd.args) and getattr(nd.args[i], "op", None) == "placeholder":
                    module_of[nd.name] = module_of.get(nd.args[i].name, "")
                    break
    root_cls = classes.get("", type(module).__name__)
    node_module: dict[str, tuple[str, str]] = {}
    for nd in nodes:
        if nd.op not in ("call_function", "placeholder"):
            continue
        path = module_of.get(nd.name, "")
        node_module[nd.name] = (path, classes.get(path, root_cls))
        if nd.op == "call_function" and nd.target is not operator.getitem:
            names[nd.name] = nd.name
    return TracedStep(graph_module=gm, node_names=names, param_names=tuple(pnames), buffer_names=tuple(bnames),
                      input_names=tuple(input_names), n_targets=n_targets, training=bool(training), loss=loss,
                      trace_mode=mode, node_module=node_module, module_classes=classes, notes=notes,
                      backward=frozenset(backward))
