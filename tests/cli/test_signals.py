"""SIGINT and SIGTERM sent to a real ``streamconv run`` at the moments that matter: during
start-up, while a FIFO input is being opened, mid-run, and while the encoder flushes and the
file is published. A first signal ends with a complete, playable file of the frames filtered
so far (exit 130 or 143); a second aborts at once and leaves nothing; never a traceback.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import av
import numpy as np
import pytest

from helpers.cli import REPO
from helpers.processes import Run, leftovers

CODES = {signal.SIGINT: 130, signal.SIGTERM: 143}
SIGNAL_IDS = ["SIGINT", "SIGTERM"]


def frame_count(path: Path) -> int:
    """Frames in ``path``'s video, decoded to the end (an unplayable file raises)."""
    with av.open(str(path)) as container:
        return sum(1 for _ in container.decode(video=0))


@pytest.fixture(scope="module")
def noise_clip(tmp_path_factory) -> Path:
    """24 frames of 640x360 noise (lossless FFV1): slow for x264, so its flush takes seconds."""
    path = tmp_path_factory.mktemp("noise") / "noise.mkv"
    rng = np.random.default_rng(7)
    with av.open(str(path), "w") as container:
        stream = container.add_stream("ffv1", rate=30)
        stream.width, stream.height, stream.pix_fmt = 640, 360, "yuv420p"
        for index in range(24):
            frame = av.VideoFrame.from_ndarray(rng.integers(0, 256, (360, 640, 3), np.uint8),
                                               format="rgb24")
            frame.pts = index
            container.mux(stream.encode(frame))
        container.mux(stream.encode(None))
    return path


def slow_flush_run(noise_clip: Path, output: Path) -> Run:
    """A run whose 24 frames all wait in x264's lookahead (60 at veryslow) until the flush."""
    return Run("run", str(noise_clip), "-o", str(output), "--filter", "box:size=3", "--backend",
               "cpu", "--preset", "veryslow", "--no-progress", "-v", cwd=output.parent)


@pytest.mark.parametrize("signum", CODES, ids=SIGNAL_IDS)
def test_a_signal_during_the_flush_still_publishes_every_frame(tmp_path, noise_clip, signum):
    output = tmp_path / "out.mp4"
    run = slow_flush_run(noise_clip, output)
    run.wait_for_line("flushing the encoder")
    run.process.send_signal(signum)
    assert run.finish() == CODES[signum], run.stderr
    assert "Traceback" not in run.stderr and "error:" not in run.stderr, run.stderr
    assert leftovers(tmp_path) == [] and output.exists(), run.stderr
    assert frame_count(output) == 24


@pytest.mark.parametrize("signum", CODES, ids=SIGNAL_IDS)
def test_a_second_signal_during_the_flush_aborts_and_leaves_nothing(tmp_path, noise_clip, signum):
    output = tmp_path / "out.mp4"
    run = slow_flush_run(noise_clip, output)
    run.wait_for_line("flushing the encoder")
    run.process.send_signal(signum)
    time.sleep(0.2)
    assert run.process.poll() is None, "the flush ended before the second signal: make it longer"
    run.process.send_signal(signal.SIGINT)
    assert run.finish(timeout=30) == 130, run.stderr
    assert "Traceback" not in run.stderr, run.stderr
    assert "interrupted" in run.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_second_signal_mid_run_aborts_and_leaves_nothing(tmp_path, noise_clip):
    output = tmp_path / "out.mp4"
    run = Run("run", str(noise_clip), "-o", str(output), "--filter", "box:size=3", "--backend",
              "cpu", "--preset", "veryslow", "--realtime", "--no-progress", cwd=tmp_path)
    run.wait_for(lambda: leftovers(tmp_path), "the temporary file")  # the first frame is in
    run.process.send_signal(signal.SIGTERM)
    run.wait_for_line("SIGTERM: stopping")  # two signals sent at once would arrive as one
    run.process.send_signal(signal.SIGTERM)
    assert run.finish(timeout=30) == 143, run.stderr
    assert "Traceback" not in run.stderr, run.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("signum", CODES, ids=SIGNAL_IDS)
