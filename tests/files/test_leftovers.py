"""Temporary files a killed run left beside its output: the next run of that output removes
them, and leaves alone the ones a live writer (another process, stopped here mid-write) holds,
other outputs' and a Ray task's claim. The killed and the live writers are real processes: a
``streamconv run`` SIGKILLed mid-file, writers of sequence images killed or kept alive."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import av

from helpers.cli import REPO, run_cli
from helpers.clips import write_clip
from streamconv.files.leftovers import ABANDONED_AFTER
from streamconv.jobs.manifest import MANIFEST_NAME
from streamconv.files.publish import claim_path

ENV = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
LONG_RUN = ["--backend", "cpu", "--filter", "gaussian:sigma=2", "--no-progress", "-q"]


def partials(folder: Path, name: str) -> list[Path]:
    """The temporary files of ``name`` in ``folder`` (``.STEM.TOKEN.partial.EXT``)."""
    stem, suffix = os.path.splitext(name)
    return sorted(p for p in folder.iterdir() if p.name.startswith(f".{stem}.")
                  and p.name.endswith(f".partial{suffix}"))


def start_writing(output: Path) -> subprocess.Popen:
    """A run of a long test pattern into ``output``, returned once its temporary file has bytes."""
    before = set(partials(output.parent, output.name))
    child = subprocess.Popen([sys.executable, "-m", "streamconv", "run",
                              "test:320x240@30,frames=100000",
                              "-o", str(output), *LONG_RUN], env=ENV, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        mine = [p for p in partials(output.parent, output.name) if p not in before]
        if mine and mine[0].stat().st_size > 0:
            return child
        time.sleep(0.02)
    child.kill()
    raise AssertionError(f"no temporary file appeared: {child.communicate()[1]!r}")


def age(path: Path) -> None:
    """Make ``path`` look untouched for longer than a writer could be starting up."""
    then = time.time() - 3 * ABANDONED_AFTER
    os.utime(path, (then, then))


def test_a_run_removes_what_a_killed_run_of_its_output_left_and_not_a_live_ones(tmp_path):
    output = tmp_path / "out.mp4"
    killed = start_writing(output)
    killed.send_signal(signal.SIGKILL)
    killed.wait(timeout=30)
    (left,) = partials(tmp_path, "out.mp4")
    live = start_writing(output)
    try:
        live.send_signal(signal.SIGSTOP)  # mid-file, its temporary file untouched from now on
        (held,) = [p for p in partials(tmp_path, "out.mp4") if p != left]
        for path in (left, held):
            age(path)
        # another output's leftover: not this run's
        fresh_kill = start_writing(tmp_path / "other.mp4")
        fresh_kill.send_signal(signal.SIGKILL)
        fresh_kill.wait(timeout=30)
        (other,) = partials(tmp_path, "other.mp4")
        age(other)
        claim = claim_path(output, "0123abcd")
        claim.write_bytes(b"")
        age(claim)
        result = run_cli("run", "test:64x48@30,frames=12", "-o", str(output), *LONG_RUN)
        assert result.returncode == 0, result.stderr
        assert not left.exists() and held.exists() and other.exists() and claim.exists()
        with av.open(str(output)) as container:
            assert sum(1 for _ in container.decode(video=0)) == 12
    finally:
        live.send_signal(signal.SIGKILL)
        live.wait(timeout=30)


WRITER = """
import os, signal, sys, time
from streamconv.files.publish import AtomicFile
path, fate = sys.argv[1], sys.argv[2]
file = AtomicFile(path)
file.create().write(b"half a file")
file.handle.flush()
print(file.temp, flush=True)
if fate == "killed":
    os.kill(os.getpid(), signal.SIGKILL)
