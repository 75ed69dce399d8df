"""``streamconv batch``: many real clips through one process on the CPU backend: outputs equal to
one-at-a-time runs, a damaged and a broken input among them, globs and folders, refusals before
any work, a manifest that stays true when the batch is killed, and --resume after the kill."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import av
import numpy as np
import pytest

import streamconv
from streamconv.jobs.manifest import MANIFEST_NAME

from helpers.batches import batch, frames_of, manifest_of, start_batch, wait_for
from helpers.cli import assert_error, assert_ok, run_cli
from helpers.clips import write_clip
from helpers.damage import flip_bytes


@pytest.fixture
def clips(tmp_path) -> Path:
    folder = tmp_path / "in"
    folder.mkdir()
    for n in range(3):
        write_clip(folder / f"clip{n}.mp4", seed=n)
    return folder


@pytest.mark.parametrize("processes", ["1", "2"])
def test_a_batch_writes_what_one_at_a_time_runs_write_and_a_true_manifest(cli, tmp_path, clips,
                                                                          processes):
    (clips / "broken.mp4").write_bytes(b"not a video at all" * 100)
    (clips / "damaged.mp4").write_bytes(flip_bytes((clips / "clip0.mp4").read_bytes(), 4, 300))
    out = tmp_path / "out"
    # Lossless FFV1 outputs: libx264 need not give the same bytes twice (they varied between runs
    # of identical frames in one process), so only a lossless codec shows the frames are the same.
    result = batch(cli, str(clips), "-o", str(out), "--jobs", "2", "--processes", processes,
                   "--ext", "mkv", "--codec", "ffv1")
    assert result.returncode == 14, result.stderr  # some failed
    records = {Path(r["input"]).name: r for r in manifest_of(out)["inputs"]}
    assert records["broken.mp4"]["status"] == "failed" and records["broken.mp4"]["exit_code"] == 4
    assert "cannot open input" in records["broken.mp4"]["error"]
    assert records["damaged.mp4"]["status"] == "damaged" and \
        records["damaged.mp4"]["exit_code"] == 13
    assert records["damaged.mp4"]["damage"] and (out / "damaged.mkv").exists()
    for n in range(3):
        record = records[f"clip{n}.mp4"]
        assert record["status"] == "done" and record["frames"] == 24 and record["exit_code"] == 0
        assert record["bytes"] == (out / f"clip{n}.mkv").stat().st_size
        assert 0 < record["first_frame_ms"] < 1e3 * record["seconds"]  # within the input's own run
    assert records["broken.mp4"]["first_frame_ms"] is None
    alone = tmp_path / "alone.mkv"
    assert_ok(cli("run", str(clips / "clip1.mp4"), "-o", str(alone), "--backend", "cpu", "--filter",
                  "box:size=3", "--codec", "ffv1", "--no-progress", "-q"))
    for got, expected in zip(frames_of(out / "clip1.mkv"), frames_of(alone), strict=True):
        np.testing.assert_array_equal(got, expected)
    assert not (out / "broken.mkv").exists()
    assert not [p for p in out.iterdir() if ".partial" in p.name]


def test_globs_folders_recursive_and_ext(cli, tmp_path, clips):
    (clips / "sub").mkdir()
    write_clip(clips / "sub" / "deep.mkv", seed=7)
    (clips / "notes.txt").write_text("not a video")
    out = tmp_path / "out"
    assert_ok(batch(cli, str(clips / "clip*.mp4"), "-o", str(out)))
    assert sorted(p.name for p in out.glob("*.mp4")) == ["clip0.mp4", "clip1.mp4", "clip2.mp4"]
    nested = tmp_path / "nested"
    assert_ok(batch(cli, str(clips), "-o", str(nested), "--recursive", "--ext", "mkv"))
    assert (nested / "sub" / "deep.mkv").is_file() and (nested / "clip0.mkv").is_file()
    assert len(manifest_of(nested)["inputs"]) == 4  # notes.txt is not a video


@pytest.mark.parametrize("case",
                         ["exists", "output is input", "same name twice", "missing input",
                          "no match"])
def test_refused_before_any_work(cli, tmp_path, clips, case):
    out = tmp_path / "out"
    args = [str(clips), "-o", str(out)]
    code, fragment = 6, ""
    if case == "exists":
        out.mkdir()
        (out / "clip1.mp4").write_bytes(b"keep me")
        fragment = "output exists"
    elif case == "output is input":
        args = [str(clips), "-o", str(clips)]
        fragment = "would be the input itself"
    elif case == "same name twice":
        other = tmp_path / "other"
        other.mkdir()
        write_clip(other / "clip0.mp4", seed=9)
        args = [str(clips), str(other), "-o", str(out)]
        fragment = "would both be written"
    elif case == "missing input":
        args, code, fragment = [str(tmp_path / "nowhere.mp4"), "-o", str(out)], 4, "input not found"
    else:
        args, code, fragment = [str(tmp_path / "*.avi"), "-o", str(out)], 4, "no file matches"
    assert_error(batch(cli, *args), code, fragment)
    assert not (out / MANIFEST_NAME).exists() and not (clips / MANIFEST_NAME).exists()
    if case == "exists":
        assert (out / "clip1.mp4").read_bytes() == b"keep me"


@pytest.mark.parametrize("processes", ["1", "2"])
def test_a_killed_batch_leaves_a_true_manifest_and_resume_finishes_it(tmp_path, processes):
    command, out, child = start_batch(tmp_path, 6, "--jobs", "1", "--processes", processes)
    # Killed once one input is done and another is running.
    wait_for(out, lambda counts: counts.get("done", 0) >= 1 and counts.get("running", 0) == 1)
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)
    time.sleep(1.0)  # a worker process still running would have published by now
    killed = manifest_of(out)  # whole: written atomically
    done = [r for r in killed["inputs"] if r["status"] == "done"]
    assert done and len(done) < 6 and killed["counts"]["running"] == 1
    for record in killed["inputs"]:  # nothing published that is not recorded as done
        assert Path(record["output"]).exists() == (record["status"] == "done")
    stamps = {r["output"]: os.stat(r["output"]).st_mtime_ns for r in done}
    resumed = subprocess.run(command + ["--resume"], capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    final = manifest_of(out)
    assert final["counts"]["done"] == 6 - len(done) and final["counts"]["skipped"] == len(done)
    for output, stamp in stamps.items():
        assert os.stat(output).st_mtime_ns == stamp  # not written again
    for n in range(6):
        assert len(frames_of(out / f"c{n}.mp4")) == 48


def test_the_python_api(tmp_path, clips):
    result = streamconv.run_batch([str(clips)], ["edge"], tmp_path / "out", backend="cpu", jobs=2)
    assert result.exit_code == 0 and [r.status for r in result.records] == ["done"] * 3
    assert result.manifest == (tmp_path / "out" / MANIFEST_NAME).resolve() or \
        result.manifest.exists()
    # Lossless outputs: libx264 need not give the same bytes twice in one process (its output
    # varied between runs of identical frames), FFV1 does.
    lossless = {"codec": "ffv1"}
    two = streamconv.run_batch([str(clips)], ["edge"], tmp_path / "two", backend="cpu", jobs=2,
                               ext="mkv", sink_options=lossless)
    one = streamconv.run_batch([str(clips)], ["edge"], tmp_path / "one", backend="cpu", jobs=1,
                               processes=1, ext="mkv", sink_options=lossless)
    # One worker: each input after the first was opened while the one before it ran.
    assert [r.opened_ahead for r in one.records] == [False, True, True]
    for first, second in zip(two.records, one.records, strict=True):
        for got, expected in zip(frames_of(Path(first.output)), frames_of(Path(second.output)),
                                 strict=True):
            np.testing.assert_array_equal(got, expected)


def test_streamconv_batch_is_run_batch(tmp_path, clips):
    """``streamconv.batch(...)`` is the same call as ``streamconv.run_batch(...)``, whether or not
    the module that defines them was imported first."""
    import streamconv.jobs.batch
    from streamconv.jobs.batch import Batch

    result = streamconv.batch([str(clips)], ["box:size=3"], tmp_path / "out", backend="cpu", jobs=1,
                              processes=1)
    assert result.exit_code == 0 and [r.status for r in result.records] == ["done"] * 3
    assert Batch is streamconv.Batch and streamconv.batch is streamconv.jobs.batch.run_batch
    assert streamconv.run_batch is streamconv.batch


@pytest.mark.parametrize("signals", [1, 2])
def test_a_signal_starts_no_new_input_and_a_second_aborts_the_running_ones(tmp_path, signals):
    folder = tmp_path / "in"
    folder.mkdir()
    # long enough for both signals
    write_clip(folder / "c0.mp4", frames=360, seed=0, size=(320, 240))
    for n in range(1, 4):
        write_clip(folder / f"c{n}.mp4", frames=24, seed=n, size=(320, 240))
    out = tmp_path / "out"
    command = [sys.executable, "-m", "streamconv", "batch", str(folder), "-o", str(out),
               "--backend", "cpu",
               "--jobs", "1", "--processes", "1", "--filter", "gaussian:sigma=3", "--no-progress",
               "-q"]
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # the first input is running
        try:
            if manifest_of(out)["counts"]["running"] == 1:
                break
        except (OSError, ValueError):
            pass
        time.sleep(0.02)
    child.send_signal(signal.SIGINT)
    said = child.stderr.readline()  # the first is handled before the second is sent
    assert b"no new inputs" in said, said
    if signals == 2:
        child.send_signal(signal.SIGINT)
    _, stderr = child.communicate(timeout=120)
    stderr = said + stderr
    assert child.returncode == 130, stderr
    records = manifest_of(out)["inputs"]
    first, rest = records[0], records[1:]
    assert first["status"] == ("done" if signals == 1 else "interrupted"), stderr
    assert Path(first["output"]).exists() == (signals == 1)
    assert [r["status"] for r in rest] == ["pending"] * 3
    assert not [p for p in out.iterdir() if p.suffix == ".mp4" and p.name != "c0.mp4"
                or ".partial" in p.name]


@pytest.mark.parametrize("option", [("--devices", "0"), ("--processes", "2")])
def test_what_a_ray_task_decides_is_refused_with_ray(cli, tmp_path, clips, option):
    """The cluster grants each task its GPU and process: --devices and --processes are usage
    errors."""
    out = tmp_path / "out"
    result = batch(cli, str(clips), "-o", str(out), "--ray", *option)
    assert result.returncode == 2 and "do not apply with --ray" in result.stderr
    assert not out.exists()
    keyword = {"--devices": {"devices": [0]}, "--processes": {"processes": 2}}[option[0]]
    with pytest.raises(streamconv.SettingsError, match="do not apply with --ray"):
        streamconv.Batch([str(clips)], ["edge"], out, backend="cpu", ray=True, **keyword)
    assert not out.exists()


def test_depth_reaches_every_input_as_in_run(cli, tmp_path):
    """--depth 8 filters 10-bit video in 8 bits and writes it so, as run does; auto keeps 10."""
    folder = tmp_path / "in"
    folder.mkdir()
    with av.open(str(folder / "deep.mkv"), "w") as container:
        stream = container.add_stream("ffv1", rate=25)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p10le"
        for index in range(3):
            frame = av.VideoFrame.from_ndarray(np.full((48, 64, 3), 40 * index, np.uint8),
                                               format="rgb24")
            frame = frame.reformat(format="yuv420p10le")
            frame.pts = index
            container.mux(stream.encode(frame))
        container.mux(stream.encode())
    for depth, written in (("8", "yuv420p"), ("auto", "yuv420p10le")):
        out = tmp_path / f"out{depth}"
        assert_ok(batch(cli, str(folder), "-o", str(out), "--depth", depth))
        with av.open(str(out / "deep.mkv")) as container:
            assert container.streams.video[0].codec_context.pix_fmt == written, depth
        assert manifest_of(out)["inputs"][0]["frames"] == 3


def test_a_second_batch_of_a_running_ones_manifest_is_refused_and_one_planned_before_it_ran_too(
        tmp_path):
    """A ``--resume`` started while the first batch still runs (its inputs running): refused at
    once (before, it ran the same inputs again, failed on the outputs the first published and left
    a manifest saying every input failed). A batch planned before another ran to its end is
    refused as it starts: its plan is out of date. The first one's manifest stays true."""
    command, out, first = start_batch(tmp_path, 4, "--jobs", "1")
    wait_for(out, lambda counts: counts.get("running", 0) == 1)
    stale = streamconv.Batch([str(tmp_path / "in")], ["edge"], tmp_path / "out", backend="cpu",
                             resume=True)
    second = subprocess.run(command + ["--resume"], capture_output=True, text=True, timeout=120)
    assert first.wait(timeout=300) == 0, first.stderr.read()
    assert second.returncode == 6 and "another batch is running" in second.stderr, second.stderr
    assert manifest_of(out)["counts"]["done"] == 4
    with pytest.raises(streamconv.OutputError, match="changed since this batch read it"):
        stale.run()
    assert manifest_of(out)["counts"]["done"] == 4
    # the lock file is gone with its batch
    assert not [p for p in out.iterdir() if p.name.startswith(".")]


