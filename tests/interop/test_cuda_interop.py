"""Device arrays in and out on the GPU: CuPy, PyTorch, PyCUDA and DLPack-only frames filtered where
they are, against the CPU backend on fresh random frames with the outputs poisoned first."""

from __future__ import annotations

import gc
import threading
import weakref

import numpy as np
import pytest

import streamconv
from streamconv import nn
from streamconv.backends.cpu.backend import CpuBackend
from streamconv.chain.filters import parse_chain

cupy = pytest.importorskip("cupy", reason="CuPy is not installed")


def _cupy_runs() -> str | None:
    """Why CuPy cannot run its own kernels here (it needs CUDA's headers, which a machine with
    only the driver lacks), or None."""
    try:
        cupy.full((1,), 1, cupy.uint8).get()
    except Exception as exc:  # CuPy's reason, whatever its type
        return f"CuPy cannot compile its own kernels here: {str(exc).splitlines()[0]}"
    return None


_CUPY_REASON = _cupy_runs()
needs_cupy = pytest.mark.skipif(_CUPY_REASON is not None, reason=_CUPY_REASON or "")
pytestmark = [pytest.mark.cuda, needs_cupy]

POISON = 0xA5
SHAPES = [(1, 1, 3), (7, 5, 3), (33, 17, 1), (48, 70, 4), (120, 161, 3), (1080, 1920, 3)]
CHAINS = [["box"], ["gaussian:sigma=1", "sharpen"], ["edge", "box", "emboss"],
          "custom:taps=1,2,1;2,4,2;1,2,1"]


def expected(spec, frame: np.ndarray, border: str = "reflect101") -> np.ndarray:
    stages = parse_chain(spec if isinstance(spec, list) else [spec])
    return CpuBackend(stages, border=border).apply(frame)


def random_frame(rng, shape, dtype=np.uint8) -> np.ndarray:
    return rng.integers(0, np.iinfo(dtype).max + 1, shape, dtype=dtype)


def assert_close(got: np.ndarray, want: np.ndarray) -> None:
    """Within 1 LSB of the CPU backend: the documented bound of one stage."""
    difference = np.abs(got.astype(np.int64) - want.astype(np.int64))
    assert difference.max() <= 1, f"max difference {difference.max()}"


def assert_as_host(got: np.ndarray, gpu, frame: np.ndarray, spec) -> None:
    """Exactly what the same Filter gives for the frame from host memory (the same kernels; the
    host path is held against the CPU oracle elsewhere), and, for one stage, within 1 LSB of the
    CPU backend (a chain's stages each round, so its bound grows with the later stages' gains)."""
    host = gpu(frame)
    np.testing.assert_array_equal(got, host)
    if len(parse_chain(spec if isinstance(spec, list) else [spec])) == 1:
        assert_close(host, expected(spec, frame))


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("spec", CHAINS)
def test_cupy_frames_in_and_out_equal_the_cpu(rng, shape, spec):
    frame = random_frame(rng, shape)
    with streamconv.Filter(spec, backend="cuda") as gpu:
        out = cupy.full(shape, POISON, cupy.uint8)
        gpu.apply_into(out, cupy.asarray(frame))
        assert_as_host(out.get(), gpu, frame, spec)
        result = gpu(cupy.asarray(frame))
        assert isinstance(result, streamconv.DeviceFrame) and result.shape == shape
        assert_as_host(cupy.asarray(result).get(), gpu, frame, spec)


@pytest.mark.parametrize("border", ["reflect101", "replicate", "zero"])
@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
def test_any_row_pitch_and_in_place(rng, border, dtype):
    """Rows of a wider array (pitches that are and are not multiples of 16), and dst == src."""
    for height, width, pad in ((37, 53, 0), (64, 96, 5), (40, 64, 16)):
        wide = random_frame(rng, (height, width + pad, 3), dtype)
        frame = wide[:, :width]
        with streamconv.Filter(["gaussian:sigma=1.5", "laplacian"], border=border,
                               backend="cuda") as gpu:
            device_wide = cupy.asarray(wide)
            out_wide = cupy.full((height, width + 7, 3), POISON, dtype)
            gpu.apply_into(out_wide[:, :width], device_wide[:, :width])
            want = gpu(np.ascontiguousarray(frame))
            np.testing.assert_array_equal(out_wide[:, :width].get(), want)
            assert (out_wide[:, width:].get() == POISON).all()  # nothing written past the frame
            gpu.apply_into(device_wide[:, :width], device_wide[:, :width])  # in place
            np.testing.assert_array_equal(device_wide[:, :width].get(), want)
            assert (device_wide[:, width:].get() == wide[:, width:]).all()


