"""The arguments of one run that need no source, checked before any is opened: Pipeline's, and
those run_many and run_segments pass on to their Pipelines.

Each is refused with a typed error naming it (:mod:`streamconv.arguments`): ``on_frame=5``
failed only at the first frame, ``sink=42`` and an unknown sink option with a TypeError from
inside, after the source was opened.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .arguments import check_callable, check_flags, check_options
from .errors import FilterSpecError, FrameFormatError
from .filters import show_value
from .frames import MAX_RING, as_count
from .io.open import check_sink

COLOUR_PATHS = ("auto", "backend", "host")
"""Where yuv420p video is converted to and from RGB (``Pipeline(colour=...)``, ``--colour``)."""

_COUNTS = {"ring": (1, MAX_RING), "device": (0, None), "max_frames": (0, None)}
"""Pipeline's integer arguments -> their (least, most) values (None: no bound)."""


def check_run_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """Pipeline's keyword arguments among ``options`` that need no source, checked: ``ring``
    (1 to MAX_RING), ``device`` (>= 0), ``max_frames`` (>= 0, or None), ``max_pixels`` (>= 1, or
    None), ``colour``, the flags ``progress`` and ``status``, ``on_frame`` (callable or None),
    ``sink`` and ``sink_options`` (:func:`streamconv.io.open.check_sink`).

    Returns:
        ``options`` as a new dict, the counts as ints and ``sink_options`` as a dict.

    Raises:
        FilterSpecError: naming the argument; FrameFormatError for ``max_pixels``; OutputError
            for ``sink`` and ``sink_options``.
    """
    checked = dict(options)
    for name, (least, most) in _COUNTS.items():
        if name in checked and not (name == "max_frames" and checked[name] is None):
            checked[name] = as_count(checked[name], name, least, most)
    if checked.get("max_pixels") is not None:
        checked["max_pixels"] = as_count(checked["max_pixels"], "max_pixels", 1,
                                         error=FrameFormatError)
    if "colour" in checked and checked["colour"] not in COLOUR_PATHS:
        raise FilterSpecError(f"unknown colour path {show_value(checked['colour'])}; known: "
                              f"{', '.join(COLOUR_PATHS)}")
    check_flags(**{name: checked[name] for name in ("progress", "status") if name in checked})
    check_callable(checked.get("on_frame"), "on_frame")
    if "sink" in checked or "sink_options" in checked:
        checked["sink_options"] = check_sink(checked.get("sink"), checked.get("sink_options"),
                                             names=("sink", "sink_options"))
    return checked


def check_passed_on(options: object, taken: Iterable[str], name: str) -> dict[str, Any]:
    """The Pipeline keyword ``options`` that a call (``name``: run_many, run_segments) passes
    on to each of its Pipelines, checked before any is made: each one it passes on (``taken``),
    as :func:`check_run_options` checks it.

    Raises:
        FilterSpecError: an option not taken (it was a TypeError from inside, or one failure
            per source), and as :func:`check_run_options`.
    """
    return check_run_options(check_options(options, name, FilterSpecError, taken=taken))
