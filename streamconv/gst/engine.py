"""The element's frames in system memory through a backend's ring of slots, as ``streamconv run``
drives them: each frame is copied into a slot (4:2:0 planes as they are, the backend converting
colour), queued on the backend, and, once done, copied back into the buffer it came from. On the
cuda backend up to ``depth`` frames are in flight (one's upload overlapping another's kernels);
the cpu backend filters a frame as it is queued, so it keeps none in flight.

Every call comes from one thread at a time (GStreamer's streaming thread, or the state change
that stops it).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Generic, TypeVar

from .. import FrameFormatError, RunStats
from .buffers import FrameGeometry, read_frame, write_frame
from .formats import FrameFormat
from .seam import Backend, ColourTags, InFlight, Slot, YuvLayout

Note = TypeVar("Note")


def frames_in_flight(backend: str, depth: int) -> int:
    """How many frames the element keeps in flight on ``backend`` for a ring-depth of ``depth``:
    the cuda backend overlaps that many; the cpu backend filters each frame as it comes, with
    every core on that one frame's rows, so a second frame in flight would only wait."""
    return depth if backend == "cuda" else 1


def added_latency(in_flight: int, frame_duration: int | None) -> int:
    """Nanoseconds the element holds a frame at most: it leaves when ``in_flight - 1`` later frames
    have come (sooner if the GPU is done with it), so that many frame durations; 0 when one frame
    is in flight or the frame rate is unknown (``frame_duration`` None)."""
    return (in_flight - 1) * frame_duration if frame_duration else 0


@dataclass
class _Format:
    """What one set of caps makes of a frame: its format, geometry and slot layout."""

    fmt: FrameFormat
    geometry: FrameGeometry
    layout: YuvLayout | None


@dataclass
class HeldFrame(Generic[Note]):
    """A frame in flight: the caller's note (its buffer), where its planes lie, when it entered."""

    note: Note
    geometry: FrameGeometry
    entered: float


