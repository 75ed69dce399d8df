"""Pipeline: a source, a filter chain and a sink, run as epochs of the slot ring (:mod:`.ring`).

The epochs themselves (one backend and one set of slots each) are in :mod:`.epochs`.
"""

from __future__ import annotations

import logging
import signal
import threading
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from ..backends import plan_kernels
from ..backends.plan import ChainPlan
from ..frames.borders import DEFAULT_BORDER
from ..errors import Interrupted, StreamError
from ..chain.filters import FilterStage, parse_chain
from ..frames.checks import DEFAULT_MAX_PIXELS, check_frame_size, check_slot_memory
from ..interrupts import stop_on_signals
from .progressfile import ProgressFile
from .ring import RunControls, RunCounts, damage_found, frames_dropped
from .options import check_run_options
from .epochs import EpochRunner
from ..io.ffmpeg.damage import copied_damage
from ..io.open import open_sink, open_source
from ..io.sinks.sink import Sink
from ..frames.slots import FrameMeta, resized_planes
from ..io.sources.source import Source
from ..chain.resample import chain_shapes, pixel_stretch
from .settings import RunSettings, settings_from
from .steering import PipelineHandle
from .stats import RunStats
from ..frames.yuv import YuvLayout

log = logging.getLogger(__name__)

class Pipeline(EpochRunner):
    """A source, a filter chain and a sink, run with a ring of slots.

    Args:
        source: a Source, or a SOURCE spec (``test:1280x720@30``, a path or URL).
        filters: filter specs (``"gaussian:sigma=2"``) or FilterStage objects, applied in order.
        sink: a Sink, an output path, or None to discard frames.
        settings: how the run runs (:class:`streamconv.run.settings.RunSettings`), made once by
            the caller; or give its values as the keywords backend, border, ring, max_frames,
            device, kernel, colour, max_pixels, decoder and depth (not both).
        backend: ``"auto"``, ``"cpu"``, ``"cuda"``.
        border: border mode for every stage (default reflect101).
        ring: number of slots (1 to 64, within the host memory available); 3 lets read, GPU
            work and write overlap.
        max_frames: stop after this many frames (None: the whole source).
        device: CUDA device number.
        kernel: CUDA kernel variant, ``"auto"`` or a name from
            ``streamconv.backends.plan.VARIANTS`` (the cpu backend takes ``separable`` and ignores
            the others).
        progress: draw a progress bar (or the status line) on stderr if it is a terminal.
        progress_file: also write FFmpeg-style key=value progress blocks (a
            :class:`streamconv.run.progressfile.ProgressFile`, or a path or ``-`` to open as one),
            about every 0.5 s and, with ``progress=end``, once the output is final.
        status: draw a live status line instead of the bar (fps, drops, per-stage p50/p95,
            once a second).
        on_frame: called as ``on_frame(frame, meta)`` in the writer thread after each
            frame is sent; ``frame`` is an (H, W, C) uint8 or uint16 host array valid only during
            the call.
        sink_options: FileSink options when ``sink`` is a path (codec, crf, preset, overwrite...).
        max_pixels: refuse a source whose frames have more pixels than this (None: no
            limit), before any host or device buffer is allocated; checked again when the
            frame size changes mid-stream.
        decoder: who decodes a file or stream given as a spec: ``"auto"`` (NVDEC when the backend
            is cuda and NVDEC takes the stream, else the CPU), ``"cpu"`` or ``"nvdec"`` (see
            :func:`streamconv.io.open.open_source`). With NVDEC and the cuda backend on the same
            device, frames that travel as planes are decoded into the slots' device buffers:
            nothing is uploaded.
        depth: bits per sample a file or stream given as a spec is filtered in, 8 or 16 (None:
            16 for video deeper than 8 bits, else 8; see
            :class:`streamconv.io.sources.file.FileSource`).
        colour: where yuv420p video is converted to and from RGB. ``"backend"``: when the
            source decodes yuv420p and the sink encodes it (and no ``on_frame`` wants RGB),
            the slots carry the planes and the backend converts (cuda: on the GPU, so half the
            bytes cross PCIe and no host scaler runs; cpu: with NumPy, exactly as the GPU).
            ``"host"``: FFmpeg's scaler in the reader and writer threads, RGB slots.
            ``"auto"`` (default): backend on every backend wherever the formats allow it (so
            the CPU and the GPU give the same bytes), else host (yuv444p, odd sizes, ...).

    The frames move through the slot ring (:mod:`streamconv.run.ring`) in epochs, each with one
    backend and one set of slots: a new epoch begins when set_filters() swaps the chain or
    the source's frame size changes, and the source stays open across them.

    ``run()`` owns the source and sink from then on and closes both; a pipeline runs once.
    One that will not run is released with :meth:`close` (or by using it as a context
    manager): its source is closed and its output, if a file, is never created.

    Examples:
        >>> import os, tempfile, streamconv
        >>> out = os.path.join(tempfile.mkdtemp(), "edges.mp4")
        >>> stats = streamconv.Pipeline("test:320x240,frames=10", ["edge"], out,
        ...                             backend="cpu").run()
        >>> stats.frames, sorted(stats.summary())
        (10, ['kernel', 'latency', 'read', 'write'])
        >>> with streamconv.FileSource(out) as video:
        ...     video.shape, video.frame_count
        ((240, 320, 3), 10)
    """

    def __init__(self, source: Source | str | Path, filters: Sequence[str | FilterStage] = (),
                 sink: Sink | str | Path | None = None, *, settings: RunSettings | None = None,
                 backend: str = "auto", border: str = DEFAULT_BORDER, ring: int = 3,
                 max_frames: int | None = None, device: int = 0, kernel: str = "auto",
                 progress: bool = False, status: bool = False,
                 on_frame: Callable[[np.ndarray, FrameMeta], None] | None = None,
                 sink_options: dict[str, Any] | None = None, colour: str = "auto",
                 max_pixels: int | None = DEFAULT_MAX_PIXELS, decoder: str = "auto",
                 progress_file: ProgressFile | str | Path | None = None,
                 depth: int | None = None) -> None:
        settings = settings_from(settings, backend=backend, border=border, ring=ring,
                                 max_frames=max_frames, device=device, kernel=kernel, colour=colour,
                                 max_pixels=max_pixels, decoder=decoder, depth=depth)
        checked = check_run_options({"progress": progress, "status": status, "on_frame": on_frame,
                                     "sink": sink, "sink_options": sink_options})
        self.filters = parse_chain(filters)
        self.settings = settings = settings.resolved()  # fail before any decoding
        self.backend_name, self.border = settings.backend, settings.border
        self.kernel = settings.kernel
        # the kernels, chosen once
        self.chain_plan = plan_kernels(self.kernel, self.filters, self.backend_name)
        self.ring, self.max_frames = settings.ring, settings.max_frames
        self.device = settings.device
        self.colour, self.max_pixels = settings.colour, settings.max_pixels
        self.progress, self.status, self.on_frame = progress, status, on_frame
        # depth None: the input's own
        depth_option = {"depth": settings.depth} if settings.depth is not None else {}
        self.source = open_source(source, decoder=settings.decoder_to_open(), device=self.device,
                                  **depth_option)
        try:
            check_frame_size(self.source.width, self.source.height, self.max_pixels,
                             self.source.describe())
            check_slot_memory(self.source.shape, self.source.dtype, self.ring,
                              out_shape=self.output_shape, what=self.source.describe())
            self.sink = open_sink(sink, like=self.source, shape=self.output_shape,
                                  stretch=pixel_stretch(self.filters, self.source.shape),
                                  **checked["sink_options"])
        except BaseException:
            self.source.close()
            raise
        self.progress_file = self._open_progress(progress_file)
        self._controls = RunControls()  # stop, swap and aborting, shared with the ring's threads
        self._counts = RunCounts()  # what the epochs read, skipped and found
        self.stop_signal: int | None = None
        self.filter_label: str | None = None
        self.stats: RunStats | None = None
        self._swap_lock = threading.Lock()
        self._pending: tuple[list[FilterStage], ChainPlan | None, str | None] | None = None
        self._released = False  # run() or close() owns the source and sink now

    def _open_progress(self,
                       progress_file: ProgressFile | str | Path | None) -> ProgressFile | None:
        """``progress_file`` as a ProgressFile (opened if a path), never the input's or output's
        file; the source and sink are released if it is refused."""
        if progress_file is None or isinstance(progress_file, ProgressFile):
            return progress_file
        named = {"the input": getattr(self.source, "path", None),
                 "the output": getattr(self.sink, "path", None)}
        try:
            return ProgressFile(progress_file, protect={role: spec for role, spec in named.items()
                                                        if spec is not None})
        except BaseException:
            self.source.close()
            self.sink.abort()
            raise

    @property
    def output_shape(self) -> tuple[int, int, int]:
        """(h, w, C) the chain makes of the source's frames: the size the sink is opened for."""
        return chain_shapes(self.filters, self.source.shape)[-1]

    @property
    def device_input(self) -> bool:
        """Whether the source writes frames straight into the slots' device planes (NVDEC on the
        backend's GPU, frames travelling as planes)."""
        return (self.backend_name == "cuda" and getattr(self.source, "device_frames", False)
                and getattr(self.source, "device", None) == self.device and self.planes is not None)

    @property
    def planes(self) -> YuvLayout | None:
        """The yuv420p layout the slots carry, or None when frames travel as RGB."""
        layout = getattr(self.source, "planes", None)
        # auto and backend alike: the planes path is exact for in-gamut colours on every backend,
        # where FFmpeg's scaler is not; host is only taken when asked for or the format needs it.
        if self.colour == "host" or layout is None or self.on_frame is not None:
            return None
        accepts = getattr(self.sink, "accepts_planes", None)
        # A chain that changes the size writes planes of its output's size: an odd side takes RGB.
        out = resized_planes(layout, self.output_shape)
        return layout if accepts is not None and out is not None and accepts(out) else None

    def stop(self, signum: int | None = None) -> None:
        """Ask a running pipeline to stop reading and finish; safe from signal handlers and
        threads."""
        if signum is not None and self.stop_signal is None:
            self.stop_signal = signum
        self._controls.stop.set()
        self.source.interrupt()  # a camera or stream may be waiting for its next frame

    def abort(self, signum: int | None = None) -> None:
        """Stop a running pipeline at once, from any thread: nothing more is written, the output
        is discarded and :meth:`run` raises :class:`Interrupted` (a batch's second signal)."""
        self._controls.aborting.set()
        self.stop(signum)

    def _stop_on_signal(self, signum: int) -> None:
        log.warning("%s: stopping; finishing the frames in flight and the output (a second signal "
                    "aborts without it)", signal.Signals(signum).name)
        self.stop(signum)

    def set_filters(self, filters: Sequence[str | FilterStage], *,
                    label: str | None = None) -> None:
        """Replace the filter chain between frames; safe from any thread, running or not.

        Frames already read are finished with the old chain; the compute thread then builds
        a new backend for ``filters`` (on the GPU, in its own CUDA context) and reading resumes.

        Args:
            filters: the new chain, as for the constructor ([] passes frames through).
            label: a name for the chain (shown by a display); becomes ``filter_label``.

        Raises:
            FilterSpecError: a spec is malformed, or the chosen kernel cannot run it (checked
                here, in the caller's thread).
        """
        chain = parse_chain(filters)
        plan = (plan_kernels(self.kernel, chain, self.backend_name)
                if self.backend_name == "cuda" else None)
        with self._swap_lock:
            self._pending = (chain, plan, label)
        self._controls.swap.set()

    def _take_pending(self) -> tuple[list[FilterStage], ChainPlan | None, str | None] | None:
        with self._swap_lock:
            pending, self._pending = self._pending, None
            self._controls.swap.clear()
        return pending

    @property
    def stopping(self) -> bool:
        """True once stop() was called (a key, a signal, an error)."""
        return self._controls.stop.is_set()

    @property
    def dropped(self) -> int:
        """Frames dropped so far: by a live source, and stale slots the compute thread skipped."""
        return frames_dropped(self.source, self._counts)

    def run(self) -> RunStats:
        """Process every frame (or max_frames), close the source and sink, and return the timings.

        Ctrl-C or SIGTERM stops reading, drains the frames in flight through the sink and
        finishes the output; a second signal aborts without it. Damage found in the input
        (``stats.damage``) is logged as one warning.

        Raises:
            StreamconvError: a subclass of it for input, output, backend and stream failures;
                the frames finished before a failure are written and the output finalized.
        """
        if self._released:
            raise StreamError("this pipeline has already run or been closed; make a new one")
        self._released = True
        try:
            return self._run()
        finally:
            if self.progress_file is not None:
                self.progress_file.close()  # progress=end: the output is final, or the run failed

    def _run(self) -> RunStats:
        stats = RunStats()
        self.stats = stats
        # The handlers stay until the output is final: a first signal during the encoder's
        # flush still ends in a complete file; a second one (Interrupted) discards it at once.
        with stop_on_signals(self._stop_on_signal):
            try:
                with self.source:
                    attach = getattr(self.sink, "attach", None)
                    if attach is not None:  # a display steers the run through a narrow handle
                        attach(PipelineHandle(self))
                    self._apply_pending()
                    self._run_epochs(stats)
                    if self._controls.aborting.is_set():
                        raise Interrupted(self.stop_signal or signal.SIGTERM)
                    if self._counts.source_ended and not self.stopping:  # not after --max-frames
                        self._copy_trailing_packets()
            except BaseException as exc:
                self._count_losses(stats)
                if isinstance(exc, Interrupted):
                    self.sink.abort()
                else:
                    self._finish_sink_after_error()
                raise
            self._count_losses(stats)
            self.sink.close()
        stats.interrupted = self.stopping
        if stats.damage:
            log.warning("input damaged: %s; every frame that decoded was processed (%d)",
                        "; ".join(stats.damage), stats.frames)
        return stats

    def close(self) -> None:
        """Release a pipeline that will not run: close the source and abort the sink (a file
        output is not created). Nothing to do after :meth:`run`, or a second time."""
        if self._released:
            return
        self._released = True
        try:
            self.source.close()
        finally:
            self.sink.abort()
            if self.progress_file is not None:
                self.progress_file.close()

    def __enter__(self) -> "Pipeline":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _count_losses(self, stats: RunStats) -> None:
        """Frames dropped (live), what was found wrong with the input, and who decoded it (a
        decoder can hand over mid-way)."""
        stats.dropped = self.dropped
        stats.decoder = getattr(self.source, "decoder", stats.decoder)
        stats.decode_errors = damage_found(self.source)
        damage = getattr(self.source, "damage", None)
        stats.damage = damage() if damage is not None else []
        stats.damage += copied_damage(0, self.sink.packets_refused)

    def _apply_pending(self) -> bool:
        pending = self._take_pending()
        if pending is None:
            return False
        self.filters, self.chain_plan, self.filter_label = pending
        return True

    def _copy_trailing_packets(self) -> None:
        """Audio and subtitle packets after the last frame go to the sink before it closes."""
        take = getattr(self.source, "take_packets", None)
        mux = getattr(self.sink, "mux_packets", None)
        if take is not None and mux is not None:
            packets = take()
            if packets:
                mux(packets)

    def _finish_sink_after_error(self) -> None:
        """Keep the frames already written (finalized), or leave nothing if there are none."""
        if self.sink.frames_written == 0 or self.sink.failed:
            self.sink.abort()
            return
        try:
            self.sink.close()
            log.warning("kept the %d frames written before the error in %s",
                        self.sink.frames_written, self.sink.describe())
        except Interrupted:
            self.sink.abort()
            raise
        except Exception as exc:  # the first error is the one to report
            log.warning("could not finish the output after the error: %s", exc)
            self.sink.abort()
