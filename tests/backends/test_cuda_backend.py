"""The CUDA backend against the CPU oracle, on fresh random data with every output poisoned first.

Every test here carries the ``cuda`` marker and is skipped, with the reason, where there
is no GPU or CUDA binding, or no kernel for it.
"""

from __future__ import annotations

import shutil
import subprocess
import sys

import av
import numpy as np
import pytest

import streamconv
from streamconv.backends.cpu.backend import CpuBackend
from streamconv.frames.borders import BORDER_MODES
from streamconv.errors import KernelCompileError
from streamconv.chain.filters import (REGISTRY, FilterStage, build_filter, parse_filter,
                                      validate_taps)
from streamconv.chain.temporal import TEMPORAL_NAMES
from streamconv.io.sinks.sink import CallbackSink
from streamconv.io.sources.arrays import ArraySource

from helpers.gpu_check import POISON, check_against_cpu, precompile_plans
from helpers.oracle import random_taps

pytestmark = pytest.mark.cuda

SMALL_SIZES = [(1, 1), (1, 37), (37, 1), (49, 65)]
# bank (a layer): test_cuda_layer.py; scale and crop: test_cuda_resample.py
NAMED = [name for name in REGISTRY
         if name not in ("custom", "bank", "scale", "crop", *TEMPORAL_NAMES)]


@pytest.fixture(scope="module")
def gpu():
    """The CUDA binding, after compiling every specialisation these tests use, in parallel."""
    stages = [random_stage(r) for r in range(16)] + [parse_filter(f"box:size={2 * r + 1}")
                                                     for r in range(16)]
    wanted = [(stage, (64, 64, 3), border) for stage in stages for border in range(3)]
    wanted += [(build_filter("edge"), (64, 64, c), b) for c in (1, 3, 4) for b in range(3)]
    wanted += [(random_stage(r), (64, 64, c), b) for r in (1, 6) for c in (1, 4) for b in range(3)]
    return precompile_plans(wanted)


def random_stage(radius: int) -> FilterStage:
    """Full-rank taps of radius ``radius`` (values do not matter for compiling)."""
    return FilterStage("custom", {},
                       (validate_taps(random_taps(np.random.default_rng(radius), 2 * radius + 1,
                                                                exact=False)),))


@pytest.mark.parametrize("border", BORDER_MODES)
@pytest.mark.parametrize("height, width", SMALL_SIZES)
@pytest.mark.parametrize("name", NAMED)
def test_named_filters_small_frames(rng, gpu, name, border, height, width):
    frame = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
    check_against_cpu([build_filter(name)], frame, border, gpu)


@pytest.mark.parametrize("height, width", [(1080, 1920), (2160, 3840)])
@pytest.mark.parametrize("spec",
                         ["identity", "box:size=3", "gaussian:sigma=1", "edge", "sharpen",
                          "box:size=31"])
def test_named_filters_full_frames(rng, gpu, spec, height, width):
    frame = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
    border = BORDER_MODES[len(spec) % 3]
    got = check_against_cpu([parse_filter(spec)], frame, border, gpu)
    if spec == "identity":
        np.testing.assert_array_equal(got, frame)


@pytest.mark.parametrize("size", list(range(1, 32, 2)))
@pytest.mark.parametrize("exact", [True, False])
def test_random_taps_every_size_and_border(rng, gpu, size, exact):
    stage = FilterStage("custom", {}, (validate_taps(random_taps(rng, size, exact=exact)),))
    for border in BORDER_MODES:
        for height, width in SMALL_SIZES:
            frame = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
            check_against_cpu([stage], frame, border, gpu)


@pytest.mark.parametrize("channels", [1, 4])
@pytest.mark.parametrize("spec", ["gaussian:sigma=2", "edge", "custom:taps=1,2,1;2,-12,2;1,2,1"])
def test_one_and_four_channels(rng, gpu, spec, channels):
    frame = rng.integers(0, 256, (67, 93, channels), dtype=np.uint8)
    for border in BORDER_MODES:
        check_against_cpu([parse_filter(spec)], frame, border, gpu)


def test_chain_of_three_stages(rng, gpu):
    stages = [parse_filter("sharpen"), parse_filter("emboss"), build_filter("edge")]
    frame = rng.integers(0, 256, (123, 211, 3), dtype=np.uint8)
    check_against_cpu(stages, frame, "reflect101", gpu)


@pytest.mark.parametrize("ring", [1, 2, 3])
def test_ring_depths_give_identical_frames(rng, ring):
    frames = [rng.integers(0, 256, (360, 640, 3), dtype=np.uint8) for _ in range(12)]
    stages = [parse_filter("sharpen"), build_filter("edge")]
    got = []
    stats = streamconv.Pipeline(ArraySource(frames), stages,
                                CallbackSink(lambda f, m: got.append(f.copy())),
                                backend="cuda", ring=ring).run()
    cpu = CpuBackend(stages)
    assert stats.frames == 12 and "cuda" in stats.backend
    for stage in ("upload", "kernel", "download"):
        assert len(stats.samples[stage]) == 12 and min(stats.samples[stage]) > 0
    for frame, out in zip(frames, got):
        np.testing.assert_array_equal(out, cpu.apply(frame))


