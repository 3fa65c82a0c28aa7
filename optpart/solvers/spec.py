"""What a solver declares about itself: its options, the memory models it guarantees,
and whether it uses a hint and a time limit.

Each solver module defines ``SPEC = SolverSpec(...)``. The registry checks every
user option against it before the solver runs (type, range, choices), with one
message style for every solver, and ``optpart solvers`` prints it; a solver's ``solve``
is decorated with :meth:`SolverSpec.checked`, so a direct call keeps the same contract
and no solver validates its options by hand. The idea is scikit-learn's
``_parameter_constraints``: state each parameter once, let the framework validate and
word the errors.

>>> spec = SolverSpec(options=(Option("effort", float, 1.0, "search effort", min=0),))
>>> spec.validate("heuristic", {"effort": "2"})
{'effort': 2.0}
>>> spec.validate("heuristic", {"effort": -1})
Traceback (most recent call last):
...
optpart.errors.SolverError: heuristic: option effort=-1 must be >= 0
"""

from __future__ import annotations

import functools
import inspect
import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping, TypeVar

from ..errors import SolverError

__all__ = ["Option", "SolverSpec", "MEMORY_MODELS"]

#: The memory models of docs/model.md section 3.
MEMORY_MODELS = ("static", "peak")

_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


class _NotThisType(Exception):
    """Raised by a converter: the value is not of the option's type."""


def _to_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    raise _NotThisType


def _to_int(value: Any) -> int:
    if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
        raise _NotThisType
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        raise _NotThisType from None


def _to_float(value: Any) -> float:
    if isinstance(value, bool):
        raise _NotThisType
    try:
        out = float(value)
    except (TypeError, ValueError, OverflowError):
        raise _NotThisType from None
    if math.isnan(out):
        raise _NotThisType
    return out


def _to_dict(value: Any) -> dict:
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise _NotThisType
    return dict(value)


def _to_str(value: Any) -> str:
    if not isinstance(value, str):
        raise _NotThisType
    return value


#: One converter per option type, and the words for "a value of that type".
F = TypeVar("F", bound=Callable[..., Any])

#: The arguments of every solver's signature (docs: optpart/solvers/base.py), not options.
_COMMON = ("time_limit", "seed", "hint", "memory_model")

_CONVERT = {bool: _to_bool, int: _to_int, float: _to_float, dict: _to_dict, str: _to_str}
_KIND = {bool: "true or false", int: "an integer", float: "a number", dict: "a mapping of names to values",
         str: "a string"}


@dataclass(frozen=True)
class Option:
    """One solver option: name, type (bool, int, float, str, or dict for raw backend
    parameters), default and a one-line help.

    ``min``/``max`` bound numbers (inclusive), ``finite`` refuses infinities, ``choices``
    lists the allowed values, ``allow_none`` lets ``None`` through (meaning "the solver
    decides").
    """

    name: str
    type: type
    default: Any
    help: str
    min: float | None = None
    max: float | None = None
    choices: tuple = ()
    allow_none: bool = False
    finite: bool = False

    def coerce(self, solver: str, value: Any) -> Any:
        """The value converted to the option's type, or :class:`SolverError` naming it.

        Parameters
        ----------
        solver : str
            The solver's name, for the message.
        value : object
            The value given (a string from the CLI's ``-o key=value``, or a Python value).

        Returns
        -------
        object
            The value as the option's type, within its range and choices (None when allowed).
        """
        where = f"{solver}: option {self.name}={value!r}"
        if value is None:
            if self.allow_none:
                return None
            raise SolverError(f"{where} must be a {self.type.__name__}")
        convert = _CONVERT.get(self.type)
        if convert is None:  # pragma: no cover - a spec bug, not a user error
            raise TypeError(f"option {self.name}: unsupported type {self.type!r}")
        try:
            out = convert(value)
        except _NotThisType:
            raise SolverError(f"{where} must be {_KIND[self.type]}") from None
        if self.finite and not math.isfinite(out):
            raise SolverError(f"{where} must be a finite number")
        if self.choices and out not in self.choices:
            raise SolverError(f"{where} must be one of: {', '.join(map(str, self.choices))}")
        if self.min is not None and out < self.min:
            raise SolverError(f"{where} must be >= {self.min:g}")
        if self.max is not None and out > self.max:
            raise SolverError(f"{where} must be <= {self.max:g}")
        return out

    def describe(self) -> str:
        """``effort (float >= 0, default 1): search effort``.

        Returns
        -------
        str
        """
        kind = self.type.__name__
        if self.choices:
            kind = "|".join(map(str, self.choices))
        rng = []
        if self.min is not None:
            rng.append(f">= {self.min:g}")
        if self.max is not None:
            rng.append(f"<= {self.max:g}")
        bits = " ".join([kind, *rng])
        return f"{self.name} ({bits}, default {self.default!r}): {self.help}"


