"""``streamconv batch --ray``: a real Ray cluster started here (a head node with two worker CPUs),
inside a network namespace of the test's own that has only loopback, runs a batch of clips with a
damaged one among them while one of its workers is killed in the middle of a task: the task is
retried, every input is counted once, nothing half-written is published. In the same cluster a
second batch gets one SIGINT while its first tasks run: those finish whole, the rest stay pending;
a third is running when the whole cluster is killed (the process group the test started): it
ends by itself with a clear error, its manifest true. Without a cluster: an address where
no cluster answers, or that is no address, is a clear error at once."""

from __future__ import annotations

import copy
import importlib.util
import json
import os
import pickle
import signal
import socket
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path
from types import SimpleNamespace

import pytest

from helpers.clips import write_clip
from helpers.damage import flip_bytes
from helpers.raycluster import (ADDRESS, SIGINT_RESTORED, killer, leftover_processes,
                                run_in_cluster, why_not)
from streamconv.jobs.ray import batch as batch_ray
from streamconv.jobs.batch import Batch
from streamconv.errors import Interrupted
from streamconv.jobs.manifest import MANIFEST_NAME, BatchRecord

# Until a Ray worker runs an input (bounded: a batch that never gets one fails its checks).
# a few seconds of filtering each on one CPU; one more than its CPUs
LONG_FRAMES, LONG_COUNT = 720, 3
TASK_RUNS = "for i in $(seq 1200); do ps -eo args= | grep -q '[r]ay::run_input_task' && break; sleep 0.05; done"


@pytest.mark.skipif(why_not() is not None, reason=str(why_not()))
def test_a_batch_on_a_ray_cluster_through_a_killed_worker_a_signal_and_the_cluster_lost(tmp_path):
    folder, out, stopped = tmp_path / "in", tmp_path / "out", tmp_path / "stopped"
    folder.mkdir()
    for n in range(4):
        write_clip(folder / f"clip{n}.mp4", frames=72, seed=n, size=(320, 240))
    (folder / "damaged.mp4").write_bytes(flip_bytes((folder / "clip0.mp4").read_bytes(), 4, 300))
    # The signalled batch's inputs last seconds each: the signal lands while two of them run
    # and one waits, however fast or slow the machine (the short clips can all end before it).
    long_ones = tmp_path / "long"
    long_ones.mkdir()
    for n in range(LONG_COUNT):
        write_clip(long_ones / f"long{n}.mp4", frames=LONG_FRAMES, seed=n, size=(320, 240))
    batch = (f"{sys.executable} -m streamconv batch {{}} --backend cpu --ray {ADDRESS} "
             f"--filter gaussian:sigma=3 --no-progress -q")
    run_in_cluster(tmp_path, f"""
        {batch.format(folder)} -o {out} > {tmp_path}/batch.log 2>&1 &
        BATCH=$!
        {killer(tmp_path, "run_input_task")} > {tmp_path}/killed.txt
        wait $BATCH; echo $? > {tmp_path}/batch.rc
        {SIGINT_RESTORED} {batch.format(long_ones)} -o {stopped} > {tmp_path}/stopped.log 2>&1 &
        BATCH=$!
        {TASK_RUNS}
        sleep 1; kill -INT $BATCH; wait $BATCH; echo $? > {tmp_path}/stopped.rc  # well into its first tasks
        {batch.format(long_ones)} -o {tmp_path}/lost > {tmp_path}/lost.log 2>&1 &
        BATCH=$!
        {TASK_RUNS}
        sleep 0.3; kill -KILL -- -$CLUSTER; wait $BATCH; echo $? > {tmp_path}/lost.rc
    """)
    log = (tmp_path / "batch.log").read_text() if (tmp_path / "batch.log").exists() else ""
    # the damaged input, nothing failed
    assert (tmp_path / "batch.rc").read_text().strip() == "13", log
    # a worker really was killed mid-task
    assert (tmp_path / "killed.txt").read_text().strip().isdigit()
    records = json.loads((out / MANIFEST_NAME).read_text())["inputs"]
    assert sorted(Path(r["input"]).name for r in records) == sorted(p.name
                                                                    for p in folder.iterdir())
    statuses = {Path(r["input"]).name: r["status"] for r in records}
    assert statuses.pop("damaged.mp4") == "damaged" and set(statuses.values()) == {"done"}
    _check_outputs(records, out)
    _check_first_signal(tmp_path, stopped)
    _check_cluster_lost(tmp_path, tmp_path / "lost")
    assert not leftover_processes()


