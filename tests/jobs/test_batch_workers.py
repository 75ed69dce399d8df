"""A batch's workers: worker processes die with a SIGKILLed batch and publish nothing after it,
``--jobs N`` keeps N inputs running to the end (an input is opened ahead only when another
worker would not be left without one), and an input's seconds count from its turn."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import streamconv
from streamconv.jobs.worker import AheadGate, worker_plan

from helpers.batches import manifest_of, start_batch, wait_for
from helpers.clips import write_clip


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, dead but not yet reaped by whoever adopted it, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def children(pid: int, marker: str) -> list[int]:
    """The processes whose parent is ``pid`` and whose command line holds ``marker``."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat") as stat:
                parent = int(stat.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                command = cmdline.read().decode(errors="replace")
        except (OSError, ValueError):
            continue
        if parent == pid and marker in command:
            found.append(int(entry))
    return found


def gone_within(pids: list[int], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while any(alive(pid) for pid in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_process_that_calls_die_with_parent_dies_with_it(tmp_path):
    # A parent that starts the worker-like child, says its pid once it is ready, and waits.
    child = textwrap.dedent("""
        import os, sys, time
        from streamconv.jobs.worker import die_with_parent
        die_with_parent(int(sys.argv[1]))
        print("ready", flush=True)
        time.sleep(60)
    """)
    parent = textwrap.dedent(f"""
        import os, subprocess, sys, time
        grandchild = subprocess.Popen([sys.executable, "-c", {child!r}, str(os.getpid())], stdout=subprocess.PIPE)
        assert grandchild.stdout.readline() == b"ready\\n"
        print(grandchild.pid, flush=True)
        time.sleep(60)
    """)
    outer = subprocess.Popen([sys.executable, "-c", parent], stdout=subprocess.PIPE)
    try:
        worker = int(outer.stdout.readline())
        assert alive(worker)
    finally:
        outer.kill()
        outer.wait()
    assert gone_within([worker], 2.0)
    # A parent already gone: it ends at once instead of running on.
    late = subprocess.run([sys.executable, "-c", child, "1" if os.getpid() != 1 else "2"],
                          capture_output=True, timeout=60)
    assert late.returncode == 1 and late.stdout == b""


def hidden(folder: Path) -> dict[str, int]:
    """The outputs' temporary files in ``folder`` (being written), with their sizes."""
    found = {}
    for path in folder.glob(".*.partial.mp4"):
        try:
            found[path.name] = path.stat().st_size
        except FileNotFoundError:
            pass  # published or removed meanwhile
    return found


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_worker_processes_die_with_a_killed_batch_and_publish_nothing_after_it(tmp_path):
    command, out, batch = start_batch(tmp_path, 4, "--jobs", "2", "--processes", "2")
    # both writing
    wait_for(out, lambda counts: counts.get("running") == 2 and len(hidden(out)) == 2)
    workers = children(batch.pid, "spawn_main")
    assert len(workers) == 2
    # Frozen first, so that what is on disk at the kill is known: a worker that finished its input
    # in the moment since both were seen writing would otherwise publish under the test's feet.
    for pid in (batch.pid, *workers):
        os.kill(pid, signal.SIGSTOP)
    left, published = hidden(out), sorted(p.name for p in out.glob("*.mp4"))
    batch.kill()
    batch.wait(timeout=30)
    for pid in workers:
        os.kill(pid, signal.SIGCONT)  # the parent's death signal is taken as they run on
    assert gone_within(workers, 0.5), [pid for pid in workers if alive(pid)]
    time.sleep(1.0)  # a worker still running would finish, publish or discard by now
    # Killed mid-write: their temporary files stay as they were, nothing more is published.
    assert left and hidden(out) == left and sorted(p.name for p in out.glob("*.mp4")) == published
    killed = manifest_of(out)
    assert killed["counts"]["running"] == len(left)
    for record in killed["inputs"]:
        assert Path(record["output"]).exists() == (record["status"] == "done"), record
    resumed = subprocess.run(command + ["--resume"], capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    # the next batch removed them
    assert not [p.name for p in out.iterdir() if p.name.startswith(".")]


@pytest.mark.parametrize("processes", [1, 2])
def test_jobs_n_runs_the_last_n_inputs_at_once(tmp_path, processes):
    folder = tmp_path / "in"
    folder.mkdir()
    for n in range(2):
        write_clip(folder / f"c{n}.mp4", frames=12, seed=n, size=(64, 48))
    result = streamconv.run_batch([str(folder)], ["box:size=3"], tmp_path / "out", backend="cpu",
                                  jobs=2, processes=processes)
    assert result.exit_code == 0
    # Neither was opened ahead by the other's worker, to wait for it: each had a worker of its own.
    assert [r.opened_ahead for r in result.records] == [False, False]


def test_the_gate_opens_ahead_only_what_no_other_worker_would_take():
    two = AheadGate([2, 2])  # 2 inputs, 2 workers
    assert two.take() and not two.take_ahead()  # the other worker takes the second
    assert two.take() and not two.take() and not two.take_ahead()
    three = AheadGate([3, 2])
    assert three.take() and three.take_ahead()  # one left over for the other worker
    assert three.take() and not three.take_ahead() and not three.take()
    three.start_held()
    assert three.counts == [0, 2]
    five = AheadGate([5, 2])
    assert five.take() and five.take_ahead() and five.take() and five.take_ahead()  # each holds one
    assert five.counts == [1, 0]
    five.start_held()  # the other still holds one: the last may be opened ahead too
    assert five.take_ahead() and five.counts == [0, 0] and not five.take()


def test_an_inputs_seconds_count_from_its_turn_not_from_its_opening_ahead(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    for n in range(3):
        write_clip(folder / f"c{n}.mp4", frames=24, seed=n, size=(96, 64))
    batch = streamconv.Batch([str(folder)], ["gaussian:sigma=3"], tmp_path / "out", backend="cpu",
                             jobs=1, processes=1)
    started = time.perf_counter()
    result = batch.run()
    wall = time.perf_counter() - started
    assert [r.opened_ahead for r in result.records] == [False, True, True]
    # one after another: within the batch's time
    assert sum(r.seconds for r in result.records) <= wall
    for record in result.records:
        assert 0 < record.first_frame_ms < 1e3 * record.seconds


def test_jobs_beyond_the_inputs_start_no_idle_workers(tmp_path, monkeypatch):
    # --jobs 100000 on one input once built a list of 100000 slots and started 25000 worker
    # processes (the machine ran out of memory); threads beyond the inputs were started idle
    clip = write_clip(tmp_path / "c.mp4", frames=3, size=(64, 48))
    started = []
    work = streamconv.Batch._work
    monkeypatch.setattr(streamconv.Batch, "_work",
                        lambda self, *args: (started.append(1), work(self, *args))[1])
    result = streamconv.run_batch([str(clip)], ["identity"], tmp_path / "out", backend="cpu",
                                  jobs=500, processes=1)
    assert result.exit_code == 0 and len(started) == 1
    assert worker_plan([0], 100000, None, 3) == ([0, 0, 0], 1)  # one process, as for three jobs
    assert worker_plan([0, 1], 8, None, 3) == ([0, 1, 0], 1)  # the inputs spread over both GPUs
    assert worker_plan([0], 16, 2, 0) == ([0], 1)
