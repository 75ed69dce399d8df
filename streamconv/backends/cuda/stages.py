"""The CUDA backend's chain loaded for one frame shape: per stage its own module instance (the
taps in the module's constant memory), its kernel and the kernel's launches, bound once per source
and target; or a convolution layer's engine.

Every function here expects the backend's context to be current.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...gpu import loader as kernel_loader
from ...errors import StreamError
from ...chain.filters import FilterStage
from ...nn.layer import check_sample_type
from ...gpu.binding import Binding, BoundLaunches, Kernel
from ...nn.gpu import GpuEngine
from ...nn.gpu_layer import GpuLayer
from ..families.base import KernelPlan
from ..plan import ChainPlan

log = logging.getLogger(__name__)


@dataclass
class CudaStage:
    """One filter stage on the GPU: its plan, module (holding the taps), kernel and its launches."""

    plan: KernelPlan
    module: Any
    function: Kernel | None
    extra_args: tuple = ()  # after (src, dst, width, height, pitches): a textbook kernel's taps
    allocations: list = field(default_factory=list)  # device memory the stage owns
    gpu_layer: GpuLayer | None = None  # a convolution layer (bank): plan, module, function None
    launches: BoundLaunches | None = None  # the kernel's launches, bound per (source, target)


def load_stages(gpu: Binding, context, arch: str, filters: Sequence[FilterStage], plan: ChainPlan,
                border_code: int, shape: tuple[int, int, int], dtype: np.dtype) -> list[CudaStage]:
    """Compile (memoized by the loader) and load one module per stage for (H, W, C) chain input
    frames of ``dtype``, each stage at the size the frame has when it reaches it.

    Raises:
        FrameTypeError: 16-bit frames for a chain with a convolution layer (8-bit only).
        SettingsError: a ``--kernel`` variant that cannot take 16-bit frames.
        FrameFormatError: a stage cannot take its input's size (a crop beyond the frame).
    """
    check_sample_type(filters, dtype)
    stages = []
    launches = plan.kernel_plans(shape, border_code, dtype)
    for stage, launch, entering in zip(filters, launches, plan.shapes(shape)):
        if stage.layer is not None:
            engine = GpuEngine(gpu, context, push=False)  # this backend's context, current here
            layer = GpuLayer(stage.layer, entering, engine)
            stages.append(CudaStage(None, None, None, gpu_layer=layer))
            log.info("stage %s runs streamconv.nn's conv2d", stage.describe())
            continue
        stages.append(load_stage(gpu, arch, stage, launch))
        log.info("stage %s runs as %s", stage.describe(), launch.label)
    return stages


def load_stage(gpu: Binding, arch: str, stage: FilterStage, launch: KernelPlan) -> CudaStage:
    """One stage's own module instance, its constants copied in, and its kernel's launches."""
    module = kernel_loader.load_module(launch.source, launch.defines, arch, gpu)
    for symbol, values in launch.constants.items():
        address, size = module.global_address(symbol)
        if size != values.nbytes:
            raise StreamError(f"{symbol} holds {size} bytes, stage {stage.describe()} "
                              f"needs {values.nbytes}")
        gpu.copy_htod(address, np.array(values, order="C"))  # a copy: tables may be read-only
    function = module.kernel(launch.entry, launch.arguments)
    gpu_stage = CudaStage(launch, module, function, launches=BoundLaunches(function, launch.block))
    if launch.arguments.endswith("P"):  # a taps pointer after the frame arguments
        gpu_stage.extra_args = (0,)  # unread unless the taps live in global memory
        if launch.global_taps is not None:
            taps = np.ascontiguousarray(launch.global_taps)
            buffer = gpu.alloc(taps.nbytes)
            gpu.copy_htod(int(buffer), taps)
            gpu_stage.allocations.append(buffer)
            gpu_stage.extra_args = (int(buffer),)
    return gpu_stage


def free_stages(stages: Sequence[CudaStage]) -> None:
    """Free the device memory the stages own (global taps, a layer's tensors)."""
    for stage in stages:
        for allocation in stage.allocations:
            allocation.free()
        if stage.gpu_layer is not None:
            stage.gpu_layer.free()
