"""``run --segments N --ray``: each segment a Ray task, the parts joined here. One real Ray cluster
(see raycluster.py) runs a clip in segments while a worker is killed in the middle of a task: the
output has the one-piece run's frames (lossless FFV1), pts and audio packets, its frames counted
once; a damaged TS (a second program begun mid-file) is filtered in one piece, its damage said; then
a SIGINT stops a second run, which leaves nothing, and a third ends by itself with a clear error
when the whole cluster is killed under it, leaving nothing either. Without a cluster: a retried part
replaces the one an earlier attempt completed, and the usage errors of --ray."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

import streamconv
from helpers.raycluster import (ADDRESS, SIGINT_RESTORED, killer, leftover_processes,
                                run_in_cluster, why_not)
from streamconv.io.sources.segment import Segment
from streamconv.jobs.segments import SegmentWork
from streamconv.run.settings import RunSettings

from helpers.containers import write_clip
from helpers.damage import TS_PROGRAM_2
from helpers.segments import decoded, keyframes, make_clip, packets

CHAIN = ("--filter", "gaussian:sigma=1.5", "--filter", "sharpen", "--backend", "cpu",
         "--no-progress")
# Until a Ray worker runs a segment (bounded: a run that never gets one fails its checks).
TASK_RUNS = "for i in $(seq 1200); do ps -eo args= | grep -q '[r]ay::run_segment_task' && break; sleep 0.05; done"


@pytest.mark.skipif(why_not() is not None, reason=str(why_not()))
def test_segments_on_a_ray_cluster_give_the_one_piece_output_through_a_killed_worker(cli, tmp_path):
    clip = make_clip(tmp_path / "in.mkv", "ffv1", frames=72, gop=8, size=(960, 540))
    whole, pieces, stopped = tmp_path / "whole.mkv", tmp_path / "pieces.mkv", tmp_path / "stopped.mkv"
    lost = tmp_path / "lost.mkv"
    joined = tmp_path / "joined.ts"  # damaged: a second program begins mid-file
    joined.write_bytes(write_clip(tmp_path / "a.ts").read_bytes() +
                       write_clip(tmp_path / "b.ts", TS_PROGRAM_2).read_bytes())
    first = cli("run", str(clip), "-o", str(whole), *CHAIN, "--codec", "ffv1")
    assert first.returncode == 0, first.stderr
    run = f"{sys.executable} -m streamconv run {clip} {' '.join(CHAIN)} --codec ffv1 --segments 3 --ray {ADDRESS}"
    run_in_cluster(tmp_path, f"""
        {run} -o {pieces} --stats-json {tmp_path}/stats.json > {tmp_path}/pieces.log 2>&1 &
        RUN=$!
        {killer(tmp_path, "run_segment_task", after=0.5)} > {tmp_path}/killed.txt
        wait $RUN; echo $? > {tmp_path}/pieces.rc
        {sys.executable} -m streamconv run {joined} -o {tmp_path}/joined.mkv --backend cpu \
            --no-progress --segments 2 --ray {ADDRESS} > {tmp_path}/joined.log 2>&1
        echo $? > {tmp_path}/joined.rc
        {SIGINT_RESTORED} {run} -o {stopped} > {tmp_path}/stopped.log 2>&1 &
        RUN=$!
        {TASK_RUNS}
        kill -INT $RUN; wait $RUN; echo $? > {tmp_path}/stopped.rc
        ps -eo args= | grep -c '[r]ay::run_segment_task' > {tmp_path}/busy.txt
        {run} -o {lost} > {tmp_path}/lost.log 2>&1 &
        RUN=$!
        {TASK_RUNS}
        kill -KILL -- -$CLUSTER; wait $RUN; echo $? > {tmp_path}/lost.rc
    """)
    log = (tmp_path / "pieces.log").read_text()
    assert (tmp_path / "pieces.rc").read_text().strip() == "0", log
    assert (tmp_path / "killed.txt").read_text().strip().isdigit()  # a worker really was killed
    (pts_a, frames_a), (pts_b, frames_b) = decoded(whole), decoded(pieces)
    assert len(pts_a) == 72 and pts_b == pts_a
    assert all(np.array_equal(a, b) for a, b in zip(frames_a, frames_b))
    assert len(packets(whole, "audio")) > 60 and packets(pieces, "audio") == packets(whole, "audio")
    # each segment counted once
    assert json.loads((tmp_path / "stats.json").read_text())["frames"] == 72
    joined_log = (tmp_path / "joined.log").read_text()  # filtered in one piece, as a Ray task
    assert (tmp_path / "joined.rc").read_text().strip() == "13", joined_log
    assert "2 stream(s) began after the input was opened" in joined_log, joined_log
    assert len(decoded(tmp_path / "joined.mkv")[0]) == 48 and \
        packets(tmp_path / "joined.mkv", "audio")
    stopped_log = (tmp_path / "stopped.log").read_text()
    assert (tmp_path / "stopped.rc").read_text().strip() == "130", stopped_log
    assert "Traceback" not in stopped_log, stopped_log
    # the tasks were cancelled, not left running
    assert (tmp_path / "busy.txt").read_text().strip() == "0"
    # the whole cluster killed mid-run: one error line
    lost_log = (tmp_path / "lost.log").read_text()
    assert (tmp_path / "lost.rc").read_text().strip() == "7" and \
        "stopped answering" in lost_log, lost_log
    assert "Traceback" not in lost_log, lost_log
    assert not stopped.exists() and not lost.exists() and \
        not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
    assert not leftover_processes()


def test_a_retried_part_replaces_the_one_an_earlier_attempt_completed(tmp_path):
    clip = make_clip(tmp_path / "in.mkv", "ffv1", frames=16)
    part = tmp_path / "part0001.mkv"
    work = SegmentWork.make(clip, ["edge"], part,
                            settings=RunSettings(backend="cpu", decoder="cpu"), devices=None,
                            format=None, sink_options={"codec": "ffv1"}, source_options={},
                            pipeline_options={})
    segment = Segment(1, keyframes(clip)[1], None)
    first = work.open(segment, part, 0).run()
    written, inode = decoded(part), part.stat().st_ino
    again = work.open(segment, part, 0).run()  # a retry of the same segment, as Ray makes one
    # replaced, not refused
    assert first.frames == again.frames == 8 and part.stat().st_ino != inode
    (pts_a, frames_a), (pts_b, frames_b) = written, decoded(part)
    assert len(pts_a) == 8 and pts_b == pts_a and \
        all(np.array_equal(a, b) for a, b in zip(frames_a, frames_b))
    # no half-written file left
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.mkv", part.name]


def test_ray_usage_errors(cli, tmp_path):
    clip = make_clip(tmp_path / "in.mkv", "ffv1", frames=8)
    out = str(tmp_path / "o.mkv")
    for args, word in ((("--ray",), "--ray"),
                       (("--ray", "--segments", "2", "--max-frames", "4"), "--max-frames"),
                       (("--ray", "--segments", "2", "--devices", "0"), "--devices"),
                       (("--ray", ADDRESS, "--segments", "2", "--display"), "--display")):
        result = cli("run", str(clip), "-o", out, "--backend", "cpu", *args)
        assert result.returncode == 2 and word in result.stderr, (args, result.stderr)
    with pytest.raises(streamconv.SettingsError, match="devices"):
        streamconv.run_segments(clip, ["edge"], out, segments=2, backend="cpu", devices=[0],
                                ray=ADDRESS)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.mkv"]
