"""What a placement means on a problem: run times, transfer times, constraints kept, ids.

:class:`PlacementViews` holds the methods of :class:`optpart.model.problem.Problem` that
read a placement (a device index per node): the run time of each node on its device, the
transfer time of each edge between its ends' devices (``latency + bytes / bandwidth``,
docs/model.md section 2; the one transfer arithmetic of the model), whether the placement
keeps the constraints, and the placement of ``{node id: device id}``.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from ..errors import ProblemError

__all__ = ["PlacementViews"]


class PlacementViews:
    """Mixed into :class:`~optpart.model.problem.Problem` (which holds the attributes read here)."""

    __slots__ = ()

    def respects_constraints(self, placement: np.ndarray) -> bool:
        """Does a placement keep every pin, forbid and colocation group?

        Parameters
        ----------
        placement : array_like of int
            A device index per node.

        Returns
        -------
        bool
        """
        placement = np.asarray(placement, dtype=np.int64)
        n = self.n_nodes
        if placement.shape != (n,) or not self.allowed[np.arange(n), placement].all():
            return False
        return all(np.unique(placement[members]).size == 1 for members in self.groups)

    def duration(self, placement: np.ndarray) -> np.ndarray:
        """Run time of every node on its device: ``time(v) / speed(d(v))``.

        Parameters
        ----------
        placement : numpy.ndarray of int, shape (n_nodes,)
            Device index of each node.

        Returns
        -------
        numpy.ndarray of float64
            Seconds each node runs on its device, one per node.
        """
        return self.time / self.device_speed[np.asarray(placement, dtype=np.int64)]

    def transfer_times(self, placement: np.ndarray) -> np.ndarray:
        """Transfer time of every edge under a placement (0 within one device).

        Parameters
        ----------
        placement : numpy.ndarray of int, shape (n_nodes,)
            Device index per node.

        Returns
        -------
        numpy.ndarray of float64, shape (n_edges,)
            ``latency(a, b) + bytes / bandwidth(a, b)`` seconds per edge between devices
            ``a != b``; 0 for an edge within one device.
        """
        placement = np.asarray(placement, dtype=np.int64)
        a = placement[self.edge_src]
        b = placement[self.edge_dst]
        with np.errstate(divide="ignore", invalid="ignore"):
            c = self.latency[a, b] + self.edge_bytes / self.bandwidth[a, b]
        c[a == b] = 0.0
        return c

    def placement_from_ids(self, mapping: Mapping[str, str]) -> np.ndarray:
        """Turn ``{node id: device id}`` into an integer placement array, naming what is missing.

        Parameters
        ----------
        mapping : mapping of str to str
            ``{node id: device id}`` naming every node exactly once.

        Returns
        -------
        numpy.ndarray of int64, shape (n_nodes,)
            Device index per node.

        Raises
        ------
        ProblemError
            Naming an unknown node or device, or the first node left out.
        """
        placement = np.full(self.n_nodes, -1, dtype=np.int64)
        for nid, did in mapping.items():
            if nid not in self.node_index:
                raise ProblemError(f"placement names unknown node '{nid}'")
            if did not in self.device_index:
                raise ProblemError(f"placement puts node '{nid}' on unknown device '{did}'")
            placement[self.node_index[nid]] = self.device_index[did]
        missing = np.flatnonzero(placement < 0)
        if missing.size:
            raise ProblemError(f"placement leaves node '{self.node_ids[missing[0]]}' without a device")
        return placement
