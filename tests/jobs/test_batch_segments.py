"""``batch --segments N``: each input cut at keyframes, filtered in segments and joined gives what a
one-piece batch gives (lossless FFV1 to compare pixels; the pts and audio packets too), with a true
manifest, a damaged and a broken input among them, --resume, the usage errors, and signals that
leave nothing half-written."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import numpy as np
import pytest

import streamconv
from streamconv.jobs.manifest import MANIFEST_NAME

from helpers.batches import batch, manifest_of
from helpers.clips import write_clip
from helpers.damage import flip_bytes
from helpers.processes import Run
from helpers.segments import decoded, make_clip, packets


@pytest.fixture
def inputs(tmp_path) -> Path:
    """Two clips with audio and a keyframe every 8 frames (FFV1 in Matroska, H.264 in MP4)."""
    folder = tmp_path / "in"
    folder.mkdir()
    make_clip(folder / "a.mkv", "ffv1")
    make_clip(folder / "b.mp4", "libx264")
    return folder


def test_a_segmented_batch_gives_what_a_one_piece_batch_gives(cli, tmp_path, inputs):
    (inputs / "broken.mp4").write_bytes(b"not a video at all" * 100)
    (inputs / "damaged.mp4").write_bytes(flip_bytes(write_clip(tmp_path / "clip.mp4").read_bytes(),
                                                    4, 300))
    lossless = ("--ext", "mkv", "--codec", "ffv1")
    whole = batch(cli, str(inputs), "-o", str(tmp_path / "whole"), *lossless)
    pieces = batch(cli, str(inputs), "-o", str(tmp_path / "pieces"), *lossless, "--segments", "2",
                   "-v")
    assert whole.returncode == pieces.returncode == 14, pieces.stderr  # some failed
    assert "b.mp4: h264 64x48 @ 25 fps, segment 1 (pts" in pieces.stderr
    one = {Path(r["input"]).name: r for r in manifest_of(tmp_path / "whole")["inputs"]}
    two = {Path(r["input"]).name: r for r in manifest_of(tmp_path / "pieces")["inputs"]}
    for name, record in two.items():
        assert (record["status"], record["frames"], record["exit_code"]) == \
               (one[name]["status"], one[name]["frames"], one[name]["exit_code"])
        assert record["output"] == str(tmp_path / "pieces" / Path(name).with_suffix(".mkv"))
    assert two["broken.mp4"]["status"] == "failed" and \
        "cannot open input" in two["broken.mp4"]["error"]
    assert two["damaged.mp4"]["status"] == "damaged" and two["damaged.mp4"]["damage"]
    for name in ("a", "b"):
        record = two[f"{name}.{'mkv' if name == 'a' else 'mp4'}"]
        assert record["status"] == "done" and record["frames"] == 48 and record["fps"] > 0
        got, expected = tmp_path / "pieces" / f"{name}.mkv", tmp_path / "whole" / f"{name}.mkv"
        assert record["bytes"] == got.stat().st_size
        (pts, pictures), (pts_whole, pictures_whole) = decoded(got), decoded(expected)
        assert pts == pts_whole and len(pts) == 48
        assert all(np.array_equal(x, y) for x, y in zip(pictures, pictures_whole))
        assert packets(got, "audio") == packets(expected, "audio") != []
    # No parts folder, temporary file or output of the broken input is left.
    assert sorted(p.name for p in (tmp_path / "pieces").iterdir()) == ["a.mkv", "b.mkv",
                                                                       "damaged.mkv", MANIFEST_NAME]


def test_resume_skips_what_a_segmented_batch_finished(cli, tmp_path, inputs):
    out = tmp_path / "out"
    # From Python, into H.264 (the default codec) in Matroska, whose parts' first packets come
    # back without a dts, and in MP4.
    result = streamconv.run_batch([str(inputs)], ["box:size=3"], out, backend="cpu", segments=2)
    assert result.exit_code == 0 and [r.status for r in result.records] == ["done", "done"]
    for name in ("a.mkv", "b.mp4"):
        assert decoded(out / name)[0] == decoded(inputs / name)[0]  # every frame, in order, clean
    (out / "b.mp4").unlink()
    stamp = os.stat(out / "a.mkv").st_mtime_ns
    killed, foreign = out / ".streamconv-segments-b.mp4.x1y2z3w4", out / ".streamconv-segments-c.mp4.x1y2z3w4"
    # the parts a killed batch left for b, and a folder of another output
    for folder in (killed, foreign):
        folder.mkdir()
        (folder / "part0000.mp4").write_bytes(b"part")
    resumed = batch(cli, str(inputs), "-o", str(out), "--segments", "2", "--resume")
    assert resumed.returncode == 0, resumed.stderr
    counts = manifest_of(out)["counts"]
    assert counts["skipped"] == 1 and counts["done"] == 1
    assert os.stat(out / "a.mkv").st_mtime_ns == stamp and (out / "b.mp4").is_file()
    assert not killed.exists() and foreign.is_dir()


@pytest.mark.parametrize("extra", [("--ray",), ("--processes", "2")])
def test_usage_errors(cli, tmp_path, inputs, extra):
    result = batch(cli, str(inputs), "-o", str(tmp_path / "out"), "--segments", "2", *extra)
    assert result.returncode == 2 and extra[0] in result.stderr and "--segments" in result.stderr
    assert not (tmp_path / "out").exists()
    with pytest.raises(streamconv.SettingsError, match="--ray"):
        streamconv.Batch([str(inputs)], ["edge"], tmp_path / "out", backend="cpu", segments=2,
                         ray=True)


@pytest.mark.parametrize("signals", [1, 2])
def test_a_signal_finishes_the_input_in_hand_and_a_second_aborts_its_segments(tmp_path, signals):
    folder = tmp_path / "in"
    folder.mkdir()
    make_clip(folder / "a.mkv", "ffv1", frames=240, size=(320, 240))  # long enough for both signals
    make_clip(folder / "b.mkv", "ffv1", frames=16)
    out = tmp_path / "out"
    run = Run("batch", str(folder), "-o", str(out), "--backend", "cpu", "--filter",
              "gaussian:sigma=3", "--segments", "2", "--no-progress", "-q", cwd=tmp_path)
    run.wait_for(lambda: out.is_dir()
                 and any(p.name.startswith(".streamconv-segments-a.mkv.") and any(p.iterdir())
                                              for p in out.iterdir() if p.is_dir()), "a part file")
    run.process.send_signal(signal.SIGINT)
    run.wait_for_line("no new inputs")  # the first is handled before the second is sent
    if signals == 2:
        run.process.send_signal(signal.SIGINT)
    assert run.finish() == 130, run.stderr
    assert "Traceback" not in run.stderr, run.stderr
    first, second = manifest_of(out)["inputs"]
    assert first["status"] == ("done" if signals == 1 else "interrupted") and \
        second["status"] == "pending"
    assert first["frames"] == (240 if signals == 1 else 0)
    assert sorted(p.name for p in out.iterdir()) == (["a.mkv"] if signals == 1
                                                     else []) + [MANIFEST_NAME]
