"""One progress helper for long imports and solves: a live bar on a terminal, silent otherwise.

Usage::

    from optpart.progress import progress

    with progress("tracing GPT2LMHeadModel") as bar:
        bar.stage("counting FLOPs")        # what is being done now
        for item in items:
            bar.advance()                   # one unit of work (shown when ``total`` is known)
        bar.note("fake tracing failed; traced with real tensors")  # one line above the bar

The bar is drawn with `tqdm <https://tqdm.github.io>`_ on standard error, only when
standard error is a terminal and quiet mode is off (:func:`set_quiet`, the CLI's
``-q/--quiet``, or ``OPTPART_QUIET=1`` in the environment). When it is not drawn, or when
tqdm is not installed (the ``progress`` extra), nothing is printed at all; notes are also
recorded in what the caller gets back (``problem.meta["trace_notes"]`` for an import), so
piped output and test logs stay clean and nothing is lost.
"""

from __future__ import annotations

import os
import sys
import threading
from contextlib import contextmanager
from typing import Iterator

__all__ = ["Progress", "progress", "set_quiet", "quiet", "is_enabled"]

_QUIET = False


def set_quiet(quiet: bool = True) -> None:
    """Turn every progress display of this process off (``True``) or back on (``False``).

    Parameters
    ----------
    quiet : bool, optional
        True silences every display (a library user, a test); False lets
        :func:`is_enabled` decide again.
    """
    global _QUIET
    _QUIET = bool(quiet)


@contextmanager
def quiet(enabled: bool = True) -> Iterator[None]:
    """Quiet mode for the duration of a block (the CLI's ``-q``), restored afterwards.

    Parameters
    ----------
    enabled : bool, optional
        Whether the block is quiet; False keeps the current setting (never un-quiets).

    Yields
    ------
    None
    """
    global _QUIET
    before = _QUIET
    _QUIET = bool(enabled) or before
    try:
        yield
    finally:
        _QUIET = before


def is_enabled() -> bool:
    """True when a progress display would be drawn: a terminal on stderr and quiet mode off.

    Returns
    -------
    bool
    """
    if _QUIET or os.environ.get("OPTPART_QUIET", "") not in ("", "0"):
        return False
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # closed or replaced stream
        return False


class Progress:
    """A handle on one running task; every method is a no-op when the display is off."""

    def __init__(self, description: str, total: int | None, enabled: bool):
        self.description = description
        self._bar = None
        if enabled:
            try:
                from tqdm.auto import tqdm
            except ImportError:  # tqdm is optional (pip install 'optpart[progress]'): then no display
                return
            self._bar = tqdm(total=total, desc=description, file=sys.stderr, leave=False,
                             dynamic_ncols=True, bar_format=None if total else "{desc} {elapsed}")
            if not total:
                # No units to count (one long call, e.g. a solve): redraw the elapsed time
                # twice a second from a daemon thread so the user sees it is working.
                self._stop = threading.Event()
                self._ticker = threading.Thread(target=self._tick, name="optpart-progress", daemon=True)
                self._ticker.start()

    _stop: threading.Event | None = None
    _ticker: threading.Thread | None = None

    def _tick(self) -> None:
        while self._stop is not None and not self._stop.wait(0.5):
            bar = self._bar
            if bar is not None:
                bar.refresh()

    def stage(self, text: str) -> None:
        """Say what is being done now (``'tracing: counting FLOPs'``).

        Parameters
        ----------
        text : str
            The current stage, shown after the description.
        """
        if self._bar is not None:
            self._bar.set_description_str(f"{self.description}: {text}")

    def advance(self, n: int = 1) -> None:
        """Count ``n`` units of work done.

        Parameters
        ----------
        n : int, optional
            Units done since the last call (of ``total``).
        """
        if self._bar is not None:
            self._bar.update(n)

    def note(self, message: str) -> None:
        """Print one line above the bar (a fallback taken, a choice made).

        Parameters
        ----------
        message : str
            The line, printed to stderr without breaking the bar.
        """
        if self._bar is not None:
            self._bar.write(message, file=sys.stderr)

    def close(self) -> None:
        if self._stop is not None:
            self._stop.set()
            if self._ticker is not None:
                self._ticker.join(timeout=1.0)
        if self._bar is not None:
            self._bar.close()
            self._bar = None


@contextmanager
def progress(description: str, *, total: int | None = None, enabled: bool | None = None) -> Iterator[Progress]:
    """Show ``description`` with elapsed time (or a bar when ``total`` is given) while the block runs.

    ``enabled`` forces the display on or off; by default :func:`is_enabled` decides.

    Parameters
    ----------
    description : str
        What runs (``"tracing gpt2"``).
    total : int, optional
        Units of work, for a bar with a count; None shows elapsed time only.
    enabled : bool, optional
        Force the display on or off (default: :func:`is_enabled`).

    Yields
    ------
    Progress
        Call :meth:`Progress.advance`, :meth:`Progress.stage` and :meth:`Progress.note` on it.
    """
    bar = Progress(description, total, is_enabled() if enabled is None else bool(enabled))
    try:
        yield bar
    finally:
        bar.close()
