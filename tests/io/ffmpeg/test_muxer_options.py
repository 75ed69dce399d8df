"""--output-option for a file, a pipe or an image sequence: an option the muxer has reaches it,
one it does not have is refused before any work (FFmpeg would drop it without a word)."""

from __future__ import annotations

import pytest

from streamconv.io.ffmpeg.muxer_options import unknown_muxer_options

from helpers.cli import assert_error, assert_ok

pytestmark = pytest.mark.skipif(unknown_muxer_options("mp4", "x.mp4", ["movflags"]) is None,
                                reason="PyAV's libavformat cannot be asked for its muxers' options "
                                       "here")

SOURCE = ["test:64x48,frames=4", "--backend", "cpu", "-q", "--no-progress"]


def test_an_option_the_muxer_has_reaches_it(cli, tmp_path):
    out = tmp_path / "fast.mp4"
    assert_ok(cli("run", *SOURCE, "-o", str(out), "--output-option", "movflags=+faststart"))
    data = out.read_bytes()
    assert data.index(b"moov") < data.index(b"mdat")  # faststart: the index before the media
    plain = tmp_path / "plain.mp4"
    assert_ok(cli("run", *SOURCE, "-o", str(plain)))
    # the option made the difference
    assert plain.read_bytes().index(b"moov") > plain.read_bytes().index(b"mdat")


@pytest.mark.parametrize("output, extra, message", [
    ("out.mp4", [],
     "--output-option movflag: the mp4 muxer has no such option, so FFmpeg would drop it"),
    ("out.mkv", [], "--output-option movflag: the matroska muxer has no such option"),
    ("-", ["--format", "mpegts"], "--output-option movflag: the mpegts muxer has no such option"),
    ("img%03d.png", [],
     "--output-option movflag: output {out} is written image by image by streamconv, so no "
                        "muxer option applies"),
])
def test_an_option_the_muxer_does_not_have_is_refused_before_any_work(cli, tmp_path, output, extra,
                                                                      message):
    out = output if output == "-" else str(tmp_path / output)
    # It was dropped without a word: a misspelt movflags=+faststart gave a file that was not.
    result = cli("run", *SOURCE, "-o", out, *extra, "--output-option", "movflag=+faststart",
                 cwd=tmp_path)
    assert_error(result, 6, message.format(out=out))
    assert result.stdout == "" and list(tmp_path.iterdir()) == []
