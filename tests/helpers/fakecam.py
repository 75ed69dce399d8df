"""A scripted stand-in for cv2.VideoCapture: frames, failures, stalls and repeats on cue.

A script is an iterable of steps, one per ``read()``:
    an int N            a BGR frame numbered N (see ``numbered`` / ``number_of``)
    FAIL                read() returns (False, None)
    REPEAT              the previous frame again
    ("hang", seconds)   read() blocks that long (cut short by release()), then fails
When the script ends every read fails.
"""

from __future__ import annotations

import itertools
import threading
import time

import numpy as np

FAIL = "fail"
REPEAT = "repeat"
SHAPE = (24, 32, 3)


def numbered(n: int, shape=SHAPE) -> np.ndarray:
    """A BGR frame that carries ``n``: blue = n % 251, green = n // 251 % 251, red = 200."""
    frame = np.empty(shape, np.uint8)
    frame[..., 0] = n % 251
    frame[..., 1] = n // 251 % 251
    frame[..., 2] = 200
    return frame


def number_of(rgb: np.ndarray) -> int:
    """The number of a frame after WebcamSource converted it to RGB."""
    assert rgb[0, 0, 0] == 200, f"not a numbered frame: {rgb[0, 0]}"
    return int(rgb[0, 0, 2]) + 251 * int(rgb[0, 0, 1])


def count_from(start: int):
    """Endless frame numbers start, start + 1, ..."""
    return itertools.count(start)


class FakeCapture:
    """cv2.VideoCapture's interface (isOpened/read/set/get/release) over a script.

    Args:
        script: the steps (see the module docstring).
        opened: what isOpened() says before release().
        period: seconds between frames; read() sleeps to keep that pace, like a camera.
        shape: (H, W, 3) of the frames.
    """

    def __init__(self, script=(), *, opened: bool = True, period: float = 0.0, shape=SHAPE) -> None:
        self._steps = iter(script)
        self.opened = opened
        self.period = period
        self.shape = shape
        self.props: dict[int, float] = {}
        self.reads = 0
        self.released = threading.Event()
        self._previous: np.ndarray | None = None
        self._next_time = time.perf_counter()

    def isOpened(self) -> bool:  # noqa: N802 - OpenCV's name
        return self.opened and not self.released.is_set()

    def read(self, image=None):
        if self.released.is_set():
            return False, None
        self.reads += 1
        if self.period:
            self._next_time += self.period
            delay = self._next_time - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
        step = next(self._steps, FAIL)
        if isinstance(step, tuple) and step[0] == "hang":
            self.released.wait(step[1])
            return False, None
        if step == FAIL:
            return False, None
        if step == REPEAT:
            return (self._previous is not None), self._previous
        self._previous = numbered(int(step), self.shape)
        return True, self._previous

    def set(self, prop: int, value: float) -> bool:
        self.props[prop] = value
        return True

    def get(self, prop: int) -> float:
        return float(self.props.get(prop, 0.0))

    def release(self) -> None:
        self.released.set()

    def getBackendName(self) -> str:  # noqa: N802 - OpenCV's name
        return "FAKE"


class FakeCameraFactory:
    """Hands out the given captures one per open; after them, captures that do not open.

    Attributes:
        calls: the device argument of every open, in order.
        made: every capture handed out.
    """

    def __init__(self, *captures: FakeCapture) -> None:
        self._captures = list(captures)
        self.calls: list = []
        self.made: list[FakeCapture] = []

    def __call__(self, device):
        self.calls.append(device)
        capture = self._captures.pop(0) if self._captures else FakeCapture(opened=False)
        self.made.append(capture)
        return capture
