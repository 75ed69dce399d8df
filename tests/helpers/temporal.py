"""Clips, random taps and a backend driven slot by slot, for the filters across frames."""

from __future__ import annotations

import av
import numpy as np


def random_taps3d(rng, frames: int, size: int, *, exact: bool) -> np.ndarray:
    taps = rng.normal(0.0, 1.0, (frames, size, size)) / (frames * size)
    taps[frames // 2, size // 2, size // 2] += 1.0
    return np.round(taps * 256) / 256 if exact else taps


def clip_of(rng, count: int, shape=(7, 9, 3), dtype=np.uint8) -> np.ndarray:
    return rng.integers(0, np.iinfo(dtype).max + 1, (count, *shape), dtype=dtype)


def drive(backend, clip: np.ndarray, ring: int, prepare=None) -> np.ndarray:
    """A clip (N, H, W, C) through ``backend``'s slots in a ring of ``ring``, as the pipeline's
    compute thread drives them (InFlight: submit in order, retire in order, flush the tail);
    ``prepare(backend, slots)`` runs once the slots exist (to poison them). Returns the outputs
    in order, each checked to carry its own frame's meta and counts at read (where a run's
    timeline marks drops and damage)."""
    from streamconv.frames.slots import FrameMeta
    from streamconv.run.inflight import InFlight

    slots = backend.allocate_slots(clip.shape[1:], ring, dtype=clip.dtype)
    if prepare is not None:
        prepare(backend, slots)
    in_flight, free, outputs = InFlight(backend), list(slots), {}

    def retire() -> None:
        slot, _ = in_flight.retire()
        if slot.has_output:
            outputs[slot.meta.index] = slot.host_out.copy()
            assert slot.counts_at_read == (slot.meta.index, 2 * slot.meta.index)
        free.append(slot)

    for index, frame in enumerate(clip):
        while not free:
            retire()
        slot = free.pop()
        slot.reset()
        slot.host_in[:] = frame
        slot.meta = FrameMeta(index, index, None)
        slot.counts_at_read = (index, 2 * index)
        in_flight.submit(slot)
    while in_flight.unflushed or len(in_flight):
        if not free or not in_flight.unflushed:
            retire()
            continue
        slot = free.pop()
        slot.reset()
        in_flight.flush(slot)
    assert sorted(outputs) == list(range(len(clip)))
    return np.stack([outputs[index] for index in range(len(clip))])


def rgb_frames(path) -> np.ndarray:
    with av.open(str(path)) as container:
        return np.stack([frame.to_ndarray(format="rgb24") for frame in container.decode(video=0)])
