"""Frame sources: a video file or stream (PyAV), a synthetic test pattern, or NumPy arrays.

Every source is a context manager with an idempotent ``close()``. The pipeline calls
``read_into(buffer)``, which writes the next frame straight into a slot's host buffer
and returns its FrameMeta, or None at the end. Iterating a source yields new arrays.
"""

from __future__ import annotations

import errno
import logging
import re
import struct
import time
from dataclasses import replace
from fractions import Fraction
from pathlib import Path
from typing import Iterable, Iterator

import cv2  # noqa: F401  (before av: see streamconv.display.check_import_order)
import av
import numpy as np

from .colour import FULL_RANGE, ColourTags, frame_to_rgb
from .errors import FrameFormatError, InputError, NoVideoStreamError, StreamError
from .ffmpeglog import DamageLog, ffmpeg_reason
from .frames import DEFAULT_MAX_PIXELS, as_hwc, check_frame_size
from .slots import RESIZED, FrameMeta
from .yuv import PLANE_FORMATS, YuvLayout

log = logging.getLogger(__name__)


class Source:
    """Base class: (H, W, C) uint8 frames of a fixed size.

    Attributes:
        width, height, channels: frame geometry.
        frame_rate: frames per second (nominal).
        time_base: seconds per pts unit of the frames' timestamps.
        frame_count: number of frames if known in advance, else None.
        is_live: True for sources that must not be blocked (they drop instead).
        planes: the YuvLayout of the frames if ``read_into`` can also deliver them as
            unconverted yuv420p planes, else None.
    """

    width: int
    height: int
    channels: int = 3
    frame_rate: Fraction = Fraction(30)
    time_base: Fraction = Fraction(1, 30)
    frame_count: int | None = None
    is_live = False
    planes: YuvLayout | None = None
    name = "source"

    @property
    def shape(self) -> tuple[int, int, int]:
        """(H, W, C) of every frame."""
        return (self.height, self.width, self.channels)

    def read_into(self, buffer: np.ndarray) -> FrameMeta | None:
        """Write the next frame into ``buffer`` ((H, W, C) uint8 host) and return its metadata.

        Returns:
            The frame's FrameMeta, or None when the source is exhausted, or (sources whose
            frame size can change) ``slots.RESIZED``: nothing was written, ``shape`` now gives
            the next frame's size, and the next call delivers that frame.
        """
        raise NotImplementedError

    def describe(self) -> str:
        """One line for logs: what it is, its size and rate."""
        return f"{self.name} {self.width}x{self.height} @ {float(self.frame_rate):g} fps"

    def close(self) -> None:
        """Release the source; safe to call more than once."""

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __iter__(self) -> Iterator[np.ndarray]:
        """New (H, W, C) uint8 host arrays, one per frame (the shape follows a size change)."""
        while True:
            frame = np.empty(self.shape, np.uint8)
            meta = self.read_into(frame)
            if meta is None:
                return
            if meta is not RESIZED:
                yield frame


NETWORK_TIMEOUT = 10.0
"""Seconds a network input may send nothing before the run gives up (``--timeout``)."""


