"""run/inflight.py: InFlight, the in-order queue both ring drivers (Pipeline, StreamFilter) keep
their slots in."""

from __future__ import annotations

import numpy as np
import pytest

from streamconv.backends.cpu.backend import CpuBackend
from streamconv.backends.protocol import Backend
from streamconv.errors import GpuFaultError
from streamconv.frames.slots import Slot
from streamconv.run.inflight import InFlight


class FakeBackend:
    """Finishes slots only when told to; records every call; may fail a wait."""

    name = "fake"

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []
        self.finished: set[int] = set()
        self.fail_wait: set[int] = set()

    def submit(self, slot: Slot) -> None:
        self.calls.append(("submit", slot.index))

    def is_done(self, slot: Slot) -> bool:
        return slot.index in self.finished

    def wait(self, slot: Slot) -> None:
        self.calls.append(("wait", slot.index))
        if slot.index in self.fail_wait:
            raise GpuFaultError(f"slot {slot.index} failed")


def slots(count: int) -> list[Slot]:
    return [Slot(index=i, host_in=np.zeros((2, 2, 3), np.uint8),
                 host_out=np.zeros((2, 2, 3), np.uint8))
            for i in range(count)]


def test_slots_retire_in_submission_order_with_their_notes():
    backend = FakeBackend()
    queue: InFlight[str] = InFlight(backend)
    for slot, note in zip(slots(3), "abc"):
        queue.submit(slot, note)
    assert len(queue) == 3 and queue.oldest[1] == "a"
    backend.finished = {1, 2}  # a later frame done first still waits for the oldest
    assert list(queue.retire_done()) == []
    backend.finished = {0, 1}
    assert [(slot.index, note) for slot, note in queue.retire_done()] == [(0, "a"), (1, "b")]
    assert [(slot.index, note) for slot, note in queue.drain()] == [(2, "c")]
    assert not queue


def test_salvage_finishes_what_it_can_and_stops_at_the_first_failed_wait():
    backend = FakeBackend()
    backend.fail_wait = {1}
    queue = InFlight(backend)
    for slot in slots(3):
        queue.submit(slot)
    assert [slot.index for slot, _ in queue.salvage()] == [0]
    assert len(queue) == 1  # slot 1 was taken out by its failed wait; slot 2 is left


def test_release_frees_every_slot_before_waiting_for_it():
    backend = FakeBackend()
    backend.fail_wait = {0}
    queue = InFlight(backend)
    ring = slots(2)
    for slot in ring:
        queue.submit(slot)
    free: list[Slot] = []
    with pytest.raises(GpuFaultError):
        queue.release(free)
    assert free == ring[:1]  # the failing slot is not lost


def test_a_failed_submit_keeps_nothing():
    class Refusing(FakeBackend):
        def submit(self, slot: Slot) -> None:
            raise GpuFaultError("no")

    queue = InFlight(Refusing())
    with pytest.raises(GpuFaultError):
        queue.submit(slots(1)[0])
    assert len(queue) == 0


def test_the_cpu_backend_meets_the_protocol():
    with CpuBackend([]) as backend:
        assert isinstance(backend, Backend)
        frame = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3)
        np.testing.assert_array_equal(backend.apply(frame), frame)
