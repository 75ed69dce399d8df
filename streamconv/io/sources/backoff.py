"""The pauses between attempts to reopen a lost input: a growing wait, within a budget.

Shared by the camera (streamconv.io.sources.camera), which counts attempts, and by a reconnecting
network input (streamconv.io.sources.reconnect), which counts the time since the input was lost.
"""

from __future__ import annotations

import time
from typing import Callable, Iterator


class Backoff:
    """Attempt numbers, each after a pause: ``first`` seconds, doubled each time up to ``most``.

    Args:
        first, most: the first pause and the longest (seconds).
        attempts: the most attempts (None: no limit but ``within``; neither: until an attempt
            succeeds or a pause is cut short).
        within: seconds from the start (the loss) after which no attempt starts; an attempt
            whose pause would end after it is not made (None: no limit but ``attempts``).

    ``elapsed`` is the time since :meth:`pauses` started, ``attempts_made`` how many it gave.
    """

    def __init__(self, first: float, most: float, *, attempts: int | None = None,
                 within: float | None = None) -> None:
        self.first, self.most = first, max(first, most)
        self.attempts, self.within = attempts, within
        self.attempts_made = 0
        self._started = time.perf_counter()

    @property
    def elapsed(self) -> float:
        """Seconds since the pauses started."""
        return time.perf_counter() - self._started

    def pauses(self, sleep: Callable[[float], bool]) -> Iterator[int]:
        """Yield 1, 2, ... after each pause, until the attempts or the time run out.

        Args:
            sleep: waits the seconds given; returns False when the wait was cut short (the
                input is closing): the iteration then ends at once.
        """
        self._started = time.perf_counter()
        delay = self.first
        while self.attempts is None or self.attempts_made < self.attempts:
            if self.within is not None and self.elapsed + delay > self.within:
                return
            if not sleep(delay):
                return
            self.attempts_made += 1
            yield self.attempts_made
            delay = min(2 * delay, self.most)
