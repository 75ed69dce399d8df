"""A filter stage on the GPU: its own module instance (holding its taps in constant memory), its
kernel and the kernel's launches, bound once per source and target (the CUDA backend's part)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import kernel_loader
from ..errors import StreamError
from ..filters import FilterStage
from ..gpu.binding import Binding, BoundLaunches, Kernel
from ..nn.gpu_layer import GpuLayer
from .families.base import KernelPlan


@dataclass
class GpuStage:
    """One filter stage on the GPU: its plan, module (holding the taps), kernel and its launches."""

    plan: KernelPlan
    module: Any
    function: Kernel | None
    extra_args: tuple = ()  # after (src, dst, width, height, pitches): a taps pointer (textbook)
    allocations: list = field(default_factory=list)  # device memory the stage owns
    gpu_layer: GpuLayer | None = None  # a convolution layer (bank): plan, module, function None
    launches: BoundLaunches | None = None  # the kernel's launches, bound per (source, target)


def load_stage(gpu: Binding, stage: FilterStage, plan: KernelPlan, arch: str) -> GpuStage:
    """Stage ``stage`` planned as ``plan`` on the GPU of ``gpu`` (whose context is current):
    its own module instance, its constants copied in, and its kernel."""
    module = kernel_loader.load_module(plan.source, plan.defines, arch, gpu)
    for symbol, values in plan.constants.items():
        address, size = module.global_address(symbol)
        if size != values.nbytes:
            raise StreamError(f"{symbol} holds {size} bytes, stage {stage.describe()} "
                              f"needs {values.nbytes}")
        gpu.copy_htod(address, np.ascontiguousarray(values))
    function = module.kernel(plan.entry, plan.arguments)
    gpu_stage = GpuStage(plan, module, function, launches=BoundLaunches(function, plan.block))
    if plan.arguments.endswith("P"):  # a taps pointer after the frame arguments
        gpu_stage.extra_args = (0,)  # unread unless the taps live in global memory
        if plan.global_taps is not None:
            taps = np.ascontiguousarray(plan.global_taps)
            buffer = gpu.alloc(taps.nbytes)
            gpu.copy_htod(int(buffer), taps)
            gpu_stage.allocations.append(buffer)
            gpu_stage.extra_args = (int(buffer),)
    return gpu_stage

