"""GStreamer's Python bindings as the element uses them: the versions of the introspected
libraries chosen once, before any is imported, and GStreamer initialised for a program that
registers the element itself before it has (the plugin loader's process already has)."""

from importlib import import_module

import gi

_VERSIONS = {"GLib": "2.0", "GObject": "2.0", "Gst": "1.0", "GstBase": "1.0", "GstVideo": "1.0"}
gi.require_versions(_VERSIONS)
# Imported by name after the versions are chosen (an import statement here would sit below code).
GLib, GObject, Gst, GstBase, GstVideo = (import_module(f"gi.repository.{name}")
                                         for name in _VERSIONS)

if not Gst.is_initialized():
    Gst.init(None)

__all__ = ["GLib", "GObject", "Gst", "GstBase", "GstVideo"]
