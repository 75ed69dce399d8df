"""Network outputs and inputs against real listeners on 127.0.0.1: MPEG-TS over TCP and UDP, FLV
over TCP, FFmpeg options passed through (--input-option, --output-option), and --reconnect with
a server that drops the connection, stalls, comes back, or never does.

RTMP and RTSP are published to FFmpeg's own servers in test_network_publish.py. SRT needs libsrt,
which PyAV's FFmpeg lacks: its scheme only picks the container (MPEG-TS), tested here over TCP.
"""

from __future__ import annotations

import io
import json
import signal
import socket
import threading
import time
from fractions import Fraction

import av
import numpy as np
import pytest

import streamconv
from streamconv.io.sinks.network import NetworkSink, with_query
from streamconv.io.spec import network_scheme, parse_output

from helpers.cli import assert_error, assert_ok
from helpers.network import (COMMON, RATE, SPEC, UdpReceiver, assert_same_pictures, listening,
                             connect_when_listening, expected_frames, free_port, progress_frames,
                             read_output, session)

def decode(data: bytes, container: str) -> list[np.ndarray]:
    with av.open(io.BytesIO(data), format=container) as stream:
        return [frame.to_ndarray(format="rgb24") for frame in stream.decode(video=0)]


class Receiver:
    """A TCP listener (bound before anything connects) that keeps every byte of each connection."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.data = bytearray()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        connection, _ = self.listener.accept()
        with connection:
            while chunk := connection.recv(65536):
                self.data.extend(chunk)

    def received(self) -> bytes:
        self._thread.join(timeout=30)
        self.listener.close()
        return bytes(self.data)


@pytest.mark.parametrize("container", ["mpegts", "flv"])
def test_a_tcp_output_sends_every_frame_as_it_is_written(cli, tmp_path, container):
    receiver = Receiver()
    extra = () if container == "mpegts" else ("--format", "flv")  # mpegts is tcp's default
    result = cli("run", SPEC, "-o", f"tcp://127.0.0.1:{receiver.port}", *extra, "--crf", "0",
                 *COMMON, timeout=60)
    assert_ok(result)
    assert_same_pictures(decode(receiver.received(), container), expected_frames())
    assert list(tmp_path.iterdir()) == []  # nothing local: no temporary file


def test_a_udp_output_reaches_a_bound_socket(cli):
    receiver = UdpReceiver()
    result = cli("run", SPEC, "-o", receiver.url, "--crf", "0", *COMMON, timeout=60)
    assert_ok(result)
    assert_same_pictures(decode(receiver.received(), "mpegts"), expected_frames())


def test_output_options_reach_the_protocol_listen_waits_for_a_receiver(tmp_path):
    port = free_port()
    result: dict = {}

    def run() -> None:
        from helpers.cli import run_cli
        result["cli"] = run_cli("run", SPEC, "-o", f"tcp://127.0.0.1:{port}", "--output-option",
                                "listen=1", "--crf", "0", *COMMON, timeout=60)

    runner = threading.Thread(target=run)
    runner.start()
    data = bytearray()
    with connect_when_listening(port) as connection:
        while chunk := connection.recv(65536):
            data.extend(chunk)
    runner.join(timeout=60)
    assert_ok(result["cli"])
    assert_same_pictures(decode(bytes(data), "mpegts"), expected_frames())


def test_input_options_reach_the_protocol_listen_takes_a_sender(cli, tmp_path):
    port = free_port()
    payload = session(range(12))
    out = tmp_path / "out.mkv"
    sender = threading.Thread(target=lambda: connect_when_listening(port).sendall(payload) or None,
                              daemon=True)
    sender.start()
    result = cli("run", f"tcp://127.0.0.1:{port}", "--input-option", "listen=1", "-o", str(out),
                 *COMMON, timeout=60)
    assert_ok(result)
    with av.open(str(out)) as container:
        assert sum(1 for _ in container.decode(video=0)) == 12


def test_an_unreachable_output_exits_6(cli):
    result = cli("run", SPEC, "-o", f"tcp://127.0.0.1:{free_port()}", *COMMON, timeout=60)
    assert_error(result, 6, "cannot send to tcp://127.0.0.1")


@pytest.mark.parametrize("url",
                         ["http://127.0.0.1:1/live.ts", "HTTPS://example.invalid/x.mp4",
                          "ftp://h/x.mkv"])
def test_an_output_url_of_a_scheme_streamconv_does_not_send_to_is_named_as_such(cli, tmp_path, url):
    """It was taken for a path ("output folder does not exist: http:/127.0.0.1:1")."""
    result = cli("run", SPEC, "-o", url, *COMMON, cwd=tmp_path, timeout=60)
    assert_error(result, 6, f"streamconv does not send to {url.split(':')[0]}:// URLs",
                 "udp:// and tcp://")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("args, fragment", [
    (("--input-option", "rtsp_transport"), "expected KEY=VALUE"),
    (("--output-option", "=1", "-o", "udp://127.0.0.1:9"), "expected KEY=VALUE"),
    (("--output-option", "listen=1"), "apply to an output"),
    (("--input-option", "a=b"), "--input-option applies to video files and streams"),
    (("--reconnect",), "--reconnect and --reconnect-timeout apply to URL inputs"),
])
def test_misused_network_options_are_usage_errors(cli, args, fragment):
    result = cli("run", SPEC, *args, *COMMON)
    assert result.returncode == 2 and fragment in result.stderr, result.stderr


def test_network_outputs_are_told_apart_from_files():
    assert [network_scheme(o)
            for o in ("rtmp://h/app/key", "SRT://h:1", "udp://h:1", "out.mp4", "file:x.ts",
                                          "http://h/x")] == ["rtmp", "srt", "udp", None, None, None]
    assert parse_output("rtsp://h/live").kind == "network" and parse_output(None).kind == "null"
    assert with_query("tcp://h:1", {"listen": "1"}) == "tcp://h:1?listen=1"
    assert with_query("udp://h:1?ttl=2", {"pkt_size": "1316"}) == "udp://h:1?ttl=2&pkt_size=1316"


def test_a_pipeline_sends_to_a_url_from_python():
    receiver = Receiver()
    sink_options = {"crf": 0, "muxer_options": {"mpegts_flags": "+resend_headers"}}
    streamconv.Pipeline(SPEC, ["identity"], f"tcp://127.0.0.1:{receiver.port}", backend="cpu",
                        progress=False, sink_options=sink_options).run()
    assert_same_pictures(decode(receiver.received(), "mpegts"), expected_frames())


def test_a_network_sink_asks_for_a_keyframe_every_two_seconds():
    sink = NetworkSink("udp://127.0.0.1:9", width=64, height=48, frame_rate=Fraction(25))
    assert sink.format == "mpegts" and sink._codec_options["g"] == "50"
    sink.abort()


# ---------------------------------------------------------------- --reconnect

class SessionServer:
    """Serves one byte string per connection, in turn. ``hold``: keep the connection open after
    sending (a stall) instead of closing it (a drop). After the last session the listener is
    closed: later connections are refused."""

    def __init__(self, sessions: list[bytes], hold: bool = False) -> None:
        self.sessions, self.hold = sessions, hold
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"tcp://127.0.0.1:{self.listener.getsockname()[1]}"
        self.held: list[socket.socket] = []
        self.served = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        for data in self.sessions:
            try:
                connection, _ = self.listener.accept()
            except OSError:  # closed by close()
                return
            self.served += 1
            connection.sendall(data)
            if self.hold:
                self.held.append(connection)  # open and silent: the reader stalls
            else:
                connection.close()
        self.listener.close()

    def close(self) -> None:
        self.listener.close()
        for connection in self.held:
            connection.close()


def run_reconnecting(cli, tmp_path, server: SessionServer, *args: str):
    out, stats = tmp_path / "out.mkv", tmp_path / "stats.json"
    try:
        result = cli("run", server.url, "--reconnect", "--timeout", "1", "-o", str(out),
                     "--stats-json", str(stats),
                     "--filter", "identity", "--backend", "cpu", "--no-progress", *args, timeout=90)
    finally:
        server.close()
    return result, out, stats


@pytest.mark.parametrize("hold", [False, True], ids=["drop", "stall"])
def test_reconnect_goes_on_after_a_drop_or_a_stall_and_counts_the_frames_missed(
        cli, tmp_path, hold):
    server = SessionServer([session(range(10)), session(range(20, 30))], hold=hold)
    result, out, stats = run_reconnecting(cli, tmp_path, server, "--max-frames", "20")
    assert_ok(result)
    assert "reopened" in result.stderr and server.served == 2
    assert json.loads(stats.read_text())["dropped"] == 10  # frames 10..19, by the stream's clock
    pictures, times = read_output(out)
    pattern = expected_frames(f"test:64x48@{RATE},frames=40")
    assert_same_pictures(pictures, pattern[:10] + pattern[20:30])
    steps = np.diff(times)
    assert np.allclose(steps[:9], 1 / RATE) and np.isclose(steps[9], 11 / RATE) and \
        np.allclose(steps[10:], 1 / RATE)


def test_reconnect_gives_up_after_its_timeout_and_keeps_the_frames(cli, tmp_path):
    server = SessionServer([session(range(10))])
    started = time.monotonic()
    result, out, stats = run_reconnecting(cli, tmp_path, server, "--reconnect-timeout", "1", "-q")
    elapsed = time.monotonic() - started
    assert_error(result, 8, "reopening it failed", "giving up")
    assert elapsed < 30
    pictures, _ = read_output(out)
    assert len(pictures) == 10
    assert json.loads(stats.read_text())["frames"] == 10


def test_without_reconnect_a_dropped_stream_simply_ends(cli, tmp_path):
    server = SessionServer([session(range(10)), session(range(20, 30))])
    out = tmp_path / "out.mkv"
    try:
        result = cli("run", server.url, "-o", str(out), *COMMON, timeout=60)
    finally:
        server.close()
    assert_ok(result)
    assert len(read_output(out)[0]) == 10 and server.served == 1


def test_a_receiver_that_goes_away_mid_run_ends_it_with_exit_8(cli):
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def take_some_and_leave() -> None:
        connection, _ = listener.accept()
        with connection:
            connection.recv(4096)  # the stream has started

    threading.Thread(target=take_some_and_leave, daemon=True).start()
    try:
        result = cli("run", "test:64x48@25,live", "-o", f"tcp://127.0.0.1:{port}", *COMMON,
                     timeout=60)
    finally:
        listener.close()
    assert_error(result, 8, f"sending to tcp://127.0.0.1:{port} failed after")


def test_a_listening_output_with_no_receiver_still_stops_on_a_second_signal(tmp_path):
    from helpers.processes import Run

    port = free_port()
    run = Run("run", "test:64x48,frames=30", "-o", f"tcp://127.0.0.1:{port}?listen=1",
              "--backend", "cpu", "--no-progress", cwd=tmp_path)
    # The first frame is filtered and the output waits for a receiver (a signal before that
    # ends the run at once, as while a source opens).
    run.wait_for(lambda: listening(port), "the output's listening socket")
    run.process.send_signal(signal.SIGINT)
    run.wait_for_line("SIGINT: stopping")
    run.process.send_signal(signal.SIGINT)
    assert run.finish(timeout=30) == 130, run.stderr
    assert "Traceback" not in run.stderr and list(tmp_path.iterdir()) == []


def test_a_listening_output_waits_as_long_as_its_listen_timeout(cli):
    result = cli("run", "test:64x48,frames=5", "-o",
                 f"tcp://127.0.0.1:{free_port()}?listen=1&listen_timeout=400",
                 "--backend", "cpu", "-q", "--no-progress", timeout=60)
    assert_error(result, 6, "no receiver connected to", "within 0.4 s")


def test_a_stalled_stream_ends_with_exit_8_counting_every_frame_kept_and_writes_its_stats(
        cli, tmp_path):
    """The decoder's held frames come out after the read fails: the message and --stats-json
    count them, as the output holds them."""
    server = SessionServer([session(range(10))], hold=True)
    out, stats = tmp_path / "out.mkv", tmp_path / "stats.json"
    try:
        result = cli("run", server.url, "--timeout", "1", "-o", str(out), "--stats-json",
                     str(stats), *COMMON, timeout=60)
    finally:
        server.close()
    message = assert_error(result, 8, "failed after")
    kept = len(read_output(out)[0])
    assert kept == 10 and f"failed after {kept} frames" in message
    record = json.loads(stats.read_text())
    assert record["frames"] == kept and record["exit_code"] == 8 and \
        "failed after" in record["error"]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_first_signal_finishes_the_output_while_an_input_without_timeout_sends_nothing(
        tmp_path, signum):
    """--timeout 0 waits for ever for the next packet; a first signal must still end the run with
    the frames so far kept, not wait for a read that never returns (a supervisor's SIGTERM)."""
    from helpers.processes import Run, leftovers

    server = SessionServer([session(range(40))], hold=True)
    out, progress = tmp_path / "out.mkv", tmp_path / "progress.txt"
    try:
        run = Run("run", server.url, "--timeout", "0", "--input-option", "analyzeduration=100000",
                  "-o", str(out),
                  "--progress", str(progress), "--filter", "identity", "--backend", "cpu",
                  cwd=tmp_path)
        # the rest wait in the decoder
        run.wait_for(lambda: progress_frames(progress) >= 30, "30 frames written")
        run.process.send_signal(signum)
        code = run.finish(timeout=60)
    finally:
        server.close()
    assert code == 128 + signum, run.stderr
    assert "finishing without it" in run.stderr and "Traceback" not in run.stderr
    assert len(read_output(out)[0]) >= 30 and leftovers(tmp_path) == []


def test_ctrl_c_ends_the_wait_on_an_input_server_that_never_sends(tmp_path):
    """FFmpeg's open waits in C; with --timeout 0 it would wait for ever with Ctrl-C unheard."""
    from helpers.processes import Run

    server = SessionServer([b""], hold=True)  # accepts, sends nothing, keeps the connection
    try:
        run = Run("run", server.url, "--timeout", "0", "-o", str(tmp_path / "out.mkv"), "--backend",
                  "cpu", "--no-progress", cwd=tmp_path)
        run.wait_for(lambda: server.served == 1, "the connection")
        run.wait_for(run.handlers_installed, "the signal handlers")
        run.process.send_signal(signal.SIGINT)
        code = run.finish(timeout=30)
    finally:
        server.close()
    assert code == 130, run.stderr
    assert "Traceback" not in run.stderr and list(tmp_path.iterdir()) == []


def test_an_rtsp_output_whose_server_never_answers_is_refused_after_its_timeout(cli):
    """FFmpeg's RTSP handshake holds the interpreter lock: without a time limit no signal would
    end the wait. The default is NETWORK_TIMEOUT; --output-option timeout (microseconds) sets it."""
    sink = NetworkSink("rtsp://127.0.0.1:9/x", width=64, height=48, frame_rate=Fraction(25))
    assert sink._muxer_options["timeout"] == "10000000"
    sink.abort()
    server = SessionServer([b""], hold=True)  # accepts, never answers
    started = time.monotonic()
    try:
        result = cli("run", "test:64x48,frames=5", "-o",
                     server.url.replace("tcp://", "rtsp://") + "/live",
                     "--output-option", "timeout=1000000", *COMMON, timeout=60)
    finally:
        server.close()
    assert_error(result, 6, "cannot send to rtsp://", "no answer within 1 s")
    assert time.monotonic() - started < 30


def interrupt_then_terminate(run) -> tuple[int, float]:
    """SIGINT, then SIGTERM 0.2 s later (a supervisor's after Ctrl-C): the exit code, and the
    seconds from the second signal to the exit."""
    run.process.send_signal(signal.SIGINT)
    time.sleep(0.2)
    run.process.send_signal(signal.SIGTERM)
    second = time.monotonic()
    code = run.finish(timeout=60)
    return code, time.monotonic() - second


def test_a_second_signal_aborts_at_once_while_an_input_without_timeout_sends_nothing(tmp_path):
    """A supervisor's SIGTERM after Ctrl-C, while the stop waits for a silent input: the abort
    must not wait for the read that never returns (it took 2 s: 1 s joining the reader, 1 s
    closing the input)."""
    from helpers.processes import Run, leftovers

    server = SessionServer([session(range(40))], hold=True)
    out, progress = tmp_path / "out.mkv", tmp_path / "progress.txt"
    try:
        run = Run("run", server.url, "--timeout", "0", "--input-option", "analyzeduration=100000",
                  "-o", str(out),
                  "--progress", str(progress), "--filter", "identity", "--backend", "cpu",
                  cwd=tmp_path)
        run.wait_for(lambda: progress_frames(progress) >= 30, "30 frames written")
        code, took = interrupt_then_terminate(run)
    finally:
        server.close()
    assert code == 143, run.stderr
    assert took < 1.0, (took, run.stderr)
    assert "Traceback" not in run.stderr and not out.exists() and leftovers(tmp_path) == []


def test_a_second_signal_aborts_several_silent_sources_at_once_without_tracebacks(tmp_path):
    """Several SOURCEs: the second signal reaches the pipelines as an abort from the main thread;
    each waited the 2 s patience for its silent input, then logged its abort as a failure with a
    traceback."""
    from helpers.processes import Run, leftovers

    servers = [SessionServer([session(range(40))], hold=True) for _ in range(2)]
    try:
        run = Run("run", *(s.url for s in servers), "--timeout", "0", "--input-option",
                  "analyzeduration=100000",
                  "-o", str(tmp_path / "out{n}.mkv"), "--filter", "identity", "--backend", "cpu",
                  cwd=tmp_path)
        run.wait_for(lambda: all(s.served for s in servers), "both inputs connected")
        time.sleep(1.5)  # the frames sent are read: both inputs are silent now
        code, took = interrupt_then_terminate(run)
    finally:
        for server in servers:
            server.close()
    assert code == 143, run.stderr
    assert took < 1.0, (took, run.stderr)
    assert "Traceback" not in run.stderr and "failed" not in run.stderr, run.stderr
    assert not list(tmp_path.glob("out*.mkv")) and leftovers(tmp_path) == []
