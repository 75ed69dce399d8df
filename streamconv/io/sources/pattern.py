"""The synthetic test pattern: colour gradients, a scrolling checkerboard and a moving box.

TestPattern draws its frames as fast as they are read (a file stand-in); LivePattern
delivers the same frames in real time on its own clock, with the newest-frame policy of a
camera (streamconv.io.sources.live). ``parse_test_spec`` builds either from the SOURCE argument
``test[:WxH][@FPS][,frames=N][,live]``.
"""

from __future__ import annotations

import re
import time
from fractions import Fraction

import numpy as np

from ...errors import FrameFormatError, InputError
from ...frames.checks import check_frame_size, check_host_memory
from ...frames.slots import FrameMeta
from .live import LiveSource
from .source import Source

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

    Examples:
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
        check_host_memory(8 * self.width * self.height,
                          f"a {self.width}x{self.height} test pattern",
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


class LivePattern(LiveSource):
    """TestPattern frames delivered in real time at ``fps``, stamped as they become due.

    Args:
        width, height: frame size in pixels.
        fps: frames per second of the clock.
        frames: frames to produce before the stream ends (None: endless).
        copy_workers: threads for the copy into the pipeline's slot (1: a plain copy).

    Frames are (H, W, 3) uint8 RGB host arrays; frame ``k`` of the clock shows
    TestPattern frame ``k`` (dropped frames are skipped, as a camera's would be).
    """

    name = "live-test"

    def __init__(self, width: int = 1280, height: int = 720, *, fps: float | Fraction = 30,
                 frames: int | None = None, copy_workers: int | None = None) -> None:
        self.copy_workers = copy_workers
        self._pattern = TestPattern(width, height, fps=fps, frames=frames)
        self.width, self.height = self._pattern.width, self._pattern.height
        self.frame_rate = self._pattern.frame_rate
        self._start()

    def _produce(self) -> None:
        period = 1.0 / float(self.frame_rate)
        due = time.perf_counter()
        while not self.stopping:
            # Draw half a period ahead, while the previous frame is long through the
            # pipeline, so drawing does not compete with it for the GIL and memory.
            if not self._sleep(due - period / 2 - time.perf_counter()):
                return
            target = self._capture_buffer()
            if self._pattern.read_into(target) is None:
                return
            # The frame exists from its due time on, like a sensor read out on a clock.
            if not self._sleep(due - time.perf_counter()):
                return
            self._publish(time.perf_counter(), target)
            due += period
            now = time.perf_counter()
            if now - due > period:  # fell behind (a stalled machine): skip, do not burst
                due = now

    def describe(self) -> str:
        return f"live test pattern {self.width}x{self.height} @ {float(self.frame_rate):g} fps"


_TEST_SPEC = re.compile(
    r"^test(?::(?P<w>\d+)x(?P<h>\d+))?(?:@(?P<fps>[\d.]+))?(?:,frames=(?P<n>\d+))?"
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
            return LivePattern(width, height, fps=fps, frames=int(match["n"]) if match["n"]
                               else None)
        frames = int(match["n"]) if match["n"] else 300
        return TestPattern(width, height, fps=fps, frames=frames)
    except FrameFormatError as exc:
        raise InputError(str(exc)) from None
