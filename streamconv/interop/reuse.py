"""Buffers reused by size: what the device-frame and page-locked host-frame pools share.

A buffer is taken for a size in bytes (a free one of that size, else a new one) and given
back when its frame is dropped; a few per size are kept for the next frames, the rest freed.
"""

from __future__ import annotations

import threading
from typing import Any, Callable


class ReusePool:
    """Buffers by size in bytes, reused once given back.

    Args:
        allocate: ``allocate(nbytes)`` makes a buffer (called outside the lock; may raise).
        free: ``free(buffer)`` releases one.
        keep: free buffers kept per size. max_taken: buffers out at once, at most (None: no cap).
    """

    def __init__(self, allocate: Callable[[int], Any], free: Callable[[Any], None], *,
                 keep: int = 4, max_taken: int | None = None) -> None:
        self._allocate, self._free_buffer = allocate, free
        self.keep, self.max_taken = keep, max_taken
        self._free: dict[int, list] = {}
        self._taken = 0
        self._lock = threading.Lock()
        self._closed = False
        self.allocated = 0  # buffers made so far (benchmarks show that a steady loop makes none)

    def take(self, nbytes: int) -> Any | None:
        """A buffer of ``nbytes``, or None when ``max_taken`` are out (or the pool is closed)."""
        with self._lock:
            if self._closed or (self.max_taken is not None and self._taken >= self.max_taken):
                return None
            blocks = self._free.get(nbytes)
            buffer = blocks.pop() if blocks else None
            self._taken += 1
        if buffer is None:
            try:
                buffer = self._allocate(nbytes)
            except BaseException:
                with self._lock:
                    self._taken -= 1
                raise
            self.allocated += 1
        return buffer

    def give_back(self, buffer: Any, nbytes: int) -> None:
        """Keep ``buffer`` for reuse, or free it (the pool is closed, or keeps enough of its
        size)."""
        with self._lock:
            self._taken -= 1
            blocks = self._free.setdefault(nbytes, [])
            if not self._closed and len(blocks) < self.keep:
                blocks.append(buffer)
                return
        self._free_buffer(buffer)

    def close(self) -> None:
        """Free the buffers kept for reuse; those still out are freed when they come back.
        Idempotent."""
        with self._lock:
            self._closed = True
            held = [buffer for blocks in self._free.values() for buffer in blocks]
            self._free.clear()
        for buffer in held:
            self._free_buffer(buffer)
