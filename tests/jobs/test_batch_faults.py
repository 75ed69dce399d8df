"""``streamconv batch`` under faults made for real: symlinked folder loops, inputs replaced by a
FIFO while the batch runs, an output folder removed mid-batch. Tiny clips, the CPU backend."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers.batches import manifest_of
from helpers.cli import assert_error, assert_ok, assert_usage, cli_env, run_cli
from helpers.clips import write_clip


def batch(*args: str, timeout: float = 60):
    """``streamconv batch ARGS`` on the CPU backend; a batch that hangs fails the test."""
    return run_cli("batch", *args, "--backend", "cpu", "--no-progress", "--filter", "box:size=3",
                   timeout=timeout)


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
    # a link elsewhere is still followed
    (tmp_path / "in" / "linked").symlink_to(tmp_path / "other")
    out = tmp_path / "out"
    result = batch(str(tmp_path / "in" / "**" / "*.mp4"), "-o", str(out), "--recursive", timeout=30)
    assert_ok(result)
    inputs = sorted(Path(r["input"]).name for r in manifest_of(out)["inputs"])
    assert inputs == ["a.mp4", "b.mp4", "c.mp4"]
    assert sorted(p.name for p in out.glob("*.mp4")) == inputs


def wait_for(condition, seconds: float = 20) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_a_fifo_never_holds_the_batch_named_or_put_in_an_inputs_place(tmp_path):
    fifo = tmp_path / "in" / "pipe.mp4"
    fifo.parent.mkdir()
    os.mkfifo(fifo)
    named = batch(str(fifo), "-o", str(tmp_path / "named"), timeout=30)
    assert_error(named, 4, "not a regular file")  # it said "input not found"
    assert not (tmp_path / "named").exists()
    fifo.unlink()
    first, third = clip(tmp_path / "in" / "a.mp4", frames=400), clip(tmp_path / "in" / "c.mp4",
                                                                     seed=3)
    clip(tmp_path / "in" / "b.mp4", seed=2)
    manifest = tmp_path / "records.json"
    os.mkfifo(manifest)  # --resume reads a manifest first: the opening waited for a writer for ever
    for resume, message in (((), "manifest is not a regular file"),
                            (("--resume",), "not a streamconv batch manifest")):
        refused = batch(str(fifo.parent), "-o", str(tmp_path / "named"), "--manifest",
                        str(manifest), *resume, timeout=30)
        assert_error(refused, 6, message)
    out = tmp_path / "out"
    command = [sys.executable, "-m", "streamconv", "batch", str(tmp_path / "in"), "-o", str(out),
               "--jobs", "1",
               "--processes", "1", "--backend", "cpu", "--no-progress", "--filter", "box:size=3"]
    with subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=cli_env()) as process:
        # While the first input runs (the second is opened ahead), the third becomes a FIFO: its
        # opening waited for a writer for ever, holding the batch through any number of signals.
        wait_for(lambda: any(p.name.startswith(".a.") for p in out.glob(".*"))
                 or process.poll() is not None)
        third.unlink()
        os.mkfifo(third)
        try:
            _, stderr = process.communicate(timeout=30)
        finally:
            process.kill()
    assert process.returncode == 14, stderr
    assert "Traceback" not in stderr
    records = {Path(r["input"]).name: r for r in manifest_of(out)["inputs"]}
    assert [records[name]["status"] for name in ("a.mp4", "b.mp4")] == ["done", "done"], stderr
    assert records["c.mp4"]["status"] == "failed" and records["c.mp4"]["exit_code"] == 4
    assert "no longer a regular file" in records["c.mp4"]["error"] and first.exists()
    assert not (out / "c.mp4").exists()


@pytest.mark.parametrize("processes", ["1", "2"])
def test_a_manifest_that_can_no_longer_be_written_stops_the_batch_with_one_error(
        tmp_path, processes):
    for name, frames in (("a", 400), ("b", 400), ("c", 40), ("d", 40), ("e", 40), ("f", 40)):
        clip(tmp_path / "in" / f"{name}.mp4", frames=frames)
    out, manifest = tmp_path / "out", tmp_path / "records" / "batch.json"
    manifest.parent.mkdir()
    command = [sys.executable, "-m", "streamconv", "batch", str(tmp_path / "in"), "-o", str(out),
               "--manifest",
               str(manifest), "--jobs", processes, "--processes", processes, "--backend", "cpu",
               "--no-progress", "--filter", "box:size=3"]
    with subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=cli_env()) as process:
        wait_for(lambda: any(p.name.startswith(".a.") for p in out.glob(".*"))
                 or process.poll() is not None)
        # The manifest's folder removed mid-batch; again while the batch writes a new record into
        # it.
        while manifest.parent.exists():
            shutil.rmtree(manifest.parent, ignore_errors=True)
        try:
            _, stderr = process.communicate(timeout=30)
        finally:
            process.kill()
    # It was a traceback from the worker thread, the inputs after it left unrun without a word.
    # The folder goes before a write (its folder does not exist) or during one (the new manifest
    # cannot be published): either way one error line, and no more inputs.
    error = assert_error(subprocess.CompletedProcess(command, process.returncode, "", stderr), 6,
                         "stopped taking inputs")
    assert "manifest folder does not exist" in error or \
        f"cannot publish manifest {manifest}" in error, error
    published = sorted(p.name for p in out.iterdir())
    # the running ones whole
    assert "a.mp4" in published and not [p for p in published if ".partial" in p]
    # No input is taken once it is known: threads know at once, worker processes as the batch
    # reads their report (an input a worker already held opened may start meanwhile).
    assert published == ["a.mp4"] if processes == "1" else not {"e.mp4", "f.mp4"} & set(published)


def test_an_output_folder_that_cannot_be_made_mid_batch_fails_its_input_as_an_output_error(
        tmp_path):
    clip(tmp_path / "in" / "s1" / "a.mp4", frames=400)
    clip(tmp_path / "in" / "s1" / "x.mp4", frames=400, seed=2)
    clip(tmp_path / "in" / "s2" / "b.mp4", seed=3)
    out = tmp_path / "out"
    command = [sys.executable, "-m", "streamconv", "batch", str(tmp_path / "in"), "-o", str(out),
               "--recursive",
               "--jobs", "1", "--processes", "1", "--backend", "cpu", "--no-progress", "--filter",
               "box:size=3"]
    with subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=cli_env()) as process:
        # While a runs (x opened ahead), a file takes the place of b's output folder.
        wait_for(lambda: any(p.name.startswith(".a.") for p in out.glob("s1/.*"))
                 or process.poll() is not None)
        (out / "s2").write_text("in the way")
        try:
            _, stderr = process.communicate(timeout=30)
        finally:
            process.kill()
    assert process.returncode == 14 and "Traceback" not in stderr, stderr
    records = {Path(r["input"]).name: r for r in manifest_of(out)["inputs"]}
    assert [records[name]["status"] for name in ("a.mp4", "x.mp4")] == ["done", "done"], stderr
    # It was "internal error: FileExistsError: [Errno 17] File exists", exit 1.
    assert records["b.mp4"]["status"] == "failed" and records["b.mp4"]["exit_code"] == 6
    assert records["b.mp4"]["error"] == f"cannot make the output folder {out / 's2'}: a file is in the way"
    assert (out / "s2").read_text() == "in the way"


def test_a_link_beside_its_target_neither_runs_it_twice_nor_names_its_output(tmp_path):
    clip(tmp_path / "in" / "take.mp4")
    (tmp_path / "in" / "alias.mp4").symlink_to("take.mp4")  # sorted before its target
    out = tmp_path / "out"
    assert_ok(batch(str(tmp_path / "in"), "-o", str(out)))
    [record] = manifest_of(out)["inputs"]
    # The file's output was named after the link: out/alias.mp4.
    assert (Path(record["input"]).name, Path(record["output"]).name) == ("take.mp4", "take.mp4")
    assert sorted(p.name for p in out.glob("*.mp4")) == ["take.mp4"]


@pytest.mark.parametrize("option, fragment", [
    (["--codec", "nosuch"], "unknown encoder 'nosuch'"),
    (["--codec", "aac"], "encoder 'aac' is an audio encoder, not a video encoder"),
    (["--preset", "nosuch"],
     "encoder libx264 (yuv420p, 1280x720 at 30 fps) refuses option preset='nosuch'"),
    (["--codec", "libx264", "--pix-fmt", "yuv444p16le"],
     "encoder libx264 does not support pixel format"),
])
def test_encoder_settings_no_output_could_take_are_refused_before_any_input(tmp_path, option,
                                                                            fragment):
    clip(tmp_path / "in" / "a.mp4")
    clip(tmp_path / "in" / "b.mp4", seed=2)
    out = tmp_path / "out"
    # Each input was opened and failed alike, and the batch ended 14 with a manifest of failures.
    assert_error(batch(str(tmp_path / "in"), "-o", str(out), *option), 6, fragment)
    assert not out.exists()


def test_an_encoder_that_takes_sizes_of_its_own_is_left_to_each_input(tmp_path):
    # 64x48: no size dnxhd takes; the check ahead must not refuse it as such
    clip(tmp_path / "in" / "a.mp4")
    result = batch(str(tmp_path / "in"), "-o", str(tmp_path / "out"), "--codec", "dnxhd")
    assert result.returncode == 14, result.stderr
    [record] = manifest_of(tmp_path / "out")["inputs"]
    assert record["error"].startswith("cannot open encoder dnxhd (yuv422p, 64x48 at 25 "
                                      "fps)"), record


@pytest.mark.parametrize("arguments, message", [
    (["", "-o", "OUT"], "INPUT is empty"),
    (["IN", "-o", ""], "--output is empty"),
    (["IN", "-o", "OUT", "--manifest", " "], "--manifest is empty"),
    (["IN", "-o", "OUT", "--codec", ""], "--codec is empty"),
    (["IN", "-o", "OUT", "--pix-fmt", ""], "--pix-fmt is empty"),
    (["IN", "-o", "-"], "--output names a folder, not a pipe; one named - is ./-"),
    (["IN", "-o", "OUT", "--manifest", "-"],
     "--manifest names a file, not a pipe; one named - is ./-"),
    (["IN", "-o", "OUT", "--manifest", "pipe:1"], "--manifest names a file, not a pipe"),
])
def test_an_empty_name_or_a_pipe_where_a_batch_writes_files_is_a_usage_error(tmp_path, arguments,
                                                                             message):
    clip(tmp_path / "IN" / "a.mp4")
    arguments = [str(tmp_path / a) if a in ("IN", "OUT") else a for a in arguments]
    # '' was the current folder: as INPUT its videos were run, as -o they were written there;
    # '-' was a folder or manifest named '-'.
    result = run_cli("batch", *arguments, "--backend", "cpu", "--no-progress", cwd=tmp_path)
    assert_usage(result, message)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["IN"]
