"""Measuring on the GPU: launch timing behind a stream hold, host timing, the rooflines and
occupancy.

What ``streamconv bench`` and the scripts in benchmarks/ time with: CUDA events after a warm-up,
launches queued behind cuda/bench/hold.cu so the host's cost per launch is left out, the device's
copy bandwidth and its FP32 and int8 tensor peaks at the boost clock, and a backend's output
for a frame with its output buffers poisoned first.
"""

from __future__ import annotations

import statistics
import time

import numpy as np

from ..gpu import loader as kernel_loader
from ..gpu.binding import Binding, Device, Kernel

TIME_BUDGET_S = 0.25  # GPU time spent timing one configuration (slow textbook kernels: fewer runs)
POISON = 0xA5

# FP32 lanes per SM by compute capability major version (8.0 has 64; 8.6 and later 128).
_FP32_LANES = {7: 64, 8: 128, 9: 128, 10: 128, 12: 128}


def copy_bandwidth(gpu: Binding) -> float:
    """Device-to-device copy GB/s, counting bytes read and written (median of 20); the context
    must be current."""
    nbytes = 512 * 2**20
    src, dst = gpu.alloc(nbytes), gpu.alloc(nbytes)
    try:
        gpu.memset_d8(int(src), 7, nbytes)
        start, end = gpu.event(), gpu.event()
        times = []
        for _ in range(25):
            start.record()
            gpu.copy_dtod(int(dst), int(src), nbytes)
            end.record()
            end.synchronize()
            times.append(end.time_since(start) / 1e3)
    finally:
        src.free()
        dst.free()
    return 2 * nbytes / statistics.median(times[5:]) / 1e9


HOLD_SOURCE = "hold"
"""cuda/bench/hold.cu: what time_launches queues ahead of each batch."""
SOURCES = {HOLD_SOURCE: "sm_75"}
"""The bench's kernel files in cuda/bench/ -> the oldest architecture each runs on."""
_MAX_HOLD_NS = 10**9  # beyond this a batch is timed as queued (a host stalled for a second)


def time_launches(backend, slots, *, streams: int = 1, budget_s: float = TIME_BUDGET_S,
                  max_runs: int = 30) -> float:
    """Median seconds per launch of the backend's chain, rotating over ``slots``' device buffers.

    Kernels only (``launch_kernels``), after a warm-up; each sample is a batch of launches timed
    with CUDA events. With ``streams`` 1 each launch waits for the one before; with more, launch
    i goes to stream i mod ``streams`` (as the pipeline's slots queue frames), so that one
    frame's kernels can start while the last blocks of the previous frame's still run. Each
    batch is queued behind a kernel that holds the streams until the whole batch is queued, so
    that the launches run back to back: the host's cost per launch (about 10 us from Python)
    would otherwise be timed wherever a kernel takes less. A batch queued after its hold ended
    is queued again behind a hold twice as long (up to a second). The context must be current.
    """
    gpu = backend.gpu
    module = kernel_loader.load_module(HOLD_SOURCE, {}, backend.arch, gpu)
    hold = module.kernel("hold_stream", "Q")
    lanes = [gpu.stream() for _ in range(streams)]
    events = [gpu.event() for _ in range(streams + 1)]  # start, end, and one per other stream's end
    begin = time.perf_counter()
    first = _timed_batch(backend, slots, lanes, events)[0] / len(slots)  # warm-up, a first estimate
    queue_s = (time.perf_counter() - begin) / len(slots)
    per_batch = max(1, min(5, int(budget_s / 4 / max(first, 1e-7) / len(slots))))
    runs = max(3, min(max_runs, int(budget_s / max(first * per_batch * len(slots), 1e-7))))
    launches = per_batch * len(slots)
    hold_ns = int(2 * queue_s * launches * 1e9) + 100_000
    samples = []
    while len(samples) < runs:
        hold.launch(lanes[0], (1, 1, 1), (1, 1, 1), hold_ns)
        seconds, held_throughout = _timed_batch(backend, slots * per_batch, lanes, events)
        if held_throughout or hold_ns > _MAX_HOLD_NS:
            samples.append(seconds / launches)
        else:
            hold_ns *= 2
    return statistics.median(samples)


