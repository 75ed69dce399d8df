"""What a SOURCE or -o string means, parsed once (io/spec.py), and the openers' tables that
dispatch on it: every kind has an opener, and the command's checks read the same spec."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamconv.io.open import SINK_OPENERS, SOURCE_OPENERS, open_sink, open_source
from streamconv.io.sinks.sink import NullSink
from streamconv.io.sources.pattern import TestPattern
from streamconv.io.spec import OUTPUT_KINDS, SOURCE_KINDS, parse_output, parse_source

from helpers.cli import assert_usage


@pytest.mark.parametrize("text, kind", [
    ("test", "pattern"), ("test:64x48@25,frames=3", "pattern"), ("webcam", "camera"),
    ("webcam:2", "camera"), ("/dev/video3", "camera"), ("-", "pipe"), ("pipe:0", "pipe"),
    ("img%03d.png", "sequence"), ("rtsp://h/live", "url"), ("file:///x.mp4", "url"),
    ("in.mp4", "file"), ("tests.mp4", "file"), ("webcams", "file")])
def test_a_source_is_parsed_into_its_kind(text, kind):
    spec = parse_source(text)
    assert spec.kind == kind and spec.text == text and spec.format is None


def test_a_named_demuxer_makes_any_input_but_a_camera_or_the_pattern_demuxed():
    assert parse_source("in.yuv", format="rawvideo").kind == "demuxed"
    assert parse_source("rtsp://h/x", format="rtsp").is_url  # still a URL for --reconnect
    assert parse_source("webcam", format="rawvideo").kind == "camera"
    assert parse_source("in.yuv", format="rawvideo").takes_size
    assert not parse_source("in.mp4").takes_size and not parse_source("in.mp4").takes_rate
    assert parse_source("img%03d.png").takes_rate and parse_source("webcam").takes_rate


def test_what_a_source_spec_says_of_itself():
    assert not parse_source("webcam").decodes_a_stream and not parse_source("test").decodes_a_stream
    assert parse_source("-").decodes_a_stream and parse_source("-").is_demuxed
    assert parse_source("webcam").is_live and parse_source("test:64x48,live").is_live
    assert not parse_source("test:64x48").is_live and not parse_source("in.mp4").is_live
    assert parse_source("in.mp4").is_local_file and not parse_source("srt://h:1").is_local_file


@pytest.mark.parametrize("text, kind, target", [
    (None, "null", None), ("null", "null", None), ("vcam", "vcam", None),
    ("vcam:/dev/video10", "vcam", "/dev/video10"),
    ("rtmp://h/app/key", "network", "rtmp://h/app/key"),
    ("SRT://h:1", "network", "SRT://h:1"), ("-", "pipe", "-"), ("pipe:1", "pipe", "pipe:1"),
    ("out%03d.png", "sequence", "out%03d.png"), ("still.png", "image", "still.png"),
    ("out.mp4", "file", "out.mp4"), ("file:out.mp4", "file", "out.mp4"),
    ("http://h/x", "file", "http://h/x"), ("vcam.mp4", "file", "vcam.mp4")])
def test_an_output_is_parsed_into_its_kind_and_target(text, kind, target):
    spec = parse_output(text)
    assert (spec.kind, spec.target) == (kind, target)


def test_an_output_named_by_a_path_object_is_a_file_whatever_its_name():
    assert parse_output(Path("rtmp:") / "x").kind == "file"
    assert parse_output("x.mkv", format="image2").kind == "image"


def test_what_an_output_spec_says_of_itself():
    written = [kind for kind in OUTPUT_KINDS if parse_output(_output_of(kind)).writes_a_file]
    assert written == ["pipe", "sequence", "image", "file"]
    assert parse_output("rtmp://h/a").takes_muxer_options and \
        not parse_output("vcam").takes_muxer_options
    assert [parse_output(o).is_one_file for o in ("out.mkv", "-", "out%03d.png", "udp://h:1")] == \
        [True, False, False, False]


def _output_of(kind: str) -> str | None:
    return {"null": None, "vcam": "vcam", "network": "udp://h:1", "pipe": "-",
            "sequence": "o%02d.png", "image": "o.png", "file": "o.mkv"}[kind]


def test_every_kind_has_its_opener():
    assert set(SOURCE_OPENERS) == set(SOURCE_KINDS)
    assert set(SINK_OPENERS) == set(OUTPUT_KINDS) - {"null"}


def test_the_openers_take_a_parsed_spec():
    with open_source(parse_source("test:32x24,frames=2")) as source:
        assert isinstance(source, TestPattern) and len(list(source)) == 2
    assert isinstance(open_sink(parse_output("null")), NullSink)


def test_the_command_asks_the_spec(cli):
    """The checks of `run` read the same spec as the openers: a camera takes no --input-option,
    a file no --reconnect, a virtual camera no --format."""
    assert_usage(cli("run", "webcam", "--input-option", "k=v"),
                 "--input-option applies to video files")
    assert_usage(cli("run", "in.mp4", "--reconnect"),
                 "--reconnect and --reconnect-timeout apply to URL")
    assert_usage(cli("run", "test", "-o", "vcam", "--format", "mp4"),
                 "do not apply to a virtual camera")
