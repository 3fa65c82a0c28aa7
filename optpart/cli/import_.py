"""The ``optpart import`` command: a real model in, an optpart problem file out.

``optpart import model.onnx -o problem.json`` reads an ONNX model;
``optpart import package.module:function -o problem.json`` calls ``function()``, which
returns ``(module, example_inputs)`` or a dict with keys ``module``, ``inputs`` and
optionally ``targets`` and ``loss_fn``, and traces it with PyTorch. Every cost model
value can be set (``--peak-flops 312TFLOP/s --efficiency 0.5 ...``); devices given
with ``--devices/--memory`` are written into the file.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

from ..errors import FormatError, OptpartError
from ..formats import save
from ..formats.costmodel import CostModel
from ..hardware import costs_label, links_label, resolve
from ..pipeline.step import check_micro_batches
from .pipeline import add_micro_batch_argument
from ..progress import set_quiet
from ..torch.factory import load_model
from ..units import format_bandwidth, format_bytes, format_flops, format_time, parse_list, parse_speed
from .common import Command, check_bandwidth, check_sizes, check_time

__all__ = ["COMMANDS", "cost_model_from_args", "add_cost_model_arguments", "import_model"]

_COST_FLAGS = (
    ("--peak-flops", "peak_flops", "RATE", "peak compute of a speed-1 device, e.g. 312TFLOP/s"),
    ("--efficiency", "efficiency", "F", "fraction of the peak reached by large kernels, in (0, 1]"),
    ("--min-op-time", "min_op_time", "T", "floor on a kernel's run time (launch overhead), e.g. 5us"),
    ("--memory-bandwidth", "memory_bandwidth", "BW", "device memory bandwidth, e.g. 900GB/s"),
    ("--link-bandwidth", "link_bandwidth", "BW", "bandwidth of the links written to the file, e.g. 25GB/s"),
    ("--link-latency", "link_latency", "T", "latency of the links written to the file, e.g. 10us"),
    ("--optimizer-bytes-per-param", "optimizer_bytes_per_param", "B",
     "optimizer state per parameter element in bytes (Adam fp32: 8, SGD: 0)"),
)


def add_cost_model_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the hardware profile (``--device-type/--dtype/--link``) and cost model flags
    (``--peak-flops``, ``--link-bandwidth``, ...) to ``parser``.

    Parameters
    ----------
    parser : argparse.ArgumentParser
        The command's parser; the flags go into one argument group, defaults shown are
        :class:`CostModel`'s (the flags themselves default to None: "not given").

    Returns
    -------
    None
    """
    from ..hardware import DEVICE_TYPES, DTYPES, LINK_TYPES

    g = parser.add_argument_group("hardware and cost model (docs/costmodel.md; default: one V100 at fp32, links "
                                  "of 25 GB/s and 10 us)")
    g.add_argument("--device-type", metavar="NAME",
                   help="the accelerator to price for: its dtype's dense peak, memory bandwidth, link, and (with "
                        f"--devices) its capacity; one of {', '.join(DEVICE_TYPES)} (default: V100)")
    g.add_argument("--dtype", choices=DTYPES, help="number format kernels run in (default fp32)")
    g.add_argument("--link", metavar="NAME",
                   help=f"link between devices: {', '.join(LINK_TYPES)}, or nvlink (the device type's own) "
                        "(default: the device type's usual one, else 25 GB/s and 10 us)")
    defaults = CostModel()
    for flag, field, metavar, text in _COST_FLAGS:
        g.add_argument(flag, dest=f"cm_{field}", metavar=metavar,
                       help=f"{text} (default {_shown(field, getattr(defaults, field))})")


def _shown(field: str, value: float) -> str:
    """A cost-model default as the flag takes it (``15.7TFLOP/s``, ``900GB/s``, ``5us``)."""
    if field.endswith("bandwidth"):
        return format_bandwidth(value)
    if field.endswith(("time", "latency")):
        return format_time(value)
    if field == "peak_flops":
        return f"{value / 1e12:g}TFLOP/s"
    return f"{value:g}"


