"""Running batches and reading what they leave."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import av
import numpy as np

import streamconv
from streamconv.jobs.manifest import MANIFEST_NAME

from helpers.clips import write_clip


def frames_of(path: Path) -> list[np.ndarray]:
    with av.open(str(path)) as container:
        return [f.to_ndarray() for f in container.decode(video=0)]


def manifest_of(folder: Path) -> dict:
    return json.loads((folder / MANIFEST_NAME).read_text())


def batch(cli, *args: str):
    return cli("batch", *args, "--backend", "cpu", "--no-progress", "--filter", "box:size=3")


def start_batch(tmp_path: Path, clips: int, *options: str) -> tuple[list[str], Path,
                                                                    subprocess.Popen]:
    """``clips`` clips of 48 320x240 frames in tmp_path/in, and a batch of them into tmp_path/out
    started in a process of its own, slow enough to be killed mid-input: its command (to run it
    again), OUTDIR and process."""
    folder = tmp_path / "in"
    folder.mkdir()
    for n in range(clips):
        write_clip(folder / f"c{n}.mp4", frames=48, seed=n, size=(320, 240))
    out = tmp_path / "out"
    command = [sys.executable, "-m", "streamconv", "batch", str(folder), "-o", str(out),
               "--backend", "cpu", *options, "--filter", "gaussian:sigma=2", "--no-progress", "-q"]
    return command, out, subprocess.Popen(command, stdout=subprocess.DEVNULL,
                                          stderr=subprocess.PIPE)


def wait_for(out: Path, ready, seconds: float = 60) -> None:
    """Until ``ready(counts)`` holds for the manifest in ``out`` (its status counts), or
    ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            counts = manifest_of(out)["counts"]
        except (OSError, ValueError):
            counts = {}
        if ready(counts):
            return
        time.sleep(0.01)


FILTERS = ["box:size=3"]


def run(inputs, out: Path, **options) -> streamconv.BatchResult:
    return streamconv.run_batch([str(p) for p in inputs], options.pop("filters", FILTERS), out,
                                backend="cpu", jobs=1, processes=1, **options)
