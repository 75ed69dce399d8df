"""Frame sinks: encode to a file (PyAV), discard (null), hand frames to a callback, or fan out.

Every sink is a context manager with an idempotent ``close()`` and takes frames with
``send(frame, meta)``. ``frame`` is an (H, W, C) uint8 or uint16 host array that the sink must
not keep after ``send`` returns (the pipeline reuses the buffer).
"""

from __future__ import annotations

import logging
import threading
from fractions import Fraction
from functools import cached_property
from pathlib import Path
from typing import Callable, Sequence

import cv2  # (before av: see streamconv.display.check_import_order)
import av
import numpy as np

from .colour import ColourTags, format_bits, plane_rows, rgb_to_frame, yuv_tags
from .damage import missing_parameters
from .encoder_check import check_encoder_options
from .errors import OutputError, StreamError
from .ffmpeglog import ffmpeg_reason
from .interrupts import wait_interruptibly
from .publish import AtomicFile, check_output_path
from .slots import FrameMeta
from .yuv import DEEP_PLANE_FORMATS, YuvLayout

log = logging.getLogger(__name__)


class Sink:
    """Base class of sinks."""

    name = "sink"
    frames_written = 0
    failed = False
    """True once a write failed for good: nothing more can be finished (see FileSink)."""
    packets_refused = 0
    """Copied audio/subtitle packets the output refused (damaged input) and left out."""

    def send(self, frame: np.ndarray, meta: FrameMeta) -> None:
        """Consume one (H, W, C) uint8 or uint16 host frame; do not keep a reference to it."""
        raise NotImplementedError

    def send_with_input(self, frame: np.ndarray, source_frame: np.ndarray, meta: FrameMeta) -> None:
        """Consume a filtered frame with the input it was made from; both (H, W, C) uint8 or uint16 host
        arrays valid only during the call. The default ignores the input (see DisplaySink)."""
        self.send(frame, meta)

    def accepts_planes(self, layout: YuvLayout) -> bool:
        """Whether ``send`` can take frames as the flat yuv420p buffers of ``layout`` instead of
        RGB (then colour is converted by the backend, not on the host). The default: no."""
        return False

    def attach(self, pipeline) -> None:
        """Called by Pipeline.run() before the first frame; interactive sinks keep it to control
        the run (stop it, swap its filters). The default does nothing."""

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
    """Calls ``callback(frame, meta)`` for each frame; the frame buffer is only valid during the call."""

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

    def attach(self, pipeline) -> None:
        """Attach every sink that takes a pipeline (a display) to it."""
        for sink in self.sinks:
            attach = getattr(sink, "attach", None)
            if attach is not None:
                attach(pipeline)

    def send(self, frame: np.ndarray, meta: FrameMeta) -> None:
        """Send one (H, W, C) uint8 or uint16 host frame to each sink in order."""
        for sink in self.sinks:
            sink.send(frame, meta)
        self.frames_written += 1

    def accepts_planes(self, layout: YuvLayout) -> bool:
        """Only if every sink does."""
        return all(sink.accepts_planes(layout) for sink in self.sinks)

    def send_with_input(self, frame: np.ndarray, source_frame: np.ndarray, meta: FrameMeta) -> None:
        """Send the filtered frame and its input ((H, W, C) uint8 or uint16 host arrays) to each sink in order."""
        for sink in self.sinks:
            with_input = getattr(sink, "send_with_input", None)
            if with_input is not None:
                with_input(frame, source_frame, meta)
            else:
                sink.send(frame, meta)
        self.frames_written += 1

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


