"""Counting the pictures NVDEC decodes with errors.

PyNvVideoCodec reports a picture that failed or was concealed (the driver's decode status) only
by printing ``Decode Error occurred for picture N`` to the C library's stdout; the frame is still
delivered. While an NVDEC source is open, file descriptor 1 is a pipe read by a relay thread:
those lines are counted (damage, as the CPU decoder's concealed frames are) and dropped, so they
cannot mix into a video written to stdout; every other byte goes on to the real stdout unchanged
and in order. The last source to close puts the real stdout back.
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading

MARKER = b"Decode Error occurred for picture"
SYNC = b"\x00streamconv-nvdec-sync\n"  # written by sync(): everything before it has been read


class _Relay:
    """The pipe on fd 1 and the thread that filters it (one per process, shared by sources)."""

    def __init__(self) -> None:
        sys.stdout.flush()
        self.saved = os.dup(1)
        read_end, write_end = os.pipe()
        os.dup2(write_end, 1)
        os.close(write_end)
        self.read_end = read_end
        self.errors = 0
        self.synced = threading.Condition()
        self.syncs_seen = 0
        self.thread = threading.Thread(target=self._relay, name="streamconv-nvdec-log", daemon=True)
        self.thread.start()

    def _relay(self) -> None:
        pending = b""
        while True:
            chunk = os.read(self.read_end, 1 << 16)
            if not chunk:
                break
            pending = self._forward(pending + chunk)
        if pending:
            _write_all(self.saved, pending)
        os.close(self.read_end)

    def _forward(self, data: bytes) -> bytes:
        """Write ``data`` on except marker lines; return a tail that may still become one."""
        out = []
        while data:
            line_end = data.find(b"\n")
            if line_end < 0:
                break
            line, data = data[: line_end + 1], data[line_end + 1:]
            if line.startswith(MARKER):
                self.errors += 1
            elif line == SYNC:
                with self.synced:
                    self.syncs_seen += 1
                    self.synced.notify_all()
            else:
                out.append(line)
        if data and not any(whole.startswith(data[: len(whole)]) or data.startswith(whole)
                            for whole in (MARKER, SYNC)):
            out.append(data)  # not the start of a marker: no reason to hold it back
            data = b""
        if out:
            _write_all(self.saved, b"".join(out))
        return data

    def sync(self) -> None:
        """Return once every byte written to fd 1 so far has been read and counted."""
        flush_c_stdout()
        with self.synced:
            wanted = self.syncs_seen + 1
            _write_all(1, SYNC)
            self.synced.wait_for(lambda: self.syncs_seen >= wanted, timeout=5.0)

    def close(self) -> None:
        flush_c_stdout()
        sys.stdout.flush()
        os.dup2(self.saved, 1)  # the pipe's last writer closes: the relay drains and ends
        self.thread.join()
        os.close(self.saved)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view):]
        except BrokenPipeError:
            return


_LIBC = ctypes.CDLL(None)


def flush_c_stdout() -> None:
    """Push what the C library buffered for stdout (printf output) into the pipe now."""
    _LIBC.fflush(None)


class DecodeErrorLog:
    """The decode errors NVDEC printed while this log was open (``count``); open it before the
    decoder is made, read ``count`` after :meth:`close` for the final figure."""

    _lock = threading.Lock()
    _relay: _Relay | None = None
    _users = 0

    def __init__(self) -> None:
        self._start = 0
        self._final: int | None = None
        self._opened = False

    def open(self) -> "DecodeErrorLog":
        with DecodeErrorLog._lock:
            if DecodeErrorLog._relay is None:
                DecodeErrorLog._relay = _Relay()
            else:
                # errors printed before this log opened are not its own
                DecodeErrorLog._relay.sync()
            DecodeErrorLog._users += 1
            self._start = DecodeErrorLog._relay.errors
            self._opened = True
        return self

    @property
    def count(self) -> int:
        """Pictures reported with decode errors since :meth:`open` (by any NVDEC source of the
        process)."""
        if self._final is not None:
            return self._final
        relay = DecodeErrorLog._relay
        return relay.errors - self._start if relay is not None else 0

    def close(self) -> None:
        """Stop counting (idempotent); the last open log restores the real stdout."""
        if self._final is not None:
            return
        if not self._opened:
            self._final = 0
            return
        with DecodeErrorLog._lock:
            relay = DecodeErrorLog._relay
            DecodeErrorLog._users -= 1
            if DecodeErrorLog._users == 0:
                relay.close()
                DecodeErrorLog._relay = None
            else:
                relay.sync()
            self._final = relay.errors - self._start
