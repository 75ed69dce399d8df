"""An ``rtmp://`` or ``rtmps://`` output, sent from a child process that a stalled server cannot
hold up.

FFmpeg's RTMP connection takes no time limit through PyAV, and PyAV holds the interpreter lock
while it connects: a server that accepted and never answered its handshake held the run for ever,
Ctrl-C and SIGTERM included, and one that stopped reading mid-stream held every send. So the run's
muxer writes FLV into a pipe, and :mod:`streamconv.io.sinks.relay_child` (FFmpeg's own RTMP client,
in a process of its own) sends it on, each wait on the server bounded: it ends itself after
``send_within`` seconds of waiting. The run waits on the pipe in Python, a fraction of a second at a
time, so its signal handlers keep running, and kills the child if the pipe stays full for longer
than the child's own limit.
"""

from __future__ import annotations

import errno
import os
import select
import signal
import subprocess
import sys
import threading
import time

from ...errors import OutputError, StreamError
from . import relay_child
from .targets import MuxedTarget

POLL_SECONDS = 0.2
"""How long one wait for room in the pipe lasts before the child is looked at again."""
GRACE_SECONDS = 5.0
"""How much longer than the child's own limit the run waits for it (it starts, it exits)."""
# The child's file run as a script, without the working folder first on the module path (a
# user's av.py or signal.py there must not stand in for the real ones).
_RUN_CHILD = ("import runpy, sys; del sys.path[0]; "
              "runpy.run_path(sys.argv.pop(1), run_name='__main__')")


class RelayFailed(OSError):
    """Sending failed in the child; errno ETIMEDOUT where the server took nothing for the limit.
    ``connected``: whether the server had accepted the stream."""

    def __init__(self, code: int | None, reason: str, connected: bool) -> None:
        super().__init__(code, reason)
        self.connected = connected


class _PipeSender:
    """The pipe to the child as the file object PyAV writes the FLV to."""

    def __init__(self, target: "RelayTarget") -> None:
        self._target = target

    def write(self, data) -> int:
        self._target.send(memoryview(data).cast("B"))
        return len(data)


class RelayTarget(MuxedTarget):
    """The output target of an RTMP URL: :meth:`create` starts the child that sends to it.

    Args:
        target: the URL as given (messages name it).
        url: the URL the child opens.
        send_within: seconds the server may take nothing (its handshake too) before sending fails
            (0: no limit).
    """

    def __init__(self, target: str, url: str, send_within: float) -> None:
        super().__init__(target, url)
        self.send_within = send_within
        self._child: subprocess.Popen | None = None
        self._errors: list[str] = []
        self._reader: threading.Thread | None = None
        self._answered = threading.Event()  # connected, or the child ended

    def create(self) -> _PipeSender:
        """Start the child and wait until the server accepted the stream (the first frame's
        connection); return the file object the muxer writes to.

        Raises:
            OutputError: the child cannot be started, or the server cannot be reached, refuses
                the stream, or does not answer within ``send_within`` seconds.
        """
        try:
            self._child = subprocess.Popen(
                [sys.executable, "-c", _RUN_CHILD, relay_child.__file__, self.url,
                 repr(self.send_within)],
                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                start_new_session=True)  # a Ctrl-C at the terminal is the run's to act on
        except OSError as exc:
            raise OutputError(f"cannot send to {self.target}: {exc.strerror or exc}") from None
        started = time.monotonic()
        os.set_blocking(self._child.stdin.fileno(), False)
        self._reader = threading.Thread(target=self._read_errors, name="streamconv-relay-errors",
                                        daemon=True)
        self._reader.start()
        try:
            while not self._answered.wait(POLL_SECONDS):  # a signal's handler runs between waits
                if self.send_within and self._child.poll() is None and \
                        time.monotonic() - started > self.send_within + GRACE_SECONDS:
                    self._kill()
        except BaseException:
            self.discard()
            raise
        if not self.connected:
            self._child.wait()
            raise OutputError(f"cannot send to {self.target}: {self.reason(self._failure())}")
        return _PipeSender(self)

    def _read_errors(self) -> None:
        """Collect the child's lines; the first answer (connected, or the end) is signalled."""
        for line in self._child.stderr:
            self._errors.append(line.decode("utf-8", "replace").strip())
            if self._errors[-1] == relay_child.CONNECTED:
                self._answered.set()
        self._answered.set()

    def send(self, data: memoryview) -> None:
        """Write ``data`` into the pipe, waiting while it is full.

        Raises:
            RelayFailed: the child ended (it could not send), or the pipe stayed full for longer
                than the child's limit (the child is killed).
        """
        waited_since = time.monotonic()
        fd = self._child.stdin.fileno()
        while data:
            if self._child.poll() is not None:
                raise self._failure()
            _, ready, _ = select.select([], [fd], [], POLL_SECONDS)
            if ready:
                try:
                    written = os.write(fd, data)
                except BrokenPipeError:
                    continue  # the child is gone: poll() tells why
                except BlockingIOError:
                    written = 0
                if written:
                    data, waited_since = data[written:], time.monotonic()
                    continue
            if self.send_within and time.monotonic() - waited_since > self.send_within + \
                    GRACE_SECONDS:
                self._kill()
                raise RelayFailed(errno.ETIMEDOUT, os.strerror(errno.ETIMEDOUT), self.connected)

    @property
    def connected(self) -> bool:
        """Whether the server accepted the stream."""
        return relay_child.CONNECTED in self._errors

    def publish(self) -> None:
        """The container is finished: end the child's input and wait for it to send the rest.

        Raises:
            StreamError: (exit 8) sending the rest failed.
        """
        child = self._child
        if child is None:
            return
        try:
            child.stdin.close()
        except OSError:
            pass  # the child is gone: its exit tells why
        try:
            child.wait(timeout=self.send_within + GRACE_SECONDS if self.send_within else None)
        except subprocess.TimeoutExpired:
            self._kill()
        self._reader.join(timeout=POLL_SECONDS)
        if child.returncode != 0:
            raise StreamError(f"sending to {self.target} failed as the stream ended: "
                              f"{self.reason(self._failure())}")

    def reason(self, failure: RelayFailed) -> str:
        """What a message says of ``failure``: a stall names the limit."""
        if failure.errno != errno.ETIMEDOUT:
            return failure.strerror
        if failure.connected:
            return f"{failure.strerror} (the receiver took nothing for {self.send_within:g} s)"
        return f"{failure.strerror} (no answer within {self.send_within:g} s)"

    def discard(self) -> None:
        """Stop the child at once (what it had not sent is dropped)."""
        if self._child is not None and self._child.poll() is None:
            self._kill()

    def _kill(self) -> None:
        self._child.kill()
        self._child.wait()

    def _failure(self) -> RelayFailed:
        """Why the child ended (it has)."""
        if self._reader is not None:
            self._reader.join(timeout=1.0)  # its last line
        code = self._child.returncode
        if code in (-signal.SIGALRM, -signal.SIGKILL):  # its own limit, or the run's
            return RelayFailed(errno.ETIMEDOUT, os.strerror(errno.ETIMEDOUT), self.connected)
        reasons = [line for line in self._errors if line and line != relay_child.CONNECTED]
        return RelayFailed(errno.EIO, reasons[-1] if reasons
                           else f"the sending process ended ({code})", self.connected)
