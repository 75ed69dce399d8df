"""Inputs read with a named demuxer and its options: standard input, raw video, image sequences.

``-`` (or ``pipe:``, ``pipe:0``) reads a container from standard input; ``img%04d.png`` reads
an image sequence (FFmpeg's image2 demuxer, from the lowest number among the first five);
``format`` names the demuxer outright (the CLI's ``--input-format``, FFmpeg's ``-f`` before
``-i``), e.g. ``rawvideo``, whose frames carry no header: their size, pixel format and rate are
given. Everything after opening (decoding, damage, copied streams) is FileSource's.
"""

from __future__ import annotations

import os
from fractions import Fraction
from pathlib import Path

import cv2  # noqa: F401  (before av: see streamconv.io.sinks.display.check_import_order)
import av

from ...errors import InputError, StreamError
from ...frames.checks import DEFAULT_MAX_PIXELS, check_frame_size
from ...files.numbered import START_SEARCH, irregular_files, is_pattern, sequence_gap
from ..ffmpeg.container import open_input
from ..ffmpeg.damage import InputDamage
from .file import FileSource
from ..ffmpeg.formats import is_pipe, is_sequence, pipe_url

RAW_PIX_FMT = "yuv420p"
"""The pixel format of raw video when none is given (FFmpeg's default)."""

_STREAMABLE_HINT = ("; standard input is read as it comes, so its container must not need seeking: "
                    "Matroska, MPEG-TS, NUT, raw video, or an MP4 with its index first (faststart) "
                    "or fragmented")


def demuxer_options(format: str | None, size: tuple[int, int] | None, pix_fmt: str | None,
                    fps: float | None) -> dict[str, str]:
    """FFmpeg's demuxer options for the frames' ``size`` (W, H), ``pix_fmt`` and ``fps``, where
    given;
    raw video must be given its size.

    Raises:
        InputError: ``format`` is rawvideo and ``size`` is None.
    """
    options = {}
    if format == "rawvideo":
        if size is None:
            raise InputError("raw video has no header: give its frame size (--size WxH)")
        options["pixel_format"] = pix_fmt or RAW_PIX_FMT
    elif pix_fmt is not None:
        options["pixel_format"] = pix_fmt
    if size is not None:
        options["video_size"] = f"{size[0]}x{size[1]}"
    if fps is not None:
        options["framerate"] = f"{fps:g}"
    return options


def raw_frame_bytes(size: tuple[int, int], pix_fmt: str) -> int:
    """The bytes of one (W, H) ``pix_fmt`` frame of raw video, as FFmpeg's rawvideo demuxer reads
    it (planes packed without padding): what its encoder makes of one frame."""
    encoder = av.CodecContext.create("rawvideo", "w")
    encoder.width, encoder.height, encoder.pix_fmt = *size, pix_fmt
    encoder.time_base = Fraction(1, 25)
    return sum(packet.size for packet in encoder.encode(av.VideoFrame(*size, pix_fmt)))


def check_raw_file(path: str, size: tuple[int, int], pix_fmt: str) -> None:
    """Refuse a raw video file whose length is no whole number of (W, H) ``pix_fmt`` frames:
    a wrong --size or pixel format would read as frames of noise, without a word. A pipe's
    length is not known beforehand (its end inside a frame is damage, named then).

    Raises:
        InputError: (exit 4) naming the file's length and the frame's.
    """
    if is_pipe(path) or "://" in path or not os.path.isfile(path):
        return
    total, frame = os.path.getsize(path), raw_frame_bytes(size, pix_fmt)
    if total % frame:
        raise InputError(f"{path}: its {total} bytes are no whole number of {size[0]}x{size[1]} "
                         f"{pix_fmt} frames ({frame} bytes each): --size or the pixel format is "
                         f"not the file's")


def _refuse_irregular_images(pattern: str) -> None:
    """Refuse an input sequence naming a FIFO, a device or a folder before FFmpeg opens it: its
    image2 demuxer would wait for ever for a FIFO's writer.

    Raises:
        InputError: naming the first such file.
    """
    found = irregular_files(pattern)
    if found:
        raise InputError(f"input sequence {pattern}: {found[0].name} is not a regular file "
                         f"(a FIFO, device, socket or folder): reading it could wait for ever; "
                         f"not opened")


