"""The CUDA backend's slots: page-locked host buffers, pitched device buffers, their copies, a stream and events.

Per slot: ``host_in`` and ``host_out`` (page-locked, or pageable for benchmarks), two or three
pitched device frames (input, output, and scratch for chains), the flat 4:2:0 planes up and
down where the slot carries planes, a CUDA stream and four events (start, uploaded, computed,
done). Every function here expects the backend's context to be current.
"""

from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import BackendUnavailableError
from ..gpu.binding import Binding
from ..io.yuv import YuvLayout
from ..slots import DeviceInput, Slot

PITCH_SLACK = 512
"""Bytes a pitched row may add to its width (allowed for when checking free device memory)."""


@dataclass
class DeviceSlot:
    """The device side of a slot."""

    stream: Any
    buffers: list  # device allocations: input, output, scratch
    pitch: int
    upload: Any
    download: Any
    events: dict = field(default_factory=dict)
    layer_buffers: dict = field(default_factory=dict)  # per convolution-layer stage number: its float tensors
    planes: list = field(default_factory=list)  # yuv420p frames: flat device planes, input and output


def check_device_memory(gpu: Binding, shape: tuple[int, int, int], count: int,
                        planes: YuvLayout | None, sample_bytes: int, frame_buffers: int,
                        device_name: str) -> None:
    """Refuse ``count`` slots of (H, W, C) frames that cannot fit in the free device memory,
    with the figures, before allocating any.

    Raises:
        BackendUnavailableError: they would not fit; the message says what to try.
    """
    height, width, channels = shape
    per_slot = (frame_buffers * height * (width * channels * sample_bytes + PITCH_SLACK)
                + (2 * planes.nbytes if planes else 0))
    free, total = gpu.mem_get_info()
    if count * per_slot > free:
        raise BackendUnavailableError(
            f"not enough GPU memory for {count} slot(s) of {width}x{height}x{channels}: "
            f"they need {count * per_slot / 2**20:.0f} MiB, {free / 2**20:.0f} MiB of "
            f"{total / 2**20:.0f} MiB are free on {device_name} (try a smaller --ring)")


def new_slot(gpu: Binding, index: int, shape: tuple[int, int, int], planes: YuvLayout | None,
             dtype: np.dtype, *, frame_buffers: int, filtered: bool, pinned: bool,
             blocking_sync: bool, layer_buffers: dict, device_input: bool = False) -> Slot:
    """A slot for (H, W, C) frames of ``dtype``, or for ``planes`` (flat 4:2:0 host buffers).

    Args:
        frame_buffers: device frames to allocate (2, or 3 for a chain's ping-pong).
        filtered: whether a stage runs (the output is then buffer 1 / plane 1, else the input's).
        pinned: page-locked host buffers (True) or pageable ones.
        blocking_sync: waiting for the done event sleeps (True) or spins.
        layer_buffers: per convolution-layer stage number, its float tensors (made by the caller).
        device_input: (with ``planes``) the source writes the input planes on the device itself
            (``slot.device_input``); ``host_in`` is then an empty placeholder and nothing is uploaded.

    Raises:
        BackendUnavailableError: not enough GPU or pinned memory.
    """
    height, width, channels = shape
    row_bytes = width * channels * dtype.itemsize
    host_shape = planes.shape if planes is not None else shape
    host_dtype = planes.dtype if planes is not None else dtype
    if device_input and planes is None:
        raise ValueError("device input needs planes")
    try:
        host_in, host_out = _host_buffers(gpu, host_shape, host_dtype, pinned=pinned,
                                          device_input=device_input)
        buffers, pitch = [], 0
        for _ in range(frame_buffers):
            allocation, pitch = gpu.alloc_pitch(row_bytes, height)
            buffers.append(allocation)
        device_planes = [gpu.alloc(planes.nbytes) for _ in range(2)] if planes is not None else []
    except gpu.errors as exc:
        megabytes = 2 * height * row_bytes / 2**20
        raise BackendUnavailableError(
            f"not enough GPU or pinned memory for a slot of {width}x{height}x{channels} "
            f"({megabytes:.1f} MiB host + device): {exc}") from None
    upload, download = _copies(gpu, shape, dtype, planes, host_in, host_out, buffers, pitch,
                               device_planes, filtered=filtered, device_input=device_input)
    events = {name: gpu.event() for name in ("start", "uploaded", "computed")}
    events["done"] = gpu.event(blocking=blocking_sync)
    device = DeviceSlot(stream=gpu.stream(), buffers=buffers, pitch=pitch, upload=upload,
                        download=download, events=events, layer_buffers=layer_buffers, planes=device_planes)
    written = (DeviceInput(int(device_planes[0]), planes, gpu.event(timing=False))
               if device_input else None)
    return Slot(index=index, host_in=host_in, host_out=host_out, device=device, planes=planes,
                device_input=written)


def _copies(gpu: Binding, shape, dtype, planes, host_in, host_out, buffers, pitch, device_planes, *,
            filtered: bool, device_input: bool):
    """The slot's (upload, download), each called with its stream; no upload for device input."""
    height, width, channels = shape
    row_bytes = width * channels * dtype.itemsize
    if planes is not None:
        # Planes go up and down whole; the last stage's RGB is converted into device_planes[1].
        planes_out = device_planes[1] if filtered else device_planes[0]
        upload = (None if device_input
                  else functools.partial(gpu.copy_htod, int(device_planes[0]), host_in))
        return upload, functools.partial(gpu.copy_dtoh, host_out, int(planes_out))
    upload = gpu.copy_2d(row_bytes, height, src_pitch=row_bytes, dst_pitch=pitch,
                         dst_device=int(buffers[0]))
    upload.set_src_host(host_in)
    download = gpu.copy_2d(row_bytes, height, src_pitch=pitch, dst_pitch=row_bytes,
                           src_device=int(buffers[1] if filtered else buffers[0]))
    download.set_dst_host(host_out)
    return upload, download


def _host_buffers(gpu: Binding, shape: tuple, dtype: np.dtype, *, pinned: bool, device_input: bool):
    """(host_in, host_out): page-locked or pageable; host_in an empty placeholder for device input."""
    allocate = gpu.alloc_host if pinned or device_input else np.empty
    host_in = np.empty(0, dtype) if device_input else allocate(shape, dtype)
    return host_in, allocate(shape, dtype)


def free_slot(gpu: Binding, slot: Slot) -> None:
    """Wait for the slot's stream, then free its host and device buffers."""
    state: DeviceSlot = slot.device
    with contextlib.suppress(*gpu.errors):
        state.stream.synchronize()
    for allocation in (*state.buffers, *state.planes):
        allocation.free()
    for buffers in state.layer_buffers.values():
        buffers.free()
    state.layer_buffers.clear()
    for host in (slot.host_in, slot.host_out):
        base = getattr(host, "base", None)
        if base is not None and hasattr(base, "free"):
            base.free()
    slot.device = None
