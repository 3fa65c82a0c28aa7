"""The cost model that turns a traced operator into a run time and a memory footprint.

Every importer (PyTorch, ONNX) prices nodes and edges through one
:class:`CostModel`, so the numbers in an imported problem have one documented
origin (``docs/costmodel.md``). The model is a roofline (Williams, Waterman and
Patterson, "Roofline: an insightful visual performance model", CACM 2009) with a
floor for kernel launch overhead:

``time(v) = max(min_op_time, flops(v) / (peak_flops * efficiency), bytes_moved(v) / memory_bandwidth)``

for every node that launches a kernel; view-like operators (reshape, transpose,
slicing metadata changes) alias their input and cost 0 s. ``bytes_moved`` is the
bytes of the node's tensor inputs plus its outputs. An edge carries the bytes of
the tensor it stands for (``numel * bytes_per_element(dtype)``).

Training memory per parameter tensor of ``P`` bytes is ``P`` (the weight) plus
``P`` (its gradient) plus ``optimizer_bytes_per_param * numel`` (e.g. Adam's two
fp32 moments: 8 bytes per parameter), held by the node that owns the parameter.

The model's values are stored with every imported problem
(``problem.meta["cost_model"]``) so that a file says how its numbers were made.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass
from typing import Any, Mapping

from ..errors import ProblemError
from ..units import format_bandwidth, format_flops, parse_bandwidth, parse_time

__all__ = ["CostModel", "DEFAULT_DTYPE_BYTES", "parse_flops", "DEFAULT_COST_MODEL"]

#: Bytes per element by dtype name (torch and ONNX names share these spellings).
DEFAULT_DTYPE_BYTES: tuple[tuple[str, int], ...] = (
    ("bfloat16", 2), ("bool", 1), ("complex128", 16), ("complex64", 8), ("float16", 2),
    ("float32", 4), ("float64", 8), ("float8", 1), ("int16", 2), ("int32", 4), ("int64", 8),
    ("int8", 1), ("uint16", 2), ("uint32", 4), ("uint64", 8), ("uint8", 1),
)

_FLOP_PREFIX = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12, "p": 1e15}
_FLOPS = re.compile(r"^\s*((?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*([kKmMgGtTpP]?)(?:flop/?s|flops)?\s*$",
                    re.IGNORECASE)


def parse_flops(text: str | float | int) -> float:
    """Read a compute rate such as ``'312TFLOP/s'``, ``'15.7 TFLOPS'`` or ``1e12`` into FLOP/s.

    Parameters
    ----------
    text : str or float or int
        A number of FLOP/s, or a number with a prefix (k, M, G, T, P, E) and ``FLOP/s`` or ``FLOPS``.

    Returns
    -------
    float
        FLOP per second (finite, > 0).

    Examples
    --------
    >>> parse_flops("312TFLOP/s")
    312000000000000.0
    """
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        value = float(text)
    else:
        m = _FLOPS.match(str(text))
        if not m:
            raise ProblemError(f"cannot read a compute rate from {text!r}: expected e.g. '312TFLOP/s' or '1.5e13'")
        value = float(m.group(1)) * _FLOP_PREFIX[m.group(2).lower()]
    if not (0 < value < math.inf):
        raise ProblemError(f"compute rate {text!r} must be a positive finite number of FLOP/s")
    return value


@dataclass(frozen=True)
class CostModel:
    """Hardware figures used to price operators and tensors (all SI units).

    The defaults describe one 16 GiB V100-class accelerator running fp32 kernels:
    15.7 TFLOP/s peak, half of it reached by large kernels, 900 GB/s of memory
    bandwidth, 5 us per kernel launch, and links of 25 GB/s with 10 us latency;
    Adam's two fp32 moments add 8 bytes per parameter.

    Parameters
    ----------
    peak_flops : float
        Peak compute rate of a speed-1.0 device, FLOP/s.
    efficiency : float
        Fraction of the peak that compute-bound kernels reach, in (0, 1].
    min_op_time : float
        Floor on any kernel's run time (launch overhead), seconds.
    memory_bandwidth : float
        Device memory bandwidth for the memory-bound term, bytes/s (``inf`` drops the term).
    link_bandwidth, link_latency : float
        Uniform link between devices, bytes/s and seconds; stored as the problem's links.
    optimizer_bytes_per_param : float
        Optimizer state per parameter element, bytes (Adam fp32: 8; SGD with momentum: 4; SGD: 0).
    dtype_bytes : tuple of (str, int)
        Bytes per element by dtype name.
    hardware : str
        The profile these figures are (``"H100-SXM bf16"``, set by :func:`optpart.hardware.resolve`);
        empty for figures given by hand. Changing ``peak_flops`` or ``memory_bandwidth`` with
        :meth:`replace` empties it.
    """

    peak_flops: float = 15.7e12
    efficiency: float = 0.5
    min_op_time: float = 5e-6
    memory_bandwidth: float = 900e9
    link_bandwidth: float = 25e9
    link_latency: float = 10e-6
    optimizer_bytes_per_param: float = 8.0
    dtype_bytes: tuple[tuple[str, int], ...] = DEFAULT_DTYPE_BYTES
    hardware: str = ""

    def __post_init__(self) -> None:
        checks = {
            "peak_flops": 0 < self.peak_flops < math.inf,
            "efficiency": 0 < self.efficiency <= 1,
            "min_op_time": 0 <= self.min_op_time < math.inf,
            "memory_bandwidth": self.memory_bandwidth > 0,
            "link_bandwidth": self.link_bandwidth > 0,
            "link_latency": 0 <= self.link_latency < math.inf,
            "optimizer_bytes_per_param": 0 <= self.optimizer_bytes_per_param < math.inf,
        }
        for name, ok in checks.items():
            value = getattr(self, name)
            if not ok or (isinstance(value, float) and math.isnan(value)):
                raise ProblemError(f"cost model field '{name}' has value {value!r}, which is out of range")
        for dt, size in self.dtype_bytes:
            if not (isinstance(size, (int, float)) and size > 0):
                raise ProblemError(f"cost model dtype '{dt}' has {size!r} bytes per element; it must be > 0")

    # ------------------------------------------------------------------ pricing
    def element_bytes(self, dtype: str) -> int:
        """Bytes per element of a dtype name such as ``'float32'`` or ``'torch.float16'``.

        Parameters
        ----------
        dtype : str
            A dtype name (``"bfloat16"``, ``"torch.int64"``).

        Returns
        -------
        int
            Bytes per element.
        """
        name = str(dtype).rsplit(".", 1)[-1].lower()
        for dt, size in self.dtype_bytes:
            if dt == name:
                return size
        if name.startswith("float8"):
            return 1
        raise ProblemError(f"cost model has no size for dtype '{dtype}'; "
                           f"known: {', '.join(dt for dt, _ in self.dtype_bytes)}")

    def op_time(self, flops: float, bytes_moved: float, kernel: bool = True) -> float:
        """Run time (s) of one operator on a speed-1.0 device: the roofline with a launch floor.

        ``kernel=False`` marks an operator that only changes tensor metadata (a view):
        it costs nothing.

        Parameters
        ----------
        flops : float
            Floating-point operations of the operator.
        bytes_moved : float
            Bytes it reads and writes.
        kernel : bool, optional
            False for a view (no kernel runs).

        Returns
        -------
        float
            Seconds: ``max(min_op_time, flops / (peak_flops * efficiency), bytes_moved / memory_bandwidth)``.
        """
        if not kernel:
            return 0.0
        compute = flops / (self.peak_flops * self.efficiency)
        memory = bytes_moved / self.memory_bandwidth
        return max(self.min_op_time, compute, memory)

    def training_state_bytes(self, numel: int, dtype: str) -> float:
        """Bytes a trainable tensor holds in training: weight + gradient + optimizer state.

        Parameters
        ----------
        numel : int
            Elements of the trainable tensor.
        dtype : str
            The dtype of its weight and gradient.

        Returns
        -------
        float
            Bytes held all step (weight and gradient in ``dtype``, optimizer state per element).
        """
        return 2.0 * numel * self.element_bytes(dtype) + numel * self.optimizer_bytes_per_param

    def update_bytes_moved(self, numel: int, dtype: str) -> float:
        """Bytes an optimizer step moves: read weight, gradient and state; write weight and state.

        Parameters
        ----------
        numel, dtype : int, str
            Size and dtype of the parameter being updated.

        Returns
        -------
        float
            Bytes the update reads and writes (its roofline memory term).
        """
        return 3.0 * numel * self.element_bytes(dtype) + 2.0 * numel * self.optimizer_bytes_per_param

    # ------------------------------------------------------------------ what it describes
    def pricing_key(self) -> tuple[float, float, float, float]:
        """The figures node times depend on: equal keys, equal times.

        Returns
        -------
        tuple of float
            ``(peak_flops, efficiency, min_op_time, memory_bandwidth)``.
        """
        return (self.peak_flops, self.efficiency, self.min_op_time, self.memory_bandwidth)

    def link_key(self) -> tuple[float, float]:
        """The link figures: ``(link_bandwidth, link_latency)``.

        Returns
        -------
        tuple of float
        """
        return (self.link_bandwidth, self.link_latency)

    def describe(self) -> str:
        """The profile and the figures times assume, in one phrase.

        Returns
        -------
        str
            ``'H100-SXM bf16: 990 TFLOP/s at 50%, 3.35 TB/s'``; a model without a name is
            ``'V100 fp32 (the default)'`` when its figures are the defaults, else ``'custom'``.

        Examples
        --------
        >>> CostModel().describe()
        'V100 fp32 (the default): 15.7 TFLOP/s at 50%, 900 GB/s'
        """
        default = DEFAULT_COST_MODEL.pricing_key()
        name = self.hardware or ("V100 fp32 (the default)" if self.pricing_key() == default else "custom")
        return (f"{name}: {format_flops(self.peak_flops)}/s at {self.efficiency:.0%}, "
                f"{format_bandwidth(self.memory_bandwidth)}")

    # ------------------------------------------------------------------ (de)serialisation
    def to_dict(self) -> dict[str, Any]:
        """The values as a JSON-friendly dict (stored as ``problem.meta["cost_model"]``).

        Returns
        -------
        dict
            Every field by name.
        """
        out: dict[str, Any] = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                               if f.name not in ("dtype_bytes", "hardware")}
        out = {k: ("inf" if isinstance(v, float) and math.isinf(v) else v) for k, v in out.items()}
        out["dtype_bytes"] = {dt: size for dt, size in self.dtype_bytes}
        if self.hardware:
            out["hardware"] = self.hardware
        return out

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> "CostModel":
        """Inverse of :meth:`to_dict`; unknown keys are an error naming them.

        Parameters
        ----------
        doc : mapping
            Fields of the cost model (as written by :meth:`to_dict`).

        Returns
        -------
        CostModel
        """
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(doc) - names)
        if unknown:
            raise ProblemError(f"unknown cost model field(s) {unknown}; known: {', '.join(sorted(names))}")
        kw: dict[str, Any] = {}
        for k, v in doc.items():
            if k == "dtype_bytes":
                kw[k] = tuple(sorted((str(a), b) for a, b in dict(v).items()))
            elif k == "hardware":
                kw[k] = str(v)
            else:
                kw[k] = math.inf if v == "inf" else float(v)
        return cls(**kw)

    def replace(self, **changes: Any) -> "CostModel":
        """A copy with some fields changed; values may be strings with units
        (``peak_flops="312TFLOP/s"``, ``link_latency="10us"``, ``memory_bandwidth="2TB/s"``).

        Parameters
        ----------
        **changes : object
            Field names and new values; None leaves a field as it is.

        Returns
        -------
        CostModel
            The changed copy (this one is frozen).
        """
        names = {f.name for f in dataclasses.fields(self)}
        parsed: dict[str, Any] = {}
        if "hardware" not in changes and any(changes.get(k) is not None for k in ("peak_flops", "memory_bandwidth")):
            parsed["hardware"] = ""  # other device figures: no longer the named profile
        for k, v in changes.items():
            if k not in names:
                raise ProblemError(f"unknown cost model field '{k}'; known: {', '.join(sorted(names))}")
            if v is None:
                continue
            if k == "peak_flops":
                v = parse_flops(v)
            elif k in ("memory_bandwidth", "link_bandwidth"):
                v = _wrap(parse_bandwidth, v)
            elif k in ("link_latency", "min_op_time"):
                v = _wrap(parse_time, v)
            elif k == "dtype_bytes":
                v = tuple(sorted({**dict(self.dtype_bytes), **dict(v)}.items()))
            elif k == "hardware":
                v = str(v)
            else:
                v = _to_float(v, k)
            parsed[k] = v
        return dataclasses.replace(self, **parsed)


def _wrap(parse, v: Any) -> float:
    try:
        return parse(v)
    except ProblemError:
        raise
    except Exception as exc:  # units raise OptpartError; keep one error family with the field named
        raise ProblemError(str(exc)) from None


def _to_float(v: Any, name: str) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        raise ProblemError(f"cost model field '{name}' needs a number, got {v!r}") from None


DEFAULT_COST_MODEL = CostModel()
