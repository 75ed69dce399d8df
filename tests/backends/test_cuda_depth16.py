"""16-bit frames on the GPU (conv2d.cu with uint16 samples) against the CPU oracle, outputs poisoned
first.

Every test here carries the ``cuda`` marker and is skipped, with the reason, where there is no
GPU, CUDA binding or kernel for it.
"""

from __future__ import annotations

import av
import numpy as np
import pytest

import streamconv
from streamconv.frames.borders import BORDER_MODES
from streamconv.errors import SettingsError
from streamconv.chain.filters import (REGISTRY, FilterStage, build_filter, parse_filter,
                                      validate_taps)
from streamconv.chain.temporal import TEMPORAL_NAMES

from helpers.gpu_check import check_against_cpu, precompile_plans
from helpers.oracle import random_taps

pytestmark = pytest.mark.cuda

SMALL_SIZES = [(1, 1), (1, 37), (37, 1), (49, 65)]
NAMED = [name for name in REGISTRY
         if name not in ("custom", "bank", "scale", "crop", *TEMPORAL_NAMES)]
EXACT_BINOMIAL = "custom:taps=1,4,6,4,1;4,16,24,16,4;6,24,36,24,6;4,16,24,16,4;1,4,6,4,1,normalize=1"


def _stage(taps: np.ndarray) -> FilterStage:
    return FilterStage("custom", {}, (validate_taps(taps),))


def _exact_unit_taps(rng, size: int) -> np.ndarray:
    """Non-negative multiples of 1/256 summing to at most 1: exact float32 sums over uint16."""
    weights = rng.integers(0, 9, (size, size)).astype(np.float64)
    weights[size // 2, size // 2] += 1
    return np.floor(weights / weights.sum() * 256) / 256


@pytest.fixture(scope="module")
def gpu():
    """The CUDA binding, after compiling the uint16 specialisations these tests use, in parallel."""
    rng = np.random.default_rng(0)
    stages = [_stage(random_taps(rng, 2 * r + 1, exact=False)) for r in range(16)]
    stages += [build_filter(name) for name in NAMED]
    wanted = [(stage, (64, 64, c), b) for stage in stages for c in (1, 3, 4) for b in range(3)]
    return precompile_plans(wanted, dtype=np.uint16)


@pytest.mark.parametrize("border", BORDER_MODES)
@pytest.mark.parametrize("height, width", SMALL_SIZES)
@pytest.mark.parametrize("name", NAMED)
def test_named_filters_on_uint16(rng, gpu, name, border, height, width):
    frame = rng.integers(0, 65536, (height, width, 3), dtype=np.uint16)
    got = check_against_cpu([build_filter(name)], frame, border, gpu)
    assert got.dtype == np.uint16
    if name == "identity":
        np.testing.assert_array_equal(got, frame)


@pytest.mark.parametrize("size", list(range(1, 32, 2)))
def test_random_taps_every_size_border_and_channel_count(rng, gpu, size):
    inexact = _stage(random_taps(rng, size, exact=False) * 1.5)  # gain: saturates at both ends
    exact = _stage(_exact_unit_taps(rng, size))
    for border, channels in [(border, 3) for border in BORDER_MODES] + [("reflect101", 1),
                                                                        ("zero", 4)]:
        for height, width in SMALL_SIZES:
            frame = rng.integers(0, 65536, (height, width, channels), dtype=np.uint16)
            check_against_cpu([inexact], frame, border, gpu)
            check_against_cpu([exact], frame, border, gpu)  # equal sample for sample


@pytest.mark.parametrize("height, width", [(1080, 1920), (2160, 3840)])
@pytest.mark.parametrize("spec",
                         ["identity", EXACT_BINOMIAL, "gaussian:sigma=1", "edge", "box:size=31"])
def test_full_frames_on_uint16(rng, gpu, spec, height, width):
    frame = rng.integers(0, 65536, (height, width, 3), dtype=np.uint16)
    check_against_cpu([parse_filter(spec)], frame, BORDER_MODES[len(spec) % 3], gpu)


def test_16_bit_api_and_streamfilter_equal_the_cpu(rng):
    frames = [rng.integers(0, 65536, (120, 160, 3), dtype=np.uint16) for _ in range(7)]
    view = frames[0][::2, 1:]  # any strides
    cpu = streamconv.Filter(EXACT_BINOMIAL, backend="cpu")
    with streamconv.Filter(EXACT_BINOMIAL, backend="cuda") as gpu:
        np.testing.assert_array_equal(gpu(view), cpu(view))
    with streamconv.StreamFilter(EXACT_BINOMIAL, backend="cuda", ring=3) as stream:
        outputs = list(stream.map(frames))
    for frame, out in zip(frames, outputs, strict=True):
        assert out.dtype == np.uint16
        np.testing.assert_array_equal(out, cpu(frame))


def test_8_bit_only_variants_refuse_16_bit_frames():
    from streamconv.backends.cuda.backend import CudaBackend

    with CudaBackend([parse_filter("box:size=5")], kernel="separable") as backend:
        with pytest.raises(SettingsError, match="8-bit frames only"):
            backend.allocate_slots((16, 16, 3), 1, dtype=np.uint16)


@pytest.mark.parametrize("ring, colour, pix_fmt",
                         [(1, "host", "yuv420p10le"), (3, "host", "yuv420p10le"),
                                                   (3, "backend", "yuv420p10le"),
                          (3, "backend", "yuv420p12le")])
def test_deep_file_to_file_gpu_equals_cpu(tmp_path, ring, colour, pix_fmt):
    """A 10- or 12-bit clip through the 16-bit path on both backends: the same output at the
    input's depth, with the colour converted by FFmpeg's scaler on the host or by the backend
    (colour.cu on the GPU; 64-bit sums towards YUV at 12 bits)."""
    rng = np.random.default_rng(3)
    clip = tmp_path / "deep.mkv"
    with av.open(str(clip), "w") as container:
        stream = container.add_stream("ffv1", rate=25)
        stream.width, stream.height, stream.pix_fmt = 96, 64, pix_fmt
        for _ in range(8):
            rgb = rng.integers(0, 65536, (64, 96, 3), dtype=np.uint16)
            container.mux(stream.encode(av.VideoFrame.from_ndarray(rgb, format="rgb48le").reformat(
                format=pix_fmt)))
        container.mux(stream.encode())
    decoded = {}
    for backend in ("cpu", "cuda"):
        output = tmp_path / f"{backend}.mkv"
        pipeline = streamconv.Pipeline(clip, [EXACT_BINOMIAL, "sharpen:amount=0.25"], output,
                                       backend=backend,
                                       ring=ring, colour=colour, sink_options={"codec": "ffv1"})
        assert (pipeline.planes is not None) == (colour == "backend")
        assert pipeline.run().frames == 8
        with av.open(str(output)) as container:
            assert container.streams.video[0].codec_context.pix_fmt == pix_fmt
            decoded[backend] = [np.concatenate([np.frombuffer(plane,
                                                              np.uint16).reshape(plane.height, -1)
                                                [:, :plane.width].ravel()
                                                for plane in frame.planes])
                                # PyAV has no 12-bit to_ndarray
                                for frame in container.decode(video=0)]
    for cpu, gpu in zip(decoded["cpu"], decoded["cuda"], strict=True):
        # sharpen's taps are inexact: a 1-LSB difference at 16 bits may move a 10/12-bit sample by
        # 1.
        assert np.abs(cpu.astype(int) - gpu).max() <= 1
