"""Reader for the JSON operator graphs of the dnn-partitioning benchmark.

Source: Tarnawski, Narayanan, Phanishayee, "Piper: Multidimensional Planner for DNN
Parallelization" / "Efficient Algorithms for Device Placement of DNN Graph Operators"
(NeurIPS 2020), msr-fiddle/dnn-partitioning (MIT).

Mapping to the optpart model:

* node ``fpgaLatency`` (milliseconds in these files) -> ``time`` in seconds;
* node ``size`` (bytes) -> ``memory``;
* edge ``size`` (bytes) -> ``bytes``; edge ``cost`` (the transfer time through host
  memory, read in milliseconds like the latencies) fixes the uniform link bandwidth as
  the median of ``size / cost``, with zero latency. That is 2 GiB/s in the operator
  graphs and the inference layer graphs; the training layer graphs give costs 1000x
  smaller (about 2 TB/s), and we keep the file's figure rather than guess;
* ``colorClass`` -> colocation: the nodes of one class go to one device;
* ``maxFPGAs`` devices of ``maxSizePerFPGA`` bytes each, speed 1.

CPU-only nodes (``supportedOnFpga`` false) have no accelerator time in the source;
optpart has no host device, so they are placed on the accelerators like any other
node, with their ``cpuLatency`` as time, and marked ``"cpu_only": true`` in their
metadata. (None of the published graphs has such a node.) Node ``name``,
``isBackwardNode`` and ``layerId`` are kept as metadata.
"""

from __future__ import annotations

import math
import statistics
from typing import Any, Mapping

import numpy as np

from ..errors import FormatError
from ..limits import check_devices
from ._io import json_number as _num, short as _short
from ..model.constraints import Constraints
from ..model.devices import Device, Links
from ..model.problem import Problem

__all__ = ["dnn_partitioning_from_dict", "looks_like_dnn_partitioning"]

_MS = 1e-3


def looks_like_dnn_partitioning(doc: Any) -> bool:
    """Whether a parsed JSON document is a dnn-partitioning instance (its two telltale fields).

    Parameters
    ----------
    doc : object
        The parsed document.

    Returns
    -------
    bool
    """
    return isinstance(doc, dict) and "maxSizePerFPGA" in doc and "nodes" in doc


def _device_count(value: Any, name: str) -> int:
    """``maxFPGAs``: a whole number >= 1 (``2.0`` reads as 2; ``2.7`` is an error, never rounded)."""
    what = f"dnn-partitioning file '{name}' field 'maxFPGAs'"
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            (isinstance(value, float) and not value.is_integer()):
        raise FormatError(f"{what} is {_short(value)}; it must be a whole number of devices")
    if value < 1:
        raise FormatError(f"{what} is {_short(value)}; it must be at least 1")
    k = int(value)
    check_devices(k, f"{what}: device count")
    return k


