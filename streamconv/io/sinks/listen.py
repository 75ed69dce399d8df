"""A ``tcp://HOST:PORT?listen=1`` output: streamconv waits for the receiver itself.

FFmpeg's tcp protocol would wait inside PyAV's open of the URL, which holds the interpreter
lock: no signal handler runs until a receiver comes, so Ctrl-C and SIGTERM did nothing. Here
the socket listens and accepts in Python, a fraction of a second at a time, and the muxer
writes through the connection as through any file object.
"""

from __future__ import annotations

import socket
import threading
import time
from urllib.parse import parse_qs, urlsplit

from ...errors import OutputError
from .targets import MuxedTarget

POLL_SECONDS = 0.2
"""How long one wait for a receiver lasts before a stop is looked for."""


def listen_address(url: str) -> tuple[str, int, float | None, float | None] | None:
    """(host, port, seconds to wait, seconds a send may take) of a ``tcp://`` URL whose query
    asks to listen (``listen=1``; ``listen_timeout`` in milliseconds and ``timeout`` in
    microseconds, as FFmpeg's; None: no limit), else None."""
    parts = urlsplit(url)
    given = parse_qs(parts.query)
    query = {key: values[-1] for key, values in given.items()}
    if parts.scheme.lower() != "tcp" or query.get("listen", "0") in ("", "0") or parts.port is None:
        return None
    # FFmpeg's tcp reads the first
    wait, send = query.get("listen_timeout"), given.get("timeout", [None])[0]
    within = timeout_seconds(send) if send else None
    return (parts.hostname or "", parts.port, int(wait) / 1000 if wait and int(wait) > 0 else None,
            within if within and within > 0 else None)


def timeout_seconds(microseconds: str) -> float | None:
    """FFmpeg's ``timeout`` option (microseconds) in seconds; None if it is not a number."""
    try:
        return int(microseconds) / 1e6
    except ValueError:
        return None


class _Sender:
    """The connection as the file object PyAV writes a container to (every byte sent)."""

    def __init__(self, connection: socket.socket) -> None:
        self._connection = connection

    def write(self, data) -> int:
        self._connection.sendall(data)
        return len(data)


class ListeningTarget(MuxedTarget):
    """The output target of a listening tcp URL: :meth:`create` waits for the first receiver.

    Args:
        target: the URL as given (messages name it).
        host, port: where to listen. wait: seconds to wait for a receiver (None: until stopped).
        send_within: seconds a send may wait for the receiver to take data (None: for ever).
    """

    def __init__(self, target: str, host: str, port: int, wait: float | None,
                 send_within: float | None = None) -> None:
        super().__init__(target, target)
        self._address, self._wait, self._send_within = (host, port), wait, send_within
        self._stopped = threading.Event()
        self._connection: socket.socket | None = None

    def create(self) -> _Sender:
        """Listen, and return the first receiver's connection to write to.

        Raises:
            OutputError: the address cannot be listened on, no receiver came within the wait,
                or :meth:`discard` was called meanwhile (a second signal).
        """
        family = socket.AF_INET6 if ":" in self._address[0] else socket.AF_INET
        try:
            listener = socket.create_server(self._address, family=family)
        except OSError as exc:
            raise OutputError(f"cannot listen on {self.target}: {exc.strerror or exc}") from None
        ends = None if self._wait is None else time.monotonic() + self._wait
        with listener:
            listener.settimeout(POLL_SECONDS)
            while not self._stopped.is_set():
                try:
                    connection, _ = listener.accept()
                except socket.timeout:
                    if ends is not None and time.monotonic() > ends:
                        raise OutputError(f"no receiver connected to {self.target} within "
                                          f"{self._wait:g} s") from None
                    continue
                # a receiver that stops reading fails the send
                connection.settimeout(self._send_within)
                self._connection = connection
                return _Sender(connection)
        raise OutputError(f"stopped while {self.target} waited for a receiver")

    def publish(self) -> None:
        """The container is finished: close the connection (the receiver sees the end)."""
        self._close()

    def discard(self) -> None:
        """Stop waiting for a receiver, and close a connection made."""
        self._stopped.set()
        self._close()

    def _close(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            try:
                connection.shutdown(socket.SHUT_WR)
            except OSError:
                pass
            connection.close()
