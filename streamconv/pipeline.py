"""Moves frames source -> backend -> sink through a ring of slots, on three threads.

    free --reader: source.read_into(slot.host_in)--> filled
    filled --compute (the thread that calls run(); owns every CUDA call): submit--> in flight
    in flight --backend says done--> done --writer: sink.send(slot.host_out)--> free

The ring bounds memory: at most ``ring`` frames exist at once. A file source blocks when
no slot is free and never drops a frame. Ctrl-C or SIGTERM stops reading, drains the
frames in flight through the sink, and finishes the output.
"""

from __future__ import annotations

import logging
import queue
import signal
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from .backends import create_backend, resolve_backend
from .borders import DEFAULT_BORDER, check_border
from .errors import FrameFormatError
from .filters import FilterStage, parse_chain
from .progress import ProgressBar
from .sinks import Sink, open_sink
from .slots import FrameMeta, Slot
from .sources import Source, open_source
from .stats import RunStats

log = logging.getLogger(__name__)

_END = object()  # marks the end of a queue's frames


class Pipeline:
    """A source, a filter chain and a sink, run with a ring of slots.

    Args:
        source: a Source, or a SOURCE spec (``test:1280x720@30``, a path or URL).
        filters: filter specs (``"gaussian:sigma=2"``) or FilterStage objects, applied in order.
        sink: a Sink, an output path, or None to discard frames.
        backend: ``"auto"``, ``"cpu"``, ``"cuda"``.
        border: border mode for every stage (default reflect101).
        ring: number of slots (>= 1); 3 lets read, GPU work and write overlap.
        max_frames: stop after this many frames (None: the whole source).
        device: CUDA device number.
        progress: draw a progress bar on stderr if it is a terminal.
        on_frame: called as ``on_frame(frame, meta)`` in the writer thread after each
            frame is sent; ``frame`` is an (H, W, C) uint8 host array valid only during the call.
        sink_options: FileSink options when ``sink`` is a path (codec, crf, preset, overwrite...).

    ``run()`` owns the source and sink from then on and closes both.

    Example:
        >>> import os, tempfile, streamconv
        >>> out = os.path.join(tempfile.mkdtemp(), "edges.mp4")
        >>> stats = streamconv.Pipeline("test:320x240,frames=10", ["edge"], out, backend="cpu").run()
        >>> stats.frames, sorted(stats.summary())
        (10, ['kernel', 'latency', 'read', 'write'])
        >>> with streamconv.FileSource(out) as video:
        ...     video.shape, video.frame_count
        ((240, 320, 3), 10)
    """

    def __init__(self, source: Source | str | Path, filters: Sequence[str | FilterStage] = (),
                 sink: Sink | str | Path | None = None, *, backend: str = "auto",
                 border: str = DEFAULT_BORDER, ring: int = 3, max_frames: int | None = None,
                 device: int = 0, progress: bool = False,
                 on_frame: Callable[[np.ndarray, FrameMeta], None] | None = None,
                 sink_options: dict[str, Any] | None = None) -> None:
        if ring < 1:
            raise FrameFormatError(f"ring must be at least 1, got {ring}")
        if max_frames is not None and max_frames < 0:
            raise FrameFormatError(f"max_frames must be >= 0, got {max_frames}")
        self.filters = parse_chain(filters)
        self.border = check_border(border)
        self.backend_name = resolve_backend(backend, device=device)  # fail before any decoding
        self.ring = ring
        self.max_frames = max_frames
        self.device = device
        self.progress = progress
        self.on_frame = on_frame
        self.source = open_source(source)
        try:
            self.sink = open_sink(sink, like=self.source, **(sink_options or {}))
        except BaseException:
            self.source.close()
            raise
        self._stop = threading.Event()
        self.stop_signal: int | None = None

    def stop(self, signum: int | None = None) -> None:
        """Ask a running pipeline to stop reading and finish; safe from signal handlers and threads."""
        if signum is not None and self.stop_signal is None:
            self.stop_signal = signum
        self._stop.set()

    def run(self) -> RunStats:
        """Process every frame (or max_frames), close the source and sink, and return the timings.

        Raises:
            StreamconvError subclasses for input, output, backend and stream failures;
            the frames finished before a failure are written and the output finalized.
        """
        stats = RunStats()
        restore = self._install_signal_handlers()
        try:
            with self.source:
                backend = create_backend(self.backend_name, self.filters, border=self.border,
                                         device=self.device)
                try:
                    stats.backend = backend.describe()
                    log.info("%s -> %s on %s", self.source.describe(), self.sink.describe(), stats.backend)
                    slots = backend.allocate_slots(self.source.shape, self.ring)
                    self._run_ring(backend, slots, stats)
                finally:
                    backend.close()
        except BaseException:
            self._finish_sink_after_error()
            raise
        finally:
            restore()
        self.sink.close()
        stats.interrupted = self._stop.is_set()
        return stats

    def _finish_sink_after_error(self) -> None:
        """Keep the frames already written (finalized), or leave nothing if there are none."""
        if self.sink.frames_written == 0:
            self.sink.abort()
            return
        try:
            self.sink.close()
            log.warning("kept the %d frames written before the error in %s",
                        self.sink.frames_written, self.sink.describe())
        except Exception as exc:  # the first error is the one to report
            log.warning("could not finish the output after the error: %s", exc)
            self.sink.abort()

    def _install_signal_handlers(self) -> Callable[[], None]:
        if threading.current_thread() is not threading.main_thread():
            return lambda: None
        previous = {}

        def handle(signum, _frame):
            if self._stop.is_set() and signum == signal.SIGINT:
                raise KeyboardInterrupt  # a second Ctrl-C aborts without draining
            self.stop(signum)

        for signum in (signal.SIGINT, signal.SIGTERM):
            previous[signum] = signal.signal(signum, handle)
        return lambda: [signal.signal(s, h) for s, h in previous.items()]

    def _run_ring(self, backend, slots: list[Slot], stats: RunStats) -> None:
        free: queue.Queue = queue.Queue()
        filled: queue.Queue = queue.Queue()
        done: queue.Queue = queue.Queue()
        for slot in slots:
            free.put(slot)
        errors: list[BaseException] = []
        total = self.source.frame_count
        if self.max_frames is not None:
            total = self.max_frames if total is None else min(total, self.max_frames)
        bar = ProgressBar(total, enabled=None if self.progress else False)
        clock = {"first": None, "last": None}

        def read_loop() -> None:
            count = 0
            try:
                while not self._stop.is_set() and (self.max_frames is None or count < self.max_frames):
                    slot = free.get()
                    if slot is None or self._stop.is_set():
                        break
                    slot.reset()
                    slot.started = time.perf_counter()
                    meta = self.source.read_into(slot.host_in)
                    if meta is None:
                        break
                    slot.times["read"] = time.perf_counter() - slot.started
                    slot.meta = meta
                    if clock["first"] is None:
                        clock["first"] = slot.started
                    filled.put(slot)
                    count += 1
            except BaseException as exc:
                errors.append(exc)
                self._stop.set()
            finally:
                filled.put(_END)

        def write_loop() -> None:
            failed = False
            while True:
                slot = done.get()
                if slot is _END:
                    return
                if not failed:
                    try:
                        begin = time.perf_counter()
                        self.sink.send(slot.host_out, slot.meta)
                        if self.on_frame is not None:
                            self.on_frame(slot.host_out, slot.meta)
                        end = time.perf_counter()
                        slot.times["write"] = end - begin
                        slot.times["latency"] = end - slot.started
                        clock["last"] = end
                        stats.record(slot.times)
                        bar.update(stats.frames)
                    except BaseException as exc:
                        errors.append(exc)
                        failed = True
                        self._stop.set()
                free.put(slot)

        reader = threading.Thread(target=read_loop, name="streamconv-reader", daemon=True)
        writer = threading.Thread(target=write_loop, name="streamconv-writer", daemon=True)
        reader.start()
        writer.start()
        try:
            self._compute_loop(backend, filled, done)
        except BaseException as exc:
            errors.insert(0, exc)
            self._stop.set()
        finally:
            done.put(_END)
            free.put(None)  # wakes a reader waiting for a slot
            writer.join()
            reader.join()
            bar.close()
        if clock["first"] is not None and clock["last"] is not None:
            stats.wall_seconds = clock["last"] - clock["first"]
        if errors:
            raise errors[0]

    @staticmethod
    def _compute_loop(backend, filled: queue.Queue, done: queue.Queue) -> None:
        """Submit filled slots; retire them in order once the backend reports them done."""
        in_flight: deque[Slot] = deque()

        def retire() -> None:
            slot = in_flight.popleft()
            backend.wait(slot)
            done.put(slot)

        while True:
            try:
                slot = filled.get_nowait()
            except queue.Empty:
                if in_flight:
                    retire()  # nothing new to start: finish the oldest frame
                    continue
                slot = filled.get()
            if slot is _END:
                break
            backend.submit(slot)
            in_flight.append(slot)
            while in_flight and backend.is_done(in_flight[0]):
                retire()
        while in_flight:
            retire()
