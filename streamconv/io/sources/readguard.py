"""A source whose read can block in C for ever: a network input that sends nothing more, read
with no timeout.

A stopped run does not wait for such a read (streamconv.run.ring gives up on it after a while), so
the read must not write into buffers the run has since freed, nor find its input freed under it:
:meth:`ReadGuard.interrupt` makes a read that returns deliver nothing, and :meth:`ReadGuard.close`
leaves the release to a read still blocked, which does it when it returns.
"""

from __future__ import annotations

import threading
from typing import Callable, TypeVar

T = TypeVar("T")


class ReadGuard:
    """Mixin for a Source: reads go through :meth:`_guarded`; subclasses release their input in
    ``_release()`` (called once, by close() or by the read close() left it to)."""

    def _start_guard(self) -> None:
        self._reading = threading.Lock()  # held during a read
        self._interrupted = False
        self._release_after_read = False
        self._released = False

    def interrupt(self) -> None:
        """A stop was asked for (safe from any thread): a read still waiting for data delivers
        nothing when it returns, so that a run may finish without it."""
        self._interrupted = True

    def _guarded(self, read: Callable[[], T], deliver: Callable[[T], object]) -> object:
        """``deliver(read())``, or None once interrupted or closed meanwhile (then nothing is
        delivered; closed: the input is released here)."""
        with self._reading:
            got = read()
            if self._release_after_read:
                self._release_once()
                return None
            return None if self._interrupted else deliver(got)

    def close(self) -> None:
        """Release the input, unless a read is blocked in it: that read releases it when it
        returns (freed under it, it would crash)."""
        reading = getattr(self, "_reading", None)
        # An interrupted read is one the run has given up on (or an abort): not waited for.
        if reading is not None and not reading.acquire(timeout=0 if self._interrupted else 1.0):
            self._release_after_read = True
            if not reading.acquire(blocking=False):
                return
            # the read returned meanwhile, perhaps before it saw the flag: released here
        try:
            self._release_once()
        finally:
            if reading is not None:
                reading.release()

    def _release_once(self) -> None:
        if not getattr(self, "_released", False):
            self._released = True
            self._release()

    def _release(self) -> None:
        raise NotImplementedError
