"""Frames that live on the GPU already: arrays of CuPy, PyTorch, PyCUDA, PyNvVideoCodec or any
library that speaks ``__cuda_array_interface__`` or DLPack, and the caller's CUDA streams.

:mod:`.raw` (a device array as its producer describes it: ``__cuda_array_interface__``, or
DLPack through :mod:`streamconv.gpu.dlpack`), :mod:`.arrays` (a caller's array read as a host
frame or a :class:`~.arrays.DeviceView`, and checked), :mod:`.streams` (a caller's stream as a
handle), :mod:`.device_frame` (the device arrays streamconv returns, from a pool). Nothing is
imported here.

Also here: :mod:`.pinned_pool` (page-locked host frames that go back to a pool when dropped: results
the GPU downloads); :mod:`.reuse` (buffers reused by size: what the device-frame and page-locked
host-frame pools share).
"""
