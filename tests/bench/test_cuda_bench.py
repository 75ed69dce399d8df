"""streamconv bench's kernel timing on the GPU: what time_launches leaves out."""

from __future__ import annotations

import time

import numpy as np
import pytest

from streamconv.bench import timing as gpu_timing
from streamconv.backends.cuda.backend import CudaBackend
from streamconv.chain.filters import parse_filter

pytestmark = pytest.mark.cuda

HOST_DELAY_S = 0.002


@pytest.mark.parametrize("streams", [1, 2])
def test_time_launches_leaves_out_the_hosts_time_per_launch(rng, monkeypatch, streams):
    """A host that takes 2 ms to queue each launch of a kernel that runs for microseconds: the
    launches still run back to back behind the hold, so the time per launch is the kernel's."""
    shape = (64, 64, 3)
    with CudaBackend([parse_filter("box:size=3")]) as backend:
        slots = backend.allocate_slots(shape, 2)
        with backend.activated():
            for slot in slots:
                slot.host_in[:] = rng.integers(0, 256, shape, dtype=np.uint8)
                slot.device.upload(None)  # now, synchronously
            real_launch = backend.launch_kernels

            def slow_host_launch(slot, stream):
                time.sleep(HOST_DELAY_S)
                real_launch(slot, stream)

            monkeypatch.setattr(backend, "launch_kernels", slow_host_launch)
            seconds = gpu_timing.time_launches(backend, slots, streams=streams, budget_s=0.01,
                                               max_runs=3)
    assert 0 < seconds < HOST_DELAY_S / 4, f"{seconds * 1e3:.3f} ms per launch"


def test_two_stream_timing_deals_frames_over_two_streams_and_keeps_each_slots_result(
        rng, monkeypatch):
    """The bench's two-stream figure: launch i on stream i mod 2, and every slot's output, poisoned
    first, is still the CPU backend's filter of that slot's own frame (no slot's kernels read or
    write another's buffers while both streams run)."""
    from streamconv.backends.cpu.backend import CpuBackend

    shape, stage = (96, 160, 3), parse_filter("sharpen")
    frames = [rng.integers(0, 256, shape, dtype=np.uint8) for _ in range(4)]
    with CudaBackend([stage]) as backend:
        slots = backend.allocate_slots(shape, len(frames))
        with backend.activated():
            for slot, frame in zip(slots, frames):
                slot.host_in[:] = frame
                slot.device.upload(None)
                for buffer in slot.device.buffers[1:]:
                    backend.gpu.memset_d8(int(buffer), gpu_timing.POISON,
                                          slot.device.pitch * shape[0])
            used = []
            real_launch = backend.launch_kernels

            def recording_launch(slot, stream):
                used.append((slot.index, stream.handle))
                real_launch(slot, stream)

            monkeypatch.setattr(backend, "launch_kernels", recording_launch)
            gpu_timing.time_launches(backend, slots, streams=2, budget_s=0.01, max_runs=3)
            for slot in slots:
                slot.host_out.fill(0)
                slot.device.download(None)
            backend.gpu.synchronize()
            results = [slot.host_out.copy() for slot in slots]
    handles = [handle for _, handle in used]
    assert len(set(handles)) == 2 and all(a != b for a, b in zip(handles, handles[1:]))
    assert [index for index, _ in used[:4]] == [slot.index for slot in slots]
    with CpuBackend([stage]) as cpu:
        for frame, result in zip(frames, results):
            np.testing.assert_array_equal(result, cpu.apply(frame))
