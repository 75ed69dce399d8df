"""--progress: FFmpeg-style key=value blocks while the run goes and at its end, to a file or
stdout, with the other outputs' protections."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.cli import assert_error, assert_ok
from helpers.progress import blocks

KEYS = ["frame", "fps", "out_time_us", "out_time_ms", "out_time", "drop_frames", "dropped", "speed",
        "progress"]


def test_a_live_run_writes_blocks_as_it_goes_and_ends_with_progress_end(cli, tmp_path):
    report = tmp_path / "progress.txt"
    # 30 frames at 25 fps take 1.2 s: at least two blocks before the end.
    assert_ok(cli("run", "test:64x48@25,frames=30,live", "--backend", "cpu", "-q", "--progress",
                  str(report)))
    found = blocks(report.read_text())
    assert len(found) >= 3 and all(list(b) == KEYS for b in found)
    assert [b["progress"] for b in found] == ["continue"] * (len(found) - 1) + ["end"]
    frames = [int(b["frame"]) for b in found]
    end = found[-1]
    # A live source drops a frame it cannot hand on in time (a loaded machine): each is counted.
    written, dropped = frames[-1], int(end["dropped"])
    assert frames == sorted(frames) and 0 < frames[0] < 30 and written + dropped == 30
    assert end["drop_frames"] == end["dropped"]
    assert end["out_time_us"] == end["out_time_ms"] == str(written * 40000)
    assert end["out_time"] == f"00:00:{written / 25:09.6f}"
    assert 15 < float(end["fps"]) < 40  # delivered in real time


def test_progress_to_stdout_is_all_that_stdout_holds(cli, tmp_path):
    result = cli("run", "test:64x48,frames=5", "--backend", "cpu", "--progress", "-", "-o",
                 str(tmp_path / "o.mkv"))
    assert_ok(result)
    found = blocks(result.stdout)
    assert found[-1]["progress"] == "end" and found[-1]["frame"] == "5"
    assert "p50" in result.stderr  # the table went to stderr
    assert (tmp_path / "o.mkv").is_file()


def test_an_existing_progress_file_is_refused_unless_overwrite(cli, tmp_path):
    report = tmp_path / "progress.txt"
    report.write_text("keep me")
    assert_error(cli("run", "test:64x48,frames=2", "--backend", "cpu", "--progress", str(report)),
                 6, "--progress exists")
    assert report.read_text() == "keep me"
    assert_ok(cli("run", "test:64x48,frames=2", "--backend", "cpu", "-q", "--progress", str(report),
                  "--overwrite"))
    assert blocks(report.read_text())[-1]["frame"] == "2"


@pytest.mark.parametrize("role", ["input", "output", "stats"])
def test_the_progress_file_is_never_another_file_of_the_run(cli, tmp_path, sample_clip, role):
    source = tmp_path / "in.mp4"
    source.write_bytes(sample_clip.read_bytes())
    out, stats = tmp_path / "out.mkv", tmp_path / "stats.json"
    target = {"input": source, "output": out, "stats": stats}[role]
    result = cli("run", str(source), "-o", str(out), "--stats-json", str(stats), "--progress",
                 str(target), "--overwrite", "--backend", "cpu", "--max-frames", "2")
    assert_error(result, 6, "--progress", "same file")
    assert source.read_bytes() == sample_clip.read_bytes() and not out.exists() and \
        not stats.exists()


def test_a_pipeline_writes_a_progress_file_from_python(tmp_path):
    from streamconv import Pipeline

    report = tmp_path / "p.txt"
    stats = Pipeline("test:64x48@10,frames=4", ["identity"], None, backend="cpu",
                     progress_file=report).run()
    end = blocks(Path(report).read_text())[-1]
    assert stats.frames == 4 and end["frame"] == "4" and end["out_time_us"] == "400000"


def test_a_progress_file_that_cannot_be_written_whole_is_removed_and_the_run_goes_on(tmp_path):
    from helpers.cli import run_limited

    report = tmp_path / "progress.txt"
    # Blocks of some 150 bytes every 0.5 s against a 200-byte file limit (a real EFBIG, as a full
    # disk).
    result = run_limited(["run", "test:64x48@25,frames=40,live", "--backend", "cpu", "-q",
                          "--no-progress", "--progress", str(report)], file_size=200, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert f"--progress {report}: File too large; no progress is written there, and the file was removed" \
        in result.stderr
    assert list(tmp_path.iterdir()) == []
