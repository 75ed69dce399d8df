"""scale and crop on the GPU (cuda/resample/resample.cu) against the CPU reference: sample for sample, on
fresh random and real frames, every kernel, up and down, odd sizes, 1 to 4 channels, 8 and 16
bits, outputs poisoned first; in chains with the 2-D filters, through 4:2:0 planes, device frames,
StreamFilter and a file run."""

from __future__ import annotations

import av
import numpy as np
import pytest

import streamconv
from streamconv.backends.cpu.backend import CpuBackend
from streamconv.backends.cuda.backend import CudaBackend
from streamconv.chain.filters import parse_chain
from streamconv.bench.timing import poisoned_run
from streamconv.frames.yuv import YuvLayout
from streamconv.chain.resample import KERNELS

from helpers.gpu_check import check_against_cpu, gpu_filter
from helpers.resample import RESIZES, real_frame

pytestmark = pytest.mark.cuda
# 5 x 5 binomial taps, multiples of 1/256: the 2-D stages of a chain give what the CPU gives, so a
# scale stage after them sees the same frame on both.
BINOMIAL5 = "1,4,6,4,1;4,16,24,16,4;6,24,36,24,6;4,16,24,16,4;1,4,6,4,1"


def scale_spec(size: tuple[int, int], kernel: str) -> str:
    return f"scale:w={size[0]},h={size[1]},kernel={kernel}"


@pytest.fixture(scope="module")
def gpu():
    """The CUDA binding, after compiling every scale specialisation of these tests, in parallel."""
    from streamconv.backends.plan import plan_chain, precompile_plans
    from streamconv.gpu.binding import binding

    gpu = binding()
    major, minor = gpu.device(0).compute_capability
    larger = [((360, 640, 3), (1280, 720)), ((360, 640, 3), (213, 120)),
              ((2160, 3840, 3), (1920, 1080))]
    wanted = [(RESIZES, np.uint8), (RESIZES, np.uint16), (larger, np.uint8)]
    plans = [plan_chain(parse_chain([scale_spec(size, kernel)])).kernel_plans(shape, 2, dtype)[0]
             for cases, dtype in wanted for shape, size in cases for kernel in KERNELS]
    precompile_plans(plans, f"sm_{major}{minor}", workers=16)
    return gpu


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("shape, size", RESIZES)
def test_scale_on_the_gpu_equals_the_cpu(rng, gpu, shape, size, kernel, dtype):
    frame = rng.integers(0, np.iinfo(dtype).max + 1, shape, dtype=dtype)
    stages = parse_chain([scale_spec(size, kernel)])
    got = gpu_filter(stages, frame, "reflect101", gpu)
    assert got.shape == (size[1], size[0], shape[2])
    np.testing.assert_array_equal(got, CpuBackend(stages).apply(frame))


@pytest.mark.parametrize("kernel", KERNELS)
def test_scale_of_real_and_4k_frames_equals_the_cpu(rng, gpu, sample_clip, kernel):
    frame = real_frame(sample_clip)
    for size in ((1280, 720), (213, 120)):
        stages = parse_chain([scale_spec(size, kernel)])
        got = gpu_filter(stages, frame, "reflect101", gpu)
        np.testing.assert_array_equal(got, CpuBackend(stages).apply(frame))
    big = rng.integers(0, 256, (2160, 3840, 3), dtype=np.uint8)
    stages = parse_chain([scale_spec((1920, 1080), kernel)])
    got = gpu_filter(stages, big, "reflect101", gpu)
    np.testing.assert_array_equal(got, CpuBackend(stages).apply(big))


@pytest.mark.parametrize("chain", [
    ["crop:x=3,y=5,w=40,h=21", "scale:w=57,h=30"],
    ["custom:taps=1,2,1;2,4,2;1,2,1,normalize=1", "scale:w=-2,h=31,kernel=bicubic", "edge",
     "crop:w=33,h=20"],
    ["scale:w=160,h=100,kernel=bilinear", f"custom:taps={BINOMIAL5},normalize=1",
     "scale:w=47,h=-1"]])
