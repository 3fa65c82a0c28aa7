"""Exceptions raised by optpart.

Every error that a user can cause derives from :class:`OptpartError`, so callers
(and the command line) catch one type. Messages name the offending node, edge,
device or field and the values involved.

Outcomes of solving (infeasible, time limit reached with nothing found) are not
exceptions: they are statuses on a :class:`optpart.result.Result`.
"""

__all__ = [
    "OptpartError",
    "ProblemError",
    "FormatError",
    "SolverError",
    "ScheduleError",
    "RecordError",
]


class OptpartError(Exception):
    """Root of every error optpart raises on purpose."""


class ProblemError(OptpartError, ValueError):
    """The problem is malformed: a cycle, a duplicate id, a bad number, an unknown reference."""


class FormatError(OptpartError, ValueError):
    """A file could not be read: unknown format or version, missing field, bad JSON."""


class SolverError(OptpartError):
    """A solver is unknown, not installed, misused, or returned an invalid answer."""


class ScheduleError(OptpartError):
    """A result breaks the rules of the model (raised by :func:`optpart.check`)."""


class RecordError(ProblemError, FormatError):
    """A JSON-shaped record (node, edge, device, links, constraints) is malformed: an
    unknown or missing field, a value of the wrong type. One error for
    :meth:`optpart.Problem.build` (a :class:`ProblemError`) and the JSON format (a
    :class:`FormatError`), so both catch it as they always did."""
