"""streamconv bench's kernel timing on the GPU: what time_launches leaves out."""

from __future__ import annotations

import time

import numpy as np
import pytest

from streamconv import gpu_timing
from streamconv.backends.cuda import CudaBackend
from streamconv.filters import parse_filter

pytestmark = pytest.mark.cuda

HOST_DELAY_S = 0.002


def test_time_launches_leaves_out_the_hosts_time_per_launch(rng, monkeypatch):
    """A host that takes 2 ms to queue each launch of a kernel that runs for microseconds: the
    launches still run back to back behind the hold, so the time per launch is the kernel's."""
    import pycuda.driver as driver

    shape = (64, 64, 3)
    with CudaBackend([parse_filter("box:size=3")]) as backend:
        slots = backend.allocate_slots(shape, 2)
        with backend.activated():
            for slot in slots:
                slot.host_in[:] = rng.integers(0, 256, shape, dtype=np.uint8)
                slot.device.upload(False)
            real_launch = backend.launch_kernels

            def slow_host_launch(slot, stream):
                time.sleep(HOST_DELAY_S)
                real_launch(slot, stream)

            monkeypatch.setattr(backend, "launch_kernels", slow_host_launch)
            seconds = gpu_timing.time_launches(backend, slots, driver, budget_s=0.01, max_runs=3)
    assert 0 < seconds < HOST_DELAY_S / 4, f"{seconds * 1e3:.3f} ms per launch"
