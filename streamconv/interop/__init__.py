"""Frames that live on the GPU already: arrays of CuPy, PyTorch, PyCUDA, PyNvVideoCodec or any
library that speaks ``__cuda_array_interface__`` or DLPack, and the caller's CUDA streams.

:mod:`.libcuda` (the few driver calls PyCUDA does not expose for foreign handles),
:mod:`.dlpack` (DLPack capsules, in and out), :mod:`.arrays` (a caller's array read as a host
frame or a :class:`~.arrays.DeviceView`, and checked), :mod:`.device_frame` (the device arrays
streamconv returns, from a pool). Nothing is imported here.
"""
