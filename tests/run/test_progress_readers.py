"""--progress into a FIFO or device: a reader that falls behind, one not there yet, a device
that takes nothing. Progress must never hold up the frames, and no fault is silent."""

from __future__ import annotations

import fcntl
import logging
import os
import subprocess
import sys
import threading

import pytest

from helpers.cli import cli_env
from helpers.progress import blocks

pytestmark = pytest.mark.skipif(not hasattr(fcntl, "F_SETPIPE_SZ"), reason="needs Linux pipes")


def test_a_reader_that_stops_reading_never_holds_up_the_run(tmp_path, monkeypatch, caplog):
    from streamconv import Pipeline
    from streamconv.run import progressfile

    fifo = tmp_path / "progress"
    os.mkfifo(fifo)
    # opened, then never read while the run goes
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    fcntl.fcntl(reader, fcntl.F_SETPIPE_SZ, 4096)  # room for some 30 blocks of the run's hundreds
    monkeypatch.setattr(progressfile, "END_WAIT", 0.5, raising=False)
    report = progressfile.ProgressFile(fifo, interval=0.001)  # a block for each frame
    outcome = {}
    run = threading.Thread(target=lambda: outcome.update(stats=Pipeline(
        "test:64x48@10,frames=2000", ["identity"], None, backend="cpu",
        progress_file=report).run()))
    with caplog.at_level(logging.WARNING, logger="streamconv.run.progressfile"):
        run.start()
        run.join(60)
        held = run.is_alive()
        text = b""
        while chunk := _read_now(reader):
            text += chunk  # what the pipe held, and room for a writer that waited (the old code)
        os.close(reader)
        run.join(60)
    # The writer thread waited for room for ever: the pipe's reader was the run's pace.
    assert not held and outcome["stats"].frames == 2000
    frames = [int(block["frame"]) for block in blocks(text.decode())]  # whole blocks only
    assert frames == sorted(frames) and frames[-1] < 2000
    assert f"--progress {fifo}: its reader took nothing for 0.5 s; the last block (progress=end) was not " \
           "written" in caplog.text


def _read_now(fd: int) -> bytes:
    """What the pipe holds now, b"" when it holds nothing."""
    try:
        return os.read(fd, 65536)
    except BlockingIOError:
        return b""


def test_a_fifo_with_no_reader_yet_is_waited_for_with_a_word(tmp_path):
    fifo = tmp_path / "progress"
    os.mkfifo(fifo)
    command = [sys.executable, "-m", "streamconv", "run", "test:64x48,frames=5", "--backend", "cpu",
               "-q", "--no-progress", "--progress", str(fifo), "-o", str(tmp_path / "o.mkv")]
    waiting = f"--progress {fifo}: waiting for a reader of the FIFO (Ctrl-C stops)"
    with subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=cli_env()) as process:
        watchdog = threading.Timer(30, process.kill)  # it waited in silence: no line would come
        watchdog.start()
        try:
            said = ""
            while waiting not in said and (line := process.stderr.readline()):
                said += line
            assert waiting in said, said
            with open(fifo, encoding="utf-8") as reader:
                text = reader.read()
            _, rest = process.communicate(timeout=60)
        finally:
            watchdog.cancel()
            process.kill()
    assert process.returncode == 0, said + rest
    end = blocks(text)[-1]
    assert (end["progress"], end["frame"]) == ("end", "5")


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
def test_a_device_that_takes_nothing_is_said_once_and_the_run_goes_on(tmp_path):
    command = [sys.executable, "-m", "streamconv", "run", "test:64x48,frames=5", "--backend", "cpu",
               "-q", "--no-progress", "--progress", "/dev/full", "-o", str(tmp_path / "o.mkv")]
    result = subprocess.run(command, capture_output=True, text=True, env=cli_env(), timeout=60)
    assert result.returncode == 0, result.stderr
    # It was silent: no progress anywhere, and no word of why.
    assert result.stderr.count("--progress /dev/full: No space left on device; no more progress is "
                               "written "
                               "there") == 1
    assert (tmp_path / "o.mkv").is_file()
