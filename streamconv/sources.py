"""Frame sources: the Source interface, a synthetic test pattern, NumPy arrays, and
``open_source``, which also opens files and streams (streamconv.filesource) and cameras
(streamconv.webcam).

Every source is a context manager with an idempotent ``close()``. The pipeline calls
``read_into(buffer)``, which writes the next frame straight into a slot's host buffer
and returns its FrameMeta, or None at the end. Iterating a source yields new arrays.
"""

from __future__ import annotations

import logging
import re
import time
from fractions import Fraction
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np

from .errors import FrameFormatError, FrameTypeError, InputError
from .frames import as_hwc, check_frame_size, check_host_memory
from .slots import RESIZED, FrameMeta
from .yuv import YuvLayout

log = logging.getLogger(__name__)


class Source:
    """Base class: (H, W, C) frames of a fixed size and sample type.

    Attributes:
        width, height, channels: frame geometry.
        dtype: the samples' type: uint8, or uint16 for deeper video (10-bit and up), whose
            samples then span 0..65535.
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
    dtype: np.dtype = np.dtype(np.uint8)
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
        """Write the next frame into ``buffer`` ((H, W, C) host array of ``dtype``) and return
        its metadata.

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
        """New (H, W, C) host arrays of ``dtype``, one per frame (the shape follows a size change)."""
        while True:
            frame = np.empty(self.shape, self.dtype)
            meta = self.read_into(frame)
            if meta is None:
                return
            if meta is not RESIZED:
                yield frame


MIN_TEST_FPS = Fraction(1, 1000)
"""Slowest test pattern: a frame every 1000 s (a time base FFmpeg's 32-bit rationals hold)."""

MAX_TEST_FPS = 1000
"""Fastest test pattern: 1000 fps (far higher rates give time bases that encoders and muxers
refuse or overflow on)."""


class TestPattern(Source):
    """A synthetic moving pattern: colour gradients, a scrolling checkerboard and a moving box.

    Args:
        width, height: frame size in pixels.
        fps: nominal frame rate, MIN_TEST_FPS (0.001) to MAX_TEST_FPS (1000).
        frames: how many frames to produce (None = endless).

    Frames are (H, W, 3) uint8 RGB host arrays with pts = frame number, time base 1/fps.
    The pattern takes 6 bytes of host memory per pixel of the frame.

    Raises:
        FrameFormatError: a size, fps or frame count out of range.
        InputError: the pattern does not fit in the available host memory.

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
        try:
            rate = Fraction(fps)
        except (TypeError, ValueError, OverflowError):  # nan, inf, not a number
            raise FrameFormatError(f"test pattern fps must be a number, got {fps!r}") from None
        if not MIN_TEST_FPS <= rate <= MAX_TEST_FPS:
            raise FrameFormatError(f"test pattern fps must be {float(MIN_TEST_FPS):g} to "
                                   f"{MAX_TEST_FPS}, got {float(rate):g}")
        self.frame_rate = rate.limit_denominator(1001)
        self.time_base = 1 / self.frame_rate
        self.frame_count = frames
        self._index = 0
        # The base (6 bytes a pixel: twice as wide as the frame, so each frame is one strided
        # copy of a moving window) and the checker plane beside it (2 bytes): refuse both first.
        check_host_memory(8 * self.width * self.height, f"a {self.width}x{self.height} test pattern",
                          hint="choose a smaller size")
        width, height = self.width, self.height
        # Rows and columns broadcast, so no full-frame temporaries beyond one uint8 plane;
        # the float32 arithmetic is what a full grid would compute, so the pixels are the same.
        xs = np.arange(2 * width).astype(np.float32)[None, :]
        ys = np.arange(height).astype(np.float32)[:, None]
        base = np.empty((height, 2 * width, 3), np.uint8)
        base[..., 0] = 255 * (xs / max(2 * width - 1, 1))
        base[..., 1] = 255 * (ys / max(height - 1, 1))
        # (a + b) % 2 == (a % 2) ^ (b % 2): the checker is the xor of a column and a row parity.
        checker = ((np.arange(2 * width) // 32) % 2).astype(np.uint8)[None, :] ^ \
            ((np.arange(height) // 32) % 2).astype(np.uint8)[:, None]
        checker *= 128  # in place: 64 or 192, no second plane
        checker += 64
        base[..., 2] = checker
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
        frames: an iterable of (H, W, C) or (H, W) uint8 or uint16 arrays, all of one shape
            and dtype (the first frame's; uint8 when ``shape`` is given).
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
            self.dtype = self._first.dtype
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
        if frame.dtype != buffer.dtype:
            raise FrameTypeError(f"unexpected frame dtype: {frame.dtype} != {buffer.dtype}")
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
    ``max_pixels``, or one whose pattern does not fit in the available host memory, is
    refused before the pattern is drawn.

    Raises:
        InputError: a malformed spec, a size of 0, an FPS outside 0.001..1000, or a size
            over the limits; the message says which.
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
    try:
        fps = Fraction(match["fps"]) if match["fps"] else Fraction(30)
    except ValueError:  # the pattern lets "1.2.3" through
        raise InputError(f"bad test source {spec!r}: {match['fps']!r} is not a frame rate; "
                         f"expected test[:WxH][@FPS][,frames=N][,live]") from None
    try:
        if match["live"]:
            from .live import LivePattern

            return LivePattern(width, height, fps=fps, frames=int(match["n"]) if match["n"] else None)
        frames = int(match["n"]) if match["n"] else 300
        return TestPattern(width, height, fps=fps, frames=frames)
    except FrameFormatError as exc:
        raise InputError(str(exc)) from None


def is_test_spec(spec: str) -> bool:
    """Whether a SOURCE argument names the built-in test pattern (``test``, ``test:...``)."""
    return spec == "test" or spec.startswith(("test:", "test@", "test,"))


def open_source(spec: str | Path | Source, **options) -> Source:
    """Open a source from a spec: ``test[...]`` for the pattern, ``webcam[:N]`` or ``/dev/videoN``
    for a camera, else a path or URL for FileSource.

    Args:
        spec: the SOURCE argument of ``streamconv run``, or a Source (returned as is).
        options: keyword options passed to FileSource (``video_stream``, ``threads``,
            ``copy_streams``, ``max_pixels``, ``timeout``, ``depth``, ``hwaccel``) or,
            for a camera, to WebcamSource (``width``, ``height``, ``fps``, ...).
    """
    if isinstance(spec, Source):
        return spec
    text = str(spec)
    if is_test_spec(text):
        return parse_test_spec(text, max_pixels=options.get("max_pixels"))
    from .webcam import is_webcam_spec, open_webcam  # imports this module: import late

    if is_webcam_spec(text):
        options.pop("max_pixels", None)  # a camera delivers the size it is asked for
        return open_webcam(text, **options)
    from .filesource import FileSource  # imports this module: import late

    started = time.perf_counter()
    source = FileSource(text, **options)
    log.debug("opened %s in %.1f ms", text, 1e3 * (time.perf_counter() - started))
    return source
