"""The command line as FFmpeg users type it, and its help: option groups, -f as the output's
format, -vf chains, -c:v and -b:v, and a guess at a mistyped name."""

from __future__ import annotations

import re

import av
import numpy as np
import pytest

from streamconv.cli.parser import BATCH_GROUPS, RUN_GROUPS, build_parser

from helpers.cli import assert_error, assert_ok

TINY = "test:64x48,frames=3"


def _parse(*argv: str):
    args, extra = build_parser().parse_known_args(list(argv))
    assert extra == []
    return args


def _headings(help_text: str) -> dict[str, list[str]]:
    """Heading -> the option strings listed under it, from --help's text."""
    found: dict[str, list[str]] = {}
    heading = None
    for line in help_text.split("\n\n", 1)[1].splitlines():
        if re.fullmatch(r"[a-z][a-z ]*:", line):
            heading = line[:-1]
            found[heading] = []
        elif heading and re.match(r"  [-A-Z]", line):
            found[heading].append(line.split()[0].rstrip(","))
    return found


@pytest.mark.parametrize("command, groups", [("run", RUN_GROUPS), ("batch", BATCH_GROUPS)])
def test_help_lists_every_option_under_its_group(cli, command, groups):
    result = cli(command, "--help")
    assert_ok(result)
    headings = _headings(result.stdout)
    assert list(headings) == ["options", *groups]
    assert headings["options"] == ["-h"]  # nothing left under the catch-all heading
    assert all(headings[group] for group in groups)
    assert "--filter" in headings["filters"] and "-vf" in headings["filters"]
    assert {"--codec", "--overwrite"} <= set(headings["encoder and output"])
    if command == "run":
        assert "-ss" in headings["input"] and "--stats-json" in headings["reporting"]
        assert "--reconnect" in headings["network"] and "--segments" in headings["jobs"]


def test_ffmpeg_spellings_are_the_long_options():
    args = _parse("run", "in.mp4", "-o", "out.ts", "-f", "mpegts", "-c:v", "libx265",
                  "-b:v", "2500k", "-vf", "box,edge")
    long = _parse("run", "in.mp4", "-o", "out.ts", "--format", "mpegts", "--codec", "libx265",
                  "--bitrate", "2500k", "--filter", "box", "--filter", "edge")
    for name in ("format", "codec", "bitrate", "filters"):
        assert getattr(args, name) == getattr(long, name), name
    assert (args.format, args.codec, args.bitrate) == ("mpegts", "libx265", "2500k")


def test_vf_keeps_its_place_among_the_filter_options():
    args = _parse("run", "in.mp4", "--filter", "sharpen", "-vf", "gaussian:sigma=2,size=5,edge",
                  "--filter", "box:size=3", "-vf", "custom:taps=0,-1,0;-1,5,-1;0,-1,0,emboss")
    assert args.filters == ["sharpen", "gaussian:sigma=2,size=5", "edge", "box:size=3",
                            "custom:taps=0,-1,0;-1,5,-1;0,-1,0", "emboss"]
    assert _parse("run", "in.mp4", "-vf", "edge").filters == ["edge"]  # not -v -f edge
    assert not _parse("run", "in.mp4", "-vf", "edge").verbose


def test_f_writes_the_container_it_names(cli, tmp_path):
    output = tmp_path / "out.bin"  # an extension that names no container
    assert_ok(cli("run", TINY, "-o", str(output), "-f", "mpegts", "--filter", "edge", "-q",
                  "--no-progress", "--backend", "cpu"))
    with av.open(str(output)) as container:
        assert container.format.name == "mpegts"
        assert sum(1 for _ in container.decode(video=0)) == 3


def test_f_given_a_filter_says_where_the_filter_went(cli):
    result = cli("run", TINY, "-f", "gaussian:sigma=2")
    assert result.returncode == 2
    assert "-f is OUTPUT's format, as in FFmpeg: a filter is --filter gaussian:sigma=2 or -vf " \
           "gaussian:sigma=2" in result.stderr


def test_vf_chain_filters_as_the_same_filter_options(cli, tmp_path):
    """Real runs, lossless: the chain of -vf and of repeated --filter give the same pixels."""
    outputs = [tmp_path / "vf.mkv", tmp_path / "filters.mkv"]
    chains = [["-vf", "box:size=3,sharpen:amount=0.5"],
              ["--filter", "box:size=3", "--filter", "sharpen:amount=0.5"]]
    for output, chain in zip(outputs, chains):
        assert_ok(cli("run", "test:64x48,frames=4", "-o", str(output), *chain, "-c:v", "ffv1",
                      "-q", "--no-progress", "--backend", "cpu"))
    decoded = []
    for output in outputs:
        with av.open(str(output)) as container:
            assert container.streams.video[0].codec_context.name == "ffv1"
            decoded.append([f.to_ndarray(format="rgb24") for f in container.decode(video=0)])
    assert len(decoded[0]) == 4
    assert all(np.array_equal(a, b) for a, b in zip(*decoded))
    unfiltered = tmp_path / "none.mkv"
    assert_ok(cli("run", "test:64x48,frames=1", "-o", str(unfiltered), "-c:v", "ffv1", "-q",
                  "--no-progress", "--backend", "cpu"))
    with av.open(str(unfiltered)) as container:  # and the chain did filter
        plain = next(container.decode(video=0)).to_ndarray(format="rgb24")
    assert not np.array_equal(decoded[0][0], plain)


@pytest.mark.parametrize("argv, code, fragment", [
    (["--filter", "gausian:sigma=2"], 3, "unknown filter 'gausian' (did you mean 'gaussian'?)"),
    (["-vf", "box,gausian"], 3, "unknown filter 'gausian' (did you mean 'gaussian'?)"),
    (["--pipeline", "blurr"], 3, "unknown preset 'blurr' (did you mean 'blur'?)"),
    (["--fitler", "edge"], 2, "unrecognized arguments: --fitler (did you mean '--filter'?)"),
    (["--overwirte"], 2, "(did you mean '--overwrite'?)"),
    (["-vf", "edge,,box"], 2, "an empty filter in the chain"),
])
def test_mistakes_are_named_with_a_guess(cli, argv, code, fragment):
    result = cli("run", TINY, *argv, "--backend", "cpu")
    assert result.returncode == code, result.stderr
    assert fragment in result.stderr
    assert "Traceback" not in result.stderr


def test_no_guess_where_nothing_is_close(cli):
    line = assert_error(cli("run", TINY, "--filter", "zzz", "--backend", "cpu"), 3,
                        "unknown filter 'zzz'; known filters:")
    assert "did you mean" not in line
