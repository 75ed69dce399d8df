"""How the element speaks GObject and GStreamer: its properties as ``gst-inspect-1.0`` lists
them, its statistics as a GstStructure, and streamconv's errors as GStreamer error messages (the
exception's own text; a bug's type and text, never a Python traceback).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from .. import (
                BORDER_MODES,
                DEFAULT_BORDER,
                BackendUnavailableError,
                FilterSpecError,
                FrameFormatError,
                FrameTypeError,
                PresetError,
                RunStats,
                SettingsError,
                StreamconvError,
                )
from .bindings import GLib, GObject, Gst
from .seam import MAX_RING
from .settings import BACKENDS, CHAIN_SEPARATOR, DEFAULT_RING_DEPTH, PRESET_PREFIX

_RW = GObject.ParamFlags.READWRITE
_LIVE = _RW | Gst.PARAM_MUTABLE_PLAYING  # may change while playing: the next frame takes it
_READY = _RW | Gst.PARAM_MUTABLE_READY
_UINT64_MAX = GLib.MAXUINT64

_FILTER_HELP = (
    "Filter specs as `streamconv filters` lists them (NAME[:KEY=VALUE,...]) joined by "
    f"'{CHAIN_SEPARATOR}', and presets ({PRESET_PREFIX}NAME or {PRESET_PREFIX}FILE.toml); empty: "
    "frames pass unchanged. Changed while playing, it applies from the next frame"
)
_BORDER_HELP = (
    f"How pixels outside the frame are read: {', '.join(BORDER_MODES)} (default "
    f"{DEFAULT_BORDER}, or the preset's own border where this is not set)"
)
_BACKEND_HELP = f"{', '.join(BACKENDS)}: auto takes cuda where a GPU is usable, else cpu"
_KERNEL_HELP = "CUDA kernel variant: auto, or a name `streamconv bench --kernel` takes"
_RING_HELP = (
    "Frames in flight on the cuda backend (the copies of one overlapping the kernels of "
    "another); each adds a frame of latency. The cpu backend filters each frame as it comes"
)
_STATS_HELP = (
    "frames, dropped, backend, and per stage (read, upload, kernel, download, write, "
    "latency: the frame's time in the element) its p50, p95, p99, max and mean in ms"
)
_READ = GObject.ParamFlags.READABLE

PROPERTIES: dict[str, tuple] = {
    "filter": (str, "Filter chain", _FILTER_HELP, "", _LIVE),
    "border": (str, "Border mode", _BORDER_HELP, DEFAULT_BORDER, _LIVE),
    "backend": (str, "Backend", _BACKEND_HELP, "auto", _READY),
    "kernel": (str, "CUDA kernel", _KERNEL_HELP, "auto", _READY),
    "device": (int, "CUDA device", "CUDA device number", 0, 1024, 0, _READY),
    "ring-depth": (int, "Ring depth", _RING_HELP, 1, MAX_RING, DEFAULT_RING_DEPTH, _READY),
    "frames": (GObject.TYPE_UINT64, "Frames", "Frames filtered", 0, _UINT64_MAX, 0, _READ),
    "dropped": (
        GObject.TYPE_UINT64,
        "Dropped",
        "Frames skipped because they came too late (QoS)",
        0,
        _UINT64_MAX,
        0,
        _READ,
    ),
    "stats": (Gst.Structure, "Statistics", _STATS_HELP, _READ),
}
"""The element's GObject properties (``__gproperties__``), as gst-inspect-1.0 shows them."""


def stats_structure(stats: RunStats) -> Gst.Structure:
    """The ``stats`` property: a ``streamconv-stats`` structure of the counts, the backend, and
    ``<stage>-p50-ms`` ... ``<stage>-mean-ms`` doubles for every stage that has times."""
    structure = Gst.Structure.new_empty("streamconv-stats")
    for name, count in (("frames", stats.frames), ("dropped", stats.dropped)):
        value = GObject.Value()
        value.init(GObject.TYPE_UINT64)
        value.set_uint64(count)
        structure.set_value(name, value)
    structure.set_value("backend", stats.backend)
    for stage, row in stats.summary().items():  # p50, p95, p99, max, mean
        for key, milliseconds in row.items():
            structure.set_value(f"{stage}-{key}-ms", float(milliseconds))
    return structure


def _error_kind(exc: BaseException) -> tuple[Any, int]:
    """GStreamer's error domain and code for an exception."""
    if isinstance(exc, (FilterSpecError, PresetError, SettingsError)):
        return Gst.ResourceError.quark(), int(Gst.ResourceError.SETTINGS)
    if isinstance(exc, (FrameFormatError, FrameTypeError)):
        return Gst.StreamError.quark(), int(Gst.StreamError.FORMAT)
    if isinstance(exc, BackendUnavailableError):
        return Gst.ResourceError.quark(), int(Gst.ResourceError.NOT_FOUND)
    return Gst.StreamError.quark(), int(Gst.StreamError.FAILED)


def post_error(element: Gst.Element, exc: BaseException) -> None:
    """Post ``exc`` on the bus as the element's error: streamconv's message as the text (a bug's
    type and message, so that nothing is lost), the exception's type as the debug line."""
    domain, code = _error_kind(exc)
    text = (
        str(exc)
        if isinstance(exc, StreamconvError)
        else f"internal error: {type(exc).__name__}: {exc}"
    )
    element.message_full(
        Gst.MessageType.ERROR, domain, code, text, type(exc).__name__, "streamconv", "", 0
    )


def reports_errors(failure: Any) -> Callable:
    """Decorate a virtual method of the element so that an exception is posted as the element's
    error (:func:`post_error`) and the method returns ``failure`` (False, Gst.FlowReturn.ERROR...),
    where PyGObject would print a traceback and return a default."""

    def wrap(method: Callable) -> Callable:
        @functools.wraps(method)
        def guarded(self, *args):
            try:
                return method(self, *args)
            except Exception as exc:  # noqa: BLE001 - every error becomes the element's
                post_error(self, exc)
                return failure

        return guarded

    return wrap