class FileSink(Sink):
    """Encodes RGB frames to a video file with PyAV.

    The file is written under a unique temporary name beside the output, created exclusively,
    and published on ``close()`` (:class:`streamconv.publish.AtomicFile`): an existing file is
    replaced only by a complete one and only with ``overwrite`` (keeping its permission bits),
    never an input, and a failed run leaves nothing behind. Timestamps and frame rate follow
    the source.

    Args:
        path: output file; its extension picks the container.
        width, height: frame size of the frames sent (pixels).
        frame_rate: nominal rate written to the stream.
        time_base: time base of the pts the frames carry.
        codec: FFmpeg encoder name (default libx264).
        pix_fmt: encoder pixel format; None picks yuv420p, or for input of more than 8 bits
            per sample (``bits``) the encoder's 4:2:0 format of that depth or the nearest
            deeper one (yuv420p10le, ...), with a warning where it has none.
        bits: bits per sample of the input (10 for yuv420p10le video; None: not known), for
            ``pix_fmt`` None and for the warning when 16-bit frames lose depth.
        crf, preset: quality and speed options for x264/x265-style encoders (None: codec default).
        overwrite: replace an existing file.
        protect: input specs (paths, ``file:`` URLs) the output must never be; checked when the
            sink is made and again when the file is published.
        options: extra encoder options.
        copy_streams: input streams (PyAV) whose packets arrive in ``FrameMeta.packets`` and
            are copied unchanged; one the container cannot hold is left out with a warning.
        colour: the input's colour tags: RGB is converted back to YUV with its matrix and
            range, and the output is tagged alike (None: FFmpeg's defaults, untagged).
        display_matrix: the input's display rotation/mirroring (9 ints, FFmpeg's layout), stored
            in the output where the container can hold it (MP4, MOV, Matroska); frames are
            written as they are stored, so players show them as they showed the input.

    Frames of another size than width x height (the input's size changed mid-stream) are
    scaled to it. Frames are uint8 or uint16 (16-bit samples, kept as deep as ``pix_fmt`` is).
    """

    name = "file"

    def __init__(self, path: str | Path, *, width: int, height: int, frame_rate: Fraction,
                 time_base: Fraction | None = None, codec: str = "libx264",
                 pix_fmt: str | None = None, bits: int | None = None, crf: float | None = None,
                 preset: str | None = None,
                 overwrite: bool = False, protect: Sequence = (), options: dict[str, str] | None = None,
                 copy_streams: Sequence = (), colour: ColourTags | None = None,
                 display_matrix: Sequence[int] | None = None) -> None:
        self.path = check_output_path(path, overwrite=overwrite, protect=protect)
        self._file = AtomicFile(self.path, overwrite=overwrite, protect=protect)
        # Held while the container is in use: an abort from another thread (a second Ctrl-C)
        # must not close it under an encode.
        self._busy = threading.RLock()
        self._copy_streams = list(copy_streams)
        self._copies: dict[int, object] = {}  # input stream index -> output stream
        self._colour = colour
        self._display_matrix = display_matrix
        self.width, self.height = width, height
        self.codec_name = codec
        self._container = None
        try:
            encoder = av.codec.Codec(codec, "w")
        except (av.FFmpegError, ValueError):
            raise OutputError(f"unknown encoder {codec!r} (see `ffmpeg -encoders`)") from None
        if pix_fmt is None:
            pix_fmt = _default_pix_fmt(encoder, bits or 8)
        self._input_bits = bits or 16  # not known: 16-bit frames may use all 16
        self._pad: np.ndarray | None = None  # made at the first frame, in its dtype
        self._padded = False
        subsampled = pix_fmt.startswith(("yuv420", "yuvj420", "nv12", "p010", "p016", "yuv422", "yuvj422"))
        enc_width, enc_height = width, height
        if subsampled and (width % 2 or height % 2):
            enc_width, enc_height = width + width % 2, height + height % 2
            log.warning("%s needs even sizes: padding %dx%d frames to %dx%d by repeating the last "
                        "row/column", pix_fmt, width, height, enc_width, enc_height)
            self._padded = True
        # PyAV opens the encoder only at the first frame: refuse a pixel format it cannot take now.
        try:
            canonical = av.VideoFormat(pix_fmt).name  # aliases such as gbrp10 -> gbrp10le
        except ValueError:
            raise OutputError(f"unknown pixel format {pix_fmt!r} (see `ffmpeg -pix_fmts`)") from None
        supported = [f.name for f in (encoder.video_formats or ())]
        if supported and canonical not in supported:
            raise OutputError(f"encoder {codec} does not support pixel format {pix_fmt!r} "
                              f"(it takes: {', '.join(supported)})")
        self._frame_rate = Fraction(frame_rate)
        self._time_base = time_base or 1 / self._frame_rate
        self._size = (enc_width, enc_height)
        self._pix_fmt = pix_fmt
        self._conversion = yuv_tags(pix_fmt, colour)  # fixed per sink: decided once, not per frame
        self._sample_bits = format_bits(pix_fmt)
        self._depth_warned = False
        self._codec_options = dict(options or {})
        if crf is not None:
            self._codec_options["crf"] = f"{crf:g}"
        if preset is not None:
            self._codec_options["preset"] = preset
        check_encoder_options(codec, pix_fmt, *self._size, self._frame_rate, self._codec_options)
        self._closed = False
        self._last_pts: int | None = None
        self.retimed = 0  # frames whose pts was not after the previous one's, moved a tick later
        self._scaled_sizes: set[tuple[int, int]] = set()

    def _open(self) -> None:
        """Create the temporary file and the encoder, at the first frame: nothing exists before."""
        handle = self._file.create()
        try:
            self._container = av.open(handle, mode="w", format=_format_for(self.path))
        except (av.FFmpegError, ValueError, OSError) as exc:
            self._file.discard()
            raise OutputError(f"cannot write {self.path}: {exc}") from None
        try:
            stream = self._container.add_stream(self.codec_name, rate=self._frame_rate)
            stream.width, stream.height = self._size
            stream.pix_fmt = self._pix_fmt
            stream.time_base = self._time_base
            if self._time_base != 1 / self._frame_rate:
                # Frames not on a 1/rate grid (a live camera's millisecond pts) would collide
                # once the encoder rounds them to 1/rate; let it count in the frames' own unit.
                stream.codec_context.time_base = self._time_base
            stream.options = self._codec_options
            stream.thread_type = "AUTO"
            if self._colour is not None:
                self._colour.tag(stream.codec_context)
            if self._display_matrix is not None:
                self._keep_display_matrix(stream)
            self._stream = stream
        except (av.FFmpegError, ValueError, TypeError) as exc:
            self.abort()
            raise OutputError(f"cannot set up encoder {self.codec_name} ({self._pix_fmt}) "
                              f"for {self.path}: {exc}") from None
        self._add_copied_streams()

    def _keep_display_matrix(self, stream) -> None:
        """Store the input's display rotation on the new stream (before its first packet)."""
        if _format_for(self.path) not in ("mp4", "mov", "matroska", "webm") or \
                not hasattr(stream, "set_display_matrix"):
            log.warning("%s cannot store the input's display rotation: players will show the frames "
                        "as stored (try .mp4 or .mkv)", self.path)
            return
        stream.set_display_matrix(list(self._display_matrix))

    def _add_copied_streams(self) -> None:
        """Output streams for the input's audio/subtitles, from their templates (no re-encoding).

        A stream the container cannot hold is left out with a warning, and so is one whose
        parameters are missing (an audio stream of sample rate 0: damaged input), which would
        make the muxer refuse the whole file. A FileSource leaves those out itself, as damage.
        """
        storable = self._container.supported_codecs
        for source in self._copy_streams:
            missing = missing_parameters(source)
            if missing:
                log.warning("%s stream %d has no %s; not copied", source.type, source.index, missing)
                continue
            codec = source.codec_context.name
            if codec not in storable:
                log.warning("%s stream %d (%s) cannot be stored in %s; not copied (try .mkv)",
                            source.type, source.index, codec, self.path.suffix or "this container")
                continue
            try:
                self._copies[source.index] = self._container.add_stream_from_template(source)
            except (av.FFmpegError, ValueError) as exc:
                log.warning("%s stream %d (%s) not copied: %s", source.type, source.index, codec, exc)

    def mux_packets(self, packets: Sequence) -> None:
        """Write packets of the copied input streams unchanged (their timestamps rescaled only)."""
        if self._container is None:
            self._open()
        for packet in packets:
            index = packet.stream.index
            target = self._copies.get(index)
            if target is None:
                continue
            packet.stream = target
            try:
                self._container.mux(packet)
            except (av.FFmpegError, OSError) as exc:
                if isinstance(exc, OSError) and exc.errno is not None:
                    self._raise_write_error(exc, f"copying a {target.type} packet")
                # A damaged packet the muxer refuses (no or bad timestamps) is left out, not the run.
                if not self.packets_refused:
                    log.warning("%s: a packet of %s stream %d that the muxer refused was left out: %s",
                                self.path, target.type, index, ffmpeg_reason(exc))
                self.packets_refused += 1

    def accepts_planes(self, layout: YuvLayout) -> bool:
        """Yes when the encoder takes the planes' format (yuv420p, yuv420p10le, yuv420p12le) at
        the frames' size (no padding), with the range the planes have (a yuvj420p output wants
        full range)."""
        if self._padded or (layout.width, layout.height) != (self.width, self.height):
            return False
        if layout.bits != 8:
            return self._pix_fmt == layout.pix_fmt
        return self._pix_fmt == "yuv420p" or (self._pix_fmt == "yuvj420p" and layout.full_range)

    def send(self, frame: np.ndarray, meta: FrameMeta) -> None:
        """Encode one frame, host memory: (H, W, 3) uint8 or uint16 RGB, or a flat (1.5 W H,)
        buffer of planes, uint8 yuv420p or uint16 yuv420p10le / yuv420p12le (see
        :meth:`accepts_planes`); its pts is kept.

        Packets of copied streams that travel with the frame are written first.
        """
        with self._busy:
            if self._closed:
                raise StreamError(f"{self.path} is closed; frame {meta.index} not written")
            self._send(frame, meta)

    def _send(self, frame: np.ndarray, meta: FrameMeta) -> None:
        if self._container is None:
            self._open()
        if meta.packets:
            self.mux_packets(meta.packets)
        if frame.ndim == 1:
            self._encode(self._planes_frame(frame), meta)
            return
        if frame.dtype == np.uint16 and self._sample_bits < self._input_bits and not self._depth_warned:
            self._depth_warned = True
            log.warning("%s: 16-bit frames of %d-bit input are written with %d bits per sample (%s); pass "
                        "a deeper --pix-fmt such as yuv420p%dle, or a --codec that has one", self.path,
                        self._input_bits, self._sample_bits, self._pix_fmt, self._input_bits)
        if frame.shape[:2] != (self.height, self.width):
            frame = self._fit(frame)
        if self._padded:
            if self._pad is None or self._pad.dtype != frame.dtype:
                self._pad = np.empty((self._size[1], self._size[0], 3), frame.dtype)
            pad = self._pad
            pad[: self.height, : self.width] = frame
            pad[self.height:, : self.width] = frame[-1:]
            pad[:, self.width:] = pad[:, self.width - 1: self.width]
            frame = pad
        self._encode(rgb_to_frame(np.ascontiguousarray(frame), self._pix_fmt, self._conversion), meta)

    def _fit(self, frame: np.ndarray) -> np.ndarray:
        """Scale an (h, w, 3) uint8 or uint16 host frame of another size (the input's size changed
        mid-stream) to the output's size: a stream keeps one size from start to end."""
        height, width = frame.shape[:2]
        if (width, height) not in self._scaled_sizes:
            self._scaled_sizes.add((width, height))
            log.warning("%s: %dx%d frames are scaled to the output's %dx%d", self.path, width, height,
                        self.width, self.height)
        shrink = width * height > self.width * self.height
        return cv2.resize(frame, (self.width, self.height),
                          interpolation=cv2.INTER_AREA if shrink else cv2.INTER_LINEAR)

    @cached_property
    def _planes_layout(self) -> YuvLayout:
        """Where a flat planes buffer of this output's size and format holds Y, U and V (made once)."""
        return YuvLayout(self.width, self.height, bits=DEEP_PLANE_FORMATS.get(self._pix_fmt, 8))

    def _planes_frame(self, planes: np.ndarray) -> av.VideoFrame:
        """A new frame of the output's format holding a copy of a flat planes buffer (the slot is
        reused at once, and an encoder may keep the frame a while), tagged with the output's colour."""
        video = av.VideoFrame(self.width, self.height, self._pix_fmt)
        for plane, source in zip(video.planes, self._planes_layout.planes(planes)):
            np.copyto(plane_rows(plane, source.dtype, source.shape[0])[:, : source.shape[1]], source)
        if self._colour is not None:
            video.colorspace, video.color_range = self._colour.space, self._colour.range
        return video

    def _encode(self, video: av.VideoFrame, meta: FrameMeta) -> None:
        video.pts = self._pts(meta)
        video.time_base = self._time_base
        try:
            for packet in self._stream.encode(video):
                self._container.mux(packet)
        except (av.FFmpegError, OSError) as exc:
            self._raise_write_error(exc, f"encoding frame {meta.index}")
        self.frames_written += 1

    def _raise_write_error(self, exc: BaseException, doing: str) -> None:
        """Raise the error of a failed encode or write. A full disk (any OS-level write error)
        is an OutputError saying how much was written; the incomplete file is removed at once,
        to give the space back, and the sink is marked ``failed``."""
        if not isinstance(exc, OSError) or exc.errno is None:
            raise StreamError(f"{doing} to {self.path} failed: {exc}") from None
        try:
            written = self._file.temp.stat().st_size if self._file.temp else 0
        except OSError:
            written = 0
        self.failed = True
        self.abort()
        raise OutputError(
            f"writing {self.path} failed after {self.frames_written} frames "
            f"({written / 2**20:.1f} MiB written): {exc.strerror or exc}; the incomplete file "
            f"was removed{'' if not self.path.exists() else ' and the existing output left as it was'}"
        ) from None

    def _pts(self, meta: FrameMeta) -> int:
        if meta.pts is None or meta.time_base is None:
            pts = meta.index if self._last_pts is None else self._last_pts + 1
        elif meta.time_base == self._time_base:
            pts = meta.pts
        else:
            pts = round(meta.pts * meta.time_base / self._time_base)
        if self._last_pts is not None and pts <= self._last_pts:
            pts = self._last_pts + 1  # encoders and muxers refuse non-increasing pts
            self.retimed += 1
        self._last_pts = pts
        return pts

    def close(self) -> None:
        """Flush the encoder, finish the container and publish the file.

        The flush and the trailer can take seconds (a slow preset at a large size); they run
        while the caller's signal handlers stay live (:func:`streamconv.interrupts.wait_interruptibly`):
        a handler that raises there (a second Ctrl-C) discards the file at once.

        Raises:
            OutputError: the file could not be written (a full disk) or published; nothing is left.
            StreamError: finishing failed otherwise, or no frame was ever sent (no file is created).
        """
        if self._closed:
            return
        self._closed = True
        if self._container is None:
            raise StreamError(f"no frames were written; {self.path} not created")
        if self.retimed:
            log.warning("%s: %d frame(s) had a timestamp not after the one before (duplicate or going "
                        "back) and were moved one tick (%s s) after it", self.path, self.retimed,
                        self._time_base)
        log.info("finishing %s: flushing the encoder", self.path)
        try:
            wait_interruptibly(self._finish, name="streamconv-finish")
        except BaseException:
            self.abort()  # an unfinished file is never published
            raise

    def _finish(self) -> None:
        """Flush, write the trailer and publish (the container is held the whole time)."""
        with self._busy:
            if self._container is None:  # aborted meanwhile
                return
            try:
                for packet in self._stream.encode(None):
                    self._container.mux(packet)
                self._container.close()
            except (av.FFmpegError, OSError) as exc:
                self._raise_write_error(exc, "finishing the file")
            self._container = None
            if self.frames_written == 0:
                self._file.discard()
                raise StreamError(f"no frames were written; {self.path} not created")
            self._file.publish()

    def abort(self) -> None:
        """Drop the partial file; the output path is left as it was. Safe from another thread
        while a frame is encoded or the file finished: the container is then left to that
        thread, and only the file is removed."""
        self._closed = True
        if self._busy.acquire(blocking=False):
            try:
                if self._container is not None:
                    container, self._container = self._container, None
                    try:
                        container.close()
                    except (av.FFmpegError, OSError, ValueError):
                        pass
            finally:
                self._busy.release()
        self._file.discard()

    def describe(self) -> str:
        return f"{self.path} ({self.codec_name})"