@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
def test_chains_with_2d_filters_on_the_gpu(rng, gpu, chain, dtype):
    """Exact taps before a scale stage (a 1-LSB difference there could grow by the scale's gain);
    edge after it, which is within 1 LSB at 16 bits."""
    frame = rng.integers(0, np.iinfo(dtype).max + 1, (61, 83, 3), dtype=dtype)
    check_against_cpu(parse_chain(chain), frame, "reflect101", gpu)


@pytest.mark.parametrize("bits", [8, 10])
@pytest.mark.parametrize("chain", [["scale:w=96,h=54"],
                                   ["sharpen", "scale:w=200,h=-2,kernel=bicubic"],
                                   ["crop:w=40,h=30", "scale:w=64,h=48,kernel=area"]])
def test_planes_at_a_new_size_equal_the_cpu(rng, gpu, chain, bits):
    layout = YuvLayout(128, 72, bits=bits)
    planes = rng.integers(0, 1 << bits, layout.shape, dtype=layout.dtype)
    stages = parse_chain(chain)
    with CudaBackend(stages) as backend:
        slot = backend.allocate_slots(layout.frame_shape, 1, planes=layout)[0]
        got = poisoned_run(backend, slot, planes)
    cpu = CpuBackend(stages)
    reference = cpu.allocate_slots(layout.frame_shape, 1, planes=layout)[0]
    reference.host_in[:] = planes
    cpu.submit(reference)
    assert got.shape == reference.host_out.shape == slot.out_planes.shape
    np.testing.assert_array_equal(got, reference.host_out)


def test_device_frames_get_the_new_size_and_no_byte_beyond_it(rng, gpu):
    cupy = pytest.importorskip("cupy", reason="CuPy is not installed")
    frame = rng.integers(0, 256, (60, 80, 3), dtype=np.uint8)
    # Up to 3x then down: the ping-pong's first stage makes a frame larger than the output.
    chain = ["scale:w=240,h=180,kernel=bicubic", "box:size=3", "scale:w=50,h=40"]
    want = CpuBackend(parse_chain(chain)).apply(frame)
    with streamconv.Filter(chain, backend="cuda") as on_gpu:
        result = on_gpu(cupy.asarray(frame))
        assert result.shape == (40, 50, 3)
        np.testing.assert_array_equal(cupy.asarray(result).get(), on_gpu(frame))
        padded = cupy.full((48, 64, 3), 0xA5, cupy.uint8)  # the output is a view inside it
        on_gpu.apply_into(padded[:40, :50], cupy.asarray(frame))
        outside = padded.get()
    np.testing.assert_array_equal(outside[:40, :50], want)
    assert np.all(outside[40:] == 0xA5) and np.all(outside[:, 50:] == 0xA5)


def test_streamfilter_on_the_gpu_gives_the_new_size(rng, gpu):
    frames = [rng.integers(0, 256, (72, 128, 3), dtype=np.uint8) for _ in range(5)]
    chain = ["scale:w=64,h=-1,kernel=lanczos3", "crop:w=50,h=30"]
    with streamconv.StreamFilter(chain, ring=2, backend="cuda") as stream:
        results = list(stream.map(frames))
    cpu = CpuBackend(parse_chain(chain))
    for got, frame in zip(results, frames):
        np.testing.assert_array_equal(got, cpu.apply(frame))


def test_run_on_the_gpu_writes_what_the_cpu_writes(cli, gpu, sample_clip, tmp_path):
    outputs = {}
    for backend in ("cpu", "cuda"):
        outputs[backend] = tmp_path / f"{backend}.mp4"
        result = cli("run", str(sample_clip), "--filter", "scale:w=1280,h=720", "--filter",
                     "sharpen", "--backend", backend, "--decoder", "cpu", "--max-frames", "10",
                     "-o", str(outputs[backend]), "--no-progress", "-v")
        assert result.returncode == 0, result.stderr
        assert "planes, converted by the backend" in result.stderr
    decoded = {}
    for backend, path in outputs.items():
        with av.open(str(path)) as container:
            stream = container.streams.video[0]
            assert (stream.width, stream.height) == (1280, 720)
            decoded[backend] = [f.to_ndarray(format="yuv420p") for f in container.decode(stream)]
    assert len(decoded["cuda"]) == 10
    for cpu_frame, gpu_frame in zip(decoded["cpu"], decoded["cuda"]):
        np.testing.assert_array_equal(gpu_frame, cpu_frame)