def _check_outputs(records: list[dict], out: Path, frames: int = 72) -> None:
    """Each finished input's output as recorded, every clip's frames all there, no temporary
    file."""
    for record in records:
        if record["status"] != "pending":
            assert record["frames"] > 0 and Path(record["output"]).stat().st_size == record["bytes"]
        else:
            assert not Path(record["output"]).exists()
    assert all(r["frames"] == frames for r in records if r["status"] == "done")
    assert not [p for p in out.iterdir() if ".partial" in p.name]  # a killed attempt's file is gone


def _check_first_signal(tmp_path: Path, stopped: Path) -> None:
    """One SIGINT while tasks run: Ray's cancel of the running tasks must not cut them short (a
    truncated output published); they finish whole, the others stay pending for --resume."""
    log = (tmp_path / "stopped.log").read_text()
    assert (tmp_path / "stopped.rc").read_text().strip() == "130", log
    records = json.loads((stopped / MANIFEST_NAME).read_text())["inputs"]
    statuses = [r["status"] for r in records]
    assert set(statuses) <= {"done", "pending"}, (statuses, log)
    assert "pending" in statuses and "done" in statuses, statuses
    _check_outputs(records, stopped, LONG_FRAMES)


def _check_cluster_lost(tmp_path: Path, lost: Path) -> None:
    """The whole cluster killed while tasks run: the batch itself ends with one error line
    (Ray would wait a minute, then end the process with its own), the manifest true (nothing
    finished: every input pending for --resume), no killed task's temporary file left."""
    log = (tmp_path / "lost.log").read_text()
    assert (tmp_path / "lost.rc").read_text().strip() == "7" and "stopped answering" in log, log
    statuses = [r["status"] for r in json.loads((lost / MANIFEST_NAME).read_text())["inputs"]]
    assert statuses == ["pending"] * LONG_COUNT, statuses
    assert [p.name for p in lost.iterdir()] == [MANIFEST_NAME]


@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="Ray is not installed")
def test_a_cluster_that_does_not_answer_is_a_clear_error_at_once(cli, tmp_path):
    clip = write_clip(tmp_path / "in.mp4", frames=8)
    with socket.socket() as closed:  # bound, never listening: connecting to it is refused
        closed.bind(("127.0.0.1", 0))
        nowhere = f"127.0.0.1:{closed.getsockname()[1]}"
        runs = [(("batch", str(clip), "-o", str(tmp_path / "out"), "--ray", nowhere), {},
                 "no Ray cluster answers"),
                (("batch", str(clip), "-o", str(tmp_path / "out2"), "--ray"),
                 {"RAY_ADDRESS": "garbage"}, "not HOST:PORT"),
                (("run", str(clip), "-o", str(tmp_path / "o.mp4"), "--segments", "2", "--ray",
                  nowhere), {},
                 "no Ray cluster answers")]
        for args, env, words in runs:
            result = cli(*args, "--backend", "cpu", "--filter", "edge", "--no-progress", env=env,
                         timeout=60)
            assert result.returncode == 7 and words in result.stderr, (args, result.stderr)
    assert not (tmp_path / "o.mp4").exists() and \
        not [p for p in tmp_path.rglob("*") if ".partial" in p.name]


# A process of its own standing in for a Ray worker: the task with the record and settings of a
# pickle, and Ray's runtime (the task's id) stood in for; ``real`` is the input's own run.
AS_A_RAY_WORKER = """
import os, pickle, signal, sys, time
from types import SimpleNamespace
from streamconv.jobs.ray import batch as batch_ray
record, settings = pickle.load(open(sys.argv[1], "rb"))
batch_ray.ray_module = lambda: SimpleNamespace(get_gpu_ids=list,
                                               get_runtime_context=lambda: SimpleNamespace(get_task_id=lambda: "0a" * 12))
real = batch_ray.run_input
"""

LOST_ATTEMPT = AS_A_RAY_WORKER + """
def killed_after_publishing(*args):
    real(*args)
    os._exit(9)  # the worker dies before its result reaches the batch: nothing of it runs on
batch_ray.run_input = killed_after_publishing
batch_ray.run_input_task(record, settings)
"""


def as_a_ray_worker(script: str, task: Path) -> subprocess.CompletedProcess:
    """Run ``script`` (AS_A_RAY_WORKER's and more) on the pickled task ``task``; text output."""
    return subprocess.run([sys.executable, "-c", script, str(task)], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})


