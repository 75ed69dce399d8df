"""A batch on the GPU: eight inputs at once on one GPU give the same outputs as one-at-a-time runs
(encoded losslessly with FFV1, so the comparison is of the filtered frames themselves)."""

from __future__ import annotations

import numpy as np
import pytest

import streamconv

from helpers.batches import frames_of
from helpers.clips import write_clip

pytestmark = pytest.mark.cuda


def test_eight_streams_on_one_gpu_equal_one_at_a_time_runs(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    for n in range(8):
        write_clip(folder / f"clip{n}.mp4", frames=30, seed=n, size=(320, 240))
    result = streamconv.run_batch([str(folder)], ["gaussian:sigma=1.5", "sharpen"],
                                  tmp_path / "out",
                                  backend="cuda", jobs=8, ext="mkv", sink_options={"codec": "ffv1"})
    assert result.exit_code == 0, [(r.input, r.error) for r in result.records]
    assert [r.status for r in result.records] == ["done"] * 8
    assert all(r.device == 0 and r.frames == 30 for r in result.records)
    for n in range(8):
        alone = tmp_path / f"alone{n}.mkv"
        streamconv.Pipeline(str(folder / f"clip{n}.mp4"), ["gaussian:sigma=1.5", "sharpen"],
                            str(alone),
                            backend="cuda", decoder="cpu", sink_options={"codec": "ffv1"}).run()
        got, expected = frames_of(tmp_path / "out" / f"clip{n}.mkv"), frames_of(alone)
        assert len(got) == len(expected) == 30
        for a, b in zip(got, expected):
            np.testing.assert_array_equal(a, b)
