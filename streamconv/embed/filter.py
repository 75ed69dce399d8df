"""Filtering your own frames: ``Filter`` (one call per frame); ``StreamFilter`` (overlapped with
your loop) is in :mod:`streamconv.embed.streamfilter` and takes the same specs.

Frames are host NumPy arrays of dtype uint8 or uint16: (H, W, 3) colour, (H, W) grey or
(H, W, 4). Per-channel filters do not care about channel order, so OpenCV's BGR frames and
RGB frames give the same result. Any strides are accepted (views, crops), for inputs and for
writable outputs. On the cuda backend, frames may also be CUDA device arrays (CuPy, PyTorch,
PyCUDA, PyNvVideoCodec: anything speaking ``__cuda_array_interface__`` or DLPack): they are filtered
where they are and the result stays on the GPU (:mod:`streamconv.interop`). A uint16 frame is
filtered in 16 bits and saturates at 65535 (scale 10- or 12-bit data up to the full range first if a
filter could push it past its own maximum).

A closed ``Filter`` or ``StreamFilter`` refuses further work with :class:`StreamError` (a
RuntimeError), on every backend.
"""

from __future__ import annotations

import threading
from typing import Any, NoReturn, Sequence, TypeVar, Union

import numpy as np

from ..backends import create_backend, plan_kernels, resolve_backend
from ..backends.protocol import Backend
from ..backends.cpu.temporal import temporal_refusal
from ..frames.borders import DEFAULT_BORDER, check_border
from ..errors import FilterSpecError, FrameDeviceError, FrameFormatError, StreamError
from ..chain.filters import FilterStage, parse_chain, validate_taps
from ..frames.checks import (as_count, as_frame_type, as_hwc, check_frame_fits,
                             check_same_frame)
from ..interop.arrays import DeviceView, as_frame
from ..interop.streams import stream_handle

Spec = Union[str, FilterStage, np.ndarray, Sequence[Union[str, FilterStage]]]
"""What names a filter chain: a spec string, a FilterStage, a list of either, or a 2-D taps
array."""


def to_stages(spec: Spec) -> list[FilterStage]:
    """Turn any accepted filter description into the list of stages it means.

    Args:
        spec: ``"edge"``, ``"gaussian:sigma=2"``, a list of specs (a chain, applied in
            order), a FilterStage, or a (K, K) array of taps (host, any numeric dtype).

    Raises:
        FilterSpecError: a malformed spec or taps, or an unsupported type.
    """
    if isinstance(spec, np.ndarray):
        return [FilterStage("custom", {}, (validate_taps(spec, what="taps array"),))]
    if isinstance(spec, (str, FilterStage)):
        return parse_chain([spec])
    if isinstance(spec, (list, tuple)) and all(isinstance(s, (str, FilterStage)) for s in spec):
        return parse_chain(spec)
    raise FilterSpecError(
        f"expected a filter spec string, a list of specs, a FilterStage or a 2-D taps array, "
        f"got {type(spec).__name__}")


def _opencv_writes_into(frame: np.ndarray) -> bool:
    """Whether OpenCV can write into (H, W, C) host array ``frame`` in place: aligned, each pixel's
    channels and each row's pixels adjacent, rows at a non-negative step. Other views (every
    second column, reversed axes, BGR from RGB, a transposed or Fortran array) make cv2 raise."""
    item = frame.itemsize
    rows, cols, channels = frame.strides
    return (frame.flags.aligned and (frame.shape[2] == 1 or channels == item)
            and cols == frame.shape[2] * item and rows >= frame.shape[1] * cols
            and rows % item == 0)


