"""A camera read with OpenCV's VideoCapture: the newest-frame policy, reconnects, clear failures.

``webcam``, ``webcam:N``, ``webcam:/dev/videoN`` and ``/dev/videoN`` name a camera. Frames
are read on a capture thread (LiveSource), converted from the camera's BGR to RGB and
stamped at capture. A camera whose reads fail, or that repeats the same frame, is released
and reopened with a growing pause between attempts; after the last attempt the stream
ends with CameraLostError.
"""

from __future__ import annotations

import contextlib
import glob
import logging
import sys
import time
from fractions import Fraction
from typing import Any, Callable, Iterator

import cv2
import numpy as np

from ...errors import CameraError, CameraLostError, InputError
from .backoff import Backoff
from .live import LiveSource
from ..spec import WEBCAM_SPEC

log = logging.getLogger(__name__)

CaptureFactory = Callable[[Any], Any]
"""Makes a capture from an index or path; the object needs isOpened/read/set/get/release."""

def parse_webcam_spec(text: str) -> int | str:
    """The device of a webcam spec: an index (``webcam`` -> 0, ``webcam:2`` -> 2) or a path.

    Raises:
        InputError: ``text`` is not a webcam spec.
    """
    match = WEBCAM_SPEC.match(str(text).strip())
    if match is None:
        raise InputError(f"bad webcam source {text!r}; expected webcam, webcam:N or /dev/videoN")
    target = match["path"] or match["target"]
    if target is None:
        return 0
    if target.isdigit():
        return int(target)
    if target.startswith("/dev/"):
        return target
    raise InputError(f"bad webcam source {text!r}; expected webcam, webcam:N or /dev/videoN")


