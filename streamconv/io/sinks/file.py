"""The file sink: RGB frames (or yuv420p planes) encoded to a video file by PyAV.

The file is written under a temporary name and published complete on ``close()``
(streamconv.files.publish.AtomicFile); the encoder's settings are checked before any frame
(streamconv.io.ffmpeg.encoder_check); the input's audio and subtitle packets are copied
alongside (streamconv.io.ffmpeg.copyout). How the file ends, published or removed, is its base
class's (streamconv.io.sinks.ending).
"""

from __future__ import annotations

import logging
import threading
from fractions import Fraction
from functools import cached_property
from pathlib import Path
from typing import Sequence

import cv2  # (before av: see streamconv.io.sinks.display.check_import_order)
import av
import numpy as np

from ...errors import OutputError, StreamError
from ...frames.checks import as_frame_geometry
from ...interrupts import wait_interruptibly
from ..ffmpeg.formats import default_codec, output_format
from .ending import FileEnding
from .sequence import SequenceTarget
from .targets import open_target
from ...frames.slots import FrameMeta
from ...frames.colour import (ColourTags, chroma_steps, format_bits, rgb_to_frame, written_tags,
                              yuv_tags)
from ..ffmpeg.copyout import CopiedOutput
from ..ffmpeg.encoder_check import (check_encoder_options, check_pix_fmt, codec_options,
                                    deeper_pix_fmt, default_pix_fmt, find_encoder)
from ..ffmpeg.log import logged_reason
from ..ffmpeg.metadata import InputMetadata
from ..ffmpeg.muxer_file import muxer_target
from ..ffmpeg.signalling import signalled_options
from ...frames.yuv import DEEP_PLANE_FORMATS, YuvLayout, planes_to_frame

log = logging.getLogger(__name__)


