"""The example scripts run as a user would run them."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

from helpers.cli import REPO
from helpers.processes import checkout_env, run_example


def test_opencv_embed_records_filtered_frames(tmp_path, sample_clip):
    out = tmp_path / "edges.avi"
    result = run_example("opencv_embed.py", str(sample_clip), "--filter", "edge", "--output",
                         str(out), "--max-frames", "12", tmp_path=tmp_path)
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
    # later frames were captured into the filter's own buffers
    for index, frame in enumerate(frames):
        recorded = frame.astype(int)
        to_filtered = [np.abs(recorded - edge).mean() for edge in edges]
        # MJPG is lossy
        assert to_filtered[index] < 0.2 * np.abs(recorded - originals[index].astype(int)).mean()
        neighbours = [to_filtered[i] for i in (index - 1, index + 1) if 0 <= i < len(edges)]
        # the edge image of its own frame, in order
        assert to_filtered[index] < min(neighbours), index


def streamconv_edge(frame):
    import streamconv

    return streamconv.Filter("edge", backend="cpu")(frame).astype(int)


def test_opencv_embed_reports_an_unopenable_source(tmp_path):
    result = run_example("opencv_embed.py", str(tmp_path / "missing.mp4"), tmp_path=tmp_path)
    assert result.returncode == 1 and "cannot open" in result.stderr


def test_transcode_example(tmp_path, sample_clip):
    out = tmp_path / "soft.mp4"
    result = run_example("transcode.py", str(sample_clip), str(out), "gaussian:sigma=1",
                         tmp_path=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "120 frames" in result.stdout and out.is_file()


def _missing(module: str, gpu_check: str | None = None) -> str | None:
    """What a script needing ``module`` (and a GPU it sees) would find missing here, or None."""
    if importlib.util.find_spec(module) is None:
        return module
    if gpu_check is not None:
        probe = subprocess.run([sys.executable, "-c", gpu_check], capture_output=True, timeout=120)
        if probe.returncode != 0:
            return "gpu"
    return None


def _streamconv_gpu_missing() -> bool:
    from streamconv.backends import cuda_status

    return not cuda_status(0)[0]


SCRIPTS_NEEDING = [  # script, module it imports (or None), its GPU check, what its line names
    # for what is missing: the module, the GPU the module sees, else streamconv's GPU
    ("examples/cupy_interop.py", "cupy", "import cupy; cupy.zeros(1)", {"cupy": "needs CuPy"}),
    ("examples/torch_interop.py", "torch", "import torch; assert torch.cuda.is_available()",
     {"torch": "needs PyTorch", "gpu": "needs a GPU PyTorch can use"}),
    ("benchmarks/scale.py", "torch", "import torch; assert torch.cuda.is_available()",
     {"torch": "needs PyTorch", "gpu": "needs PyTorch with CUDA"}),
    ("benchmarks/memory.py", None, None, {}),
    ("benchmarks/interop.py", None, None, {}),
    ("benchmarks/temporal.py", None, None, {}),
    ("benchmarks/bindings.py", None, None, {}),
]


@pytest.mark.parametrize("script, module, gpu_check, says", SCRIPTS_NEEDING,
                         ids=[row[0] for row in SCRIPTS_NEEDING])
def test_a_script_says_in_one_line_what_it_lacks(script, module, gpu_check, says, tmp_path):
    missing = _missing(module, gpu_check) if module else None
    if missing is None and _streamconv_gpu_missing():
        missing = "streamconv's gpu"
    if missing is None:
        pytest.skip(f"{script} has everything it needs here")
    expected = says.get(missing, "needs a GPU streamconv can use")  # the last check of each
    result = subprocess.run([sys.executable, str(REPO / script)], capture_output=True, text=True,
                            timeout=120, env=checkout_env(), cwd=tmp_path)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and len(lines) == 1, result.stderr
    assert lines[0].startswith(Path(script).name) and expected in lines[0], lines[0]
