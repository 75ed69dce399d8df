"""Image sequences in and out (img%03d.png), .gif and image codecs, and what a sequence output
may never write over."""

from __future__ import annotations

import os
from fractions import Fraction

import av
import numpy as np
import pytest

from helpers.cli import assert_error, assert_ok, run_quiet
from helpers.images import H, W, read_image, write_images

def test_a_png_sequence_comes_out_as_a_png_sequence_exactly_through_identity(cli, tmp_path):
    pictures = write_images(tmp_path)
    assert_ok(run_quiet(cli, "img%03d.png", "-o", "out%03d.png", "--filter", "identity",
                        cwd=tmp_path))
    written = sorted(path.name for path in tmp_path.iterdir() if not path.name.startswith("img"))
    assert written == [f"out{n:03d}.png" for n in range(1, 6)]  # no temporary or partial file left
    for number, picture in enumerate(pictures, 1):
        assert np.array_equal(read_image(tmp_path / f"out{number:03d}.png"), picture)


def test_a_sequence_is_read_at_the_rate_given(cli, tmp_path):
    write_images(tmp_path, count=4)
    out = tmp_path / "out.mkv"
    assert_ok(run_quiet(cli, str(tmp_path / "img%03d.png"), "--fps", "10", "-o", str(out)))
    with av.open(str(out)) as container:
        stream = container.streams.video[0]
        times = [f.pts * Fraction(stream.time_base) for f in container.decode(stream)]
    assert times == [Fraction(n, 10) for n in range(4)]


def test_a_sequence_defaults_to_25_frames_a_second(cli, tmp_path):
    write_images(tmp_path, count=3)
    out = tmp_path / "out.mkv"
    assert_ok(run_quiet(cli, str(tmp_path / "img%03d.png"), "-o", str(out)))
    with av.open(str(out)) as container:
        assert container.streams.video[0].average_rate == 25


@pytest.mark.parametrize("output, codec, count",
                         [("out%02d.jpg", "mjpeg", 1), ("anim.gif", "gif", 5)])
def test_images_and_gif_get_their_codecs(cli, tmp_path, output, codec, count):
    pictures = write_images(tmp_path, smooth=True)
    assert_ok(run_quiet(cli, "img%03d.png", "-o", output, cwd=tmp_path))
    first = tmp_path / (output % 1 if "%" in output else output)
    with av.open(str(first)) as container:
        assert container.streams.video[0].codec_context.name == codec
        frames = [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]
    assert len(frames) == count and frames[0].shape == (H, W, 3)  # frames in the first file
    assert len(list(tmp_path.glob("out*.jpg"))) == (5 if codec == "mjpeg" else 0)
    # Lossy, and gif's 256 colours: the picture is still there, not noise of its own.
    error = np.abs(frames[0].astype(int) - pictures[0]).mean()
    assert error < (4 if codec == "mjpeg" else 20), error


def test_an_explicit_codec_still_wins_over_the_extensions(cli, tmp_path):
    write_images(tmp_path, count=2)
    assert_ok(run_quiet(cli, "img%03d.png", "-o", "out%02d.tif", "--codec", "png", cwd=tmp_path))
    for name in ("out01.tif", "out02.tif"):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"  # PNG, not TIFF, inside


def test_existing_numbered_files_are_refused_before_the_first_image_unless_overwrite(cli, tmp_path):
    write_images(tmp_path, count=3)
    (tmp_path / "out002.png").write_bytes(b"keep me")
    result = run_quiet(cli, "img%03d.png", "-o", "out%03d.png", cwd=tmp_path)
    assert_error(result, 6, "exists", "out002.png", "--overwrite")
    assert sorted(p.name for p in tmp_path.glob("out*")) == ["out002.png"]
    assert (tmp_path / "out002.png").read_bytes() == b"keep me"
    assert_ok(run_quiet(cli, "img%03d.png", "-o", "out%03d.png", "--overwrite", cwd=tmp_path))
    assert sorted(p.name for p in tmp_path.glob("out*")) == ["out001.png", "out002.png",
                                                             "out003.png"]
    assert read_image(tmp_path / "out002.png").shape == (H, W, 3)


@pytest.mark.parametrize("output, why", [("img%03d.png", "is the same file as the input"),
                                         # img100.png on
                                         ("img%d.png", "names some of the files of the input"),
                                         ("img002.png", "is the same file as the input")])
def test_an_output_never_writes_over_an_input_image_even_with_overwrite(cli, tmp_path, output, why):
    write_images(tmp_path, count=3)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    result = run_quiet(cli, "img%03d.png", "-o", output, "--overwrite", cwd=tmp_path)
    assert_error(result, 6, why)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_a_sequence_sink_from_python_writes_numbered_images(tmp_path):
    from streamconv import Pipeline

    pictures = write_images(tmp_path, count=3)
    stats = Pipeline(str(tmp_path / "img%03d.png"), ["identity"], str(tmp_path / "frame_%d.png"),
                     backend="cpu").run()
    assert stats.frames == 3
    for number, picture in enumerate(pictures, 1):
        assert np.array_equal(read_image(tmp_path / f"frame_{number}.png"), picture)


def test_a_missing_sequence_exits_4(cli, tmp_path):
    assert_error(run_quiet(cli, str(tmp_path / "none%03d.png")), 4, "none%03d.png")


def test_a_sequence_or_pipe_checks_its_timeout_as_a_file_does(tmp_path):
    from streamconv.errors import SettingsError
    from streamconv.io.sources.demuxed import DemuxedSource

    for path in (str(tmp_path / "img%03d.png"), "pipe:0"):
        with pytest.raises(SettingsError, match="timeout must be 0 to"):
            DemuxedSource(path, timeout=-1.0)


