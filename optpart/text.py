"""Text from input files made safe to show: on a terminal, in one error line, in a plot.

Node, device and problem names come from files that anyone may write. Printed raw,
an ANSI escape sequence in a node id can rewrite the user's terminal, a newline can
forge a second error line, and a ``$`` makes matplotlib parse the label as TeX
(and fail on it). Every place that shows such text calls :func:`safe` (terminal,
errors) or :func:`plot_safe` (matplotlib labels).
"""

from __future__ import annotations

__all__ = ["safe", "plot_safe"]

#: Longest text :func:`safe` keeps by default; the rest is replaced by an ellipsis.
DEFAULT_LIMIT = 2000
_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def safe(text: object, limit: int | None = DEFAULT_LIMIT) -> str:
    """``text`` with every non-printable character escaped, cut to ``limit`` characters.

    Control characters (ESC, newline, carriage return, bidi overrides, ...) become
    Python-style escapes (``\\x1b``, ``\\n``, ``\\u202e``), so the result is one line
    that cannot drive a terminal.

    Parameters
    ----------
    text : object
        Any value (a node id, a file's field); ``str(text)`` is escaped.
    limit : int or None, optional
        The most characters kept (then ``...``); None keeps all.

    Returns
    -------
    str
        Printable, one-line text, safe for a terminal or a log.

    Examples
    --------
    >>> safe("conv\\x1b[31m1")
    'conv\\\\x1b[31m1'
    >>> safe("a" * 10, limit=4)
    'aaaa...'
    """
    s = str(text)
    if limit is not None and len(s) > limit:
        s = s[:limit] + "..."
    if s.isprintable():
        return s
    out = []
    for ch in s:
        if ch.isprintable():
            out.append(ch)
        elif ch in _SHORT:
            out.append(_SHORT[ch])
        else:
            code = ord(ch)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
    return "".join(out)


def plot_safe(text: object, limit: int | None = 200) -> str:
    """:func:`safe` text that matplotlib draws literally: ``$`` is escaped so that it is
    never read as the start of TeX math.

    Parameters
    ----------
    text : object
        A label.
    limit : int or None, optional
        The most characters kept.

    Returns
    -------
    str
        The label, escaped for matplotlib.

    Examples
    --------
    >>> plot_safe("cost$1")
    'cost\\\\$1'
    """
    return safe(text, limit).replace("$", r"\$")
