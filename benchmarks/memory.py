"""Host memory for the GPU stage: page-locked buffers and streams against unified (managed) memory.

    python benchmarks/memory.py [--sizes 1080p,4K] [--frames 300] [--rings 1,3]
                                [--memory pinned,pageable,unified,unified-prefetch] [--filter SPEC]
                                [--json PATH]

The textbook's setting (PMPP ch. 7: a 5x5 filter over RGB frames in cudaMallocManaged memory)
beside what streamconv does. Each row moves file-like traffic through a ring of R frame slots:
for every frame, the host waits for the slot's previous frame and copies its result out (as an
encoder reads it), copies the next decoded frame in (as a decoder writes it; a pool of 8 random
frames in ordinary memory), and queues the GPU work. Rows:

  pinned            streamconv's path: page-locked host buffers, asynchronous upload, kernels and
                    download on each slot's stream (the CUDA backend's slots)
  pageable          the same slots with ordinary host buffers (copies staged by the driver)
  unified           input and output in managed memory: the host writes and reads them in place,
                    the kernels read and write them on the GPU, pages migrating on demand
  unified-prefetch  the same with cuMemPrefetchAsync moving the input to the GPU before the
                    kernels and the output to the host after them, on the slot's stream

Frames per second and ms per frame are wall time over the frames after a warm-up of two ring
rounds; every mode's result is checked against the CPU backend first (outputs poisoned). The
kernels are the same in every row (the CUDA backend's ``auto`` chain).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import needs  # noqa: E402  (benchmarks/needs.py: what is missing, in one line)

from streamconv.backends.cpu.backend import CpuBackend  # noqa: E402
from streamconv.backends.cuda.backend import CudaBackend  # noqa: E402
from streamconv.chain.filters import parse_chain  # noqa: E402
from streamconv.files.publish import write_atomically  # noqa: E402

SIZES = {"1080p": (1080, 1920, 3), "4K": (2160, 3840, 3)}
MODES = ("pinned", "pageable", "unified", "unified-prefetch")
POISON = 0xA5


def prefetch(address: int, size: int, to_device: int | None, stream_handle: int) -> None:
    """cuMemPrefetchAsync of managed memory to GPU ``to_device`` (None: to the host) on a stream."""
    from cuda.bindings import driver as cu  # the cuda extra

    location = cu.CUmemLocation()
    kinds = cu.CUmemLocationType
    location.type = (kinds.CU_MEM_LOCATION_TYPE_HOST if to_device is None
                     else kinds.CU_MEM_LOCATION_TYPE_DEVICE)
    location.id = 0 if to_device is None else to_device
    (code,) = cu.cuMemPrefetchAsync(address, size, location, 0, stream_handle)
    if code != 0:
        raise RuntimeError(f"cuMemPrefetchAsync failed: {code.name}")


def managed_array(shape: tuple[int, ...]) -> tuple[np.ndarray, int]:
    """A uint8 array in managed memory (attached globally) and its address; the memory lasts as
    long as the process (this benchmark makes a few rings of it)."""
    from cuda.bindings import driver as cu  # the cuda extra

    nbytes = int(np.prod(shape))
    code, address = cu.cuMemAllocManaged(nbytes, cu.CUmemAttach_flags.CU_MEM_ATTACH_GLOBAL)
    if code != 0:
        raise RuntimeError(f"cuMemAllocManaged failed: {code.name}")
    memory = (ctypes.c_uint8 * nbytes).from_address(int(address))
    return np.ctypeslib.as_array(memory).reshape(shape), int(address)


class ManagedSlot:
    """One ring slot in managed memory: input, output (and a spare for chains), a stream, an event."""

    def __init__(self, backend: CudaBackend, shape: tuple[int, int, int], prefetching: bool) -> None:
        self.backend, self.shape, self.prefetching = backend, shape, prefetching
        with backend.activated():
            (self.host_in, source), (self.host_out, target), (self.spare, spare) = (
                managed_array(shape) for _ in range(3))
            self.stream, self.done = backend.gpu.stream(), backend.gpu.event()
        self.host_out.fill(POISON)
        self.pitch = shape[1] * shape[2]
        self.addresses = [source, target, spare]

    def submit(self) -> None:
        """Queue (prefetch in,) the chain in place in managed memory, (prefetch out,) the event."""
        handle, (source, target, spare) = self.stream.handle, self.addresses
        with self.backend.activated():
            if self.prefetching:
                prefetch(source, self.host_in.nbytes, self.backend.device_number, handle)
            self.backend.launch_chain(self.stream, self.shape, np.uint8, (source, self.pitch), (target, self.pitch),
                                      (spare, self.pitch), {})
            if self.prefetching:
                prefetch(target, self.host_out.nbytes, None, handle)
            self.done.record(self.stream)

    def wait(self) -> None:
        with self.backend.activated():
            self.done.synchronize()


class PinnedSlot:
    """One of the CUDA backend's own slots (page-locked or pageable host buffers)."""

    def __init__(self, backend: CudaBackend, shape: tuple[int, int, int]) -> None:
        self.backend = backend
        self.slot = backend.allocate_slots(shape, 1)[0]
        self.host_in, self.host_out = self.slot.host_in, self.slot.host_out
        self.host_out.fill(POISON)

    def submit(self) -> None:
        self.slot.reset()
        self.backend.submit(self.slot)

    def wait(self) -> None:
        self.backend.wait(self.slot)


