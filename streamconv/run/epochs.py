"""The epochs of a Pipeline's run: one backend and one set of slots each, run through the slot
ring (:mod:`.ring`), a new one when the chain is swapped or the source's frame size changes."""

from __future__ import annotations

import logging

from ..backends import create_backend
from ..frames.checks import check_frame_size, check_slot_memory
from ..frames.yuv import YuvLayout
from .progress import ProgressBar, StatusLine
from .ring import RingEpoch, RunClock
from .stats import RunStats

log = logging.getLogger("streamconv.run.pipeline")  # the pipeline's messages, under its name


class EpochRunner:
    """Mixed into :class:`streamconv.run.pipeline.Pipeline`: its run as epochs of the slot ring."""

    def _run_epochs(self, stats: RunStats) -> None:
        """Run the ring with one backend and one set of slots per epoch: a new epoch begins
        when set_filters() swaps the chain or the source's frame size changes."""
        bar = self._progress_display(stats)
        clock = RunClock()
        planes = self.planes
        log.info("colour: %s", f"{planes.describe()} planes, converted by the backend" if planes
                 else "RGB, converted on the host")
        try:
            while True:
                self._run_epoch(stats, bar, clock, planes)
                if self.stopping or self._counts.exhausted:
                    break
                resized, self._counts.resized = self._counts.resized, False
                swapped = self._apply_pending()
                if not (resized or swapped):
                    break
                planes = self._after_resize(stats) if resized else self.planes
                if swapped:
                    log.info("filters now: %s", self.filter_label or
                             (" -> ".join(f.describe() for f in self.filters) or "none"))
        finally:
            bar.close()
            if clock.seconds is not None:
                stats.wall_seconds = clock.seconds
            stats.first_written = clock.first_written

    def _progress_display(self, stats: RunStats) -> ProgressBar | StatusLine:
        """The progress bar (of max_frames or the source's frame count), or the status line."""
        total = self.source.frame_count
        if self.max_frames is not None:
            total = self.max_frames if total is None else min(total, self.max_frames)
        enabled = None if self.progress else False
        bar = (StatusLine(stats, enabled=enabled) if self.status
               else ProgressBar(total, enabled=enabled))
        if self.progress_file is None:
            return bar
        self.progress_file.begin(stats, self.source.frame_rate)
        return self.progress_file.alongside(bar)

    def _run_epoch(self, stats: RunStats, bar: ProgressBar | StatusLine, clock: RunClock,
                   planes: YuvLayout | None) -> None:
        """One backend and one set of slots for the chain and frame size of now, until the
        source ends, stop(), a filter swap or a new frame size."""
        backend = create_backend(self.backend_name, self.filters, border=self.border,
                                 device=self.device, kernel=self.kernel, plan=self.chain_plan)
        try:
            stats.backend = backend.describe()
            log.info("%s -> %s on %s", self.source.describe(), self.sink.describe(), stats.backend)
            if stats.set_delay(backend.delay, self.source.frame_rate):  # stages across frames
                log.info("the output is %d frame(s) (%.0f ms) behind the input", backend.delay,
                         1e3 * stats.delay_seconds)
            in_place = {"device_input": True} if planes is not None and self.device_input else {}
            slots = backend.allocate_slots(self.source.shape, self.ring, planes=planes,
                                           dtype=self.source.dtype, **in_place)
            RingEpoch(backend, slots, source=self.source, sink=self.sink, controls=self._controls,
                      counts=self._counts, stats=stats, bar=bar, clock=clock,
                      max_frames=self.max_frames, on_frame=self.on_frame).run()
        finally:
            slots = None  # the next epoch's memory check must not count these
            backend.close()

    def _after_resize(self, stats: RunStats) -> YuvLayout | None:
        """The source's frames changed size: refuse the new size if too large, count it, and
        return the planes layout the next epoch's slots carry (None: RGB)."""
        check_frame_size(self.source.width, self.source.height, self.max_pixels,
                         self.source.describe())
        planes = self.planes
        # The first epoch's slots were checked when the pipeline was made; a new size is checked
        # here.
        check_slot_memory(self.source.shape, self.source.dtype, self.ring, planes=planes,
                          what=self.source.describe(), out_shape=self.output_shape)
        stats.resizes += 1
        log.info("slots re-sized to %dx%d; colour: %s", self.source.width, self.source.height,
                 "planes" if planes else "RGB")
        return planes
