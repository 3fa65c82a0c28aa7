"""Where the runs of a sweep execute: this process, a local process pool, or a Dask cluster.

Every executor has the same small interface, used by :func:`optpart.bench.sweep.run_sweep`:
``submit(fn, arg)`` returns a handle, ``wait_any(handles)`` blocks until at least one is
done and returns ``(done, pending)``, ``outcome(handle)`` returns ``fn(arg)`` or raises
what it raised, ``capacity`` is how many runs are worth having in flight, and
``close()`` releases the workers. The sweep keeps at most ``capacity`` runs in flight,
so killing it loses at most those.

* :class:`InlineExecutor` runs each run at submission, in this process (tests, debugging).
* :class:`LocalExecutor` wraps :class:`concurrent.futures.ProcessPoolExecutor`: a solver
  that crashes its process costs the runs in flight (error rows), not the sweep; the pool restarts.
* :class:`DaskExecutor` submits to an existing ``dask.distributed`` scheduler
  (``dask://HOST:PORT``); ``distributed`` is imported only here, and only when asked for
  (the optional ``dask`` extra). Results come back to the one process that owns the database.
  Dask ships runs and results with ``pickle``, and unpickling a result runs code chosen by
  whoever sent it: use only schedulers and workers you control (``docs/bench.md``).
"""

from __future__ import annotations

import abc
import concurrent.futures as cf
import multiprocessing
import os
import signal
import sys
import threading
import time
from typing import Any, Callable, Iterable

from ..errors import OptpartError
from ..limits import check_jobs

__all__ = ["Executor", "InlineExecutor", "LocalExecutor", "DaskExecutor", "make_executor"]


class Executor(abc.ABC):
    """The interface (see the module docstring)."""

    capacity: int = 1

    def submit(self, fn: Callable[[Any], Any], arg: Any) -> Any:
        """Start ``fn(arg)``.

        Parameters
        ----------
        fn : callable
            A picklable function of one argument (:func:`optpart.bench.sweep.run_one`).
        arg : object
            Its argument (picklable: it may travel to another process or machine).

        Returns
        -------
        object
            A handle for :meth:`wait_any` and :meth:`outcome`.
        """
        return self._submit(fn, arg)

    def wait_any(self, handles: Iterable[Any]) -> tuple[set, set]:
        """Block until at least one handle is done.

        Parameters
        ----------
        handles : iterable
            Handles returned by :meth:`submit`.

        Returns
        -------
        done, pending : set
            The handles finished, and the others.
        """
        return self._wait_any(set(handles))

    def outcome(self, handle: Any) -> Any:
        """The value of a finished call, or raise its exception.

        Parameters
        ----------
        handle : object
            A handle :meth:`wait_any` reported done.

        Returns
        -------
        object
            What ``fn(arg)`` returned.
        """
        return handle.result()

    @abc.abstractmethod
    def _submit(self, fn: Callable[[Any], Any], arg: Any) -> Any:
        """Start ``fn(arg)``; return a future-like handle (with ``result()``)."""

    @abc.abstractmethod
    def _wait_any(self, handles: set) -> tuple[set, set]:
        """``(done, pending)`` once at least one of ``handles`` is done."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release the workers."""

    def terminate(self) -> None:
        """Stop the runs in flight at once (the sweep was interrupted); ``close`` follows."""

    def __enter__(self) -> "Executor":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class InlineExecutor(Executor):
    """Runs each function call in this process, at submission."""

    capacity = 1

    def _submit(self, fn, arg):
        future: cf.Future = cf.Future()
        try:
            future.set_result(fn(arg))
        except Exception as exc:  # recorded by the sweep as an error row
            future.set_exception(exc)
        return future

    def _wait_any(self, handles):
        return handles, set()

    def close(self) -> None:
        pass


def _parent_alive(parent_pid: int) -> bool:
    return os.getppid() == parent_pid


def _watch_parent(parent_pid: int, period_s: float) -> None:
    while True:
        time.sleep(period_s)
        if not _parent_alive(parent_pid):
            os._exit(1)