def test_a_sink_owns_no_frame_buffer_once_send_returns(tmp_path):
    # PNG's encoder works on frames in threads after send returns: the sink must have copied the
    # frame by then, or the pictures come out torn by the next frame written into the same buffer.
    from streamconv import FileSink
    from streamconv.frames.slots import FrameMeta

    rng = np.random.default_rng(11)
    pictures = rng.integers(0, 256, (24, H, W, 3), dtype=np.uint8)
    slot = np.empty((H, W, 3), np.uint8)
    sink = FileSink(tmp_path / "out%03d.png", width=W, height=H, frame_rate=Fraction(25))
    for index, picture in enumerate(pictures):
        slot[:] = picture
        sink.send(slot, FrameMeta(index, index, Fraction(1, 25)))
        slot[:] = 255 - picture  # the caller reuses its buffer at once
    sink.close()
    for number, picture in enumerate(pictures, 1):
        assert np.array_equal(read_image(tmp_path / f"out{number:03d}.png"), picture), number


def test_a_sequence_starting_beyond_where_ffmpeg_looks_says_the_start_number_to_give(cli, tmp_path):
    write_images(tmp_path, count=8)
    for number in range(1, 7):  # img007.png onwards: FFmpeg looks for the first among 0 to 4
        (tmp_path / f"img{number:03d}.png").unlink()
    result = run_quiet(cli, "img%03d.png", "-o", "out.mkv", cwd=tmp_path)
    assert_error(result, 4, "its first image is img007.png")
    assert "--input-option start_number=7" in result.stderr
    assert_ok(run_quiet(cli, "img%03d.png", "--input-option", "start_number=7", "-o", "out.mkv",
                        cwd=tmp_path))
    with av.open(str(tmp_path / "out.mkv")) as container:
        assert sum(1 for _ in container.decode(video=0)) == 2  # img007.png and img008.png


def test_a_hole_in_an_input_sequence_is_never_passed_over_in_silence(cli, tmp_path):
    write_images(tmp_path, count=10)
    for number in (1, 2, 4):  # FFmpeg starts at img003 and stops at the hole after it
        (tmp_path / f"img{number:03d}.png").unlink()
    result = run_quiet(cli, "img%03d.png", "-o", "out.mkv", cwd=tmp_path)
    assert result.returncode == 13, result.stderr
    assert "img004.png is missing: the 6 numbered image(s) after it were not read" in result.stderr
    (tmp_path / "img001.png").write_bytes((tmp_path / "img003.png").read_bytes())
    (tmp_path / "img002.png").write_bytes((tmp_path / "img003.png").read_bytes())
    # the hole mid-way fails the read
    result = run_quiet(cli, "img%03d.png", "-o", "out2.mkv", cwd=tmp_path)
    assert_error(result, 8, "img004.png is missing from the sequence")


def test_an_image_whose_compressed_data_is_damaged_is_skipped_and_the_sequence_goes_on(
        cli, tmp_path):
    pictures = write_images(tmp_path, count=5)
    damaged = bytearray((tmp_path / "img003.png").read_bytes())
    # inside the deflate data: zlib fails
    damaged[300:320] = bytes(b ^ 0x55 for b in damaged[300:320])
    (tmp_path / "img003.png").write_bytes(bytes(damaged))
    result = run_quiet(cli, "img%03d.png", "-o", "out%03d.png", "--filter", "identity",
                       cwd=tmp_path)
    assert result.returncode == 13, result.stderr
    assert "1 video packet(s) could not be decoded and were skipped" in result.stderr
    for number, picture in enumerate([pictures[0], pictures[1], pictures[3], pictures[4]], 1):
        assert np.array_equal(read_image(tmp_path / f"out{number:03d}.png"), picture)
    assert not (tmp_path / "out005.png").exists()


def test_a_hole_is_looked_for_from_the_start_number_given(cli, tmp_path):
    write_images(tmp_path, count=12)
    for number in (1, 2, 3, 4, 5, 6, 9):  # img007, img008, then a hole before img010..img012
        (tmp_path / f"img{number:03d}.png").unlink()
    result = run_quiet(cli, "img%03d.png", "--input-option", "start_number=7", "-o", "out.mkv",
                       cwd=tmp_path)
    assert result.returncode == 13, result.stderr
    assert "img009.png is missing: the 3 numbered image(s) after it were not read" in result.stderr
    for number in (7, 8):  # images before the start number given are not a hole either
        (tmp_path / f"img{number - 6:03d}.png").write_bytes((
            tmp_path / f"img{number:03d}.png").read_bytes())
        (tmp_path / f"img{number:03d}.png").unlink()
    result = run_quiet(cli, "img%03d.png", "--input-option", "start_number=10", "-o", "out2.mkv",
                       cwd=tmp_path)
    assert_ok(result)
    assert "missing" not in result.stderr
    with av.open(str(tmp_path / "out2.mkv")) as container:
        assert sum(1 for _ in container.decode(video=0)) == 3  # img010 to img012


@pytest.mark.parametrize("where", [1, 3])
def test_a_fifo_named_like_an_image_of_an_input_sequence_is_refused_unopened(cli, tmp_path, where):
    write_images(tmp_path, count=4)
    fifo = tmp_path / f"img{where:03d}.png"
    fifo.unlink()
    os.mkfifo(fifo)  # no writer ever comes: FFmpeg's image2 demuxer waited for one for ever
    result = cli("run", "img%03d.png", "-o", "out.mkv", "--backend", "cpu", "-q", cwd=tmp_path,
                 timeout=60)
    assert_error(result, 4, f"input sequence img%03d.png: {fifo.name} is not a regular file")
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"img{n:03d}.png" for n in range(1, 5)]
