"""The CUDA backend's path for frames already in device memory: no host buffer, no upload.

The chain reads the caller's frame where it is and writes the caller's output (or a pooled
:class:`~streamconv.interop.device_frame.DeviceFrame`) where it is, when both suit the kernels
(16-byte aligned rows: address and pitch); otherwise one device-to-device copy moves the frame
into (or out of) a pitched work buffer. The work is queued on the runner's own stream (a
blocking stream, so it is ordered with the legacy default stream that CuPy and PyTorch use by
default). With ``stream=``, it first waits for the caller's stream, and the caller's stream then
waits for it: nothing blocks the host. Without, the call returns once the output is complete.
"""

from __future__ import annotations

from ...errors import FrameDeviceError, FrameFormatError
from ...gpu import handles
from ...interop.arrays import DeviceView
from ...interop.device_frame import DeviceFrame, DeviceFramePool
from .slots import buffer_shape

_ALIGNMENT = 16
# the legacy default stream: the runner's blocking stream is ordered with it
_IMPLICIT_STREAMS = (0, 1)


def kernels_take(address: int, pitch: int) -> bool:
    """Whether the kernels can read or write a frame in place (16-byte aligned address and
    pitch)."""
    return address % _ALIGNMENT == 0 and pitch % _ALIGNMENT == 0


