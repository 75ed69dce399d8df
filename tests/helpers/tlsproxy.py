"""A TLS front for a plain TCP server on 127.0.0.1, as RTMPS services put TLS before RTMP.

FFmpeg's RTMP server has no TLS listen mode, so an ``rtmps://`` output is tested through this:
it takes one TLS client with a self-signed certificate made by ``openssl``, and relays the
bytes both ways to the plain server's port until either side closes.
"""

from __future__ import annotations

import select
import shutil
import socket
import ssl
import subprocess
import sys
import threading
from pathlib import Path

from helpers.network import free_port


def self_signed_certificate(folder: Path) -> tuple[Path, Path] | None:
    """(certificate, key) files for 127.0.0.1 made in ``folder``, or None without openssl. The
    certificate names 127.0.0.1 as its address, so a client that checks certificates (FFmpeg 9
    does by default) takes it once told to trust it (``SSL_CERT_FILE``)."""
    if shutil.which("openssl") is None:
        return None
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key),
                    "-out",
                    str(cert), "-days", "1", "-subj", "/CN=127.0.0.1", "-addext",
                    "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    return cert, key


def refuses_certificate(cert: Path, key: Path, env: dict) -> bool:
    """Whether PyAV's FFmpeg, in a process with ``env``, refuses a TLS server with this
    certificate: FFmpeg 9 checks servers' certificates by default, and with GnuTLS (PyAV's wheels)
    it cannot be told to trust a test's own (GnuTLS reads no ``SSL_CERT_FILE``)."""
    front = TlsFront(cert, key, backend=free_port())  # nothing behind it: the handshake is the test
    probe = subprocess.run([sys.executable, "-c", PROBE, f"tls://127.0.0.1:{front.port}"], env=env,
                           timeout=60, capture_output=True, text=True)
    front.close()
    # OpenSSL refuses within the handshake; GnuTLS checks after it, and FFmpeg logs why it closed.
    return isinstance(front.error, ssl.SSLError) or "certificate" in probe.stderr.lower()


PROBE = """
import logging, sys
import av, av.logging
logging.basicConfig(stream=sys.stderr)
av.logging.set_level(av.logging.ERROR)
try:
    av.open(sys.argv[1], timeout=10)
except Exception:
    pass
"""
"""Opens a tls:// URL with PyAV, FFmpeg's error lines on standard error."""


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
                _relay(secure, plain)
        except (OSError, ssl.SSLError) as exc:
            self.error = exc

    def close(self) -> None:
        self.listener.close()
        self._thread.join(30)


def _relay(secure: ssl.SSLSocket, plain: socket.socket) -> None:
    """Copy bytes both ways in one thread (an OpenSSL connection must not be read and written
    from two at once). The client's end is passed on as a half-close, so the server sees the end
    of its stream; the server's end ends the relay. A client that closed cleanly (close_notify)
    reads as b"", after which nothing is sent to it."""
    sources = [secure, plain]
    while sources:
        ready, _, _ = select.select(sources, [], [], 60)
        if not ready:
            raise TimeoutError("neither side sent anything for 60 s")
        for source in ready:
            data = source.recv(65536)
            while source is secure and secure.pending():
                data += secure.recv(65536)  # decrypted already, where select cannot see it
            if source is plain:
                if not data:
                    return
                # once the client has ended, the server's last words are its own
                if secure in sources:
                    secure.sendall(data)
            elif data:
                plain.sendall(data)
            else:
                plain.shutdown(socket.SHUT_WR)
                sources.remove(secure)
