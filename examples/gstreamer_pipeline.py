"""Filter a video file inside a GStreamer pipeline of your own program, with the streamconv element.

    python examples/gstreamer_pipeline.py IN.mp4 OUT.mp4 [--filter "gaussian:sigma=2 -> edge"]
        [--backend auto|cpu|cuda] [--ring-depth 3]

The pipeline is the one gst-launch-1.0 would run (docs/gstreamer.md)::

    filesrc ! decodebin ! videoconvert ! streamconv ! videoconvert ! x264enc ! mp4mux ! filesink

In a program of your own the element is registered in-process (``streamconv.gst.register()``),
so GST_PLUGIN_PATH is not needed. GStreamer's Python bindings come from the system
(python3-gst-1.0): run this with the system's Python, or an environment made with
``--system-site-packages``. Errors arrive on the bus with streamconv's own message.
"""

import argparse
import sys

import gi

import streamconv.gst

gi.require_version("Gst", "1.0")
from gi.repository import Gst  # noqa: E402 - after the version is chosen


def build(source: str, output: str, options: argparse.Namespace) -> Gst.Pipeline:
    """The pipeline; the file names and the filter set as properties (nothing to quote)."""
    pipeline = Gst.parse_launch(
        "filesrc name=in ! decodebin ! videoconvert ! streamconv name=filter ! videoconvert ! "
        "x264enc ! mp4mux ! filesink name=out")
    pipeline.get_by_name("in").set_property("location", source)
    pipeline.get_by_name("out").set_property("location", output)
    element = pipeline.get_by_name("filter")
    element.set_property("filter", options.filter)
    element.set_property("backend", options.backend)
    element.set_property("ring-depth", options.ring_depth)
    return pipeline


def run(pipeline: Gst.Pipeline) -> str | None:
    """Play to the end; returns the error's text, or None."""
    pipeline.set_state(Gst.State.PLAYING)
    try:
        message = pipeline.get_bus().timed_pop_filtered(
            Gst.CLOCK_TIME_NONE, Gst.MessageType.EOS | Gst.MessageType.ERROR)
        return message.parse_error()[0].message if message.type == Gst.MessageType.ERROR else None
    finally:
        pipeline.set_state(Gst.State.NULL)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source")
    parser.add_argument("output")
    parser.add_argument("--filter", default="gaussian:sigma=2 -> sharpen")
    parser.add_argument("--backend", default="auto", choices=("auto", "cpu", "cuda"))
    parser.add_argument("--ring-depth", type=int, default=3)
    options = parser.parse_args()
    Gst.init(None)
    streamconv.gst.register()
    pipeline = build(options.source, options.output, options)
    error = run(pipeline)
    if error is not None:
        print(f"error: {error}", file=sys.stderr)
        return 1
    stats = pipeline.get_by_name("filter").get_property("stats")
    print(f"filtered {stats.get_value('frames')} frames with {options.filter} on "
          f"{stats.get_value('backend')}")
    if stats.has_field("latency-p50-ms"):
        print(f"{stats.get_value('latency-p50-ms'):.2f} ms per frame in the element (median)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
