"""FLOPs of one ONNX operator (a multiply-add counts 2), from its shapes and attributes.

:data:`FLOP_RULES` covers the common CNN and transformer operators; an operator not listed
counts 0 FLOPs and is priced by its memory traffic (``docs/costmodel.md``). Used by
:func:`optpart.formats.onnx_import.from_onnx`.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

__all__ = ["FLOP_RULES", "VIEW_OPS", "MATMUL_LIKE", "ONNX_DTYPES", "FLOAT_TYPES", "numel"]

#: Operators that alias or pass their input through without a kernel (in inference).
VIEW_OPS = frozenset({"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Dropout"})

#: Weight-gradient operators: their backward costs twice the forward.
MATMUL_LIKE = frozenset({"Conv", "ConvTranspose", "Gemm", "MatMul"})

#: ONNX element types (``TensorProto.DataType``) by name.
ONNX_DTYPES = {1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64",
               9: "bool", 10: "float16", 11: "float64", 12: "uint32", 13: "uint64", 16: "bfloat16"}
#: The floating-point ones: a constant of such a type is a parameter.
FLOAT_TYPES = frozenset({1, 10, 11, 16})


def numel(shape: Sequence[int] | None) -> int:
    """Elements of a tensor of ``shape`` (0 when unknown, 1 for a scalar).

    Parameters
    ----------
    shape : sequence of int or None
        The dimensions.

    Returns
    -------
    int
    """
    return 0 if shape is None else int(np.prod(shape, dtype=np.int64)) if len(shape) else 1


def _conv(ins, outs, attrs) -> int:
    w = ins[1]
    if w is None or outs[0] is None:
        return 0
    # 2 * output elements * (input channels per group) * kernel size; w is [Cout, Cin/g, k...].
    return 2 * numel(outs[0]) * numel(w[1:])


def _gemm(ins, outs, attrs) -> int:
    a = ins[0]
    if a is None or outs[0] is None:
        return 0
    k = a[0] if attrs.get("transA", 0) else a[-1]
    extra = numel(outs[0]) if len(ins) > 2 and ins[2] is not None else 0
    return 2 * numel(outs[0]) * int(k) + extra


def _matmul(ins, outs, attrs) -> int:
    a = ins[0]
    if a is None or outs[0] is None:
        return 0
    return 2 * numel(outs[0]) * int(a[-1])


def _per_output(factor: int) -> Callable:
    return lambda ins, outs, attrs: factor * numel(outs[0])


def _elementwise(ins, outs, attrs) -> int:
    return max(len(ins) - 1, 1) * numel(outs[0])


def _pool(ins, outs, attrs) -> int:
    return numel(outs[0]) * numel(attrs.get("kernel_shape", [1]))


def _global_pool(ins, outs, attrs) -> int:
    return numel(ins[0])


def _lrn(ins, outs, attrs) -> int:
    return (2 * int(attrs.get("size", 1)) + 3) * numel(outs[0])


def _zero(ins, outs, attrs) -> int:
    return 0


#: FLOPs of one operator from its input shapes, output shapes and attributes.
FLOP_RULES: dict[str, Callable] = {
    "Conv": _conv, "ConvTranspose": lambda i, o, a: 2 * numel(i[0]) * numel(i[1][1:]) if i[1] else 0,
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
