"""What a batch takes for its inputs and outputs: names with glob characters taken as they are,
its own outputs, manifest and temporary files never taken as inputs, only its own outputs'
temporary files removed, and refusals before any work with their own exit codes and words."""

from __future__ import annotations

from pathlib import Path

import pytest

import streamconv
from streamconv.jobs.inputs import temporary_names
from streamconv.errors import OutputError
from streamconv.jobs.manifest import MANIFEST_NAME
from streamconv.files.publish import AtomicFile

from helpers.batches import batch, frames_of, run
from helpers.cli import assert_error
from helpers.clips import write_clip


def clip(path: Path, frames: int = 4, seed: int = 1) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_clip(path, frames=frames, size=(64, 48), seed=seed)


def test_file_names_with_glob_characters_are_taken_as_they_are(tmp_path):
    bracketed, plain = clip(tmp_path / "in" / "take[1].mp4", 5), clip(tmp_path / "in" / "take1.mp4",
                                                                      3, seed=2)
    result = run([bracketed, plain], tmp_path / "out")
    assert [(Path(r.input).name, r.status, r.frames) for r in result.records] == \
        [("take[1].mp4", "done", 5), ("take1.mp4", "done", 3)]
    alone = run([bracketed], tmp_path / "alone").records
    assert [Path(r.output).name for r in alone] == ["take[1].mp4"] and \
        len(frames_of(Path(alone[0].output))) == 5
    # A name that is no file is still a glob; one that is a folder is scanned.
    assert [Path(r.input).name
            for r in run([tmp_path / "in" / "take?.mp4"],
                         tmp_path / "glob").records] == ["take1.mp4"]
    folder = tmp_path / "clips[a]"
    clip(folder / "x.mp4")
    assert [r.status for r in run([folder], tmp_path / "folder").records] == ["done"]


def test_temporary_names_are_the_ones_atomic_files_make(tmp_path):
    # Long names have their stem cut (a multi-byte one inside a character), long suffixes left out.
    for name in ["x.mp4", "take[1].mp4", "a*b?.mkv", "x" * 248 + ".mp4", "\u00e9" * 120 + ".mkv",
                 "y." + "e" * 40]:
        target = tmp_path / name
        made = AtomicFile(target)
        made.create()
        try:
            assert temporary_names(target).fullmatch(made.temp.name), made.temp.name
        finally:
            made.discard()


def test_a_batch_removes_only_its_own_outputs_stale_temporary_files(tmp_path):
    clip(tmp_path / "in" / "x.mp4")
    clip(tmp_path / "in" / "take[1].mp4", seed=2)
    out = tmp_path / "out"
    out.mkdir()
    own = [".x.0123abcd.partial.mp4", ".take[1].89abcdef.partial.mp4",
           ".streamconv-segments-x.mp4.k2j_9x0a"]
    others = [".x.v2.0123abcd.partial.mp4", ".take1.89abcdef.partial.mp4",
              ".x.0123abcd.partial.mkv",
              ".x.notours.partial.mp4", ".streamconv-segments-x.mp4.mkv.k2j_9x0a"]
    for name in own + others:
        (out / name).mkdir() if "segments" in name else (out / name).write_bytes(b"someone's")
    assert run([tmp_path / "in"], out).exit_code == 0
    left = {p.name for p in out.iterdir() if p.name.startswith(".")}
    assert left == set(others)


@pytest.mark.parametrize("layout",
                         ["outdir inside, recursive", "outdir is the folder, other ext",
                          "hidden files"])
def test_a_batch_never_takes_its_outputs_manifest_or_temporaries_for_inputs(tmp_path, layout):
    folder = tmp_path / "in"
    clip(folder / "a.mp4")
    clip(folder / "sub" / "b.mp4", seed=2)
    options, out = {"recursive": True}, folder / "out"
    if layout == "outdir is the folder, other ext":
        options, out = {"ext": "mkv"}, folder
    elif layout == "hidden files":  # what a killed batch leaves: a temporary, a parts folder
        clip(folder / ".a.0123abcd.partial.mp4", seed=3)
        clip(folder / ".streamconv-segments-a.mp4.abcd1234" / "part0.mp4", seed=4)
        options, out = {"recursive": True}, tmp_path / "out"
    first = run([folder], out, **options).records
    assert all(".partial" not in r.input and "segments" not in r.input for r in first)
    assert sorted(Path(r.input).name for r in first) == (["a.mp4"] if "ext" in options
                                                         else ["a.mp4", "b.mp4"])
    again = run([folder], out, resume=True, **options).records
    assert [(r.input, r.status) for r in again] == [(r.input, "skipped") for r in first]