class DemuxedSource(FileSource):
    """A FileSource opened with a named demuxer: standard input, raw video, an image sequence.

    Args:
        path: ``-``/``pipe:``/``pipe:N`` (a pipe; ``-`` is standard input), an image sequence's
            pattern (``img%04d.png``), or any input FileSource takes.
        format: the demuxer (FFmpeg's name: ``rawvideo``, ``mpegts``, ``image2``...); None:
            image2 for a pattern, else FFmpeg probes the input.
        size: (W, H) of raw video frames (required for ``rawvideo``).
        pix_fmt: pixel format of raw video (default yuv420p, as FFmpeg's).
        fps: frames per second of raw video or an image sequence (default 25, as FFmpeg's).
        options: FileSource's (video_stream, copy_streams, max_pixels, timeout, depth, hwaccel).

    Frames are as FileSource's: (H, W, 3) RGB in host memory, uint8 or uint16.

    Raises:
        InputError: (exit 4) the input cannot be opened or decoded with that demuxer (standard
            input in a container that needs seeking, such as an MP4 with its index last).
    """

    name = "file"

    def __init__(self, path: str | Path, *, format: str | None = None,
                 size: tuple[int, int] | None = None,
                 pix_fmt: str | None = None, fps: float | None = None, **options) -> None:
        text = os.fspath(path)
        self._demuxer = format or ("image2" if is_sequence(text) else None)
        self._demuxer_options = demuxer_options(self._demuxer, size, pix_fmt, fps)
        path = pipe_url(text, 0) if is_pipe(text) else text
        if size is not None:  # FFmpeg refuses a size past its own limit only as "Invalid argument"
            check_frame_size(*size, options.get("max_pixels", DEFAULT_MAX_PIXELS), path)
        if self._demuxer == "rawvideo" and size is not None:
            check_raw_file(path, size, self._demuxer_options["pixel_format"])
        super().__init__(path, **options)

    def _open_input(self, timeout: float | None, hwaccel: str | None,
                    input_options: dict | None = None) -> None:
        """Open with the demuxer and options asked for (``input_options`` over the raw-video or
        sequence ones; a pipe or a pattern has no file to check first: FFmpeg says what is
        missing), and start judging damage."""
        self.hwaccel = hwaccel
        self._options = {**self._demuxer_options, **(input_options or {})}
        if self._demuxer == "image2" and is_pattern(self.path):
            _refuse_irregular_images(self.path)
        self._container, self.timeout = open_input(
            self.path, timeout, hwaccel, self._options, format=self._demuxer,
            local_check=not (is_pipe(self.path) or is_sequence(self.path)),
            hint=_STREAMABLE_HINT if is_pipe(self.path) else "")
        self._damage = InputDamage(self.path, self._container.format.name)

    def _decoded(self, decode, packet):
        """FileSource's; raw video that ends inside a frame (a last packet shorter than a frame,
        which the decoder refuses as an invalid argument) is damage, named, not a failed run."""
        try:
            return super()._decoded(decode, packet)
        except StreamError:
            if self._demuxer != "rawvideo" or packet is None:
                raise
            context = self._stream.codec_context
            frame = f"{context.width}x{context.height} {context.pix_fmt} frame"
            self._damage.truncated = (f"the input ends inside a frame: its last {packet.size} "
                                      f"bytes are less than a {frame} (truncated, or --size or "
                                      f"the pixel format is not the input's)")
            return []

    def damage(self) -> list[str]:
        """FileSource's, and for an image sequence read to its end a hole in its numbering:
        the images beyond it were never read (FFmpeg's image2 demuxer stops there)."""
        found = super().damage()
        gap = self._sequence_gap() if self._ended else None
        if gap is not None:
            missing, beyond = gap
            found.append(f"{missing.name} is missing: the {beyond} numbered image(s) after it were "
                         "not read")
        return found

    def _sequence_gap(self) -> tuple[Path, int] | None:
        """For an image sequence, the hole in its numbering the demuxer stops at (see sequence_gap),
        looked for from where its options make it start; None for other inputs."""
        if self._demuxer != "image2":
            return None
        try:
            start = int(self._options.get("start_number", 0))
            search = int(self._options.get("start_number_range", START_SEARCH))
        except ValueError:  # a form FFmpeg took but this cannot read: no guess at where it started
            return None
        return sequence_gap(self.path, start, search)

    def _raise_read_error(self) -> None:
        """FileSource's, naming the image a sequence lacks where a hole in its numbering made
        the read fail (the demuxer said only "No such file or directory")."""
        try:
            super()._raise_read_error()
        except StreamError as exc:
            gap = self._sequence_gap()
            if gap is None:
                raise
            raise StreamError(f"{exc}: {gap[0].name} is missing from the sequence") from None