def cost_model_from_args(args: argparse.Namespace) -> CostModel:
    """The :class:`CostModel` the command line asks for: the defaults, with every given flag.

    Parameters
    ----------
    args : argparse.Namespace
        Parsed arguments of a parser that :func:`add_cost_model_arguments` extended.

    Returns
    -------
    CostModel
        Default values where a flag was not given (units parsed by ``CostModel.replace``).
    """
    values = {field: getattr(args, f"cm_{field}", None) for _, field, _, _ in _COST_FLAGS}
    for flag, field, _, _ in _COST_FLAGS:
        if field.endswith("bandwidth") and isinstance(values[field], str):
            check_bandwidth(values[field], flag)  # a bare number is refused, not read as bytes per second
        if field.endswith(("latency", "time")) and isinstance(values[field], str):
            check_time(values[field], flag)  # a bare number is refused, not read as seconds
    names = {k: getattr(args, k, None) for k in ("device_type", "dtype", "link")}
    base = CostModel()
    if any(v is not None for v in names.values()):
        base = resolve(**names).cost_model(base)
    return base.replace(**values)  # explicit figures win over the profile's (and drop its name)


def _parse_shape(text: str) -> tuple[str, list[int]]:
    if "=" not in text:
        raise OptpartError(f"--input-shape {text!r}: expected NAME=D1xD2x..., e.g. data_0=32x3x224x224")
    name, dims = text.split("=", 1)
    try:
        return name.strip(), [int(d) for d in dims.lower().replace(",", "x").split("x")]
    except ValueError:
        raise OptpartError(f"--input-shape {text!r}: dimensions must be integers") from None


