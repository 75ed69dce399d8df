"""Every shell command the README and the documentation show runs as shown, in order, page by
page, in a folder laid out like a checkout; a command that cannot run here says what it needs
(``# needs: camera, display``, or ``<!-- needs: ... -->`` above its block: docs/tests.md)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import av
import cv2
import numpy as np
import pytest

from helpers.cli import REPO
from helpers.xdisplay import VirtualDisplay
from conftest import SAMPLE

DOCUMENTS = sorted([REPO / "README.md", REPO / "CHANGELOG.md", REPO / "examples" / "README.md",
                    REPO / "benchmarks" / "README.md", *(REPO / "docs").glob("*.md")])
NEEDS = {"gpu", "nvcc", "cupy", "torch", "camera", "display", "vcam", "gstreamer", "network", "ray",
         "root", "ffmpeg"}
"""What a command may say it needs; besides these, a time ("10-15 minutes")."""
DURATION = re.compile(r"^\d+(-\d+)? minutes$")


def _opencv_has_gui() -> bool:
    gui = re.search(r"^\s*GUI:\s*(\S*)", cv2.getBuildInformation(), re.MULTILINE)
    return gui is not None and gui[1] not in ("", "NONE")


RUNNABLE_WITH = {"ffmpeg": shutil.which("ffmpeg") is not None,
                 "display": shutil.which("Xvfb") is not None and _opencv_has_gui()}
"""Needs that this machine may meet: such commands run where it does (a display: a virtual X
server the test starts; the commands that show a window end by themselves)."""
SAMPLE_FRAMES = 8
FENCE = re.compile(r"^```(\w*)\s*$")
BLOCK_NEEDS = re.compile(r"^<!-- needs: (.+) -->$")


@dataclass(frozen=True)
class Command:
    """A shell command (or a Python program) of a document, and what it says it needs."""

    text: str
    language: str
    needs: frozenset[str]
    line: int


def _comment_start(line: str) -> int | None:
    """Where a shell comment starts in ``line`` (a ``#`` after a blank, outside quotes)."""
    quote = None
    for index, char in enumerate(line):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (index == 0 or line[index - 1].isspace()):
            return index
    return None


def _needs(text: str, where: str) -> frozenset[str]:
    items = frozenset(item.strip() for item in text.split(","))
    unknown = [item for item in items if item not in NEEDS and not DURATION.match(item)]
    assert not unknown, f"{where}: needs what? {unknown} (known: {sorted(NEEDS)} or a time)"
    return items


def _shell_commands(lines: list[str], first: int, block_needs: frozenset[str], where: str):
    """The commands of a shell block: continued lines joined, each with its needs."""
    pending = ""
    for offset, line in enumerate(lines):
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        line, pending = pending + line, ""
        cut = _comment_start(line)
        command, comment = (line, "") if cut is None else (line[:cut], line[cut + 1:])
        found = re.search(r"needs: (.+)$", comment)
        needs = block_needs | (_needs(found[1], f"{where}:{first + offset}") if found else set())
        if command.strip():
            yield Command(command.strip(), "sh", frozenset(needs), first + offset)


def commands_of(document: Path) -> list[Command]:
    """Every command of a document's ``sh`` blocks, and its ``python`` blocks whole."""
    lines = document.read_text(encoding="utf-8").splitlines()
    where = document.relative_to(REPO).as_posix()
    found, index = [], 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        end = next(i for i in range(index + 1, len(lines)) if lines[i].startswith("```"))
        marker = BLOCK_NEEDS.match(lines[index - 1]) if index else None
        block_needs = _needs(marker[1], f"{where}:{index}") if marker else frozenset()
        language, body = opening[1], lines[index + 1:end]
        assert language not in ("bash", "shell", "console"), f"{where}:{index + 1}: write ```sh"
        if language == "sh":
            found += _shell_commands(body, index + 2, block_needs, where)
        elif language == "python":
            found.append(Command("\n".join(body), "python", block_needs, index + 2))
        index = end + 1
    return found


@pytest.fixture(scope="module")
def short_sample(tmp_path_factory) -> Path:
    """The first SAMPLE_FRAMES frames of media/sample.mp4, re-encoded: the same 640x360 at 30
    fps."""
    path = tmp_path_factory.mktemp("sample") / "sample.mp4"
    with av.open(str(SAMPLE)) as source, av.open(str(path), "w") as out:
        stream = out.add_stream("libx264", rate=30)
        stream.width, stream.height, stream.pix_fmt = 640, 360, "yuv420p"
        for count, frame in enumerate(source.decode(video=0)):
            if count == SAMPLE_FRAMES:
                break
            out.mux(stream.encode(frame.reformat(format="yuv420p")))
        out.mux(stream.encode())
    return path


def _checkout_like(folder: Path, sample: Path) -> dict[str, str]:
    """Lay out ``folder`` as a checkout's root (the short clip as media/sample.mp4) and return
    the environment its commands run in: this Python first on PATH, ``streamconv`` a command."""
    (folder / "media").mkdir()
    shutil.copy(sample, folder / "media" / "sample.mp4")
    for name in ("examples", "benchmarks", "pipelines"):
        (folder / name).symlink_to(REPO / name)
    bin_dir = folder.parent / f"{folder.name}-bin"
    bin_dir.mkdir()
    for name, run in (("python", ""), ("python3", ""), ("streamconv", " -m streamconv")):
        shim = bin_dir / name  # a script, not a link: a venv's python must be called by its path
        shim.write_text(f'#!/bin/sh\nexec "{sys.executable}"{run} "$@"\n')
        shim.chmod(0o755)
    env = dict(os.environ, PATH=os.pathsep.join([str(bin_dir), os.environ["PATH"]]))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    return env


def _runnable(command: Command, document: Path) -> bool:
    """Whether the test runs it: a shell command, or a Python block of the README (the other
    pages' Python blocks are fragments, with your own frames), that needs nothing missing here."""
    if command.language == "python" and document != REPO / "README.md":
        return False
    return all(RUNNABLE_WITH.get(need, False) for need in command.needs)


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: path.relative_to(REPO).as_posix())
def test_every_command_of_a_document_runs_in_order(document, short_sample, tmp_path):
    commands = commands_of(document)
    runnable = [command for command in commands if _runnable(command, document)]
    if not runnable:
        pytest.skip(f"no command that can run here (of {len(commands)})")
    folder = tmp_path / "checkout"
    folder.mkdir()
    env = _checkout_like(folder, short_sample)
    with ExitStack() as stack:
        if any("display" in command.needs for command in runnable):
            display = VirtualDisplay().start()
            stack.callback(display.stop)
            env.update(DISPLAY=display.name)
            env.pop("WAYLAND_DISPLAY", None)
        _run_in_order(document, runnable, folder, env)


