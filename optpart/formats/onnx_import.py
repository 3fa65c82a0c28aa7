"""Import an ONNX model as a placement problem: one node per ONNX operator.

The model's shapes come from ``onnx.shape_inference.infer_shapes`` (with data
propagation, so shapes built by ``ConstantOfShape`` resolve). Constant tensors
(initializers, and the outputs of operators whose inputs are all constant, such as
``ConstantOfShape`` weights in the ONNX test zoo's "light" models or an ``Unsqueeze``
of a batch-norm scale) are folded away: they are **parameters**, not nodes. A
floating-point parameter is charged once, to the first operator that reads it, and
every operator that reads it is colocated with that one.

FLOPs per operator (a multiply-add counts 2) are given by :data:`FLOP_RULES`, for
the common CNN and transformer operators; an operator not listed counts 0 FLOPs and
is priced by its memory traffic. The cost model turns FLOPs and bytes into a run
time (``docs/costmodel.md``).

With ``training=True`` the importer synthesises the training step that an ONNX
inference graph does not contain:

* for every operator ``v`` a backward node ``grad.<v>`` with twice ``v``'s FLOPs for
  Conv, Gemm and MatMul (gradients for the input and for the weight; Goyal et al.,
  the "3x forward" rule) and once ``v``'s FLOPs otherwise;
* edges mirrored: ``grad.<w> -> grad.<v>`` for every forward edge ``v -> w``, plus
  ``u -> grad.<v>`` for every tensor ``u`` that ``v`` reads (the saved activations);
* one ``update.<param>`` node per trainable parameter (batch-norm running statistics
  are not trained), after the backward node of its owner, holding the weight, its
  gradient and the optimizer state;
* a forward node holds its output for the backward pass (views hold nothing).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..errors import FormatError
from ..problem import Constraints, Device, Links, Problem
from .costmodel import CostModel

__all__ = ["from_onnx", "FLOP_RULES", "VIEW_OPS"]

#: Operators that alias or pass their input through without a kernel (in inference).
VIEW_OPS = frozenset({"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Dropout"})

#: Weight-gradient operators: their backward costs twice the forward.
_MATMUL_LIKE = frozenset({"Conv", "ConvTranspose", "Gemm", "MatMul"})

_ONNX_DTYPES = {1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64",
                9: "bool", 10: "float16", 11: "float64", 12: "uint32", 13: "uint64", 16: "bfloat16"}
_FLOAT = frozenset({1, 10, 11, 16})


def _numel(shape: Sequence[int] | None) -> int:
    return 0 if shape is None else int(np.prod(shape, dtype=np.int64)) if len(shape) else 1


def _conv(ins, outs, attrs) -> int:
    w = ins[1]
    if w is None or outs[0] is None:
        return 0
    # 2 * output elements * (input channels per group) * kernel size; w is [Cout, Cin/g, k...].
    return 2 * _numel(outs[0]) * _numel(w[1:])


def _gemm(ins, outs, attrs) -> int:
    a = ins[0]
    if a is None or outs[0] is None:
        return 0
    k = a[0] if attrs.get("transA", 0) else a[-1]
    extra = _numel(outs[0]) if len(ins) > 2 and ins[2] is not None else 0
    return 2 * _numel(outs[0]) * int(k) + extra


def _matmul(ins, outs, attrs) -> int:
    a = ins[0]
    if a is None or outs[0] is None:
        return 0
    return 2 * _numel(outs[0]) * int(a[-1])


def _per_output(factor: int) -> Callable:
    return lambda ins, outs, attrs: factor * _numel(outs[0])


def _elementwise(ins, outs, attrs) -> int:
    return max(len(ins) - 1, 1) * _numel(outs[0])


def _pool(ins, outs, attrs) -> int:
    return _numel(outs[0]) * _numel(attrs.get("kernel_shape", [1]))


def _global_pool(ins, outs, attrs) -> int:
    return _numel(ins[0])


def _lrn(ins, outs, attrs) -> int:
    return (2 * int(attrs.get("size", 1)) + 3) * _numel(outs[0])


def _zero(ins, outs, attrs) -> int:
    return 0


#: FLOPs of one operator from its input shapes, output shapes and attributes.
FLOP_RULES: dict[str, Callable] = {
    "Conv": _conv, "ConvTranspose": lambda i, o, a: 2 * _numel(i[0]) * _numel(i[1][1:]) if i[1] else 0,
    "Gemm": _gemm, "MatMul": _matmul,
    "BatchNormalization": _per_output(2), "InstanceNormalization": _per_output(5),
    "LayerNormalization": _per_output(5),
    "Relu": _per_output(1), "LeakyRelu": _per_output(2), "Sigmoid": _per_output(4), "Tanh": _per_output(4),
    "Gelu": _per_output(8), "Erf": _per_output(4), "Exp": _per_output(1), "Sqrt": _per_output(1),
    "Pow": _per_output(1), "Clip": _per_output(1), "HardSigmoid": _per_output(3),
    "Add": _elementwise, "Sub": _elementwise, "Mul": _elementwise, "Div": _elementwise, "Sum": _elementwise,
    "Max": _elementwise, "Min": _elementwise,
    "MaxPool": _pool, "AveragePool": _pool, "GlobalAveragePool": _global_pool, "GlobalMaxPool": _global_pool,
    "ReduceMean": _global_pool, "ReduceSum": _global_pool,
    "Softmax": _per_output(5), "LogSoftmax": _per_output(5), "LRN": _lrn,
    "Concat": _zero, "Dropout": _zero, "Flatten": _zero, "Reshape": _zero, "Transpose": _zero,
    "Squeeze": _zero, "Unsqueeze": _zero, "Identity": _zero, "Shape": _zero, "Gather": _zero,
    "Slice": _zero, "Split": _zero, "Pad": _zero, "Cast": _zero,
}


def _attrs(node) -> dict[str, Any]:
    import onnx

    out = {}
    for a in node.attribute:
        try:
            out[a.name] = onnx.helper.get_attribute_value(a)
        except Exception:  # pragma: no cover - exotic attribute kinds
            continue
    return out


def _load(model) -> Any:
    import onnx

    if isinstance(model, onnx.ModelProto):
        return model
    path = Path(model)
    if not path.exists():
        raise FormatError(f"no such ONNX file: {path}")
    try:
        return onnx.load(str(path))
    except Exception as exc:
        raise FormatError(f"{path}: not a readable ONNX model ({type(exc).__name__}: {exc})") from None


def _scope(node_name: str) -> dict:
    """``{"module": path}`` from a scoped node name as ``torch.onnx.export`` writes them
    (``/transformer/h.0/attn/MatMul`` -> ``transformer.h.0.attn``); nothing for other names."""
    if not node_name.startswith("/") or node_name.count("/") < 2:
        return {}
    return {"module": ".".join(part for part in node_name.split("/")[1:-1] if part)}


def from_onnx(
    model,
    *,
    training: bool = False,
    cost_model: CostModel | None = None,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    devices: int | Sequence[Device] | None = None,
    memory: float = math.inf,
    name: str | None = None,
) -> Problem:
    """Read an ONNX model (a path or an ``onnx.ModelProto``) into a :class:`Problem`.

    Parameters
    ----------
    model : str, Path or onnx.ModelProto
        The model.
    training : bool
        Add the synthesised backward pass and optimizer updates (see the module notes).
    cost_model : CostModel, optional
        Prices operators and tensors; stored in ``problem.meta["cost_model"]``.
    input_shapes : mapping, optional
        New shapes for graph inputs, e.g. ``{"data_0": [32, 3, 224, 224]}`` to change the batch.
    devices, memory : optional
        Devices to attach (a count with one capacity, or a list); default none.
    name : str, optional
        Problem name; default the file stem (or the graph name) plus ``-training``.

    Returns
    -------
    Problem
        One node per operator (and per backward/optimizer step when training).

    Raises
    ------
    FormatError
        onnx missing, an unreadable file, or a tensor whose shape cannot be inferred
        (named, with its producer).
    """
    try:
        import onnx
        from onnx import numpy_helper, shape_inference
    except ImportError:  # pragma: no cover - exercised only without onnx
        raise FormatError("importing an ONNX model needs onnx: pip install 'optpart[onnx]'") from None
    cm = cost_model or CostModel()
    label = name
    if label is None:
        label = Path(model).name.removesuffix(".onnx") if not isinstance(model, onnx.ModelProto) else (
            model.graph.name or "onnx")
        label += "-training" if training else ""
    proto = onnx.ModelProto()
    proto.CopyFrom(_load(model))
    g = proto.graph
    init_names = {t.name for t in g.initializer}
    if input_shapes:
        known = {i.name: i for i in g.input}
        for iname, shape in input_shapes.items():
            if iname not in known:
                raise FormatError(f"input_shapes names unknown graph input '{iname}'; inputs: "
                                  f"{', '.join(i.name for i in g.input if i.name not in init_names)}")
            dims = known[iname].type.tensor_type.shape.dim
            if len(dims) != len(shape):
                raise FormatError(f"input '{iname}' has rank {len(dims)}, input_shapes gives {list(shape)}")
            for d, s in zip(dims, shape):
                d.ClearField("dim_param")
                d.dim_value = int(s)
        g.ClearField("value_info")
        for o in g.output:  # declared output shapes hold the old batch: let inference redo them
            o.type.tensor_type.ClearField("shape")
    try:
        proto = shape_inference.infer_shapes(proto, data_prop=True)
    except Exception as exc:
        raise FormatError(f"ONNX shape inference failed: {type(exc).__name__}: {exc}") from None
    g = proto.graph

    shape: dict[str, list[int] | None] = {}
    dtype: dict[str, int] = {}

    def record(vi) -> None:
        tt = vi.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else -1 for d in tt.shape.dim]
        shape[vi.name] = None if (not tt.HasField("shape") or any(x < 0 for x in dims)) else dims
        dtype[vi.name] = tt.elem_type

    for vi in list(g.output) + list(g.input) + list(g.value_info):
        record(vi)
    const_value: dict[str, np.ndarray | None] = {}
    for t in g.initializer:
        shape[t.name] = list(t.dims)
        dtype[t.name] = t.data_type
        const_value[t.name] = numpy_helper.to_array(t) if t.data_type not in _FLOAT else None

    # Constant folding by origin: a constant tensor remembers the parameters it comes from.
    origin: dict[str, tuple[str, ...]] = {}
    params: dict[str, tuple[int, str]] = {}  # parameter name -> (numel, dtype)
    buffers: set[str] = set()
    for t in g.initializer:
        if t.data_type in _FLOAT:
            origin[t.name] = (t.name,)
            params[t.name] = (_numel(list(t.dims)), _ONNX_DTYPES[t.data_type])
        else:
            origin[t.name] = ()
    compute: list[Any] = []
    for nd in g.node:
        ins = [x for x in nd.input if x]
        if all(x in origin for x in ins):
            if nd.op_type in ("ConstantOfShape", "Constant") or not ins or nd.op_type in (
                    "Unsqueeze", "Squeeze", "Reshape", "Cast", "Identity", "Transpose", "Flatten", "Mul", "Add"):
                made = _fold(nd, shape, dtype, const_value)
                for o in nd.output:
                    if nd.op_type in ("ConstantOfShape", "Constant") and dtype.get(o) in _FLOAT:
                        if shape.get(o) is None:
                            raise FormatError(f"cannot infer the shape of constant '{o}' made by "
                                              f"{nd.op_type} node '{nd.name or o}'")
                        origin[o] = (o,)
                        params[o] = (_numel(shape[o]), _ONNX_DTYPES[dtype[o]])
                    else:
                        origin[o] = tuple(sorted({p for x in ins for p in origin[x]}))
                    if made is not None:
                        const_value[o] = made
                continue
        compute.append(nd)
        if nd.op_type == "BatchNormalization":
            for x in nd.input[3:5]:
                buffers.update(origin.get(x, ()))

    # Nodes: graph inputs that are not constants, then compute operators in file order.
    ids: list[str] = []
    used: set[str] = set()

    def fresh(base: str) -> str:
        nid, k = base, 1
        while nid in used:
            k += 1
            nid = f"{base}.{k}"
        used.add(nid)
        return nid

    def tbytes(tname: str) -> float:
        s = shape.get(tname)
        if s is None:
            return 0.0
        return float(_numel(s) * cm.element_bytes(_ONNX_DTYPES.get(dtype.get(tname, 1), "float32")))

    producer: dict[str, int] = {}
    time, mem, pbytes, obytes, meta = [], [], [], [], []
    for vi in g.input:
        if vi.name in origin:
            continue
        producer[vi.name] = len(ids)
        ids.append(fresh(f"input.{vi.name}"))
        b = tbytes(vi.name)
        time.append(0.0)
        mem.append(b)
        pbytes.append(b)
        obytes.append(0.0)
        meta.append({"op": "input", "flops": 0, "phase": "forward"})
    n_inputs = len(ids)
    consumed_names = {x for nd in compute for x in nd.input if x} | {o.name for o in g.output}
    fwd_index: list[int] = []
    reads: dict[str, list[int]] = {}  # parameter -> reading nodes
    for k, nd in enumerate(compute):
        ins = [x for x in nd.input if x]
        for x in ins:
            if x not in origin and x not in producer:
                raise FormatError(f"node '{nd.name or nd.op_type}' reads tensor '{x}' that nothing produces")
        in_shapes = [shape.get(x) for x in nd.input]
        out_shapes = [shape.get(o) for o in nd.output]
        for o, s in zip(nd.output, out_shapes):
            if s is None and o in consumed_names:
                raise FormatError(f"cannot infer the shape of tensor '{o}' made by {nd.op_type} node "
                                  f"'{nd.name or o}'")
        rule = FLOP_RULES.get(nd.op_type)
        flops = int(rule(in_shapes, out_shapes, _attrs(nd))) if rule is not None else 0
        view = nd.op_type in VIEW_OPS
        in_b = sum(tbytes(x) for x in ins)
        out_b = sum(tbytes(o) for o in nd.output if o)
        i = len(ids)
        ids.append(fresh(nd.name or f"{nd.op_type}_{k}"))
        time.append(cm.op_time(flops, in_b + out_b, kernel=not view))
        mem.append(0.0)
        pbytes.append(0.0)
        obytes.append(0.0 if view else out_b)
        meta.append({"op": nd.op_type, "flops": flops, "phase": "forward", **_scope(nd.name)})
        fwd_index.append(i)
        for o in nd.output:
            if o:
                producer[o] = i
        for x in ins:
            for p in origin.get(x, ()):
                lst = reads.setdefault(p, [])
                if not lst or lst[-1] != i:
                    lst.append(i)

    edges: dict[tuple[int, int], float] = {}
    for k, nd in enumerate(compute):
        c = fwd_index[k]
        for x in dict.fromkeys(x for x in nd.input if x):
            if x in producer:
                key = (producer[x], c)
                edges[key] = edges.get(key, 0.0) + tbytes(x)

    colocate: list[tuple[str, ...]] = []
    n_fwd = len(ids)
    grad_of: dict[int, int] = {}
    if training:
        # Saved activations: every forward output that an operator reads (views alias theirs).
        consumed = {u for (u, _) in edges}
        for u in consumed:
            if u >= n_inputs:
                mem[u] += obytes[u]
        for k in range(n_inputs, n_fwd):
            grad_of[k] = len(ids)
            op = meta[k]["op"]
            f = meta[k]["flops"] * (2 if op in _MATMUL_LIKE else 1)
            ids.append(fresh(f"grad.{ids[k]}"))
            time.append(0.0)
            mem.append(0.0)
            pbytes.append(0.0)
            obytes.append(0.0)
            meta.append({"op": f"{op}Grad", "flops": f, "phase": "backward",
                         **({"module": meta[k]["module"]} if "module" in meta[k] else {})})
        fwd_edges = list(edges.items())
        in_bytes = [0.0] * len(ids)
        out_bytes = [0.0] * len(ids)
        for (u, v), b in fwd_edges:
            # the backward of v reads the tensors v read (saved activations) ...
            edges[(u, grad_of[v])] = edges.get((u, grad_of[v]), 0.0) + b
            in_bytes[grad_of[v]] += b
            # ... and sends the gradient of each of them back to its producer's backward.
            if u in grad_of:
                edges[(grad_of[v], grad_of[u])] = edges.get((grad_of[v], grad_of[u]), 0.0) + b
                out_bytes[grad_of[v]] += b
                in_bytes[grad_of[u]] += b
        for k, gk in grad_of.items():
            view = meta[k]["op"] in VIEW_OPS
            time[gk] = cm.op_time(meta[gk]["flops"], in_bytes[gk] + out_bytes[gk], kernel=not view)
            obytes[gk] = 0.0 if view else out_bytes[gk]

    for p in sorted(reads):
        numel, dt = params[p]
        holders = reads[p]
        owner = holders[0]
        if training and p not in buffers:
            uid = len(ids)
            ids.append(fresh(f"update.{p}"))
            state = cm.training_state_bytes(numel, dt)
            time.append(cm.op_time(0, cm.update_bytes_moved(numel, dt)))
            mem.append(state)
            pbytes.append(state)
            obytes.append(0.0)
            meta.append({"op": "optimizer.update", "flops": 0, "phase": "optimizer", "param": p, "numel": numel,
                         **({"module": meta[owner]["module"]} if "module" in meta[owner] else {})})
            gb = float(numel * cm.element_bytes(dt))
            for h in holders:
                key = (grad_of[h], uid)
                edges[key] = edges.get(key, 0.0) + gb
            group = [uid] + holders + [grad_of[h] for h in holders]
        else:
            b = float(numel * cm.element_bytes(dt))
            mem[owner] += b
            pbytes[owner] += b
            group = holders + ([grad_of[h] for h in holders] if training else [])
        if len(group) > 1:
            colocate.append(tuple(ids[i] for i in group))

    keys = sorted(edges)
    total_flops = int(sum(m["flops"] for m in meta))
    pb = float(sum(n * cm.element_bytes(dt) for p, (n, dt) in params.items() if p in reads))
    problem_meta = {
        "source": "onnx", "training": bool(training), "cost_model": cm.to_dict(),
        "total_flops": total_flops, "parameter_bytes": pb,
        "parameters": int(sum(n for p, (n, _) in params.items() if p in reads and p not in buffers)),
        "opset": int(proto.opset_import[0].version) if proto.opset_import else 0,
    }
    dev = None
    if devices is not None:
        dev = ([Device(f"dev{i}", float(memory)) for i in range(devices)] if isinstance(devices, int)
               else list(devices))
    return Problem.from_arrays(
        ids, np.array(time), np.array(mem),
        np.array([k[0] for k in keys], dtype=np.int64), np.array([k[1] for k in keys], dtype=np.int64),
        np.array([edges[k] for k in keys], dtype=np.float64),
        devices=dev, links=Links(cm.link_latency, cm.link_bandwidth),
        constraints=Constraints(colocate=tuple(colocate)),
        param_bytes=np.array(pbytes), output_bytes=np.array(obytes), temp_bytes=None,
        node_meta=meta, name=label, meta=problem_meta,
    )


def _fold(nd, shape, dtype, const_value) -> np.ndarray | None:
    """Shape (and, for integer tensors, value) of a constant operator's output; None if unknown."""
    from onnx import numpy_helper

    out = nd.output[0]
    if nd.op_type == "ConstantOfShape":
        src = const_value.get(nd.input[0])
        if src is not None and shape.get(out) is None:
            shape[out] = [int(x) for x in np.asarray(src).reshape(-1)]
        if out not in dtype or dtype[out] == 0:
            dtype[out] = 1
            for a in nd.attribute:
                if a.name == "value":
                    dtype[out] = a.t.data_type
        return None
    if nd.op_type == "Constant":
        for a in nd.attribute:
            if a.name == "value":
                arr = numpy_helper.to_array(a.t)
                shape[out] = list(arr.shape)
                dtype[out] = a.t.data_type
                return arr if a.t.data_type not in _FLOAT else None
    return None
