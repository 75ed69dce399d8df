"""A TLS front for a plain TCP server on 127.0.0.1, as RTMPS services put TLS before RTMP.

FFmpeg's RTMP server has no TLS listen mode, so an ``rtmps://`` output is tested through this:
it takes one TLS client with a self-signed certificate made by ``openssl``, and relays the
bytes both ways to the plain server's port until either side closes.
"""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
import threading
from pathlib import Path


def self_signed_certificate(folder: Path) -> tuple[Path, Path] | None:
    """(certificate, key) files for 127.0.0.1 made in ``folder``, or None without openssl."""
    if shutil.which("openssl") is None:
        return None
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
                    str(cert), "-days", "1", "-subj", "/CN=127.0.0.1"], check=True, capture_output=True)
    return cert, key


class TlsFront:
    """Listens on ``port`` (0: any free one), takes one TLS client and relays it to
    127.0.0.1:``backend``; ``error`` holds what went wrong in the relay, if anything."""

    def __init__(self, cert: Path, key: Path, backend: int) -> None:
        self._context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self._context.load_cert_chain(cert, key)
        self._backend = backend
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        try:
            client, _ = self.listener.accept()
            with self._context.wrap_socket(client, server_side=True) as secure, \
                    socket.create_connection(("127.0.0.1", self._backend)) as plain:
                back = threading.Thread(target=_pump, args=(plain, secure), daemon=True)
                back.start()
                _pump(secure, plain)
                back.join(30)
        except (OSError, ssl.SSLError) as exc:
            self.error = exc

    def close(self) -> None:
        self.listener.close()
        self._thread.join(30)


def _pump(source: socket.socket, target: socket.socket) -> None:
    """Copy bytes from ``source`` to ``target`` until ``source`` ends; then end ``target``'s side."""
    try:
        while data := source.recv(65536):
            target.sendall(data)
    except OSError:
        pass
    try:
        target.shutdown(socket.SHUT_WR)
    except OSError:
        pass
