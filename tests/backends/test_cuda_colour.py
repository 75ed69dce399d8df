"""The 4:2:0 planes path on the GPU (yuv420p with 8-bit RGB, yuv420p10le and yuv420p12le with
16-bit RGB): colour.cu's conversions around the chain equal the CPU backend's.

Integer arithmetic on both sides, so the planes must match byte for byte wherever the chain
itself does (exact taps); every output buffer, device and host, is poisoned first. The
file-to-file run through planes is in test_cuda_backend.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from streamconv.backends.cpu.backend import CpuBackend
from streamconv.backends.cuda.backend import CudaBackend
from streamconv.bench.timing import poisoned_run
from streamconv.frames.colour import ColourTags
from streamconv.chain.filters import parse_chain
from streamconv.frames.yuv import YuvLayout

from helpers.gpu_check import exact_taps

pytestmark = pytest.mark.cuda

CASES = [(1, False), (1, True), (5, False), (6, True), (9, False), (2, False)]
CASE_IDS = ["bt709-limited", "bt709-full", "bt601-limited", "bt601-full", "bt2020-limited",
            "untagged"]
SIZES = [(2, 2), (66, 34), (130, 2), (2, 98), (1920, 1080), (3840, 2160)]
# Chains of exact taps only: an inexact stage's 1-LSB rounding would be magnified by the next.
CHAINS = [["sharpen"], ["box:size=5"], ["gaussian:sigma=2"], ["edge"], ["emboss", "sharpen"]]


def layout_for(width: int, height: int, space: int, full: bool, bits: int = 8) -> YuvLayout:
    return YuvLayout(width, height, ColourTags(space, 2 if full else 1), full, bits)


def random_planes(rng, layout: YuvLayout) -> np.ndarray:
    return rng.integers(0, 1 << layout.bits, layout.shape, dtype=layout.dtype)


def check_planes(specs, layout: YuvLayout, planes: np.ndarray, got: np.ndarray) -> None:
    chain = parse_chain(specs)
    cpu = CpuBackend(chain)
    slot = cpu.allocate_slots(layout.frame_shape, 1, planes=layout)[0]
    slot.host_in[:] = planes
    cpu.submit(slot)
    difference = np.abs(got.astype(int) - slot.host_out.astype(int))
    if all(exact_taps(stage, np.iinfo(layout.frame_dtype).max) for stage in chain):
        np.testing.assert_array_equal(got, slot.host_out)
    else:
        assert difference.max() <= 1, f"{specs}: max difference {difference.max()} at {difference.argmax()}"


@pytest.mark.parametrize("space, full", CASES, ids=CASE_IDS)
@pytest.mark.parametrize("width, height", SIZES[:4])
@pytest.mark.parametrize("specs", CHAINS, ids=lambda specs: "+".join(specs))
def test_planes_slot_equals_cpu(rng, space, full, width, height, specs):
    layout = layout_for(width, height, space, full)
    planes = rng.integers(0, 256, layout.shape, dtype=np.uint8)
    with CudaBackend(parse_chain(specs)) as backend:
        slot = backend.allocate_slots(layout.frame_shape, 1, planes=layout)[0]
        got = poisoned_run(backend, slot, planes)
    check_planes(specs, layout, planes, got)


@pytest.mark.parametrize("bits", [10, 12])
@pytest.mark.parametrize("space, full", CASES, ids=CASE_IDS)
@pytest.mark.parametrize("width, height", SIZES[:2])
@pytest.mark.parametrize("specs", CHAINS, ids=lambda specs: "+".join(specs))
def test_deep_planes_slot_equals_cpu(rng, space, full, width, height, specs, bits):
    layout = layout_for(width, height, space, full, bits)
    planes = random_planes(rng, layout)
    with CudaBackend(parse_chain(specs)) as backend:
        slot = backend.allocate_slots(layout.frame_shape, 1, planes=layout)[0]
        assert slot.host_in.dtype == np.uint16
        got = poisoned_run(backend, slot, planes)
    check_planes(specs, layout, planes, got)


@pytest.mark.parametrize("bits", [8, 10, 12])
@pytest.mark.parametrize("width, height", SIZES[4:], ids=["1080p", "4K"])
def test_full_frames(rng, width, height, bits):
    layout = layout_for(width, height, 1, False, bits)
    planes = random_planes(rng, layout)
    for specs in (["sharpen"], ["edge"]):
        with CudaBackend(parse_chain(specs)) as backend:
            got = poisoned_run(backend,
                               backend.allocate_slots(layout.frame_shape, 1, planes=layout)[0],
                               planes)
        check_planes(specs, layout, planes, got)


def test_no_filters_pass_the_planes_through(rng):
    layout = layout_for(64, 32, 1, False)
    planes = rng.integers(0, 256, layout.shape, dtype=np.uint8)
    with CudaBackend([]) as backend:
        got = poisoned_run(backend, backend.allocate_slots(layout.frame_shape, 1, planes=layout)[0],
                           planes)
    np.testing.assert_array_equal(got, planes)


@pytest.mark.parametrize("pinned", [True, False], ids=["pinned", "pageable"])
def test_three_slots_in_flight(rng, pinned):
    layout = layout_for(640, 360, 5, False)
    frames = [rng.integers(0, 256, layout.shape, dtype=np.uint8) for _ in range(3)]
    specs = ["sharpen", "emboss"]
    with CudaBackend(parse_chain(specs), pinned=pinned) as backend:
        slots = backend.allocate_slots(layout.frame_shape, 3, planes=layout)
        for slot, frame in zip(slots, frames):
            slot.host_out.fill(0xA5)
            slot.host_in[:] = frame
            slot.reset()
            backend.submit(slot)
        for slot in slots:
            backend.wait(slot)
            assert set(slot.times) == {"upload", "kernel", "download"}
        results = [slot.host_out.copy() for slot in slots]
    for frame, got in zip(frames, results):
        check_planes(specs, layout, frame, got)