time.sleep(600)
"""


def killed_and_live_writers(paths: dict[str, Path]) -> tuple[dict[str, Path], subprocess.Popen]:
    """Writers of ``paths["killed"]`` (SIGKILLed mid-write) and ``paths["alive"]`` (returned, still
    writing): their temporary files, both aged."""
    writers = {fate: subprocess.Popen([sys.executable, "-c", textwrap.dedent(WRITER), str(path),
                                       fate],
                                      stdout=subprocess.PIPE, text=True, env=ENV)
               for fate, path in paths.items()}
    temps = {fate: Path(writer.stdout.readline().strip()) for fate, writer in writers.items()}
    writers["killed"].wait(timeout=30)
    assert writers["killed"].returncode == -signal.SIGKILL and writers["alive"].poll() is None
    for path in temps.values():
        age(path)
    return temps, writers["alive"]


def test_a_sequence_run_removes_the_temporary_images_killed_writers_left(tmp_path):
    pattern = str(tmp_path / "img%03d.png")
    temps, alive = killed_and_live_writers({"killed": tmp_path / "img007.png",
                                            "alive": tmp_path / "img008.png"})
    try:
        jpeg = tmp_path / ".img007.0123abcd.partial.jpg"  # another pattern's image (img%03d.jpg)
        jpeg.write_bytes(b"not ours")
        age(jpeg)
        result = run_cli("run", "test:64x48@30,frames=3", "-o", pattern, *LONG_RUN)
        assert result.returncode == 0, result.stderr
        assert not temps["killed"].exists() and temps["alive"].exists() and jpeg.exists()
        assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == \
            ["img001.png", "img002.png", "img003.png"]
    finally:
        alive.kill()
        alive.wait(timeout=30)


def test_a_fresh_unlocked_temporary_file_is_left_for_its_writer_to_lock(tmp_path):
    """A temporary file just created (its writer takes the lock a moment later) is never removed,
    however it looks: only one untouched for ABANDONED_AFTER seconds can be abandoned."""
    fresh = tmp_path / ".out.89abcdef.partial.mp4"
    fresh.write_bytes(b"just created")
    result = run_cli("run", "test:64x48@30,frames=3", "-o", str(tmp_path / "out.mp4"), *LONG_RUN)
    assert result.returncode == 0, result.stderr
    assert fresh.exists()


def parts_folders(folder: Path) -> list[Path]:
    """The hidden parts folders of segmented runs in ``folder``."""
    return sorted(p for p in folder.iterdir() if p.name.startswith(".streamconv-segments-"))


def start_segments(clip: Path, output: Path) -> tuple[subprocess.Popen, Path]:
    """A ``run --segments 2`` of ``clip`` into ``output`` and its parts folder, once it holds a
    part's bytes."""
    before = set(parts_folders(output.parent))
    child = subprocess.Popen([sys.executable, "-m", "streamconv", "run", str(clip), "-o",
                              str(output),
                              "--segments", "2", *LONG_RUN], env=ENV, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for folder in set(parts_folders(output.parent)) - before:
            if any(p.stat().st_size > 0 for p in folder.iterdir() if p.name != ".lock"):
                return child, folder
        time.sleep(0.02)
    child.kill()
    raise AssertionError(f"no part was written: {child.communicate()[1]!r}")


def test_a_segmented_run_removes_the_parts_folder_of_a_killed_one_and_not_a_live_ones(tmp_path):
    clip = write_clip(tmp_path / "in.mp4", frames=1500, size=(320, 240),
                      options={"preset": "ultrafast", "g": "50"})
    output = tmp_path / "out.mkv"
    killed, left = start_segments(clip, output)
    killed.send_signal(signal.SIGKILL)
    killed.wait(timeout=30)
    live, held = start_segments(clip, output)
    try:
        live.send_signal(signal.SIGSTOP)
        for folder in (left, held):
            age(folder)
        short = write_clip(tmp_path / "short.mp4", frames=24,
                           options={"preset": "ultrafast", "g": "6"})
        result = run_cli("run", str(short), "-o", str(output), "--segments", "2", *LONG_RUN)
        assert result.returncode == 0, result.stderr
        assert not left.exists() and held.is_dir()
    finally:
        live.send_signal(signal.SIGKILL)
        live.wait(timeout=30)


def test_stats_and_a_manifest_remove_what_killed_writers_of_them_left(tmp_path):
    """--stats-json and a batch's manifest are published whole like outputs, and their killed
    writers' temporary files are removed the same way: a live writer's stay."""
    stats, out = tmp_path / "stats.json", tmp_path / "out"
    out.mkdir()
    (tmp_path / "in").mkdir()
    write_clip(tmp_path / "in" / "a.mp4", frames=4)
    alive = []
    try:
        stats_temps, writer = killed_and_live_writers({"killed": stats, "alive": stats})
        alive.append(writer)
        manifest_temps, writer = killed_and_live_writers({"killed": out / MANIFEST_NAME,
                                                          "alive": out / MANIFEST_NAME})
        alive.append(writer)
        result = run_cli("run", "test:64x48@30,frames=3", "-o", str(tmp_path / "o.mp4"),
                         "--stats-json", str(stats), *LONG_RUN)
        assert result.returncode == 0, result.stderr
        result = run_cli("batch", str(tmp_path / "in"), "-o", str(out), *LONG_RUN)
        assert result.returncode == 0, result.stderr
        for temps in (stats_temps, manifest_temps):
            assert not temps["killed"].exists() and temps["alive"].exists()
        assert json.loads(stats.read_text())["frames"] == 3
        assert json.loads((out / MANIFEST_NAME).read_text())["counts"]["done"] == 1
    finally:
        for writer in alive:
            writer.kill()
            writer.wait(timeout=30)