def _run_in_order(document: Path, runnable: list[Command], folder: Path, env: dict) -> None:
    for command in runnable:
        if command.language == "python":
            (folder / "snippet.py").write_text(command.text + "\n")
            argv = [sys.executable, "snippet.py"]
        else:
            argv = ["bash", "-o", "pipefail", "-c", command.text]
        result = subprocess.run(argv, cwd=folder, env=env, stdin=subprocess.DEVNULL,
                                capture_output=True, text=True, timeout=300, check=False)
        assert result.returncode == 0, (f"{document.name}:{command.line}: {command.text}\n"
                                        f"exit {result.returncode}\n{result.stderr[-3000:]}")


def test_the_documents_show_commands_and_mark_the_rest():
    """The parser finds the commands (a broken one would pass every page), and the README's
    three jobs are there, two of them marked."""
    found = [(command, document) for document in DOCUMENTS for command in commands_of(document)]
    runnable = [command for command, document in found if _runnable(command, document)]
    assert len(found) >= 60 and len(runnable) >= 30, (len(found), len(runnable))
    readme = {command.text: command.needs for command in commands_of(REPO / "README.md")}
    assert readme["streamconv run webcam --filter edge --display"] == {"camera", "display"}
    assert any(text.startswith("streamconv run media/sample.mp4 -o ") and not needs
               for text, needs in readme.items())


def test_no_two_commands_write_one_output():
    """A reader who runs the commands of every page in one folder meets no existing output."""
    written: dict[str, str] = {}
    for document in DOCUMENTS:
        for command in commands_of(document):
            for output in re.findall(r"\s(?:-o|--output) ('[^']*'|\S+)", f" {command.text}"):
                output = output.strip("'")
                if output != "-" and "://" not in output and not output.startswith("vcam"):
                    where = f"{document.name}:{command.line}"
                    assert output not in written, f"{where} writes {output}, as {written[output]}"
                    written[output] = where


def test_the_api_page_documents_every_public_name():
    import streamconv

    page = (REPO / "docs" / "python.md").read_text(encoding="utf-8")
    modules = {"batch"}  # streamconv.jobs.batch is the module of run_batch, documented with it
    for name in sorted(set(streamconv.__all__) - {"__version__"} - modules):
        assert f"\n::: streamconv.{name}\n" in page, name


def test_the_readme_picture_is_drawn_from_real_runs(short_sample, tmp_path):
    """media/make_strip.py, on the first frame: four tiles of streamconv's own outputs, the first
    the frame as it was decoded, the others filtered."""
    out = tmp_path / "strip.png"
    result = subprocess.run([sys.executable, str(REPO / "media" / "make_strip.py"), "--frame", "0",
                             "--source", str(short_sample), "--out", str(out)],
                            capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr
    strip = cv2.imread(str(out))
    assert strip.shape == (180 + 30, 4 * 320 + 3 * 4, 3)
    tiles = [strip[:180, i * 324:i * 324 + 320].astype(int) for i in range(4)]
    ok, frame = cv2.VideoCapture(str(short_sample)).read()
    assert ok
    decoded = cv2.resize(frame, (320, 180), interpolation=cv2.INTER_AREA).astype(int)
    assert np.abs(tiles[0] - decoded).mean() < 0.5  # identity: the frame as decoded (0 here)
    for tile in tiles[1:]:
        assert np.abs(tile - tiles[0]).mean() > 2  # each filter changed it (by 4.7 to 105)
