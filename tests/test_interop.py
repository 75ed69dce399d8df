"""Reading callers' arrays without a GPU: DLPack capsules both ways (NumPy is a real CPU
producer and consumer), host tensors taken as host frames, device-array descriptions checked,
stream handles, and device frames refused where they cannot run. The GPU side is
tests/test_cuda_interop.py."""

from __future__ import annotations

import ctypes
import gc
import weakref

import numpy as np
import pytest

import streamconv
from streamconv.interop import dlpack
from streamconv.interop.arrays import DeviceView, as_frame
from streamconv.interop.libcuda import stream_handle


class Exported:
    """Host memory offered through DLPack by streamconv's exporter (as a DeviceFrame offers device
    memory), under the DLPack device type ``kind`` (kDLCUDAHost: page-locked, as a pinned tensor says)."""

    def __init__(self, array: np.ndarray, kind: int = dlpack.DEVICE_CPU) -> None:
        self.array, self.kind = array, kind

    def __dlpack__(self, stream=None, **_):
        return dlpack.export_capsule(self, self.array.ctypes.data, self.array.shape, self.array.strides,
                                     self.array.dtype, self.kind, 0)

    def __dlpack_device__(self):
        return self.kind, 0


def test_exported_capsules_are_taken_without_a_copy_and_keep_their_owner_alive(rng):
    source = rng.integers(0, 65536, (5, 7, 3), dtype=np.uint16)[:, ::2]  # strided
    exported = Exported(source)
    owner = weakref.ref(exported)
    taken = np.from_dlpack(exported)
    del exported
    gc.collect()
    assert owner() is not None  # the consumer's array holds it
    assert np.shares_memory(taken, source) and taken.strides == source.strides
    np.testing.assert_array_equal(taken, source)
    del taken
    gc.collect()
    assert owner() is None  # the deleter let it go
    unused = Exported(source).__dlpack__()
    del unused  # never consumed: the capsule deletes its tensor
    gc.collect()
    assert not dlpack._EXPORTED


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # NumPy's error, reported
def test_a_capsule_a_consumer_refuses_still_lets_its_owner_go(rng):
    """NumPy takes the capsule, refuses CUDA memory and drops it with its error pending: the
    exported tensor and its owner (a pooled DeviceFrame, on the GPU) must still be released."""
    array = rng.integers(0, 256, (4, 5, 3), dtype=np.uint8)
    exported = Exported(array, dlpack.DEVICE_CUDA)  # host memory posing as CUDA memory
    owner = weakref.ref(exported)
    with pytest.raises((SystemError, BufferError, RuntimeError)):  # NumPy's own error is lost: SystemError
        np.from_dlpack(exported)
    del exported
    gc.collect()
    assert owner() is None and not dlpack._EXPORTED


def test_imported_capsules_describe_the_producers_array(rng):
    array = rng.integers(0, 256, (6, 9, 4), dtype=np.uint8)
    view = array[1:, 2:]
    capsule = view.__dlpack__()
    tensor = dlpack.import_capsule(capsule)
    assert tensor.address == view.ctypes.data and tensor.shape == view.shape
    assert tensor.strides_bytes == view.strides and tensor.dtype == np.uint8
    assert tensor.device_type == dlpack.DEVICE_CPU
    with pytest.raises(streamconv.FrameTypeError, match="unused"):
        dlpack.import_capsule(capsule)  # marked used: taken once only
    tensor.close()
    tensor.close()


def test_a_dlpack_tensor_of_bools_is_a_frame_type_error():
    with pytest.raises(streamconv.FrameTypeError, match="bool.*uint8 or uint16"):
        dlpack.import_capsule(np.ones((4, 5, 3), bool).__dlpack__())


def test_a_device_frame_on_the_null_stream_names_it_as_the_interface_asks():
    """``__cuda_array_interface__`` v3 reserves stream 0: a frame filtered on the null stream (a
    caller's ``stream=0``) names it 1, the legacy default stream; others keep their handle."""
    from streamconv.interop.device_frame import DeviceFrame, _Held

    def frame(stream):
        return DeviceFrame(_Held(None, 1 << 40, 60), (4, 5, 3), np.uint8, 0, stream, None)

    assert [frame(s).__cuda_array_interface__["stream"] for s in (0, 1, 2, 0x7F00, None)] == [1, 1, 2, 0x7F00, None]


