"""The example scripts run as a user would run them."""

from __future__ import annotations

import os
import subprocess
import sys

import cv2
import numpy as np

from conftest import REPO


def run_example(name: str, *args: str, tmp_path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    return subprocess.run([sys.executable, str(REPO / "examples" / name), *args], capture_output=True,
                          text=True, timeout=120, env=env, cwd=tmp_path)


def test_opencv_embed_records_filtered_frames(tmp_path, sample_clip):
    out = tmp_path / "edges.avi"
    result = run_example("opencv_embed.py", str(sample_clip), "--filter", "edge", "--output", str(out),
                         "--max-frames", "12", tmp_path=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "filtered 12 frames with edge" in result.stdout
    capture = cv2.VideoCapture(str(out))
    frames = []
    while True:
        ok, frame = capture.read()
        if not ok:
            break
        frames.append(frame)
    assert len(frames) == 12 and frames[0].shape == (360, 640, 3)
    source = cv2.VideoCapture(str(sample_clip))
    originals = [source.read()[1] for _ in range(len(frames) + 1)]
    edges = [streamconv_edge(original) for original in originals]
    for index, frame in enumerate(frames):  # later frames were captured into the filter's own buffers
        recorded = frame.astype(int)
        to_filtered = [np.abs(recorded - edge).mean() for edge in edges]
        assert to_filtered[index] < 0.2 * np.abs(recorded - originals[index].astype(int)).mean()  # MJPG is lossy
        neighbours = [to_filtered[i] for i in (index - 1, index + 1) if 0 <= i < len(edges)]
        assert to_filtered[index] < min(neighbours), index  # the edge image of its own frame, in order


def streamconv_edge(frame):
    import streamconv

    return streamconv.Filter("edge", backend="cpu")(frame).astype(int)


def test_opencv_embed_reports_an_unopenable_source(tmp_path):
    result = run_example("opencv_embed.py", str(tmp_path / "missing.mp4"), tmp_path=tmp_path)
    assert result.returncode == 1 and "cannot open" in result.stderr


def test_transcode_example(tmp_path, sample_clip):
    out = tmp_path / "soft.mp4"
    result = run_example("transcode.py", str(sample_clip), str(out), "gaussian:sigma=1", tmp_path=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "120 frames" in result.stdout and out.is_file()