def _timed_batch(backend, slots, lanes, events) -> tuple[float, bool]:
    """(seconds from start to end around ``slots``' launches, dealt out over ``lanes`` (streams),
    whether start was still ahead when the last launch was queued: the batch was held back).
    ``events``: start and end, recorded on the first lane, then one per other lane, recorded
    where that lane's launches end (the first waits on them before end)."""
    (start, end, *joins), head = events, lanes[0]
    start.record(head)
    for lane in lanes[1:]:
        lane.wait_for_event(start)
    for i, slot in enumerate(slots):
        backend.launch_kernels(slot, lanes[i % len(lanes)])
    held_throughout = not start.query()
    for lane, joined in zip(lanes[1:], joins):
        joined.record(lane)
        head.wait_for_event(joined)
    end.record(head)
    end.synchronize()
    return end.time_since(start) / 1e3, held_throughout


def time_host(function, repeats: int = 3) -> float:
    """Median wall seconds of ``function()`` over ``repeats`` calls, after one warm-up call."""
    function()
    samples = []
    for _ in range(repeats):
        begin = time.perf_counter()
        function()
        samples.append(time.perf_counter() - begin)
    return statistics.median(samples)


def _sm_cycles_per_second(device: Device) -> float:
    """SMs x boost clock (Hz): what a per-SM, per-clock rate is multiplied by for a peak."""
    return device.attribute("MULTIPROCESSOR_COUNT") * device.attribute("CLOCK_RATE") * 1e3


def fp32_fma_peak(device: Device) -> float:
    """FP32 fused multiply-adds per second at the boost clock: SMs x lanes x clock."""
    major, minor = device.compute_capability
    lanes = 64 if (major, minor) == (8, 0) else _FP32_LANES.get(major, 128)
    return lanes * _sm_cycles_per_second(device)


# Dense int8 tensor-core multiply-adds per SM per clock (A100 and H100 data sheets; 1024 for the
# consumer parts of sm_86/sm_89).
_INT8_TENSOR_MACS = {(8, 0): 2048, (9, 0): 4096}


def int8_tensor_peak(device: Device) -> float:
    """Dense int8 tensor-core multiply-adds per second at the boost clock."""
    return _INT8_TENSOR_MACS.get(device.compute_capability, 1024) * _sm_cycles_per_second(device)


def occupancy(device: Device, kernel: Kernel, threads: int) -> tuple[float, str]:
    """Resident warps per SM over the maximum, and what limits it (warps, registers, shared)."""
    max_threads = device.attribute("MAX_THREADS_PER_MULTIPROCESSOR")
    warps = -(-threads // 32)
    limits = {"blocks": device.attribute("MAX_BLOCKS_PER_MULTIPROCESSOR"),
              "warps": max_threads // 32 // warps}
    registers = kernel.attribute("num_regs")
    if registers:
        per_warp = -(-registers * 32 // 256) * 256  # registers are allocated per warp in 256s
        per_sm = device.attribute("MAX_REGISTERS_PER_MULTIPROCESSOR")
        limits["registers"] = per_sm // (per_warp * warps)
    shared = kernel.attribute("shared_size_bytes")
    if shared:
        per_block = shared + 1024  # the driver reserves 1 KB per block
        limits["shared"] = device.attribute("MAX_SHARED_MEMORY_PER_MULTIPROCESSOR") // per_block
    limit = min(limits, key=limits.get)
    return limits[limit] * warps * 32 / max_threads, limit


def poisoned_run(backend, slot, frame: np.ndarray) -> np.ndarray:
    """The backend's output for ``frame`` through ``slot``, with its output buffers poisoned first.

    ``frame`` is what the slot's ``host_in`` holds: (H, W, C) uint8 or uint16, or flat 4:2:0
    planes, of the slot's dtype.
    """
    if frame.dtype != slot.host_in.dtype:
        raise ValueError(f"frame dtype {frame.dtype} != slot dtype {slot.host_in.dtype}")

    with backend.activated():
        for buffer in slot.device.buffers[1:]:
            backend.gpu.memset_d8(int(buffer), POISON, slot.device.pitch * slot.device.rows)
        for buffer in slot.device.planes[1:]:
            backend.gpu.memset_d8(int(buffer), POISON, (slot.out_planes or slot.planes).nbytes)
    slot.host_out.fill(POISON ^ 0xFF)
    np.copyto(slot.host_in, frame)
    slot.reset()
    backend.submit(slot)
    backend.wait(slot)
    return slot.host_out.copy()
