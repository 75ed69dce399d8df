"""InFlight: the slots a backend is working on, finished in the order they were submitted.

Every ring driver (:mod:`streamconv.run.ring` for Pipeline, :mod:`streamconv.embed.streamfilter`,
the GStreamer element's engine) keeps its frames in order with it; it is the only code that calls
a backend's ``submit``, ``is_done`` and ``wait``.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any, Generic, Iterator, TypeVar

from ..frames.slots import FrameMeta, Slot

if TYPE_CHECKING:
    from ..backends.protocol import Backend

Note = TypeVar("Note")


class InFlight(Generic[Note]):
    """The slots a backend is working on, oldest first: submitted in order, finished in order.

    Both ring drivers keep their frames in order with it: Pipeline's compute thread retires
    slots as soon as the backend reports them done and hands them to the writer; StreamFilter
    retires the oldest when a result is asked for or the ring is full. Each slot travels with
    a note of its driver's (StreamFilter: the shape of the caller's frame; Pipeline: None).

    A backend with a ``delay`` (stages across frames) puts out frame i's output on the slot of
    a later frame: each frame's meta, start, counts at read and note wait here (``owed``) and go
    onto the slot that carries its output, so a driver sees its frames come out in order with
    their own timestamps; a slot that carried none comes out with ``has_output`` False and no
    meta.
    :meth:`flush` puts out the last ones through free slots.

    Args:
        backend: the backend the slots belong to (a :class:`streamconv.backends.protocol.Backend`).
    """

    def __init__(self, backend: Backend) -> None:
        self._backend = backend
        self._slots: deque[tuple[Slot, Note]] = deque()
        # (meta, started, counts_at_read, note) of each frame whose output is still to come
        self._owed: deque[tuple[FrameMeta | None, float, tuple[int, int], Any]] = deque()
        self._assigned = 0  # owed frames whose output is on a slot in flight

    def __len__(self) -> int:
        return len(self._slots)

    @property
    def owed(self) -> int:
        """Frames submitted whose output is still to come (not yet retired)."""
        return len(self._owed)

    @property
    def unflushed(self) -> int:
        """Frames submitted whose output no submitted slot carries yet: :meth:`flush` puts them
        out."""
        return len(self._owed) - self._assigned

    def submit(self, slot: Slot, note: Note = None) -> None:
        """Queue ``slot``'s frame on the backend and keep it as the newest (not if submit
        raised)."""
        frame = (slot.meta, slot.started, slot.counts_at_read, note)
        self._backend.submit(slot)
        self._owed.append(frame)
        self._slots.append((slot, self._claim(slot)))

    def flush(self, slot: Slot) -> bool:
        """Queue the next owed output (of a chain with stages across frames) into free ``slot``;
        False when none is owed (the backend then starts a new stream at its next submit)."""
        if not self.unflushed or not self._backend.flush(slot):
            while len(self._owed) > self._assigned:  # none left to come: the stream is over
                self._owed.pop()
            self.end_stream()
            return False
        self._slots.append((slot, self._claim(slot)))
        return True

    def end_stream(self) -> None:
        """Tell the backend its stream is over: the next frame submitted starts a new window
        (a backend without stages across frames may implement the protocol without
        ``end_stream``: it holds no frames)."""
        end_stream = getattr(self._backend, "end_stream", None)
        if end_stream is not None:
            end_stream()

    def _claim(self, slot: Slot) -> Any:
        """Put the oldest owed frame's meta, start and counts at read on ``slot`` if it carries an
        output, and return that frame's note (None for a slot without output)."""
        if not slot.has_output:
            slot.meta = None
            return None
        meta, started, counts, note = self._owed[self._assigned]
        self._assigned += 1
        slot.meta, slot.started, slot.counts_at_read = meta, started, counts
        return note

    @property
    def oldest(self) -> tuple[Slot, Note]:
        """The oldest slot and its note, still in flight (IndexError when there is none)."""
        return self._slots[0]

    def retire(self) -> tuple[Slot, Note]:
        """Take out the oldest slot and wait until its frame is in ``host_out``. When the wait
        raises (a GPU fault), the slot is out of the queue and its frame is lost."""
        slot, note = self._slots.popleft()
        if slot.has_output:
            self._owed.popleft()
            self._assigned -= 1
        self._backend.wait(slot)
        return slot, note

    def retire_done(self) -> Iterator[tuple[Slot, Note]]:
        """Retire the oldest slots for as long as the backend says they are done; never blocks."""
        while self._slots and self._backend.is_done(self._slots[0][0]):
            yield self.retire()

    def drain(self) -> Iterator[tuple[Slot, Note]]:
        """Retire every slot, oldest first, waiting for each."""
        while self._slots:
            yield self.retire()

    def salvage(self) -> Iterator[tuple[Slot, Note]]:
        """After a failed submit, retire the slots still in flight, oldest first, while the
        backend still can: the first failed wait ends it quietly (a GPU whose context failed
        cannot finish them; those frames are lost, and the submit's error is the one to report)."""
        while self._slots:
            try:
                retired = self.retire()
            except Exception:
                return
            yield retired

    def release(self, free: list[Slot]) -> None:
        """Let every frame in flight go, oldest first: each slot goes back to ``free`` before
        it is waited for, so that a fault in the wait loses no slot."""
        self._owed.clear()
        self._assigned = 0
        self.end_stream()
        while self._slots:
            slot, _ = self._slots.popleft()
            free.append(slot)
            self._backend.wait(slot)
