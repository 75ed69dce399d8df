"""Every file streamconv writes is never an input, never clobbered, complete or absent.

Produced for real: two processes racing on one output, symlinks planted at the names
streamconv creates, a folder or file appearing at the output while it is written, a file-size
limit that fails the report's write, ``file:`` URLs and hard links to the input.
"""

from __future__ import annotations

import os
import resource
import signal
import stat
import subprocess
import sys
from pathlib import Path

import av
import pytest

import streamconv
from streamconv.files import publish
from streamconv.files.publish import AtomicFile, write_atomically

from helpers.cli import REPO, assert_error, assert_ok
from helpers.processes import Run, leftovers

TINY = "test:64x48,frames=3"


def cli(*args: str, cwd: Path, preexec_fn=None,
        timeout: float = 120) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "streamconv", *args], capture_output=True,
                          text=True, cwd=cwd, env=env, timeout=timeout, preexec_fn=preexec_fn)


def frames_in(path: Path) -> int:
    with av.open(str(path)) as container:
        return sum(1 for _ in container.decode(video=0))


# ---------------------------------------------------------------- the temporary file


@pytest.mark.parametrize("overwrite", [False, True], ids=["plain", "overwrite"])
def test_two_processes_racing_on_one_output_never_mix_their_files(tmp_path, overwrite):
    output = tmp_path / "out.mp4"
    args = ["run", "test:160x120@30,frames=60", "-o", str(output), "--realtime", "--backend", "cpu",
            "--no-progress", "-q"] + (["--overwrite"] if overwrite else [])
    runs = [Run(*args, cwd=tmp_path) for _ in range(2)]
    codes = sorted(run.finish() for run in runs)
    stderr = "".join(run.stderr for run in runs)
    assert "Traceback" not in stderr and "internal error" not in stderr, stderr
    if overwrite:
        assert codes == [0, 0], stderr  # the last one to finish wins, whole
    else:
        assert codes == [0, 6], stderr
        assert "appeared while it was being written" in stderr, stderr
    assert leftovers(tmp_path) == []
    assert frames_in(output) == 60


def test_a_symlink_planted_at_the_temporary_name_is_never_followed(tmp_path, monkeypatch):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    tokens = iter(["0badc0de", "600d600d"])
    monkeypatch.setattr(publish.secrets, "token_hex", lambda _n: next(tokens))
    planted = tmp_path / ".out.0badc0de.partial.mp4"
    planted.symlink_to(victim)
    output = tmp_path / "out.mp4"
    streamconv.Pipeline(TINY, ["box"], output, backend="cpu").run()
    assert victim.read_text() == "precious"
    assert planted.is_symlink() and os.readlink(planted) == str(victim)
    assert frames_in(output) == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == [planted.name, "out.mp4", "victim.txt"]


@pytest.mark.parametrize("name", [".out.partial.mp4", "out.mp4", "stats.json"])
def test_symlinks_at_every_name_a_run_writes_leave_their_targets_alone(tmp_path, name):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    (tmp_path / name).symlink_to(victim)
    args = ["run", TINY, "-o", "out.mp4", "--stats-json", "stats.json", "--backend", "cpu",
            "--no-progress", "-q"]
    result = cli(*args, cwd=tmp_path)
    if name == ".out.partial.mp4":  # the temporary name of earlier versions: not used any more
        assert_ok(result)
    else:
        assert_error(result, 6, "exists", name)
        replaced = cli(*args, "--overwrite", cwd=tmp_path)
        assert_ok(replaced)
        assert not (tmp_path / name).is_symlink()  # the link was replaced, not written through
    assert victim.read_text() == "precious"
    assert leftovers(tmp_path) == ([".out.partial.mp4"] if name == ".out.partial.mp4" else [])


def test_overwrite_keeps_the_replaced_files_mode_and_new_files_follow_the_umask(tmp_path):
    output, report = tmp_path / "out.mp4", tmp_path / "stats.json"
    args = ["run", TINY, "-o", str(output), "--stats-json", str(report), "--backend", "cpu",
            "--no-progress", "-q"]
    assert_ok(cli(*args, cwd=tmp_path, preexec_fn=lambda: os.umask(0o027)))
    assert stat.S_IMODE(output.stat().st_mode) == 0o640
    assert stat.S_IMODE(report.stat().st_mode) == 0o640
    output.chmod(0o600)
    report.chmod(0o604)
    assert_ok(cli(*args, "--overwrite", cwd=tmp_path))  # umask 022 here: a new file would be 0644
    assert stat.S_IMODE(output.stat().st_mode) == 0o600
    assert stat.S_IMODE(report.stat().st_mode) == 0o604


