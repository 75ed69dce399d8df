"""The virtual camera sink: filtered frames offered as a webcam (video calls, OBS) through
pyvirtualcam (the ``vcam`` extra).

``-o vcam`` opens the first virtual camera pyvirtualcam finds (on Linux a v4l2loopback
device), ``-o vcam:DEVICE`` a named one (``vcam:/dev/video10``). The camera is opened when the
sink is made, before the run, so a missing package or device stops the run at once (exit 7).
"""

from __future__ import annotations

import logging
from fractions import Fraction
from typing import Any, Callable

import cv2
import numpy as np

from ...errors import VirtualCameraError
from ...frames.slots import FrameMeta
from .sink import Sink

log = logging.getLogger(__name__)

class VirtualCameraSink(Sink):
    """Sends RGB frames to a virtual camera with pyvirtualcam.

    Args:
        device: the virtual camera (``/dev/video10``; None: the first pyvirtualcam finds).
        width, height: the camera's frame size; frames of another size are scaled to it.
        frame_rate: the rate the camera announces. Frames are sent as they come: a file is
            shown at its own pace with ``--realtime``.
        camera_factory: makes the camera as ``pyvirtualcam.Camera`` does (``width, height, fps,
            fmt=, device=``); None: pyvirtualcam's.

    Frames are (H, W, 3) uint8 RGB host arrays (uint16 ones are sent with their top 8 bits).

    Raises:
        VirtualCameraError: (exit 7) pyvirtualcam is not installed, or no virtual camera
            (``device``) can be opened.
    """

    name = "vcam"

    def __init__(self, device: str | None = None, *, width: int, height: int,
                 frame_rate: Fraction | float,
                 camera_factory: Callable[..., Any] | None = None) -> None:
        self.width, self.height = width, height
        factory, rgb = _camera_factory(camera_factory)
        try:
            self._camera = factory(width, height, float(frame_rate), fmt=rgb, device=device)
        except (RuntimeError, ValueError, OSError) as exc:
            raise VirtualCameraError(f"cannot open the virtual camera {device or '(any)'}: "
                                     f"{exc}") from None
        self.device = getattr(self._camera, "device", device)
        self._closed = False
        log.info("sending to virtual camera %s (%dx%d)", self.device, width, height)

    def send(self, frame: np.ndarray, meta: FrameMeta) -> None:
        """Show one (H, W, 3) uint8 or uint16 RGB host frame on the camera."""
        if frame.dtype == np.uint16:
            frame = (frame >> 8).astype(np.uint8)
        if frame.shape[:2] != (self.height, self.width):
            frame = cv2.resize(frame, (self.width, self.height), interpolation=cv2.INTER_AREA)
        self._camera.send(np.ascontiguousarray(frame))
        self.frames_written += 1

    def close(self) -> None:
        """Release the camera (viewers see it stop); safe to call more than once."""
        if not self._closed:
            self._closed = True
            self._camera.close()

    def describe(self) -> str:
        return f"virtual camera {self.device}"


def _camera_factory(factory: Callable[..., Any] | None) -> tuple[Callable[..., Any], Any]:
    """The camera maker and its RGB format: pyvirtualcam's, or ``factory`` with ``"RGB"``."""
    if factory is not None:
        return factory, "RGB"
    try:
        import pyvirtualcam
    except ImportError:
        raise VirtualCameraError("-o vcam needs pyvirtualcam: pip install 'streamconv[vcam]' "
                                 "(and on Linux a v4l2loopback device)") from None
    return pyvirtualcam.Camera, pyvirtualcam.PixelFormat.RGB
