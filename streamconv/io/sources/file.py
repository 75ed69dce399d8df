"""The file source: a video file or stream (any input FFmpeg reads) decoded by PyAV.

The first frame is decoded on opening, so the source knows its true size and an input with nothing
decodable is refused before any output exists. Damage is counted, not fatal (see
``FileSource.damage``); a network input that stalls past its timeout ends the run (or is reopened:
streamconv.io.sources.reconnect).

A local file is also checked against its container's structure (an MP4 box, a Matroska segment, an
MPEG-TS packet it ends inside of): a cut file often decodes without an error, the frames after the
cut simply missing (streamconv.io.ffmpeg.damage). Audio and subtitles travel with the frames.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import replace
from fractions import Fraction
from pathlib import Path

import cv2  # noqa: F401  (before av: see streamconv.io.sinks.display.check_import_order)
import av
import numpy as np

from ...errors import FrameFormatError, FrameTypeError, InputError, StreamError
from ...frames.checks import DEFAULT_MAX_PIXELS, check_frame_size
from ...frames.slots import RESIZED, FrameMeta
from ..ffmpeg.container import display_matrix, frame_count, open_input, stream_refusal
from ...frames.colour import (FULL_RANGE, ColourTags, format_bits, frame_to_rgb, is_transparent,
                              plane_rows)
from ..ffmpeg.damage import InputDamage, declared_end
from ..ffmpeg.log import DamageLog, take_open_lines
from .filedecode import PacketDecoding
from ..ffmpeg.metadata import InputMetadata
from .readguard import ReadGuard
from .source import Source
from ..ffmpeg.streamcopy import CopiedStreams
from ...frames.yuv import YuvLayout, frame_to_planes

log = logging.getLogger(__name__)


class FileSource(ReadGuard, PacketDecoding, Source):
    """Decodes a video file or stream with PyAV into RGB frames.

    Args:
        path: anything FFmpeg opens (a file path or URL).
        video_stream: index among the video streams (0: the first); threads: "AUTO", "FRAME",
            "SLICE" or "NONE".
        copy_streams: pass the input's audio and subtitle packets along with the frames
            (``FrameMeta.packets``), for a file output to copy them unchanged.
        max_pixels: refuse frames larger than this (None: no limit): the declared size
            before anything is decoded, then the first frame's.
        timeout: seconds to wait for data from a network input (a URL) before giving up
            (None: NETWORK_TIMEOUT for URLs, no limit for files; 0: no limit).
        depth: bits per sample of the frames delivered: 16 (uint16, 0..65535), 8 (uint8), or
            None: 16 for video of more than 8 bits per sample (10-bit and up), else 8.
        hwaccel: decode on this hardware decoder (``"cuda"``: NVDEC), one of
            :func:`hardware_decoders`; None: in software. Frames come back to host memory (nv12,
            p010le) and travel as planes like software-decoded ones. A codec the hardware cannot
            decode falls back to software, with a notice.
        input_options: FFmpeg options of the demuxer and protocol (``{"rtsp_transport": "tcp"}``);
            an ``rw_timeout`` among them replaces the one ``timeout`` sets.

    Frames are (H, W, 3) RGB in host memory, uint8 or uint16 (``dtype``, see ``depth``; ``bits`` is
    the input's own bits per sample), or for yuv420p video, on request, the decoder's planes
    unconverted (``planes``, see :meth:`read_into`); each carries the decoder's pts and the stream's
    time base. Packets that fail to decode are skipped and counted in ``decode_errors``; copied
    audio is decoded too, only to check it (``copied_damaged``); an audio stream whose parameters
    are missing is not copied; ``damage()`` says all that was found wrong. The first frame is
    decoded on opening: its size is the source's; a later frame of another size makes ``read_into``
    return ``RESIZED`` first. Frames are delivered as stored; a rotation or mirroring for display is
    in ``display_matrix``, the tags and HDR metadata in ``metadata``, for a file sink.
    """

    name = "file"

    def __init__(self, path: str | Path, *, video_stream: int = 0, threads: str = "AUTO",
                 copy_streams: bool = True, max_pixels: int | None = DEFAULT_MAX_PIXELS,
                 timeout: float | None = None, depth: int | None = None, hwaccel: str | None = None,
                 input_options: dict[str, str] | None = None) -> None:
        if depth not in (None, 8, 16):
            raise InputError("depth must be 8 or 16 bits per sample (or None: from the input), "
                             f"got {depth!r}")
        self.path = str(path)
        self._ended = False
        self._container = None
        self._decoding = threading.Lock()  # a decode call, or the drain at close
        self._start_guard()
        self._index = 0
        self._open_input(timeout, hwaccel, input_options)
        self._pick_stream(video_stream, threads)
        try:
            self._probe(copy_streams, max_pixels)
        except BaseException:
            self.close()
            raise
        self._set_timing()
        self._set_colour()
        self._set_depth(depth)
        self._report_decoder()
        self._report_depth()

    def _open_input(self, timeout: float | None, hwaccel: str | None,
                    input_options: dict | None) -> None:
        """Open the container with the timeout, FFmpeg options and hardware decoder asked for, and
        judge how the file is cut short, if it is."""
        self.hwaccel = hwaccel
        self._demuxer, self._options = None, dict(input_options or {})
        self._container, self.timeout = open_input(self.path, timeout, hwaccel, input_options)
        # Before the streams are judged: a cut index can hide the video stream itself.
        self._damage = InputDamage(self.path, self._container.format.name)

    def _pick_stream(self, video_stream: int, threads: str) -> None:
        """Choose the video stream to decode; an input without it is closed and refused."""
        videos = self._container.streams.video
        refusal = stream_refusal(videos, video_stream, self.path, self._damage.truncated)
        if refusal is not None:
            self.close()
            raise refusal
        self._stream = videos[video_stream]
        self._stream.thread_type = threads

    def _probe(self, copy_streams: bool, max_pixels: int | None) -> None:
        """Refuse a declared size over ``max_pixels``, choose the streams to copy, start counting
        FFmpeg's damage reports and decode the first frame (kept for the first read)."""
        context = self._stream.codec_context
        check_frame_size(int(context.width), int(context.height), max_pixels, self.path)
        self.other_streams = [s for s in self._container.streams if s is not self._stream]
        self._damage.known_streams = {s.id for s in self._container.streams}
        wanted = [s for s in self.other_streams if copy_streams and s.type in ("audio", "subtitle")]
        self._copies = CopiedStreams(self.path, wanted, self._damage.truncated)
        self.copied_streams = self._copies.streams
        format_name = self._container.format.name
        components = {format_name, *format_name.split(","), context.name,
                      *(s.codec_context.name for s in self._copies.counted_streams)}
        self._damage_log = DamageLog(components).start(earlier=take_open_lines())
        self._frames = self._decode()
        # The first frame, not the header, gives the size: headers can be missing or name
        # a later size, and a file with nothing decodable is refused before any output exists.
        self._held: av.VideoFrame | None = self._first_frame()
        self.width, self.height = self._held.width, self._held.height
        self._described = self._stream_picture()
        check_frame_size(self.width, self.height, max_pixels, self.path)

    def _stream_picture(self) -> av.VideoFrame:
        """A frame decoded by libavcodec that tells the stream's pixel format, range and side data
        (here the first frame itself)."""
        return self._held

    def _set_timing(self) -> None:
        """Frame rate, time base, frame count and the end the header declares."""
        rate = self._stream.average_rate or self._stream.guessed_rate or Fraction(30)
        self.frame_rate = Fraction(rate)
        self.time_base = Fraction(self._stream.time_base or Fraction(1, 1000))
        self.frame_count = frame_count(self._stream, self.frame_rate)
        # Kept as a number: damage() is asked after close(), when the stream is gone.
        self._damage.declared_end = declared_end(self._stream, self._container.format.name)

    def _set_colour(self) -> None:
        """The colour tags frames are converted with; the display rotation, tags and HDR metadata to
        pass on."""
        self.colour = ColourTags.of(self._stream.codec_context)
        if self._described.format.name.startswith("yuvj"):
            # yuvj formats are full range untagged
            self.colour = replace(self.colour, range=FULL_RANGE)
        self.display_matrix = display_matrix(self._described)
        self.metadata = InputMetadata.of(self._container, self._stream, self._described)

    def _set_depth(self, depth: int | None) -> None:
        """The samples' type of the frames delivered (see ``depth``), and their planes layout."""
        pixel_format = self._described.format
        self.bits = format_bits(pixel_format)
        if depth is None:
            depth = 16 if self.bits > 8 else 8
        self.dtype = np.dtype(np.uint16 if depth == 16 else np.uint8)
        self._rgb_format = "rgb48le" if depth == 16 else "rgb24"
        self.planes = self._layout(pixel_format.name)

    def _report_depth(self) -> None:
        """Log how video of more than 8 bits per sample is filtered, and that transparency is
        lost."""
        if is_transparent(self._described):  # (judged on the first frame)
            log.warning("%s: its transparency (%s) is dropped: filters see RGB", self.path,
                        self._described.format.name)
        if self.bits <= 8:
            return
        pixel_format = self._described.format.name
        if self.dtype == np.uint8:
            log.warning("%s is %d-bit %s: frames are filtered and written with 8 bits per channel "
                        "(depth 8 asked for)", self.path, self.bits, pixel_format)
        else:
            log.info("%s is %d-bit %s: frames are filtered in 16 bits", self.path, self.bits,
                     pixel_format)

    @property
    def decoder(self) -> str:
        """Which decoder runs, for logs and stats: ``cpu (h264)``; FFmpeg's hardware one: ``cpu
        (h264 on cuda)``."""
        hardware = f" on {self.hwaccel}" if self.hardware_decoding else ""
        return f"cpu ({self._stream.codec_context.name}{hardware})"

    def _report_decoder(self) -> None:
        """Log whether the hardware decoder asked for is the one decoding."""
        if self.hwaccel is not None and self.hardware_decoding:
            log.info("%s: decoding on %s (frames come back as %s)", self.path, self.hwaccel,
                     self._described.format.name)
        elif self.hwaccel is not None:
            log.warning("%s: %s cannot decode %s here; decoding in software", self.path,
                        self.hwaccel, self._stream.codec_context.name)

    def _layout(self, pixel_format: str) -> YuvLayout | None:
        """The planes layout ``pixel_format`` frames can be read in: yuv420p for 8-bit (from
        yuv420p, nv12), yuv420p10le/12le for 16-bit (from those, p010le); None for other formats,
        sizes, depths."""
        layout = YuvLayout.of_stream(self.width, self.height, pixel_format, self.colour)
        return layout if layout is not None and layout.frame_dtype == self.dtype else None

    def _first_frame(self) -> av.VideoFrame:
        """Decode up to the first frame (kept for the first read).

        Raises:
            InputError: the stream ends, or fails, before any frame decodes.
        """
        try:
            frame = next(self._frames, None)
        except StreamError as exc:
            raise InputError(str(exc)) from None
        if frame is None:
            damage = [f"{self.decode_errors} damaged packet(s)"] if self.decode_errors else []
            damage += [self._damage.truncated] if self._damage.truncated else []
            details = f" ({'; '.join(damage)})" if damage else ""
            raise InputError(f"no frame could be decoded from {self.path}{details}")
        return frame

    def damage(self) -> list[str]:
        """What was found wrong with the input so far, one phrase per kind (empty: nothing).

        A file cut short inside its container's structure (found on opening), video packets that
        failed to decode (skipped), packets or frames flagged as damaged (concealed, still used;
        copied as they are for audio and subtitles), FFmpeg's log lines about damage, streams left
        out for want of parameters; once ended, the container becoming unreadable, copied audio
        without packets, a video ending before its header's time. Unflagged damage is unseen.
        """
        return self._damage.report(ended=self._ended, frame_rate=self.frame_rate,
                                   reported=self.reported, copied_damaged=self.copied_damaged,
                                   streams=self._copies.stream_damage(self._ended))

    @property
    def decode_errors(self) -> int:
        """Video packets that could not be decoded (skipped)."""
        return self._damage.decode_errors

    @property
    def concealed(self) -> int:
        """Packets or frames FFmpeg flagged as damaged (concealed by the decoder, still used)."""
        return self._damage.concealed

    def read_into(self, buffer: np.ndarray) -> FrameMeta | None:
        """Decode the next frame into ``buffer``, host memory: converted to RGB for an (H, W, 3)
        buffer of ``dtype``, or copied plane by plane, unconverted, into a flat (1.5 W H,) buffer
        laid out as ``self.planes`` says (4:2:0 input of 8, 10 or 12 bits only; nv12 and p010le
        chroma is split apart on the way)."""
        return self._guarded(self._next_frame, lambda frame: self._hand_over(frame, buffer))

    def _hand_over(self, frame, buffer: np.ndarray) -> FrameMeta | None:
        if frame is None or frame is RESIZED:
            return frame
        self._deliver(frame, buffer)
        return self._frame_meta(frame)

    def _next_frame(self):
        """The next decoded frame; None at the end; RESIZED (the frame held for the next call)
        when its size differs from the frames before."""
        frame, self._held = (self._held if self._held is not None
                             else next(self._frames, None)), None
        if frame is None:
            self._ended = True
            return None
        if frame.width != self.width or frame.height != self.height:
            log.warning("%s: frame size changed at frame %d: %dx%d -> %dx%d", self.path,
                        self._index, self.width, self.height, frame.width, frame.height)
            self.width, self.height = frame.width, frame.height
            self.planes = self._layout(self._pixel_format(frame))
            self._held = frame
            return RESIZED
        return frame

    def _pixel_format(self, frame) -> str:
        """The FFmpeg pixel format name of a decoded frame."""
        return frame.format.name

    def _check_buffer(self, buffer: np.ndarray) -> None:
        if buffer.shape not in (self.shape, self.planes.shape if self.planes else None):
            raise FrameFormatError(f"buffer of shape {buffer.shape} for {self.width}x{self.height} "
                                   "frames")
        if buffer.ndim == 3 and buffer.dtype != self.dtype:
            raise FrameTypeError(f"buffer of dtype {buffer.dtype} for {self.dtype} frames")

    def _deliver(self, frame: av.VideoFrame, buffer: np.ndarray) -> None:
        """Write a decoded frame into a host ``buffer``: its planes, or RGB (see
        :meth:`read_into`)."""
        self._check_buffer(buffer)
        if buffer.ndim == 1:
            frame_to_planes(buffer, frame, self.planes)
        else:
            plane = frame_to_rgb(frame, self._rgb_format).planes[0]
            rows = plane_rows(plane, self.dtype, self.height)
            np.copyto(buffer, rows[:, : self.width * 3].reshape(self.height, self.width, 3))

    def _frame_meta(self, frame) -> FrameMeta:
        """The delivered frame's FrameMeta (with the copied packets due before it); counts it."""
        pts = frame.pts
        if frame.time is not None:
            length = frame.duration * frame.time_base if frame.duration and \
                frame.time_base else None
            self._damage.last_end = frame.time + float(length or 1 / self.frame_rate)
        meta = FrameMeta(self._index, pts, self.time_base if pts is not None else None,
                         packets=self.take_packets(
                             until=frame.time + 1 / float(self.frame_rate)
                             if frame.time is not None else None))
        self._index += 1
        return meta

    def take_packets(self, until: float | None = None) -> list:
        """The copied-stream packets read and not yet handed on that start before ``until``
        seconds (None: all of them, as after the last frame).

        A decoder holds several packets before its first frame comes out (one per thread with
        frame threading), so the demuxer runs ahead of the frames: packets later than the
        frame wait for a later one, and a run stopped early copies nothing past its end.
        """
        return self._copies.take(until)

    @property
    def copied_damaged(self) -> int:
        """Copied packets flagged by the demuxer or failing to decode: copied as they are."""
        return self._copies.damaged

    def describe(self) -> str:
        codec = self._stream.codec_context.name
        count = f", {self.frame_count} frames" if self.frame_count else ""
        hardware = f" (decoded on {self.hwaccel})" if self.hardware_decoding else ""
        return (f"{self.path}: {codec}{hardware} {self.width}x{self.height} "
                f"@ {float(self.frame_rate):.3g} fps{count}")

    @property
    def reported(self) -> int:
        """FFmpeg log lines about damage in this input so far (see streamconv.io.ffmpeg.log)."""
        return getattr(getattr(self, "_damage_log", None), "count", 0)

    def _release(self) -> None:
        """Drain and free the decoder, stop the damage watch and close the container."""
        self._drain_decoder()
        if getattr(self, "_damage_log", None) is not None:
            self._damage_log.stop()
        container, self._container = self._container, None
        if container is not None:
            container.close()
