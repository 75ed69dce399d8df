"""streamconv inside GStreamer: the ``streamconv`` element (gst-python), found by GStreamer's
Python plugin loader under :func:`plugin_path`, or registered in a Python program's own process
by :func:`register`. See docs/gstreamer.md.

Importing this package needs nothing of GStreamer; :func:`register` and the element do
(python3-gst-1.0 and the plugin loader of the system's GStreamer).

Also here: :mod:`.bindings` (GStreamer's Python bindings as the element uses them: the versions of
the introspected); :mod:`.buffers` (where a video frame's samples lie in a mapped GStreamer buffer);
:mod:`.cuda_memory` (frames in CUDA device memory); :mod:`.engine` (the element's frames in system
memory through a backend's ring of slots); :mod:`.formats` (the video formats the element takes, as
GStreamer names them); :mod:`.properties` (how the element speaks GObject and GStreamer: its
properties as ``gst-inspect-1.0``); :mod:`.seam` (the streamconv internals the GStreamer element
builds on); :mod:`.settings` (what the element's properties say).
"""

from __future__ import annotations

from pathlib import Path

PLUGIN_FOLDER = Path(__file__).resolve().parent / "plugin"


def plugin_path() -> Path:
    """The folder to put on ``GST_PLUGIN_PATH``: GStreamer's Python plugin loader imports the
    element's registration from its ``python/`` subfolder (``streamconv gst-path`` prints it)."""
    return PLUGIN_FOLDER


def register() -> bool:
    """Register the ``streamconv`` element with GStreamer in this process (after ``Gst.init``),
    for a Python program that builds its own pipelines without ``GST_PLUGIN_PATH``.

    Returns:
        True once the element is registered.
    """
    from gi.repository import Gst  # optional: the system's python3-gst-1.0

    from .element import ELEMENT_FACTORY  # imports GStreamer's bindings: only when asked for

    name, rank, element_type = ELEMENT_FACTORY
    return bool(Gst.Element.register(None, name, rank, element_type))