def import_model(spec: str, *, training: bool | None, cost_model: CostModel,
                 input_shapes: dict[str, list[int]] | None = None, name: str | None = None,
                 no_split: str | None = None, trace_mode: str = "auto", search_path: Sequence[str] = (),
                 profile: dict | None = None, check: bool | None = None, micro_batches: int = 1):
    """Import ``spec`` (an ``.onnx`` path or ``module:function``) as a :class:`~optpart.Problem`.

    **This imports and runs the user's code**: ``module`` is imported (its top level runs)
    and ``function()`` is called. ``module`` is either a dotted module name found on the
    normal ``sys.path`` (the working directory is NOT added to it: a stray ``torch.py``
    there cannot shadow a real package) or a path to a ``.py`` file. ``search_path``
    (the CLI's ``--path DIR``) appends directories to ``sys.path``, after the installed
    packages, while the module loads.

    The factory ``function()`` returns ``(module, example_inputs)``, ``(module,
    example_inputs, loss_fn)`` or a dict with keys ``module``, ``inputs`` and optionally
    ``targets`` and ``loss_fn`` (see ``docs/import.md``).

    Parameters
    ----------
    spec : str
        An ``.onnx`` path, or ``module:function`` (dotted module or ``.py`` path).
    training : bool or None
        Import the training step (forward, backward, optimizer) or the forward pass; None
        takes the factory's or format's default (training for PyTorch).
    cost_model : CostModel
        Prices operators, edges and optimizer state.
    input_shapes : dict of str to list of int, optional
        ONNX only: shapes for symbolic input dimensions (``--input-shape``).
    name : str, optional
        Problem name (default: the file stem or the factory's name).
    no_split : str, optional
        PyTorch only: comma-separated module classes whose instances stay on one device.
    trace_mode : {'auto', 'fake', 'real'}
        PyTorch only: tensors used for tracing (see :func:`trace_training_step`).
    search_path : sequence of str
        Directories appended to ``sys.path`` while the user's module loads.
    profile : dict, optional
        PyTorch only: ``{"device": ..., "repeats": ..., "threads": ...}`` to measure operator
        times (:func:`optpart.torch.measured_problem`) instead of estimating them.
    check : bool or None
        PyTorch only (``--check/--no-check``): prove the traced step against eager autograd and
        that no two operators touching one storage, one writing, are unordered (True), neither
        (False), the trace proof of real-tensor traces (None); recorded in ``problem.meta``.
    micro_batches : int, optional
        PyTorch only: trace and profile one micro-batch of ``M`` (the batch split in ``M``
        equal parts, :mod:`optpart.pipeline.micro`).

    Returns
    -------
    Problem
        The imported problem, without devices (the CLI adds them).

    Raises
    ------
    OptpartError
        A flag that does not apply to the model's format, a factory that fails or returns
        something else than a module and inputs, or an import error (one line each).
    """
    if spec.endswith(".py") or (":" not in spec and Path(spec).suffix == ".py"):
        raise FormatError(f"{spec}: a Python file is imported through one of its functions: give "
                          f"'{spec}:FUNCTION', the function that returns (module, example inputs)")
    if spec.endswith(".onnx") or Path(spec).is_file():
        from ..formats.onnx_import import from_onnx
        from ..progress import progress

        if profile is not None:
            raise OptpartError("--profile measures PyTorch models ('package.module:function'); "
                               "ONNX models are priced by the cost model")

        if check:
            raise OptpartError("--check proves traced PyTorch steps (against autograd, and their aliasing order); "
                               "an ONNX graph is read, not traced")
        if no_split:
            raise OptpartError("--no-split applies to PyTorch models (module classes); an ONNX graph has none")
        if micro_batches != 1:
            raise OptpartError("--micro-batches traces one micro-batch of a PyTorch model; for an ONNX graph "
                               "give the micro-batch's shape with --input-shape and solve with --micro-batches")
        with progress(f"importing {Path(spec).name}"):
            return from_onnx(spec, training=bool(training), cost_model=cost_model, input_shapes=input_shapes,
                             name=name)
    if ":" not in spec:
        raise FormatError(f"cannot import {spec!r}: give an .onnx file or a PyTorch factory 'package.module:function'")
    if input_shapes:
        raise OptpartError("--input-shape applies to ONNX models; a PyTorch factory makes its own inputs")
    fn_name = spec.rsplit(":", 1)[1]
    module, inputs, extra = load_model(spec, search_path or ())
    from ..formats.torch_import import from_torch

    problem = from_torch(module, inputs, training=True if training is None else training,
                         cost_model=cost_model, name=name or fn_name, no_split=no_split or (),
                         trace_mode=trace_mode, check=check, micro_batches=micro_batches, **extra)
    if profile is not None:
        from ..pipeline.micro import split_micro_batch
        from ..torch.profiling import measured_problem

        inputs, targets, _ = split_micro_batch(inputs, extra.pop("targets", ()), micro_batches)  # timed per micro-batch
        problem = measured_problem(problem, module, inputs, targets=targets, **profile, **extra)
    return problem


