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

import json
import statistics
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from ..errors import FormatError
from ..problem import Constraints, Device, Links, Problem

__all__ = ["read_dnn_partitioning", "dnn_partitioning_from_dict", "looks_like_dnn_partitioning"]

_MS = 1e-3


def looks_like_dnn_partitioning(doc: Any) -> bool:
    return isinstance(doc, dict) and "maxSizePerFPGA" in doc and "nodes" in doc


def dnn_partitioning_from_dict(doc: Mapping[str, Any], name: str = "dnn") -> Problem:
    """Build a :class:`Problem` (with devices) from a parsed dnn-partitioning document."""
    for key in ("nodes", "edges", "maxSizePerFPGA", "maxFPGAs"):
        if key not in doc:
            raise FormatError(f"dnn-partitioning file '{name}' has no field '{key}'")
    nodes, edges = doc["nodes"], doc["edges"]
    ids, time, memory, meta = [], [], [], []
    groups: dict[Any, list[str]] = {}
    for i, nd in enumerate(nodes):
        for key in ("id", "fpgaLatency", "size"):
            if key not in nd:
                raise FormatError(f"dnn-partitioning node at position {i} has no field '{key}'")
        nid = str(nd["id"])
        on_fpga = bool(nd.get("supportedOnFpga", True))
        ids.append(nid)
        time.append(float(nd["fpgaLatency"] if on_fpga else nd.get("cpuLatency", 0.0)) * _MS)
        memory.append(float(nd["size"]))
        m: dict[str, Any] = {}
        for key in ("name", "isBackwardNode", "layerId"):
            if key in nd:
                m[key] = nd[key]
        if not on_fpga:
            m["cpu_only"] = True
        meta.append(m)
        if nd.get("colorClass") is not None:
            groups.setdefault(nd["colorClass"], []).append(nid)
    index = {nid: i for i, nid in enumerate(ids)}
    src, dst, nbytes, ratios = [], [], [], []
    for e, ed in enumerate(edges):
        for key in ("sourceId", "destId"):
            if key not in ed:
                raise FormatError(f"dnn-partitioning edge at position {e} has no field '{key}'")
        s, t = str(ed["sourceId"]), str(ed["destId"])
        for end in (s, t):
            if end not in index:
                raise FormatError(f"dnn-partitioning edge '{s}' -> '{t}' names unknown node '{end}'")
        src.append(index[s])
        dst.append(index[t])
        size = float(ed.get("size", 0.0))
        nbytes.append(size)
        cost = float(ed.get("cost", 0.0))
        if cost > 0 and size > 0:
            ratios.append(size / (cost * _MS))
    bandwidth = statistics.median(ratios) if ratios else float("inf")
    k = int(doc["maxFPGAs"])
    cap = float(doc["maxSizePerFPGA"])
    devices = [Device(f"fpga{i}", cap, 1.0) for i in range(k)]
    colocate = tuple(tuple(g) for _, g in sorted(groups.items(), key=lambda kv: index[kv[1][0]]) if len(g) > 1)
    return Problem.from_arrays(
        ids, np.array(time), np.array(memory), src, dst, np.array(nbytes),
        devices=devices, links=Links(0.0, bandwidth), constraints=Constraints(colocate=colocate),
        node_meta=meta, name=name, meta={"source": "dnn-partitioning"},
    )


def read_dnn_partitioning(path: str | Path) -> Problem:
    path = Path(path)
    try:
        doc = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise FormatError(f"{path}: not valid JSON ({exc})") from None
    return dnn_partitioning_from_dict(doc, name=path.stem)
