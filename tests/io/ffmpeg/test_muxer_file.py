"""A disk that fills while the muxer writes, seeks or finishes the file: one error, exit 6's
OutputError, nothing left, and no Python traceback printed on the way.

Produced for real: small tmpfs mounts (skipped where mounting is not allowed) of sizes from a
tenth of the finished MP4 (+faststart, whose trailer seeks back and moves the index to the
front) to just under it, so the disk fills mid-run and in the trailer.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import av
import pytest

import streamconv

from helpers.clips import write_clip


@pytest.fixture
def tmpfs(tmp_path):
    """``mount(bytes) -> folder``: a fresh tmpfs of that size, unmounted after the test."""
    mounted: list[Path] = []

    def mount(size: int) -> Path:
        folder = tmp_path / f"tmpfs{len(mounted)}"
        folder.mkdir()
        result = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs",
                                 str(folder)],
                                capture_output=True, text=True, check=False)
        if result.returncode:
            pytest.skip(f"cannot mount a tmpfs here: {result.stderr.strip() or result.returncode}")
        mounted.append(folder)
        return folder

    yield mount
    for folder in mounted:
        subprocess.run(["umount", str(folder)], check=False)


def faststart_run(clip: Path, output: Path):
    return streamconv.Pipeline(str(clip), ["box"], str(output), backend="cpu", sink_options={
        "muxer_options": {"movflags": "+faststart"}, "preset": "ultrafast"}).run()


def test_a_disk_that_fills_mid_run_or_in_the_trailer_gives_one_error_and_no_traceback(
        tmp_path, tmpfs, capfd):
    clip = write_clip(tmp_path / "in.mkv", frames=30, size=(160, 120))
    faststart_run(clip, tmp_path / "whole.mp4")
    whole = (tmp_path / "whole.mp4").stat().st_size
    with av.open(str(tmp_path / "whole.mp4")) as container:
        assert sum(1 for _ in container.decode(video=0)) == 30
    capfd.readouterr()
    failed_after = []
    for tenths in range(1, 10):
        folder = tmpfs(whole * tenths // 10)
        with pytest.raises(streamconv.OutputError, match="No space left on device") as raised:
            faststart_run(clip, folder / "out.mp4")
        failed_after.append(int(str(raised.value).split("failed after ")[1].split()[0]))
        assert list(folder.iterdir()) == []
        printed = capfd.readouterr().err
        assert "Traceback" not in printed and "exception being dropped" not in printed, printed
    assert failed_after[0] < 30 and failed_after[-1] == 30, failed_after  # mid-run and trailer
