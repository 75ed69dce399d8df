"""GPU test helpers: run a chain on the GPU with poisoned outputs and hold it against the CPU
oracle."""

from __future__ import annotations

import contextlib

import numpy as np

from streamconv.backends.cpu.backend import CpuBackend
from streamconv.chain.filters import FilterStage

from helpers.oracle import exact_for
from streamconv.backends.cuda.backend import CudaBackend

POISON = 0xA5


def precompile_plans(wanted, kernel: str = "auto", dtype=np.uint8):
    """Compile, in parallel, the specialisations of (stage, (H, W, C), border code) items under
    ``kernel`` (a name, or "all" for every variant that can run each stage) for frames of
    ``dtype``; returns the CUDA binding."""
    from streamconv.backends import plan as planning
    from streamconv.gpu.binding import binding

    gpu = binding()
    major, minor = gpu.device(0).compute_capability
    names = planning.VARIANTS if kernel == "all" else (kernel,)
    plans = []
    for stage, shape, border in wanted:
        for name in names:
            try:
                plans.append(planning.plan_stage(stage, name, dtype).kernel_plan(shape, border))
            # separable for taps that are not rank 1, 16 bits on an 8-bit variant
            except ValueError:
                continue
    planning.precompile_plans(plans, f"sm_{major}{minor}", workers=16)
    return gpu


def gpu_filter(stages, frame, border, gpu, kernel: str = "auto"):
    """Run ``stages`` on ``frame`` through a slot whose host and device outputs are poisoned."""
    from streamconv.backends.cuda.backend import CudaBackend
    from streamconv.bench.timing import poisoned_run

    with CudaBackend(stages, border=border, kernel=kernel) as backend:
        return poisoned_run(backend, backend.allocate_slots(frame.shape, 1, dtype=frame.dtype)[0],
                            frame)


def exact_taps(stage: FilterStage, maximum: int = 255) -> bool:
    """Every tap a multiple of 1/256, with sums over samples up to ``maximum`` below 2^16 (the GPU
    must then equal the CPU sample for sample); a convolution layer's float sums may round either
    way, so it never counts as exact."""
    return stage.layer is None and all(exact_for(t, maximum) for t in stage.taps)


def check_against_cpu(stages, frame, border, gpu, kernel: str = "auto"):
    """The GPU output, after asserting it is within 1 LSB of the CPU backend (equal for exact
    taps)."""
    got = gpu_filter(stages, frame, border, gpu, kernel)
    expected = CpuBackend(stages, border=border).apply(frame)
    difference = np.abs(got.astype(int) - expected.astype(int))
    assert difference.max() <= 1, (f"{kernel}: max difference {difference.max()} at "
                                   f"{np.unravel_index(difference.argmax(), difference.shape)}")
    if all(exact_taps(s, np.iinfo(frame.dtype).max) for s in stages):
        np.testing.assert_array_equal(got, expected,
                                      err_msg=f"{kernel}: exact taps must match exactly")
    return got


@contextlib.contextmanager
def held_context(device: int = 0):
    """The CUDA binding with a retain of ``device``'s primary context pushed for the block."""
    from streamconv.gpu.binding import binding

    gpu = binding()
    context = gpu.device(device).retain_primary_context()
    context.push()
    try:
        yield gpu
    finally:
        context.pop()
        context.release()


def break_launch_of_frame(monkeypatch, frame: int, how: str) -> None:
    """Make the kernel launch of frame ``frame`` fail for real: an impossible block (1025 threads:
    refused at launch, the context survives) or ``bad pointer`` (an illegal address: the context
    dies)."""
    real = CudaBackend.launch_kernels

    def launch(self, slot, stream):
        if slot.meta is None or slot.meta.index != frame:
            return real(self, slot, stream)
        stage = self.stages_for(slot.frame_shape)[0]
        height, width, _ = slot.frame_shape
        pitch = slot.device.pitch
        if how == "block":
            stage.function.launch(stream, stage.plan.grid, (1025, 1, 1),
                                  int(slot.device.buffers[0]), int(slot.device.buffers[1]), width,
                                  height, pitch, pitch, *stage.extra_args)
        else:
            stage.function.launch(stream, stage.plan.grid, stage.plan.block, 0, 0,  # null pointers
                                  width, height, pitch, pitch, *stage.extra_args)

    monkeypatch.setattr(CudaBackend, "launch_kernels", launch)
