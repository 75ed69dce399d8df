"""Outputs that fit their container: WebM gets VP9 when no codec is asked for, AVI frames are
numbered at the frame rate (not a 1/600 time base), and a subtitle a container cannot hold is
left out with a hint that names one that can."""

from __future__ import annotations

from fractions import Fraction

import av
import pytest

from helpers.cli import assert_ok


@pytest.mark.parametrize("name, extra, codec",
                         [("out.webm", [], "vp9"), ("out.mkv", ["--codec", "mpeg4"], "mpeg4")],
                         ids=["webm-defaults-to-vp9", "an-explicit-codec-wins"])
def test_the_codec_fits_the_container_unless_one_is_asked_for(cli, tmp_path, name, extra, codec):
    if codec == "vp9" and "libvpx-vp9" not in av.codecs_available:
        pytest.skip("this FFmpeg has no libvpx-vp9")
    out = tmp_path / name
    assert_ok(cli("run", "test:96x64,frames=6", "-o", str(out), "--backend", "cpu", *extra,
                  "--no-progress", "-q"))
    with av.open(str(out)) as container:
        assert container.streams.video[0].codec_context.name == codec
        assert sum(1 for _ in container.decode(video=0)) == 6


def test_avi_is_written_at_the_frame_rate(cli, tmp_path, sample_clip):
    out = tmp_path / "out.avi"
    assert_ok(cli("run", str(sample_clip), "-o", str(out), "--backend", "cpu", "--max-frames", "50",
                  "--no-progress", "-q"))
    with av.open(str(out)) as container:
        video = container.streams.video[0]
        assert video.time_base == Fraction(1, 30) and video.average_rate == 30
        frames = list(container.decode(video))
    assert len(frames) == 50
    # AVI keeps no presentation times: with B-frames readers see decode-order guesses (from 1,
    # the B-frame delay), but every frame number once, on the 1/30 grid.
    numbers = sorted(f.pts for f in frames)
    assert numbers == list(range(numbers[0], numbers[0] + 50)) and numbers[0] <= 2


def test_a_subtitle_the_container_cannot_hold_is_left_out_naming_one_that_can(cli, tmp_path,
                                                                              corpus):
    source = tmp_path / "in.mp4"
    source.write_bytes(corpus["mp4"])  # H.264, AAC, MP2 and a mov_text subtitle
    result = cli("run", str(source), "-o", str(tmp_path / "out.mkv"), "--backend", "cpu",
                 "--no-progress", "-q")
    assert_ok(result)
    assert "(mov_text) cannot be stored in .mkv; not copied (.mp4 holds it)" in result.stderr




def test_filters_shows_a_presets_border(cli):
    result = cli("filters")
    assert_ok(result)
    assert "emboss (3x3), border replicate" in result.stdout


def test_the_cpu_fallback_notice_is_given_once_per_process(caplog):
    from streamconv.backends import _NOTICED, cuda_status

    if cuda_status(0)[0]:
        pytest.skip("CUDA is usable here: auto picks it without a notice")
    import streamconv

    _NOTICED.clear()  # as in a fresh process
    with caplog.at_level("WARNING"):
        for _ in range(3):
            streamconv.Filter("edge")
    notices = [r for r in caplog.records if "cuda unavailable" in r.getMessage()]
    assert len(notices) == 1
