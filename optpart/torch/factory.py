"""Model factories: the user's function that builds a model and its example inputs.

``optpart import``, ``optpart run`` and :func:`optpart.torch.run_pipeline` take a model as a
*factory*: an importable function, or a ``module:function`` string (``module`` a dotted module
name on the normal ``sys.path`` or a path to a ``.py`` file), that returns ``(module,
example_inputs)``, ``(module, example_inputs, loss_fn)`` or a dict with keys ``module``,
``inputs`` and optionally ``targets`` and ``loss_fn`` (docs/import.md). A string names the same
model in every process of a pipelined run: each process calls the factory, so with a fixed
seed every process builds the same weights.

**This imports and runs the user's code.**
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import traceback
from pathlib import Path
from typing import Any, Callable, Sequence

from ..errors import FormatError

__all__ = ["load_model", "load_factory"]


def load_factory(spec: str, search_path: Sequence[str] = ()) -> Callable:
    """The factory function named by ``spec`` (``module:function``), importing its module (this runs it).

    Parameters
    ----------
    spec : str
        ``package.module:function`` or ``path/to/file.py:function``.
    search_path : sequence of str
        Directories appended to ``sys.path`` (after the installed packages) while the module
        loads; the working directory is not searched otherwise.

    Returns
    -------
    callable
        The factory.

    Raises
    ------
    FormatError
        No such file, module or function, or the module's top level raised (one line).
    """
    if ":" not in spec:
        raise FormatError(f"cannot load the model factory {spec!r}: expected 'package.module:function' or "
                          "'path/to/file.py:function'")
    mod_name, fn_name = spec.rsplit(":", 1)
    if mod_name.endswith(".py"):
        path = Path(mod_name)
        if not path.is_file():
            raise FormatError(f"cannot load the model factory {spec!r}: no file {mod_name!r}")
        unit = importlib.util.spec_from_file_location(f"optpart_user_{path.stem}", path)
        if unit is None or unit.loader is None:
            raise FormatError(f"cannot load the model factory {spec!r}: {mod_name!r} is not a Python module")
        module = importlib.util.module_from_spec(unit)
        try:
            unit.loader.exec_module(module)
        except Exception as exc:  # the module's top level failed
            raise _import_failed(spec, mod_name, exc) from exc
    else:
        added = [str(Path(d).resolve()) for d in search_path if str(Path(d).resolve()) not in sys.path]
        sys.path.extend(added)  # after site-packages: user files never shadow installed packages
        try:
            module = importlib.import_module(mod_name)
        except ModuleNotFoundError as exc:
            if exc.name and exc.name != mod_name and not mod_name.startswith(exc.name + "."):
                raise _import_failed(spec, mod_name, exc) from exc  # found; its own import failed
            hint = "" if search_path else " (the working directory is not searched: add --path . or give a .py file)"
            raise FormatError(f"cannot load the model factory {spec!r}: {exc}{hint}") from None
        except Exception as exc:  # the module's top level failed
            raise _import_failed(spec, mod_name, exc) from exc
        finally:
            for d in added:
                sys.path.remove(d)
    factory = getattr(module, fn_name, None)
    if not callable(factory):
        raise FormatError(f"cannot load the model factory {spec!r}: {mod_name} has no function {fn_name!r}")
    return factory


#: The extra that installs a package a model factory may need (pip install 'optpart[EXTRA]').
_EXTRAS = {"torch": "torch", "transformers": "hf", "onnx": "onnx", "accelerate": "accelerate",
           "torchvision": None, "timm": None}


def _extra_hint(exc: BaseException) -> str:
    """``'; pip install -e ".[hf]"'`` when ``exc`` is a missing package an optpart extra installs."""
    name = getattr(exc, "name", None) if isinstance(exc, ModuleNotFoundError) else None
    root = (name or "").split(".")[0]
    if root not in _EXTRAS:
        return ""
    extra = _EXTRAS[root]
    if extra is None:
        return f"; {root} is not installed (pip install {root})"
    also = " (Hugging Face models: optpart[hf], which includes it)" if root == "torch" else ""
    return f"; {root} is not installed: pip install 'optpart[{extra}]'{also} (from a clone: pip install -e \".[{extra}]\")"


def _import_failed(spec: str, mod_name: str, exc: Exception) -> FormatError:
    """The bad-input error for a factory module whose top level raised ``exc``."""
    return FormatError(f"cannot load the model factory {spec!r}: importing {mod_name} raised {_where(exc, True)}"
                       + _extra_hint(exc))


def _where(exc: Exception, top_level: bool = False) -> str:
    """``exc`` in one phrase for a bad-input message: its type, its text and where in the user's
    code it was raised (the deepest line in the first file of the traceback that is not optpart's
    or importlib's).

    Parameters
    ----------
    exc : Exception
        Raised by the user's module or factory.
    top_level : bool
        ``exc`` came from importing the module: the first frame running a module's top level is
        the user's file.

    Returns
    -------
    str
        For example ``"ValueError: my model is broken (zoo.py, line 2)"``.
    """
    if isinstance(exc, SyntaxError) and exc.filename:
        return f"{type(exc).__name__}: {exc.msg} ({exc.filename}, line {exc.lineno})"
    ours = (Path(__file__).resolve(), Path(importlib.__file__).resolve().parent)
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not f.filename.startswith("<")
              and not any(p == ours[0] or p.is_relative_to(ours[1]) for p in [Path(f.filename).resolve()])]
    if top_level:  # import hooks (pytest's, a site-packages loader) may run before the module's code
        frames = [f for f in frames if f.name == "<module>"][:1] + frames
    where = ""
    if frames:
        line = [f for f in frames if f.filename == frames[0].filename][-1]
        where = f" ({frames[0].filename}, line {line.lineno})"
    return f"{type(exc).__name__}: {exc}{where}"


def load_model(factory: str | Callable, search_path: Sequence[str] = ()) -> tuple[Any, Any, dict]:
    """Call a model factory: ``(module, example_inputs, extra)``.

    Parameters
    ----------
    factory : str or callable
        A ``module:function`` string (:func:`load_factory`) or the function itself.
    search_path : sequence of str
        As :func:`load_factory` takes it (strings only).

    Returns
    -------
    tuple
        The module, its example inputs and ``extra``: ``{"targets": ..., "loss_fn": ...}`` for
        what the factory gave of those.

    Raises
    ------
    FormatError
        The factory cannot be loaded, raises, or returns something else (one line).
    """
    spec = factory if isinstance(factory, str) else getattr(factory, "__qualname__", repr(factory))
    fn = load_factory(factory, search_path) if isinstance(factory, str) else factory
    try:
        made = fn()
    except Exception as exc:  # the user's code failed: bad input, not a bug of optpart
        raise FormatError(f"the model factory {spec!r} raised {_where(exc)}{_extra_hint(exc)}") from exc
    extra: dict = {}
    if isinstance(made, dict):
        if "module" not in made or "inputs" not in made:
            raise FormatError(f"{spec}() returned a dict without 'module' and 'inputs' (it has {sorted(made)})")
        module, inputs = made["module"], made["inputs"]
        extra = {k: made[k] for k in ("targets", "loss_fn") if k in made}
    elif isinstance(made, tuple) and len(made) in (2, 3):
        module, inputs = made[0], made[1]
        if len(made) == 3:
            extra["loss_fn"] = made[2]
    else:
        raise FormatError(f"{spec}() must return (module, example_inputs), (module, example_inputs, loss_fn) "
                          f"or a dict with 'module' and 'inputs'; it returned {type(made).__name__}")
    return module, inputs, extra
