"""Signals held for a few statements that must not be cut apart
(streamconv.interrupts.signals_held), with real signals sent to this process: one received in
the block takes effect as it ends."""

from __future__ import annotations

import os
import signal
import time

import pytest

from streamconv.errors import Interrupted
from streamconv.interrupts import SignalGuard, signals_held, stop_on_signals


def send(signum: int) -> None:
    """Send ``signum`` to this process and give the handler its turn (between bytecodes)."""
    os.kill(os.getpid(), signum)
    time.sleep(0.05)


def test_a_signal_outside_a_run_raises_as_the_held_block_ends():
    finished = False
    with SignalGuard(), pytest.raises(Interrupted) as raised:
        with signals_held():
            send(signal.SIGINT)
            finished = True  # not cut here
    assert finished and raised.value.signum == signal.SIGINT


def test_the_first_signal_held_in_a_run_asks_it_to_stop_and_a_second_raises():
    stopped: list[int] = []
    with SignalGuard(), stop_on_signals(stopped.append):
        with signals_held():
            send(signal.SIGTERM)
            assert stopped == []
        assert stopped == [signal.SIGTERM]
        with pytest.raises(Interrupted), signals_held():
            send(signal.SIGINT)
            assert stopped == [signal.SIGTERM]


def test_a_block_with_no_signal_runs_as_a_plain_one():
    with SignalGuard() as guard:
        with signals_held():
            value = 1
        assert value == 1 and guard.received is None and not guard.deferred
