"""Import an ONNX model as a placement problem: one node per ONNX operator.

The model's shapes come from ``onnx.shape_inference.infer_shapes`` (with data
propagation, so shapes built by ``ConstantOfShape`` resolve). Constant tensors
(initializers, and the outputs of operators whose inputs are all constant, such as
``ConstantOfShape`` weights in the ONNX test zoo's "light" models or an ``Unsqueeze``
of a batch-norm scale) are folded away: they are **parameters**, not nodes. A
floating-point parameter is charged once, to the first operator that reads it, and
every operator that reads it is colocated with that one.

FLOPs per operator (a multiply-add counts 2) are given by :data:`FLOP_RULES`
(:mod:`optpart.formats.onnx_flops`), for the common CNN and transformer operators; an
operator not listed counts 0 FLOPs and is priced by its memory traffic. The cost model turns FLOPs and bytes into a run
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
from typing import Any, Mapping, Sequence

import numpy as np

from ..errors import FormatError
from ..model.devices import Device
from ..model.problem import Problem
from .costmodel import CostModel
from .node_columns import NodeColumns
from .onnx_flops import FLOAT_TYPES, FLOP_RULES, MATMUL_LIKE, ONNX_DTYPES, VIEW_OPS, numel

__all__ = ["from_onnx", "FLOP_RULES", "VIEW_OPS"]  # the FLOP rules live in .onnx_flops

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
        from onnx import shape_inference  # noqa: F401  (needed below: fail here, in one line)
    except ImportError:  # pragma: no cover - exercised only without onnx
        raise FormatError("importing an ONNX model needs onnx: pip install 'optpart[onnx]'") from None
    cm = cost_model or CostModel()
    label = name
    if label is None:
        label = Path(model).name.removesuffix(".onnx") if not isinstance(model, onnx.ModelProto) else (
            model.graph.name or "onnx")
        label += "-training" if training else ""
    proto = _shaped_model(model, input_shapes)
    tensors = _Tensors(proto.graph)
    compute, buffers = _fold_constants(proto.graph, tensors)
    nodes = _Nodes(cm, tensors)
    n_inputs = nodes.add_inputs(proto.graph)
    fwd_index, reads = nodes.add_forward(compute, proto.graph)
    edges = _forward_edges(compute, fwd_index, nodes)
    grad_of = nodes.add_backward(edges, n_inputs) if training else {}
    colocate = nodes.add_parameters(reads, buffers, grad_of, edges, training)
    params = tensors.params
    meta = {
        "source": "onnx", "training": bool(training), "cost_model": cm.to_dict(),
        "total_flops": int(sum(m["flops"] for m in nodes.meta)),
        "parameter_bytes": float(sum(n * cm.element_bytes(dt) for p, (n, dt) in params.items() if p in reads)),
        "parameters": int(sum(n for p, (n, _) in params.items() if p in reads and p not in buffers)),
        "opset": int(proto.opset_import[0].version) if proto.opset_import else 0,
    }
    dev = None
    if devices is not None:
        dev = ([Device(f"dev{i}", float(memory)) for i in range(devices)] if isinstance(devices, int)
               else list(devices))
    return nodes.problem(edges, colocate, cm, dev, label, meta)


def _shaped_model(model, input_shapes: Mapping[str, Sequence[int]] | None):
    """A copy of the model with the new input shapes and every shape inferred (data propagated)."""
    import onnx
    from onnx import shape_inference

    proto = onnx.ModelProto()
    proto.CopyFrom(_load(model))
    g = proto.graph
    if input_shapes:
        init_names = {t.name for t in g.initializer}
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
        return shape_inference.infer_shapes(proto, data_prop=True)
    except Exception as exc:
        raise FormatError(f"ONNX shape inference failed: {type(exc).__name__}: {exc}") from None


class _Tensors:
    """What is known of every tensor: shape (None: unknown), element type, the value of an
    integer constant, and the parameters a constant comes from (``origin``; a floating-point
    initializer is its own parameter, ``params`` gives its element count and type)."""

    def __init__(self, g) -> None:
        from onnx import numpy_helper

        self.shape: dict[str, list[int] | None] = {}
        self.dtype: dict[str, int] = {}
        for vi in list(g.output) + list(g.input) + list(g.value_info):
            tt = vi.type.tensor_type
            dims = [d.dim_value if d.HasField("dim_value") else -1 for d in tt.shape.dim]
            self.shape[vi.name] = None if (not tt.HasField("shape") or any(x < 0 for x in dims)) else dims
            self.dtype[vi.name] = tt.elem_type
        self.const_value: dict[str, np.ndarray | None] = {}
        for t in g.initializer:
            self.shape[t.name] = list(t.dims)
            self.dtype[t.name] = t.data_type
            self.const_value[t.name] = numpy_helper.to_array(t) if t.data_type not in FLOAT_TYPES else None
        self.origin: dict[str, tuple[str, ...]] = {}
        self.params: dict[str, tuple[int, str]] = {}  # parameter name -> (numel, dtype)
        for t in g.initializer:
            if t.data_type in FLOAT_TYPES:
                self.origin[t.name] = (t.name,)
                self.params[t.name] = (numel(list(t.dims)), ONNX_DTYPES[t.data_type])
            else:
                self.origin[t.name] = ()


def _fold_constants(g, t: _Tensors) -> tuple[list[Any], set[str]]:
    """Constant folding by origin: an operator whose inputs are all constant makes a constant
    that remembers the parameters it comes from. Returns the operators left to compute (file
    order) and the parameters that are batch-norm running statistics (not trained)."""
    shape, dtype, origin = t.shape, t.dtype, t.origin
    compute: list[Any] = []
    buffers: set[str] = set()
    for nd in g.node:
        ins = [x for x in nd.input if x]
        if all(x in origin for x in ins):
            if nd.op_type in ("ConstantOfShape", "Constant") or not ins or nd.op_type in (
                    "Unsqueeze", "Squeeze", "Reshape", "Cast", "Identity", "Transpose", "Flatten", "Mul", "Add"):
                made = _fold(nd, shape, dtype, t.const_value)
                for o in nd.output:
                    if nd.op_type in ("ConstantOfShape", "Constant") and dtype.get(o) in FLOAT_TYPES:
                        if shape.get(o) is None:
                            raise FormatError(f"cannot infer the shape of constant '{o}' made by "
                                              f"{nd.op_type} node '{nd.name or o}'")
                        origin[o] = (o,)
                        t.params[o] = (numel(shape[o]), ONNX_DTYPES[dtype[o]])
                    else:
                        origin[o] = tuple(sorted({p for x in ins for p in origin[x]}))
                    if made is not None:
                        t.const_value[o] = made
                continue
        compute.append(nd)
        if nd.op_type == "BatchNormalization":
            for x in nd.input[3:5]:
                buffers.update(origin.get(x, ()))
    return compute, buffers


def _forward_edges(compute: list[Any], fwd_index: list[int], nodes: "_Nodes") -> dict[tuple[int, int], float]:
    """Bytes per ``(producer, consumer)`` pair of the forward pass (a tensor read twice counts once)."""
    edges: dict[tuple[int, int], float] = {}
    for k, nd in enumerate(compute):
        c = fwd_index[k]
        for x in dict.fromkeys(x for x in nd.input if x):
            if x in nodes.producer:
                key = (nodes.producer[x], c)
                edges[key] = edges.get(key, 0.0) + nodes.tbytes(x)
    return edges


class _Nodes(NodeColumns):
    """The problem's node columns as they are built: inputs, forward operators, backward
    nodes, optimizer updates (see the module docstring), with unique ids."""

    def __init__(self, cm: CostModel, tensors: _Tensors) -> None:
        super().__init__()
        self.cm, self.t = cm, tensors
        self.used: set[str] = set()
        self.producer: dict[str, int] = {}  # tensor -> the node that makes it

    def add(self, nid: str, time: float, mem: float, pbytes: float, obytes: float, meta: dict) -> int:
        # the id is made unique: ``nid.2``, ``nid.3``, ... when taken
        base, k = nid, 1
        while nid in self.used:
            k += 1
            nid = f"{base}.{k}"
        self.used.add(nid)
        return super().add(nid, time, mem, pbytes, obytes, meta)

    def tbytes(self, tname: str) -> float:
        """Bytes of a tensor (0 when its shape is unknown)."""
        s = self.t.shape.get(tname)
        if s is None:
            return 0.0
        return float(numel(s) * self.cm.element_bytes(ONNX_DTYPES.get(self.t.dtype.get(tname, 1), "float32")))

    def add_inputs(self, g) -> int:
        """One node per graph input that is not a constant (it holds its tensor); their count."""
        for vi in g.input:
            if vi.name in self.t.origin:
                continue
            b = self.tbytes(vi.name)
            self.producer[vi.name] = self.add(f"input.{vi.name}", 0.0, b, b, 0.0,
                                              {"op": "input", "flops": 0, "phase": "forward"})
        return len(self.ids)

    def add_forward(self, compute: list[Any], g) -> tuple[list[int], dict[str, list[int]]]:
        """One node per operator to compute, priced by the cost model: its index per operator,
        and the nodes reading each parameter (in order)."""
        shape, origin, cm = self.t.shape, self.t.origin, self.cm
        consumed_names = {x for nd in compute for x in nd.input if x} | {o.name for o in g.output}
        fwd_index: list[int] = []
        reads: dict[str, list[int]] = {}  # parameter -> reading nodes
        for k, nd in enumerate(compute):
            ins = [x for x in nd.input if x]
            for x in ins:
                if x not in origin and x not in self.producer:
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
            in_b = sum(self.tbytes(x) for x in ins)
            out_b = sum(self.tbytes(o) for o in nd.output if o)
            moved = {} if view else {"bytes": int(in_b + out_b)}  # the roofline's inputs, kept for re-pricing
            i = self.add(nd.name or f"{nd.op_type}_{k}", cm.op_time(flops, in_b + out_b, kernel=not view), 0.0, 0.0,
                         0.0 if view else out_b, {"op": nd.op_type, "flops": flops, **moved, "phase": "forward",
                                                  **_scope(nd.name)})
            fwd_index.append(i)
            for o in nd.output:
                if o:
                    self.producer[o] = i
            for x in ins:
                for p in origin.get(x, ()):
                    lst = reads.setdefault(p, [])
                    if not lst or lst[-1] != i:
                        lst.append(i)
        return fwd_index, reads

    def add_backward(self, edges: dict[tuple[int, int], float], n_inputs: int) -> dict[int, int]:
        """The synthesised backward pass (module docstring): saved activations, one ``grad.``
        node per operator and the mirrored edges (added to ``edges``); forward node -> its
        backward node."""
        mem, obytes, meta, time, cm = self.mem, self.obytes, self.meta, self.time, self.cm
        n_fwd = len(self.ids)
        for u in {u for (u, _) in edges}:  # saved activations: every forward output an operator reads
            if u >= n_inputs:
                mem[u] += obytes[u]
        grad_of: dict[int, int] = {}
        for k in range(n_inputs, n_fwd):
            op = meta[k]["op"]
            f = meta[k]["flops"] * (2 if op in MATMUL_LIKE else 1)
            grad_of[k] = self.add(f"grad.{self.ids[k]}", 0.0, 0.0, 0.0, 0.0,
                                  {"op": f"{op}Grad", "flops": f, "phase": "backward",
                                   **({"module": meta[k]["module"]} if "module" in meta[k] else {})})
        in_bytes = [0.0] * len(self.ids)
        out_bytes = [0.0] * len(self.ids)
        for (u, v), b in list(edges.items()):
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
            if not view:
                meta[gk]["bytes"] = int(in_bytes[gk] + out_bytes[gk])
        return grad_of

    def add_parameters(self, reads: dict[str, list[int]], buffers: set[str], grad_of: dict[int, int],
                       edges: dict[tuple[int, int], float], training: bool) -> list[tuple[str, ...]]:
        """Charge each parameter to its first reader (training: an ``update.`` node holding the
        weight, gradient and optimizer state, fed by every reader's backward); the colocation
        groups of the readers of each parameter."""
        cm, meta = self.cm, self.meta
        colocate: list[tuple[str, ...]] = []
        for p in sorted(reads):
            numel_, dt = self.t.params[p]
            holders = reads[p]
            owner = holders[0]
            if training and p not in buffers:
                state = cm.training_state_bytes(numel_, dt)
                moved = cm.update_bytes_moved(numel_, dt)
                uid = self.add(f"update.{p}", cm.op_time(0, moved), state, state, 0.0,
                               {"op": "optimizer.update", "flops": 0, "bytes": int(moved), "phase": "optimizer",
                                "param": p,
                                "numel": numel_, **({"module": meta[owner]["module"]} if "module" in meta[owner]
                                                    else {})})
                gb = float(numel_ * cm.element_bytes(dt))
                for h in holders:
                    key = (grad_of[h], uid)
                    edges[key] = edges.get(key, 0.0) + gb
                group = [uid] + holders + [grad_of[h] for h in holders]
            else:
                b = float(numel_ * cm.element_bytes(dt))
                self.mem[owner] += b
                self.pbytes[owner] += b
                group = holders + ([grad_of[h] for h in holders] if training else [])
            if len(group) > 1:
                colocate.append(tuple(self.ids[i] for i in group))
        return colocate


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
                return arr if a.t.data_type not in FLOAT_TYPES else None
    return None
