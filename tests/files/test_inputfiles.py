"""No file streamconv writes is ever a file its input reads, however the input names it.

Produced for real: standard input redirected from the very file the output names (``-``,
``pipe:0``, ``pipe:``), FFmpeg concat lists and an HLS playlist naming the output, read by
real runs; and the lists' own syntax (quotes, escapes, comments, nesting) read back.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import av
import pytest

from streamconv.files.inputs import OpenFile, files_read

from helpers.cli import REPO, assert_error
from helpers.clips import write_clip



def streamconv(*args: str, cwd: Path, **options) -> subprocess.CompletedProcess:
    """``python -m streamconv ARGS`` (text output; ``options`` as for subprocess.run)."""
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    options.setdefault("stdout", subprocess.PIPE)
    return subprocess.run([sys.executable, "-m", "streamconv", *args], stderr=subprocess.PIPE,
                          text=True, cwd=cwd, env=env, timeout=120, check=False, **options)


def run_with_stdin(*args: str, stdin: Path, cwd: Path) -> subprocess.CompletedProcess:
    """``python -m streamconv ARGS < stdin``: the child's descriptor 0 is that file."""
    with open(stdin, "rb") as handle:
        return streamconv(*args, stdin=handle, cwd=cwd)


def folder(path: Path) -> list[str]:
    return sorted(p.name for p in path.iterdir())


@pytest.mark.parametrize("spec", ["-", "pipe:0", "pipe:"])
def test_standard_input_is_never_replaced_by_the_output_even_with_overwrite(tmp_path, spec):
    clip = write_clip(tmp_path / "in.mkv", frames=4)
    before = clip.read_bytes()
    result = run_with_stdin("run", spec, "-o", "in.mkv", "--overwrite", "--backend", "cpu", "-q",
                            stdin=clip, cwd=tmp_path)
    assert_error(result, 6, "output is the same file as the input (standard input): in.mkv")
    assert clip.read_bytes() == before and folder(tmp_path) == ["in.mkv"]


@pytest.mark.parametrize("option", ["--stats-json", "--progress", "-o"])
def test_no_file_of_the_run_is_standard_inputs_file(tmp_path, option):
    clip = write_clip(tmp_path / "in.mkv", frames=4)
    before = clip.read_bytes()
    (tmp_path / "link.mkv").symlink_to("in.mkv")
    os.link(clip, tmp_path / "hard.mkv")
    named = {"--stats-json": "link.mkv", "--progress": "hard.mkv", "-o": "img%03d.png"}[option]
    (tmp_path / "img001.png").symlink_to("in.mkv")  # an image the sequence would replace
    args = ["-o", "out.mkv", option, named] if option != "-o" else ["-o", named]
    result = run_with_stdin("run", "-", *args, "--overwrite", "--backend", "cpu", "-q",
                            stdin=clip, cwd=tmp_path)
    assert_error(result, 6, "the input (standard input)")
    assert clip.read_bytes() == before
    assert folder(tmp_path) == ["hard.mkv", "img001.png", "in.mkv", "link.mkv"]


def test_a_report_is_never_the_file_standard_output_writes(tmp_path):
    with open(tmp_path / "out.mkv", "wb") as stdout:  # -o - > out.mkv --stats-json out.mkv
        result = streamconv("run", "test:64x48,frames=3", "-o", "-", "--stats-json", "out.mkv",
                            "--overwrite", "--backend", "cpu", "-q", stdout=stdout, cwd=tmp_path)
    assert_error(result, 6,
                 "--stats-json is the same file as the output (standard output): out.mkv")
    assert folder(tmp_path) == ["out.mkv"]