def test_apply_api_and_non_contiguous_input(rng):
    from streamconv.backends.cuda.backend import CudaBackend

    big = rng.integers(0, 256, (200, 300, 3), dtype=np.uint8)
    view = big[10:150:2, 3:250]
    stage = parse_filter("gaussian:sigma=1.5")
    with CudaBackend([stage]) as backend:
        out = backend.apply(view)
        again = np.full_like(out, POISON)
        backend.apply_into(again, view)
    expected = CpuBackend([stage]).apply(view)
    assert np.abs(out.astype(int) - expected).max() <= 1
    np.testing.assert_array_equal(out, again)


def test_contexts_stay_balanced_over_several_pipelines(gpu):
    # what was current before (CuPy or PyTorch, run earlier in this process, leave theirs current)
    before = gpu.current_context()
    for _ in range(3):
        stats = streamconv.Pipeline(streamconv.TestPattern(320, 240, frames=20), ["box:size=5"],
                                    None, backend="cuda").run()
        assert stats.frames == 20
        assert gpu.current_context() == before


@pytest.mark.parametrize("compiler", ["nvrtc", "nvcc"])
def test_compile_error_carries_the_compilers_output(compiler, monkeypatch):
    from streamconv.gpu import loader as kernel_loader

    if compiler == "nvcc" and shutil.which("nvcc") is None:
        pytest.skip("nvcc not on PATH (only the gpu and NVRTC here)")
    monkeypatch.setenv("STREAMCONV_COMPILER", compiler)
    with pytest.raises(KernelCompileError) as info:
        kernel_loader.compile_kernel("conv2d", {"RADIUS": "not_a_number", "CHANNELS": 3}, "sm_90")
    assert f"{'NVRTC' if compiler == 'nvrtc' else 'nvcc'}" in str(info.value)
    assert "failed to compile conv2d[CHANNELS=3,RADIUS=not_a_number]" in str(info.value)
    assert "error" in str(info.value)


@pytest.mark.parametrize("colour_args, path_logged, read_as", [
    (("--pix-fmt", "bgr0"), "RGB, converted on the host", "rgb24"),
    # colour.cu on the GPU
    (("--colour", "backend"), "planes, converted by the backend", "yuv420p"),
], ids=["rgb-output", "yuv420p-planes"])
def test_file_to_file_gpu_equals_cpu(tmp_path, sample_clip, colour_args, path_logged, read_as):
    """A lossless file output holds the same frames from both backends, on either colour path."""
    outputs = {}
    for backend in ("cpu", "cuda"):
        out = tmp_path / f"{backend}.mkv"
        result = subprocess.run([sys.executable, "-m", "streamconv", "run", str(sample_clip), "-o",
                                 str(out),
                                 "--filter", "sharpen", "--filter", "edge", "--backend", backend,
                                 "--codec", "ffv1", *colour_args, "--max-frames", "30", "-v",
                                 "--no-progress"],
                                capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, result.stderr
        assert path_logged in result.stderr
        with av.open(str(out)) as container:
            outputs[backend] = [f.to_ndarray(format=read_as) for f in container.decode(video=0)]
    assert len(outputs["cpu"]) == len(outputs["cuda"]) == 30
    for cpu_frame, gpu_frame in zip(outputs["cpu"], outputs["cuda"]):
        np.testing.assert_array_equal(gpu_frame, cpu_frame)


@pytest.mark.parametrize("colour", ["host", "backend"])
def test_a_size_change_mid_stream_gives_the_cpu_backends_frames(tmp_path, colour):
    """Slots re-allocated at the new size on the GPU; with ``backend`` colour the first size travels
    as yuv420p planes (colour.cu), the second as RGB (the file keeps the first size)."""
    from helpers.clips import encode_ts

    rng = np.random.default_rng(7)
    clip = tmp_path / "resizing.ts"
    clip.write_bytes(encode_ts(64, 48, 5, 0, rng) + encode_ts(96, 64, 5, 5, rng))
    decoded = {}
    for backend in ("cpu", "cuda"):
        output = tmp_path / f"{backend}.mkv"
        pipeline = streamconv.Pipeline(clip, ["gaussian:sigma=1"], output, backend=backend,
                                       colour=colour,
                                       sink_options={"codec": "ffv1", "pix_fmt": "yuv420p"})
        assert (pipeline.planes is not None) == (colour == "backend")
        stats = pipeline.run()
        assert stats.frames == 10 and stats.resizes == 1
        with av.open(str(output)) as container:
            # I420 planes
            decoded[backend] = [frame.to_ndarray() for frame in container.decode(video=0)]
    assert [f.shape for f in decoded["cuda"]] == [(72, 64)] * 10  # 64x48 luma + chroma rows
    for cpu, gpu in zip(decoded["cpu"], decoded["cuda"], strict=True):
        # the filters' 1 LSB, through the same conversion
        assert np.abs(cpu.astype(int) - gpu).max() <= 1
