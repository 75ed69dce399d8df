"""Reading callers' arrays without a GPU: DLPack tensors read through cuda-core (NumPy is a real
CPU producer), host tensors taken as host frames, device-array descriptions checked, stream
handles, and device frames refused where they cannot run. The GPU side (DLPack out, device
producers and consumers) is tests/interop/test_cuda_interop.py."""

from __future__ import annotations

import ctypes
import gc
import importlib.util
import weakref

import numpy as np
import pytest

import streamconv
from streamconv.gpu import dlpack
from streamconv.interop.arrays import DeviceView, as_frame
from streamconv.interop.streams import stream_handle

needs_cuda_core = pytest.mark.skipif(
    importlib.util.find_spec("cuda.core") is None,
    reason='cuda-core not installed (pip install "streamconv[cuda]")')


class Exported:
    """Host memory offered through DLPack (NumPy's own capsule) under the DLPack device type
    ``kind`` (kDLCUDAHost: page-locked, as a pinned PyTorch CPU tensor says)."""

    def __init__(self, array: np.ndarray, kind: int = dlpack.DEVICE_CPU) -> None:
        self.array, self.kind = array, kind

    def __dlpack__(self, stream=None, **options):
        return self.array.__dlpack__(**options)

    def __dlpack_device__(self):
        return self.kind, 0


@needs_cuda_core
def test_a_dlpack_tensor_is_read_in_place_and_its_producer_held_while_it_is_used(rng):
    base = rng.integers(0, 65536, (6, 9, 4), dtype=np.uint16)
    view = base[1:, ::2]  # strided
    owner = weakref.ref(base)
    tensor = dlpack.read_tensor(view, -1)
    assert tensor.address == view.ctypes.data and tensor.shape == view.shape
    assert tensor.strides_bytes == view.strides and tensor.dtype == np.uint16
    expected = view.copy()
    del base, view
    gc.collect()
    assert owner() is not None  # the DLPack tensor holds its producer's memory
    seen = np.ctypeslib.as_array((ctypes.c_uint16 * expected.size).from_address(tensor.address))
    assert seen[0] == expected[0, 0, 0]
    del tensor, seen
    gc.collect()
    assert owner() is None  # let go once the view is dropped: the producer's deleter ran


@needs_cuda_core
def test_a_dlpack_tensor_of_bools_is_a_frame_type_error():
    with pytest.raises(streamconv.FrameTypeError, match="bool.*uint8 or uint16"):
        dlpack.read_tensor(np.ones((4, 5, 3), bool), -1)


def test_contiguous_strides_are_counted_in_bytes():
    assert dlpack.contiguous_strides((4, 5, 3), 2) == (30, 6, 2)
    assert dlpack.contiguous_strides((), 1) == ()


def test_a_device_frame_on_the_null_stream_names_it_as_the_interface_asks():
    """``__cuda_array_interface__`` v3 reserves stream 0: a frame filtered on the null stream (a
    caller's ``stream=0``) names it 1, the legacy default stream; others keep their handle."""
    from streamconv.interop.device_frame import DeviceFrame, _Held

    def frame(stream):
        return DeviceFrame(_Held(None, 1 << 40, 60), (4, 5, 3), np.uint8, 0, stream, None)

    assert [frame(s).__cuda_array_interface__["stream"]
            for s in (0, 1, 2, 0x7F00, None)] == [1, 1, 2, 0x7F00, None]


class Interface:
    """A device array's description as its producer would give it (no memory behind it here)."""

    def __init__(self, shape, typestr="|u1", strides=None, address=1 << 40, stream=None):
        self.shape = shape
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr,
                                         "data": (address, False),
                                         "version": 3, "strides": strides, "stream": stream}


def test_device_arrays_are_read_as_views_with_their_pitch():
    view = as_frame(Interface((4, 5, 3), strides=(32, 3, 1), stream=7))
    assert isinstance(view, DeviceView)
    assert (view.shape, view.row_pitch, view.frame_shape, view.stream) == ((4, 5, 3), 32, (4, 5, 3),
                                                                           7)
    grey = as_frame(Interface((4, 6), typestr="<u2"))
    assert (grey.shape, grey.row_pitch, grey.frame_shape, grey.dtype) == ((4, 6, 1), 12, (4, 6),
                                                                          np.uint16)
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
    # a pinned PyTorch CPU tensor says kDLCUDAHost
    frame = as_frame(Exported(array, dlpack.DEVICE_CUDA_HOST))
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
    with streamconv.StreamFilter("box",
                                 backend="cpu") as stream, pytest.raises(
                                     streamconv.FrameDeviceError):
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

    assert [stream_handle(s)
            for s in (0, 2, Torch(), Cupy(), Protocol(), Numba())] == [0, 2, 11, 12, 13, 14]
    for bad in (True, -1, "stream", object()):
        with pytest.raises(streamconv.FrameTypeError):
            stream_handle(bad)


def test_reuse_pool_keeps_a_few_buffers_per_size_and_caps_what_is_out():
    from streamconv.interop.reuse import ReusePool

    made, freed = [], []
    pool = ReusePool(lambda nbytes: made.append(bytearray(nbytes)) or made[-1], freed.append,
                     keep=1, max_taken=2)
    first, second = pool.take(8), pool.take(8)
    assert pool.take(8) is None  # two out: the cap
    pool.give_back(first, 8)
    pool.give_back(second, 8)  # one of size 8 is kept already: this one is freed
    assert len(freed) == 1 and freed[0] is second and pool.take(8) is first and pool.allocated == 2
    pool.give_back(first, 8)
    pool.close()
    assert len(freed) == 2 and freed[1] is first and pool.take(8) is None
