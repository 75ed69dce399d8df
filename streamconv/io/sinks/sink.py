"""The Sink base class, and the sinks that need no library: discard (null), a callback, fan-out.

Every sink is a context manager with an idempotent ``close()`` and takes frames with
``send(frame, meta)``. ``frame`` is an (H, W, C) uint8 or uint16 host array that the sink must
not keep after ``send`` returns (the pipeline reuses the buffer). The other sinks are beside
this module in streamconv.io (filesink, display); ``open_sink`` (streamconv.io.open) opens one
from an output argument.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ...frames.slots import FrameMeta
from ...frames.yuv import YuvLayout
from .steering import RunHandle


class Sink:
    """Base class of sinks."""

    name = "sink"
    frames_written = 0
    failed = False
    """True once a write failed for good: nothing more can be finished (see FileSink)."""
    packets_refused = 0
    """Copied audio/subtitle packets the output refused (damaged input) and left out."""
    shows_input = False
    """True for a sink that uses ``send_with_input``'s input (a side-by-side display): a chain
    with stages across frames then keeps each frame's input until its output is sent."""

    def send(self, frame: np.ndarray, meta: FrameMeta) -> None:
        """Consume one (H, W, C) uint8 or uint16 host frame; do not keep a reference to it."""
        raise NotImplementedError

    def send_with_input(self, frame: np.ndarray, source_frame: np.ndarray, meta: FrameMeta) -> None:
        """Consume a filtered frame with the input it was made from; both (H, W, C) uint8 or uint16
        host
        arrays valid only during the call. The default ignores the input (see DisplaySink)."""
        self.send(frame, meta)

    def accepts_planes(self, layout: YuvLayout) -> bool:
        """Whether ``send`` can take frames as the flat yuv420p buffers of ``layout`` instead of
        RGB (then colour is converted by the backend, not on the host). The default: no."""
        return False

    def attach(self, run: RunHandle) -> None:
        """Called by Pipeline.run() before the first frame with a narrow handle of the run
        (:class:`streamconv.io.sinks.steering.RunHandle`); interactive sinks keep it to steer the
        run (stop it, swap its filters, read its status). The default does nothing."""

    def close(self) -> None:
        """Finish and release; safe to call more than once."""

    def abort(self) -> None:
        """Give up after an error: release without publishing partial results."""
        self.close()

    def describe(self) -> str:
        """One line for logs."""
        return self.name

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, _traceback) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


class NullSink(Sink):
    """Discards frames (benchmarks, dry runs); counts them."""

    name = "null"

    def send(self, frame: np.ndarray, meta: FrameMeta) -> None:
        self.frames_written += 1

    def accepts_planes(self, layout: YuvLayout) -> bool:
        """Yes: nothing is looked at."""
        return True


class CallbackSink(Sink):
    """Calls ``callback(frame, meta)`` for each frame; the frame buffer is only valid during the
    call."""

    name = "callback"

    def __init__(self, callback: Callable[[np.ndarray, FrameMeta], None]) -> None:
        self._callback = callback

    def send(self, frame: np.ndarray, meta: FrameMeta) -> None:
        self._callback(frame, meta)
        self.frames_written += 1


class FanoutSink(Sink):
    """Sends every frame to several sinks in turn (record while watching: a display and a file).

    Args:
        sinks: the sinks, called in this order for each frame; closing closes all of them
            and then raises the first error any of them raised.
    """

    name = "fanout"

    def __init__(self, sinks) -> None:
        self.sinks = list(sinks)
        if not self.sinks:
            raise ValueError("FanoutSink needs at least one sink")

    def attach(self, run: RunHandle) -> None:
        """Hand the run's handle to every sink that steers it (a display)."""
        for sink in self.sinks:
            attach = getattr(sink, "attach", None)
            if attach is not None:
                attach(run)

    def send(self, frame: np.ndarray, meta: FrameMeta) -> None:
        """Send one (H, W, C) uint8 or uint16 host frame to each sink in order."""
        for sink in self.sinks:
            sink.send(frame, meta)
        self.frames_written += 1

    def accepts_planes(self, layout: YuvLayout) -> bool:
        """Only if every sink does."""
        return all(sink.accepts_planes(layout) for sink in self.sinks)

    def send_with_input(self, frame: np.ndarray, source_frame: np.ndarray, meta: FrameMeta) -> None:
        """Send the filtered frame and its input ((H, W, C) uint8 or uint16 host arrays) to each
        sink in order."""
        for sink in self.sinks:
            with_input = getattr(sink, "send_with_input", None)
            if with_input is not None:
                with_input(frame, source_frame, meta)
            else:
                sink.send(frame, meta)
        self.frames_written += 1

    @property
    def shows_input(self) -> bool:
        """True if any of the sinks shows the input beside the output."""
        return any(sink.shows_input for sink in self.sinks)

    @property
    def failed(self) -> bool:
        """True if any of the sinks failed for good."""
        return any(sink.failed for sink in self.sinks)

    @property
    def packets_refused(self) -> int:
        """Copied packets left out, over all the sinks."""
        return sum(sink.packets_refused for sink in self.sinks)

    def mux_packets(self, packets) -> None:
        """Hand copied-stream packets to the sinks that store them (a file)."""
        for sink in self.sinks:
            mux = getattr(sink, "mux_packets", None)
            if mux is not None:
                mux(packets)

    def close(self) -> None:
        """Close every sink (a file is finalized), then raise the first error any raised."""
        self._each("close")

    def abort(self) -> None:
        """Abort every sink, then raise the first error any raised."""
        self._each("abort")

    def _each(self, method: str) -> None:
        first: BaseException | None = None
        for sink in self.sinks:
            try:
                getattr(sink, method)()
            except Exception as exc:  # finish the others first; a file must still be finalized
                first = first or exc
        if first is not None:
            raise first

    def describe(self) -> str:
        return " + ".join(sink.describe() for sink in self.sinks)