def _format_for(path: Path) -> str | None:
    """Container by extension; None lets FFmpeg guess (and fail clearly) for unusual ones."""
    return {".mp4": "mp4", ".m4v": "mp4", ".mov": "mov", ".mkv": "matroska", ".webm": "webm",
            ".avi": "avi", ".ts": "mpegts", ".nut": "nut"}.get(path.suffix.lower())


SINKS = {"file": FileSink, "null": NullSink, "callback": CallbackSink, "fanout": FanoutSink}
"""Sinks by name."""


_DEEP_420 = ("yuv420p10le", "yuv420p12le", "p010le", "yuv420p16le", "p016le")
"""4:2:0 formats deeper than 8 bits, in order of preference for deep input."""


def _default_pix_fmt(encoder, bits: int) -> str:
    """yuv420p for 8-bit input; for deeper input the encoder's 4:2:0 format of at least ``bits``
    bits (the shallowest such), else its deepest, else yuv420p with a warning."""
    if bits <= 8:
        return "yuv420p"
    supported = [f.name for f in (encoder.video_formats or ())]
    deep = [name for name in _DEEP_420 if name in supported]
    depth = {name: format_bits(name) for name in deep}
    enough = [name for name in deep if depth[name] >= bits]
    if enough:
        return min(enough, key=lambda name: depth[name])
    if deep:
        return max(deep, key=lambda name: depth[name])
    log.warning("encoder %s has no 4:2:0 format deeper than 8 bits: the %d-bit input is written with "
                "8 bits per sample (choose a --codec such as libx264 or libx265 to keep it)", encoder.name, bits)
    return "yuv420p"


def open_sink(output: str | Path | Sink | None, *, like=None, **options) -> Sink:
    """Open a sink: None or "null" discards, a Sink passes through, a path makes a FileSink.

    Args:
        output: the -o argument.
        like: the Source whose size, rate and time base the file takes; a file output never
            replaces its input (``path``), whatever ``overwrite`` says.
        options: FileSink keyword options (codec, pix_fmt, crf, preset, overwrite).
    """
    if isinstance(output, Sink):
        return output
    if output is None or str(output) == "null":
        return NullSink()
    if like is None:
        raise ValueError("open_sink needs the source (like=...) to size a file output")
    path = getattr(like, "path", None)
    options.setdefault("protect", (path,) if path is not None else ())  # never replace the input
    options.setdefault("copy_streams", getattr(like, "copied_streams", ()))
    options.setdefault("colour", getattr(like, "colour", None))
    options.setdefault("display_matrix", getattr(like, "display_matrix", None))
    deep = getattr(like, "dtype", None) == np.uint16  # a source read in 8 bits is written in 8
    options.setdefault("bits", getattr(like, "bits", 8) if deep else 8)
    return FileSink(output, width=like.width, height=like.height, frame_rate=like.frame_rate,
                    time_base=like.time_base, **options)