def _same_view(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two host arrays are views of exactly the same samples (same start, shape,
    strides)."""
    return (a.__array_interface__["data"][0] == b.__array_interface__["data"][0]
            and a.shape == b.shape and a.strides == b.strides)


def check_output(dst: object, src: np.ndarray, *, what: str = "output frame",
                 shape: tuple[int, int, int] | None = None) -> np.ndarray:
    """Check that ``dst`` can take the filtered ``src``, before any work is done.

    Args:
        dst: the host array to write: of ``src``'s shape ((H, W) and (H, W, 1) alike), or
            ``shape`` where the chain changes the size, and of ``src``'s dtype; writable, any
            strides.
        src: the (H, W), (H, W, 3) or (H, W, 4) uint8 or uint16 host array to be filtered.
        shape: the (h, w, C) the chain makes of ``src`` (None: ``src``'s own).

    Returns:
        ``dst`` viewed as (H, W, C).

    Raises:
        FrameTypeError: either is not a NumPy array, a dtype other than uint8/uint16, or dtypes
            differ.
        FrameFormatError: an unsupported shape, shapes differ, or ``dst`` is read-only.
    """
    src3 = as_hwc(src, what="input frame")
    dst3 = as_hwc(dst, what=what)
    check_same_frame(dst3, src3, shape)
    if not dst3.flags.writeable:
        # NumPy's own complaint is a ValueError too; cv2 would raise a bare cv2.error.
        raise FrameFormatError(f"{what} is read-only (flags.writeable is False); pass a writable "
                               "array")
    return dst3


def make_engine(spec: Spec, *, border: str, backend: str, device: int, kernel: str,
                **cuda_options) -> tuple[list[FilterStage], str, str, Backend]:
    """Validate a spec and its options and make the backend that runs it, its kernels planned once.

    Returns:
        (stages, border mode, backend name ``cpu``/``cuda``, the backend).

    Raises:
        FilterSpecError: a bad spec.
        SettingsError: a bad border, backend name or kernel, or ``device`` not an int >= 0.
        BackendUnavailableError: ``cuda`` asked for and unusable.
    """
    device = as_count(device, "device", 0)
    stages = to_stages(spec)
    border = check_border(border)
    name = resolve_backend(backend, device=device)
    plan = plan_kernels(kernel, stages, name)
    return stages, border, name, create_backend(name, stages, border=border, device=device,
                                                kernel=kernel, plan=plan, **cuda_options)


def output_like(engine: Backend, shape: tuple[int, ...]) -> tuple[int, ...]:
    """The shape of ``engine``'s output for a frame of the caller's ``shape``, as the caller
    gave it: (h, w) for (H, W), else (h, w, C)."""
    out = engine.output_shape(tuple(shape) if len(shape) == 3 else (*shape, 1))
    return out[:2] if len(shape) == 2 else out


def device_engine(engine: Backend, where: str) -> Backend:
    """``engine``, for device frames: the cuda backend only.

    Raises:
        FrameDeviceError: another backend (``where`` says which, for the message).
    """
    if not hasattr(engine, "apply_device"):
        raise FrameDeviceError(f"device frames need the cuda backend; {where}")
    return engine


_Closes = TypeVar("_Closes", bound="Closes")


class Closes:
    """What Filter and StreamFilter share: ``closed``, close() as a ``with`` block ends, and the
    refusal to be copied or pickled."""

    _closed: bool

    def _refuse_copy(self, *args: object) -> NoReturn:
        # A copy would share the backend's buffers, CUDA stream and lock with the original, and
        # closing either would free them under the other; a pickle has no GPU context to restore.
        name = type(self).__name__
        raise TypeError(f"a {name} cannot be copied or pickled: it holds its backend's buffers "
                        f"(and on the GPU its context); make a new one with the same spec, e.g. "
                        f"streamconv.{name}(chain.stages, border=chain.border)")

    __copy__ = __deepcopy__ = __reduce__ = __reduce_ex__ = _refuse_copy

    @property
    def closed(self) -> bool:
        """Whether close() was called (further calls raise StreamError)."""
        return self._closed

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self: _Closes) -> _Closes:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Filter(Closes):
    """A filter chain bound to a backend, called on one frame at a time.

    Args:
        spec: a spec string (``"edge"``), a list of specs (a chain), a FilterStage, or a
            (K, K) numeric array of taps.
        border: ``"reflect101"`` (default), ``"replicate"`` or ``"zero"``.
        backend: ``"auto"`` (CUDA when available, else the CPU with a notice), ``"cpu"``,
            ``"cuda"``.
        device: CUDA device number.
        kernel: CUDA kernel variant, ``"auto"`` (default) or a name from
            ``streamconv.backends.plan.VARIANTS``; the CPU backend takes ``separable`` (rank-1
            taps in two passes, within 1 of its reference) and ignores the others.

    Calls from several threads are taken one at a time (a lock: the backend's buffers, stream
    and events are shared by every call). On the CUDA backend it owns page-locked staging
    buffers and device buffers per frame shape, released by ``close()`` (or ``with``); after
    that, calls raise :class:`streamconv.StreamError`. It is not copied or pickled (a TypeError):
    a copy would share those buffers; make a new Filter of the same spec instead.

    A chain with stages across frames (``tmean``, ``conv3d``...) is refused: one frame on its own
    has no frames around it, and a Filter keeps no stream. :class:`streamconv.StreamFilter` takes
    such chains (frames in order, results in order ``delay`` frames later, ``flush()`` at the end).

    Raises:
        FilterSpecError: a bad spec; a chain with stages across frames.
        SettingsError: a bad border, backend name or kernel, or ``device`` not an int >= 0.

    Examples:
        >>> import numpy as np, streamconv
        >>> blur = streamconv.Filter("box:size=3", backend="cpu")
        >>> frame = np.full((4, 5, 3), 90, np.uint8)     # H x W x 3 uint8, host memory
        >>> blur(frame)[0, 0].tolist()
        [90, 90, 90]
        >>> out = np.empty_like(frame)
        >>> blur.apply_into(out, frame)
        >>> blur.close()
    """

    def __init__(self, spec: Spec, *, border: str = DEFAULT_BORDER, backend: str = "auto",
                 device: int = 0, kernel: str = "auto") -> None:
        self._closed = True  # until the engine exists: close() of a half-made Filter does nothing
        self._lock = threading.Lock()
        self.stages, self.border, self.backend, self._engine = make_engine(
            spec, border=border, backend=backend, device=device, kernel=kernel)
        self._fitting: tuple | None = None  # the (shape, dtype) of host frames found to fit
        if self._engine.delay or any(stage.temporal is not None for stage in self.stages):
            self._engine.close()
            raise FilterSpecError(temporal_refusal(self.stages))
        self._closed = False

    def __call__(self, frame: Any, *, out: Any = None, stream: Any = None) -> Any:
        """Filter one frame into a new array (or into ``out``).

        Args:
            frame: (H, W), (H, W, 3) or (H, W, 4) uint8 or uint16: a host array (NumPy, or a host
                tensor speaking DLPack or the array interface), any strides; or a CUDA device array
                (``__cuda_array_interface__`` or DLPack: CuPy, PyTorch, PyCUDA, PyNvVideoCodec), its
                pixels adjacent, rows at any pitch (cuda backend only).
            out: where to write instead, as for :meth:`apply_into` (returned).
            stream: a CUDA stream (an int handle, or a CuPy, PyTorch, PyCUDA or Numba stream) whose
                pending work comes first; for device frames the call then returns at once and the
                result is ready in that stream's order: keep ``frame`` alive (or queue its release
                on that stream, as your library's allocator does) until then, as with any
                asynchronous GPU call. Without it the result is complete on return.

        Returns:
            An array of the frame's dtype and of :meth:`output_shape` (the frame's shape unless a
            ``scale`` or ``crop`` stage changes it). For a host frame, a new C-contiguous NumPy
            array (on the cuda backend in page-locked memory, reused after it is dropped); for a
            device frame, a new
            :class:`~streamconv.interop.device_frame.DeviceFrame` on the same GPU (CuPy and PyTorch
            take it without a copy: ``torch.from_dlpack(result)``, ``cupy.asarray(result)``).

        Raises:
            FrameTypeError: not a uint8 or uint16 array (a TypeError).
            FrameFormatError: an unsupported shape, or a device frame whose pixels are not adjacent.
            FrameDeviceError: a device frame on another GPU, in host memory, or on the cpu backend.
            StreamError: the Filter is closed (a RuntimeError).
        """
        if out is not None:
            self.apply_into(out, frame, stream=stream)
            return out
        with self._lock:
            self._check_open()
            image = as_frame(frame, what="input frame")
            handle = None if stream is None else stream_handle(stream)
            if isinstance(image, DeviceView):
                return device_engine(self._engine,
                                     f"this Filter runs on {self.backend}").apply_device(
                    image, None, handle)
            shape = tuple(getattr(frame, "shape", image.shape))  # (H, W) for a grey frame given so
            self._check_fits(image)
            result = self._engine.apply(image, **self._stream_kwargs(handle))
            return result.reshape(output_like(self._engine, shape))

    def apply_into(self, dst: Any, src: Any, *, stream: Any = None) -> None:
        """Filter ``src`` into ``dst``: arrays of one dtype, uint8 or uint16, ``dst`` of
        :meth:`output_shape` (``src``'s shape without a scale or crop stage), both in host memory or
        both on the GPU (as for :meth:`__call__`). A host ``dst`` may be any writable view (a crop,
        every second pixel, BGR of an RGB array), even one sharing memory with ``src``; the result
        is written through to it and equals ``Filter(...)(src)``. A device ``dst`` may have any row
        pitch, and may be ``src``.

        Args:
            stream: as for :meth:`__call__`.

        Raises:
            FrameTypeError: not arrays, a dtype other than uint8/uint16, or dtypes differ.
            FrameFormatError: an unsupported shape, shapes differ, or ``dst`` is read-only; all
                checked before any work, on every backend.
            FrameDeviceError: one frame on the GPU and the other in host memory, a device frame on
                another GPU or in host memory, or device frames on the cpu backend.
            StreamError: the Filter is closed.
        """
        with self._lock:
            self._check_open()
            source, target = as_frame(src, what="input frame"), as_frame(dst, what="output frame")
            self._apply_into(target, source, None if stream is None else stream_handle(stream))

    def _apply_into(self, target: np.ndarray | DeviceView, source: np.ndarray | DeviceView,
                    handle: int | None) -> None:
        """apply_into() once its frames are read, with the lock held."""
        if isinstance(source, DeviceView) or isinstance(target, DeviceView):
            if not (isinstance(source, DeviceView) and isinstance(target, DeviceView)):
                raise FrameDeviceError("input and output frames must both be device arrays or both "
                                       "host "
                                       "arrays (DeviceFrame.get() copies a result to the host)")
            check_same_frame(target, source, self._engine.output_shape(source.shape))
            device_engine(self._engine,
                          f"this Filter runs on {self.backend}").apply_device(source, target,
                                                                              handle)
            return
        dst3 = check_output(target, source, shape=self._engine.output_shape(as_hwc(source).shape))
        self._check_fits(source)
        engine_kwargs = self._stream_kwargs(handle)
        # OpenCV would read samples it has already written where ``dst`` partly overlaps ``src``
        # (``dst`` being ``src`` itself it handles: in place stays without a copy).
        if _opencv_writes_into(dst3) and \
                (_same_view(dst3, source) or not np.shares_memory(dst3, source)):
            self._engine.apply_into(dst3, source, **engine_kwargs)
            return
        # Overlap, or a layout OpenCV cannot write into: filter into a new array and copy it
        # through.
        result = np.empty(dst3.shape, dst3.dtype)
        self._engine.apply_into(result, source, **engine_kwargs)
        np.copyto(dst3, result)

    def output_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """The shape of the result for a frame of ``shape``: (H, W) or (H, W, C), given as the
        frame's; it differs only where a ``scale`` or ``crop`` stage changes the size.

        Raises:
            FrameFormatError: ``shape`` is no frame's shape (sizes >= 1; 1, 3 or 4 channels), or
                a stage cannot take frames of that size (a crop beyond the frame).

        Examples:
            >>> import streamconv
            >>> with streamconv.Filter(["scale:w=640,h=-2", "edge"], backend="cpu") as chain:
            ...     chain.output_shape((1080, 1920, 3))
            (360, 640, 3)
        """
        sizes = as_frame_type(shape, np.uint8)[0]  # checked as a frame of it would be
        return output_like(self._engine, sizes if len(tuple(shape)) == 3 else sizes[:2])

    def _check_fits(self, image: np.ndarray) -> None:
        """Before the first host frame of each shape and dtype: refuse one the backend cannot
        filter, or whose result and the backend's copies would not fit in host memory
        (:func:`streamconv.frames.checks.check_frame_fits`; about 0.1 ms, so not at every frame)."""
        frame = as_hwc(image, what="input frame")
        if (frame.shape, frame.dtype) != self._fitting:
            copies = self._engine.host_frames()
            check_frame_fits(frame.shape, frame.dtype, 1 + copies,
                             f"the result and {copies} of the backend's")
            self._fitting = (frame.shape, frame.dtype)

    def _check_open(self) -> None:
        if self._closed:
            raise StreamError("Filter is closed; make a new one to filter more frames")

    def _stream_kwargs(self, handle: int | None) -> dict:
        """The engine's keyword for a caller's stream: the cuda backend orders host frames after
        it."""
        return {"stream": handle} if self.backend == "cuda" else {}

    def close(self) -> None:
        """Release the backend's buffers and GPU context; idempotent. Waits for a call in progress
        on another thread."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._engine.close()

    def __repr__(self) -> str:
        chain = " -> ".join(stage.describe() for stage in self.stages) or "identity"
        return f"streamconv.Filter({chain}, border={self.border}, backend={self.backend})"