def test_a_manifest_named_as_one_of_the_inputs_is_refused_and_the_input_kept(tmp_path):
    """``--manifest in/c1.mp4`` (a typo for a .json): with --overwrite it is refused as the input
    it is (before, c1.mp4 was passed over as the manifest and replaced by one); with --resume it is
    no manifest to resume from (and is not read whole). A manifest reformatted by hand resumes."""
    folder = tmp_path / "in"
    folder.mkdir()
    for n in range(2):
        write_clip(folder / f"c{n}.mp4", frames=4, seed=n)
    video = (folder / "c1.mp4").read_bytes()
    base = ["batch", str(folder), "-o", str(tmp_path / "out"), "--backend", "cpu", "--filter",
            "edge", "-q"]
    refused = run_cli(*base, "--manifest", str(folder / "c1.mp4"), "--overwrite")
    assert refused.returncode == 6 and "same file as the input" in refused.stderr, refused.stderr
    resumed = run_cli(*base, "--manifest", str(folder / "c1.mp4"), "--resume")
    assert resumed.returncode == 6 and \
        "not a streamconv batch manifest" in resumed.stderr, resumed.stderr
    assert (folder / "c1.mp4").read_bytes() == video and not (tmp_path / "out").exists()
    assert_ok(run_cli(*base))
    manifest = tmp_path / "out" / MANIFEST_NAME
    manifest.write_text(json.dumps(json.loads(manifest.read_text()), indent=4, sort_keys=True))
    again = run_cli(*base, "--resume")
    assert_ok(again)
    assert manifest_of(tmp_path / "out")["counts"]["skipped"] == 2
