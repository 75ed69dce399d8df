"""SIGINT and SIGTERM: the first finishes the work in hand, a second aborts at once.

One :class:`SignalGuard` holds the handlers of the main thread from a command's first line
to its last (``streamconv`` installs it before its heavy imports), and a running pipeline
borrows it through :func:`stop_on_signals`. A signal ignored when the guard is installed (a
script's background job has SIGINT ignored) is left ignored. Otherwise:

- while a pipeline runs or finishes its output, the first signal asks it to stop: it drains
  the frames in flight and finalizes a playable file of them;
- outside a run (start-up, option checks, reports) nothing is half done, so the first signal
  raises :class:`~streamconv.errors.Interrupted` at once;
- a second signal always raises it at once; a file being finished is discarded.

Waits that may be long (an encoder's flush) run in a worker thread through
:func:`wait_interruptibly`, so that the handlers run at once in the waiting thread rather
than when a C call returns.
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Callable, Iterator, TypeVar

from .errors import Interrupted

SIGNALS = (signal.SIGINT, signal.SIGTERM)

_active: "SignalGuard | None" = None  # the guard whose handlers are installed, if any

T = TypeVar("T")


class SignalGuard:
    """The SIGINT/SIGTERM handlers of the main thread, installed by ``with SignalGuard():``
    (or :meth:`install`) and restored after. In any other thread it installs nothing.

    Attributes:
        received: the first signal received (its number), or None.
    """

    def __init__(self) -> None:
        self.received: int | None = None
        self.count = 0  # the signals received, all told
        self.deferred = False  # record signals only (see streamconv.launch), raise nothing
        self._on_first: Callable[[int], None] | None = None
        self._previous: dict[int, object] = {}  # the handlers replaced (not those left ignored)
        self._installed = False
        self._outer: SignalGuard | None = None

    def install(self) -> "SignalGuard":
        """Take over SIGINT and SIGTERM (main thread only); returns self. A signal ignored
        when this is called stays ignored: a shell starts a script's background job (``cmd &``)
        with SIGINT ignored, so that a Ctrl-C meant for the script's foreground leaves it be
        (Python itself leaves such a SIGINT alone)."""
        global _active
        if threading.current_thread() is not threading.main_thread() or self._installed:
            return self
        for signum in SIGNALS:
            if signal.getsignal(signum) is not signal.SIG_IGN:
                self._previous[signum] = signal.signal(signum, self._handle)
        self._installed = True
        self._outer, _active = _active, self
        return self

    def restore(self) -> None:
        """Put back the handlers that were there before :meth:`install`."""
        global _active
        if not self._installed:
            return
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous, self._installed = {}, False
        _active = self._outer

    def __enter__(self) -> "SignalGuard":
        return self.install()

    def __exit__(self, *exc: object) -> None:
        self.restore()

    def _handle(self, signum: int, _frame) -> None:
        first = self.received is None
        if first:
            self.received = signum
        self.count += 1
        if self.deferred:
            return  # imports are running: an exception here could land in importlib's own code
        self._act(signum, first)

    def _act(self, signum: int, first: bool) -> None:
        """What a signal does once it may: the first one in a run stops the run (it finishes its
        output); any other raises Interrupted."""
        if first and self._on_first is not None:
            self._on_first(signum)  # a run in progress stops and finishes its output
            return
        raise Interrupted(signum)


@contextmanager
def stop_on_signals(stop: Callable[[int], None]) -> Iterator[SignalGuard | None]:
    """While the block runs, the first SIGINT/SIGTERM calls ``stop(signum)`` instead of raising,
    and a second raises :class:`Interrupted`. Uses the installed guard, or installs one for the
    block. In any other thread than the main one, signals are left alone and None is yielded
    (the main thread handles them: a batch stops its workers' pipelines itself).

    A signal received before the block (start-up) already raised; one received during a
    previous block counts as the first.
    """
    if threading.current_thread() is not threading.main_thread():
        yield None  # signals reach the main thread only: a batch's worker leaves them to it
        return
    guard = _active
    own = guard is None
    if own:
        guard = SignalGuard().install()
    if guard is None:
        yield None
        return
    outer, guard._on_first = guard._on_first, stop
    try:
        yield guard
    finally:
        guard._on_first = outer
        if own:
            guard.restore()


@contextmanager
def signals_held() -> Iterator[None]:
    """Hold SIGINT/SIGTERM for a few statements that must not be cut apart (a folder made and
    the name that removes it kept): a signal received meanwhile takes effect as the block ends,
    as it would have where it came. Outside the main thread, or with no guard, a plain block."""
    guard = _active
    if guard is None or guard.deferred or \
            threading.current_thread() is not threading.main_thread():
        yield
        return
    before, first_before = guard.count, guard.received is None
    guard.deferred = True
    try:
        yield
    finally:
        guard.deferred = False
    if guard.count == before or guard.received is None:
        return
    guard._act(guard.received, first_before)
    if guard.count > before + 1:  # a second signal came too
        raise Interrupted(guard.received)


def wait_interruptibly(work: Callable[[], T], *, name: str) -> T:
    """Run ``work()`` and return its result, or raise its exception.

    From the main thread with a guard installed, ``work`` runs in a daemon thread while this
    one waits, so a signal handler runs at once even if ``work`` sits in a long C call; if the
    handler raises, the exception propagates here and ``work`` is left to end on its own (the
    caller discards what it was making). Elsewhere ``work`` simply runs here.
    """
    if _active is None or threading.current_thread() is not threading.main_thread():
        return work()
    outcome: dict[str, object] = {}

    def run() -> None:
        try:
            outcome["result"] = work()
        except BaseException as exc:  # handed to the waiting thread
            outcome["error"] = exc

    worker = threading.Thread(target=run, name=name, daemon=True)
    worker.start()
    worker.join()  # lock waits are interrupted by signals: the handlers run here at once
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    return outcome["result"]  # type: ignore[return-value]
