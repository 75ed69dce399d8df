"""Checks of the arguments the library's public calls take: one of the wrong type, or an option
the call does not take, is refused with a typed error naming it, before any work.

Such an argument used to surface as a TypeError from deep inside, or only at the first frame,
and a string given for a flag counted as true (``sink_options={"overwrite": "no"}`` replaced a
file). Each check raises the error of what the argument is about, which its caller names: an
output's OutputError, an input's InputError, a frame's FrameFormatError, and SettingsError for
any other setting, as :func:`streamconv.frames.checks.as_count` does for ``ring`` and ``device``.
"""

from __future__ import annotations

import inspect
import math
import numbers
import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

from ..errors import SettingsError, StreamconvError
from ..files.tapfiles import show_value

Error = type[StreamconvError]


def check_flag(value: object, name: str, error: Error = SettingsError) -> bool:
    """``value`` as a bool: True or False (NumPy's too). A string ("no", "false"), a number or
    None is refused: each of them would count as true or false by accident.

    Raises:
        ``error``: naming ``name`` and the value.
    """
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise error(f"{name} must be True or False, got {show_value(value)}")


def check_flags(error: Error = SettingsError, **flags: object) -> None:
    """Each of ``flags`` (name=value) as :func:`check_flag` checks it."""
    for name, value in flags.items():
        check_flag(value, name, error)


def check_number(value: object, name: str, error: Error) -> Any:
    """``value`` as a finite real number (an int, a float, a Fraction; not a bool or a string)."""
    if isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_)) \
            and math.isfinite(value):
        return value
    raise error(f"{name} must be a finite number, got {show_value(value)} ({type(value).__name__})")


def check_instance(value: Any, types: type | tuple[type, ...], name: str, error: Error, *,
                   expected: str) -> Any:
    """``value`` if it is an instance of ``types``, else ``error`` saying it must be
    ``expected`` ("a string or None")."""
    if isinstance(value, types):
        return value
    raise error(f"{name} must be {expected}, got {show_value(value)} ({type(value).__name__})")


def check_callable(value: Any, name: str, error: Error = SettingsError) -> Any:
    """``value`` if it is None or can be called (checked before the first frame calls it)."""
    if value is None or callable(value):
        return value
    raise error(f"{name} must be callable or None, got {show_value(value)} "
                f"({type(value).__name__})")


def check_path(value: Any, name: str, error: Error) -> Any:
    """``value`` if it is a path: a non-empty string or an ``os.PathLike``."""
    if isinstance(value, os.PathLike) or (isinstance(value, str) and value):
        return value
    raise error(f"{name} must be a path (a non-empty str or os.PathLike), got {show_value(value)} "
                f"({type(value).__name__})")


def check_sequence(value: Any, name: str, error: Error) -> list:
    """``value`` as a list: a list, tuple or other iterable of items, never a string (whose
    characters would be taken one by one) nor a mapping."""
    if isinstance(value, (str, bytes, os.PathLike, Mapping)) or not isinstance(value, Iterable):
        raise error(f"{name} must be a list, got {show_value(value)} ({type(value).__name__})")
    return list(value)


def check_options(options: Any, name: str, error: Error,
                  taken: Callable | Iterable[str] | None = None) -> dict[str, Any]:
    """``options`` as a new dict: None (no options) or a mapping with string keys, each one that
    ``taken`` takes (a function's or class's keyword parameters, or the names given; None: any).

    Raises:
        ``error``: not a mapping, a key not a string, or a key not taken, naming it and the
        keys that are.
    """
    if options is None:
        return {}
    if not isinstance(options, Mapping):
        raise error(f"{name} must be a dict, got {show_value(options)} ({type(options).__name__})")
    options = dict(options)
    if taken is None:
        known = None
    elif callable(taken):
        known = keywords_of(taken)
    else:
        known = set(taken)
    for key in options:
        if not isinstance(key, str):
            raise error(f"{name}: option names are strings, got {show_value(key)}")
        if known is not None and key not in known:
            raise error(f"{name}: unknown option {show_value(key)}; known: "
                        f"{', '.join(sorted(known))}")
    return options


def keywords_of(function: Callable) -> set[str]:
    """The names ``function`` (or a class's constructor) takes as keyword arguments."""
    parameters = inspect.signature(function).parameters.values()
    return {p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