def test_temporary_names_of_very_long_outputs_stay_within_the_limit(tmp_path):
    # 254 bytes: allowed, though its temp name would not be
    output = tmp_path / ("a" * 250 + ".mp4")
    assert_ok(cli("run", TINY, "-o", str(output), "--backend", "cpu", "--no-progress", "-q",
                  cwd=tmp_path))
    assert frames_in(output) == 3
    too_long = tmp_path / ("b" * 300 + ".mp4")
    assert_error(cli("run", TINY, "-o", str(too_long), "--backend", "cpu", cwd=tmp_path), 6,
                 "too long")


# ---------------------------------------------------------------- publishing


def test_a_file_that_appears_at_the_output_meanwhile_is_kept_and_the_run_exits_6(tmp_path):
    output = tmp_path / "out.mp4"
    run = Run("run", "test:160x120@30,frames=30", "-o", str(output), "--realtime", "--backend",
              "cpu", "--no-progress", "-q", cwd=tmp_path)
    run.wait_for(lambda: leftovers(tmp_path), "the temporary file")
    output.write_bytes(b"someone else's file")
    assert run.finish() == 6, run.stderr
    assert "appeared while it was being written" in run.stderr
    assert output.read_bytes() == b"someone else's file"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.mp4"]


def test_a_failed_final_move_exits_6_and_removes_the_temporary_file(tmp_path):
    output = tmp_path / "out.mp4"
    run = Run("run", "test:160x120@30,frames=30", "-o", str(output), "--realtime", "--overwrite",
              "--backend", "cpu", "--no-progress", "-q", cwd=tmp_path)
    run.wait_for(lambda: leftovers(tmp_path), "the temporary file")
    output.mkdir()  # a non-empty folder: rename(2) cannot replace it
    (output / "keep.txt").write_text("kept")
    assert run.finish() == 6, run.stderr
    assert "Traceback" not in run.stderr and "cannot publish output" in run.stderr, run.stderr
    assert (output / "keep.txt").read_text() == "kept"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.mp4"]


def test_discard_wins_over_a_later_publish_and_publish_over_a_later_discard(tmp_path):
    first = AtomicFile(tmp_path / "a.bin")
    first.create().write(b"data")
    first.discard()
    with pytest.raises(streamconv.OutputError, match="discarded"):
        first.publish()
    second = AtomicFile(tmp_path / "b.bin")
    second.create().write(b"data")
    second.publish()
    second.discard()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.bin"]
    assert (tmp_path / "b.bin").read_bytes() == b"data"


def test_file_urls_name_the_file_they_name_as_ffmpeg_reads_them(tmp_path, sample_clip):
    """``file:NAME`` is NAME, for SOURCE and -o alike: read, written, and protected as that file."""
    source = tmp_path / "in.mp4"
    source.write_bytes(sample_clip.read_bytes())
    result = cli("run", "file:in.mp4", "-o", "file:out.mp4", "--max-frames", "3", "--backend",
                 "cpu", "-q", "--no-progress", cwd=tmp_path)
    assert_ok(result)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.mp4", "out.mp4"] and \
        frames_in(tmp_path / "out.mp4") == 3
    result = cli("run", "in.mp4", "-o", "file:in.mp4", "--overwrite", "--backend", "cpu", "-q",
                 "--no-progress", cwd=tmp_path)
    assert_error(result, 6, "the same file as the input")
    assert source.read_bytes() == sample_clip.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.mp4", "out.mp4"]


def test_file_urls_name_their_file_for_batch_inputs_progress_and_stats_json(tmp_path, sample_clip):
    """The other places a run or batch names a file: a batch INPUT was 'not found' (exit 4), and
    --progress and --stats-json wrote files named 'file:...'."""
    (tmp_path / "in.mp4").write_bytes(sample_clip.read_bytes())
    result = cli("run", "in.mp4", "-o", "out.mp4", "--max-frames", "3", "--progress", "file:p.txt",
                 "--stats-json", "file:s.json", "--backend", "cpu", "-q", "--no-progress",
                 cwd=tmp_path)
    assert_ok(result)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.mp4", "out.mp4", "p.txt", "s.json"]
    result = cli("batch", "file:in.mp4", "-o", "done", "--backend", "cpu", "-q", "--no-progress",
                 cwd=tmp_path)
    assert_ok(result)
    assert frames_in(tmp_path / "done" / "in.mp4") == frames_in(tmp_path / "in.mp4")


# 


@pytest.mark.parametrize("clash", ["input", "output"])
def test_stats_json_may_not_be_the_input_or_the_output(tmp_path, sample_clip, clash):
    source = tmp_path / "in.mp4"
    source.write_bytes(sample_clip.read_bytes())
    target = {"input": source, "output": tmp_path / "out.mp4"}[clash]
    result = cli("run", str(source), "-o", "out.mp4", "--stats-json", str(target), "--overwrite",
                 "--backend", "cpu", "--no-progress", cwd=tmp_path)
    assert_error(result, 6, "--stats-json is the same file as the " + clash)
    assert source.read_bytes() == sample_clip.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.mp4"]  # refused before the run


