"""``batch --resume`` trusts a finished record only for the same input file, unchanged, under the
same settings, its output still there at the recorded size; it replaces without --overwrite only
an output still exactly as a batch of the manifest published it (real clips, CPU backend)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from streamconv.jobs.manifest import MANIFEST_NAME

from helpers.batches import batch, frames_of, manifest_of, run
from helpers.cli import assert_error, assert_ok
from helpers.clips import write_clip
from helpers.damage import flip_bytes

def test_resume_runs_another_input_of_the_same_name_instead_of_trusting_its_output(tmp_path):
    first, second = tmp_path / "a" / "x.mp4", tmp_path / "b" / "x.mp4"
    first.parent.mkdir()
    second.parent.mkdir()
    write_clip(first, frames=30, size=(64, 48), seed=1)
    write_clip(second, frames=6, size=(64, 48), seed=2)
    out = tmp_path / "out"
    assert run([first], out).exit_code == 0
    result = run([second], out, resume=True)
    assert result.exit_code == 0
    [record] = result.records
    assert (record.input, record.status, record.frames) == (str(second), "done", 6)
    assert len(frames_of(out / "x.mp4")) == 6  # b's output replaced a's, which the batch published
    assert manifest_of(out)["inputs"][0]["input"] == str(second)


@pytest.mark.parametrize("change",
                         ["input rewritten", "input touched", "filters", "border", "codec options",
                                    "pixel format", "nothing"])
def test_resume_runs_again_an_input_changed_since_or_under_other_settings(tmp_path, change):
    (tmp_path / "in").mkdir()
    clip = write_clip(tmp_path / "in" / "c.mp4", frames=6, size=(64, 48), seed=3)
    out = tmp_path / "out"
    [first] = run([clip], out, sink_options={"crf": 23}).records
    options = {"sink_options": {"crf": 23}}
    if change == "input rewritten":
        write_clip(clip, frames=8, size=(64, 48), seed=4)
    elif change == "input touched":  # same bytes, a later mtime: it may have changed
        stamp = os.stat(clip).st_mtime_ns
        os.utime(clip, ns=(stamp + 10**9, stamp + 10**9))
    elif change == "filters":
        options["filters"] = ["box:size=5"]
    elif change == "border":
        options["border"] = "zero"
    elif change == "codec options":
        options["sink_options"] = {"crf": 30}
    elif change == "pixel format":
        options["sink_options"] = {"crf": 23, "pix_fmt": "yuv444p"}
    [again] = run([clip], out, resume=True, **options).records
    assert again.status == ("skipped" if change == "nothing" else "done")
    assert again.frames == (8 if change == "input rewritten" else 6)
    if change == "nothing":
        assert (again.bytes, again.output_mtime_ns) == (first.bytes, first.output_mtime_ns)
    else:  # written again, replacing the output the first batch published (no --overwrite)
        assert os.stat(again.output).st_mtime_ns == again.output_mtime_ns != first.output_mtime_ns


@pytest.mark.parametrize("case", ["replaced by another file", "recorded failed, a file put there",
                                  "recorded pending, a file put there"])
def test_resume_never_replaces_a_file_the_batch_did_not_leave_there(cli, tmp_path, case):
    folder = tmp_path / "in"
    folder.mkdir()
    clip = write_clip(folder / "c.mp4", frames=6, size=(64, 48), seed=5)
    out = tmp_path / "out"
    assert_ok(batch(cli, str(folder), "-o", str(out), "-q"))
    output = out / "c.mp4"
    document = manifest_of(out)
    record = document["inputs"][0]
    if case == "replaced by another file":
        write_clip(clip, frames=8, size=(64, 48), seed=6)  # the input changed: it must run again
        output.write_bytes(b"the user's own file")
    else:  # an earlier batch that did not publish this output; the file is someone else's
        record.update(status=case.split()[1].rstrip(","), bytes=None, output_mtime_ns=None)
        (out / MANIFEST_NAME).write_text(json.dumps(document))
        output.write_bytes(b"the user's own file")
    message = assert_error(batch(cli, str(folder), "-o", str(out), "--resume", "-q"), 6,
                           "output exists", str(output))
    assert "--resume" not in message and "--overwrite" in message
    assert output.read_bytes() == b"the user's own file"


def test_resume_replaces_the_frames_a_failed_input_kept_while_they_are_as_published(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    write_clip(folder / "c.mp4", frames=6, size=(64, 48), seed=7)
    out = tmp_path / "out"
    run([folder], out)
    document = manifest_of(out)
    # its kept frames
    document["inputs"][0].update(status="failed", exit_code=8, error="decoding failed")
    (out / MANIFEST_NAME).write_text(json.dumps(document))
    [record] = run([folder], out, resume=True).records
    assert record.status == "done" and record.frames == 6
    assert os.stat(
        out / "c.mp4").st_mtime_ns == record.output_mtime_ns != document["inputs"][0]["output_mtime_ns"]


def test_resume_keeps_a_damaged_inputs_record_and_its_exit_code(cli, tmp_path):
    """A damaged input the batch finished is not run again by ``--resume`` (the file is unchanged:
    it would find the same damage), and its record stays damaged, exit code 13 and the damage
    found, so the resumed batch exits 13 as the first did (it was relabelled skipped, exit 0)."""
    folder, out = tmp_path / "in", tmp_path / "out"
    folder.mkdir()
    write_clip(folder / "good.mp4", seed=1)
    damaged = folder / "damaged.mp4"
    damaged.write_bytes(flip_bytes(write_clip(tmp_path / "clean.mp4", seed=2).read_bytes(), 4, 300))
    assert batch(cli, str(folder), "-o", str(out)).returncode == 13
    first = {Path(r["input"]).name: r for r in manifest_of(out)["inputs"]}
    assert first["damaged.mp4"]["status"] == "damaged" and first["damaged.mp4"]["damage"]

    result = batch(cli, str(folder), "-o", str(out), "--resume")
    assert result.returncode == 13, result.stderr
    assert f"damaged     {damaged}" in result.stderr and "0 frames written" in result.stderr
    again = {Path(r["input"]).name: r for r in manifest_of(out)["inputs"]}
    assert (again["good.mp4"]["status"], again["good.mp4"]["exit_code"]) == ("skipped", 0)
    kept = again["damaged.mp4"]
    assert (kept["status"], kept["exit_code"], kept["resumed"]) == ("damaged", 13, True)
    for name in ("damage", "frames", "bytes", "output_mtime_ns"):  # not run again
        assert kept[name] == first["damaged.mp4"][name], name
    assert os.stat(out / "damaged.mp4").st_mtime_ns == kept["output_mtime_ns"]
