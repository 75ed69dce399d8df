"""``streamconv batch --ray``: a real Ray cluster started here (a head node with two worker CPUs),
inside a network namespace of the test's own that has only loopback, runs a batch of clips with a
damaged one among them while one of its workers is killed in the middle of a task: the task is
retried, every input is counted once, nothing half-written is published. The cluster is stopped
by the process group the test started."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from clips import write_clip
from streamconv.manifest import MANIFEST_NAME
from test_reliability import flip_bytes

RAY = Path(sys.executable).parent / "ray"


def _why_not() -> str | None:
    if importlib.util.find_spec("ray") is None or not RAY.exists():
        return "Ray is not installed (pip install 'streamconv[ray]')"
    if os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("ip"):
        return "a network namespace of the test's own needs root, unshare and ip"
    probe = subprocess.run(["unshare", "-n", "true"], capture_output=True)
    return None if probe.returncode == 0 else f"unshare -n refused here: {probe.stderr.decode().strip()}"


pytestmark = pytest.mark.skipif(_why_not() is not None, reason=str(_why_not()))

KILLER = textwrap.dedent("""
    import os, signal, subprocess, sys, time
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        lines = subprocess.run(["ps", "-eo", "pid=,args="], capture_output=True, text=True).stdout.splitlines()
        busy = [int(line.split()[0]) for line in lines if "ray::run_input_task" in line]
        if busy:
            time.sleep(0.3)  # well into its input
            os.kill(busy[0], signal.SIGKILL)
            print(busy[0])
            sys.exit(0)
        time.sleep(0.05)
    sys.exit("no Ray worker ever ran a task")
""")


def test_a_ray_cluster_runs_the_batch_and_survives_a_killed_worker(tmp_path):
    folder, out = tmp_path / "in", tmp_path / "out"
    folder.mkdir()
    for n in range(4):
        write_clip(folder / f"clip{n}.mp4", frames=72, seed=n, size=(320, 240))
    (folder / "damaged.mp4").write_bytes(flip_bytes((folder / "clip0.mp4").read_bytes(), 4, 300))
    (tmp_path / "killer.py").write_text(KILLER)
    port = 46379
    script = textwrap.dedent(f"""
        set -u
        ip link set lo up
        # Token authentication off: the cluster and the batch share a namespace holding only loopback.
        export RAY_ADDRESS=127.0.0.1:{port} RAY_USAGE_STATS_ENABLED=0 RAY_AUTH_MODE=disabled
        setsid {RAY} start --head --block --node-ip-address=127.0.0.1 --port={port} --num-cpus=2 \\
            --include-dashboard=false --disable-usage-stats > {tmp_path}/ray.log 2>&1 &
        CLUSTER=$!
        for i in $(seq 120); do {RAY} status --address 127.0.0.1:{port} > /dev/null 2>&1 && break; sleep 0.5; done
        {sys.executable} -m streamconv batch {folder} -o {out} --backend cpu --ray 127.0.0.1:{port} \\
            --filter gaussian:sigma=3 --no-progress -q > {tmp_path}/batch.log 2>&1 &
        BATCH=$!
        {sys.executable} {tmp_path}/killer.py > {tmp_path}/killed.txt
        wait $BATCH; echo $? > {tmp_path}/batch.rc
        kill -TERM -- -$CLUSTER 2> /dev/null; sleep 2; kill -KILL -- -$CLUSTER 2> /dev/null
        wait
    """)
    subprocess.run(["unshare", "-n", "bash", "-c", script], timeout=600, check=False)
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
    leftover = subprocess.run(["pgrep", "-f", f"port={port}"], capture_output=True, text=True).stdout.split()
    assert not leftover, leftover
