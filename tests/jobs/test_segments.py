"""``run --segments N``: one file cut at keyframes, filtered in pieces and joined, gives what a
one-piece run gives: the same frames (lossless FFV1 to compare pixels), pts and audio packets;
an H.264 MP4 joined from parts decodes cleanly; failures and Ctrl-C leave nothing behind."""

from __future__ import annotations

import signal
from pathlib import Path

import av
import numpy as np
import pytest

import streamconv
from streamconv.io.sources.segment import Keyframes, Segment, plan_cuts

from helpers.processes import Run, leftovers
from helpers.segments import RATE, SAMPLE_RATE, decoded, keyframes, make_clip, packets

def one_piece_and_segments(cli, clip: Path, out: Path, segments: int, *extra: str,
                           filters: tuple[str, ...] = ("gaussian:sigma=1.5", "sharpen")):
    """Run the clip through the same chain once whole and once in ``segments``; both outputs."""
    whole, pieces = out.with_name("whole" + out.suffix), out.with_name("pieces" + out.suffix)
    chain = (*(option for spec in filters for option in ("--filter", spec)), "--backend", "cpu",
             "--no-progress")
    first = cli("run", str(clip), "-o", str(whole), *chain, *extra)
    assert first.returncode == 0, first.stderr
    second = cli("run", str(clip), "-o", str(pieces), *chain, *extra, "--segments", str(segments),
                 "-v")
    assert second.returncode == 0, second.stderr
    return whole, pieces, second.stderr


def test_lossless_segmented_output_equals_the_one_piece_run(cli, tmp_path):
    clip = make_clip(tmp_path / "in.mkv", "ffv1")
    whole, pieces, log = one_piece_and_segments(cli, clip, tmp_path / "out.mkv", 3, "--codec",
                                                "ffv1")
    assert "segment 2 (pts" in log and "segment 3" not in log  # three segments ran
    (pts_a, frames_a), (pts_b, frames_b) = decoded(whole), decoded(pieces)
    assert len(pts_a) == 48 and pts_b == pts_a
    assert all(np.array_equal(a, b) for a, b in zip(frames_a, frames_b))
    audio = packets(whole, "audio")
    assert len(audio) > 40 and packets(pieces, "audio") == audio
    # no parts folder left
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_h264_mp4_joined_from_parts_decodes_cleanly_with_the_same_pts(cli, tmp_path):
    clip = make_clip(tmp_path / "in.mp4", "libx264")
    whole, pieces, log = one_piece_and_segments(cli, clip, tmp_path / "out.mp4", 4)
    assert "segment 3 (pts" in log
    pts_a, _ = decoded(whole)
    pts_b, frames = decoded(pieces)
    assert len(pts_b) == 48 and pts_b == pts_a
    assert len(keyframes(pieces)) >= 4  # each part began with one
    assert packets(pieces, "audio") == packets(whole, "audio") == packets(clip, "audio")
    # The last frame is not a copy of the first: the parts are in order, not the same part twice.
    assert not np.array_equal(frames[0], frames[-1])


def test_more_segments_than_keyframes_gives_fewer_with_a_notice(cli, tmp_path):
    clip = make_clip(tmp_path / "in.mkv", "ffv1", gop=16)  # keyframes at frames 0, 16, 32
    whole, pieces, log = one_piece_and_segments(cli, clip, tmp_path / "out.mkv", 10, "--codec",
                                                "ffv1")
    assert "3 segment(s) instead of 10" in log
    assert decoded(pieces)[0] == decoded(whole)[0]


def test_the_cuts_are_keyframes_of_near_equal_durations():
    plan = plan_cuts(list(range(0, 100, 10)), 99, 4)
    assert [(s.start, s.end) for s in plan] == [(None, 20), (20, 50), (50, 70), (70, None)]
    assert len(plan_cuts([0, 10], 20, 5)) == 2 and len(plan_cuts([0], 20, 5)) == 1


