"""The slot protocol every backend implements and both ring drivers (Pipeline, StreamFilter) use.

A backend filters frames that wait in *slots* (:class:`streamconv.frames.slots.Slot`): host buffers
the caller fills and reads, plus whatever the backend keeps per slot (device buffers, a CUDA
stream, events). Work is queued with :meth:`Backend.submit` and finished in submission order
by the caller (:class:`streamconv.run.inflight.InFlight` keeps that order), so a GPU backend can
overlap one frame's upload with another's kernels and a third's download. ``apply_into`` and
``apply`` filter one frame synchronously.

Every method is called from one thread: a CUDA backend's context belongs to the thread that
created it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, Sequence, runtime_checkable

import numpy as np

from ..frames.checks import as_hwc

if TYPE_CHECKING:
    from ..frames.yuv import YuvLayout
    from ..frames.slots import Slot


@runtime_checkable
class Backend(Protocol):
    """A filter chain bound to a compute device, driven through slots.

    Backends subclass it (``class CpuBackend(Backend)``) to inherit :meth:`apply` and the
    context-manager methods; anything with the other methods satisfies it as a protocol.

    Attributes:
        name: ``"cpu"`` or ``"cuda"``, as ``--backend`` spells it.
        delay: frames a submitted frame's output comes after it: 0, or for a chain with stages
            across frames, the sum of their look-aheads (the first ``delay`` submits then carry
            no output, ``slot.has_output`` False, and :meth:`flush` puts out the last ones).
    """

    name: str
    delay: int = 0

    def describe(self) -> str:
        """One line naming the backend and its device, for logs and ``RunStats.backend``."""
        ...

    def output_shape(self, shape: tuple[int, int, int]) -> tuple[int, int, int]:
        """The (h, w, C) the chain makes of (H, W, C) frames: ``shape`` unless a stage changes
        the size (``scale``, ``crop``).

        Raises:
            FrameFormatError: a stage cannot take frames of that size (a crop beyond the frame).
        """
        ...

    def allocate_slots(self, shape: tuple[int, int, int], count: int, *,
                       planes: YuvLayout | None = None,
                       dtype: np.dtype | type = np.uint8) -> list[Slot]:
        """Make ``count`` slots for frames of (H, W, C) ``shape`` and sample ``dtype`` (uint8
        or uint16).

        Each slot's ``host_in`` and ``host_out`` are host arrays (page-locked on CUDA) of
        ``dtype``, ``shape`` and :meth:`output_shape` (``slot.out_shape``), or, with ``planes``,
        flat 4:2:0 planes of ``planes.dtype`` (``planes.shape``, and at the output's size
        ``slot.out_planes``) that the backend converts to RGB of ``planes.frame_dtype``
        before the chain and back after it. Device memory, streams and events go in
        ``slot.device``. The backend keeps the slots until :meth:`release_slots` or :meth:`close`.

        Raises:
            BackendUnavailableError: not enough host or device memory, before any is taken.
            FrameTypeError, SettingsError: a chain that cannot run on ``dtype`` frames.
        """
        ...

    def release_slots(self, slots: Sequence[Slot]) -> None:
        """Free the buffers of slots no longer used; their frames must have been waited for."""
        ...

    def submit(self, slot: Slot) -> None:
        """Queue the slot's frame: ``host_in`` through the chain into ``host_out``.

        May return before the work is done (CUDA: upload, kernels and download are queued on
        the slot's stream); ``host_in`` must stay unchanged and ``host_out`` unread until
        :meth:`wait`. May record stage times in ``slot.times`` (the CPU records ``kernel``).

        Raises:
            GpuFaultError: the device failed while queueing.
        """
        ...

    def is_done(self, slot: Slot) -> bool:
        """Whether the slot's frame is in ``host_out`` already; never blocks."""
        ...

    def wait(self, slot: Slot) -> None:
        """Block until the slot's frame is in ``host_out`` and record its stage times in
        ``slot.times`` (CUDA: ``upload``, ``kernel``, ``download`` in seconds).

        Raises:
            GpuFaultError: the device failed on this frame or (asynchronously) on a later one.
        """
        ...

    def apply_into(self, dst: np.ndarray, src: np.ndarray) -> None:
        """Filter ``src`` into ``dst`` now: host arrays, (H, W, C) or (H, W), of one dtype, uint8
        or uint16, any strides, ``dst`` of :meth:`output_shape` (``src``'s shape without a
        geometry stage). ``dst`` may be ``src`` but not otherwise share its
        memory (OpenCV would read samples already written): :meth:`streamconv.Filter.apply_into`
        filters such a pair through a new array.

        Raises:
            FrameTypeError, FrameFormatError: arrays of another dtype or shape, or that differ.
        """
        ...

    def host_frames(self) -> int:
        """How many host buffers of a frame's size one :meth:`apply_into` may make besides
        ``dst``: what :class:`streamconv.Filter` checks against the host memory available before
        the first frame of a size. Here 2, the input and output of a slot kept for host frames
        of each size (the cuda backend's, page-locked); the cpu backend counts its own."""
        return 2

    def close(self) -> None:
        """Wait for work in flight and free every slot, buffer and device context; idempotent."""
        ...

    def flush(self, slot: Slot) -> bool:
        """The stream has ended: queue the next output still owed into ``slot`` (a free slot; its
        input is not read) and return True, or return False when none is owed, the next submit
        then starting a new stream. Only a chain with stages across frames owes any."""
        return False

    def end_stream(self) -> None:
        """Forget the frames of the stream so far (their outputs are not wanted): the next submit
        starts a new stream. Nothing to do without stages across frames."""
        return None

    def apply(self, src: np.ndarray) -> np.ndarray:
        """Filter ``src`` (a host array, as for :meth:`apply_into`) into a new host array of its
        dtype and :meth:`output_shape` ((h, w) for an (H, W) ``src``), C-contiguous whatever
        ``src``'s strides."""
        shape = self.output_shape(as_hwc(src, what="input frame").shape)
        # Not empty_like: it keeps a transposed or Fortran order.
        dst = np.empty(shape[:2] if src.ndim == 2 else shape, src.dtype)
        self.apply_into(dst, src)
        return dst

    def __enter__(self) -> Backend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