def _die_with_parent(parent_pid: int, period_s: float = 0.5) -> None:
    """Worker initializer: end this worker when the sweep's process dies, even by ``kill -9``.

    On Linux the kernel sends SIGKILL at once (``prctl(PR_SET_PDEATHSIG)``, man 2 prctl;
    the pool's workers are started by the thread that submits, which lives as long as
    the sweep). Everywhere, a daemon thread also polls ``os.getppid()`` and exits when
    the parent is gone: a worker never outlives its sweep by more than ``period_s``
    (unless a solver holds the GIL), so it never holds the caller's pipes open.
    """
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # 1 = PR_SET_PDEATHSIG
        except (OSError, AttributeError):  # no libc symbol: the watchdog below still works
            pass
    if not _parent_alive(parent_pid):  # the parent died before prctl took effect
        os._exit(1)
    threading.Thread(target=_watch_parent, args=(parent_pid, period_s), daemon=True,
                     name="optpart-parent-watchdog").start()


class LocalExecutor(Executor):
    """A pool of ``jobs`` worker processes on this machine.

    Workers start with the ``spawn`` method: a fresh interpreter does not inherit
    the parent's threads or locks (safe beside Dask, pytest, notebooks). They die
    with the process that made the pool (:func:`_die_with_parent`), and
    :meth:`terminate` kills them at once when a sweep is interrupted.
    """

    def __init__(self, jobs: int = 1) -> None:
        if jobs < 1:
            raise OptpartError(f"--jobs {jobs} must be at least 1")
        check_jobs(jobs)
        self.capacity = jobs
        self._jobs = jobs
        self._pool = self._new_pool()

    def _new_pool(self) -> cf.ProcessPoolExecutor:
        return cf.ProcessPoolExecutor(max_workers=self._jobs, mp_context=multiprocessing.get_context("spawn"),
                                      initializer=_die_with_parent, initargs=(os.getpid(),))

    def _submit(self, fn, arg):
        try:
            return self._pool.submit(fn, arg)
        except cf.process.BrokenProcessPool:
            # A worker died (killed, out of memory): the runs it held are lost; start a new pool.
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = self._new_pool()
            return self._pool.submit(fn, arg)

    def _wait_any(self, handles):
        done, pending = cf.wait(list(handles), return_when=cf.FIRST_COMPLETED)
        return set(done), set(pending)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    def terminate(self) -> None:
        # The pool has no public "kill the workers"; its process table is the only handle.
        for proc in list(getattr(self._pool, "_processes", {}).values()):
            try:
                proc.kill()
            except (OSError, ValueError, AttributeError):
                pass
        self._pool.shutdown(wait=False, cancel_futures=True)


class DaskExecutor(Executor):
    """Runs on an existing Dask cluster, given its scheduler address.

    ``capacity`` is the cluster's total worker threads when the sweep starts (at least 1),
    times two so that workers do not wait for the next run.
    """

    def __init__(self, address: str, timeout_s: float = 20.0) -> None:
        try:
            from dask.distributed import Client
        except ImportError:
            raise OptpartError("the dask executor needs dask.distributed: pip install 'optpart[dask]'") from None
        try:
            self._client = Client(address, timeout=f"{timeout_s}s", set_as_default=False)
        except (OSError, TimeoutError) as exc:
            raise OptpartError(f"cannot reach the Dask scheduler at {address}: {exc}") from None
        threads = sum(self._client.nthreads().values())
        self.capacity = max(1, 2 * threads)

    def _submit(self, fn, arg):
        # pure=False: two runs with equal arguments are still two runs.
        return self._client.submit(fn, arg, pure=False)

    def _wait_any(self, handles):
        from dask.distributed import wait
        with self._client.as_current():  # wait() looks for the current client; ours is not the default
            done, pending = wait(list(handles), return_when="FIRST_COMPLETED")
        return set(done), set(pending)

    def close(self) -> None:
        self._client.close()


def make_executor(spec: str | None = None, jobs: int = 1) -> Executor:
    """The executor named by ``spec``: ``None``/``"local"`` (a pool of ``jobs`` processes),
    ``"inline"`` (this process), or ``"dask://HOST:PORT"`` / ``"tcp://HOST:PORT"`` (a Dask scheduler).

    Parameters
    ----------
    spec : str, optional
        The executor (``--executor``).
    jobs : int, optional
        Worker processes of the local pool (``--jobs``; bounded by ``OPTPART_MAX_JOBS``).

    Returns
    -------
    Executor

    Raises
    ------
    OptpartError
        For an unknown spec.
    """
    if spec in (None, "", "local"):
        return LocalExecutor(jobs)
    if spec == "inline":
        return InlineExecutor()
    if spec.startswith("dask://"):
        return DaskExecutor("tcp://" + spec[len("dask://"):])
    if spec.startswith(("tcp://", "tls://")):
        return DaskExecutor(spec)
    raise OptpartError(f"--executor {spec!r}: expected 'local', 'inline' or 'dask://HOST:PORT'")
