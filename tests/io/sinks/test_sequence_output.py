"""What an image output (a sequence ``out%03d.png`` or one image ``still.png``) may never do:
follow a planted link, write over a file that appeared, leave a mix of two runs' images, or
take back images someone else wrote."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import av
import numpy as np
import pytest

from helpers.cli import assert_error, assert_ok, run_limited, run_quiet
from helpers.images import H, W, read_image, write_images

from streamconv.errors import OutputError
from streamconv.io.sinks.sequence import SequenceTarget


def png_bytes(picture: np.ndarray) -> bytes:
    """One RGB picture as a PNG file's bytes (what the sink's encoder hands over per frame)."""
    codec = av.CodecContext.create("png", "w")
    codec.width, codec.height, codec.pix_fmt = W, H, "rgb24"
    frame = av.VideoFrame.from_ndarray(picture, format="rgb24")
    return b"".join(bytes(packet) for packet in [*codec.encode(frame), *codec.encode(None)])


def random_pictures(count: int, seed: int = 5) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (count, H, W, 3), dtype=np.uint8)


def test_a_link_planted_at_an_images_name_never_leads_the_write_elsewhere(cli, tmp_path):
    pictures = write_images(tmp_path, count=3)
    precious = tmp_path / "precious.txt"
    precious.write_bytes(b"not an image")
    os.symlink("img001.png", tmp_path / "out001.png.tmp")  # FFmpeg's own temporary name
    os.symlink("precious.txt", tmp_path / ".out002.png.tmp")
    os.link(tmp_path / "precious.txt", tmp_path / "out003.png.tmp")
    inputs = {p.name: p.read_bytes() for p in tmp_path.glob("img*")}
    assert_ok(run_quiet(cli, "img%03d.png", "-o", "out%03d.png", "--filter", "identity",
                        cwd=tmp_path))
    assert {p.name: p.read_bytes() for p in tmp_path.glob("img*")} == inputs
    assert precious.read_bytes() == b"not an image"
    for number, picture in enumerate(pictures, 1):
        image = tmp_path / f"out{number:03d}.png"
        assert not image.is_symlink() and np.array_equal(read_image(image), picture)


def test_an_image_that_appears_during_the_run_is_left_as_it_is(tmp_path):
    pictures = random_pictures(3)
    target = SequenceTarget(tmp_path / "out%03d.png")
    target.write_image(png_bytes(pictures[0]))
    (tmp_path / "out002.png").write_bytes(b"another run's image")  # a second writer got there first
    with pytest.raises(OutputError, match="appeared while it was being written"):
        target.write_image(png_bytes(pictures[1]))
    target.discard(keep_finished=True)
    assert (tmp_path / "out002.png").read_bytes() == b"another run's image"
    assert np.array_equal(read_image(tmp_path / "out001.png"), pictures[0])
    # no temporary left
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out001.png", "out002.png"]


def test_taking_back_a_sequence_removes_its_own_images_and_no_one_elses(tmp_path):
    target = SequenceTarget(tmp_path / "out%03d.png")
    for picture in random_pictures(2):
        target.write_image(png_bytes(picture))
    (tmp_path / "out003.png").write_bytes(b"another writer's")
    (tmp_path / "other.png").write_bytes(b"unrelated")
    target.discard()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.png", "out003.png"]
    with pytest.raises(OutputError, match="taken back"):
        target.write_image(b"late")


def test_taking_back_an_overwrite_leaves_the_old_images_it_had_not_replaced(tmp_path):
    for number in range(1, 7):
        (tmp_path / f"out{number:03d}.png").write_bytes(b"old run")
    target = SequenceTarget(tmp_path / "out%03d.png", overwrite=True)
    for picture in random_pictures(2):
        target.write_image(png_bytes(picture))
    target.discard()  # a second signal: this run's images go, the four it never reached stay
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == \
        {f"out{n:03d}.png": b"old run" for n in range(3, 7)}


def test_overwrite_replaces_a_longer_sequence_whole(cli, tmp_path):
    for number in range(1, 10):
        (tmp_path / f"out{number:03d}.png").write_bytes(b"old run")
    (tmp_path / "out.png").write_bytes(b"not one of the sequence")
    pictures = write_images(tmp_path, count=4)
    assert_ok(run_quiet(cli, "img%03d.png", "-o", "out%03d.png", "--overwrite", cwd=tmp_path))
    assert sorted(p.name for p in tmp_path.glob("out*")) == ["out.png"] + [f"out{n:03d}.png"
                                                                           for n in range(1, 5)]
    for number, picture in enumerate(pictures, 1):
        assert np.array_equal(read_image(tmp_path / f"out{number:03d}.png"), picture)


def test_a_pattern_names_only_the_files_ffmpeg_would_write_for_it(cli, tmp_path):
    # %d prints 1, never 001, and %02d prints 01, never 001: another pattern's sequence beside
    # the output is neither refused as existing nor removed as an old image of this one
    pictures = write_images(tmp_path, count=2)
    others = {f"out{n:03d}.png": b"out%03d.png's own" for n in range(1, 4)}
    for name, data in others.items():
        (tmp_path / name).write_bytes(data)
    assert_ok(run_quiet(cli, "img%03d.png", "-o", "out%d.png", "--filter", "identity",
                        cwd=tmp_path))
    (tmp_path / "out7.png").write_bytes(b"an old image of out%d.png")
    for pattern in ("out%d.png", "out%02d.png"):
        assert_ok(run_quiet(cli, "img%03d.png", "-o", pattern, "--filter", "identity",
                            "--overwrite", cwd=tmp_path))
    assert sorted(p.name for p in tmp_path.glob("out*")) == ["out001.png", "out002.png",
                                                             "out003.png",
                                                             "out01.png", "out02.png", "out1.png",
                                                             "out2.png"]
    assert all((tmp_path / name).read_bytes() == data for name, data in others.items())
    assert np.array_equal(read_image(tmp_path / "out2.png"), pictures[1])


def test_a_full_disk_keeps_the_images_finished_and_says_so(tmp_path):
    # PNGs of a few hundred bytes
    flat = [np.full((H, W, 3), value, np.uint8) for value in (10, 90, 200)]
    for number, picture in enumerate([*flat, *random_pictures(2)], 1):
        (tmp_path / f"img{number:03d}.png").write_bytes(png_bytes(picture))
    result = run_limited(["run", "img%03d.png", "-o", "out%03d.png", "--filter", "identity",
                          "--backend", "cpu", "--no-progress", "-q"], file_size=2000, cwd=tmp_path)
    assert_error(result, 6, "failed after 3 frames", "the 3 images finished are kept")
    assert sorted(p.name for p in tmp_path.glob("*out*")) == ["out001.png", "out002.png",
                                                              "out003.png"]
    for number, picture in enumerate(flat, 1):
        assert np.array_equal(read_image(tmp_path / f"out{number:03d}.png"), picture)


def test_one_image_takes_one_frame_or_is_refused_whole(cli, tmp_path):
    pictures = write_images(tmp_path, count=3)
    assert_error(run_quiet(cli, "img%03d.png", "-o", "still.png", cwd=tmp_path), 6,
                 "still.png is one image and the input has more frames", "still%03d.png",
                 "--max-frames 1")
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("img")) == []
    assert_ok(run_quiet(cli, "img%03d.png", "-o", "still.png", "--max-frames", "1", "--filter",
                        "identity", cwd=tmp_path))
    assert np.array_equal(read_image(tmp_path / "still.png"), pictures[0])


def test_a_name_with_two_number_fields_is_refused_before_any_work(cli, tmp_path):
    write_images(tmp_path, count=2)
    assert_error(run_quiet(cli, "img%03d.png", "-o", "o%03d_%03d.png", cwd=tmp_path), 6,
                 "2 %d fields")
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("img")) == []


def test_every_image_extension_ffmpeg_writes_is_a_sequence(cli, tmp_path):
    pictures = write_images(tmp_path, count=2)
    assert_ok(run_quiet(cli, "img%03d.png", "-o", "o%03d.tga", "--filter", "identity",
                        cwd=tmp_path))
    assert sorted(p.name for p in tmp_path.glob("*o0*")) == ["o001.tga", "o002.tga"]
    for number, picture in enumerate(pictures, 1):
        assert np.array_equal(read_image(tmp_path / f"o{number:03d}.tga"), picture)


@pytest.mark.parametrize("option", ["--stats-json", "--progress"])
def test_a_report_named_like_a_future_image_is_refused_before_any_work(cli, tmp_path, option):
    write_images(tmp_path, count=3)
    assert_error(run_quiet(cli, "img%03d.png", "-o", "o%03d.png", option, "o002.png", cwd=tmp_path),
                 6, "one of the files of the output")
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("img")) == []


def test_an_image_published_stays_whatever_is_called_after(tmp_path: Path):
    picture = random_pictures(1)[0]
    target = SequenceTarget(tmp_path / "still.png")
    target.write_image(png_bytes(picture))
    assert not (tmp_path / "still.png").exists()  # one image is held until the run ends
    target.publish()
    target.discard()  # a late abort (a signal after the end) takes nothing back
    assert np.array_equal(read_image(tmp_path / "still.png"), picture)


SLOW_SEQUENCE_RUN = """
import os, signal, sys, threading, time
import streamconv
from streamconv.interrupts import SignalGuard
from streamconv.io.sinks.file import FileSink

send = FileSink._send
def slow_send(self, frame, meta):  # a slow disk: each image takes 50 ms to write
    time.sleep(0.05)
    return send(self, frame, meta)
FileSink._send = slow_send
with SignalGuard():
    pipeline = streamconv.Pipeline("test:160x120,frames=400", ["identity"], "o%03d.png", backend="cpu", ring=8)
    for delay in (1.0, 1.12):  # Ctrl-C, and a second one while an image is being written
        threading.Timer(delay, os.kill, (os.getpid(), signal.SIGINT)).start()
    try:
        pipeline.run()
    except KeyboardInterrupt:
        pass
time.sleep(0.3)  # a writer thread that went on would publish now
print(sorted(os.listdir(".")))
"""


def test_a_second_signal_leaves_no_image_behind_even_mid_write(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[3]))
    result = subprocess.run([sys.executable, "-c", SLOW_SEQUENCE_RUN], capture_output=True,
                            text=True, timeout=120, cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]", result.stdout
