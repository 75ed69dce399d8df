"""The slot ring: one epoch of frames read, filtered and written through a fixed set of slots.

    free --reader: source.read_into(slot.host_in)--> filled
    filled --compute (the thread that calls run(); owns every CUDA call): submit--> in flight
    in flight --backend says done--> done --writer: sink.send(slot.host_out)--> free

The compute thread keeps the slots in flight in order with
:class:`streamconv.run.inflight.InFlight`, as StreamFilter does in its caller's thread.

The ring bounds memory: at most ``ring`` frames exist at once. A file source blocks when
no slot is free and never drops a frame; a live source keeps only its newest frame, and
when several filled slots wait, the compute thread takes the newest and recycles the
older ones (counted as dropped), so latency does not grow with the backlog.

An epoch has one backend and one set of slots. It ends when the source ends, max_frames are
read, stop is set, a filter swap is asked for or the frame size changes; every frame it read
is still filtered and written (unless aborting is set). Pipeline runs the epochs one after
another and reads what they counted from :class:`RunCounts`.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

import numpy as np

from ..errors import Interrupted
from ..frames.slots import RESIZED, FrameMeta, Slot
from .inflight import InFlight

if TYPE_CHECKING:
    from ..backends.protocol import Backend
    from ..io.sinks.sink import Sink
    from ..io.sources.source import Source
    from .progress import ProgressBar, StatusLine
    from .stats import RunStats

log = logging.getLogger(__name__)

_END = object()  # marks the end of a queue's frames

READ_PATIENCE = 2.0
"""Seconds a stopped ring waits for a read still in progress before it finishes without it: a
network input that sends nothing more (with no timeout) would hold up the output for ever."""


@dataclass
class RunControls:
    """The events a run's threads watch, set from any thread (signal handlers included)."""

    stop: threading.Event = field(default_factory=threading.Event)  # stop reading and finish
    # a new chain waits: end the epoch
    swap: threading.Event = field(default_factory=threading.Event)
    # a second signal: write no more
    aborting: threading.Event = field(default_factory=threading.Event)


@dataclass
class RunCounts:
    """What a run's epochs counted, for the pipeline to read between and after them."""

    read: int = 0  # frames read, stale live ones included
    skipped: int = 0  # stale live frames the compute thread recycled unfiltered
    exhausted: bool = False  # no more frames wanted: the source ended, or max_frames read
    resized: bool = False  # the frame size changed: the next epoch re-sizes the slots
    source_ended: bool = False  # the source had no more frames (not a stop)


def frames_dropped(source: Source, counts: RunCounts) -> int:
    """Frames dropped so far: by a live source, and stale slots the compute thread skipped."""
    return getattr(source, "dropped", 0) + counts.skipped


def damage_found(source: Source) -> int:
    """Damaged packets or frames the source found so far: skipped, or concealed by its decoder."""
    return getattr(source, "decode_errors", 0) + getattr(source, "concealed", 0)


@dataclass
class RunClock:
    """When the run's first frame was read, its first written and its last written
    (``time.perf_counter()``)."""

    first: float | None = None
    last: float | None = None
    first_written: float | None = None

    @property
    def seconds(self) -> float | None:
        """Wall time from the first read to the last write, or None before a frame is written."""
        if self.first is None or self.last is None:
            return None
        return self.last - self.first