def test_torch_tensors_through_dlpack_and_the_array_interface(rng):
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    frame = random_frame(rng, (90, 130, 3))
    with streamconv.Filter("sharpen", backend="cuda") as gpu:
        tensor = torch.from_numpy(frame).cuda()
        result = gpu(tensor)
        back = torch.from_dlpack(result)  # no copy: the same device memory
        assert back.data_ptr() == result.ptr and back.device.type == "cuda"
        assert_close(back.cpu().numpy(), expected("sharpen", frame))
        out = torch.full_like(tensor, POISON)
        assert gpu(tensor, out=out) is out
        assert_close(out.cpu().numpy(), expected("sharpen", frame))
        # host frames
        for cpu_tensor in (torch.from_numpy(frame), torch.from_numpy(frame).pin_memory()):
            host = gpu(cpu_tensor)
            assert isinstance(host, np.ndarray)
            assert_close(host, expected("sharpen", frame))


# NumPy's refusal, reported
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_result_numpy_refuses_goes_back_to_the_pool(rng):
    """np.from_dlpack takes the capsule and refuses CUDA memory: the DeviceFrame is not kept
    alive."""
    with streamconv.Filter("box", backend="cuda") as gpu:
        result = gpu(cupy.asarray(random_frame(rng, (16, 24, 3))))
        alive = weakref.ref(result)
        with pytest.raises((SystemError, BufferError, RuntimeError)):
            np.from_dlpack(result)
        del result
        gc.collect()
        assert alive() is None


