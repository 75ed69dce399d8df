"""StreamFilter's ``map()``: an iterable of frames through the ring, the next frame copied into
its slot on worker threads while the caller works on the output just yielded, and the ownership
that lets a map() left early drop its frames.
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator

import numpy as np

from ..errors import FrameFormatError, FrameTypeError, StreamError
from ..frames.arguments import check_flag
from ..frames.checks import as_hwc
from ..frames.slots import Slot
from ..run.inflight import InFlight


class MappedFrames:
    """Mixed into :class:`streamconv.StreamFilter`: its ``map()`` and the staged copies that
    overlap the caller's loop."""

    ring: int
    _engine: Any
    _free: list[Slot]
    _leased: dict[int, np.ndarray]
    _staged: tuple | None
    _reserved: Any
    _map_owner: object | None
    _frame_type: tuple | None
    _closed: bool
    _in_flight: InFlight

    def map(self, frames: Iterable[np.ndarray], *, copy: bool = True) -> Iterator[np.ndarray]:
        """Filter an iterable of frames, keeping ``ring`` in flight; yields outputs in order.

        The next input is fetched (your capture code runs) while earlier frames are on the GPU,
        and it is copied into its page-locked slot, on worker threads, while you work on the
        output just yielded.

        Each map() yields exactly one output per input, in order; if ``frames`` raises, or gives
        a frame that :meth:`submit` refuses (cv2's ``None`` once a capture has ended), the outputs
        of every frame taken before, then its error. One left early (``break``, an
        exception in your loop, or dropped) lets its frames in flight go when it is closed or
        garbage-collected, at the latest when the next map(), submit() or result() call starts;
        resuming it then raises StreamError. Frames may be captured into :meth:`input_buffer`.

        Args:
            frames: uint8 or uint16 host arrays, as for :meth:`submit`. Each is read until the
                next one is asked for, so keep it unchanged until then.
            copy: yield new arrays (True, safe to keep), or read-only views of the page-locked
                output buffers (False: no copy, but each is valid only until the next
                iteration; show, encode or copy it before asking for the next one).

        Raises:
            StreamError: the StreamFilter is closed, or frames given to submit() still wait for
                their result() (their outputs would come out of this map() instead).
            FrameTypeError, FrameFormatError: a frame of the wrong type, dtype or shape, once the
                outputs of the frames before it are out.
        """
        self._take_over("map")
        copy = check_flag(copy, "copy")
        if self.pending:
            # a window still held cannot be taken before flush(): result() would refuse it
            take = ("flush() and take them with result() first" if self._in_flight.unflushed
                    else "take them with result() first")
            raise StreamError(f"map() with {self.pending} submitted frame(s) not yet taken; {take}")
        owner = object()
        self._map_owner = owner
        return self._map(frames, copy, owner)

    def _check_owner(self, owner: object) -> None:
        """Raise StreamError if the map() of ``owner`` no longer owns the frames in flight."""
        self._check_open("map")
        if self._map_owner is not owner:
            raise StreamError("this map() was left and its frames were dropped: a later map(), "
                              "submit() or result() call took the StreamFilter over")

    def _map(self, frames: Iterable[np.ndarray], copy: bool, owner: object) -> Iterator[np.ndarray]:
        """The generator behind map(), owning every frame in flight while ``owner`` is current."""
        failed: list[Exception] = []
        try:
            for frame in _taken(frames, failed):
                self._check_owner(owner)  # the loop over ``frames`` ran your code: check again
                if self.pending < self.ring + self._engine.delay:
                    if not self._submitted(frame, failed):
                        break
                    continue
                output = self._result() if copy else self._result_view()
                staged = self._start_staging(frame)
                yield output  # your work on it runs beside the copy of the next frame
                self._check_owner(owner)
                if staged:
                    self._end_staging(submit=True)
                elif not self._submitted(frame, failed):
                    break
            self._flush_tail()
            while True:
                # before looking at pending: a later call may have emptied it
                self._check_owner(owner)
                if not self.pending:
                    break
                yield self._result() if copy else self._result_view()
            if failed:  # ``frames`` raised or gave a bad frame: the frames before it are out
                raise failed[0]
        finally:
            # Ended by break, an exception or garbage collection: the frames still in flight belong
            # to no later call, so they go now (nothing is left when the loop ran to the end).
            if self._map_owner is owner and not self._closed:
                self._drop_in_flight()

    def _submitted(self, frame: Any, failed: list[Exception]) -> bool:
        """Submit ``frame``; False, its error put in ``failed``, when it is no frame submit()
        takes (cv2's None once a capture ends): refused before anything is queued, so the frames
        before it still come out, as when ``frames`` itself raises."""
        try:
            self._submit(frame)
        except (FrameTypeError, FrameFormatError) as exc:
            failed.append(exc)
            return False
        return True

    def _start_staging(self, frame: np.ndarray) -> bool:
        """Start copying ``frame`` into a free slot on the copier's threads; False (nothing
        started) when it must go through submit() instead: a new frame type, a bad frame
        (whose error submit() raises), or no free slot."""
        try:
            image = as_hwc(frame, what="input frame")
        except (TypeError, ValueError):
            return False
        if ((image.shape, image.dtype) != self._frame_type or not self._free
                or self._reserved is not None
                or any(np.may_share_memory(image, slot.host_in)  # submit() copies those
                       for slot in self._free)):
            return False
        slot = self._take_slot()
        self._staged = (slot, np.shape(frame), self._copier.start(slot.host_in, image))
        return True

    def _end_staging(self, *, submit: bool) -> None:
        """Finish the staged frame's copy, then queue it on the GPU (before any later frame) or,
        when its map() loop has ended, let it go and free its slot."""
        if self._staged is None:
            return
        slot, shape, copying = self._staged
        self._staged = None
        try:
            copying.wait()
        except BaseException:
            self._free.append(slot)
            raise
        if submit:
            self._queue(slot, shape)
        else:
            self._free.append(slot)

    def _result_view(self) -> np.ndarray:
        """The oldest output as a read-only view of its slot, which is reused by a later submit."""
        self._skip_silent()
        if self._ready or not self._in_flight or self._device_results:
            return self._result()
        slot, shape = self._in_flight.retire()
        self._free.append(slot)
        leased = self._leased.pop(slot.index, None)
        view = (leased if leased is not None else slot.host_out).reshape(shape)
        view.flags.writeable = False
        return view


def _taken(frames: Iterable[np.ndarray], failed: list[Exception]) -> Iterator[np.ndarray]:
    """The items of ``frames`` until it ends or raises; what it raised is put in ``failed``."""
    try:
        yield from frames
    except Exception as exc:  # noqa: BLE001 (raised again once the frames taken before it are out)
        failed.append(exc)
