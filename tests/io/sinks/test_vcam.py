"""The virtual camera output (-o vcam): through pyvirtualcam onto a v4l2loopback device where
one exists (skipped with the reason elsewhere), a stand-in camera for what the sink sends, and
the errors when pyvirtualcam or the device is missing."""

from __future__ import annotations

import glob
import sys
import threading
from fractions import Fraction

import numpy as np
import pytest

from streamconv.errors import VirtualCameraError
from streamconv.io.open import open_sink
from streamconv.io.sources.pattern import parse_test_spec
from streamconv.io.sinks.vcam import VirtualCameraSink
from streamconv.io.spec import parse_output
from streamconv.frames.slots import FrameMeta

COMMON = ("--filter", "identity", "--backend", "cpu", "--no-progress", "-q")


def loopback_device() -> str | None:
    """A v4l2loopback device pyvirtualcam can open, or None."""
    for node in sorted(glob.glob("/dev/video*")):
        try:
            with open(f"/sys/class/video4linux/{node.rsplit('/', 1)[1]}/name") as file:
                name = file.read().lower()
        except OSError:
            continue
        if "loopback" in name or "dummy" in name:  # v4l2loopback's default card labels
            return node
    return None


class StandIn:
    """Takes what pyvirtualcam.Camera takes and keeps what it is sent."""

    def __init__(self, width, height, fps, *, fmt, device):
        self.args = (width, height, fps, fmt, device)
        self.device = device or "/dev/video-stand-in"
        self.frames: list[np.ndarray] = []
        self.closed = 0

    def send(self, frame):
        self.frames.append(frame.copy())

    def close(self):
        self.closed += 1


def test_vcam_outputs_are_named():
    assert [parse_output(o).kind
            for o in ("vcam", "vcam:/dev/video10", "vcam.mp4")] == ["vcam", "vcam", "file"]
    assert parse_output("vcam").target is None and \
        parse_output("vcam:/dev/video10").target == "/dev/video10"
    assert not parse_output("vcam").writes_a_file and parse_output("out.mp4").writes_a_file


def test_the_sink_sends_rgb_bytes_at_the_cameras_size():
    made = []
    sink = VirtualCameraSink("/dev/video7", width=8, height=6, frame_rate=Fraction(30),
                             camera_factory=lambda *a, **k: made.append(StandIn(*a, **k))
                             or made[0])
    camera = made[0]
    assert camera.args == (8, 6, 30.0, "RGB", "/dev/video7")
    picture = np.arange(6 * 8 * 3, dtype=np.uint8).reshape(6, 8, 3)
    sink.send(picture, FrameMeta(0, 0, None))
    sink.send(picture.astype(np.uint16) * 257, FrameMeta(1, 1, None))  # 16-bit: the top 8 bits
    sink.send(np.zeros((12, 16, 3), np.uint8), FrameMeta(2, 2, None))  # another size: scaled
    sink.close()
    sink.close()
    assert [f.dtype for f in camera.frames] == [np.uint8] * 3 and \
        all(f.shape == (6, 8, 3) for f in camera.frames)
    assert np.array_equal(camera.frames[0], picture) and np.array_equal(camera.frames[1], picture)
    assert camera.closed == 1 and sink.frames_written == 3


def test_without_pyvirtualcam_vcam_is_exit_7_naming_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "pyvirtualcam", None)  # import fails
    with pytest.raises(VirtualCameraError, match=r"pip install 'streamconv\[vcam\]'") as caught:
        open_sink("vcam", like=parse_test_spec("test:64x48"))
    assert caught.value.exit_code == 7


def test_a_missing_virtual_camera_is_exit_7_before_the_run(cli, tmp_path):
    if loopback_device() is not None:
        pytest.skip("a v4l2loopback device exists here")
    result = cli("run", "test:64x48@25,frames=5", "-o", "vcam:/dev/video63", *COMMON)
    assert result.returncode == 7, result.stderr
    assert "virtual camera" in result.stderr or "pyvirtualcam" in result.stderr


def test_frames_reach_a_loopback_device_through_pyvirtualcam():
    pyvirtualcam = pytest.importorskip("pyvirtualcam",
                                       reason="pyvirtualcam not installed (the vcam extra)")
    device = loopback_device()
    if device is None:
        pytest.skip("no v4l2loopback device (modprobe v4l2loopback) to send to")
    import cv2

    source = parse_test_spec("test:64x48@30,frames=90")
    sink = open_sink(f"vcam:{device}", like=source)
    assert isinstance(sink, VirtualCameraSink) and pyvirtualcam is not None
    frames = list(source)
    stop = threading.Event()

    def feed():  # the device shows a picture only while one is being sent
        index = 0
        while not stop.is_set():
            sink.send(frames[index % len(frames)], FrameMeta(index, index, None))
            index += 1
            stop.wait(1 / 30)

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    try:
        capture = cv2.VideoCapture(device)
        ok, picture = capture.read()
        capture.release()
    finally:
        stop.set()
        feeder.join(timeout=5)
        sink.close()
    assert ok and picture.shape[:2] == (48, 64)
    assert min(np.abs(cv2.cvtColor(picture, cv2.COLOR_BGR2RGB).astype(int) - f.astype(int)).mean()
               for f in frames) < 8
