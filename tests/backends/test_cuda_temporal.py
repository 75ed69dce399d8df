"""Stages across frames on the GPU against the CPU backend (the oracle), on fresh random clips
with every device and host output poisoned first: the time-only kernel bit for bit, K x K taps
within 1 LSB (equal where exact), the separable form, chains, every border, 8 and 16 bits, 1, 3
and 4 channels, odd sizes, slots on several streams, planes and real files.

Every test here carries the ``cuda`` marker and is skipped, with the reason, without a GPU.
"""

from __future__ import annotations

import av
import numpy as np
import pytest

import streamconv
from streamconv.backends import create_backend
from streamconv.backends.families import temporal as temporal_family
from streamconv.errors import FilterSpecError, FrameDeviceError
from streamconv.chain.filters import FilterStage, parse_chain
from streamconv.chain.temporal import validate_taps3d

from helpers.clips import write_clip
from helpers.gpu_check import POISON
from helpers.oracle import exact_for
from helpers.temporal import clip_of, drive, random_taps3d, rgb_frames

pytestmark = pytest.mark.cuda

BORDERS = ("zero", "replicate", "reflect101")


@pytest.fixture(scope="module", autouse=True)
def compiled():
    """Every specialisation these tests use, compiled in parallel first (the taps' values do not
    matter, only T, K, the form, channels, border and depth)."""
    from streamconv.backends.plan import plan_chain, precompile_plans
    from streamconv.gpu.binding import binding

    rng = np.random.default_rng(0)
    wanted = [([conv3d(rng.uniform(0.1, 1.0, (t, 1, 1)))], shape, 2, dtype) for t in (1, 3, 5, 15)
              for dtype in (np.uint8, np.uint16) for shape in ((8, 8, 3), (8, 8, 1), (8, 8, 4))]
    wanted += [([conv3d(random_taps3d(rng, 3, k, exact=False))], (8, 8, 3), b, np.uint8)
               for k in (3, 5, 7, 9) for b in range(3)]
    wanted += [([conv3d(random_taps3d(rng, 5, 5, exact=False))], (8, 8, c), 1, d)
               for c, d in ((1, np.uint8), (4, np.uint8), (3, np.uint16), (4, np.uint16))]
    wanted += [([conv3d(random_taps3d(rng, 15, 31, exact=False))], (8, 8, 3), 2, np.uint8),
               (parse_chain(["tdenoise:sigma=1.5,space=1"]), (8, 8, 3), 2, np.uint8),
               (CHAIN, (8, 8, 3), 2, np.uint8), (LARGE, (8, 8, 3), 2, np.uint8),
               (FILE, (8, 8, 3), 2, np.uint8)]
    time, space = np.array([0.25, 0.5, 0.25]), np.outer([1, 2, 1], [1, 2, 1]) / 16
    wanted += [([conv3d(time[:, None, None] * space[None])], (8, 8, 3), 0, np.uint8)]
    wanted += [([conv3d(random_taps3d(rng, t, k, exact=False))], (8, 8, c), b, np.uint8)
               for t, k, c, b in ((9, 5, 3, 2), (15, 9, 3, 1), (5, 7, 1, 0), (5, 3, 4, 2))]
    major, minor = binding().device(0).compute_capability
    plans = []
    for float32 in (False, True):  # conv3d_tc.cu's plans, then conv3d.cu's for the same stages
        with pytest.MonkeyPatch.context() as patch:
            if float32:
                patch.setattr(temporal_family, "TC_RADII", ())
            plans += [launch for stages, shape, border, dtype in wanted
                      for launch in plan_chain(stages).kernel_plans(shape, border, dtype)
                      if launch is not None]
    precompile_plans(plans, f"sm_{major}{minor}", workers=16)


@pytest.fixture(params=["tensor", "float32"])
def form(request, monkeypatch):
    """conv3d_tc.cu (int8 digits on the tensor cores, where the GPU has them) or conv3d.cu
    (float32) for 8-bit K x K taps up to K = 9."""
    if request.param == "float32":
        monkeypatch.setattr(temporal_family, "TC_RADII", ())
    return request.param