def run_ring(slots, pool: list[np.ndarray], frames: int) -> float:
    """Seconds to move ``frames`` frames through ``slots`` (after a warm-up of two rounds)."""
    consumer = np.empty_like(pool[0])
    busy = [False] * len(slots)

    def step(number: int) -> None:
        index = number % len(slots)
        slot = slots[index]
        if busy[index]:
            slot.wait()
            np.copyto(consumer, slot.host_out)  # the encoder reads the result
        np.copyto(slot.host_in, pool[number % len(pool)])  # the decoder writes the next frame
        slot.submit()
        busy[index] = True

    for number in range(2 * len(slots)):
        step(number)
    begin = time.perf_counter()
    for number in range(frames):
        step(number)
    for index, slot in enumerate(slots):
        if busy[index]:
            slot.wait()
    return time.perf_counter() - begin


def check(slot, chain, frame: np.ndarray) -> None:
    """The slot's result for ``frame`` equals the CPU backend's within 1 LSB (output poisoned first)."""
    np.copyto(slot.host_in, frame)
    slot.host_out.fill(POISON)
    slot.submit()
    slot.wait()
    expected = CpuBackend(chain, border="reflect101").apply(frame)
    difference = np.abs(slot.host_out.astype(int) - expected.astype(int)).max()
    if difference > 1:
        raise AssertionError(f"GPU result differs from the CPU backend by {difference}")


def measure(mode: str, shape, ring: int, chain, pool, frames: int) -> dict:
    """One row: frames per second and ms per frame of ``mode`` with a ring of ``ring`` slots."""
    pinned = mode != "pageable"
    with CudaBackend(chain, border="reflect101", pinned=pinned) as backend:
        if mode.startswith("unified"):
            with backend.activated():
                backend.stages_for(tuple(shape), np.uint8)  # compiled before the slots exist
            slots = [ManagedSlot(backend, shape, mode == "unified-prefetch") for _ in range(ring)]
        else:
            slots = [PinnedSlot(backend, shape) for _ in range(ring)]
        check(slots[0], chain, pool[0])
        seconds = run_ring(slots, pool, frames)
        del slots
    return {"mode": mode, "ring": ring, "fps": frames / seconds, "ms_per_frame": 1e3 * seconds / frames}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1080p,4K")
    parser.add_argument("--frames", type=int, default=300)
    parser.add_argument("--rings", default="1,3")
    parser.add_argument("--memory", default=",".join(MODES))
    parser.add_argument("--filter", default="box:size=5")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    needs.gpu()
    chain = parse_chain([args.filter])
    rng = np.random.default_rng()
    report = []
    for size in args.sizes.split(","):
        shape = SIZES[size]
        pool = [rng.integers(0, 256, shape, dtype=np.uint8) for _ in range(8)]
        print(f"{size} {args.filter}: {'memory':<17} {'ring':>4} {'fps':>8} {'ms/frame':>9} {'x pinned':>9}")
        for ring in (int(r) for r in args.rings.split(",")):
            baseline = None
            for mode in args.memory.split(","):
                row = {"size": size, **measure(mode, shape, ring, chain, pool, args.frames)}
                baseline = baseline or (row["fps"] if mode == "pinned" else None)
                ratio = f"{row['fps'] / baseline:9.2f}" if baseline else f"{'':>9}"
                print(f"{'':<{len(size) + len(args.filter) + 2}} {mode:<17} {ring:>4} {row['fps']:8.1f} "
                      f"{row['ms_per_frame']:9.3f} {ratio}")
                report.append(row)
    if args.json:
        write_atomically(args.json, json.dumps(report, indent=2), overwrite=True, what="benchmark report")


if __name__ == "__main__":
    sys.exit(needs.run(main))