def test_an_existing_stats_json_is_refused_before_the_run_unless_overwrite(tmp_path):
    report = tmp_path / "stats.json"
    report.write_text("old")
    result = cli("run", TINY, "-o", "out.mp4", "--stats-json", str(report), "--backend", "cpu",
                 cwd=tmp_path)
    assert_error(result, 6, "--stats-json exists")
    assert report.read_text() == "old" and not (tmp_path / "out.mp4").exists()


def test_a_stats_json_that_cannot_be_written_whole_leaves_nothing(tmp_path):
    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # fail the write (EFBIG) instead of killing
        resource.setrlimit(resource.RLIMIT_FSIZE, (200, 200))

    result = cli("run", TINY, "--stats-json", "stats.json", "--backend", "cpu", "--no-progress",
                 "-q", cwd=tmp_path, preexec_fn=limit)
    assert_error(result, 6, "cannot write --stats-json", "nothing was left behind")
    assert list(tmp_path.iterdir()) == []


def test_bench_reports_get_the_same_protections(tmp_path):
    existing = tmp_path / "bench.json"
    existing.write_text("old")
    assert_error(cli("bench", "--json", str(existing), cwd=tmp_path), 6, "--json exists")
    assert_error(cli("bench", "--json", "same.png", "--chart", "same.png", cwd=tmp_path), 6,
                 "the same file as --chart")
    assert existing.read_text() == "old"


def test_write_atomically_refuses_an_existing_file_and_replaces_it_with_overwrite(tmp_path):
    target = tmp_path / "manifest.json"
    write_atomically(target, "{}\n")
    with pytest.raises(streamconv.OutputError, match="exists"):
        write_atomically(target, "[]\n")
    write_atomically(target, "[]\n", overwrite=True)
    assert target.read_text() == "[]\n"
    assert leftovers(tmp_path) == []


# ---------------------------------------------------------------- output is the input


def test_a_file_url_input_is_never_replaced(tmp_path, sample_clip):
    source = tmp_path / "in.mp4"
    source.write_bytes(sample_clip.read_bytes())
    for spec in (f"file:{source}", f"file://{source}"):
        result = cli("run", spec, "-o", str(source), "-y", "--backend", "cpu", cwd=tmp_path)
        assert_error(result, 6, "the same file as the input")
    assert source.read_bytes() == sample_clip.read_bytes()


@pytest.mark.parametrize("how", ["path", "hard link", "file URL"])
def test_the_library_never_replaces_its_own_input_even_with_overwrite(tmp_path, sample_clip, how):
    source = tmp_path / "in.mp4"
    source.write_bytes(sample_clip.read_bytes())
    spec, output = str(source), source
    if how == "hard link":
        output = tmp_path / "link.mp4"
        os.link(source, output)
    elif how == "file URL":
        spec = f"file://{source}"
    with pytest.raises(streamconv.OutputError, match="same file as the input"):
        streamconv.Pipeline(spec, ["box"], output, backend="cpu", sink_options={"overwrite": True})
    assert source.read_bytes() == sample_clip.read_bytes()


@pytest.mark.parametrize("special", ["fifo", "device", "link to a device", "/dev/stdout"])
def test_a_device_or_fifo_output_is_never_replaced_even_with_overwrite(tmp_path, special):
    if special == "fifo":
        target = tmp_path / "out.mp4"
        os.mkfifo(target)
    elif special == "device":
        target = Path("/dev/null")  # a run as root would otherwise replace the system's /dev/null
    elif special == "/dev/stdout":
        target = Path(special)  # a link to the test's pipe
    else:
        target = tmp_path / "stdout-like"
        target.symlink_to("/dev/null")
    before = os.lstat(target)
    for extra in ([], ["--overwrite"]):
        result = cli("run", TINY, "-o", str(target), "--backend", "cpu", *extra, cwd=tmp_path)
        message = assert_error(result, 6, "not a regular file", "-o - for standard output")
        assert "--overwrite" not in message  # which would not replace it either
    after = os.lstat(target)
    assert (after.st_ino, after.st_mode, after.st_rdev) == (before.st_ino, before.st_mode,
                                                            before.st_rdev)
    assert leftovers(target.parent) == []


def test_a_report_that_is_a_device_is_refused_without_advice_about_the_output(tmp_path):
    """(regression: --stats-json /dev/full was told to "leave out -o" or "give -o -", which are the
    video's)"""
    result = cli("run", TINY, "--stats-json", "/dev/full", "--backend", "cpu", cwd=tmp_path)
    message = assert_error(result, 6, "--stats-json is not a regular file", "never replaced")
    assert "-o" not in message.replace("--stats-json", "")
    assert list(tmp_path.iterdir()) == []