def expect_kernel(stage, form: str, dtype=np.uint8) -> None:
    """The stage runs on the kernel ``form`` names (conv3d_tc.cu only where the GPU has int8
    tensor cores)."""
    from streamconv.backends.plan import plan_chain
    from streamconv.gpu.binding import binding

    tensor = form == "tensor" and binding().device(0).compute_capability[0] >= 8
    source = plan_chain([stage], tensor_cores=tensor).kernel_plans((40, 40, 3), 2, dtype)[0].source
    assert source == ("conv3d_tc" if tensor and dtype == np.uint8 else "conv3d")


# Every stage exact on both backends (dyadic or integer 2-D taps; 1 x 1 temporal taps are
# bit-exact whatever they are), so the whole chain must be: a 1-LSB difference of an early stage
# would grow through the later ones (tdiff's gain of 3) and hide a slip of the walk.
CHAIN = parse_chain(["custom:taps=1,2,1;2,4,2;1,2,1,normalize=1", "sharpen", "tmean:frames=3",
                     "custom:taps=0,1,0;1,4,1;0,1,0,normalize=1", "tdiff:causal=1,scale=3",
                     "tgauss:sigma=1,frames=5", "custom:taps=1,4,6,4,1;4,16,24,16,4;6,24,36,24,6;"
                     "4,16,24,16,4;1,4,6,4,1,normalize=1"])
LARGE = parse_chain(["tmean:frames=5", "box", "conv3d:taps=0.5|0.25|0.25"])
FILE = parse_chain(["tmean:frames=5", "conv3d:taps=0.25|0.5|0.25"])


def poison(backend, slots) -> None:
    """Every slot's device buffers, every ring and every host output filled with POISON."""
    gpu = backend.gpu
    with backend.activated():
        for slot in slots:
            for buffer in slot.device.buffers:
                gpu.memset_d8(int(buffer), POISON, slot.device.pitch * slot.device.rows)
            slot.host_out.fill(POISON)
        for (allocation, _, entry_bytes), window in zip(backend._rings, backend.walk.windows):
            gpu.memset_d8(int(allocation), POISON, entry_bytes * window.capacity)


def gpu_and_cpu(stages, clip, border="reflect101", ring=3):
    with create_backend("cuda", stages, border=border) as gpu:
        got = drive(gpu, clip, ring, poison)
    with create_backend("cpu", stages, border=border) as cpu:
        expected = drive(cpu, clip, ring)
    return got, expected


def assert_close(got, expected, exact: bool) -> None:
    difference = np.abs(got.astype(np.int64) - expected.astype(np.int64))
    where = np.unravel_index(difference.argmax(), difference.shape)
    assert difference.max() <= (0 if exact else 1), f"max difference {difference.max()} at {where}"


def conv3d(taps, causal=False) -> FilterStage:
    return FilterStage("conv3d", {}, (), temporal=validate_taps3d(taps, causal=causal))


@pytest.mark.parametrize("frames", [1, 3, 5, 15])
@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
@pytest.mark.parametrize("shape", [(23, 37, 3), (16, 20, 1), (9, 13, 4)])
def test_time_only_taps_are_bit_exact(rng, frames, dtype, shape):
    stage = conv3d(rng.uniform(-0.3, 1.0, (frames, 1, 1)))
    got, expected = gpu_and_cpu([stage], clip_of(rng, frames + 3, shape, dtype))
    assert_close(got, expected, exact=True)


@pytest.mark.parametrize("border", BORDERS)
@pytest.mark.parametrize("size", [3, 5, 7, 9])
@pytest.mark.parametrize("exact", [True, False])
def test_3d_taps_match_the_cpu(rng, border, size, exact, form):
    stage = conv3d(random_taps3d(rng, 3, size, exact=exact))
    expect_kernel(stage, form)
    clip = clip_of(rng, 5, (37, 45, 3))
    got, expected = gpu_and_cpu([stage], clip, border)
    assert_close(got, expected, exact and exact_for(stage.temporal.taps, 255))


@pytest.mark.parametrize("channels, dtype",
                         [(1, np.uint8), (4, np.uint8), (3, np.uint16), (4, np.uint16)])
def test_3d_taps_on_other_channels_and_16_bits(rng, channels, dtype, form):
    stage = conv3d(random_taps3d(rng, 5, 5, exact=False))
    expect_kernel(stage, form, dtype)
    got, expected = gpu_and_cpu([stage], clip_of(rng, 7, (33, 29, channels), dtype), "replicate")
    assert_close(got, expected, exact=False)