class FileSource(Source):
    """Decodes a video file or stream with PyAV into RGB frames.

    Args:
        path: anything FFmpeg opens (a file path or URL).
        video_stream: index among the input's video streams (0 = the first).
        threads: decoder threading ("AUTO", "FRAME", "SLICE" or "NONE").
        copy_streams: pass the input's audio and subtitle packets along with the frames
            (``FrameMeta.packets``), for a file output to copy them unchanged.
        max_pixels: refuse frames larger than this (None: no limit): the declared size
            before anything is decoded, then the first frame's.
        timeout: seconds to wait for data from a network input (a URL) before giving up
            (None: NETWORK_TIMEOUT for URLs, no limit for files; 0: no limit).

    Frames are (H, W, 3) uint8 RGB in host memory, or for yuv420p video, on request, the
    decoder's planes unconverted (``planes``, see :meth:`read_into`); each carries the
    decoder's pts and the stream's time base. Packets that fail to decode are skipped and counted in
    ``decode_errors``. The first frame is decoded on opening: its size is the source's; a later
    frame of another size makes ``read_into`` return ``RESIZED`` first. Frames are delivered as
    stored; a rotation or mirroring for display is in ``display_matrix``, for a file sink to keep.
    """

    name = "file"

    def __init__(self, path: str | Path, *, video_stream: int = 0, threads: str = "AUTO",
                 copy_streams: bool = True, max_pixels: int | None = DEFAULT_MAX_PIXELS,
                 timeout: float | None = None) -> None:
        self.path = str(path)
        self.decode_errors = 0
        self.concealed = 0
        self._last_time: float | None = None  # seconds: the last frame delivered
        self._ended = False
        self._container = None
        if "://" not in self.path:
            file = Path(self.path)
            if not file.exists():
                raise InputError(f"input not found: {self.path}")
            if file.is_dir():
                raise InputError(f"input is a directory, not a video: {self.path}")
        if timeout is None:
            timeout = NETWORK_TIMEOUT if "://" in self.path else 0
        self.timeout = timeout or None
        options = {}
        if self.timeout:
            # rw_timeout ends a stalled read with the data so far; PyAV's own timeout also covers
            # the opening probe, which rw_timeout does not bound on every protocol.
            options["rw_timeout"] = str(int(self.timeout * 1e6))
        try:
            self._container = av.open(self.path, mode="r", options=options,
                                      timeout=(self.timeout, 2 * self.timeout) if self.timeout else None)
        except PermissionError:
            raise InputError(f"input not readable (permission denied): {self.path}") from None
        except (av.FFmpegError, OSError, ValueError) as exc:
            raise InputError(f"cannot open input {self.path}: {self._reason(exc)}") from None
        videos = self._container.streams.video
        if not videos:
            self.close()
            raise NoVideoStreamError(f"no video stream in input: {self.path}")
        if not 0 <= video_stream < len(videos):
            count = len(videos)
            self.close()
            raise InputError(f"video stream {video_stream} requested, input has {count}: {self.path}")
        self._stream = videos[video_stream]
        self._stream.thread_type = threads
        context = self._stream.codec_context
        try:
            check_frame_size(int(context.width), int(context.height), max_pixels, self.path)
            self.other_streams = [s for s in self._container.streams if s is not self._stream]
            self.copied_streams = [s for s in self.other_streams
                                   if copy_streams and s.type in ("audio", "subtitle")]
            self._packets: list = []  # copied-stream packets read since the last frame
            components = {self._container.format.name, *self._container.format.name.split(","),
                          self._stream.codec_context.name, *(s.codec_context.name for s in self.copied_streams)}
            self._damage_log = DamageLog(components).start()
            self._frames = self._decode()
            # The first frame, not the header, gives the size: headers can be missing or name
            # a later size, and a file with nothing decodable is refused before any output exists.
            self._held: av.VideoFrame | None = self._first_frame()
            self.width, self.height = self._held.width, self._held.height
            check_frame_size(self.width, self.height, max_pixels, self.path)
        except BaseException:
            self.close()
            raise
        rate = self._stream.average_rate or self._stream.guessed_rate or Fraction(30)
        self.frame_rate = Fraction(rate)
        self.time_base = Fraction(self._stream.time_base or Fraction(1, 1000))
        self.frame_count = _frame_count(self._stream, self.frame_rate)
        # Kept as numbers: damage() is asked after close(), when the stream is gone.
        self._declared_seconds = _declared_seconds(self._stream)
        start = self._stream.start_time
        self._start_seconds = float(start * self.time_base) if start else 0.0
        self.colour = ColourTags.of(context)
        if self._held.format.name.startswith("yuvj"):
            self.colour = replace(self.colour, range=FULL_RANGE)  # yuvj formats are full range untagged
        self.display_matrix = _display_matrix(self._held)
        pixel_format = self._held.format
        depth = max((c.bits for c in pixel_format.components), default=8)
        self.planes = YuvLayout.of_stream(self.width, self.height, pixel_format.name, self.colour)
        if depth > 8:
            log.warning("%s is %d-bit %s: frames are filtered and written with 8 bits per channel",
                        self.path, depth, pixel_format.name)
        self._index = 0

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
            damaged = f" ({self.decode_errors} damaged packet(s))" if self.decode_errors else ""
            raise InputError(f"no frame could be decoded from {self.path}{damaged}")
        return frame

    def _decode(self) -> Iterator[av.VideoFrame]:
        """Demux and decode packet by packet, so one bad packet does not end the stream.

        Packets of the copied streams are kept, undecoded, for the next frame's metadata.
        """
        packets = self._container.demux([self._stream, *self.copied_streams])
        while True:
            try:
                packet = next(packets)
            except StopIteration:
                return
            except av.InvalidDataError:
                self.decode_errors += 1  # the container is unreadable from here on: end the video
                yield from self._flush()
                return
            except (av.FFmpegError, OSError) as exc:
                yield from self._flush()  # the frames the decoder still holds come first
                raise StreamError(f"reading {self.path} failed after {self._index} frames: "
                                  f"{self._reason(exc)}") from None
            self.concealed += packet.is_corrupt  # the demuxer saw damage; the packet is still used
            if packet.stream is not self._stream:
                if packet.size:  # demuxing ends each stream with an empty flush packet
                    self._packets.append(packet)
                continue
            try:
                frames = packet.decode()
            except av.InvalidDataError:
                self.decode_errors += 1
                continue
            except av.FFmpegError as exc:
                raise StreamError(f"decoding {self.path} failed: {ffmpeg_reason(exc)}") from None
            for frame in frames:
                self.concealed += frame.is_corrupt  # decoded with errors hidden by concealment
                yield frame

    def _flush(self) -> Iterator[av.VideoFrame]:
        """The frames a decoder still holds after its input stopped early (none if it cannot say)."""
        try:
            yield from self._stream.codec_context.decode(None)
        except (av.FFmpegError, OSError):
            return

    def _reason(self, exc: BaseException) -> str:
        """FFmpeg's reason, naming the timeout when the input stalled."""
        reason = ffmpeg_reason(exc)
        stalled = isinstance(exc, (av.ExitError, TimeoutError)) or getattr(exc, "errno", None) == errno.EIO
        if self.timeout and stalled:
            reason += f" (no data within the {self.timeout:g} s timeout)"
        return reason

    def damage(self) -> list[str]:
        """What was found wrong with the input so far, one phrase per kind (empty: nothing).

        Counts packets that failed to decode (skipped), packets or frames FFmpeg flagged as
        damaged (concealed, still used), and, once the source has ended, a video that stops
        short of the duration its header declares (a truncated file). Damage FFmpeg hides
        without flagging it cannot be seen here.
        """
        found = []
        if self.decode_errors:
            found.append(f"{self.decode_errors} packet(s) could not be decoded and were skipped")
        if self.concealed:
            found.append(f"{self.concealed} damaged packet(s) or frame(s) were concealed by the decoder")
        if self.reported:
            found.append(f"FFmpeg reported damage {self.reported} time(s) while reading")
        declared = self._declared_seconds
        if self._ended and declared is not None and self._last_time is not None:
            lasted = self._last_time - self._start_seconds + 1 / float(self.frame_rate)
            if declared - lasted > max(0.1, 2 / float(self.frame_rate)):
                found.append(f"the video stops at {lasted:.2f} s of the {declared:.2f} s its header "
                             f"declares (truncated)")
        return found

    def read_into(self, buffer: np.ndarray) -> FrameMeta | None:
        """Decode the next frame into ``buffer``, host memory: converted to RGB for an (H, W, 3)
        uint8 buffer, or copied plane by plane, unconverted, into a flat (1.5 W H,) uint8 buffer
        laid out as ``self.planes`` says (yuv420p input only)."""
        frame, self._held = (self._held if self._held is not None else next(self._frames, None)), None
        if frame is None:
            self._ended = True
            return None
        if frame.width != self.width or frame.height != self.height:
            log.warning("%s: frame size changed at frame %d: %dx%d -> %dx%d", self.path, self._index,
                        self.width, self.height, frame.width, frame.height)
            self.width, self.height = frame.width, frame.height
            self.planes = YuvLayout.of_stream(self.width, self.height, frame.format.name, self.colour)
            self._held = frame
            return RESIZED
        if buffer.shape not in (self.shape, self.planes.shape if self.planes else None):
            raise FrameFormatError(f"buffer of shape {buffer.shape} for {self.width}x{self.height} frames")
        if buffer.ndim == 1:
            self._copy_planes(frame, buffer)
        else:
            rgb = frame_to_rgb(frame)
            plane = rgb.planes[0]
            rows = np.frombuffer(plane, np.uint8).reshape(self.height, plane.line_size)
            np.copyto(buffer, rows[:, : self.width * 3].reshape(self.height, self.width, 3))
        pts = frame.pts
        if frame.time is not None:
            self._last_time = frame.time
        meta = FrameMeta(self._index, pts, self.time_base if pts is not None else None,
                         packets=self.take_packets(
                             until=frame.time + 1 / float(self.frame_rate) if frame.time is not None else None))
        self._index += 1
        return meta

    def _copy_planes(self, frame: av.VideoFrame, buffer: np.ndarray) -> None:
        """Copy a yuv420p frame's planes into a flat slot buffer (decoder rows may be padded)."""
        if self.planes is None:
            raise StreamError(f"{self.path} is not yuv420p video; its frames cannot be read as planes")
        if frame.format.name not in PLANE_FORMATS:  # the decoder changed format mid-stream
            frame = frame.reformat(format="yuv420p")
        for plane, target in zip(frame.planes, self.planes.planes(buffer)):
            rows = np.frombuffer(plane, np.uint8).reshape(target.shape[0], plane.line_size)
            np.copyto(target, rows[:, : target.shape[1]])

    def take_packets(self, until: float | None = None) -> list:
        """The copied-stream packets read and not yet handed on that start before ``until``
        seconds (None: all of them, as after the last frame).

        A decoder holds several packets before its first frame comes out (one per thread with
        frame threading), so the demuxer runs ahead of the frames: packets later than the
        frame wait for a later one, and a run stopped early copies nothing past its end.
        """
        if until is None:
            packets, self._packets = self._packets, []
            return packets
        due, waiting = [], []
        for packet in self._packets:
            stamp = packet.pts if packet.pts is not None else packet.dts
            late = stamp is not None and packet.time_base is not None and stamp * packet.time_base >= until
            (waiting if late else due).append(packet)
        self._packets = waiting
        return due

    def describe(self) -> str:
        codec = self._stream.codec_context.name
        count = f", {self.frame_count} frames" if self.frame_count else ""
        return f"{self.path}: {codec} {self.width}x{self.height} @ {float(self.frame_rate):.3g} fps{count}"

    @property
    def reported(self) -> int:
        """FFmpeg log lines about damage in this input so far (see streamconv.ffmpeglog)."""
        log_ = getattr(self, "_damage_log", None)
        return log_.count if log_ is not None else 0

    def close(self) -> None:
        damage_log = getattr(self, "_damage_log", None)
        if damage_log is not None:
            damage_log.stop()
        if self._container is not None:
            self._container.close()
            self._container = None


