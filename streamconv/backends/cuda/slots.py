"""The CUDA backend's slots: page-locked host buffers, pitched device buffers, their copies, a
stream and events.

Per slot: ``host_in`` and ``host_out`` (page-locked, or pageable for benchmarks), two or three
pitched device frames (input, output, and scratch for chains), the flat 4:2:0 planes up and
down where the slot carries planes, a CUDA stream and four events (start, uploaded, computed,
done). Where a stage changes the frame's size, ``host_out`` (and the planes down) take the
chain's output size and each device frame the largest height and width along the chain. Every
function here expects the backend's context to be current.
"""

from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...errors import BackendUnavailableError
from ...gpu.binding import Binding
from ...frames.yuv import YuvLayout
from ...frames.slots import DeviceInput, Slot

PITCH_SLACK = 512
"""Bytes a pitched row may add to its width (allowed for when checking free device memory)."""


@dataclass
class DeviceSlot:
    """The device side of a slot."""

    stream: Any
    buffers: list  # device allocations: input, output, scratch
    pitch: int
    rows: int  # rows each device frame holds: the most along the chain
    upload: Any
    download: Any
    events: dict = field(default_factory=dict)
    # per convolution-layer stage number: its float tensors
    layer_buffers: dict = field(default_factory=dict)
    # yuv420p frames: flat device planes, input and output
    planes: list = field(default_factory=list)


def buffer_shape(shapes) -> tuple[int, int, int]:
    """The (H, W, C) a device frame needs to hold each frame of ``shapes`` (a chain's, in order)."""
    return max(s[0] for s in shapes), max(s[1] for s in shapes), shapes[0][2]


def check_device_memory(gpu: Binding, shape: tuple[int, int, int], count: int,
                        planes: YuvLayout | None, sample_bytes: int, frame_buffers: int,
                        device_name: str, out_planes: YuvLayout | None = None) -> None:
    """Refuse ``count`` slots of (H, W, C) device frames (``shape``: the largest along the chain)
    and of ``planes`` up and ``out_planes`` down, that cannot fit in the free device memory,
    with the figures, before allocating any.

    Raises:
        BackendUnavailableError: they would not fit; the message says what to try.
    """
    height, width, channels = shape
    per_slot = (frame_buffers * height * (width * channels * sample_bytes + PITCH_SLACK)
                + (planes.nbytes + (out_planes or planes).nbytes if planes else 0))
    free, total = gpu.mem_get_info()
    if count * per_slot > free:
        raise BackendUnavailableError(
            f"not enough GPU memory for {count} slot(s) of {width}x{height}x{channels}: "
            f"they need {count * per_slot / 2**20:.0f} MiB, {free / 2**20:.0f} MiB of "
            f"{total / 2**20:.0f} MiB are free on {device_name} (try a smaller --ring)")


def new_slot(gpu: Binding, index: int, shapes, planes: tuple[YuvLayout | None, YuvLayout | None],
             dtype: np.dtype, *, frame_buffers: int, filtered: bool, pinned: bool,
             blocking_sync: bool, layer_buffers: dict, device_input: bool = False) -> Slot:
    """A slot for (H, W, C) frames of ``dtype``, or for 4:2:0 planes (flat host buffers).

    Args:
        shapes: the frame's (H, W, C) entering each stage, then the chain's output
            (``ChainPlan.shapes``): ``host_in`` takes the first, ``host_out`` the last.
        planes: (the input's planes, the output's) or (None, None) for RGB frames.
        frame_buffers: device frames to allocate (2, or 3 for a chain's ping-pong).
        filtered: whether a stage runs (the output is then buffer 1 / plane 1, else the input's).
        pinned: page-locked host buffers (True) or pageable ones.
        blocking_sync: waiting for the done event sleeps (True) or spins.
        layer_buffers: per convolution-layer stage number, its float tensors (made by the caller).
        device_input: (with ``planes``) the source writes the input planes on the device itself
            (``slot.device_input``); ``host_in`` is then an empty placeholder and nothing is
            uploaded.

    Raises:
        BackendUnavailableError: not enough GPU or pinned memory.
    """
    # long: the docstring of its eleven arguments, wrapped within 100 characters
    planes, out_planes = planes
    height, width, channels = buffer_shape(shapes)
    row_bytes = width * channels * dtype.itemsize
    ends = (shapes[0], shapes[-1])  # what goes up, what comes down
    host_shapes = (planes.shape, out_planes.shape) if planes is not None else ends
    host_dtype = planes.dtype if planes is not None else dtype
    if device_input and planes is None:
        raise ValueError("device input needs planes")
    try:
        host_in, host_out = _host_buffers(gpu, host_shapes, host_dtype, pinned=pinned,
                                          device_input=device_input)
        buffers, pitch = _device_frames(gpu, frame_buffers, row_bytes, height)
        device_planes = ([gpu.alloc(layout.nbytes) for layout in (planes, out_planes)]
                         if planes is not None else [])
    except gpu.errors as exc:
        megabytes = 2 * height * row_bytes / 2**20  # about: the device frames are the largest
        raise BackendUnavailableError(
            f"not enough GPU or pinned memory for a slot of {width}x{height}x{channels} "
            f"({megabytes:.1f} MiB host + device): {exc}") from None
    upload, download = _copies(gpu, ends, dtype, planes, host_in, host_out, buffers, pitch,
                               device_planes, filtered=filtered, device_input=device_input)
    events = {name: gpu.event() for name in ("start", "uploaded", "computed")}
    events["done"] = gpu.event(blocking=blocking_sync)
    device = DeviceSlot(stream=gpu.stream(), buffers=buffers, pitch=pitch, rows=height,
                        upload=upload, download=download, events=events,
                        layer_buffers=layer_buffers, planes=device_planes)
    written = (DeviceInput(int(device_planes[0]), planes, gpu.event(timing=False))
               if device_input else None)
    return Slot(index=index, host_in=host_in, host_out=host_out, device=device, planes=planes,
                device_input=written, out_planes=out_planes)


def _device_frames(gpu: Binding, count: int, row_bytes: int, height: int) -> tuple[list, int]:
    """``count`` pitched device frames of ``height`` rows of ``row_bytes``, and their pitch."""
    buffers, pitch = [], 0
    for _ in range(count):
        allocation, pitch = gpu.alloc_pitch(row_bytes, height)
        buffers.append(allocation)
    return buffers, pitch


def _copies(gpu: Binding, shapes, dtype, planes, host_in, host_out, buffers, pitch, device_planes,
            *, filtered: bool, device_input: bool):
    """The slot's (upload, download) of (input shape, output shape) ``shapes``, each called with
    its stream; no upload for device input."""
    (height, width, channels), (out_height, out_width, _) = shapes
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
    out_bytes = out_width * channels * dtype.itemsize
    download = gpu.copy_2d(out_bytes, out_height, src_pitch=pitch, dst_pitch=out_bytes,
                           src_device=int(buffers[1] if filtered else buffers[0]))
    download.set_dst_host(host_out)
    return upload, download


def _host_buffers(gpu: Binding, shapes: tuple, dtype: np.dtype, *, pinned: bool,
                  device_input: bool):
    """(host_in, host_out) of (input, output) ``shapes``: page-locked or pageable; host_in an empty
    placeholder for device input."""
    allocate = gpu.alloc_host if pinned or device_input else np.empty
    host_in = np.empty(0, dtype) if device_input else allocate(shapes[0], dtype)
    return host_in, allocate(shapes[1], dtype)


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
