"""The node columns an importer builds, and the problem they make: shared by the ONNX and
PyTorch importers (:mod:`optpart.formats.onnx_import`, :mod:`optpart.formats.torch_import`).

An importer appends one node at a time (id, run time, static memory, the peak split's
``param_bytes``/``output_bytes``, metadata) and collects edge bytes per ``(producer,
consumer)`` pair; :meth:`NodeColumns.problem` turns both into a :class:`Problem` with the
cost model's link, edges in sorted pair order.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..model.constraints import Constraints
from ..model.devices import Device, Links
from ..model.problem import Problem
from .costmodel import CostModel

__all__ = ["NodeColumns"]


class NodeColumns:
    """One list per node column, appended to in node order."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.time: list[float] = []
        self.mem: list[float] = []
        self.pbytes: list[float] = []
        self.obytes: list[float] = []
        self.meta: list[dict[str, Any]] = []

    def add(self, nid: str, time: float, mem: float, pbytes: float, obytes: float, meta: dict[str, Any]) -> int:
        """Append one node.

        Parameters
        ----------
        nid : str
            Its id.
        time : float
            Run time, seconds.
        mem, pbytes, obytes : float
            Static memory, parameter bytes and output bytes (docs/model.md section 3).
        meta : dict
            Its metadata (``op``, ``flops``, ``phase``, ...).

        Returns
        -------
        int
            Its index.
        """
        for column, value in ((self.ids, nid), (self.time, time), (self.mem, mem), (self.pbytes, pbytes),
                              (self.obytes, obytes), (self.meta, meta)):
            column.append(value)
        return len(self.ids) - 1

    def problem(self, edges: dict[tuple[int, int], float], colocate: Sequence[tuple[str, ...]], cm: CostModel,
                devices: Sequence[Device] | None, name: str, meta: dict[str, Any]) -> Problem:
        """The problem of these nodes and ``edges``, on the cost model's link.

        Parameters
        ----------
        edges : dict
            Bytes per ``(producer index, consumer index)``.
        colocate : sequence of tuple of str
            Colocation groups, by node id.
        cm : CostModel
            Gives the link (latency, bandwidth).
        devices : sequence of Device, optional
            Devices to attach (None: none).
        name : str
            The problem's name.
        meta : dict
            Problem metadata.

        Returns
        -------
        Problem
            Edges in sorted pair order, the peak split from ``pbytes``/``obytes``.
        """
        keys = sorted(edges)
        return Problem.from_arrays(
            self.ids, np.array(self.time), np.array(self.mem),
            np.array([k[0] for k in keys], dtype=np.int64), np.array([k[1] for k in keys], dtype=np.int64),
            np.array([edges[k] for k in keys], dtype=np.float64),
            devices=devices, links=Links(cm.link_latency, cm.link_bandwidth),
            constraints=Constraints(colocate=tuple(colocate)),
            param_bytes=np.array(self.pbytes), output_bytes=np.array(self.obytes), temp_bytes=None,
            node_meta=self.meta, name=name, meta=meta,
        )