def _frame_count(stream, rate: Fraction) -> int | None:
    if stream.frames:
        return int(stream.frames)
    if stream.duration and stream.time_base:
        return max(1, round(float(stream.duration * stream.time_base * rate)))
    return None


def _display_matrix(frame: av.VideoFrame) -> tuple[int, ...] | None:
    """The 3x3 display matrix (9 ints, FFmpeg's fixed point) a frame carries, or None: how a
    player should rotate or mirror it. streamconv filters frames as stored and passes it on."""
    from av.sidedata.sidedata import Type

    data = frame.side_data.get(Type.DISPLAYMATRIX)
    if data is None or len(bytes(data)) < 36:
        return None
    matrix = struct.unpack("<9i", bytes(data)[:36])
    return None if matrix == (65536, 0, 0, 0, 65536, 0, 0, 0, 1 << 30) else matrix


def _declared_seconds(stream) -> float | None:
    """The video stream's duration as its header declares it (MP4, TS: the stream's duration;
    Matroska: its DURATION tag), or None where none is declared."""
    if stream.duration and stream.time_base:
        return float(stream.duration * stream.time_base)
    tag = re.fullmatch(r"(\d+):(\d\d):(\d\d(?:\.\d+)?)", (stream.metadata or {}).get("DURATION", ""))
    if tag:
        return int(tag[1]) * 3600 + int(tag[2]) * 60 + float(tag[3])
    return None


