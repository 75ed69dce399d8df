"""RTMP and RTSP outputs published to servers on 127.0.0.1: FFmpeg's own one-client listen modes
(RTMP's ``listen``, RTSP's ``rtsp_flags=listen``), run by PyAV in a child process
(tests/helpers/netreceiver.py), take what ``streamconv run`` sends and decode it.

The server takes exactly one client, so nothing may connect to it to see whether it is up: the
test waits until its port is in the kernel's table of listening sockets (/proc/net/tcp).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import av
import numpy as np
import pytest

from helpers.cli import assert_error, assert_ok
from helpers.clips import write_clip
from helpers.network import (COMMON, RECEIVER, TCP_TABLE, assert_same_pictures, free_port,
                             wait_until_listening)
from helpers.tlsproxy import TlsFront, refuses_certificate, self_signed_certificate

# FFmpeg's RTSP server asks TCP to wait -1000 ms for its client when no listen_timeout (seconds)
# is given, which TCP refuses ("Numerical result out of range"): the server needs one.
RTSP_SERVER = {"rtsp_flags": "listen", "rtsp_transport": "tcp", "listen_timeout": "20"}


def publish(cli, tmp_path: Path, source: Path, url: str, port: int, demuxer: str,
            server_options: dict,
            *args: str, send_to: str | None = None, env: dict | None = None) -> np.ndarray:
    """Start a server for ``url``, ``streamconv run source -o url ARGS`` to it (or to ``send_to``,
    a front of it), and return the frames the server decoded."""
    if not TCP_TABLE.is_file():
        pytest.skip("no /proc/net/tcp to see when the server listens")
    received = tmp_path / "received.npy"
    server = subprocess.Popen([sys.executable, str(RECEIVER), url, demuxer,
                               json.dumps(server_options),
                               str(received)], stderr=subprocess.PIPE, text=True)
    try:
        wait_until_listening(port, server)
        assert_ok(cli("run", str(source), "-o", send_to or url, *args, "--crf", "0", *COMMON,
                      timeout=60, env=env))
        _, errors = server.communicate(timeout=30)
        assert server.returncode == 0, errors
    finally:
        if server.poll() is None:
            server.kill()
            server.communicate()
    return np.load(received)


def frames_of(clip: Path) -> list[np.ndarray]:
    with av.open(str(clip)) as container:
        return [frame.to_ndarray(format="rgb24") for frame in container.decode(video=0)]


@pytest.fixture
def clip(tmp_path) -> Path:
    return write_clip(tmp_path / "clip.mp4", frames=12, size=(64, 48))


def test_an_rtmp_output_is_published_to_an_rtmp_server(cli, tmp_path, clip):
    port = free_port()
    url = f"rtmp://127.0.0.1:{port}/live/test"
    received = publish(cli, tmp_path, clip, url, port, "flv", {"listen": "1"})
    assert_same_pictures(list(received), frames_of(clip))


def test_an_rtmps_output_is_published_over_tls(cli, tmp_path, clip):
    made = self_signed_certificate(tmp_path)
    if made is None:
        pytest.skip("no openssl to make a certificate")
    # OpenSSL's CA file: the test's certificate
    trusted = dict(os.environ, SSL_CERT_FILE=str(made[0]))
    if refuses_certificate(*made, trusted):
        pytest.skip("this FFmpeg checks servers' certificates and its TLS library cannot be told "
                    "to trust the "
                    "test's own (FFmpeg 9 with GnuTLS, as in PyAV 19's wheels)")
    port = free_port()
    # TLS before FFmpeg's RTMP server, which has none of its own
    front = TlsFront(*made, backend=port)
    try:
        received = publish(cli, tmp_path, clip, f"rtmp://127.0.0.1:{port}/live/test", port, "flv",
                           {"listen": "1"},
                           send_to=f"rtmps://127.0.0.1:{front.port}/live/test", env=trusted)
    finally:
        front.close()
    assert front.error is None, front.error
    assert_same_pictures(list(received), frames_of(clip))


def test_an_rtmps_server_whose_certificate_ffmpeg_refuses_is_refused_with_the_reason(
        cli, tmp_path, clip):
    made = self_signed_certificate(tmp_path)
    if made is None or not refuses_certificate(*made, dict(os.environ)):
        pytest.skip("no openssl, or this FFmpeg does not check servers' certificates (FFmpeg 8 and "
                    "older)")
    front = TlsFront(*made, backend=free_port())
    try:
        result = cli("run", str(clip), "-o", f"rtmps://127.0.0.1:{front.port}/live/test", *COMMON,
                     timeout=60)
    finally:
        front.close()
    # It said "Input/output error" and no more.
    assert_error(result, 6,
                 f"cannot send to rtmps://127.0.0.1:{front.port}/live/test: Input/output error",
                 "certificate")


def test_an_rtsp_output_announces_and_records_to_an_rtsp_server(cli, tmp_path, clip):
    port = free_port()
    url = f"rtsp://127.0.0.1:{port}/live"
    received = publish(cli, tmp_path, clip, url, port, "rtsp", RTSP_SERVER, "--output-option",
                       "rtsp_transport=tcp")
    assert_same_pictures(list(received), frames_of(clip))


@pytest.mark.parametrize("path, args", [("rtmp://127.0.0.1:{port}/live/test", ()),
                                        ("rtsp://127.0.0.1:{port}/live",
                                         ("--output-option", "rtsp_transport=tcp"))])
def test_an_rtmp_or_rtsp_server_that_is_not_there_exits_6(cli, clip, path, args):
    url = path.format(port=free_port())
    result = cli("run", str(clip), "-o", url, *args, *COMMON, timeout=60)
    assert_error(result, 6, f"cannot send to {url}")


@pytest.mark.parametrize("scheme, option", [("rtmp", "rtmp_live=live"), ("rtmps", "tls_verify=1")])
def test_an_option_of_the_rtmp_connection_is_refused_not_ignored(cli, clip, scheme, option):
    url = f"{scheme}://127.0.0.1:{free_port()}/live/test"
    # PyAV opens the connection without options: it was dropped without a word (for rtmps, a
    # certificate check asked for and never made).
    result = cli("run", str(clip), "-o", url, "--output-option", option, *COMMON, timeout=60)
    assert_error(result, 6,
                 f"--output-option {option.partition('=')[0]}: an option of FFmpeg's RTMP "
                 "connection")