class WebcamSource(LiveSource):
    """Frames from a camera through ``cv2.VideoCapture`` (or an injected factory).

    Args:
        device: camera index or device path (``/dev/video0``).
        width, height: requested capture size (the camera may give another; the first
            frame decides, and a warning names both).
        fps: requested frame rate (also the nominal rate of a recording); None: the camera's.
        capture_factory: ``factory(device)`` returning a VideoCapture-like object
            (isOpened, read, set, get, release); default ``cv2.VideoCapture``.
        first_frame_timeout: seconds to wait for a first frame after (re)opening.
        stall_timeout: seconds without a good frame (reads failing) before reopening.
        repeat_limit: identical frames in a row before reopening (None: never); repeats
            are not new frames, so they are not delivered.
        reconnect_attempts: reopen attempts before giving up with CameraLostError.
        backoff, max_backoff: the pause before the first attempt, doubled each time up to
            ``max_backoff`` (seconds).

    Frames are (H, W, 3) uint8 RGB host arrays (gray and BGRA cameras are converted),
    FrameMeta.captured is ``time.perf_counter()`` just after the read returned, pts are
    milliseconds since the first frame taken.

    Raises:
        CameraError: the camera does not open, or opens but gives no frame; the message
            says what was tried and which video devices exist.
    """

    name = "webcam"

    def __init__(self, device: int | str = 0, *, width: int | None = None,
                 height: int | None = None, fps: float | None = None,
                 capture_factory: CaptureFactory | None = None, first_frame_timeout: float = 5.0,
                 stall_timeout: float = 2.0, repeat_limit: int | None = 60,
                 reconnect_attempts: int = 5, backoff: float = 0.25,
                 max_backoff: float = 2.0) -> None:
        self.device = device
        self._factory = capture_factory or cv2.VideoCapture
        self._request = (width, height, fps)
        self.first_frame_timeout = first_frame_timeout
        self.stall_timeout = stall_timeout
        self.repeat_limit = repeat_limit
        self.reconnect_attempts = reconnect_attempts
        self.backoff, self.max_backoff = backoff, max_backoff
        self.reconnects = 0
        self._cap = None
        self._resized_warned = False
        cap = self._open()
        if cap is None:
            raise CameraError(f"cannot open camera {self._label()}: {self._tried()} did not open"
                              f"{self._devices_hint()}")
        first = self._first_frame(cap)
        if first is None:
            _release(cap)
            raise CameraError(f"camera {self._label()} opened but gave no frame in "
                              f"{first_frame_timeout:g} s ({self._tried()}){self._devices_hint()}")
        self._cap = cap
        self.height, self.width = first.shape[:2]
        if (width and width != self.width) or (height and height != self.height):
            log.warning("camera %s gives %dx%d frames, not the requested %sx%s", self._label(),
                        self.width, self.height, width or "any", height or "any")
        rate = fps or _positive(cap.get(cv2.CAP_PROP_FPS)) or 30
        self.frame_rate = Fraction(rate).limit_denominator(1001)
        self._backend_name = _backend_name(cap)
        self._previous: np.ndarray | None = None
        self._start()

    # ------------------------------------------------------------ opening

    def _label(self) -> str:
        return f"webcam:{self.device}" if isinstance(self.device, int) else str(self.device)

    def _tried(self) -> str:
        factory = getattr(self._factory, "__qualname__", None) or type(self._factory).__name__
        if self._factory is cv2.VideoCapture:
            factory = "cv2.VideoCapture"
        return f"{factory}({self.device!r})"

    def _devices_hint(self) -> str:
        if not sys.platform.startswith("linux"):
            return ""
        nodes = sorted(glob.glob("/dev/video*"), key=lambda p: (len(p), p))
        wanted = self.device if isinstance(self.device, str) else f"/dev/video{self.device}"
        missing = "" if wanted in nodes else f"{wanted} does not exist; "
        found = ", ".join(nodes) if nodes else "none"
        return f" ({missing}video devices here: {found})"

    def _open(self):
        """Open and configure a capture; None if it does not open."""
        try:
            with _quiet_opencv():
                cap = self._factory(self.device)
        except (cv2.error, OSError, RuntimeError) as exc:
            log.debug("opening %s raised %s", self._label(), exc)
            return None
        if cap is None or not cap.isOpened():
            _release(cap)
            return None
        width, height, fps = self._request
        # Settings are requests: drivers pick the nearest mode they support.
        if width:
            cap.set(cv2.CAP_PROP_FRAME_WIDTH, width)
        if height:
            cap.set(cv2.CAP_PROP_FRAME_HEIGHT, height)
        if fps:
            cap.set(cv2.CAP_PROP_FPS, fps)
        return cap

    def _first_frame(self, cap) -> np.ndarray | None:
        """Read until a frame arrives or first_frame_timeout passes; cameras start slowly."""
        deadline = time.perf_counter() + self.first_frame_timeout
        while True:
            ok, frame = cap.read()
            if ok and frame is not None and frame.size:
                return frame
            if time.perf_counter() >= deadline or self.stopping:
                return None
            time.sleep(0.02)

    # ------------------------------------------------------------ the capture thread

    def _produce(self) -> None:
        last_good = time.perf_counter()
        repeats = 0
        failures = 0
        while not self.stopping:
            ok, frame = self._cap.read()
            now = time.perf_counter()
            self._beat()
            if self.stopping:
                return
            if ok and frame is not None and frame.size:
                if self._is_repeat(frame):
                    repeats += 1
                    if self.repeat_limit is None:
                        self._deliver(frame, now)
                    elif repeats >= self.repeat_limit:
                        self._reconnect(f"the same frame {repeats + 1} times in a row")
                        last_good, repeats, failures = time.perf_counter(), 0, 0
                    continue
                repeats, failures = 0, 0
                last_good = now
                self._deliver(frame, now)
                continue
            failures += 1
            if now - last_good < self.stall_timeout:
                self._sleep(0.01)  # a failed read may return at once: do not spin
                continue
            self._reconnect(f"no frame for {now - last_good:.1f} s, {failures} failed reads")
            last_good, repeats, failures = time.perf_counter(), 0, 0

    def _is_repeat(self, frame: np.ndarray) -> bool:
        """Same as the previous frame? A sparse sample suffices: live sensors never repeat
        exactly."""
        sample = frame[::7, ::7]
        same = self._previous is not None and self._previous.shape == sample.shape and \
            np.array_equal(self._previous, sample)
        self._previous = sample.copy()
        return same

    def _deliver(self, frame: np.ndarray, captured: float) -> None:
        """Convert a BGR/gray/BGRA camera frame to RGB in the capture buffer (the waiting
        pipeline's slot, or the back buffer) and publish it."""
        if frame.shape[:2] != (self.height, self.width):
            if not self._resized_warned:
                log.warning("camera %s changed its frame size to %dx%d; scaling to %dx%d",
                            self._label(), frame.shape[1], frame.shape[0], self.width, self.height)
                self._resized_warned = True
            frame = cv2.resize(frame, (self.width, self.height), interpolation=cv2.INTER_AREA)
        code = (cv2.COLOR_GRAY2RGB if frame.ndim == 2 or frame.shape[2] == 1 else
                cv2.COLOR_BGRA2RGB if frame.shape[2] == 4 else cv2.COLOR_BGR2RGB)
        target = self._capture_buffer()
        try:
            converted = cv2.cvtColor(frame, code, dst=target)
            if converted is not target:  # a build that does not write into a strided dst
                np.copyto(target, converted)
        except BaseException:
            self._abandon(target)
            raise
        self._publish(captured, target)

    def _reconnect(self, reason: str) -> None:
        """Release the camera and reopen it with backoff; publish the first frame it gives.

        Raises:
            CameraLostError: every attempt failed.
        """
        log.warning("camera %s stopped delivering (%s); reopening", self._label(), reason)
        _release(self._cap)
        self._cap = None
        backoff = Backoff(self.backoff, self.max_backoff, attempts=self.reconnect_attempts)
        for attempt in backoff.pauses(self._sleep):
            self._beat()
            cap = self._open()
            frame = self._first_frame(cap) if cap is not None else None
            self._beat()
            if frame is not None:
                self._cap = cap
                self.reconnects += 1
                self._previous = None
                log.warning("camera %s reopened (attempt %d)", self._label(), attempt)
                self._deliver(frame, time.perf_counter())
                return
            _release(cap)
        if self.stopping:
            return
        raise CameraLostError(
            f"camera {self._label()} stopped delivering frames ({reason}); reopened "
            f"{backoff.attempts_made} times over {backoff.elapsed:.1f} s without a frame, giving "
            "up")

    def _hang_error(self, seconds: float) -> BaseException:
        return CameraLostError(f"camera {self._label()} stopped delivering frames: a read has "
                               f"not returned for {seconds:.1f} s")

    def _release(self) -> None:
        cap, self._cap = self._cap, None
        _release(cap)

    def describe(self) -> str:
        return (f"camera {self._label()} ({self._backend_name}) {self.width}x{self.height} "
                f"@ {float(self.frame_rate):g} fps")


@contextlib.contextmanager
def _quiet_opencv() -> Iterator[None]:
    """Silence OpenCV's own log while probing a device (our error says what failed), unless -v."""
    logging_api = getattr(getattr(cv2, "utils", None), "logging", None)
    if logging_api is None or log.isEnabledFor(logging.INFO):
        yield
        return
    previous = logging_api.getLogLevel()
    logging_api.setLogLevel(logging_api.LOG_LEVEL_SILENT)
    try:
        yield
    finally:
        logging_api.setLogLevel(previous)


def _release(cap) -> None:
    if cap is None:
        return
    try:
        cap.release()
    except Exception as exc:  # releasing a broken device must not hide the first error
        log.debug("releasing a capture raised %s", exc)


def _positive(value: float) -> float | None:
    return value if value and value > 0 and value < 1000 else None


def _backend_name(cap) -> str:
    try:
        return str(cap.getBackendName())
    except Exception:  # fakes and some backends have no name
        return "OpenCV"


def open_webcam(spec: str, **options) -> WebcamSource:
    """A WebcamSource from a webcam spec (see :func:`parse_webcam_spec`) and its keyword options."""
    return WebcamSource(parse_webcam_spec(spec), **options)