def test_run_segments_from_python(tmp_path):
    clip = make_clip(tmp_path / "in.mkv", "ffv1")
    out = tmp_path / "out.mkv"
    stats = streamconv.run_segments(clip, ["edge"], out, segments=2, backend="cpu",
                                    sink_options={"codec": "ffv1"})
    assert stats.frames == 48 and decoded(out)[0] == decoded(clip)[0]
    with pytest.raises(streamconv.OutputError):
        # exists, no overwrite
        streamconv.run_segments(clip, ["edge"], out, segments=2, backend="cpu")


def test_run_segments_from_python_with_spec_strings_that_scale_gives_the_one_piece_size(
        tmp_path):
    # The parts are opened at the chain's output size: spec strings, not only FilterStages, must
    # tell it (else each part is the input's size and its frames are scaled back up to it).
    clip = make_clip(tmp_path / "in.mkv", "ffv1")
    chain = ["scale:w=32,h=-2", "sharpen"]
    whole, pieces = tmp_path / "whole.mkv", tmp_path / "pieces.mkv"
    streamconv.Pipeline(clip, chain, whole, backend="cpu", sink_options={"codec": "ffv1"}).run()
    streamconv.run_segments(clip, chain, pieces, segments=2, backend="cpu",
                            sink_options={"codec": "ffv1"})
    (pts_a, frames_a), (pts_b, frames_b) = decoded(whole), decoded(pieces)
    assert frames_a[0].shape == (24, 32, 3) and pts_b == pts_a
    assert all(np.array_equal(a, b) for a, b in zip(frames_a, frames_b))