def _cmd_import(args: argparse.Namespace) -> int:
    if args.quiet:
        set_quiet(True)
    cm = cost_model_from_args(args)
    shapes = dict(_parse_shape(s) for s in args.input_shape or [])
    given = [f for f in ("profile_device", "profile_repeats", "profile_threads") if getattr(args, f) is not None]
    if not args.profile and given:
        raise OptpartError(f"--{given[0].replace('_', '-')} needs --profile")
    for flag in ("profile_repeats", "profile_threads"):
        if getattr(args, flag) is not None and getattr(args, flag) < 1:
            raise OptpartError(f"--{flag.replace('_', '-')} {getattr(args, flag)} must be at least 1")
    profile = {"device": args.profile_device or "cpu", "repeats": args.profile_repeats or 5,
               "threads": args.profile_threads} if args.profile else None
    problem = import_model(args.model, training=args.training, cost_model=cm, input_shapes=shapes or None,
                           name=args.name, no_split=args.no_split, trace_mode=args.trace_mode,
                           search_path=args.path or (), profile=profile, check=args.check,
                           micro_batches=check_micro_batches(args.micro_batches))
    memory = check_sizes(args.memory, "--memory") if args.memory is not None else None
    if memory is None and args.device_type is not None and args.devices is not None:
        memory = [resolve(args.device_type).memory]  # the device type's capacity
    speed = parse_list(args.speed, parse_speed, "--speed") if args.speed is not None else None
    if args.devices is not None or memory is not None or speed is not None:
        if args.devices is not None and args.devices < 1:
            raise OptpartError(f"--devices {args.devices} must be at least 1")
        k = args.devices
        for flag, values in (("--memory", memory), ("--speed", speed)):
            if values is None or len(values) == 1:
                continue
            if k is not None and len(values) != k:
                raise OptpartError(f"{flag} gives {len(values)} values for {k} devices")
            k = len(values)
        if k is None:
            raise OptpartError("give the number of devices with --devices K (or one --memory value per device)")
        one = lambda values, default: default if values is None else (values * k if len(values) == 1 else values)
        problem = problem.with_devices(k, memory=one(memory, float("inf")), speed=one(speed, 1.0),
                                       links=problem.links, constraints=problem.constraints)
    save(problem, args.out)
    meta = problem.meta
    if not args.quiet:
        mode = f", traced with {meta['trace_mode']} tensors" if "trace_mode" in meta else ""
        proof = meta.get("trace_check")
        if proof is not None:
            over = (f"the loss and {proof.get('compared', 1) - 1} gradient(s)" if meta.get("training", True)
                    else f"{proof.get('compared', 0)} output(s)")
            mode += (f", trace proof skipped ({proof['skipped']})" if "skipped" in proof else
                     f", trace proof: worst relative error {proof['worst_rel_err']:.2g} "
                     f"(tolerance {proof['tolerance']:g}) over {over}")
        print(f"{problem.name}: {problem.n_nodes} nodes, {problem.n_edges} edges, "
              f"{format_flops(meta.get('total_flops', 0))}, parameters {format_bytes(meta.get('parameter_bytes', 0))}, "
              f"memory {format_bytes(float(problem.memory.sum()))}, work {format_time(float(problem.time.sum()))}"
              f"{mode} -> {args.out}")
        sizes = [format_bytes(float(m)) for m in problem.device_memory]
        devices = (f"; {len(sizes)} x {sizes[0]}" if len(set(sizes)) == 1 else f"; devices {', '.join(sizes)}"
                   if sizes else "")
        print(f"  costs: {costs_label(problem).removeprefix('costs ')}; links {links_label(problem.links)}{devices}")
        width = meta.get("parameter_bytes", 0) / max(1, meta.get("parameters", 0))
        if args.dtype in ("bf16", "fp16") and width >= 4:
            print(f"  note: the model's parameters are {8 * width:.0f}-bit: compute is priced at the {args.dtype} "
                  "rate, memory and bytes at the traced dtypes (cast the model in the factory, e.g. "
                  "model.to(torch.bfloat16), to count them in 16 bits)", file=sys.stderr)
        if "pipeline" in meta:
            pl = meta["pipeline"]
            print(f"  one micro-batch of {pl['micro_batch_size']} samples traced ({pl['micro_batches']} make the "
                  f"batch of {pl['batch_size']}); solves of the file default to --micro-batches {pl['micro_batches']}")
        if "data_dependent" in meta:
            from ..formats.torch.datadep import describe_routing

            print(f"  {describe_routing(meta['data_dependent'])}")
        for note in meta.get("trace_notes", []):
            print(f"  note: {note}", file=sys.stderr)
        if "aliasing_check" in meta:
            c = meta["aliasing_check"]
            print(f"aliasing check: ok ({c['written_storages']} written storage(s), {c['ordered_pairs']} "
                  f"write/access pair(s), each ordered by the problem's edges)")
    return 0


