"""The chain planned once: which kernel family runs each stage, and the ``auto`` table.

:func:`plan_chain` makes every decision about a filter chain's kernels in one place, from the
chain and ``--kernel``: ``--kernel`` checking, the CUDA backend and ``streamconv bench`` all read
its :class:`ChainPlan`. For each stage it picks a variant and keeps what the family prepared
from the taps (their int8 digits, their rank-1 factors, the conversion offsets), so the taps are
quantized or factored once; a frame shape then gives each stage's :class:`KernelPlan`.

``auto`` takes the first row of :data:`AUTO_TABLE` whose condition holds and whose family can
run the stage; each row is where that family won in ``streamconv bench`` on an H100 at 1080p
and 4K (benchmarks/README.md). 16-bit frames run on the families that take them only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import ModuleType
from typing import Callable, Iterable, Sequence

import numpy as np

from ..errors import FilterSpecError, SettingsError
from ..chain.filters import FilterStage
from ..gpu import loader as kernel_loader
from ..chain.resample import chain_shapes
from .families import register_blocked, resample, separable, temporal, tensor_core, textbook
from .families.base import (TENSOR_CORE_ARCH, KernelPlan, StagePlan, arch_number,
                            oldest_arch)

FAMILIES: tuple[ModuleType, ...] = (register_blocked, tensor_core, separable, textbook)
"""Every kernel family, in the order ``--kernel`` lists their variants."""

BY_VARIANT: dict[str, ModuleType] = {variant: family for family in FAMILIES
                                     for variant in family.VARIANTS}
"""Variant name -> the family that runs it."""

AUTO = "auto"
VARIANTS = tuple(BY_VARIANT)
KERNEL_CHOICES = (AUTO, *VARIANTS)
DEEP_KERNEL_CHOICES = (AUTO,
                       *(v for family in FAMILIES if 2 in family.SAMPLE_BYTES
                         for v in family.VARIANTS))
"""The kernel choices that take 16-bit frames (the others take 8-bit samples only)."""

REGISTER_BLOCKED, TENSOR_CORE, SEPARABLE = (family.VARIANTS[0]
                                            for family in (register_blocked, tensor_core,
                                                                              separable))


@dataclass(frozen=True)
class AutoRule:
    """A row of the auto table: ``family`` runs a stage for which ``when(stage)`` holds, if it
    can."""

    family: ModuleType
    when: Callable[[FilterStage], bool]
    why: str


AUTO_TABLE: tuple[AutoRule, ...] = (
    AutoRule(separable, lambda stage: stage.size >= 7,
             "rank-1 taps from 7x7 (at 5x5 the tensor cores win)"),
    AutoRule(tensor_core, lambda stage: stage.size > 3 or tensor_core.one_3x3_matrix(stage),
             "8-bit taps from 5x5 to 31x31 its digits hold (2.7-5.7x register-blocked from 11x11), "
             "and "
             "one 3x3 matrix (a 3x3 bank loses there)"),
    AutoRule(register_blocked, lambda stage: True, "everything else, 16-bit frames included"),
)
"""``auto``'s choice, first match wins (benchmarks/README.md has the figures behind each row)."""


def check_kernel(name: str) -> str:
    """``name`` if it is a known kernel choice; else a SettingsError listing them."""
    if name not in KERNEL_CHOICES:
        raise SettingsError(f"unknown kernel {name!r}; known: {', '.join(KERNEL_CHOICES)}")
    return name


def plan_stage(stage: FilterStage, kernel: str = AUTO, dtype=np.uint8, *,
               tensor_cores: bool = True) -> StagePlan:
    """The variant ``stage`` runs as under ``kernel`` (``auto`` or a variant name) on frames of
    ``dtype`` (uint8 or uint16), with what its family prepared from the taps. Without
    ``tensor_cores`` (a GPU before sm_80, whose tensor cores lack the int8 ``mma`` shapes the
    kernels use) ``auto`` never picks them, and ``separable`` keeps to sepconv.cu.

    Raises:
        SettingsError: an unknown kernel; a variant that needs ``tensor_cores`` without them, or
            that takes 8-bit frames only, for 16-bit ones.
        FilterSpecError: a variant that cannot run the stage (``separable`` for taps that are
            not rank 1, ``tensor-core`` for a bank of two taps above K = 9, or for taps its
            digits cannot hold).
    """
    check_kernel(kernel)
    sample_bytes = np.dtype(dtype).itemsize
    if stage.geometry is not None:  # scale and crop run resample.cu, whatever --kernel says
        return StagePlan(stage, resample.VARIANTS[0], resample, None, sample_bytes, tensor_cores)
    if stage.temporal is not None:  # stages across frames: the temporal family, as the taps say
        return temporal_stage(stage, sample_bytes, tensor_cores)
    if kernel == AUTO:
        for rule in AUTO_TABLE:
            if sample_bytes in rule.family.SAMPLE_BYTES and rule.when(stage):
                try:
                    return _prepared(stage, rule.family.VARIANTS[0], sample_bytes, tensor_cores)
                except (FilterSpecError, SettingsError):
                    continue  # the family cannot hold these taps: the next row
        raise AssertionError("the last row of AUTO_TABLE runs every stage")
    if sample_bytes not in BY_VARIANT[kernel].SAMPLE_BYTES:
        raise SettingsError(f"--kernel {kernel} takes 8-bit frames only; 16-bit frames run as "
                              f"{REGISTER_BLOCKED} (--kernel auto)")
    return _prepared(stage, kernel, sample_bytes, tensor_cores)


