"""Reader for the Standard Task Graph set (Kasahara and Narita; the STG project, Waseda University).

Format: the first non-comment line holds ``n`` (the number of real tasks); then
``n + 2`` lines ``id time npred pred1 pred2 ...`` including a zero-time entry task
(id 0) and exit task (id n+1); ``#`` starts a comment. Tasks become nodes named by
their STG id (``"0"`` .. ``"n+1"``), each predecessor an edge.

STG has no communication and no memory: edges carry 0 bytes, nodes 0 bytes, and the
problem's links are free (zero latency, infinite bandwidth), which is the model under
which the published optima hold. Devices are not part of the file; give them with
:meth:`Problem.with_devices` or ``optpart solve --devices P``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import FormatError
from ..text import safe
from ._io import read_text
from ..model.devices import Links
from ..model.problem import Problem

__all__ = ["read_stg", "parse_stg"]


def parse_stg(text: str, name: str = "stg") -> Problem:
    """Parse STG text into a :class:`Problem` without devices.

    Parameters
    ----------
    text : str
        The STG text: task count, then one line per task (id, time, predecessor count,
        predecessors); the two dummy tasks (entry, exit) are kept as zero-time nodes.
    name : str, optional
        The problem's name, also used in messages.

    Returns
    -------
    Problem
    """
    rows: list[list[str]] = []
    for lineno, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if line:
            rows.append([lineno] + line.split())  # type: ignore[list-item]
    if not rows:
        raise FormatError(f"STG file '{name}' is empty")
    try:
        n = int(rows[0][1])
    except ValueError:
        raise FormatError(f"STG file '{name}' line {rows[0][0]}: expected the task count, "
                          f"got {safe(rows[0][1], 40)!r}") from None
    if n < 0:
        raise FormatError(f"STG file '{name}' line {rows[0][0]}: task count {n} must be >= 0")
    tasks = rows[1:]
    if len(tasks) != n + 2:
        raise FormatError(f"STG file '{name}' declares {n} tasks (+2 dummies) but has {len(tasks)} task lines")
    ids: list[str] = []
    time = np.zeros(n + 2)
    src: list[int] = []
    dst: list[int] = []
    position: dict[str, int] = {}
    for i, row in enumerate(tasks):
        lineno, fields = row[0], row[1:]
        try:
            tid, t, npred = fields[0], float(fields[1]), int(fields[2])
        except (IndexError, ValueError):
            raise FormatError(f"STG file '{name}' line {lineno}: expected 'id time npred preds...'") from None
        if not (0 <= t < float("inf")):
            raise FormatError(f"STG file '{name}' line {lineno}: task {tid} has time {fields[1]}; "
                              "it must be a finite number >= 0")
        if npred < 0:
            raise FormatError(f"STG file '{name}' line {lineno}: task {tid} declares {npred} predecessors")
        if len(fields) != 3 + npred:
            raise FormatError(f"STG file '{name}' line {lineno}: task {tid} lists {len(fields) - 3} "
                              f"predecessors but declares {npred}")
        if tid in position:
            raise FormatError(f"STG file '{name}' line {lineno}: duplicate task id {tid}")
        position[tid] = i
        ids.append(tid)
        time[i] = t
    for i, row in enumerate(tasks):
        lineno, fields = row[0], row[1:]
        for pred in fields[3:]:
            if pred not in position:
                raise FormatError(f"STG file '{name}' line {lineno}: task {fields[0]} has unknown predecessor {pred}")
            src.append(position[pred])
            dst.append(i)
    return Problem.from_arrays(ids, time, np.zeros(n + 2), src, dst, np.zeros(len(src)),
                               links=Links(latency=0.0, bandwidth=float("inf")), name=name,
                               meta={"source": "stg"})


def read_stg(path: str | Path) -> Problem:
    """Read an ``.stg`` file; the problem is named after the file.

    Parameters
    ----------
    path : str or pathlib.Path
        The ``.stg`` file (or ``.stg.gz``).

    Returns
    -------
    Problem
    """
    path = Path(path)
    return parse_stg(read_text(path), name=path.stem)
