"""Hardware profiles: the accelerators and links people plan for, as data, and one resolver.

A profile names a device type (``--device-type H100-SXM``), the number format its kernels
run in (``--dtype bf16``) and a link (``--link nvlink4``). :func:`resolve` turns the three
names into a :class:`Hardware`: the cost model that prices operators on that device
(dense peak of the dtype, memory bandwidth; ``docs/costmodel.md``), its memory capacity and
the link between devices. :func:`with_hardware` puts a problem on it: node times are
re-priced from the FLOPs and bytes each node records (:func:`reprice`), every device gets
the type's capacity and the links the preset's figures.

Every figure comes from the vendor's public data sheet (or architecture whitepaper for the
GeForce cards), cited per entry in :data:`DEVICE_TYPES` and in ``docs/costmodel.md``.
Peaks are **dense** (without 2:4 sparsity); for GeForce cards the tensor rates are those
with FP32 accumulation (what training uses). Link bandwidths are per direction: half the
bidirectional totals data sheets print. Link latencies are not on data sheets: 10 us, a
typical small-message peer copy, for every preset.

Re-pricing is exact for problems imported by this version (each kernel node records
``flops`` and ``bytes``, the roofline's two inputs); a problem whose times were measured
(``optpart import --profile``) keeps them, since measured costs override a profile; a file
that gives its own times (no ``meta.cost_model``) keeps them as given.

>>> hw = resolve("A100-80GB", "bf16")
>>> hw.cost_model().peak_flops, hw.memory / 2**30, hw.link.name
(312000000000000.0, 80.0, 'nvlink3')
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from .errors import OptpartError
from .formats.costmodel import CostModel
from .model.devices import Links, default_links, with_resolved_devices
from .model.problem import Problem
from .units import format_bandwidth, format_time

__all__ = ["DeviceType", "LinkType", "Hardware", "DEVICE_TYPES", "LINK_TYPES", "DTYPES", "resolve", "reprice",
           "with_hardware", "as_solved", "costs_label", "links_label", "pricing"]

#: The number formats a profile prices: fp32 (CUDA cores), tf32, bf16, fp16 (tensor cores).
DTYPES = ("fp32", "tf32", "bf16", "fp16")

_T = 1e12  # TFLOP/s
_G = 1e9   # GB/s
_GIB = 2.0**30
_LATENCY = 10e-6


@dataclass(frozen=True)
class DeviceType:
    """One accelerator as its data sheet gives it.

    ``peak`` maps a dtype of :data:`DTYPES` to the dense peak in FLOP/s (a dtype the part
    has no rate for is left out); ``memory`` is the capacity in bytes (the data sheet's GB
    read as GiB); ``memory_bandwidth`` bytes/s; ``link`` the preset its boards use between
    devices; ``nvlink`` its own peer link per direction in bytes/s (None: none).
    """

    name: str
    product: str
    memory: float
    memory_bandwidth: float
    peak: Mapping[str, float]
    link: str
    nvlink: float | None
    source: str


@dataclass(frozen=True)
class LinkType:
    """A link between two devices: bandwidth per direction (bytes/s) and latency (s)."""

    name: str
    product: str
    bandwidth: float
    latency: float
    source: str


def _dev(name, product, memory_gb, bandwidth_gbs, link, nvlink_total_gbs, source, **peak_tflops) -> DeviceType:
    return DeviceType(name, product, memory_gb * _GIB, bandwidth_gbs * _G,
                      {k: v * _T for k, v in peak_tflops.items()}, link,
                      None if nvlink_total_gbs is None else nvlink_total_gbs / 2 * _G, source)


_NV = "https://www.nvidia.com/"
#: The device types by name (dense peaks in TFLOP/s, memory in GB as printed, bandwidth in GB/s).
DEVICE_TYPES: dict[str, DeviceType] = {d.name: d for d in (
    _dev("V100", "NVIDIA V100 SXM2 16 GB", 16, 900, "nvlink2", 300, _NV + "en-us/data-center/v100/",
         fp32=15.7, fp16=125),
    _dev("V100-32GB", "NVIDIA V100 SXM2 32 GB", 32, 900, "nvlink2", 300, _NV + "en-us/data-center/v100/",
         fp32=15.7, fp16=125),
    _dev("A100-40GB", "NVIDIA A100 SXM4 40 GB", 40, 1555, "nvlink3", 600, _NV + "en-us/data-center/a100/",
         fp32=19.5, tf32=156, bf16=312, fp16=312),
    _dev("A100-80GB", "NVIDIA A100 SXM4 80 GB", 80, 2039, "nvlink3", 600, _NV + "en-us/data-center/a100/",
         fp32=19.5, tf32=156, bf16=312, fp16=312),
    _dev("H100-SXM", "NVIDIA H100 SXM5 80 GB", 80, 3350, "nvlink4", 900, _NV + "en-us/data-center/h100/",
         fp32=67, tf32=494.5, bf16=989.5, fp16=989.5),
    _dev("H100-PCIe", "NVIDIA H100 PCIe 80 GB", 80, 2000, "pcie5", 600, _NV + "en-us/data-center/h100/",
         fp32=51, tf32=378, bf16=756.5, fp16=756.5),
    _dev("H200", "NVIDIA H200 SXM 141 GB", 141, 4800, "nvlink4", 900, _NV + "en-us/data-center/h200/",
         fp32=67, tf32=494.5, bf16=989.5, fp16=989.5),
    _dev("L4", "NVIDIA L4 24 GB", 24, 300, "pcie4", None, _NV + "en-us/data-center/l4/",
         fp32=30.3, tf32=60, bf16=121, fp16=121),
    _dev("L40S", "NVIDIA L40S 48 GB", 48, 864, "pcie4", None, _NV + "en-us/data-center/l40s/",
         fp32=91.6, tf32=183, bf16=362.05, fp16=362.05),
    _dev("A10", "NVIDIA A10 24 GB", 24, 600, "pcie4", None, _NV + "en-us/data-center/products/a10-gpu/",
         fp32=31.2, tf32=62.5, bf16=125, fp16=125),
    _dev("A30", "NVIDIA A30 24 GB", 24, 933, "pcie4", 200, _NV + "en-us/data-center/products/a30-gpu/",
         fp32=10.3, tf32=82, bf16=165, fp16=165),
    _dev("RTX3090", "NVIDIA GeForce RTX 3090 24 GB", 24, 936, "pcie4", 112.5,
         "NVIDIA Ampere GA102 GPU Architecture whitepaper, appendix A (FP32 accumulate)",
         fp32=35.6, tf32=35.6, bf16=71, fp16=71),
    _dev("RTX4090", "NVIDIA GeForce RTX 4090 24 GB", 24, 1008, "pcie4", None,
         "NVIDIA Ada GPU Architecture whitepaper, appendix A (FP32 accumulate)",
         fp32=82.6, tf32=82.6, bf16=165.2, fp16=165.2),
    _dev("MI300X", "AMD Instinct MI300X 192 GB", 192, 5300, "xgmi", None,
         "https://www.amd.com/en/products/accelerators/instinct/mi300/mi300x.html",
         fp32=163.4, tf32=653.7, bf16=1307.4, fp16=1307.4),
)}

#: The link presets by name (per-direction bandwidth: half the bidirectional figure printed).
LINK_TYPES: dict[str, LinkType] = {k.name: k for k in (
    LinkType("nvlink2", "NVLink 2 (V100 SXM2: 300 GB/s total)", 150 * _G, _LATENCY, _NV + "en-us/data-center/nvlink/"),
    LinkType("nvlink3", "NVLink 3 (A100 SXM: 600 GB/s total)", 300 * _G, _LATENCY, _NV + "en-us/data-center/nvlink/"),
    LinkType("nvlink4", "NVLink 4 (H100/H200 SXM: 900 GB/s total)", 450 * _G, _LATENCY,
             _NV + "en-us/data-center/nvlink/"),
    LinkType("nvlink5", "NVLink 5 (Blackwell: 1.8 TB/s total)", 900 * _G, _LATENCY, _NV + "en-us/data-center/nvlink/"),
    LinkType("pcie3", "PCIe 3.0 x16 (32 GB/s total)", 16 * _G, _LATENCY, "PCI-SIG PCIe 3.0 base specification"),
    LinkType("pcie4", "PCIe 4.0 x16 (64 GB/s total)", 32 * _G, _LATENCY, "PCI-SIG PCIe 4.0 base specification"),
    LinkType("pcie5", "PCIe 5.0 x16 (128 GB/s total)", 64 * _G, _LATENCY, "PCI-SIG PCIe 5.0 base specification"),
    LinkType("ib-hdr", "InfiniBand HDR, one 200 Gb/s port", 25 * _G, _LATENCY, _NV + "en-us/networking/infiniband/"),
    LinkType("ib-ndr", "InfiniBand NDR, one 400 Gb/s port", 50 * _G, _LATENCY, _NV + "en-us/networking/infiniband/"),
    LinkType("xgmi", "AMD Infinity Fabric, one 128 GB/s link between a pair of MI300X", 64 * _G, _LATENCY,
             "https://www.amd.com/en/products/accelerators/instinct/mi300/mi300x.html"),
)}

def _key(name: str) -> str:
    return re.sub(r"[\s_\-]", "", str(name)).lower()


def _lookup(table: Mapping[str, Any], name: str, flag: str) -> Any:
    by_key = {_key(k): v for k, v in table.items()}
    found = by_key.get(_key(name))
    if found is None:
        raise OptpartError(f"{flag} {name!r} is not a known one; known: {', '.join(table)} "
                           "(or give the figures: docs/costmodel.md)")
    return found


@dataclass(frozen=True)
class Hardware:
    """A resolved profile: device type (None: the cost model's own figures), dtype, link.

    ``link`` is None when neither a link nor a device type was named (the problem's own
    links stay).
    """

    device: DeviceType | None
    dtype: str | None
    link: LinkType | None

    @property
    def memory(self) -> float | None:
        """Capacity of one device in bytes (None without a device type)."""
        return None if self.device is None else self.device.memory

    @property
    def label(self) -> str:
        """``'H100-SXM bf16'``: what every output that shows a time names."""
        return f"{self.device.name} {self.dtype}" if self.device is not None else ""

    def cost_model(self, base: CostModel | None = None) -> CostModel:
        """The cost model that prices operators on this hardware.

        Parameters
        ----------
        base : CostModel, optional
            Efficiency, launch floor, optimizer state and dtype sizes to keep (default
            :class:`CostModel`'s).

        Returns
        -------
        CostModel
            ``base`` with the dtype's dense peak, the memory bandwidth, the link and the
            profile's name (``hardware``).
        """
        cm = base or CostModel()
        changes: dict[str, Any] = {}
        if self.device is not None:
            changes.update(peak_flops=self.device.peak[self.dtype], memory_bandwidth=self.device.memory_bandwidth,
                           hardware=self.label)
        if self.link is not None:
            changes.update(link_bandwidth=self.link.bandwidth, link_latency=self.link.latency)
        return cm.replace(**changes)


def resolve(device_type: str | None = None, dtype: str | None = None, link: str | None = None) -> Hardware:
    """The one resolver of hardware names: ``resolve("H100-SXM", "bf16", "nvlink4")``.

    Names are matched without regard to case, spaces, ``-`` and ``_`` (``h100sxm``).

    Parameters
    ----------
    device_type : str, optional
        A key of :data:`DEVICE_TYPES`.
    dtype : str, optional
        One of :data:`DTYPES` (default fp32, PyTorch's default for matrix products).
    link : str, optional
        A key of :data:`LINK_TYPES`, or ``nvlink`` for the device type's own NVLink
        (default: the link the device type's boards use).

    Returns
    -------
    Hardware
        The device type, dtype and link.

    Raises
    ------
    OptpartError
        An unknown name (listing the known ones), a dtype the device has no rate for, a
        ``--dtype`` without a device type, ``nvlink`` for a device without one.
    """
    dev = _lookup(DEVICE_TYPES, device_type, "--device-type") if device_type is not None else None
    if dtype is not None and _key(dtype) not in DTYPES:
        raise OptpartError(f"--dtype {dtype!r} is not one of {', '.join(DTYPES)}")
    kind = _key(dtype) if dtype is not None else None
    if dev is None and kind is not None:
        raise OptpartError(f"--dtype {dtype} prices compute on a device type: give --device-type too "
                           f"(one of {', '.join(DEVICE_TYPES)})")
    if dev is not None:
        kind = kind or "fp32"
        if kind not in dev.peak:
            raise OptpartError(f"--dtype {kind}: the {dev.product} data sheet gives no {kind} rate; it has "
                               f"{', '.join(dev.peak)}")
    if link is not None and _key(link) == "nvlink":
        if dev is None or dev.nvlink is None:
            raise OptpartError("--link nvlink means the device type's own NVLink: "
                               + ("give --device-type" if dev is None else f"the {dev.product} has none")
                               + f"; presets: {', '.join(LINK_TYPES)}")
        wire = LinkType("nvlink", f"{dev.product} NVLink ({2 * dev.nvlink / _G:g} GB/s total)", dev.nvlink,
                        _LATENCY, dev.source)
    elif link is not None:
        wire = _lookup(LINK_TYPES, link, "--link")
    else:
        wire = LINK_TYPES[dev.link] if dev is not None else None
    return Hardware(dev, kind, wire)


# ---------------------------------------------------------------------- what a problem's costs are
def pricing(problem: Problem) -> tuple[str, CostModel | None]:
    """How ``problem``'s node times were made: ``("model", cost model)`` (imported and priced),
    ``("measured", cost model)`` (``--profile``) or ``("given", None)`` (the file's own times).

    Parameters
    ----------
    problem : Problem
        Any problem.

    Returns
    -------
    (str, CostModel or None)
        The kind and, for imported problems, the cost model its ``meta`` records.
    """
    doc = (problem.meta or {}).get("cost_model")
    if not isinstance(doc, Mapping):
        return "given", None
    fields = {k: v for k, v in doc.items() if k not in ("times", "profile")}
    try:
        cm = CostModel.from_dict(fields)
    except OptpartError:  # a hand-edited record: the times are the file's
        return "given", None
    return ("measured" if doc.get("times") == "measured" else "model"), cm


def costs_label(problem: Problem) -> str:
    """What the times of ``problem`` assume, in one phrase for every output that shows a time.

    Parameters
    ----------
    problem : Problem
        Any problem.

    Returns
    -------
    str
        ``'H100-SXM bf16: 990 TFLOP/s x 0.5, 3.35 TB/s'``, ``'V100 fp32 (the default): ...'``,
        ``'measured on cpu (--profile)'`` or ``'costs as given in the file'``.
    """
    kind, cm = pricing(problem)
    if kind == "given":
        return "costs as given in the file"
    if kind == "measured":
        prof = problem.meta["cost_model"].get("profile") or {}
        return f"times measured on {prof.get('device', '?')} (--profile)"
    return cm.describe()


def links_label(links: Links | None) -> str:
    """``'450 GB/s, 10 us (nvlink4)'``: the uniform link, with the preset it matches.

    Parameters
    ----------
    links : Links or None
        A problem's links.

    Returns
    -------
    str
        Bandwidth and latency, "the default" or the matching preset's name, and the count of
        per-pair overrides.
    """
    if links is None:
        return "none"
    default = default_links()
    names = ["the default"] if (math.isclose(links.bandwidth, default.bandwidth)
                                and math.isclose(links.latency, default.latency)) else []
    names += [k.name for k in LINK_TYPES.values() if math.isclose(k.bandwidth, links.bandwidth)
              and math.isclose(k.latency, links.latency)]
    text = f"{format_bandwidth(links.bandwidth)}, {format_time(links.latency)}"
    text += f" ({', as '.join(names)})" if names else ""
    return text + (f", {len(links.pairs)} pair overrides" if links.pairs else "")


# ---------------------------------------------------------------------- re-pricing
def reprice(problem: Problem, cost_model: CostModel) -> Problem:
    """``problem`` with every kernel's time priced again by ``cost_model``: exact, since the
    roofline's inputs (``flops`` and ``bytes`` of each kernel node) are in the node metadata.

    Views and inputs (nodes without ``bytes``) keep their time (0 s at any rate); edges,
    memory and devices are unchanged; the links and ``meta.cost_model`` become the new model's.

    Parameters
    ----------
    problem : Problem
        An imported problem priced by a cost model (:func:`pricing` says ``"model"``).
    cost_model : CostModel
        The model to price it with.

    Returns
    -------
    Problem
        The re-priced problem (``problem`` itself when the model is the same).

    Raises
    ------
    OptpartError
        When a node with a run time records no ``bytes`` (a file imported before the figures
        were recorded: import it again with the device type).
    """
    kind, old = pricing(problem)
    if kind != "model":
        raise OptpartError(f"'{problem.name}' has " + ("measured times (--profile)" if kind == "measured"
                                                        else "its own times (no meta.cost_model)")
                           + "; only an imported problem priced by the cost model can be re-priced")
    if (old.pricing_key(), old.link_key(), old.hardware) == (cost_model.pricing_key(), cost_model.link_key(),
                                                           cost_model.hardware):
        return problem
    meta = problem.node_meta or [{}] * problem.n_nodes
    time = np.array(problem.time, dtype=np.float64)
    if old.pricing_key() != cost_model.pricing_key():
        for v, m in enumerate(meta):
            if "bytes" in m:
                time[v] = cost_model.op_time(float(m.get("flops", 0)), float(m["bytes"]))
            elif time[v] > 0:
                want = cost_model.hardware or "other figures"
                raise OptpartError(
                    f"'{problem.name}' cannot be priced for {want}: its node '{problem.node_ids[v]}' records no "
                    f"bytes moved (the file predates device types; its times are {old.describe().split(':')[0]}): "
                    "import the model again with --device-type, or keep its times and set --memory/--bandwidth")
    links = problem.links
    if old.link_key() != cost_model.link_key():
        links = Links(cost_model.link_latency, cost_model.link_bandwidth, links.pairs if links else ())
    split = problem.has_split
    return Problem.from_arrays(
        problem.node_ids, time, problem.memory, problem.edge_src, problem.edge_dst, problem.edge_bytes,
        devices=list(problem.devices) or None, links=links, constraints=problem.constraints,
        param_bytes=problem.param_bytes if split else None, output_bytes=problem.output_bytes if split else None,
        temp_bytes=problem.temp_bytes if split else None, node_meta=problem.node_meta, name=problem.name,
        meta={**problem.meta, "cost_model": {**problem.meta["cost_model"], **cost_model.to_dict()}})


def with_hardware(problem: Problem, device_type: str | None = None, *, dtype: str | None = None,
                  link: str | None = None, **devices: Any) -> Problem:
    """``problem`` on accelerators of one type: times priced for it, its capacity, its links.
    The Python form of ``--device-type/--dtype/--link``.

    Parameters
    ----------
    problem : Problem
        Any problem. An imported one is re-priced (:func:`reprice`); measured times and
        times given by the file are kept (the profile then sets capacity and links only).
    device_type, dtype, link : str, optional
        Names for :func:`resolve`.
    **devices
        ``devices`` (count), ``memory``, ``speed``, ``bandwidth``, ``latency`` as
        :meth:`Problem.resolved` takes them; ``memory`` defaults to the
        type's capacity and ``bandwidth``/``latency`` to the link's figures.

    Returns
    -------
    Problem
        The re-priced problem on the devices and links of the profile.

    Examples
    --------
    >>> p = Problem.build(nodes=[{"id": "a", "time": 1.0, "memory": 10}])
    >>> q = with_hardware(p, "L4", devices=2)
    >>> q.device_memory.tolist(), q.links.bandwidth, costs_label(q)
    ([25769803776.0, 25769803776.0], 32000000000.0, 'costs as given in the file')
    """
    hw = resolve(device_type, dtype, link)
    kind, old = pricing(problem)
    if kind == "model" and (hw.device is not None or hw.link is not None):
        problem = reprice(problem, hw.cost_model(old))
    elif kind != "model" and dtype is not None:
        raise OptpartError(f"--dtype {dtype}: '{problem.name}' has "
                           + ("measured times (--profile)" if kind == "measured" else "its own times")
                           + ", which a dtype does not change; drop --dtype")
    values = {k: v for k, v in devices.items() if v is not None}
    if hw.memory is not None:
        values.setdefault("memory", hw.memory)
    if hw.link is not None:
        values.setdefault("bandwidth", hw.link.bandwidth)
        values.setdefault("latency", hw.link.latency)
    return with_resolved_devices(problem, **values)


def as_solved(problem: Problem, doc: Mapping[str, Any]) -> Problem | None:
    """``problem`` as a result document was solved on, when the solve named hardware: priced
    with the ``device_type``/``dtype``/``link`` its ``options`` record, on the devices and links
    it records (``optpart evaluate``, ``show``, ``plot`` and ``export`` read results so).

    Parameters
    ----------
    problem : Problem
        The problem file's problem.
    doc : mapping
        The parsed result document.

    Returns
    -------
    Problem or None
        None when the result records no hardware (the problem file's costs stand).
    """
    from .formats.optpart_json import problem_for_result

    options = doc.get("options") if isinstance(doc, Mapping) else None
    names = {k: v for k, v in (options or {}).items() if k in ("device_type", "dtype", "link") and isinstance(v, str)}
    if not names:
        return None
    kind, cm = pricing(problem)
    if kind == "model":
        problem = reprice(problem, resolve(**names).cost_model(cm))
    if "devices" not in doc:
        return problem
    split = problem.has_split
    bare = Problem.from_arrays(  # the result's devices and links replace the file's (constraints name them)
        problem.node_ids, problem.time, problem.memory, problem.edge_src, problem.edge_dst, problem.edge_bytes,
        param_bytes=problem.param_bytes if split else None, output_bytes=problem.output_bytes if split else None,
        temp_bytes=problem.temp_bytes if split else None, node_meta=problem.node_meta, name=problem.name,
        meta=problem.meta)
    solved = problem_for_result(bare, doc)
    return solved.with_devices(list(solved.devices), links=solved.links, constraints=problem.constraints)
