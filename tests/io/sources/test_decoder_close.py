"""Closing a file source ends its decoder's stream first: a libavcodec decoder freed with frames
in flight on its worker threads can deadlock in avcodec_free_context, which hung a few runs in a
hundred at exit (PyAV 19, Python 3.13) when an error's traceback held the last reference."""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import av
import pytest

from helpers.clips import write_clip
from streamconv.io.open import open_source

W, H = 64, 48


def test_close_drains_the_decoder(tmp_path):
    clip = write_clip(tmp_path / "in.mkv", frames=12, size=(W, H))
    source = open_source(str(clip))
    decoder = source._stream.codec_context
    assert decoder.is_open
    source.close()
    with pytest.raises(av.EOFError):  # its stream was ended already
        decoder.decode(None)
    source.close()  # idempotent


def test_error_exits_do_not_hang(tmp_path):
    """Sixteen runs at once that open the input, then fail on the encoder's pixel format."""
    if "mpeg4" not in av.codecs_available:
        pytest.skip("this FFmpeg has no mpeg4 encoder")
    clip = write_clip(tmp_path / "in.mkv", pix_fmt="yuv420p10le", frames=6, size=(W, H))

    def run(i: int) -> int:
        command = [sys.executable, "-m", "streamconv", "run", str(clip), "-o",
                   str(tmp_path / f"out{i}.mkv"),
                   "--codec", "mpeg4", "--pix-fmt", "yuv420p10le", "--backend", "cpu", "-q",
                   "--no-progress"]
        return subprocess.run(command, capture_output=True, timeout=90).returncode

    with ThreadPoolExecutor(4) as pool:
        codes = list(pool.map(run, range(16)))
    assert codes == [6] * 16
    assert not list(tmp_path.glob("out*.mkv"))
