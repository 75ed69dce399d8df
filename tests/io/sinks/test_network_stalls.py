"""Network peers that are slow or stop taking part without going away, against real sockets on
127.0.0.1: a receiver that accepts the connection and then reads nothing more, and a sender
whose stream comes in steadily but slowly, as a live one does."""

from __future__ import annotations

import signal
import socket
import threading
import time
from fractions import Fraction

import pytest

from streamconv.io.sinks.listen import listen_address
from streamconv.io.sinks.network import NetworkSink

from helpers.cli import assert_error
from helpers.network import (FLOOD, Hoarder, connect_when_listening, free_port, progress_frames,
                             read_output, session)

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
    from helpers.processes import Run

    hoarder, progress = Hoarder(), tmp_path / "progress.txt"
    try:
        run = Run("run", *FLOOD, "-o", hoarder.url, "--progress", str(progress), cwd=tmp_path)
        wait_until_stalled(run, progress)
        run.process.send_signal(signal.SIGTERM)
        code = run.finish(timeout=60)
    finally:
        hoarder.close()
    assert code == 143, run.stderr
    assert "Traceback" not in run.stderr and \
        "the receiver took nothing for 10 s" in run.stderr, run.stderr


def test_a_listening_output_whose_receiver_stops_reading_ends_after_its_timeout(cli):
    """With ``listen=1`` streamconv sends through its own socket, which had no time limit either:
    ``timeout`` (microseconds, as FFmpeg's tcp reads it) bounds each send, 10 s by default."""
    port = free_port()
    url = f"tcp://127.0.0.1:{port}?listen=1&timeout=1000000"
    connections: list[socket.socket] = []
    threading.Thread(target=lambda: connections.append(connect_when_listening(port)),
                     daemon=True).start()
    try:
        result = cli("run", *FLOOD, "-o", url, "-q", timeout=60)
    finally:
        for connection in connections:
            connection.close()
    assert_error(result, 8, f"sending to {url} failed after", "the receiver took nothing for 1 s")
    sink = NetworkSink(f"tcp://127.0.0.1:{port}?listen=1", width=64, height=48,
                       frame_rate=Fraction(25))
    assert listen_address(sink._send_to)[3] == 10.0
    sink.abort()


class Trickle:
    """Serves an MPEG-TS stream one 188-byte transport packet every 25 ms, then closes: never
    silent for long, yet its probe takes longer than a short timeout (a live stream's, in real
    time)."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"tcp://127.0.0.1:{self.listener.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        try:
            connection, _ = self.listener.accept()
        except OSError:  # closed by close()
            return
        with connection:
            for start in range(0, len(self.data), 188):
                connection.sendall(self.data[start:start + 188])
                time.sleep(0.025)

    def close(self) -> None:
        self.listener.close()


def test_a_stream_that_keeps_sending_is_opened_however_long_its_probe_takes(cli, tmp_path):
    """--timeout is a silence: the opening was bounded as a whole, so a stream whose probe took
    longer than the timeout while data came in steadily was refused ("no data within the 1 s
    timeout"). A server that says nothing is still refused after the timeout (test_reliability)."""
    server, out = Trickle(session(range(12))), tmp_path / "out.mkv"
    try:
        result = cli("run", server.url, "--timeout", "1", "-o", str(out), "--filter", "identity",
                     "--backend", "cpu", "--no-progress", "-q", timeout=60)
    finally:
        server.close()
    assert result.returncode == 0, result.stderr
    assert len(read_output(out)[0]) == 12


@pytest.mark.parametrize("scheme", ["tcp", "http", "rtmp", "rtsp", "udp"])
def test_an_input_that_never_answers_is_still_refused_after_its_timeout(cli, tmp_path, scheme):
    """The openings bounded by silence alone still end on a server that accepts and says nothing
    (RTMP: its handshake); the others (RTSP, UDP with nothing sent) are bounded whole."""
    listener = socket.create_server(("127.0.0.1", 0))  # accepts (the backlog), never answers
    url = f"{scheme}://127.0.0.1:{listener.getsockname()[1]}/live/x"
    try:
        result = cli("run", url, "--timeout", "1", "-o", str(tmp_path / "out.mkv"), "--backend",
                     "cpu", "--no-progress", "-q", timeout=60)
    finally:
        listener.close()
    # RTSP's said "Invalid data"
    assert_error(result, 4, f"cannot open input {url}", "within the 1 s timeout")
    assert list(tmp_path.iterdir()) == []
