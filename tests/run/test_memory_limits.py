"""Host memory limits, for real: a child process in a memory cgroup of its own (v1 or v2, made
here; skipped where this machine lets no test make one) submits frames to a StreamFilter and
never takes a result. The outputs kept for result() used to pile up until the kernel killed the
process at the cgroup's limit, every frame lost; now submit() refuses the next frame while there
is room, and every frame submitted before can still be taken."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from helpers.cli import REPO
from streamconv.frames.checks import CGROUP_MOUNT

LIMIT_BYTES = 400 << 20

CHILD = """
import os, sys
with open(sys.argv[1], "w") as procs:  # into the cgroup before anything is allocated
    procs.write(str(os.getpid()))
import numpy as np
import streamconv
from streamconv.errors import InputError
from streamconv.frames.checks import available_memory
assert available_memory() < {limit}, available_memory()  # the cgroup's limit is seen
frame = np.random.default_rng(0).integers(0, 256, (1080, 1920, 3), np.uint8)
expected = streamconv.Filter("box:size=3", backend="cpu")(frame)  # made before memory runs short
submitted = 0
with streamconv.StreamFilter("box:size=3", ring=2, backend="cpu") as stream_filter:
    try:
        while submitted < 1000:  # 6 GB of outputs: far past the limit
            stream_filter.submit(frame)
            submitted += 1
    except InputError as exc:
        print("refused:", exc)
    taken = 0
    while stream_filter.pending:
        assert np.array_equal(stream_filter.result(), expected)
        taken += 1
print(submitted, taken)
"""


def memory_cgroup(tmp_name: str) -> Path:
    """A new memory cgroup limited to LIMIT_BYTES, under this process's own (v1, else v2)."""
    membership = Path("/proc/self/cgroup").read_text().splitlines()
    for line in membership:
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            folder = Path(CGROUP_MOUNT, "memory", path.lstrip("/"), tmp_name)
            limit_file = "memory.limit_in_bytes"
            break
    else:
        path = next((line.split(":", 2)[2] for line in membership if line.startswith("0::")), None)
        if path is None:
            pytest.skip("no memory cgroup controller here")
        parent = Path(CGROUP_MOUNT, path.lstrip("/"))
        try:
            (parent / "cgroup.subtree_control").write_text("+memory")
        except OSError as exc:
            pytest.skip(f"cannot enable the cgroup v2 memory controller here: {exc}")
        folder, limit_file = parent / tmp_name, "memory.max"
    try:
        folder.mkdir()
        (folder / limit_file).write_text(str(LIMIT_BYTES))
    except OSError as exc:
        if folder.exists():
            folder.rmdir()
        pytest.skip(f"cannot make a memory cgroup here: {exc}")
    return folder


def test_a_stream_filter_whose_results_are_never_taken_refuses_frames_before_memory_runs_out():
    folder = memory_cgroup(f"streamconv-test-{uuid.uuid4().hex[:8]}")
    try:
        env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        child = subprocess.run([sys.executable, "-c",
                                textwrap.dedent(CHILD).format(limit=LIMIT_BYTES),
                                str(folder / "cgroup.procs")], capture_output=True, text=True,
                               env=env, timeout=300)
    finally:
        folder.rmdir()  # empty again: the child has ended
    assert child.returncode == 0, f"exit {child.returncode}: {child.stderr[-2000:]}"
    refusal, counts = child.stdout.splitlines()[-2:]
    assert refusal.startswith("refused: keeping output") and "of host memory" in refusal
    submitted, taken = map(int, counts.split())
    assert 10 < submitted < 1000 and taken == submitted
