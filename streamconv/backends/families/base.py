"""What every kernel family hands the CUDA backend: a stage's plan, made once, and its launch.

A family is a module of :mod:`streamconv.backends.families` whose ``.cu`` files sit in
``cuda/<family>/`` (the module's name). It names its kernel files and the oldest architecture
each runs on (``SOURCES``: stem -> ``sm_XY``, which the prebuild and the planner read), the
``--kernel`` variants it runs (``VARIANTS``), the sample sizes it takes (``SAMPLE_BYTES``: 1 for
uint8, 2 for uint16) and two functions:

- ``prepare(stage, variant, sample_bytes)``: the host-side data it derives from the taps (shape
  independent: digits, factors, offsets), or FilterSpecError saying why it cannot run the stage;
- ``kernel_plan(stage_plan, shape, border_code)``: the :class:`KernelPlan` for frames of one shape.

The backend reads plans and names no family; :mod:`streamconv.backends.plan` chooses among them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import ModuleType

import numpy as np

from ...chain.filters import FilterStage
from ...gpu import loader as kernel_loader


TENSOR_CORE_ARCH = "sm_80"
"""The oldest architecture with the int8 tensor-core ``mma`` shapes the kernels issue."""


def arch_number(arch: str) -> int:
    """80 for ``sm_80``: architectures compare as these numbers."""
    return int(arch[3:])


def oldest_arch(family: ModuleType) -> str:
    """The oldest architecture ``family`` runs on: its oldest kernel file's (``SOURCES``)."""
    return min(family.SOURCES.values(), key=arch_number)


@dataclass(frozen=True)
class StagePlan:
    """One stage's choice, made once per chain and sample size.

    Attributes:
        stage: the filter stage.
        variant: the ``--kernel`` variant it runs as.
        family: the family module that runs it.
        data: what the family prepared from the taps (its own type; None where it needs nothing).
        sample_bytes: 1 (uint8 frames) or 2 (uint16).
        tensor_cores: whether the GPU has the int8 tensor-core ``mma`` (sm_80 on).
    """

    stage: FilterStage
    variant: str
    family: ModuleType
    data: object
    sample_bytes: int
    tensor_cores: bool = True

    def kernel_plan(self, shape: tuple[int, int, int], border_code: int) -> "KernelPlan":
        """The launch for (H, W, C) frames under ``border_code`` (borders.BORDER_CODES)."""
        return self.family.kernel_plan(self, shape, border_code)


@dataclass(frozen=True)
class KernelPlan:
    """How one filter stage runs on frames of one shape.

    Attributes:
        variant: the variant name.
        source: kernel file stem in cuda/, e.g. ``"conv2d"``.
        entry: the ``extern "C"`` entry point.
        defines: the specialisation's macros.
        block: threads per block (x, y, z).
        grid: blocks (x, y, z) covering the frame.
        constants: ``__constant__`` or ``__device__`` symbol -> host array to copy into the module
            (float32 taps, or the tensor-core kernels' uint32 fragments and int32 rounding).
        global_taps: float32 host array the kernel reads from device memory (``naive``), or None.
        arguments: the entry's argument signature (:class:`streamconv.gpu.binding.Kernel`): (src,
            dst, width, height, src pitch, dst pitch) device pointers and ints, then a taps
            pointer where it ends in P.
        products: multiply-adds the kernel issues per frame (padding included on the tensor cores).
        math_unit: what ``products`` run on: ``"FP32"`` or ``"tensor"`` (int8).
    """

    variant: str
    source: str
    entry: str
    defines: dict[str, int]
    block: tuple[int, int, int]
    grid: tuple[int, int, int]
    constants: dict[str, np.ndarray] = field(default_factory=dict)
    global_taps: np.ndarray | None = None
    arguments: str = "PPiiii"
    products: int = 0
    math_unit: str = "FP32"

    @property
    def label(self) -> str:
        """The specialisation's log label, with the variant first."""
        return f"{self.variant} {kernel_loader.specialisation_name(self.source, self.defines)}"

    @property
    def tags(self) -> str:
        """What the bench shows beside the variant: ``+offset`` (bytes widened to 2^15 + byte),
        ``+tensor`` (a separable stage on the tensor cores)."""
        return ("+offset" if self.defines.get("OFFSET_CVT") else "") + \
            ("+tensor" if self.math_unit == "tensor" and self.variant == "separable" else "")


def cdiv(a: int, b: int) -> int:
    """Ceiling of a / b for positive ints."""
    return -(-a // b)


def flat_taps(stage: FilterStage) -> np.ndarray:
    """The stage's banks of taps, flattened one after another: float32 host array."""
    return np.ascontiguousarray(np.concatenate([t.ravel() for t in stage.taps]), np.float32)


def base_defines(stage: FilterStage, channels: int, border_code: int) -> dict[str, int]:
    """The macros every 2D family's kernel takes."""
    banks = len(stage.taps)
    return {"RADIUS": stage.radius, "CHANNELS": channels, "BORDER": border_code, "BANKS": banks,
            "COMBINE": int(banks == 2)}
