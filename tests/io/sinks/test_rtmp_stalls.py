"""RTMP servers that stall, on 127.0.0.1: one that accepts the connection and never answers its
handshake, and FFmpeg's own RTMP server (tests/helpers/netreceiver.py) stopped with SIGSTOP
mid-stream. FFmpeg's RTMP connection takes no time limit through PyAV, and PyAV holds the
interpreter lock
while it connects: both held a run for ever, deaf to Ctrl-C, until streamconv sent RTMP from a
child process that ends itself after the output's timeout (streamconv.io.sinks.relay)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

from helpers.cli import assert_error
from helpers.network import (FLOOD, Hoarder, RECEIVER, free_port, progress_frames,
                             wait_until_listening)
from helpers.processes import Run


def silent_rtmp_server() -> tuple[Hoarder, str]:
    """A listener that accepts one client and never says a word (nor reads), and its rtmp:// URL."""
    server = Hoarder()
    return server, f"rtmp://127.0.0.1:{server.listener.getsockname()[1]}/live/x"


def test_an_rtmp_server_that_never_answers_is_refused_after_the_output_timeout(cli):
    server, url = silent_rtmp_server()
    try:
        started = time.monotonic()
        result = cli("run", "test:64x48,frames=30", "-o", url, "--output-option", "timeout=1000000",
                     "--backend", "cpu", "--no-progress", "-q", timeout=60)
        took = time.monotonic() - started
    finally:
        server.close()
    assert server.connections
    assert_error(result, 6, f"cannot send to {url}", "no answer within 1 s")
    assert took < 30


def test_signals_end_a_run_whose_rtmp_server_never_answers(tmp_path):
    """The wait for the server's answer runs in Python, a fraction of a second at a time: a
    first Ctrl-C lets it end as the timeout says, a second ends the run at once."""
    server, url = silent_rtmp_server()
    try:
        run = Run("run", "test:64x48,frames=30", "-o", url, "--output-option", "timeout=60000000",
                  "--backend", "cpu", "--no-progress", cwd=tmp_path)
        run.wait_for(lambda: server.connections, "the connection to the server")
        time.sleep(0.5)
        run.process.send_signal(signal.SIGINT)
        run.wait_for_line("SIGINT")
        run.process.send_signal(signal.SIGINT)
        code = run.finish(timeout=20)
    finally:
        server.close()
    assert code == 130, run.stderr
    assert "Traceback" not in run.stderr


def test_an_rtmp_server_that_stops_reading_mid_stream_ends_the_run_after_the_output_timeout(
        tmp_path):
    port = free_port()
    url = f"rtmp://127.0.0.1:{port}/live/test"
    server = subprocess.Popen([sys.executable, str(RECEIVER), url, "flv",
                               json.dumps({"listen": "1"}),
                               str(tmp_path / "received.npy")], stderr=subprocess.PIPE, text=True)
    progress = tmp_path / "progress.txt"
    try:
        wait_until_listening(port, server)
        run = Run("run", *FLOOD, "-o", url, "--output-option", "timeout=1000000", "--progress",
                  str(progress), cwd=tmp_path)
        run.wait_for(lambda: progress_frames(progress) > 30, "frames sent")
        server.send_signal(signal.SIGSTOP)  # connected, and reading nothing more
        code = run.finish(timeout=60)
    finally:
        server.kill()
        server.send_signal(signal.SIGCONT)
        server.communicate()
    assert code == 8, run.stderr
    assert f"sending to {url} failed after" in run.stderr and \
        "the receiver took nothing for 1 s" in run.stderr
    assert "Traceback" not in run.stderr