def test_missing_and_damaged_inputs_exit_as_a_one_piece_run(cli, tmp_path):
    clip = make_clip(tmp_path / "in.mkv", "ffv1", frames=96)
    cut = tmp_path / "cut.mkv"
    cut.write_bytes(clip.read_bytes()[: clip.stat().st_size * 6 // 10])
    for source in (tmp_path / "missing.mkv", cut):
        whole = cli("run", str(source), "-o", str(tmp_path / "a.mkv"), "--backend", "cpu",
                    "--codec", "ffv1")
        pieces = cli("run", str(source), "-o", str(tmp_path / "b.mkv"), "--backend", "cpu",
                     "--codec", "ffv1", "--segments", "3")
        assert whole.returncode in (4, 13) and pieces.returncode == whole.returncode, pieces.stderr
        if whole.returncode == 13:
            assert decoded(tmp_path / "b.mkv")[0] == decoded(tmp_path / "a.mkv")[0]
    assert leftovers(tmp_path) == [] and not [p for p in tmp_path.iterdir() if "segments" in p.name]


def test_usage_errors(cli, tmp_path):
    clip = make_clip(tmp_path / "in.mkv", "ffv1", frames=8)
    for args in (("-o", "-"), ("-o", str(tmp_path / "o.mkv"), "--max-frames", "4"),
                 ("-o", str(tmp_path / "still.png"))):
        result = cli("run", str(clip), *args, "--segments", "2")
        assert result.returncode == 2 and "--segments" in result.stderr
    result = cli("run", str(clip), "-o", str(tmp_path / "o.mkv"), "--devices", "0")
    assert result.returncode == 2 and "--devices" in result.stderr
    for device in ("1", "0"):  # the default's own value given is still a --device
        result = cli("run", str(clip), "-o", str(tmp_path / "o.mkv"), "--segments", "2", "--ray",
                     "--device", device)
        assert result.returncode == 2 and "--device do not apply with --ray" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.mkv"]


def test_sigint_during_the_segments_leaves_no_output_and_no_parts(tmp_path):
    clip = make_clip(tmp_path / "in.mkv", "ffv1", frames=48, size=(640, 360))
    output = tmp_path / "out.mp4"
    run = Run("run", str(clip), "-o", str(output), "--filter", "box:size=3", "--backend", "cpu",
              "--preset", "veryslow", "--segments", "3", "--no-progress", "-v", cwd=tmp_path)
    run.wait_for(lambda: any(p.name.startswith(".streamconv-segments-") and any(p.iterdir())
                             for p in tmp_path.iterdir() if p.is_dir()), "a part file")
    run.process.send_signal(signal.SIGINT)
    assert run.finish() == 130, run.stderr
    assert "Traceback" not in run.stderr, run.stderr
    assert not output.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["in.mkv"]


def test_a_failing_segment_leaves_nothing_and_exits_as_a_one_piece_run(cli, tmp_path):
    clip = make_clip(tmp_path / "in.mkv", "ffv1", frames=16)
    # libx264 refuses rgb24 where each segment's encoder is made (in its thread), as a one-piece
    # run's.
    args = ("--backend", "cpu", "--codec", "libx264", "--pix-fmt", "rgb24")
    whole = cli("run", str(clip), "-o", str(tmp_path / "a.mp4"), *args)
    pieces = cli("run", str(clip), "-o", str(tmp_path / "b.mp4"), *args, "--segments", "2")
    assert whole.returncode not in (0, 13) and pieces.returncode == whole.returncode, pieces.stderr
    assert "Traceback" not in pieces.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.mkv"]


def test_mpegts_segments_lose_no_frame_where_the_demuxer_seeks_past_a_keyframe(cli, tmp_path):
    clip = make_clip(tmp_path / "in.ts", "libx264", frames=60, gop=10, bframes=2)
    with av.open(str(clip)) as container:  # the fault is real: a seek to a keyframe lands after it
        stream = container.streams.video[0]
        cut = keyframes(clip)[2]
        container.seek(cut, stream=stream, backward=True)
        assert next(p.pts for p in container.demux(stream) if p.size) > cut
    whole, pieces, _ = one_piece_and_segments(cli, clip, tmp_path / "out.mkv", 3)
    pts_a, _ = decoded(whole)
    assert len(pts_a) == 60 and decoded(pieces)[0] == pts_a


def test_mp4_parts_starting_off_a_whole_millisecond_keep_the_inputs_pts(cli, tmp_path):
    # 1/3 s GOPs at 1/15360
    clip = make_clip(tmp_path / "in.mp4", "libx264", frames=60, gop=10, rate=30)
    whole, pieces, _ = one_piece_and_segments(cli, clip, tmp_path / "out.mp4", 3)
    pts_a, _ = decoded(whole)
    assert len(pts_a) == 60 and decoded(pieces)[0] == pts_a


def test_mpegts_segments_start_at_their_keyframe_where_seeks_land_on_other_packets(cli, tmp_path):
    clip = make_clip(tmp_path / "in.ts", "libx264", frames=40, gop=10, bframes=3)
    # the fault is real: a seek before a keyframe lands on no keyframe
    with av.open(str(clip)) as container:
        stream = container.streams.video[0]
        container.seek(keyframes(clip)[2] - 9000, stream=stream, backward=True)
        assert not next(p for p in container.demux(stream) if p.size).is_keyframe
    whole, pieces, _ = one_piece_and_segments(cli, clip, tmp_path / "out.mkv", 3)
    pts_a, _ = decoded(whole)
    assert len(pts_a) == 40 and decoded(pieces)[0] == pts_a


def test_damage_only_the_demuxer_reports_is_counted_by_the_keyframe_scan(cli, tmp_path):
    clip = make_clip(tmp_path / "in.mkv", "libx264")
    data = bytearray(clip.read_bytes())
    clusters = [index for index in range(len(data)) if data[index:index + 4] == b"\x1f\x43\xb6\x75"]
    data[clusters[len(clusters) // 2] + 4] = 0  # a cluster's size unreadable: its frames are lost
    damaged = tmp_path / "damaged.mkv"
    damaged.write_bytes(bytes(data))
    chain = ("--backend", "cpu", "--codec", "ffv1", "--no-progress")
    whole = cli("run", str(damaged), "-o", str(tmp_path / "a.mkv"), *chain)
    assert whole.returncode == 13 and "FFmpeg reported damage" in whole.stderr, whole.stderr
    pieces = cli("run", str(damaged), "-o", str(tmp_path / "b.mkv"), *chain, "--segments", "3")
    assert pieces.returncode == 13, pieces.stderr  # found by the scan: filtered in one piece
    pts = decoded(tmp_path / "a.mkv")[0]
    assert len(pts) < 48 and decoded(tmp_path / "b.mkv")[0] == pts


def test_damage_in_the_copied_audio_is_found_by_the_join_as_by_a_one_piece_run(cli, tmp_path):
    data = make_clip(tmp_path / "in.ts", "libx264", frames=60, gop=10, bframes=2).read_bytes()
    garbage = np.random.default_rng(1).integers(0, 256, 1500, np.uint8).tobytes()
    # between transport packets: mid-GOP, inside an audio PES
    cut = len(data) * 675 // 1000 // 188 * 188
    mkv = bytearray(make_clip(tmp_path / "in.mkv", "libx264").read_bytes())
    with av.open(str(tmp_path / "in.mkv")) as container:
        audio = [(p.pos, p.size) for p in container.demux(audio=0) if p.size][20]
    # an AAC packet's payload: 0, not 13
    mkv[audio[0] + audio[1] // 4:audio[0] + audio[1] // 4 + 8] = bytes(8)
    sources = {"cut.ts": data[:cut],  # the last audio packet damaged
               # one refused: 8
               "garbage.ts": data[:len(data) // 5] + garbage + data[len(data) // 5 + 1500:],
               "payload.mkv": bytes(mkv)}
    chain = ("--backend", "cpu", "--codec", "ffv1", "--no-progress")
    for name, damaged in sources.items():
        source = tmp_path / name
        source.write_bytes(damaged)
        whole = cli("run", str(source), "-o", str(tmp_path / f"a-{name}.mkv"), *chain)
        pieces = cli("run", str(source), "-o", str(tmp_path / f"b-{name}.mkv"), *chain,
                     "--segments", "3")
        assert whole.returncode == 13 and pieces.returncode == 13, (whole.stderr, pieces.stderr)
        refused = "audio/subtitle packet(s)" in whole.stderr
        assert ("audio/subtitle packet(s)" in pieces.stderr) == refused, pieces.stderr
        # The muxer of PyAV 18's FFmpeg refuses the garbled packet; PyAV 19's takes it.
        assert refused or name == "garbage.ts", whole.stderr
        assert decoded(tmp_path / f"b-{name}.mkv")[0] == decoded(tmp_path / f"a-{name}.mkv")[0]
        assert packets(tmp_path / f"b-{name}.mkv", "audio") == packets(tmp_path / f"a-{name}.mkv",
                                                                       "audio")


def test_mp4_joins_keep_the_dts_rising_where_frame_times_are_irregular(cli, tmp_path):
    # 40 ms apart just after each keyframe, 10 ms before the next: a part's encoder puts its first
    # dts 80 ms before its keyframe, below the previous part's last.
    times = [sum(40 if i % 10 in (1, 2, 3) else 10 for i in range(n)) for n in range(40)]
    clip = make_clip(tmp_path / "in.mp4", "libx264", frames=40, gop=10, bframes=2, times=times)
    # MP4 refused falling dts: exit 8
    whole, pieces, _ = one_piece_and_segments(cli, clip, tmp_path / "out.mp4", 3)
    pts_a, _ = decoded(whole)
    assert len(pts_a) == 40 and decoded(pieces)[0] == pts_a
    assert packets(pieces, "audio") == packets(whole, "audio")


def test_mpegts_output_has_the_one_piece_pts_and_audio_and_avi_is_refused(cli, tmp_path):
    clip = make_clip(tmp_path / "in.mkv", "libx264", frames=40, gop=10, bframes=2)
    # libx264's B-frames put the first dts below 0: an MPEG-TS part moved its own timestamps up by
    # that.
    whole, pieces, _ = one_piece_and_segments(cli, clip, tmp_path / "out.ts", 3)
    pts_a, _ = decoded(whole)
    assert len(pts_a) == 40 and decoded(pieces)[0] == pts_a
    assert packets(pieces, "audio") == packets(whole, "audio")
    avi = cli("run", str(clip), "-o", str(tmp_path / "out.avi"), "--backend", "cpu", "--segments",
              "2")
    assert avi.returncode == 6 and "AVI" in avi.stderr and not (tmp_path / "out.avi").exists()


def test_segments_cut_at_open_gop_keyframes_give_the_one_piece_frames_and_no_damage(cli, tmp_path):
    clip = make_clip(tmp_path / "in.mkv", "libx264", frames=40, gop=10, bframes=3, open_gop=True)
    with av.open(str(clip)) as container:  # leading pictures: after a keyframe, shown before it
        order = [(p.pts, p.is_keyframe) for p in container.demux(video=0) if p.size]
    assert any(pts < order[i - 1][0] for i, (pts, _) in enumerate(order) if i > 1
               and order[i - 1][1])
    # The decoder starting at such a keyframe logs its missing references: no damage, exit 0.
    whole, pieces, _ = one_piece_and_segments(cli, clip, tmp_path / "out.mkv", 3, "--codec", "ffv1")
    (pts_a, frames_a), (pts_b, frames_b) = decoded(whole), decoded(pieces)
    assert len(pts_a) == 40 and pts_b == pts_a
    assert all(np.array_equal(a, b) for a, b in zip(frames_a, frames_b))


@pytest.mark.parametrize("filters, gop, open_gop", [
    (("box:size=3", "tmean:frames=5", "tdiff"), 8, False),
    (("tmean:frames=9,causal=1",), 2, False),  # the look-behind spans several keyframes
    (("tgauss:sigma=1",), 10, True),
], ids=["centred-chain", "causal-short-gops", "open-gop"])
def test_filters_across_frames_read_the_frames_beyond_each_cut(cli, tmp_path, filters, gop,
                                                               open_gop):
    """Each segment decodes its neighbours' frames its windows reach across a cut, and writes
    only its own: the frames, pts and audio of the one-piece run."""
    clip = make_clip(tmp_path / "in.mp4", "libx264", frames=40, gop=gop,
                     bframes=3 if open_gop else 0, open_gop=open_gop)
    whole, pieces, log = one_piece_and_segments(cli, clip, tmp_path / "out.mkv", 4, "--codec",
                                                "ffv1", filters=filters)
    assert "segment 3 (pts" in log
    (pts_a, frames_a), (pts_b, frames_b) = decoded(whole), decoded(pieces)
    assert len(pts_a) == 40 and pts_b == pts_a
    assert [i for i, (a, b) in enumerate(zip(frames_a, frames_b)) if not np.array_equal(a, b)] \
        == []
    assert packets(pieces, "audio") == packets(whole, "audio")


def test_a_segmented_run_reports_the_delay_of_its_filters_across_frames(tmp_path):
    """Each segment's output lags its input as a one-piece run's does: the whole run's stats say
    so (the summary line, --stats-json), as a one-piece run's do."""
    clip = make_clip(tmp_path / "in.mp4", "libx264", frames=24, gop=4)
    options = {"backend": "cpu", "sink_options": {"codec": "ffv1"}}
    whole = streamconv.Pipeline(clip, ["tmean:frames=7", "tdiff"], tmp_path / "whole.mkv",
                                **options).run()
    pieces = streamconv.run_segments(clip, ["tmean:frames=7", "tdiff"], tmp_path / "pieces.mkv",
                                     segments=3, **options)
    assert whole.delay_frames == 4 and whole.delay_seconds == pytest.approx(4 / RATE)
    assert (pieces.delay_frames, pieces.delay_seconds) == (whole.delay_frames,
                                                           whole.delay_seconds)
    assert "output 4 frame(s) behind the input" in pieces.format_table()


def test_a_segments_context_reaches_the_keyframe_before_its_first_frame():
    """Frames 0-19, a keyframe every 4th; a cut at frame 8 with 5 frames of look-behind starts
    decoding at keyframe 0 and delivers frames from pts 2 (one more than asked) on; 2 frames of
    look-ahead past an end at frame 16 read 3 more."""
    found = Keyframes([0, 4, 8, 12, 16], 19, None, 0, False, tuple(range(20)))
    middle = Segment(1, 8, 16).with_context(found, 5, 2)
    assert (middle.lead, middle.before, middle.after) == (0, 2, 3)
    assert Segment(0, None, 8).with_context(found, 5, 2) == Segment(0, None, 8, after=3)
    assert Segment(2, 16, None).with_context(found, 1, 0) == Segment(2, 16, None, lead=12,
                                                                      before=14)
    assert Segment(1, 8, 16).with_context(found, 0, 0) == Segment(1, 8, 16)


def test_audio_mp4_refuses_at_its_trailer_is_left_out_alike_by_segmented_and_one_piece_runs(
        cli, tmp_path):
    # 8 frames with Matroska's PCM (no named channel layout), which MP4 refuses only at the
    # trailer: both runs leave it out up front, with a warning (the join once failed there
    # with an internal error, exit 1).
    clip = tmp_path / "in.mkv"
    with av.open(str(clip), "w") as container:
        video, audio = container.add_stream("ffv1",
                                            rate=RATE), container.add_stream("pcm_s16le",
                                                                             rate=SAMPLE_RATE)
        video.width, video.height, video.pix_fmt = 64, 48, "yuv420p"
        video.options, audio.codec_context.layout = {"g": "4"}, "stereo"
        for index in range(8):
            frame = av.VideoFrame.from_ndarray(np.full((48, 64, 3), 30 * index, np.uint8),
                                               format="rgb24")
            frame.pts = index
            container.mux(video.encode(frame))
            chunk = av.AudioFrame.from_ndarray(np.zeros((1, 2 * 1920), np.int16), format="s16",
                                               layout="stereo")
            chunk.sample_rate, chunk.pts = SAMPLE_RATE, 1920 * index
            container.mux(audio.encode(chunk))
        for stream in (video, audio):
            container.mux(stream.encode(None))
    whole = cli("run", str(clip), "-o", str(tmp_path / "a.mp4"), "--backend", "cpu")
    pieces = cli("run", str(clip), "-o", str(tmp_path / "b.mp4"), "--backend", "cpu", "--segments",
                 "2")
    assert whole.returncode == 0 and pieces.returncode == 0, pieces.stderr
    for result in (whole, pieces):
        assert "pcm_s16le) cannot be stored in .mp4; not copied" in result.stderr and \
            "Traceback" not in result.stderr
    for name in ("a.mp4", "b.mp4"):
        with av.open(str(tmp_path / name)) as container:
            assert not container.streams.audio and sum(1 for _ in container.decode(video=0)) == 8


def test_mpegts_pts_below_zero_before_a_clock_wrap_are_joined_as_one_piece(cli, tmp_path):
    # The clock wraps (33 bits at 90 kHz) 1 s in: FFmpeg gives the pts before it below 0, which
    # a part's container moved up to 0, each part by its own amount (the join failed: exit 8).
    clip = make_clip(tmp_path / "in.ts", "libx264", frames=40, gop=10, bframes=2,
                     options={"output_ts_offset": "95442.7"})
    with av.open(str(clip)) as container:
        assert container.streams.video[0].start_time < 0
    for suffix, extra in ((".mkv", ("--codec", "ffv1")), (".ts", ())):
        whole, pieces, _ = one_piece_and_segments(cli, clip, tmp_path / f"out{suffix}", 3, *extra)
        pts_a, _ = decoded(whole)
        assert len(pts_a) == 40 and decoded(pieces)[0] == pts_a
        assert packets(pieces, "audio") == packets(whole, "audio")