def _arguments(p: argparse.ArgumentParser) -> None:
    """The arguments of ``optpart import``."""
    p.add_argument("model", help="an .onnx file, or 'package.module:function' / 'path/to/file.py:function' "
                                 "returning (torch module, example inputs); this runs that code")
    p.add_argument("--path", action="append", metavar="DIR",
                   help="directory to search for 'module' (appended after installed packages; repeatable; "
                        "default: none, installed packages only)")
    p.add_argument("-o", "--out", required=True, metavar="FILE", help="problem file to write (.json or .json.gz)")
    p.add_argument("--training", action=argparse.BooleanOptionalAction, default=None,
                   help="one training step (forward, backward, optimizer) or the forward pass only "
                        "(default: training for PyTorch, inference for ONNX)")
    p.add_argument("--input-shape", action="append", metavar="NAME=DIMS",
                   help="override an ONNX input's shape, e.g. data_0=32x3x224x224 (repeatable; default: the "
                        "file's shapes)")
    p.add_argument("--name", help="problem name (default: the file or function name)")
    p.add_argument("--no-split", metavar="CLASS[,CLASS]",
                   help="keep every instance of these module classes on one device, e.g. GPT2Block "
                        "(default: none)")
    p.add_argument("--trace-mode", choices=("auto", "fake", "real"), default="auto",
                   help="PyTorch tracing: fake tensors, real CPU tensors, or fake with a real fallback "
                        "for data-dependent models (default auto)")
    p.add_argument("--devices", "-k", type=int, metavar="K",
                   help="write K devices into the file (default: none, a graph without devices)")
    p.add_argument("--memory", "-m", metavar="SIZE[,SIZE...]",
                   help="device capacity, one value or one per device, e.g. 16GiB or 80GiB,80GiB,40GiB "
                        "(default: unlimited)")
    p.add_argument("--speed", metavar="S[,S...]",
                   help="relative device speed, one value or one per device (default 1)")
    p.add_argument("--check", action=argparse.BooleanOptionalAction, default=None,
                   help="PyTorch models: replay the traced step and compare its loss and gradients with eager "
                        "autograd (fake traces on real copies of the parameters), and prove that no two operators "
                        "touching one storage, at least one writing, are unordered; exit 2 with one line "
                        "otherwise. --no-check proves nothing (default: real-tensor traces are proved)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress display and no summary line")
    add_micro_batch_argument(p, "trace and price ONE micro-batch, the batch dimension split in M equal "
                                "parts; the file records M as its solves' default")
    add_cost_model_arguments(p)
    g = p.add_argument_group("measured costs (PyTorch models; docs/apply.md)")
    g.add_argument("--profile", action="store_true",
                   help="time every operator on real tensors of the traced shapes (warm-up, then the median) "
                        "instead of the cost model's estimate")
    g.add_argument("--profile-device", metavar="DEV", help="torch device to time on: cpu, cuda, cuda:1 (default cpu)")
    g.add_argument("--profile-repeats", type=int, metavar="N", help="timed runs; the median is kept (default 5)")
    g.add_argument("--profile-threads", type=int, metavar="N",
                   help="CPU threads for torch while timing (default: torch's; 1 is steadier on a shared machine)")


#: ``optpart import`` (registered by :func:`optpart.cli.build_parser`)
COMMANDS = (Command("import", "turn an ONNX model or a PyTorch module into a problem file", _arguments, _cmd_import,
                    description="Import an ONNX file, or a PyTorch model made by a factory function. "
                                "For 'module:function' optpart IMPORTS AND RUNS YOUR CODE: the module's top level "
                                "and function() run in this process. The working directory is not searched "
                                "unless you pass --path . (or give the module as a path to a .py file)."),)
