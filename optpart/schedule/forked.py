"""One construction in a second process, beside the caller's: same schedule, less wall time.

A portfolio of list schedulers (the heuristic's HEFT and m-ETF) has independent members,
each a pure-Python loop of seconds at 10^6 nodes. :class:`Forked` runs one of them in a
child made with ``os.fork`` (it inherits the built graph, nothing is copied until written)
while the caller runs another, and hands back its :class:`~optpart.schedule.eft.EftSchedule`
bit for bit (placements as int32, times as float64, read from a pipe straight into arrays). Deterministic: the
schedule is the function's, whichever process computes it.

Used only where it can pay: on Linux (``fork`` is the start method there; macOS and Windows
get no child), with two or more CPUs this process may use, and for constructions large
enough that the fork and the transfer are small beside them. When the child cannot start
or dies without an answer (killed, out of memory), :meth:`Forked.result` runs the function
in the caller instead, so a result never depends on the child.
"""

from __future__ import annotations

import json
import os
import struct
import sys
import warnings
from typing import Callable

import numpy as np

from .eft import EftSchedule, NoRoom, TimeUp

__all__ = ["Forked", "cpus_available"]


def cpus_available() -> int:
    """How many CPUs this process may run on.

    Returns
    -------
    int
        The CPUs of its affinity mask (``os.cpu_count()`` where there is none; 1 when unknown).
    """
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count() or 1


class Forked:
    """``fn()`` started in a forked child (or, where that is not possible, run on demand).

    Parameters
    ----------
    fn : callable
        Builds a schedule: returns an :class:`EftSchedule` or raises :class:`NoRoom` or
        :class:`TimeUp` (passed on to the caller by :meth:`result`).

    Notes
    -----
    Use as a context manager (or call :meth:`close`): a child still running when the
    caller no longer needs it is killed.
    """

    def __init__(self, fn: Callable[[], EftSchedule]) -> None:
        self._fn = fn
        self._pid = 0
        self._read = -1
        self.forked = False
        if not sys.platform.startswith("linux") or cpus_available() < 2:
            return
        try:
            r, w = os.pipe()
        except OSError:  # pragma: no cover - out of file descriptors
            return
        try:
            # Python 3.12+ warns when a process with threads forks (the CLI's progress line has
            # one): a child could deadlock on a lock another thread held. This child only runs
            # the construction and writes to its pipe (CPython resets the GIL and the import lock
            # in it; it takes no other lock), so the warning does not apply.
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message=".*fork", category=DeprecationWarning)
                pid = os.fork()
        except OSError:  # pragma: no cover - out of processes or memory
            os.close(r)
            os.close(w)
            return
        if pid == 0:  # the child: compute, send, leave without running the parent's exit hooks
            os.close(r)
            code = 0
            try:
                _send(w, fn)
            except BaseException:  # noqa: BLE001 - any failure: the parent computes it itself
                code = 1
            finally:
                os._exit(code)
        os.close(w)
        self._pid, self._read, self.forked = pid, r, True

    def result(self) -> EftSchedule:
        """The schedule (waiting for the child), or the exception ``fn`` raised.

        Returns
        -------
        EftSchedule

        Raises
        ------
        NoRoom, TimeUp
            As ``fn`` did.
        """
        answer = self._receive() if self.forked else None
        if answer is None:  # no child, or it died without an answer: compute it here
            return self._fn()
        kind, payload = answer
        if kind == "no room":
            raise NoRoom(*payload)
        if kind == "time up":
            raise TimeUp(payload)
        place, start, finish = payload
        return EftSchedule(place.tolist(), start.tolist(), finish.tolist())

    def close(self) -> None:
        """Kill the child if it still runs, and reap it."""
        if self._read >= 0:
            os.close(self._read)
            self._read = -1
        if self._pid:
            try:
                os.kill(self._pid, 9)
            except ProcessLookupError:  # pragma: no cover - already gone
                pass
            self._reap()

    def __enter__(self) -> "Forked":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _receive(self):
        """The child's answer, or None when it sent none (or a truncated one)."""
        try:
            head = bytearray(_HEAD.size)
            kind, n, size = _HEAD.unpack(head) if _read_exactly(self._read, head) else (-1, 0, 0)
            answer = None
            if kind == _DONE:  # the arrays, read straight into their buffers
                arrays = (np.empty(n, dtype=np.int32), np.empty(n, dtype=np.float64), np.empty(n, dtype=np.float64))
                if all(_read_exactly(self._read, a) for a in arrays):
                    answer = ("done", arrays)
            elif kind in (_NO_ROOM, _TIME_UP):
                body = bytearray(size)
                if _read_exactly(self._read, body):
                    answer = ("no room", tuple(json.loads(body))) if kind == _NO_ROOM else ("time up", json.loads(body))
        finally:
            os.close(self._read)
            self._read = -1
        return answer if self._reap() == 0 else None

    def _reap(self) -> int:
        pid, self._pid = self._pid, 0
        if not pid:
            return -1
        _, status = os.waitpid(pid, 0)
        return os.waitstatus_to_exitcode(status)


_HEAD = struct.Struct("<qqq")  # kind, nodes, bytes of the message that follows (not of the arrays)
_DONE, _NO_ROOM, _TIME_UP = 0, 1, 2


def _send(fd: int, fn: Callable[[], EftSchedule]) -> None:
    """Run ``fn`` and write its answer: a header, then the three arrays or a JSON message."""
    with os.fdopen(fd, "wb") as out:
        try:
            res = fn()
        except NoRoom as e:
            body = json.dumps([e.node, e.message]).encode()
            out.write(_HEAD.pack(_NO_ROOM, 0, len(body)) + body)
            return
        except TimeUp as e:
            body = json.dumps(str(e)).encode()
            out.write(_HEAD.pack(_TIME_UP, 0, len(body)) + body)
            return
        n = len(res.place)
        out.write(_HEAD.pack(_DONE, n, 0))
        out.write(np.asarray(res.place, dtype=np.int32).data)
        res.place = None
        out.write(np.asarray(res.start, dtype=np.float64).data)
        res.start = None
        out.write(np.asarray(res.finish, dtype=np.float64).data)


def _read_exactly(fd: int, buf) -> bool:
    """Fill ``buf`` (a writable buffer: a bytearray, an array) from ``fd``; False when the
    stream ends first."""
    view = memoryview(buf).cast("B")
    pos = 0
    while pos < len(view):
        got = os.readv(fd, [view[pos:]])
        if got == 0:
            return False
        pos += got
    return True