def test_a_retry_replaces_the_output_its_lost_attempt_published_and_no_other(tmp_path, monkeypatch):
    """Without a cluster: a task's worker killed just after publishing its output (in a process
    of its own), then Ray's retry of that task (the same task id) in this one: the retry
    replaces the output instead of failing on it; an output older than the task's first attempt
    is another's, and is never replaced."""
    clip = write_clip(tmp_path / "in.mp4", frames=8)
    batch = Batch([str(clip)], ["edge"], tmp_path / "out", backend="cpu")
    record, output = asdict(batch.manifest.records[0]), Path(batch.manifest.records[0].output)
    (tmp_path / "task.pickle").write_bytes(pickle.dumps((record, batch.settings)))
    lost = as_a_ray_worker(LOST_ATTEMPT, tmp_path / "task.pickle")
    assert lost.returncode == 9 and output.exists(), lost.stderr
    inode = output.stat().st_ino
    fake = SimpleNamespace(get_gpu_ids=list,
                           get_runtime_context=lambda: SimpleNamespace(
                               get_task_id=lambda: "0a" * 12))
    monkeypatch.setattr(batch_ray, "ray_module", lambda: fake)
    retry = batch_ray.run_input_task(record, copy.deepcopy(batch.settings))
    assert retry["status"] == "done" and retry["frames"] == 8, retry
    assert output.stat().st_ino != inode and output.stat().st_size == retry["bytes"]
    assert [p.name for p in output.parent.iterdir()] == [output.name]  # no claim left
    os.utime(output, (1e9, 1e9))  # someone else's file, there before the task began
    as_a_ray_worker(LOST_ATTEMPT, tmp_path / "task.pickle")
    before = output.stat()
    again = batch_ray.run_input_task(record, copy.deepcopy(batch.settings))
    assert again["status"] == "failed" and "exists" in again["error"]
    assert (output.stat().st_ino, output.stat().st_mtime) == (before.st_ino,
                                                              before.st_mtime) == (
                                                                  before.st_ino, 1e9)


CANCELLED_AROUND_THE_INPUT = AS_A_RAY_WORKER + """
def cancelled_as_it_starts(*args):
    os.kill(os.getpid(), signal.SIGINT)  # Ray's cancel of the running task, as the input starts
    real(*args)
batch_ray.run_input = cancelled_as_it_starts
result = batch_ray.run_input_task(record, settings)
os.kill(os.getpid(), signal.SIGINT)  # another, after the task returned, before Ray stores its result
time.sleep(0.2)
print(result["status"], result["frames"])
"""


def test_a_cancel_that_reaches_a_running_task_cuts_nothing_short(tmp_path):
    """Without a cluster, in a process of its own: SIGINTs (what Ray's cancel of a running task
    sends) as the input starts and after the task returned. The input runs whole, and the one
    after the task raises nothing (Ray would store the task as cancelled, its output published)."""
    clip = write_clip(tmp_path / "in.mp4", frames=24)
    batch = Batch([str(clip)], ["edge"], tmp_path / "out", backend="cpu")
    (tmp_path / "task.pickle").write_bytes(pickle.dumps((asdict(batch.manifest.records[0]),
                                                         batch.settings)))
    task = as_a_ray_worker(CANCELLED_AROUND_THE_INPUT, tmp_path / "task.pickle")
    assert (task.returncode, task.stdout.split()) == (0, ["done", "24"]), task.stderr
    assert Path(batch.manifest.records[0].output).exists()


def test_a_second_signal_while_a_result_is_fetched_still_records_it():
    """Without a cluster: the batch's second signal lands while a finished task's result is being
    fetched; the pass over the cancelled tasks still records that input (its output is
    published)."""

    class FakeRay:
        exceptions = SimpleNamespace(TaskCancelledError=LookupError, RayError=RuntimeError)
        fetches = 0

        def wait(self, refs, num_returns, timeout):
            return refs[:1], refs[1:]

        def get(self, ref):
            self.fetches += 1
            if self.fetches == 1:
                raise Interrupted(signal.SIGINT)
            return {"status": "done", "frames": 8, "exit_code": 0}

        def cancel(self, ref, force=False):
            pass

        def get_runtime_context(self):
            return SimpleNamespace(gcs_address=ADDRESS)  # not looked at: no 2 s pass here

    record = BatchRecord("in.mp4", "out/in.mp4")
    batch = SimpleNamespace(stopping=False,
                            manifest=SimpleNamespace(records=[record], write=lambda: None))
    ray, waiting = FakeRay(), {"ref": 0}
    with pytest.raises(Interrupted):
        batch_ray._collect(ray, batch, waiting)
    batch_ray._collect(ray, batch, waiting, cancelled=True)
    assert (record.status, record.frames) == ("done", 8)
