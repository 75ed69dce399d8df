"""GStreamer's Python bindings as the element uses them: the versions of the introspected
libraries chosen once, before any is imported, and GStreamer initialised for a program that
registers the element itself before it has (the plugin loader's process already has)."""

import gi

gi.require_version("Gst", "1.0")
gi.require_version("GstBase", "1.0")
gi.require_version("GstVideo", "1.0")

from gi.repository import GLib, GObject, Gst, GstBase, GstVideo  # noqa: E402 - versions first

if not Gst.is_initialized():
    Gst.init(None)

__all__ = ["GLib", "GObject", "Gst", "GstBase", "GstVideo"]