class FileSink(FileEnding):
    """Encodes RGB frames to a video file with PyAV.

    The file is written under a unique temporary name beside the output, created exclusively,
    and published on ``close()`` (:class:`streamconv.files.publish.AtomicFile`): an existing file is
    replaced only by a complete one and only with ``overwrite`` (keeping its permission bits),
    never an input, and a failed run leaves nothing behind. Timestamps and frame rate follow
    the source.

    Args:
        path: output file; its extension picks the container. ``-`` or ``pipe:N`` writes to a
            pipe, ``out%03d.png`` an image sequence (see :mod:`streamconv.io.sinks.targets`: how
            each is published).
        width, height: frame size of the frames sent (pixels).
        frame_rate: nominal rate written to the stream.
        time_base: time base of the pts the frames carry.
        codec: FFmpeg encoder name (None: :func:`streamconv.io.ffmpeg.formats.default_codec` for the
            container: libx264; VP9 for .webm, gif for .gif, png, mjpeg... for images).
        pix_fmt: encoder pixel format; None picks yuv420p, or for input of more than 8 bits
            per sample (``bits``) the encoder's 4:2:0 format of that depth or the nearest
            deeper one (yuv420p10le, ...), with a warning where it has none.
        bits: bits per sample of the input (10 for yuv420p10le video; None: not known), for
            ``pix_fmt`` None and for the warning when 16-bit frames lose depth.
        crf, preset: quality and speed options (None: codec default): ``crf`` is x264/x265's
            constant rate factor, NVENC's constant quality (``cq``) for the ``*_nvenc`` encoders.
        bitrate: target bits per second as FFmpeg writes them (``"8M"``, ``"2500k"``; None:
            codec default).
        overwrite: replace an existing file.
        format: the container (FFmpeg's muxer name; None: by extension, Matroska for a pipe).
        protect: input specs (paths, ``file:`` URLs) the output must never be; checked when the
            sink is made and again when the file is published.
        options: extra encoder options.
        muxer_options: the muxer's FFmpeg options (``--output-option``, e.g.
            ``{"movflags": "+frag_keyframe"}``).
        copy_streams: input streams (PyAV) whose packets arrive in ``FrameMeta.packets`` and
            are copied unchanged; one the container cannot hold is left out with a warning.
        colour: the input's colour tags: RGB is converted back to YUV with its matrix and
            range, and the output is tagged alike (None: FFmpeg's defaults, untagged).
        display_matrix: the input's display rotation/mirroring (9 ints, FFmpeg's layout), stored
            in the output where the container can hold it (MP4, MOV, Matroska); frames are
            written as they are stored, so players show them as they showed the input.
        metadata: the input's tags and HDR metadata
            (:class:`streamconv.io.ffmpeg.metadata.InputMetadata`): the file's and the video
            stream's tags are given to the output's, those the container holds kept by its muxer;
            the mastering display and content light level are written through the encoder's
            options where it takes them (libx265, libx264, libsvtav1; see
            :mod:`streamconv.io.ffmpeg.signalling`). The copied streams keep their own tags.

    Frames of another size than width x height (the input's size changed mid-stream) are
    scaled to it. Frames are uint8 or uint16 (16-bit samples, kept as deep as ``pix_fmt`` is).
    """

    name = "file"

    def __init__(self, path: str | Path, *, width: int, height: int, frame_rate: Fraction,
                 time_base: Fraction | None = None, codec: str | None = None,
                 pix_fmt: str | None = None, bits: int | None = None, crf: float | None = None,
                 preset: str | None = None, bitrate: str | None = None, overwrite: bool = False,
                 protect: Sequence = (), options: dict[str, str] | None = None,
                 copy_streams: Sequence = (), colour: ColourTags | None = None,
                 display_matrix: Sequence[int] | None = None, format: str | None = None,
                 muxer_options: dict[str, str] | None = None,
                 metadata: InputMetadata | None = None) -> None:
        self._file = self._target(path, overwrite, protect, format, muxer_options or {})
        self._images = isinstance(self._file, SequenceTarget)  # packets written as image files
        self.path = self._file.target
        self.format = output_format(path, format)
        self._muxer_options = {**self._file.container_options, **(muxer_options or {})}
        # Held while the container is in use: an abort from another thread (a second Ctrl-C)
        # must not close it under an encode.
        self._busy = threading.RLock()
        self._copy_streams = list(copy_streams)
        self._copies: CopiedOutput | None = None  # made with the container
        self._colour, self._display_matrix, self._metadata = colour, display_matrix, metadata
        self.width, self.height, self._frame_rate = as_frame_geometry(width, height, frame_rate,
                                                                      error=OutputError)
        self.codec_name = codec = codec or default_codec(path, self.format)
        self._container = None
        encoder = find_encoder(codec)
        defaulted = pix_fmt is None
        if defaulted:
            pix_fmt = default_pix_fmt(encoder, bits or 8)  # warns where the encoder loses depth
        self._input_bits = bits or 16  # not known: 16-bit frames may use all 16
        self._pad: np.ndarray | None = None  # made at the first frame, in its dtype
        self._size = self._encoded_size(pix_fmt)
        check_pix_fmt(codec, encoder, pix_fmt)  # PyAV opens the encoder at the first frame only
        self._time_base = time_base or 1 / self._frame_rate
        if self.format == "avi":
            # AVI has no timestamps of its own: its time base is the frame rate (readers take a
            # 1/600 base for 600 fps); frames are numbered on the 1/rate grid instead.
            self._time_base = 1 / self._frame_rate
        self._pix_fmt = pix_fmt
        self._conversion = yuv_tags(pix_fmt, colour)  # fixed per sink: decided once, not per frame
        self._sample_bits = format_bits(pix_fmt)
        self._depth_warned = defaulted and self._sample_bits < (bits or 8)
        self._codec_options = signalled_options(
            codec, codec_options(codec, options, crf, preset, bitrate), self._conversion,
            metadata and metadata.hdr, self.path)
        check_encoder_options(codec, pix_fmt, *self._size, self._frame_rate, self._codec_options)
        self._closed = False
        self._last_pts: int | None = None
        self.retimed = 0  # frames whose pts was not after the previous one's, moved a tick later
        self._scaled_sizes: set[tuple[int, int]] = set()

    def _target(self, path, overwrite: bool, protect: Sequence, format: str | None,
                muxer_options: dict):
        """What the container is written through
        (:func:`streamconv.io.sinks.targets.open_target`: a file checked now and published whole,
        a pipe, or an image sequence); its ``target`` names it."""
        return open_target(path, overwrite=overwrite, protect=protect, format=format,
                           muxer_options=muxer_options)

    def _encoded_size(self, pix_fmt: str) -> tuple[int, int]:
        """The size frames are encoded at: the frames' own, or the next multiple of ``pix_fmt``'s
        chroma subsampling (``_padded``: the last row/column is repeated)."""
        (width, height), (across, down) = (self.width, self.height), chroma_steps(pix_fmt)
        enc_width, enc_height = width + -width % across, height + -height % down
        self._padded = (enc_width, enc_height) != (width, height)
        if not self._padded:
            return width, height
        log.warning("%s needs sizes in multiples of %dx%d: padding %dx%d frames to %dx%d by "
                    "repeating the last row/column", pix_fmt, across, down, width, height,
                    enc_width, enc_height)
        return enc_width, enc_height

    def _open(self) -> None:
        """Create the temporary file and the encoder, at the first frame: nothing exists before."""
        handle = muxer_target(self._file.create())  # a failed write: FFmpeg's error, not PyAV's
        try:
            self._container = av.open(handle, mode="w",
                                      format=self._file.muxer if self._images else self.format,
                                      container_options=self._muxer_options)
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
                written_tags(self._pix_fmt, self._colour).tag(stream.codec_context)
            if self._display_matrix is not None:
                self._keep_display_matrix(stream)
            if self._metadata is not None:
                self._metadata.tag(self._container, stream)
            self._stream = stream
        except (av.FFmpegError, ValueError, TypeError) as exc:
            self.abort()
            raise OutputError(f"cannot set up encoder {self.codec_name} ({self._pix_fmt}) "
                              f"for {self.path}: {exc}") from None
        self._copies = CopiedOutput(self._container, self._copy_streams, self.path,
                                    seekable=not self._file.published_as_written,
                                    muxer_options=self._muxer_options)
        self._write_header()

    def _write_header(self) -> None:
        """The header, now: a container refusing the codec (libx264 in Ogg) does so before the
        run's work."""
        try:
            self._container.start_encoding()
        # PyAV's EINVAL and invalid-data errors: the muxer refuses a stream
        except ValueError as exc:
            reason = logged_reason(exc)
            own = self._container.default_video_codec
            self.abort()
            raise OutputError(f"cannot write {self.path} with {self.codec_name}: {reason} (its "
                              f"container's own video codec is {own}: name another with "
                              "--codec)") from None
        except (av.FFmpegError, OSError) as exc:
            self._raise_write_error(exc, "writing the header")

    def _keep_display_matrix(self, stream) -> None:
        """Store the input's display rotation on the new stream (before its first packet)."""
        if self.format not in ("mp4", "mov", "matroska", "webm") or \
                not hasattr(stream, "set_display_matrix"):
            log.warning("%s cannot store the input's display rotation: players will show the "
                        "frames as stored (try .mp4 or .mkv)", self.path)
            return
        stream.set_display_matrix(list(self._display_matrix))

    def mux_packets(self, packets: Sequence) -> None:
        """Write packets of the copied input streams unchanged (their timestamps rescaled only);
        a damaged one the muxer refuses is left out and counted (streamconv.io.ffmpeg.copyout)."""
        if self._container is None:
            self._open()
        for packet in packets:
            try:
                self._copies.mux(self._container, packet)
            except OSError as exc:
                self._raise_write_error(exc, f"copying a {packet.stream.type} packet")
            finally:
                self.packets_refused = self._copies.refused

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
            self._encode(planes_to_frame(frame, self._planes_layout, self._pix_fmt, self._colour),
                         meta)
            return
        if frame.dtype == np.uint16 and self._sample_bits < self._input_bits \
                and not self._depth_warned:
            self._depth_warned = True
            deeper = deeper_pix_fmt(self.codec_name, self._pix_fmt, self._input_bits)
            log.warning("%s: 16-bit frames of %d-bit input are written with %d bits per sample "
                        "(%s); %s", self.path, self._input_bits, self._sample_bits, self._pix_fmt,
                        f"pass a deeper --pix-fmt such as {deeper}" if deeper else
                        f"{self.codec_name} has no deeper format: choose a --codec such as "
                        "libx264 or libx265")
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
        self._encode(rgb_to_frame(np.ascontiguousarray(frame), self._pix_fmt, self._conversion),
                     meta)

    def _fit(self, frame: np.ndarray) -> np.ndarray:
        """Scale an (h, w, 3) uint8 or uint16 host frame of another size (the input's size changed
        mid-stream) to the output's size: a stream keeps one size from start to end."""
        height, width = frame.shape[:2]
        if (width, height) not in self._scaled_sizes:
            self._scaled_sizes.add((width, height))
            log.warning("%s: %dx%d frames are scaled to the output's %dx%d", self.path, width,
                        height, self.width, self.height)
        shrink = width * height > self.width * self.height
        return cv2.resize(frame, (self.width, self.height),
                          interpolation=cv2.INTER_AREA if shrink else cv2.INTER_LINEAR)

    @cached_property
    def _planes_layout(self) -> YuvLayout:
        """Where a flat planes buffer of this output's size and format holds Y, U and V (made
        once)."""
        return YuvLayout(self.width, self.height, bits=DEEP_PLANE_FORMATS.get(self._pix_fmt, 8))

    def _encode(self, video: av.VideoFrame, meta: FrameMeta) -> None:
        video.pts = self._pts(meta)
        video.time_base = self._time_base
        try:
            for packet in self._stream.encode(video):
                self._write_packet(packet)
        except (av.FFmpegError, OSError) as exc:
            self._raise_write_error(exc, f"encoding frame {meta.index}")
        self.frames_written += 1

    def _write_packet(self, packet) -> None:
        """Mux an encoded video packet, or write it as the next image (a whole image file)."""
        if self._images:
            self._file.write_image(bytes(packet))
        else:
            self._container.mux(packet)

    def _pts(self, meta: FrameMeta) -> int:
        if meta.pts is None or meta.time_base is None:
            # No timestamp (a raw H.264 stream): one frame at the nominal rate after the last,
            # in the stream's ticks (1/1200000 s for such a stream, not one frame each).
            ticks = max(1, round(1 / (self._frame_rate * self._time_base)))
            pts = meta.index * ticks if self._last_pts is None else self._last_pts + ticks
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
        while the caller's signal handlers stay live
        (:func:`streamconv.interrupts.wait_interruptibly`): a handler that raises there (a second
        Ctrl-C) discards the file at once.

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
            log.warning("%s: %d frame(s) had a timestamp not after the one before (duplicate or "
                        "going back) and were moved one tick (%s s) after it", self.path,
                        self.retimed, self._time_base)
        log.info("finishing %s: flushing the encoder", self.path)
        try:
            wait_interruptibly(self._finish, name="streamconv-finish")
        except BaseException:
            self.abort()  # an unfinished file is never published
            raise

    def describe(self) -> str:
        return f"{self.path} ({self.codec_name})"