class DeviceFrameRunner:
    """Runs a CudaBackend's chain on device frames. Every method expects the backend's context
    current.

    Args:
        backend: the :class:`streamconv.backends.cuda.backend.CudaBackend` whose stages and context
            it uses.
    """

    def __init__(self, backend) -> None:
        gpu = backend.gpu
        self._backend = backend
        self._gpu = gpu
        self.stream = gpu.stream()
        self._entered = handles.Event()
        # Spun on: a device frame's wait is microseconds, a sleeping wake-up about 0.1 ms.
        self._events = [handles.Event() for _ in range(16)]
        self._event_index = 0
        self.pool = DeviceFramePool(gpu, backend.device_number)
        # (shape, dtype) -> [(allocation, pitch)], made on demand
        self._work: dict[tuple, list] = {}
        # (shape, dtype) -> convolution-layer buffers per stage number
        self._layers: dict[tuple, dict] = {}
        self.copies = 0  # device-to-device copies made because a frame did not suit the kernels

    def check(self, view: DeviceView, what: str) -> None:
        """Refuse a frame that is not device memory of this backend's GPU.

        Raises:
            FrameDeviceError: host memory (pageable, or page-locked posing as device memory), or
                memory of another GPU.
        """
        kind, ordinal = handles.pointer_memory(view.address)
        if kind is None:
            raise FrameDeviceError(f"{what}: address {view.address:#x} is not CUDA memory (host "
                                   "memory "
                                   "offered as a device array?); pass a host array or a device "
                                   "array")
        if kind == handles.MEMORY_HOST:
            raise FrameDeviceError(f"{what}: address {view.address:#x} is page-locked host memory, "
                                   "not device "
                                   "memory; pass it as a host array (numpy) instead")
        device = self._backend.device_number
        if ordinal is not None and ordinal != device:
            raise FrameDeviceError(f"{what} is on cuda:{ordinal}; this filter runs on "
                                   f"cuda:{device} "
                                   f"(make it with device={ordinal}, or move the frame)")

    def run(self, src: DeviceView, dst: DeviceView | None, caller_stream: int | None, *,
            wait: bool = True) -> DeviceFrame | None:
        """Filter ``src`` into ``dst`` (None: into a new DeviceFrame, which is returned).

        Args:
            src: the input frame, (H, W, C) uint8 or uint16 in this GPU's memory.
            dst: the output, of the chain's output shape (``src``'s unless a stage changes the
                size) and ``src``'s dtype, writable; may be ``src`` itself.
            caller_stream: the caller's stream handle: the work waits for its pending work and it
                waits for the work; the host does not wait. None: see ``wait``.
            wait: (without ``caller_stream``) return once the output is complete; False: at once
                (``DeviceFrame.synchronize()`` waits for it).
        """
        self.check(src, "input frame")
        if dst is not None:
            self.check(dst, "output frame")
            if dst.readonly:
                raise FrameFormatError("output frame is read-only (its producer says so)")
        stream = self.stream
        for producer in {caller_stream, src.stream, dst.stream if dst is not None
                         else None} - {None, *_IMPLICIT_STREAMS}:
            self._entered.record(producer)
            handles.wait_event(stream.handle, self._entered.handle)
        done = self._next_event()
        frame = None
        if dst is None:
            shape = self._backend.output_shape(src.shape)
            frame_shape = shape[:2] if len(src.frame_shape) == 2 else shape
            frame = self.pool.lease(frame_shape, src.dtype, stream=caller_stream, done_event=done)
            height, width, channels = shape
            row_bytes = width * channels * src.dtype.itemsize
            dst = DeviceView(frame.ptr, shape, frame_shape, src.dtype, row_bytes, None, None, False,
                             frame)
        self._filter(src, dst)
        done.record(stream.handle)
        if caller_stream is not None:
            handles.wait_event(caller_stream, done.handle)
        elif wait:
            done.synchronize()
        return frame

    def _next_event(self) -> handles.Event:
        """The next of a ring of events (made once): recording one again for a later frame only
        makes
        a frame's waiters wait for that later work too, on the same stream."""
        self._event_index = (self._event_index + 1) % len(self._events)
        return self._events[self._event_index]

    def _filter(self, src: DeviceView, dst: DeviceView) -> None:
        """Queue the copies (where needed) and the chain on the runner's stream."""
        key = (src.shape, src.dtype)
        work = self._work.setdefault(key, [])
        used: list[int] = []

        def work_buffer() -> tuple[int, int]:
            index = len(used)
            while len(work) <= index:  # each large enough for every frame along the chain
                height, width, channels = buffer_shape(self._backend.plan.shapes(src.shape))
                row_bytes = width * channels * src.dtype.itemsize
                allocation, pitch = self._gpu.alloc_pitch(row_bytes, height)
                work.append((allocation, pitch))
            used.append(index)
            return int(work[index][0]), work[index][1]

        source = (src.address, src.row_pitch)
        if not kernels_take(*source):
            source = work_buffer()
            self._copy(src.address, src.row_pitch, *source, src)
        in_place = (kernels_take(dst.address, dst.row_pitch) and not dst.overlaps(src)
                    and self._fits_every_frame_it_gets(src.shape, dst.shape))
        final = (dst.address, dst.row_pitch) if in_place else work_buffer()
        staged = len(self._backend.stages_for(src.shape, src.dtype))
        spare = work_buffer() if staged > 1 else None
        written = self._backend.launch_chain(self.stream, src.shape, src.dtype, source, final,
                                             spare, self._layer_buffers(key))
        if written != dst.address:
            self._copy(written, final[1] if staged else source[1], dst.address, dst.row_pitch, dst)

    def _fits_every_frame_it_gets(self, shape: tuple, out_shape: tuple) -> bool:
        """Whether a frame of ``out_shape`` can take every frame the chain's ping-pong writes to
        the final buffer (the last stage's, the third last's, ...) from chain input ``shape``."""
        shapes = self._backend.plan.shapes(shape)
        return all(frame[0] <= out_shape[0] and frame[1] <= out_shape[1]
                   for frame in shapes[-1:0:-2])

    def _copy(self, src_address: int, src_pitch: int, dst_address: int, dst_pitch: int,
              frame: DeviceView) -> None:
        """A device-to-device copy of one frame's rows on the runner's stream."""
        height, width, channels = frame.shape
        copy = self._gpu.copy_2d(width * channels * frame.dtype.itemsize, height,
                                 src_pitch=src_pitch, dst_pitch=dst_pitch, src_device=src_address,
                                 dst_device=dst_address)
        copy(self.stream)
        self.copies += 1

    def _layer_buffers(self, key: tuple) -> dict:
        """The convolution-layer stages' buffers for frames of ``key``, made once."""
        if key not in self._layers:
            stages = self._backend.stages_for(*key)
            self._layers[key] = {number: stage.gpu_layer.allocate()
                                 for number, stage in enumerate(stages)
                                 if stage.gpu_layer is not None}
        return self._layers[key]

    def close(self) -> None:
        """Wait for queued work and free the work buffers and the pool's spare frames."""
        self.stream.synchronize()
        for buffers in self._work.values():
            for allocation, _ in buffers:
                allocation.free()
        for buffers in self._layers.values():
            for layer in buffers.values():
                layer.free()
        self._work.clear()
        self._layers.clear()
        self.pool.close()
