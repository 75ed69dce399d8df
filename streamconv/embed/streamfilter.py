"""``StreamFilter``: your frames through a backend's ring of slots, overlapped with your own
loop.

Frames are host NumPy arrays as for :class:`streamconv.Filter` (:mod:`streamconv.embed.filter`).
The slots, their order and the backend calls are those of the pipeline's compute thread
(:class:`streamconv.run.inflight.InFlight`), driven here from the caller's thread. ``map()`` and
its staged copies are in :mod:`.streamfilter_map`.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Any

import numpy as np

from .filter import Closes, Spec, check_output, device_engine, make_engine, output_like
from ..frames.borders import DEFAULT_BORDER
from ..errors import FrameDeviceError, StreamconvError, StreamError
from ..frames.checks import (MAX_RING, as_count, as_frame_type, check_frame_fits,
                             check_kept_output)
from ..interop.arrays import DeviceView, as_frame
from ..interop.streams import stream_handle
from ..frames.hostcopy import ParallelCopier, copier_for, same_buffer
from ..frames.slots import Slot
from ..run.inflight import InFlight
from .streamfilter_map import MappedFrames
from .streamfilter_tail import WindowedResults


class StreamFilter(MappedFrames, WindowedResults, Closes):
    """Overlaps your loop with the GPU: up to ``ring`` frames in flight, results in order.

    ``submit(frame)`` copies the frame into a page-locked slot and queues its upload,
    kernels and download on the slot's CUDA stream, then returns; ``result()`` waits for
    the oldest submitted frame and returns its output. While the GPU works, your thread
    captures, draws or encodes. ``map(frames)`` does both for an iterable. Capturing into
    ``input_buffer(shape)`` (``capture.read(buffer)``) and submitting that buffer skips the
    copy into the slot. On the CPU backend the same calls work, without the overlap.

    Args:
        spec: as for :class:`streamconv.Filter`.
        ring: frames in flight, 1 to MAX_RING (64); 3 overlaps the upload of one frame with the
            kernel of the previous one and the download of the one before.
        border, backend, device, kernel: as for :class:`streamconv.Filter`.

    Use it from one thread. Buffers (``ring`` + 1 sets: one more for capture) are allocated
    at the first frame and re-allocated when the frame's (H, W, C) or dtype changes; for a chain
    across frames that change ends the stream as :meth:`flush` does (the frames before it come
    out, the last repeated at the end) and a new window begins; (H, W) and (H, W, 1) are one.
    After ``close()``, every call raises :class:`streamconv.StreamError`. It is not copied or
    pickled (a TypeError): make a new StreamFilter of the same spec instead.

    Raises:
        SettingsError: ``ring`` not an int from 1 to MAX_RING (a bool is refused), ``device`` not
            an int >= 0, or a bad border, backend name or kernel.
        FilterSpecError: a bad spec.

    Examples:
        >>> import numpy as np, streamconv
        >>> frames = [np.full((8, 8, 3), v, np.uint8) for v in (10, 20, 30)]
        >>> with streamconv.StreamFilter("identity", ring=2, backend="cpu") as sf:
        ...     [int(out[0, 0, 0]) for out in sf.map(frames)]
        [10, 20, 30]
    """

    def __init__(self, spec: Spec, *, ring: int = 3, border: str = DEFAULT_BORDER,
                 backend: str = "auto", device: int = 0, kernel: str = "auto") -> None:
        # until the engine exists: close() of a half-made StreamFilter does nothing
        self._closed = True
        # as --ring: a typo must not take all memory
        self.ring = as_count(ring, "ring", 1, MAX_RING)
        self.stages, self.border, self.backend, self._engine = make_engine(  # spins: latency first
            spec, border=border, backend=backend, device=device, kernel=kernel, blocking_sync=False)
        self._frame_type: tuple | None = None  # (shape, dtype) the slots are made for
        self._free: list[Slot] = []
        self._in_flight: InFlight[tuple[int, ...]] = InFlight(self._engine)  # noted: result shape
        self._ready: deque = deque()  # outputs finished early because the ring was full
        self._device_results: deque = deque()  # DeviceFrames of device frames submitted, in order
        # slot index -> the page-locked frame its result lands in
        self._leased: dict[int, np.ndarray] = {}
        self._copier = ParallelCopier(2)  # re-sized per frame size (hostcopy.copier_for)
        self._staged: tuple | None = None  # (slot, output shape, PendingCopy) that map() is copying
        self._reserved = None  # the slot whose input_buffer() the application is filling
        self._map_owner: object | None = None  # the map() owning the frames in flight, if any
        self._closed = False

    @property
    def delay(self) -> int:
        """Frames the chain holds back: frame i's result comes out of result() once frame
        ``i + delay`` is submitted, or after flush(); the sum of its stages across frames' T // 2,
        0 for a chain without such stages or with causal ones only."""
        return self._engine.delay

    @property
    def pending(self) -> int:
        """Frames submitted whose result() has not been taken yet."""
        return (self._in_flight.owed + len(self._ready) + (self._staged is not None)
                + len(self._device_results))

    def _check_open(self, call: str) -> None:
        """Raise StreamError naming ``call`` if the StreamFilter is closed."""
        if self._closed:
            raise StreamError(f"StreamFilter is closed; {call}() cannot run "
                              "(make a new StreamFilter)")

    def _take_over(self, call: str) -> None:
        """Before submit(), result() or a new map(): refuse if closed, and drop the frames of a
        map() still in progress (left with break, an exception, or kept suspended), so that they
        never come out of this call; that map() raises if resumed. (input_buffer() does not take
        over: a map()'s own frames are captured into it.)"""
        self._check_open(call)
        if self._map_owner is not None:
            self._drop_in_flight()

    def _drop_in_flight(self) -> None:
        """Let every frame in flight go: wait for the GPU to finish with each slot, free it, and
        forget the outputs kept for result()."""
        self._map_owner = None
        self._end_staging(submit=False)
        self._in_flight.release(self._free)
        self._leased.clear()
        self._ready.clear()
        for frame in self._device_results:
            frame.synchronize()  # its input may be the caller's to reuse once the call returns
        self._device_results.clear()

    def submit(self, frame: Any, *, stream: Any = None) -> None:
        """Queue one frame: (H, W), (H, W, 3) or (H, W, 4) uint8 or uint16, a host array of any
        strides or (cuda backend) a CUDA device array, as for :class:`streamconv.Filter`.

        A device frame is read until its result is ready (keep it unchanged till then); its result()
        is a DeviceFrame. ``stream`` (device frames): the caller's stream, whose pending work comes
        first and which waits for the result (result() then does not block). Host and device frames
        are not mixed while either has results pending.

        Returns at once while fewer than ``ring`` frames are in flight; otherwise it first
        finishes the oldest (its output is kept for ``result()``). A map() still in progress
        (left early but not yet garbage-collected) is ended first: its frames are dropped.

        Raises:
            FrameTypeError, FrameFormatError: a frame of the wrong dtype or shape.
            InputError: host memory too short for a new frame size's slots, or for an output to
                keep.
            StreamError: the StreamFilter is closed.
        """
        self._take_over("submit")
        self._submit(frame, stream)

    def _submit(self, frame: Any, stream: Any = None) -> None:
        """submit() without the checks: map() queues its own frames through this."""
        image = as_frame(frame, what="input frame")
        if isinstance(image, DeviceView) or self._device_results:
            self._submit_device(image, stream)
            return
        self._fit_slots(image.shape, image.dtype)
        if self._ready and self._in_flight and (len(self._in_flight) >= self.ring
                                                or not (self._free or self._reserved)):
            shape, dtype = self._frame_type or ((), np.uint8)  # outputs pile up: room for one?
            kept = int(np.prod(output_like(self._engine, shape))) * dtype.itemsize
            check_kept_output(kept, len(self._ready))
        slot = self._reserved if self._reserved is not None else self._take_slot()
        self._reserved = None
        self._keep_ring()
        # NumPy buffers a view into the slot; bands would race on it
        if not same_buffer(image, slot.host_in):
            (np.copyto if np.may_share_memory(image, slot.host_in)
             else self._copier.copy)(slot.host_in, image)
        self._queue(slot, np.shape(frame))

    def _submit_device(self, image: np.ndarray | DeviceView, stream: Any) -> None:
        """Queue a device frame on the backend's device path; its DeviceFrame waits in order."""
        if (not isinstance(image, DeviceView) or len(self._in_flight) + len(self._ready)
                or self._staged):
            raise StreamError("host and device frames cannot be mixed while results of the other "
                              "kind are pending; take them with result() first")
        engine = device_engine(self._engine, f"this StreamFilter runs on {self.backend}")
        handle = None if stream is None else stream_handle(stream)
        self._device_results.append(engine.apply_device(image, None, handle, wait=False))

    def input_buffer(self, shape: tuple[int, ...],
                     dtype: np.dtype | type = np.uint8) -> np.ndarray:
        """A page-locked host array to capture the next frame into, so that submit() copies
        nothing: the fastest route for host frames.

        Reserves a slot and returns its input buffer, writable, as ``shape`` ((H, W), (H, W, 3)
        or (H, W, 4)) of ``dtype`` (uint8 or uint16). The filter keeps one slot more than the
        ring, so this does not wait for the GPU while ``ring`` frames are in flight.
        ``submit()`` of that array queues the slot as it is; asking again before submitting
        returns the same buffer, and submitting another array copies that one into the
        reserved slot instead.

        Raises:
            FrameTypeError, FrameFormatError, InputError: a dtype or shape that submit() would
                refuse.
            StreamError: the StreamFilter is closed.

        Examples:
            >>> import numpy as np, streamconv
            >>> with streamconv.StreamFilter("identity", backend="cpu") as sf:
            ...     buffer = sf.input_buffer((4, 6, 3))
            ...     buffer[:] = 7                    # e.g. capture.read(buffer) with OpenCV
            ...     sf.submit(buffer)
            ...     int(sf.result()[0, 0, 0])
            7
        """
        # No take-over: the frames a map() is reading may be captured into this buffer.
        self._check_open("input_buffer")
        self._end_staging(submit=True)
        self._fit_slots(*as_frame_type(shape, dtype, "input buffer"))
        if self._reserved is None:
            self._reserved = self._take_slot()
        return self._reserved.host_in.reshape(tuple(shape))

    def _take_slot(self):
        """A free slot, reset (the ring's spare when ``ring`` frames are in flight)."""
        while not self._free:
            self._finish_oldest()
        slot = self._free.pop()
        slot.reset()
        return slot

    def _keep_ring(self) -> None:
        """Finish the oldest frames until one more fits in the ring."""
        while len(self._in_flight) >= self.ring:
            self._finish_oldest()

    def result(self, out: np.ndarray | None = None) -> np.ndarray:
        """The output of the oldest submitted frame, waiting for it if needed.

        Args:
            out: optional host array of the result's shape and dtype to write into (no allocation),
                writable, any strides.

        Returns:
            ``out``, or a new host array of the submitted frame's dtype and output shape.

        Raises:
            StreamconvError: nothing was submitted (frames of a map() left early do not count:
                they are dropped).
            FrameTypeError, FrameFormatError: ``out`` of another dtype or shape, or read-only.
            StreamError: the StreamFilter is closed.
        """
        self._take_over("result")
        return self._result(out)

    def _result(self, out: np.ndarray | None = None) -> np.ndarray:
        """result() without the checks: map() takes its own outputs through this."""
        if self._device_results:
            if out is not None:
                raise FrameDeviceError("result(out=...) takes host frames; a device frame's "
                                       "result is a DeviceFrame (Filter.apply_into writes device "
                                       "frames into your own array)")
            frame = self._device_results.popleft()
            if frame.stream is None:
                frame.synchronize()
            return frame
        self._skip_silent()
        if not self._ready and not self._in_flight:
            # the oldest owed frame's output needs ``delay`` frames after it; ``owed`` are here
            needed = max(1, self._engine.delay + 1 - self._in_flight.owed)
            waiting = f"result() waits for {needed} more frame(s) or flush()"
            raise StreamconvError(waiting if self._in_flight.owed else
                                  "result() called with no frame submitted")
        if out is not None:
            # Checked before the frame is taken, so that a wrong ``out`` loses no frame.
            if self._ready:
                like = self._ready[0]
            else:
                slot, shape = self._in_flight.oldest
                like = np.broadcast_to(np.zeros((), slot.host_out.dtype), shape)
            check_output(out, like)
        if self._ready:
            ready = self._ready.popleft()
            if out is None:
                return ready
            np.copyto(out, ready)
            return out
        slot, shape = self._in_flight.retire()
        return self._collect(slot, shape, out)

    def _collect(self, slot: Slot, shape: tuple[int, ...], out: np.ndarray | None) -> np.ndarray:
        """The output of retired ``slot`` as the caller's frame ``shape``: a new array, or written
        into ``out``; the slot is free again."""
        self._free.append(slot)
        leased = self._leased.pop(slot.index, None)
        if leased is not None and out is None:
            return leased.reshape(shape)
        result = (leased if leased is not None else slot.host_out).reshape(shape)
        if out is None:
            return result.copy()
        np.copyto(out, result)  # ``out`` was checked by _result()
        return out

    def _fit_slots(self, shape: tuple[int, int, int], dtype: np.dtype) -> None:
        """Make the slots fit frames of (H, W, C) ``shape`` and ``dtype``, if they do not yet:
        check that they fit in memory, finish what is in flight, make them."""
        if (shape, dtype) == self._frame_type:
            return
        slots, copies = self.ring + 1, self._engine.host_frames()
        outputs = -(-math.prod(self._engine.output_shape(shape)) // math.prod(shape))  # in inputs
        check_frame_fits(shape, dtype, slots * (1 + outputs) + copies, f"{slots} slot(s) of an "
                         f"input and an output, {copies} of the backend's",
                         hint="use a smaller ring")
        if self._reserved is not None:
            self._free.append(self._reserved)
            self._reserved = None
        self._flush_tail()
        while self._in_flight:
            self._finish_oldest()
        if self._free:
            self._engine.release_slots(self._free)
        # One slot more than the ring: the application can capture into a slot's input buffer
        # while ``ring`` frames are in flight, without finishing (and copying out) the oldest.
        self._free = self._engine.allocate_slots(shape, self.ring + 1, dtype=dtype)
        self._copier = copier_for(int(np.prod(shape)) * np.dtype(dtype).itemsize, self._copier)
        self._frame_type = (shape, dtype)

    def close(self) -> None:
        """Wait for frames in flight, drop untaken results, release buffers; idempotent. Later
        calls (submit, result, map, input_buffer, a map() left suspended) raise StreamError."""
        if self._closed:
            return
        self._closed = True
        try:
            self._drop_in_flight()
        finally:
            self._free = []
            self._reserved = None
            self._copier.close()
            self._engine.close()
