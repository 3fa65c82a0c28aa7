"""Size limits checked before optpart allocates memory for untrusted input.

A hostile or mistaken input can ask for more memory than the machine has: a small
gzip file that inflates without end, ``--devices 100000`` (two ``k x k`` link
matrices), a node count that no file backs. Each limit below is checked before the
allocation and, when exceeded, raises one line naming the value, the limit and
the environment variable that raises it.

=========================  ==================  ==========================================
limit                      default             environment variable
=========================  ==================  ==========================================
decompressed input size    1 GiB               ``OPTPART_MAX_INPUT_BYTES``
device count               1024                ``OPTPART_MAX_DEVICES``
nodes x devices            2^28 cells          ``OPTPART_MAX_CELLS``
bench worker processes     256                 ``OPTPART_MAX_JOBS``
=========================  ==================  ==========================================

The list schedulers keep the ``k x k`` link matrices as nested Python lists, and solvers keep
``n x k`` tables (the allowed-device mask, earliest finish times): 2 GiB at 2^28 float64 cells.
"""

from __future__ import annotations

import os

from .errors import OptpartError, ProblemError

__all__ = ["max_input_bytes", "max_devices", "check_devices", "check_cells", "check_jobs", "DEFAULT_MAX_INPUT_BYTES", "DEFAULT_MAX_DEVICES"]

DEFAULT_MAX_INPUT_BYTES = 2**30
DEFAULT_MAX_DEVICES = 1024
DEFAULT_MAX_JOBS = 256
DEFAULT_MAX_CELLS = 2**28


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise OptpartError(f"environment variable {name}={raw!r} must be a positive integer") from None
    if value < 1:
        raise OptpartError(f"environment variable {name}={raw!r} must be a positive integer")
    return value


def max_input_bytes() -> int:
    """Largest (decompressed) input file optpart reads, in bytes.

    Returns
    -------
    int
        Bytes.
    """
    return _env_int("OPTPART_MAX_INPUT_BYTES", DEFAULT_MAX_INPUT_BYTES)


def max_devices() -> int:
    """Largest device count a problem may have.

    Returns
    -------
    int
    """
    return _env_int("OPTPART_MAX_DEVICES", DEFAULT_MAX_DEVICES)


def check_devices(k: int, what: str = "device count") -> None:
    """Raise :class:`OptpartError` when ``k`` devices exceed :func:`max_devices`.

    Parameters
    ----------
    k : int
        The device count asked for (a file's devices, ``--devices K``).
    what : str, optional
        What is counted, for the message (``"field 'devices': device count"``).

    Raises
    ------
    ProblemError
        One line naming ``what``, ``k`` and the limit (``OPTPART_MAX_DEVICES`` raises it).
    """
    limit = max_devices()
    if k > limit:
        raise ProblemError(f"{what} {k} exceeds the limit of {limit} devices "
                           f"(set OPTPART_MAX_DEVICES to raise it)")


def check_jobs(jobs: int) -> None:
    """Raise :class:`OptpartError` when ``jobs`` worker processes exceed ``OPTPART_MAX_JOBS`` (256).

    Parameters
    ----------
    jobs : int
        Worker processes asked for (``--jobs``).

    Raises
    ------
    OptpartError
        One line naming ``--jobs`` and the limit.
    """
    limit = _env_int("OPTPART_MAX_JOBS", DEFAULT_MAX_JOBS)
    if jobs > limit:
        raise OptpartError(f"--jobs {jobs} exceeds the limit of {limit} worker processes "
                           "(set OPTPART_MAX_JOBS to raise it)")


def check_cells(n_nodes: int, n_devices: int) -> None:
    """Raise :class:`ProblemError` when ``n_nodes x n_devices`` exceeds ``OPTPART_MAX_CELLS``.

    Parameters
    ----------
    n_nodes : int
        Node count of the graph.
    n_devices : int
        Device count; per-node, per-device tables (allowed masks, costs) hold
        ``n_nodes * n_devices`` cells, so their product is what must stay bounded.

    Raises
    ------
    ProblemError
        One line giving both counts, their product and the limit.
    """
    limit = _env_int("OPTPART_MAX_CELLS", DEFAULT_MAX_CELLS)
    if n_nodes * n_devices > limit:
        raise ProblemError(f"{n_nodes} nodes x {n_devices} devices = {n_nodes * n_devices} node-device pairs "
                           f"exceeds the limit of {limit} (per-node, per-device tables would not fit; "
                           "set OPTPART_MAX_CELLS to raise it)")