class TestPattern(Source):
    """A synthetic moving pattern: colour gradients, a scrolling checkerboard and a moving box.

    Args:
        width, height: frame size in pixels.
        fps: nominal frame rate.
        frames: how many frames to produce (None = endless).

    Frames are (H, W, 3) uint8 RGB host arrays with pts = frame number, time base 1/fps.

    Example:
        >>> frames = list(TestPattern(64, 48, fps=25, frames=3))
        >>> len(frames), frames[0].shape, frames[0].dtype.name
        (3, (48, 64, 3), 'uint8')
    """

    name = "test"
    __test__ = False  # not a pytest class

    def __init__(self, width: int = 1280, height: int = 720, *, fps: float | Fraction = 30,
                 frames: int | None = 300) -> None:
        if width < 1 or height < 1:
            raise FrameFormatError(f"test pattern size must be positive, got {width}x{height}")
        if frames is not None and frames < 0:
            raise FrameFormatError(f"test pattern frame count must be >= 0, got {frames}")
        self.width, self.height = int(width), int(height)
        self.frame_rate = Fraction(fps).limit_denominator(1001)
        if self.frame_rate <= 0:
            raise FrameFormatError(f"test pattern fps must be positive, got {fps}")
        self.time_base = 1 / self.frame_rate
        self.frame_count = frames
        self._index = 0
        # Twice as wide as the frame so each frame is one strided copy of a moving window.
        ys, xs = np.mgrid[0:height, 0:2 * width].astype(np.float32)
        ramp_x, ramp_y = xs / max(2 * width - 1, 1), ys / max(height - 1, 1)
        checker = (((xs // 32) + (ys // 32)) % 2).astype(np.float32)
        base = np.empty((height, 2 * width, 3), np.uint8)
        base[..., 0] = 255 * ramp_x
        base[..., 1] = 255 * ramp_y
        base[..., 2] = 64 + 128 * checker
        self._base = base

    def read_into(self, buffer: np.ndarray) -> FrameMeta | None:
        """Draw frame number ``index`` into ``buffer`` ((H, W, 3) uint8 host)."""
        if self.frame_count is not None and self._index >= self.frame_count:
            return None
        index = self._index
        offset = (4 * index) % self.width
        np.copyto(buffer, self._base[:, offset:offset + self.width])
        side = max(1, min(self.width, self.height) // 6)
        x = (7 * index) % max(1, self.width - side + 1)
        y = (5 * index) % max(1, self.height - side + 1)
        buffer[y:y + side, x:x + side] = (255, 255, 255)
        self._index += 1
        return FrameMeta(index, index, self.time_base)


class ArraySource(Source):
    """Frames from NumPy arrays already in host memory (tests, the library API).

    Args:
        frames: an iterable of (H, W, C) or (H, W) uint8 arrays, all of one shape.
        fps: nominal frame rate; pts = frame number, time base 1/fps.
        shape: (H, W, C) if ``frames`` is a lazy iterable; otherwise taken from the first frame.

    Example:
        >>> import numpy as np
        >>> source = ArraySource([np.zeros((4, 6, 3), np.uint8)] * 2, fps=50)
        >>> source.shape, source.frame_count, float(source.time_base)
        ((4, 6, 3), 2, 0.02)
    """

    name = "arrays"

    def __init__(self, frames: Iterable[np.ndarray], *, fps: float | Fraction = 30,
                 shape: tuple[int, int, int] | None = None) -> None:
        self._iter = iter(frames)
        self._first: np.ndarray | None = None
        if shape is None:
            first = next(self._iter, None)
            if first is None:
                raise FrameFormatError("ArraySource: no frames given")
            self._first = as_hwc(first)
            shape = self._first.shape
        self.height, self.width, self.channels = shape
        self.frame_rate = Fraction(fps).limit_denominator(1001)
        self.time_base = 1 / self.frame_rate
        if isinstance(frames, (list, tuple)):
            self.frame_count = len(frames)
        self._index = 0

    def read_into(self, buffer: np.ndarray) -> FrameMeta | None:
        frame = self._first if self._first is not None else next(self._iter, None)
        self._first = None
        if frame is None:
            return None
        frame = as_hwc(frame)
        if frame.shape != buffer.shape:
            raise FrameFormatError(f"unexpected frame shape: {frame.shape} != {buffer.shape}")
        np.copyto(buffer, frame)
        index = self._index
        self._index += 1
        return FrameMeta(index, index, self.time_base)


_TEST_SPEC = re.compile(r"^test(?::(?P<w>\d+)x(?P<h>\d+))?(?:@(?P<fps>[\d.]+))?(?:,frames=(?P<n>\d+))?"
                        r"(?P<live>,live)?$")


def parse_test_spec(spec: str, *, max_pixels: int | None = None) -> Source:
    """Build a TestPattern from ``test``, ``test:1280x720@30,frames=300`` or parts of it.

    A trailing ``,live`` gives a LivePattern instead: frames delivered in real time at FPS,
    stamped at capture, the newest kept (endless unless ``frames=N``). A size over
    ``max_pixels`` is refused before the pattern is drawn.
    """
    text = spec.strip().lower()
    if text.startswith("test,"):
        text = "test" + text[4:]
    match = _TEST_SPEC.match(text)
    if not match:
        raise InputError(f"bad test source {spec!r}; expected test[:WxH][@FPS][,frames=N][,live]")
    width = int(match["w"] or 1280)
    height = int(match["h"] or 720)
    check_frame_size(width, height, max_pixels, spec)
    fps = Fraction(match["fps"]) if match["fps"] else Fraction(30)
    try:
        if match["live"]:
            from .live import LivePattern

            return LivePattern(width, height, fps=fps, frames=int(match["n"]) if match["n"] else None)
        frames = int(match["n"]) if match["n"] else 300
        return TestPattern(width, height, fps=fps, frames=frames)
    except FrameFormatError as exc:
        raise InputError(str(exc)) from None


SOURCES = {"file": FileSource, "test": TestPattern, "arrays": ArraySource}
"""Sources by name."""


def open_source(spec: str | Path | Source, **options) -> Source:
    """Open a source from a spec: ``test[...]`` for the pattern, ``webcam[:N]`` or ``/dev/videoN``
    for a camera, else a path or URL for FileSource.

    Args:
        spec: the SOURCE argument of ``streamconv run``, or a Source (returned as is).
        options: keyword options passed to FileSource (``video_stream``, ``threads``,
            ``copy_streams``, ``max_pixels``, ``timeout``) or,
            for a camera, to WebcamSource (``width``, ``height``, ``fps``, ...).
    """
    if isinstance(spec, Source):
        return spec
    text = str(spec)
    if text == "test" or text.startswith(("test:", "test@", "test,")):
        return parse_test_spec(text, max_pixels=options.get("max_pixels"))
    from .webcam import is_webcam_spec, open_webcam  # imports this module: import late

    if is_webcam_spec(text):
        options.pop("max_pixels", None)  # a camera delivers the size it is asked for
        return open_webcam(text, **options)
    started = time.perf_counter()
    source = FileSource(text, **options)
    log.debug("opened %s in %.1f ms", text, 1e3 * (time.perf_counter() - started))
    return source