def test_a_signal_during_start_up_exits_cleanly(tmp_path, signum):
    run = Run("run", "test:64x48,frames=3", "-o", str(tmp_path / "out.mp4"), cwd=tmp_path)
    run.wait_for(run.handlers_installed, "the signal handlers")
    run.process.send_signal(signum)  # the CLI's imports (NumPy, OpenCV, PyAV) are still loading
    code = run.finish()
    assert code == CODES[signum], run.stderr
    assert "Traceback" not in run.stderr, run.stderr
    assert list(tmp_path.iterdir()) == []


def _line_of(module: str, text: str) -> int:
    """The number of the first line of ``streamconv/<module>`` that holds ``text``."""
    lines = (REPO / "streamconv" / module).read_text().splitlines()
    return next(number for number, line in enumerate(lines, 1) if text in line)


def _before_the_hold(stderr: str) -> bool:
    """Whether a traceback was raised before streamconv's first statement held the signals: in
    the interpreter's own start-up (site, runpy, the script), or in streamconv's lines before
    the hold (``import streamconv``'s constants, the import of launch.py), not after it."""
    allowed = {"__init__.py": 10**6, "__main__.py": _line_of("__main__.py", "from .launch import"),
               "launch.py": _line_of("launch.py", "_MASK(_signal.SIG_BLOCK")}
    package = str(REPO / "streamconv") + os.sep
    for path, line in re.findall(r'File "([^"]+)", line (\d+)', stderr):
        if path.startswith(package) and int(line) > allowed.get(path[len(package):], 0):
            return False
    return True


ENTRIES = {"python -m": ["-m", "streamconv"],  # and the console script's own lines:
           "console script": ["-c",
                              "import re, sys; from streamconv.launch import main; "
                              "sys.exit(main())"]}


@pytest.mark.parametrize("entry", ENTRIES)
def test_a_sigint_at_any_moment_of_start_up_exits_130_without_a_traceback(tmp_path, entry):
    """SIGINT sent 0, 3, 6... ms after exec, until 8 runs have met streamconv (the delays go as
    far as this machine's start-up needs): from its first statement on, whatever the signal
    meets (streamconv's imports, the CLI's), the command ends with 130 and no traceback; before
    it, only the interpreter's own start-up sees the signal."""
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    handled, delay_ms = 0, 0
    while handled < 8:
        assert delay_ms <= 600, "start-up never reached streamconv"
        process = subprocess.Popen([sys.executable, *ENTRIES[entry], "run", "test:64x48,frames=3",
                                    "-o", "out.mp4", "--backend", "cpu"], cwd=tmp_path, env=env,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        time.sleep(delay_ms / 1000)  # Popen returns once the child has exec'd
        process.send_signal(signal.SIGINT)
        stderr = process.communicate(timeout=60)[1]
        if process.returncode == 130 and "Traceback" not in stderr:
            assert stderr.strip().splitlines()[-1:] == ["streamconv: interrupted"], stderr
            handled += 1
        else:  # the signal came before the command was there: the interpreter's to handle
            assert _before_the_hold(stderr), f"{delay_ms} ms: exit {process.returncode}\n{stderr}"
        assert list(tmp_path.iterdir()) == []
        delay_ms += 3


@pytest.mark.parametrize("signum", CODES, ids=SIGNAL_IDS)
def test_a_signal_while_a_fifo_input_is_opened_exits_with_the_signals_code(tmp_path, signum):
    fifo = tmp_path / "input.fifo"
    os.mkfifo(fifo)
    run = Run("run", str(fifo), "-o", str(tmp_path / "out.mp4"), "--backend", "cpu", cwd=tmp_path)
    run.wait_for(run.handlers_installed, "the signal handlers")
    time.sleep(1.0)  # start-up done: blocked in open(), which waits for a writer
    run.process.send_signal(signum)
    assert run.finish(timeout=30) == CODES[signum], run.stderr
    assert "Traceback" not in run.stderr and "error:" not in run.stderr, run.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["input.fifo"]


def signal_mask(pid: int, field: str) -> int:
    """The signals in ``field`` (SigIgn, SigCgt...) of /proc/PID/status, as a bit mask."""
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines()
                    if line.startswith(field + ":")), 16)


