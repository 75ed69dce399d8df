"""A chain of filter specs in one string, as ``-vf`` takes it: ``gaussian:sigma=2,size=5,edge``.

A spec's parameters are already separated by commas (``NAME:KEY=VALUE,KEY=VALUE``), and a value
may hold commas itself (``custom:taps=0,-1,0;-1,5,-1;0,-1,0``), so a comma alone cannot end a
filter. The rule that keeps splitting unambiguous: a comma starts the next filter exactly where
what follows it is a bare name, alone or before ``:`` (``edge``, ``box:size=5``); a ``KEY=VALUE``
or a piece of a value (``-1``, ``0;-1``, ``b.npy``) continues the filter before it. A value
piece that is itself a bare name (``file=my,weights``) keeps its comma as ``\\,``.

Unlike FFmpeg's ``-vf``, the parameters are streamconv's (``NAME:KEY=VALUE,...``, not
``name=key=value:key=value``), and ``;`` belongs to custom taps, not to filter graphs.
"""

from __future__ import annotations

import re

from ..errors import FilterSpecError

_ESCAPED_COMMA = "\\,"
_NEXT_FILTER = re.compile(r"\s*[A-Za-z][A-Za-z0-9_-]*\s*(:|$)", re.DOTALL)


def split_chain(text: str) -> list[str]:
    """The filter specs of a ``-vf`` chain, in order (each as ``--filter`` takes one).

    Raises:
        FilterSpecError: the chain, or a filter in it, is empty (``edge,,box``, a trailing comma).
    """
    if not text.strip():
        raise FilterSpecError("the filter chain is empty")
    specs: list[str] = []
    for piece in _pieces(text):
        if not piece.strip():
            raise FilterSpecError("an empty filter in the chain (two commas in a row, or one "
                                  "at an end)")
        if specs and not _NEXT_FILTER.match(piece):
            specs[-1] += "," + piece
        else:
            specs.append(piece)
    return [spec.strip() for spec in specs]


def _pieces(text: str) -> list[str]:
    """``text`` split at its commas, ``\\,`` kept as a comma inside a piece."""
    parts = text.split(_ESCAPED_COMMA)
    pieces = [""]
    for number, part in enumerate(parts):
        if number:
            pieces[-1] += ","  # an escaped comma joins the pieces around it
        first, *rest = part.split(",")
        pieces[-1] += first
        pieces.extend(rest)
    return pieces