class RingEpoch:
    """One epoch: a backend and its slots, the queues between the threads, the reader and writer
    threads, and the errors those threads raised (the first one is reported).

    Args:
        backend: the backend that filters this epoch's frames; the caller closes it.
        slots: the backend's slots, all free.
        source, sink: the run's source and sink (neither is closed here).
        controls: the run's stop, swap and aborting events.
        counts: the run's counts, carried from epoch to epoch.
        stats, bar, clock: where each written frame's timings, progress and time go.
        max_frames: frames to filter in the whole run (None: all).
        on_frame: called as ``on_frame(frame, meta)`` in the writer thread after each send.
    """

    def __init__(self, backend: Backend, slots: list[Slot], *, source: Source, sink: Sink,
                 controls: RunControls, counts: RunCounts, stats: RunStats,
                 bar: ProgressBar | StatusLine, clock: RunClock, max_frames: int | None,
                 on_frame: Callable[[np.ndarray, FrameMeta], None] | None) -> None:
        self.backend = backend
        self.source = source
        self.sink = sink
        self.controls = controls
        self.counts = counts
        self.stats = stats
        self.bar = bar
        self.clock = clock
        self.max_frames = max_frames
        self.on_frame = on_frame
        self.free: queue.Queue = queue.Queue()
        self.filled: queue.Queue = queue.Queue()
        self.done: queue.Queue = queue.Queue()  # (slot, its input kept for the sink, or None)
        for slot in slots:
            self.free.put(slot)
        self.slot_count = len(slots)
        # A chain with stages across frames puts out frame i on the slot of frame i + delay (or a
        # free one at the end): a sink that shows each output beside its input (side by side)
        # gets a copy of frame i's input, kept from its read until its output is written.
        self.keep_inputs = backend.delay > 0 and bool(getattr(sink, "shows_input", False))
        self.errors: list[BaseException] = []
        self.reader_abandoned = False  # stopped, and the reader was still blocked in a read
        self.in_read = False  # the reader is inside source.read_into (not waiting for a slot)

    def run(self) -> None:
        """Read, filter and write until the source ends, stop, a filter swap or a new frame
        size; then raise the first error any of the three threads met."""
        # Daemons: a read blocked forever never holds up the process's exit.
        reader = threading.Thread(target=self._read_loop, name="streamconv-reader", daemon=True)
        writer = threading.Thread(target=self._write_loop, name="streamconv-writer", daemon=True)
        reader.start()
        writer.start()
        try:
            self._compute_loop(self.free if self.source.is_live else None)
        except BaseException as exc:
            self.errors.insert(0, exc)
            self.controls.stop.set()
            if isinstance(exc, Interrupted):
                # nothing more is written; a blocked read is not waited for
                self.controls.aborting.set()
        finally:
            self._finish(reader, writer, patience=1.0 if self.controls.aborting.is_set() else None)
        if self.errors:
            raise self.errors[0]

    def _finish(self, reader: threading.Thread, writer: threading.Thread, *,
                patience: float | None) -> None:
        """End the writer's frames and wake a reader waiting for a slot, then wait for the
        writer and the reader, each for at most ``patience`` seconds (None: until they end)."""
        self.done.put(_END)
        self.free.put(None)  # wakes a reader waiting for a slot
        writer.join(patience)
        # An abort does not wait for a read that may never return (a silent input); an error
        # of the compute thread waits READ_PATIENCE for it at most.
        if self.reader_abandoned or (self.in_read and self.controls.aborting.is_set()):
            self._give_up_reader(quietly=True)
            return
        reader.join(READ_PATIENCE if patience is None and self.in_read else patience)
        if reader.is_alive() and self.in_read:
            self._give_up_reader()

    def _read_loop(self) -> None:
        """The reader thread: fill free slots until the source ends, max_frames are read,
        stop or a filter swap; then tell the compute thread (``_END``)."""
        try:
            while self._read_one():
                continue
        except BaseException as exc:
            self.errors.append(exc)
            self.controls.stop.set()
        finally:
            self.filled.put(_END)

    def _reading_ends(self) -> bool:
        """Whether the reader must stop now: stop is set, or a new chain waits."""
        return self.controls.stop.is_set() or self.controls.swap.is_set()

    def _read_one(self) -> bool:
        """Read the next frame into a free slot and pass it on; False when reading ends."""
        counts = self.counts
        if self._reading_ends():
            return False
        # Stale live frames skipped by the compute thread do not count as read.
        if self.max_frames is not None and counts.read - counts.skipped >= self.max_frames:
            counts.exhausted = True
            return False
        slot = self.free.get()
        if slot is None or self._reading_ends():
            if slot is not None:
                self.free.put(slot)  # a chain's tail may still want it (_flush_tail)
            return False
        slot.reset()
        started = time.perf_counter()
        self.in_read = True
        try:
            meta = self.source.read_into(slot.input_target)
        finally:
            self.in_read = False
        ready = time.perf_counter()
        if meta is RESIZED:  # a new epoch re-sizes the slots; this one drains
            counts.resized = True
            self.free.put(slot)
            return False
        if meta is None:
            counts.exhausted = counts.source_ended = not self.controls.stop.is_set()
            self.free.put(slot)
            return False
        # Latency counts from capture for live frames, from the start of the read otherwise.
        if meta.captured is None:
            meta.captured = started
        slot.started = meta.captured
        slot.counts_at_read = (frames_dropped(self.source, counts), damage_found(self.source))
        slot.times["read"] = ready - meta.captured
        slot.meta = meta
        if self.clock.first is None:
            self.clock.first = slot.started
        self.filled.put(slot)
        counts.read += 1
        return True

    def _write_loop(self) -> None:
        """The writer thread: write done slots in order and free them, until ``_END``; after an
        error of its own or an abort, it only frees them."""
        with_input = getattr(self.sink, "send_with_input", None)
        failed = False
        while True:
            done = self.done.get()
            if done is _END:
                return
            slot, kept_input = done
            if not failed and not self.controls.aborting.is_set() and slot.has_output \
                    and not (slot.meta is not None and slot.meta.context):
                try:
                    self._write_one(slot, with_input, kept_input)
                except BaseException as exc:
                    self.errors.append(exc)
                    failed = True
                    self.controls.stop.set()
            self.free.put(slot)

    def _write_one(self, slot: Slot, with_input: Callable | None,
                   kept_input: np.ndarray | None = None) -> None:
        """Send one frame to the sink (with its input, where the sink shows both: ``kept_input``,
        the host copy of the input the output was made from, or else the slot's ``host_in``) and
        to on_frame, then record its timings."""
        begin = time.perf_counter()
        if with_input is not None:
            source_frame = kept_input if kept_input is not None else slot.host_in
            with_input(slot.host_out, source_frame, slot.meta)
        else:
            self.sink.send(slot.host_out, slot.meta)
        if self.on_frame is not None:
            self.on_frame(slot.host_out, slot.meta)
        end = time.perf_counter()
        slot.times["write"] = end - begin
        slot.times["latency"] = end - slot.started
        self.clock.last = end
        if self.clock.first_written is None:
            self.clock.first_written = end
        dropped, damaged = slot.counts_at_read
        self.stats.record(slot.times, at=slot.started - self.clock.first, dropped=dropped,
                          damaged=damaged)
        self.stats.dropped = frames_dropped(self.source, self.counts)
        self.bar.update(self.stats.frames)

    def _compute_loop(self, recycle: queue.Queue | None) -> None:
        """Submit filled slots; retire them in order once the backend reports them done.

        With ``recycle`` (live sources), only the newest of several waiting slots is
        submitted; the older ones go back to ``recycle`` (the free queue) as dropped. Once
        the reader has finished, the last slots are all filtered: none is stale any more.
        """
        in_flight: InFlight[np.ndarray | None] = InFlight(self.backend)
        ended = False
        while not ended:
            slot = self._next_filled(in_flight)
            if slot is _END:
                break
            batch, ended = self._fresh_batch(slot, recycle)
            for slot in batch:
                try:
                    in_flight.submit(slot, slot.host_in.copy() if self.keep_inputs else None)
                except BaseException:
                    # the frames before this one are still good
                    for finished in in_flight.salvage():
                        self.done.put(finished)
                    raise
                for finished in in_flight.retire_done():
                    self.done.put(finished)
        if not self.controls.aborting.is_set():
            self._flush_tail(in_flight)
        for finished in in_flight.drain():
            self.done.put(finished)

    def _flush_tail(self, in_flight: InFlight) -> None:
        """The input has ended (or stopped): the outputs a chain with stages across frames still
        owes go out through free slots, finishing frames in flight while none is free."""
        if self.reader_abandoned and self.slot_count == 1:  # the blocked read holds the only slot
            log.warning("the last %d frame(s) of the chain's window are lost: no slot is free",
                        in_flight.unflushed)
            return
        while in_flight.unflushed:
            try:
                slot = self.free.get_nowait()
            except queue.Empty:
                if in_flight:
                    self.done.put(in_flight.retire())
                    continue
                slot = self.free.get()
            slot.reset()
            in_flight.flush(slot)
            for finished in in_flight.retire_done():
                self.done.put(finished)

    def _next_filled(self, in_flight: InFlight) -> Slot | object:
        """The next filled slot (or ``_END``); while none waits, finish the oldest frame in
        flight."""
        while True:
            try:
                return self.filled.get_nowait()
            except queue.Empty:
                if not in_flight:
                    return self._wait_filled()
                # nothing new to start: finish the oldest frame
                self.done.put(in_flight.retire())

    def _wait_filled(self) -> Slot | object:
        """The next filled slot, or ``_END``: from the reader, or once a stop has waited
        READ_PATIENCE seconds for a reader blocked in a read (it delivers nothing when it
        returns: the source was interrupted)."""
        stopped_at = None
        while True:
            try:
                return self.filled.get(timeout=0.1)
            except queue.Empty:
                if not self.controls.stop.is_set():
                    continue
            stopped_at = stopped_at or time.monotonic()
            # An abort (a batch's or several sources' second signal) writes nothing more: no
            # patience.
            patience = 0 if self.controls.aborting.is_set() else READ_PATIENCE
            if self.in_read and time.monotonic() - stopped_at >= patience:
                self._give_up_reader(quietly=not patience)
                return _END

    def _give_up_reader(self, *, quietly: bool = False) -> None:
        """Finish without the reader, blocked in a read: the source is interrupted first (a stop
        that did not come through Pipeline.stop, a writer's error, did not), so that the read
        writes nothing into slots freed meanwhile when it returns."""
        self.reader_abandoned = True
        self.source.interrupt()
        if not quietly:
            log.warning("the input sent nothing for %g s after the stop: finishing without it",
                        READ_PATIENCE)

    def _fresh_batch(self, slot: Slot, recycle: queue.Queue | None) -> tuple[list[Slot], bool]:
        """The slots to submit, starting with ``slot``, and whether the reader has finished.

        Without ``recycle``: ``slot`` alone. With it (a live source), every slot waiting is
        taken too; unless the reader's ``_END`` is among them, only the newest is kept and
        the older ones go back to ``recycle``, counted as dropped.
        """
        batch = [slot]
        while recycle is not None:
            try:
                batch.append(self.filled.get_nowait())
            except queue.Empty:
                break
        if batch[-1] is _END:
            batch.pop()
            return batch, True
        for stale in batch[:-1]:
            self.counts.skipped += 1  # before the slot is free: the reader reads a replacement
            recycle.put(stale)
        return batch[-1:], False
