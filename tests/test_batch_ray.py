"""``streamconv batch --ray``: a real Ray cluster started here (a head node with two worker CPUs),
inside a network namespace of the test's own that has only loopback, runs a batch of clips with a
damaged one among them while one of its workers is killed in the middle of a task: the task is
retried, every input is counted once, nothing half-written is published. The cluster is stopped
by the process group the test started."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from clips import write_clip
from raycluster import ADDRESS, killer, leftover_processes, run_in_cluster, why_not
from streamconv.manifest import MANIFEST_NAME
from test_reliability import flip_bytes

pytestmark = pytest.mark.skipif(why_not() is not None, reason=str(why_not()))


def test_a_ray_cluster_runs_the_batch_and_survives_a_killed_worker(tmp_path):
    folder, out = tmp_path / "in", tmp_path / "out"
    folder.mkdir()
    for n in range(4):
        write_clip(folder / f"clip{n}.mp4", frames=72, seed=n, size=(320, 240))
    (folder / "damaged.mp4").write_bytes(flip_bytes((folder / "clip0.mp4").read_bytes(), 4, 300))
    python = sys.executable
    run_in_cluster(tmp_path, f"""
        {python} -m streamconv batch {folder} -o {out} --backend cpu --ray {ADDRESS} \\
            --filter gaussian:sigma=3 --no-progress -q > {tmp_path}/batch.log 2>&1 &
        BATCH=$!
        {killer(tmp_path, "run_input_task")} > {tmp_path}/killed.txt
        wait $BATCH; echo $? > {tmp_path}/batch.rc
    """)
    log = (tmp_path / "batch.log").read_text() if (tmp_path / "batch.log").exists() else ""
    assert (tmp_path / "batch.rc").read_text().strip() == "13", log  # the damaged input, nothing failed
    assert (tmp_path / "killed.txt").read_text().strip().isdigit()  # a worker really was killed mid-task
    records = json.loads((out / MANIFEST_NAME).read_text())["inputs"]
    assert sorted(Path(r["input"]).name for r in records) == sorted(p.name for p in folder.iterdir())
    statuses = {Path(r["input"]).name: r["status"] for r in records}
    assert statuses.pop("damaged.mp4") == "damaged" and set(statuses.values()) == {"done"}
    for record in records:
        assert record["frames"] > 0 and Path(record["output"]).stat().st_size == record["bytes"]
    assert all(r["frames"] == 72 for r in records if r["status"] == "done")
    assert not [p for p in out.iterdir() if ".partial" in p.name]  # the killed attempt's file is gone
    assert not leftover_processes()