def _prepared(stage: FilterStage, variant: str, sample_bytes: int,
              tensor_cores: bool = True) -> StagePlan:
    family = BY_VARIANT[variant]
    oldest = oldest_arch(family)
    if not tensor_cores and arch_number(oldest) >= arch_number(TENSOR_CORE_ARCH):
        # auto then takes the next row
        raise SettingsError(f"--kernel {variant} needs a GPU of {oldest} or later (int8 "
                            "tensor-core mma); use --kernel auto")
    return StagePlan(stage, variant, family, family.prepare(stage, variant, sample_bytes),
                     sample_bytes, tensor_cores)


@dataclass
class ChainPlan:
    """A chain's kernels, planned once per sample size (8-bit at :func:`plan_chain`, 16-bit when
    first asked for).

    Attributes:
        filters: the stages, in order.
        kernel: the ``--kernel`` choice.
    """

    filters: tuple[FilterStage, ...]
    kernel: str
    tensor_cores: bool = True
    _stages: dict[int, tuple[StagePlan | None, ...]] = field(default_factory=dict, repr=False)
    _shapes: dict[tuple, tuple[tuple[int, int, int], ...]] = field(default_factory=dict, repr=False)

    def shapes(self, shape: tuple[int, int, int]) -> tuple[tuple[int, int, int], ...]:
        """The (H, W, C) frame entering each stage for chain input ``shape``, then the chain's
        output (``len(filters) + 1`` shapes), computed once per input shape.

        Raises:
            FrameFormatError: a stage cannot take its input's size (a crop beyond the frame).
        """
        key = tuple(shape)
        if key not in self._shapes:
            self._shapes[key] = tuple(chain_shapes(self.filters, key))
        return self._shapes[key]

    def output_shape(self, shape: tuple[int, int, int]) -> tuple[int, int, int]:
        """The (h, w, C) the chain makes of (H, W, C) frames."""
        return self.shapes(shape)[-1]

    def stages(self, dtype=np.uint8) -> tuple[StagePlan | None, ...]:
        """Each stage's plan for frames of ``dtype``; None for a convolution-layer stage, which
        runs :mod:`streamconv.nn`'s kernels whatever ``--kernel`` says.

        Raises:
            SettingsError, FilterSpecError: as :func:`plan_stage`.
        """
        sample_bytes = np.dtype(dtype).itemsize
        if sample_bytes not in self._stages:
            self._stages[sample_bytes] = tuple(
                None if stage.layer is not None else plan_stage(stage, self.kernel, dtype,
                                                                tensor_cores=self.tensor_cores)
                for stage in self.filters)
        return self._stages[sample_bytes]

    def kernel_plans(self, shape: tuple[int, int, int], border_code: int,
                     dtype=np.uint8) -> list[KernelPlan | None]:
        """Each stage's launch for (H, W, C) chain input frames of ``dtype`` (None for a layer
        stage), at the size the frame has when it reaches the stage."""
        return [None if stage is None else stage.kernel_plan(entering, border_code)
                for stage, entering in zip(self.stages(dtype), self.shapes(shape))]


def plan_chain(filters: Sequence[FilterStage], kernel: str = AUTO, *,
               tensor_cores: bool = True) -> ChainPlan:
    """Plan a chain under ``kernel``: every stage's variant for 8-bit frames, decided here
    (``tensor_cores``: as for :func:`plan_stage`).

    Raises:
        SettingsError: an unknown kernel. FilterSpecError: one that cannot run a stage.
    """
    plan = ChainPlan(tuple(filters), check_kernel(kernel), tensor_cores)
    plan.stages(np.uint8)
    return plan


def temporal_stage(stage: FilterStage, sample_bytes: int, tensor_cores: bool = True) -> StagePlan:
    """A stage across frames runs on the temporal family whatever ``--kernel`` says (its taps
    choose the kernel, and ``tensor_cores`` whether conv3d_tc.cu may), as a convolution layer
    runs on streamconv.nn's."""
    variant = temporal.VARIANTS[0]
    prepared = temporal.prepare(stage, variant, sample_bytes)
    return StagePlan(stage, variant, temporal, prepared, sample_bytes, tensor_cores)


def supports(stage: FilterStage, kernel: str, dtype=np.uint8) -> bool:
    """Whether ``kernel`` can run ``stage`` on frames of ``dtype``."""
    try:
        plan_stage(stage, kernel, dtype)
    except (FilterSpecError, SettingsError):
        return False
    return True


def precompile_plans(plans: Iterable[KernelPlan], arch: str, workers: int = 8) -> None:
    """Compile, in parallel, each distinct (kernel file, defines) specialisation that ``plans``
    name, so that their later loads hit the cache (kernel_loader.precompile)."""
    wanted = {(plan.source, tuple(sorted(plan.defines.items()))) for plan in plans}
    kernel_loader.precompile([(source, dict(items)) for source, items in sorted(wanted)], arch,
                             workers=workers)
