"""The progress line of a sweep (:func:`optpart.bench.sweep.run_sweep`): a count, the elapsed
time and an ETA on standard error, from the start of the first run."""

from __future__ import annotations

import time
from typing import Any, TextIO

__all__ = ["Progress"]


class Progress:
    """A plain-text progress line with an ETA: rewritten in place with ``\\r`` on a
    terminal, one line per finished run otherwise (logs, CI)."""

    def __init__(self, total: int, stream: TextIO | None = None, skipped: int = 0) -> None:
        self.total, self.done, self.errors = total, 0, 0
        self.stream = stream
        self.tty = bool(stream is not None and getattr(stream, "isatty", lambda: False)())
        self.t0 = time.monotonic()
        self._width = 0
        if stream is not None:
            print(f"optpart bench: {total} run(s) to go" + (f", {skipped} already in the database" if skipped else "")
                  + ("" if self.tty else "; one line per finished run"), file=stream, flush=True)

    def started(self, spec: Any) -> None:
        """Say that a run started, on a terminal only before the first one finishes (so the
        line shows from the first second, not after the first run).

        Parameters
        ----------
        spec : RunSpec
            The run submitted.
        """
        if self.stream is None or not self.tty or self.done:
            return
        line = f"[0/{self.total}] running {spec.solver} on {spec.problem.name} K={spec.devices} x{spec.memory_scale:g}"
        pad = max(0, self._width - len(line))
        self._width = len(line)
        self.stream.write("\r" + line + " " * pad)
        self.stream.flush()

    def update(self, spec: Any, status: str) -> None:
        """Count one finished run and redraw the line.

        Parameters
        ----------
        spec : RunSpec
            The run (named on non-terminal streams).
        status : str
            Its status (``"error"`` is counted apart).
        """
        self.done += 1
        self.errors += status == "error"
        if self.stream is None:
            return
        elapsed = time.monotonic() - self.t0
        eta = elapsed / self.done * (self.total - self.done)
        line = (f"[{self.done}/{self.total}] {self.done / max(self.total, 1):4.0%} "
                f"elapsed {_clock(elapsed)} eta {_clock(eta)}"
                + (f" errors {self.errors}" if self.errors else "")
                + f" | {spec.solver} on {spec.problem.name} K={spec.devices} x{spec.memory_scale:g}: {status}")
        if self.tty:
            pad = max(0, self._width - len(line))
            self._width = len(line)
            self.stream.write("\r" + line + " " * pad)
            if self.done == self.total:
                self.stream.write("\n")
        else:
            self.stream.write(line + "\n")
        self.stream.flush()


def _clock(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"