def dnn_partitioning_from_dict(doc: Mapping[str, Any], name: str = "dnn") -> Problem:
    """Build a :class:`Problem` (with devices) from a parsed dnn-partitioning document.

    Every number is checked (a number, finite, >= 0); ``maxFPGAs`` must be a whole
    number >= 1. Nothing is rounded or replaced.

    Parameters
    ----------
    doc : mapping
        The parsed document (``nodes``, ``edges``, ``maxSizePerFPGA``, ``maxFPGAs``).
    name : str, optional
        The problem's name (the file's stem), also used in messages.

    Returns
    -------
    Problem
        ``maxFPGAs`` devices of ``maxSizePerFPGA`` bytes; times in seconds (the file's are ms).
    """
    for key in ("nodes", "edges", "maxSizePerFPGA", "maxFPGAs"):
        if key not in doc:
            raise FormatError(f"dnn-partitioning file '{name}' has no field '{key}'")
    nodes, edges = doc["nodes"], doc["edges"]
    for key, value in (("nodes", nodes), ("edges", edges)):
        if not isinstance(value, list):
            raise FormatError(f"dnn-partitioning file '{name}' field '{key}' must be a list, got {_short(value)}")
    k = _device_count(doc["maxFPGAs"], name)
    cap = _num(doc["maxSizePerFPGA"], f"dnn-partitioning file '{name}' field 'maxSizePerFPGA'")
    ids, time, memory, meta = [], [], [], []
    groups: dict[Any, list[str]] = {}
    for i, nd in enumerate(nodes):
        if not isinstance(nd, dict):
            raise FormatError(f"dnn-partitioning node at position {i} must be a JSON object, got {_short(nd)}")
        for key in ("id", "fpgaLatency", "size"):
            if key not in nd:
                raise FormatError(f"dnn-partitioning node at position {i} has no field '{key}'")
        if type(nd["id"]) not in (str, int):
            raise FormatError(f"dnn-partitioning node at position {i} has id {_short(nd['id'])}; ids are "
                              "strings or integers")
        nid = str(nd["id"])
        on_fpga = nd.get("supportedOnFpga", True)
        if on_fpga not in (True, False) or type(on_fpga) not in (bool, int):  # the files use 1/0 too
            raise FormatError(f"dnn-partitioning node '{nid}' has supportedOnFpga={_short(on_fpga)}; "
                              "it must be true, false, 1 or 0")
        on_fpga = bool(on_fpga)
        ids.append(nid)
        key = "fpgaLatency" if on_fpga else "cpuLatency"
        time.append(_num(nd.get(key, 0.0), f"dnn-partitioning node '{nid}' field '{key}'") * _MS)
        memory.append(_num(nd["size"], f"dnn-partitioning node '{nid}' field 'size'"))
        m: dict[str, Any] = {}
        for key in ("name", "isBackwardNode", "layerId"):
            if key in nd:
                m[key] = nd[key]
        if not on_fpga:
            m["cpu_only"] = True
        meta.append(m)
        color = nd.get("colorClass")
        if color is not None:
            if type(color) not in (str, int):
                raise FormatError(f"dnn-partitioning node '{nid}' has colorClass={_short(color)}; "
                                  "it must be a string or an integer")
            groups.setdefault(color, []).append(nid)
    index = {nid: i for i, nid in enumerate(ids)}
    src, dst, nbytes, ratios = [], [], [], []
    for e, ed in enumerate(edges):
        if not isinstance(ed, dict):
            raise FormatError(f"dnn-partitioning edge at position {e} must be a JSON object, got {_short(ed)}")
        for key in ("sourceId", "destId"):
            if key not in ed:
                raise FormatError(f"dnn-partitioning edge at position {e} has no field '{key}'")
        s, t = str(ed["sourceId"]), str(ed["destId"])
        for end in (s, t):
            if end not in index:
                raise FormatError(f"dnn-partitioning edge '{s}' -> '{t}' names unknown node '{end}'")
        src.append(index[s])
        dst.append(index[t])
        size = _num(ed.get("size", 0.0), f"dnn-partitioning edge '{s}' -> '{t}' field 'size'")
        nbytes.append(size)
        cost = _num(ed.get("cost", 0.0), f"dnn-partitioning edge '{s}' -> '{t}' field 'cost'")
        seconds = cost * _MS
        if seconds > 0 and size > 0:  # a denormal cost underflows to 0 s: no rate to read from it
            ratios.append(size / seconds)
    bandwidth = statistics.median(ratios) if ratios else float("inf")
    if not (0 < bandwidth < math.inf) and ratios:
        raise FormatError(f"dnn-partitioning file '{name}': the edges' size/cost ratios give a bandwidth of "
                          f"{bandwidth!r} bytes/s")
    devices = [Device(f"fpga{i}", cap, 1.0) for i in range(k)]
    colocate = tuple(tuple(g) for _, g in sorted(groups.items(), key=lambda kv: index[kv[1][0]]) if len(g) > 1)
    return Problem.from_arrays(
        ids, np.array(time), np.array(memory), src, dst, np.array(nbytes),
        devices=devices, links=Links(0.0, bandwidth), constraints=Constraints(colocate=colocate),
        node_meta=meta, name=name, meta={"source": "dnn-partitioning"},
    )
