"""Network peers that stop taking part without going away, against real sockets on 127.0.0.1:
a receiver that accepts the connection and then reads nothing more."""

from __future__ import annotations

import signal
import socket
import threading
import time
from fractions import Fraction

from streamconv.io.listen import listen_address
from streamconv.io.netsink import NetworkSink
from test_cli import assert_error
from test_network import connect_when_listening, free_port, progress_frames

# Frames that fill the sockets' buffers within a second or two (lossless, as fast as filtered).
FLOOD = ("test:320x240,frames=100000", "--filter", "identity", "--crf", "0", "--preset", "ultrafast",
         "--backend", "cpu", "--no-progress")


class Hoarder:
    """A TCP listener that accepts one receiver and never reads from it: a hung player, or a
    link gone dead without a reset."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # inherited: fills sooner
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


def wait_until_stalled(run, progress) -> None:
    """Until the run has written frames and then none for 3 s: its sends wait on the receiver (a
    first wait of about a second can pass, as the kernel's buffers grow)."""
    run.wait_for(lambda: progress_frames(progress) > 0, "the first frames sent")
    last, since = progress_frames(progress), time.monotonic()
    while time.monotonic() - since < 3.0:
        assert run.process.poll() is None, run.stderr
        time.sleep(0.1)
        if progress_frames(progress) != last:
            last, since = progress_frames(progress), time.monotonic()


def test_a_first_signal_ends_a_run_whose_receiver_stopped_reading(tmp_path):
    """Finishing the stream after SIGTERM waited for ever on a receiver that took nothing more (the
    sends had no time limit); now they fail after 10 s and the run ends as the signal asked."""
    from test_signals import Run

    hoarder, progress = Hoarder(), tmp_path / "progress.txt"
    try:
        run = Run("run", *FLOOD, "-o", hoarder.url, "--progress", str(progress), cwd=tmp_path)
        wait_until_stalled(run, progress)
        run.process.send_signal(signal.SIGTERM)
        code = run.finish(timeout=60)
    finally:
        hoarder.close()
    assert code == 143, run.stderr
    assert "Traceback" not in run.stderr


def test_a_listening_output_whose_receiver_stops_reading_ends_after_its_timeout(cli):
    """With ``listen=1`` streamconv sends through its own socket, which had no time limit either:
    ``timeout`` (microseconds, as FFmpeg's tcp reads it) bounds each send, 10 s by default."""
    port = free_port()
    url = f"tcp://127.0.0.1:{port}?listen=1&timeout=1000000"
    connections: list[socket.socket] = []
    threading.Thread(target=lambda: connections.append(connect_when_listening(port)), daemon=True).start()
    try:
        result = cli("run", *FLOOD, "-o", url, "-q", timeout=60)
    finally:
        for connection in connections:
            connection.close()
    assert_error(result, 8, f"sending to {url} failed after", "the receiver took nothing for 1 s")
    sink = NetworkSink(f"tcp://127.0.0.1:{port}?listen=1", width=64, height=48, frame_rate=Fraction(25))
    assert listen_address(sink._send_to)[3] == 10.0
    sink.abort()