def test_one_filter_called_from_several_threads(rng):
    """Calls from several threads on one Filter (device and host frames) each get their own frame's
    result. One shape, rows of 363 bytes: every call stages its frame in the same work buffers."""
    frames = [random_frame(rng, (90, 121, 3)) for _ in range(8)]
    wants = [expected("box", frame) for frame in frames]
    failures = []

    def work(gpu, index):
        try:
            for round_ in range(25):
                frame, want = frames[(index + round_) % len(frames)], wants[(index + round_) % len(
                    frames)]
                device_out = cupy.full(frame.shape, POISON, cupy.uint8)
                gpu.apply_into(device_out, cupy.asarray(frame))
                for got in (cupy.asarray(gpu(cupy.asarray(frame))).get(), device_out.get(),
                            gpu(frame)):
                    if np.abs(got.astype(int) - want.astype(int)).max() > 1:
                        failures.append((index, round_))
        except Exception as exc:  # reported below, with the thread it happened in
            failures.append((index, repr(exc)))

    with streamconv.Filter("box", backend="cuda") as gpu:
        threads = [threading.Thread(target=work, args=(gpu, index)) for index in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert not failures, failures[:5]


class DlpackOnly:
    """A producer that speaks DLPack alone (no __cuda_array_interface__), over a real torch
    tensor."""

    def __init__(self, tensor) -> None:
        self._tensor = tensor

    def __dlpack__(self, stream=None):
        return self._tensor.__dlpack__(stream=stream)

    def __dlpack_device__(self):
        return self._tensor.__dlpack_device__()


def test_a_dlpack_only_producer_and_torch_streams(rng):
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    frame = random_frame(rng, (64, 80, 4))
    tensor = torch.from_numpy(frame).cuda()
    with streamconv.Filter("box:size=5", backend="cuda") as gpu:
        assert_close(cupy.asarray(gpu(DlpackOnly(tensor))).get(), expected("box:size=5", frame))
        side = torch.cuda.Stream()
        with torch.cuda.stream(side):
            source = tensor.clone()  # queued on ``side``: the filter must come after it
            result = gpu(source, stream=side)
            assert result.stream == side.cuda_stream
            # ordered after the filter on ``side``
            later = torch.from_dlpack(result).to(torch.int32) + 0
        side.synchronize()
        assert_close(later.cpu().numpy().astype(np.uint8), expected("box:size=5", frame))


def test_a_tensor_that_requires_grad_is_a_frame_type_error():
    """PyTorch refuses ``__cuda_array_interface__`` on such a tensor with a RuntimeError of its
    own."""
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    weights = torch.zeros((8, 8, 3), dtype=torch.float32, device="cuda", requires_grad=True)
    with streamconv.Filter("box", backend="cuda") as gpu, pytest.raises(streamconv.FrameTypeError,
                                                                        match="grad"):
        gpu(weights)


def test_stream_filter_and_nn_with_device_arrays(rng):
    frames = [random_frame(rng, (72, 96, 3)) for _ in range(7)]
    with streamconv.StreamFilter(["emboss", "box"], ring=3, backend="cuda") as stream:
        outputs = [cupy.asarray(out).get() for out in stream.map(cupy.asarray(f) for f in frames)]
        stream.submit(cupy.asarray(frames[0]))
        with pytest.raises(streamconv.StreamError, match="mixed"):
            stream.submit(frames[1])
        np.testing.assert_array_equal(cupy.asarray(stream.result()).get(), outputs[0])
    with streamconv.Filter(["emboss", "box"], backend="cuda") as gpu:
        for frame, got in zip(frames, outputs, strict=True):
            np.testing.assert_array_equal(got, gpu(frame))
    x = rng.standard_normal((1, 3, 20, 24)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    y = nn.conv2d(cupy.asarray(x), cupy.asarray(w), padding=1)
    np.testing.assert_allclose(cupy.asarray(y).get(), nn.conv2d_reference(x, w, padding=1),
                               rtol=1e-4, atol=1e-4)


def test_memory_that_is_not_this_gpus_is_refused(rng):
    from streamconv.gpu.binding import binding

    frame = random_frame(rng, (16, 16, 3))

    class Posing:  # a host address offered as device memory
        def __init__(self, array):
            self.array = array
            self.__cuda_array_interface__ = {"shape": array.shape, "typestr": "|u1", "version": 3,
                                             "data": (array.ctypes.data, False), "strides": None}

    with streamconv.Filter("box", backend="cuda") as gpu:
        with pytest.raises(streamconv.FrameDeviceError, match="not CUDA memory"):
            gpu(Posing(frame))
        cuda = binding()
        context = cuda.device(0).retain_primary_context()
        context.push()
        try:
            pinned = cuda.alloc_host(frame.shape, np.uint8)
        finally:
            context.pop()
        with pytest.raises(streamconv.FrameDeviceError, match="page-locked host memory"):
            gpu(Posing(pinned))
        with pytest.raises(streamconv.FrameDeviceError, match="both be device arrays"):
            gpu.apply_into(np.empty_like(frame), cupy.asarray(frame))
        with pytest.raises(streamconv.FrameFormatError, match="adjacent"):
            gpu(cupy.asarray(frame)[:, ::2])
        assert cuda.current_context() in (None, context.handle)
        context.release()
    with streamconv.Filter("box", backend="cpu") as cpu, pytest.raises(streamconv.FrameDeviceError,
                                                                       match="cuda"):
        cpu(cupy.asarray(frame))


def test_host_results_in_leased_page_locked_memory_stay_valid_while_held(rng):
    """More results kept than the pool lends: every one keeps its own values."""
    frames = [random_frame(rng, (240, 320, 3)) for _ in range(40)]
    with streamconv.StreamFilter("sharpen", ring=3, backend="cuda") as stream:
        kept = list(stream.map(frames))
        views = [view.copy() for view in stream.map(frames[:5], copy=False)]
    with streamconv.Filter("sharpen", backend="cuda") as gpu:
        singles = [gpu(frame) for frame in frames]
        out = np.full_like(frames[0], POISON)
        gpu.apply_into(out, frames[3])
    for frame, got, single in zip(frames, kept, singles, strict=True):
        want = expected("sharpen", frame)
        assert_close(got, want)
        assert_close(single, want)
    assert_close(out, expected("sharpen", frames[3]))
    for frame, view in zip(frames, views):
        assert_close(view, expected("sharpen", frame))


def test_host_results_dropped_on_another_thread_are_freed(rng):
    """Results kept past what the pool keeps for reuse, then dropped by a worker thread: the
    extra page-locked buffers are freed there (in their own context: PyCUDA could not free them on
    a thread where it is not current, and leaked them with a warning)."""
    import warnings

    frame = random_frame(rng, (120, 160, 3))
    with streamconv.Filter("sharpen", backend="cuda") as gpu:
        results = [gpu(frame) for _ in range(10)]  # the pool keeps 4 free buffers per size
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            worker = threading.Thread(target=results.clear)
            worker.start()
            worker.join()
            gc.collect()
        assert not [w for w in caught if "could not be cleaned up" in str(w.message)]
        assert_close(gpu(frame), expected("sharpen", frame))


@pytest.mark.parametrize("name, library",
                         [("cupy_interop.py", "cupy"), ("torch_interop.py", "torch")])
def test_the_interop_examples_run(name, library, tmp_path):
    pytest.importorskip(library, reason=f"{library} is not installed")
    from helpers.processes import run_example

    result = run_example(name, "--size", "320x240", "--frames", "12", tmp_path=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "equal to the host path: True" in result.stdout


@pytest.mark.parametrize("dtype, view", [("uint8", "whole"), ("uint8", "crop"),
                                         ("float32", "every second row")])
def test_pytorch_tensors_are_read_as_their_interface_describes_them(dtype, view):
    """torch_device_array (PyTorch's C accessors) gives what __cuda_array_interface__ says."""
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    from streamconv.interop.raw import torch_device_array

    base = torch.zeros((40, 60, 3), dtype=getattr(torch, dtype), device="cuda")
    tensor = {"whole": base, "crop": base[5:30, 7:50], "every second row": base[::2]}[view]
    fast = torch_device_array(tensor)
    interface = tensor.__cuda_array_interface__
    assert fast is not None
    assert fast.address == interface["data"][0] and fast.shape == tuple(interface["shape"])
    assert fast.dtype == np.dtype(interface["typestr"])
    strides = interface["strides"] or tuple(
        np.empty(interface["shape"], np.dtype(interface["typestr"])).strides)
    assert fast.strides == tuple(strides) and fast.device == tensor.device.index
    assert torch_device_array(tensor.cpu()) is None