class HostRing(Generic[Note]):
    """Frames of one format through ``backend``'s slots, out in the order they came in.

    Args:
        backend: a backend made by :func:`streamconv.embed.filter.make_engine` (``cpu`` or
            ``cuda``).
        in_flight: frames kept in flight at most (:func:`frames_in_flight`), 1 to MAX_RING.
        stats: where each frame's stage times go (``read`` the copy in, ``upload``, ``kernel``,
            ``download``, ``write`` the copy out, ``latency`` from entering to leaving).
    """

    def __init__(self, backend: Backend, in_flight: int, stats: RunStats) -> None:
        self.backend = backend
        self.in_flight = in_flight
        self.stats = stats
        self._format: _Format | None = None
        self._free: list[Slot] = []
        self._queue: InFlight[HeldFrame[Note]] = InFlight(backend)

    def configure(self, fmt: FrameFormat, geometry: FrameGeometry, colour: ColourTags) -> None:
        """Make the slots for frames of ``fmt`` and ``geometry`` (4:2:0 planes converted with the
        matrix and range of ``colour``); frames still in flight must have been taken out first.

        Raises:
            FrameFormatError: odd-sized 4:2:0 frames.
            FrameTypeError: a chain that cannot filter frames of this depth (a bank on 16 bits).
            BackendUnavailableError: not enough memory for the slots.
        """
        if len(self._queue):
            raise RuntimeError("configure() with frames in flight: drain or drop them first")
        layout = fmt.layout(geometry.width, geometry.height, colour) if fmt.has_planes else None
        shape = (geometry.height, geometry.width, fmt.frame_shape_channels)
        self._release()
        self._free = self.backend.allocate_slots(
            shape, self.in_flight, planes=layout, dtype=fmt.dtype
        )
        self._format = _Format(fmt, geometry, layout)

    @property
    def held(self) -> int:
        """Frames submitted whose output is not yet taken out: those in flight and, for a chain
        with stages across frames, those whose output only a flush will put out."""
        return len(self._queue) + self._queue.unflushed

    @property
    def queued(self) -> int:
        """Slots in flight on the backend."""
        return len(self._queue)

    def submit(self, data: memoryview, note: Note, geometry: FrameGeometry | None = None) -> None:
        """Copy the frame in ``data`` (the mapped input buffer) into a free slot and queue it;
        ``note`` (the buffer) comes back with its output. ``geometry``: where this buffer's planes
        lie (its GstVideoMeta's), if not where the configured one says; the same size. Call
        :meth:`take` until it returns None after each submit, so that a slot is free for the next.

        Raises:
            GpuFaultError: the GPU failed while queueing.
        """
        entered = time.perf_counter()
        form = self._format
        if form is None or not self._free:
            raise RuntimeError("submit() before configure(), or with every slot in flight")
        geometry = geometry or form.geometry
        if (geometry.width, geometry.height) != (form.geometry.width, form.geometry.height):
            raise FrameFormatError(
                f"a {geometry.width}x{geometry.height} frame in a stream of "
                f"{form.geometry.width}x{form.geometry.height} frames"
            )
        slot = self._free.pop()
        slot.reset()
        try:
            read_frame(slot.host_in, data, form.fmt, geometry, form.layout)
            slot.times["read"] = time.perf_counter() - entered
            self._queue.submit(slot, HeldFrame(note, geometry, entered))
        except BaseException:
            self._free.append(slot)
            raise

    def ready(self) -> bool:
        """Whether :meth:`take` would return a frame now: the ring is full (a slot must come free
        for the next frame) or the oldest frame is done."""
        if not len(self._queue):
            return False
        return len(self._queue) >= self.in_flight or self.backend.is_done(self._queue.oldest[0])

    def take(self, *, wait: bool = False) -> tuple[Slot, HeldFrame[Note]] | None:
        """The oldest frame's output if its work is finished (with ``wait``: waited for, and a
        chain's owed outputs flushed once nothing else is in flight); None if none. Write it
        out with :meth:`write_out`.

        A chain with stages across frames puts out frame i's output on the slot of frame
        i + ``backend.delay``, into frame i's buffer (its note): the slots of the first frames
        carry none and are freed here.

        Raises:
            GpuFaultError: the GPU failed on this frame (it is lost; its slot is free again).
        """
        while True:
            if not len(self._queue):
                if not (wait and self._queue.unflushed and self._flush_one()):
                    return None
            elif not (wait or self.ready()):
                return None
            slot = self._queue.oldest[0]
            try:
                _, held = self._queue.retire()
            except BaseException:
                self._free.append(slot)  # retire() took it out of the queue before the failed wait
                raise
            if held is not None:
                return slot, held
            self._free.append(slot)  # it only filled a window: no frame's output is on it

    def _flush_one(self) -> bool:
        """Queue the next owed output through a free slot; False when the backend has none."""
        slot = self._free.pop()
        slot.reset()
        try:
            if self._queue.flush(slot):
                return True
        except BaseException:
            self._free.append(slot)
            raise
        self._free.append(slot)
        return False

    def end_stream(self) -> None:
        """The stream ended (EOS, new caps or segment) with every output taken: the next frame
        starts a new window for the stages across frames."""
        self._queue.release(self._free)

    def write_out(self, slot: Slot, held: HeldFrame[Note], data: memoryview) -> Note:
        """Copy a taken frame's output into ``data`` (its buffer, mapped writable), free its slot
        and record its times; returns its note."""
        written = time.perf_counter()
        form = self._format
        try:
            if form is None:
                raise RuntimeError("write_out() after close()")
            write_frame(data, slot.host_out, form.fmt, held.geometry, form.layout)
        finally:
            self._free.append(slot)
        done = time.perf_counter()
        slot.times["write"] = done - written
        slot.times["latency"] = done - held.entered
        self.stats.record(slot.times)
        return held.note

    def give_back(self, slot: Slot) -> None:
        """Free a taken frame's slot without writing it out (its buffer could not be mapped)."""
        self._free.append(slot)

    def drop(self) -> None:
        """Let every frame in flight go without its output (a flush), once the backend is done
        with its slot."""
        self._queue.release(self._free)

    def close(self) -> None:
        """Drop what is in flight and free the slots; the backend stays the caller's."""
        try:
            self.drop()
        finally:
            self._release()
            self._format = None

    def _release(self) -> None:
        if self._free:
            self.backend.release_slots(self._free)
        self._free = []