@pytest.mark.parametrize("frames, size, channels, border",
                         [(9, 5, 3, "reflect101"), (15, 9, 3, "replicate"), (5, 7, 1, "zero"),
                          (5, 3, 4, "reflect101")])
def test_long_windows_on_frames_of_many_tiles(rng, frames, size, channels, border, form):
    """Frames of several tiles each way with ragged right and bottom edges (conv3d_tc.cu's tile
    is 128 bytes by 32 rows), windows up to 15 frames."""
    stage = conv3d(random_taps3d(rng, frames, size, exact=False))
    expect_kernel(stage, form)
    clip = clip_of(rng, frames + 2, (75, 301, channels))
    got, expected = gpu_and_cpu([stage], clip, border, ring=2)
    assert_close(got, expected, exact=False)


def test_the_largest_window_and_taps(rng):
    stage = conv3d(random_taps3d(rng, 15, 31, exact=False))
    got, expected = gpu_and_cpu([stage], clip_of(rng, 4, (40, 70, 3)), "reflect101", ring=2)
    assert_close(got, expected, exact=False)


def test_separable_taps_run_time_then_space_and_stay_exact_where_promised(rng, form):
    time = np.array([0.25, 0.5, 0.25])
    space = np.outer([1, 2, 1], [1, 2, 1]) / 16
    exact = conv3d(time[:, None, None] * space[None])
    assert exact.temporal.time is not None
    clip = clip_of(rng, 6, (31, 50, 3))
    got, expected = gpu_and_cpu([exact], clip, "zero")
    assert_close(got, expected, exact=True)
    stages = parse_chain(["tdenoise:sigma=1.5,space=1"])
    got, expected = gpu_and_cpu(stages, clip, "reflect101")
    assert_close(got, expected, exact=False)


@pytest.mark.parametrize("ring", [1, 2, 4])
def test_chains_with_2d_stages_and_two_windows_on_several_streams(rng, ring):
    got, expected = gpu_and_cpu(CHAIN, clip_of(rng, 9, (48, 80, 3)), "reflect101", ring)
    assert_close(got, expected, exact=True)


def test_many_large_frames_on_four_streams_keep_the_rings_in_order(rng):
    """Frames big enough that kernels and copies overlap across the slots' streams: a write into
    a ring entry that a kernel still reads, or a kernel before its frames are written, shows."""
    got, expected = gpu_and_cpu(LARGE, clip_of(rng, 24, (720, 1280, 3)), "reflect101", ring=4)
    assert_close(got, expected, exact=False)


def test_stream_filter_on_the_gpu_and_what_is_refused(rng):
    clip = clip_of(rng, 6, (30, 40, 3))
    stages = parse_chain(["tmean:frames=5"])
    with streamconv.StreamFilter(stages, ring=3, backend="cuda") as sf:
        got = np.stack(list(sf.map(clip)))
        cupy = pytest.importorskip("cupy")
        with pytest.raises(FrameDeviceError, match="device frames"):
            sf.submit(cupy.asarray(clip[0]))
    with streamconv.StreamFilter(stages, ring=3, backend="cpu") as sf:
        expected = np.stack(list(sf.map(clip)))
    np.testing.assert_array_equal(got, expected)
    with pytest.raises(FilterSpecError, match="StreamFilter"):
        streamconv.Filter(stages, backend="cuda")


def test_a_file_through_the_gpu_equals_the_cpu_run_through_planes(tmp_path):
    """yuv420p planes converted on the GPU around a time-only chain (bit-exact), to a lossless
    file: the same bytes as the CPU backend's run."""
    source = write_clip(tmp_path / "in.mkv", "ffv1", "yuv420p", frames=12, options={})
    outputs = {}
    for backend in ("cuda", "cpu"):
        out = tmp_path / f"{backend}.mkv"
        stats = streamconv.Pipeline(str(source), FILE, str(out), backend=backend,
                                    sink_options={"codec": "ffv1", "pix_fmt": "yuv420p"}).run()
        assert stats.frames == 12 and stats.delay_frames == 3
        outputs[backend] = rgb_frames(out)
    np.testing.assert_array_equal(outputs["cuda"], outputs["cpu"])
    with av.open(str(tmp_path / "cuda.mkv")) as container:
        assert container.streams.video[0].codec_context.pix_fmt == "yuv420p"
