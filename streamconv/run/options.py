"""The arguments of one run that need no source, checked before any is opened: Pipeline's, and
those run_many and run_segments pass on to their Pipelines.

Each is refused with a typed error naming it (:mod:`streamconv.frames.arguments`): ``on_frame=5``
failed only at the first frame, ``sink=42`` and an unknown sink option with a TypeError from
inside, after the source was opened.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import fields
from typing import Any

from ..errors import SettingsError
from ..frames.arguments import check_callable, check_flags, check_options
from ..io.open import check_sink
from .settings import RunSettings

SETTINGS = tuple(field.name for field in fields(RunSettings))
"""Pipeline's keyword arguments that are :class:`streamconv.run.settings.RunSettings` fields."""


def check_run_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """Pipeline's keyword arguments among ``options`` that need no source, checked: the
    :class:`streamconv.run.settings.RunSettings` fields as it checks them (``ring`` 1 to MAX_RING,
    ``device`` >= 0, ``max_frames`` >= 0 or None, ``max_pixels`` >= 1 or None, ``colour``,
    ``border``, ``kernel``, ``decoder``), the flags ``progress`` and ``status``, ``on_frame``
    (callable or None), ``sink`` and ``sink_options`` (:func:`streamconv.io.open.check_sink`).

    Returns:
        ``options`` as a new dict, the counts as ints and ``sink_options`` as a dict.

    Raises:
        SettingsError: naming the argument; FrameFormatError for ``max_pixels``; OutputError
            for ``sink`` and ``sink_options``.
    """
    checked = dict(options)
    given = {name: checked[name] for name in SETTINGS if name in checked}
    if given:  # checked as the settings they make (a bool ring, an unknown colour...)
        made = RunSettings(**given)
        checked.update({name: getattr(made, name) for name in given})
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
        SettingsError: an option not taken (it was a TypeError from inside, or one failure
            per source), and as :func:`check_run_options`.
    """
    return check_run_options(check_options(options, name, SettingsError, taken=taken))
