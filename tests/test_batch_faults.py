"""``streamconv batch`` under faults made for real: symlinked folder loops, inputs replaced by a
FIFO while the batch runs, an output folder removed mid-batch. Tiny clips, the CPU backend."""

from __future__ import annotations

import os
from pathlib import Path

from clips import write_clip
from conftest import run_cli
from test_batch import manifest_of
from test_cli import assert_ok


def batch(*args: str, timeout: float = 60):
    """``streamconv batch ARGS`` on the CPU backend; a batch that hangs fails the test."""
    return run_cli("batch", *args, "--backend", "cpu", "--no-progress", "--filter", "box:size=3", timeout=timeout)


def clip(path: Path, frames: int = 4, seed: int = 1) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_clip(path, frames=frames, size=(64, 48), seed=seed)


def test_a_recursive_glob_goes_round_no_symlinked_folder_loop(tmp_path):
    clip(tmp_path / "in" / "a.mp4")
    clip(tmp_path / "in" / "sub" / "b.mp4", seed=2)
    clip(tmp_path / "other" / "c.mp4", seed=3)
    # Two links back up: glob("**") went round them for ever (2 ** 40 paths before ELOOP).
    (tmp_path / "in" / "sub" / "up").symlink_to("..")
    (tmp_path / "in" / "sub" / "here").symlink_to(".")
    (tmp_path / "in" / "linked").symlink_to(tmp_path / "other")  # a link elsewhere is still followed
    out = tmp_path / "out"
    result = batch(str(tmp_path / "in" / "**" / "*.mp4"), "-o", str(out), "--recursive", timeout=30)
    assert_ok(result)
    inputs = sorted(Path(r["input"]).name for r in manifest_of(out)["inputs"])
    assert inputs == ["a.mp4", "b.mp4", "c.mp4"]
    assert sorted(p.name for p in out.glob("*.mp4")) == inputs