def test_ext_that_is_no_extension_or_has_no_muxer_is_a_usage_error(cli, tmp_path):
    folder = tmp_path / "in"
    clip(folder / "a.mp4")
    out = tmp_path / "out"
    for ext in ["", ".", "a/b", "txt", "mp4.", " mkv"]:
        result = batch(cli, str(folder), "-o", str(out), "--ext", ext)
        assert result.returncode == 2 and "--ext" in result.stderr, (ext, result.stderr)
        assert "Traceback" not in result.stderr and not out.exists()
    with pytest.raises(OutputError, match="no muxer"):
        run([folder], out, ext="txt")
    assert not out.exists()


@pytest.mark.parametrize("case",
                         ["outdir is a file", "outdir under a file", "manifest folder missing",
                                  "manifest is an output", "collision with recursive",
                          "output folder is a file"])
def test_refusals_before_any_work_say_what_is_wrong(cli, tmp_path, case):
    folder = tmp_path / "in"
    clip(folder / "x.mp4")
    inputs, out, manifest, recursive = [str(folder)], tmp_path / "out", None, False
    if case == "outdir is a file":
        out.write_bytes(b"a file")
        fragment = "is a file"
    elif case == "outdir under a file":
        (tmp_path / "file").write_bytes(b"a file")
        out, fragment = tmp_path / "file" / "out", "is under a file"
    elif case == "manifest folder missing":
        manifest, fragment = tmp_path / "nodir" / "m.json", "manifest folder does not exist"
    elif case == "manifest is an output":
        manifest, fragment = out / "x.mp4", "the output of"
    elif case == "collision with recursive":
        inputs.append(str(clip(tmp_path / "other" / "x.mp4", seed=2).parent))
        recursive, fragment = True, "would both be written"
    else:
        clip(folder / "sub" / "y.mp4", seed=2)
        out.mkdir()
        (out / "sub").write_bytes(b"a file")
        recursive, fragment = True, "is a file"
    extra = (["--manifest", str(manifest)] if manifest else []) + (["-r"] if recursive else [])
    message = assert_error(batch(cli, *inputs, "-o", str(out), *extra), 6, fragment)
    assert "internal error" not in message and "--recursive" not in message and \
        "the input" not in message
    assert not (tmp_path / "out").is_dir() or case == "output folder is a file"
    assert not list(tmp_path.rglob(MANIFEST_NAME)) and not (tmp_path / "nodir").exists()
    with pytest.raises(OutputError, match=fragment):  # the library refuses alike
        streamconv.Batch(inputs, ["box"], out, backend="cpu", manifest=manifest,
                         recursive=recursive)


@pytest.mark.parametrize("where", ["INPUT", "OUTDIR", "--manifest", "--manifest's folder"])
def test_a_name_too_long_for_the_file_system_is_refused_before_any_work(cli, tmp_path, where):
    """(regression: each ended in "internal error: OSError: File name too long", exit 1)"""
    folder, out, long = tmp_path / "in", tmp_path / "out", "a" * 300
    clip(folder / "x.mp4")
    inputs, extra, code, fragment = [str(folder)], [], 6, "too long for the file system (300 bytes"
    if where == "INPUT":
        inputs, code, fragment = [str(tmp_path / long)], 4, "cannot read input"
    elif where == "OUTDIR":
        out = tmp_path / long
    else:
        extra = ["--manifest",
                 str(tmp_path / long / "m.json" if "folder" in where else tmp_path / long)]
    assert_error(batch(cli, *inputs, "-o", str(out), *extra), code, fragment)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in"]