def test_a_pipe_on_standard_input_is_no_file_and_is_read(tmp_path):
    clip = write_clip(tmp_path / "in.mkv", frames=4)
    with subprocess.Popen(["cat", str(clip)], stdout=subprocess.PIPE) as cat:
        result = streamconv("run", "-", "-o", "out.mkv", "--backend", "cpu", "-q",
                            stdin=cat.stdout, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    with av.open(str(tmp_path / "out.mkv")) as container:
        assert sum(1 for _ in container.decode(video=0)) == 4


def write_hls(folder_path: Path, clip: Path) -> Path:
    """An HLS playlist of ``clip``'s video in MPEG-TS segments (FFmpeg's hls muxer)."""
    playlist = folder_path / "index.m3u8"
    options = {"hls_time": "0.1", "hls_list_size": "0"}
    with av.open(str(clip)) as source, \
            av.open(str(playlist), "w", format="hls", options=options) as out:
        video = out.add_stream_from_template(source.streams.video[0])
        for packet in source.demux(source.streams.video[0]):
            if packet.dts is not None:
                packet.stream = video
                out.mux(packet)
    return playlist


@pytest.mark.parametrize("kind", ["concat", "ffconcat", "hls"])
def test_a_file_a_list_or_playlist_names_is_never_replaced(tmp_path, kind):
    clip = write_clip(tmp_path / "in.ts", frames=12, options={"preset": "ultrafast", "g": "3"})
    if kind == "hls":
        source = write_hls(tmp_path, clip)
        target = tmp_path / "index1.ts"
        assert target.exists(), folder(tmp_path)
        extra = []
    else:
        source = tmp_path / "list.txt"
        header = "ffconcat version 1.0\n" if kind == "ffconcat" else "# the takes\n"
        source.write_text(f"{header}file 'in.ts'\nduration 1\n")
        target = clip
        extra = ["--input-format", "concat"] if kind == "concat" else []
    before = {name: (tmp_path / name).read_bytes() for name in folder(tmp_path)}
    result = streamconv("run", source.name, *extra, "-o", target.name, "--overwrite",
                        "--backend", "cpu", "-q", cwd=tmp_path)
    assert_error(result, 6, f"output is the same file as the input: {target.name}")
    assert {name: (tmp_path / name).read_bytes() for name in folder(tmp_path)} == before


def test_lists_are_read_as_ffmpeg_reads_them(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "inner.txt").write_text("ffconcat version 1.0\nfile deep.mp4\n")
    (tmp_path / "loop.txt").write_text("ffconcat version 1.0\nfile loop.txt\nfile 'a b.mp4'\n")
    os.mkfifo(tmp_path / "pipe.mp4")
    (tmp_path / "list.txt").write_text(
        "\ufeff# takes of the day\n\n"
        "file 'two words.mp4'\n"
        "file with\\ escape.mp4\n"
        "file /abs/olute.mp4\n"
        "file file:prefixed.mp4\n"
        "file https://example.com/remote.mp4\n"
        "file sub/inner.txt\n"
        "file loop.txt\n"
        "file pipe.mp4\n"
        "inpoint 2\n")
    named = files_read(tmp_path / "list.txt")  # the FIFO is named, never opened (that would block)
    assert named == [tmp_path / name for name in (
        "list.txt", "two words.mp4", "with escape.mp4", "/abs/olute.mp4", "prefixed.mp4",
        "sub/inner.txt", "sub/deep.mp4", "loop.txt", "loop.txt", "a b.mp4", "pipe.mp4")]
    (tmp_path / "master.m3u8").write_text(
        '#EXTM3U\n#EXT-X-MEDIA:TYPE=AUDIO,URI="audio/a.m3u8"\nlow/v.m3u8\nhttp://cdn/x.m3u8\n')
    (tmp_path / "low").mkdir()
    (tmp_path / "low" / "v.m3u8").write_text(
        '#EXTM3U\n#EXT-X-MAP:URI="init.mp4"\n#EXTINF:2,\nseg0.m4s\n')
    assert files_read(tmp_path / "master.m3u8") == [tmp_path / name for name in (
        "master.m3u8", "audio/a.m3u8", "low/v.m3u8", "low/init.mp4", "low/seg0.m4s")]
    assert files_read("rtsp://camera/stream") == []


def test_a_pipe_spec_names_the_regular_file_its_descriptor_has_open(tmp_path):
    clip = tmp_path / "x.bin"
    clip.write_bytes(b"data")
    with open(clip, "rb") as handle:
        read, write = os.pipe()
        try:
            (found,) = files_read(f"pipe:{handle.fileno()}")
            assert isinstance(found, OpenFile) and found.is_file(clip)
            assert not found.is_file(tmp_path)
            assert files_read(f"pipe:{read}") == []  # a pipe has no file to protect
        finally:
            os.close(read)
            os.close(write)