def test_a_sigint_ignored_by_the_shell_stays_ignored_and_sigterm_still_stops(tmp_path):
    """``streamconv run ... &`` from a script: the shell starts the job with SIGINT ignored (so
    that a Ctrl-C meant for the script's foreground spares it); the run keeps it so, and ends
    on SIGTERM as ever (143, a playable file of the frames so far)."""
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    script = '"$@" & echo $!; wait $!'  # a non-interactive shell's background job
    shell = subprocess.Popen(["sh", "-c", script, "sh", sys.executable, "-m", "streamconv", "run",
                              "test:160x120@30,frames=90", "--realtime", "-o", "out.mp4",
                              "--backend", "cpu", "--no-progress"], cwd=tmp_path, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        pid = int(shell.stdout.readline())
        deadline = time.monotonic() + 60
        # The forked shell sets SIGINT ignored before it runs the job: read it once exec'd.
        while Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0] != sys.executable.encode():
            assert time.monotonic() < deadline, "the job never started Python"
            time.sleep(0.01)
        sigint = 1 << (signal.SIGINT - 1)
        assert signal_mask(pid, "SigIgn") & sigint, "the shell did not ignore SIGINT"
        deadline = time.monotonic() + 60
        while not leftovers(tmp_path):  # the first frame is being written
            assert shell.poll() is None and time.monotonic() < deadline, shell.stderr.read()
            time.sleep(0.01)
        os.kill(pid, signal.SIGINT)
        time.sleep(0.5)
        with contextlib.suppress(ProcessLookupError):  # gone if SIGINT stopped it: see its exit
            os.kill(pid, signal.SIGTERM)
        stderr = shell.communicate(timeout=60)[1]
    finally:
        if shell.poll() is None:
            shell.kill()
    assert shell.returncode == 143, stderr
    assert "SIGTERM" in stderr and "SIGINT" not in stderr and "Traceback" not in stderr, stderr
    assert 0 < frame_count(tmp_path / "out.mp4") < 90


def bar_clip(path: Path, frames: int = 200) -> None:
    """A bar sweeping a 320x240 picture, x264 at its default preset: cheap frames to encode, so
    the encoders' threads are busy finishing frames when a batch is aborted."""
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=25)
        stream.width, stream.height, stream.pix_fmt = 320, 240, "yuv420p"
        for index in range(frames):
            picture = np.zeros((240, 320, 3), np.uint8)
            picture[:, index * 3 % 320: index * 3 % 320 + 8] = 255
            picture[..., 1] = index * 5 % 256
            frame = av.VideoFrame.from_ndarray(picture, format="rgb24")
            frame.pts = index
            container.mux(stream.encode(frame))
        container.mux(stream.encode(None))


def test_a_second_signal_ends_a_batch_of_encoders_mid_frame(tmp_path):
    # The encoders are freed while their threads work: none may wait on the interpreter lock then.
    inputs = tmp_path / "in"
    inputs.mkdir()
    for index in range(4):
        bar_clip(inputs / f"clip{index}.mp4")
    run = Run("batch", str(inputs), "-o", str(tmp_path / "out"), "--filter", "box:size=15",
              "--backend", "cpu", "--jobs", "2", "--no-progress", cwd=tmp_path)
    run.wait_for(lambda: (tmp_path / "out").is_dir() and len(leftovers(tmp_path / "out")) == 2,
                 "two inputs running")
    time.sleep(0.5)
    run.process.send_signal(signal.SIGINT)
    time.sleep(0.1)
    run.process.send_signal(signal.SIGINT)
    assert run.finish(timeout=30) == 130, run.stderr
    assert "Traceback" not in run.stderr, run.stderr
    assert leftovers(tmp_path / "out") == []


def test_x264_is_kept_quiet_unless_its_log_level_is_asked_for():
    from streamconv.io.ffmpeg.log import quiet_encoder_threads

    assert quiet_encoder_threads("libx264", {"crf": "20"}) == {"crf": "20", "x264-params": "log=1"}
    assert quiet_encoder_threads("libx264",
                                 {"x264-params": "keyint=30"})["x264-params"] == "keyint=30:log=1"
    assert quiet_encoder_threads("libx264", {"x264-params": "log=3"}) == {"x264-params": "log=3"}
    assert quiet_encoder_threads("libx265", {"crf": "20"}) == {"crf": "20"}
