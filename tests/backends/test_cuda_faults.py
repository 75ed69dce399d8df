"""GPU faults: a failing kernel launch, a kernel that faults the context, device memory too small,
memory over many runs in one process, and the context the process keeps between runs. Each fault is
produced on the real GPU: the launch of one frame's kernel is given an impossible block or a bad
pointer (there is no other way to make a correct kernel fail on demand); the memory shortage is a
real allocation of almost every byte.

Every test here carries the ``cuda`` marker and is skipped, with the reason, where there is no GPU.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import av
import numpy as np
import pytest

import streamconv
from streamconv.backends.cpu.backend import CpuBackend
from streamconv.chain.filters import parse_chain
from streamconv.gpu.binding import binding
from streamconv.io.sources.arrays import ArraySource

from helpers.cli import REPO, assert_error
from helpers.gpu_check import break_launch_of_frame, held_context
from helpers.oracle import reference_chain
from helpers.processes import resident_bytes

pytestmark = pytest.mark.cuda

FAULTY_FRAME = 5


def test_a_failed_launch_names_the_frame_keeps_the_frames_before_it_and_balances_the_context(
        rng, tmp_path, monkeypatch):
    gpu = binding()
    before = gpu.current_context()  # a runtime's (CuPy, PyTorch) where one ran in this process
    frames = [rng.integers(0, 256, (72, 96, 3), np.uint8) for _ in range(12)]
    output = tmp_path / "out.mkv"
    break_launch_of_frame(monkeypatch, FAULTY_FRAME, "block")
    pipeline = streamconv.Pipeline(ArraySource(frames), ["box"], output, backend="cuda", ring=3,
                                   sink_options={"codec": "ffv1", "pix_fmt": "bgr0"})
    with pytest.raises(streamconv.GpuFaultError, match=f"GPU failed on frame {FAULTY_FRAME}"):
        pipeline.run()
    assert gpu.current_context() == before
    chain = parse_chain(["box"])
    with av.open(str(output)) as container:
        written = [frame.to_ndarray(format="rgb24") for frame in container.decode(video=0)]
    assert len(written) == FAULTY_FRAME  # every frame before the fault, none after
    for index, got in enumerate(written):
        np.testing.assert_array_equal(got, reference_chain(frames[index], chain, "reflect101"))
    monkeypatch.undo()
    seen = []
    streamconv.Pipeline(ArraySource(frames), ["box"], backend="cuda",
                        on_frame=lambda frame, meta: seen.append(frame.copy())).run()
    assert gpu.current_context() == before
    for frame, got in zip(frames, seen, strict=True):
        np.testing.assert_array_equal(got, CpuBackend(chain).apply(frame))


def test_the_kept_context_survives_a_clean_run_and_is_let_go_after_a_failed_one(rng, monkeypatch):
    from streamconv.gpu import device as cuda

    gpu = binding()
    before = gpu.current_context()  # a runtime's (CuPy, PyTorch) where one ran in this process
    frames = [rng.integers(0, 256, (72, 96, 3), np.uint8) for _ in range(8)]
    streamconv.Pipeline(ArraySource(frames), ["box"], backend="cuda").run()
    kept = cuda._KEPT_CONTEXTS.get(0)
    assert kept is not None and gpu.current_context() == before
    streamconv.Pipeline(ArraySource(frames), ["box"], backend="cuda").run()
    # the same hold: no context made and destroyed per run
    assert cuda._KEPT_CONTEXTS.get(0) is kept
    break_launch_of_frame(monkeypatch, 3, "block")
    with pytest.raises(streamconv.GpuFaultError):
        streamconv.Pipeline(ArraySource(frames), ["box"], backend="cuda").run()
    assert 0 not in cuda._KEPT_CONTEXTS and gpu.current_context() == before
    monkeypatch.undo()
    seen = []
    streamconv.Pipeline(ArraySource(frames), ["box"], backend="cuda",
                        on_frame=lambda frame, meta: seen.append(frame.copy())).run()
    chain = parse_chain(["box"])
    for frame, got in zip(frames, seen, strict=True):
        np.testing.assert_array_equal(got, CpuBackend(chain).apply(frame))
    assert cuda._KEPT_CONTEXTS.get(0) is not None


def test_a_kernel_that_kills_the_context_ends_the_run_with_its_exit_code(tmp_path):
    """In a child process: after an illegal address no later CUDA call works in that process."""
    output = tmp_path / "out.mkv"
    script = textwrap.dedent(f"""
        import sys
        import pytest
        sys.path.insert(0, {str(REPO / "tests")!r})
        from helpers.gpu_check import break_launch_of_frame
        from streamconv.cli import main
        patch = pytest.MonkeyPatch()
        break_launch_of_frame(patch, {FAULTY_FRAME + 20}, "bad pointer")
        sys.exit(main(["run", "test:320x240,frames=200", "-o", {str(output)!r}, "--filter", "box",
                       "--backend", "cuda", "--codec", "ffv1", "--no-progress", "-q"]))
    """)
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=120, env=env, cwd=tmp_path)
    message = assert_error(result, 12, "GPU failed at frame")
    failed_at = int(message.split("frame ")[1].split(":")[0])
    # An asynchronous fault surfaces at the next wait on the context: up to a ring (3) earlier.
    assert FAULTY_FRAME + 20 - 3 <= failed_at <= FAULTY_FRAME + 20, message
    with av.open(str(output)) as container:
        written = sum(1 for _ in container.decode(video=0))
    assert written == failed_at, (written, result.stderr)  # every frame finished before it


def test_too_little_device_memory_is_refused_before_the_first_frame(tmp_path):
    with held_context() as gpu:
        hog = []
        try:
            chunk = 1 << 30
            while gpu.mem_get_info()[0] > 256 << 20:
                free = gpu.mem_get_info()[0]
                hog.append(gpu.alloc(min(chunk, free - (128 << 20))))
            output = tmp_path / "out.mp4"
            refused = "not enough GPU memory for 3 slot"
            with pytest.raises(streamconv.BackendUnavailableError, match=refused):
                streamconv.Pipeline("test:3840x2160,frames=5", ["box"], output,
                                    backend="cuda").run()
            assert not output.exists() and list(tmp_path.iterdir()) == []
        finally:
            for allocation in hog:
                allocation.free()


def test_device_and_host_memory_stay_steady_over_five_runs_of_500_frames():
    device_free, resident = [], []
    with held_context() as gpu:  # kept alive, so free memory is comparable
        for _ in range(5):
            stats = streamconv.Pipeline("test:640x360,frames=500", ["gaussian:sigma=1", "edge"],
                                        backend="cuda").run()
            assert stats.frames == 500
            device_free.append(gpu.mem_get_info()[0])
            resident.append(resident_bytes())
    assert max(device_free[1:]) - min(device_free[1:]) <= 2 << 20, device_free
    assert resident[-1] - resident[1] <= 24 << 20, resident