@dataclass(frozen=True)
class SolverSpec:
    """What a solver declares (see the module docstring).

    ``memory_models``: the models whose fit the solver guarantees for every placement it
    returns. ``uses_hint``/``uses_time_limit``: whether it reads those arguments at all
    (the registry says so when a caller passes one to a solver that ignores it).
    """

    options: tuple[Option, ...] = ()
    memory_models: tuple[str, ...] = ("static",)
    uses_hint: bool = False
    uses_time_limit: bool = False

    def option(self, name: str) -> Option | None:
        """The declared option called ``name``, or None.

        Parameters
        ----------
        name : str
            The option's name.

        Returns
        -------
        Option or None
        """
        return next((o for o in self.options if o.name == name), None)

    def validate(self, solver: str, options: Mapping[str, Any]) -> dict[str, Any]:
        """Check and convert user options; unknown names are an error listing the valid ones.

        Parameters
        ----------
        solver : str
            The solver's name, for messages.
        options : mapping of str to object
            The options given.

        Returns
        -------
        dict
            Each option converted (:meth:`Option.coerce`), in sorted name order.

        Raises
        ------
        SolverError
            Naming an unknown option (with the valid ones) or a bad value.
        """
        out: dict[str, Any] = {}
        for key in sorted(options):
            opt = self.option(key)
            if opt is None:
                known = ", ".join(o.name for o in self.options) or "none"
                raise SolverError(f"{solver}: no option '{key}'; its options: {known}")
            out[key] = opt.coerce(solver, options[key])
        return out

    def defaults(self) -> dict[str, Any]:
        """Every declared option at its default.

        Returns
        -------
        dict
            Option name -> default value.
        """
        return {o.name: o.default for o in self.options}

    def checked(self, solver: str) -> Callable[[F], F]:
        """A decorator: the solver's ``solve`` keeps this spec however it is called.

        Before ``solve`` runs, ``memory_model`` must be one the solver guarantees and every
        option is checked and converted by :meth:`validate` (so the registry's checks also
        hold for a direct call, and no solver repeats them by hand).

        Parameters
        ----------
        solver : str
            The solver's name, for messages.

        Returns
        -------
        callable
            ``wrap(solve) -> solve`` with the same signature and docstring.
        """
        def wrap(fn: F) -> F:
            default_model = inspect.signature(fn).parameters["memory_model"].default

            @functools.wraps(fn)
            def solve(problem: Any, **kwargs: Any) -> Any:
                model = kwargs.get("memory_model", default_model)
                if model not in self.memory_models:
                    raise SolverError(f"{solver}: memory_model={model!r} must be one of: "
                                      f"{', '.join(self.memory_models)}")
                options = self.validate(solver, {k: v for k, v in kwargs.items() if k not in _COMMON})
                return fn(problem, **{**kwargs, **options})

            return solve  # type: ignore[return-value]

        return wrap