class Interface:
    """A device array's description as its producer would give it (no memory behind it here)."""

    def __init__(self, shape, typestr="|u1", strides=None, address=1 << 40, stream=None):
        self.shape = shape
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "data": (address, False),
                                         "version": 3, "strides": strides, "stream": stream}


def test_device_arrays_are_read_as_views_with_their_pitch():
    view = as_frame(Interface((4, 5, 3), strides=(32, 3, 1), stream=7))
    assert isinstance(view, DeviceView)
    assert (view.shape, view.row_pitch, view.frame_shape, view.stream) == ((4, 5, 3), 32, (4, 5, 3), 7)
    grey = as_frame(Interface((4, 6), typestr="<u2"))
    assert (grey.shape, grey.row_pitch, grey.frame_shape, grey.dtype) == ((4, 6, 1), 12, (4, 6), np.uint16)
    assert grey.overlaps(as_frame(Interface((2, 2), address=(1 << 40) + 40)))
    assert not grey.overlaps(as_frame(Interface((2, 2), address=(1 << 40) + 48)))
    with pytest.raises(streamconv.FrameFormatError, match="adjacent"):
        as_frame(Interface((4, 5, 3), strides=(30, 6, 1)))  # every second pixel
    with pytest.raises(streamconv.FrameFormatError, match="adjacent"):
        as_frame(Interface((4, 5, 3), strides=(15, 3, -1)))
    with pytest.raises(streamconv.FrameTypeError, match="float32"):
        as_frame(Interface((4, 5, 3), typestr="<f4"))
    with pytest.raises(streamconv.FrameFormatError, match="shape"):
        as_frame(Interface((2, 4, 5, 3)))


def test_host_tensors_are_host_frames(rng):
    array = rng.integers(0, 256, (3, 4, 3), dtype=np.uint8)

    class ArrayLike:  # e.g. a PyTorch CPU tensor: NumPy's array interface
        __array_interface__ = array.__array_interface__

    frame = as_frame(ArrayLike())
    assert isinstance(frame, np.ndarray) and np.shares_memory(frame, array)
    frame = as_frame(Exported(array))  # a DLPack producer on the CPU
    assert isinstance(frame, np.ndarray) and np.shares_memory(frame, array)
    frame = as_frame(Exported(array, dlpack.DEVICE_CUDA_HOST))  # a pinned PyTorch CPU tensor says kDLCUDAHost
    assert isinstance(frame, np.ndarray) and np.shares_memory(frame, array)
    with streamconv.Filter("box", backend="cpu") as cpu:
        np.testing.assert_array_equal(cpu(Exported(array)), cpu(array))


def test_device_frames_need_the_cuda_backend():
    frame = Interface((8, 8, 3))
    with streamconv.Filter("box", backend="cpu") as cpu:
        with pytest.raises(streamconv.FrameDeviceError, match="cuda backend"):
            cpu(frame)
        with pytest.raises(streamconv.FrameDeviceError, match="both"):
            cpu.apply_into(np.zeros((8, 8, 3), np.uint8), frame)
    with streamconv.StreamFilter("box", backend="cpu") as stream, pytest.raises(streamconv.FrameDeviceError):
        stream.submit(frame)


def test_stream_handles_from_every_library_shape():
    class Torch:
        cuda_stream = 11

    class Cupy:
        ptr = 12

    class Protocol:
        def __cuda_stream__(self):
            return (0, 13)

    class Numba:
        handle = ctypes.c_void_p(14)

    assert [stream_handle(s) for s in (0, 2, Torch(), Cupy(), Protocol(), Numba())] == [0, 2, 11, 12, 13, 14]
    for bad in (True, -1, "stream", object()):
        with pytest.raises(streamconv.FrameTypeError):
            stream_handle(bad)


def test_reuse_pool_keeps_a_few_buffers_per_size_and_caps_what_is_out():
    from streamconv.interop.reuse import ReusePool

    made, freed = [], []
    pool = ReusePool(lambda nbytes: made.append(bytearray(nbytes)) or made[-1], freed.append, keep=1, max_taken=2)
    first, second = pool.take(8), pool.take(8)
    assert pool.take(8) is None  # two out: the cap
    pool.give_back(first, 8)
    pool.give_back(second, 8)  # one of size 8 is kept already: this one is freed
    assert len(freed) == 1 and freed[0] is second and pool.take(8) is first and pool.allocated == 2
    pool.give_back(first, 8)
    pool.close()
    assert len(freed) == 2 and freed[1] is first and pool.take(8) is None
