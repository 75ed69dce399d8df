"""Network peers on 127.0.0.1 for the network tests: free ports, receivers, servers that stall."""

from __future__ import annotations

import io
import socket
import subprocess
import threading
import time
from pathlib import Path

import av
import numpy as np
import pytest

from streamconv.io.sources.pattern import parse_test_spec


SPEC = "test:64x48@25,frames=12"


COMMON = ("--filter", "identity", "--backend", "cpu", "--no-progress", "-q")


def expected_frames(spec: str = SPEC) -> list[np.ndarray]:
    """The test pattern's frames, as streamconv makes them."""
    return list(parse_test_spec(spec))


def assert_same_pictures(got: list[np.ndarray], want: list[np.ndarray]) -> None:
    """Frame count, size and content within what yuv420p encoding loses; each frame closer to
    its own original than to any other."""
    assert len(got) == len(want)
    for index, (frame, original) in enumerate(zip(got, want)):
        assert frame.shape == original.shape
        errors = [np.abs(frame.astype(int) - other.astype(int)).mean() for other in want]
        assert errors[index] < 6 and int(np.argmin(errors)) == index, (index, errors)


class UdpReceiver:
    """A UDP socket bound on loopback before the sender starts, with room for a whole run."""

    def __init__(self) -> None:
        self.socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
        self.socket.bind(("127.0.0.1", 0))
        self.url = f"udp://127.0.0.1:{self.socket.getsockname()[1]}"

    def received(self) -> bytes:
        """Every datagram sent, once the sender has exited (they wait in the socket's buffer)."""
        self.socket.settimeout(0.5)
        data = bytearray()
        try:
            while True:
                data.extend(self.socket.recv(65536))
        except socket.timeout:
            pass
        self.socket.close()
        return bytes(data)


def connect_when_listening(port: int, deadline: float = 30.0) -> socket.socket:
    """Connect to a listener that another process opens: refused until it listens."""
    ends = time.monotonic() + deadline
    while True:
        try:
            return socket.create_connection(("127.0.0.1", port), timeout=10)
        except ConnectionRefusedError:
            if time.monotonic() > ends:
                raise
            time.sleep(0.02)


def free_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        return probe.getsockname()[1]


def listening(port: int) -> bool:
    """Whether a TCP socket of this machine listens on 127.0.0.1:``port`` (/proc/net/tcp)."""
    address = f"0100007F:{port:04X}"
    rows = Path("/proc/net/tcp").read_text().splitlines()[1:]
    return any(row.split()[1] == address and row.split()[3] == "0A" for row in rows)  # 0A: LISTEN


RATE = 25


def session(indices) -> bytes:
    """An MPEG-TS stream of the pattern's frames at ``indices``, pts = index: a server whose
    clock runs on while nobody is connected."""
    frames = expected_frames(f"test:64x48@{RATE},frames=40")
    out = io.BytesIO()
    with av.open(out, "w", format="mpegts") as container:
        stream = container.add_stream("libx264", rate=RATE)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        stream.options = {"preset": "ultrafast", "qp": "0"}
        for index in indices:
            frame = av.VideoFrame.from_ndarray(frames[index], format="rgb24")
            frame.pts = index
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    return out.getvalue()


def read_output(out) -> tuple[list[np.ndarray], list[float]]:
    with av.open(str(out)) as container:
        frames = list(container.decode(video=0))
    return [f.to_ndarray(format="rgb24") for f in frames], [float(f.time) for f in frames]


def progress_frames(path) -> int:
    """The last ``frame=`` a --progress file reports (0 before its first block)."""
    text = path.read_text() if path.exists() else ""
    values = [int(line.split("=", 1)[1]) for line in text.splitlines() if line.startswith("frame=")]
    return values[-1] if values else 0


RECEIVER = Path(__file__).resolve().parent / "netreceiver.py"


TCP_TABLE = Path("/proc/net/tcp")


LISTEN = "0A"  # the state of a listening socket in /proc/net/tcp


def is_listening(port: int) -> bool:
    """True when a socket listens on 127.0.0.1:``port`` (or on every address)."""
    ends = {f"0100007F:{port:04X}", f"00000000:{port:04X}"}
    for line in TCP_TABLE.read_text().splitlines()[1:]:
        fields = line.split()
        if fields[1] in ends and fields[3] == LISTEN:
            return True
    return False


def wait_until_listening(port: int, server: subprocess.Popen, deadline: float = 30.0) -> None:
    ends = time.monotonic() + deadline
    while not is_listening(port):
        if server.poll() is not None:
            pytest.fail(f"the server exited ({server.returncode}) before listening: "
                        f"{server.stderr.read()}")
        if time.monotonic() > ends:
            pytest.fail(f"nothing listens on port {port} after {deadline} s")
        time.sleep(0.02)


# Frames that fill the sockets' buffers within a second or two (lossless, as fast as filtered).
FLOOD = ("test:320x240,frames=100000", "--filter", "identity", "--crf", "0", "--preset",
         "ultrafast", "--backend", "cpu", "--no-progress")


class Hoarder:
    """A TCP listener that accepts one receiver and never reads from it: a hung player, or a
    link gone dead without a reset."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        # inherited: fills sooner
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        self.url = f"tcp://127.0.0.1:{self.listener.getsockname()[1]}"
        self.connections: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        try:
            self.connections.append(self.listener.accept()[0])
        except OSError:  # closed by close()
            pass

    def close(self) -> None:
        self.listener.close()
        for connection in self.connections:
            connection.close()
