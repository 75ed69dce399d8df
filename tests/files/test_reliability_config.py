"""Configuration files that are not what they claim, produced for real: /proc files (which report a
size of 0), files named by mistake (/etc/passwd, a secrets file), binary junk, .npy headers that
lie, taps files with a byte-order mark, and presets that name their files relative to themselves.

Whatever the file holds, an error names the file and quotes at most MAX_QUOTED_CHARS characters of
it, the reading stops one byte past the size limit, and the CLI exits 3. The table of cases is in
docs/reliability.md.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

import numpy as np
import pytest

import streamconv.nn.layer
import streamconv.chain.presets
import streamconv.files.resources
import streamconv.files.tapfiles
from streamconv.errors import FilterSpecError, PresetError
from streamconv.chain.filters import parse_filter
from streamconv.chain.presets import load_preset
from streamconv.files.tapfiles import MAX_QUOTED_CHARS

from helpers.cli import assert_error, assert_ok

TINY = "test:64x48,frames=3"
SECRET = "hunter2-correct-horse-battery-staple-0123456789"
PROC_ENVIRON = Path("/proc/self/environ")
needs_proc = pytest.mark.skipif(not PROC_ENVIRON.is_file(),
                                reason="no /proc/self/environ (not Linux)")


def echoed(message: str, content: str) -> list[str]:
    """Every run of more than MAX_QUOTED_CHARS printable characters of ``content`` that ``message``
    repeats (content between non-printable characters, as repr() escapes those)."""
    width = MAX_QUOTED_CHARS + 1
    runs = "".join(c if c.isprintable() else "\n" for c in content).split("\n")
    return [run[i:i + width] for run in runs for i in range(len(run) - width + 1)
            if run[i:i + width] in message]


def write_preset(path: Path, stage: str) -> Path:
    """A one-stage preset at ``path``: ``stage`` is the body of its [[filter]] table."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'description = "test"\n\n[[filter]]\n{stage}\n', encoding="utf-8")
    return path


# ---------------------------------------------------------------- defect 7: contents never echoed


@needs_proc
def test_taps_file_in_proc_is_read_but_not_echoed():
    with pytest.raises(FilterSpecError) as info:
        parse_filter(f"custom:file={PROC_ENVIRON}")
    message = str(info.value)
    assert info.value.exit_code == 3
    # read, though st_size is 0
    assert str(PROC_ENVIRON) in message and "is not a number" in message
    assert echoed(message, PROC_ENVIRON.read_bytes().decode("utf-8", "replace")) == []


@pytest.mark.parametrize("content", [
    f"API_TOKEN={SECRET}\n",  # one long token, as a secrets file or /etc/passwd holds
    f"1 2 1\n2 {SECRET} 2\n1 2 1\n",  # the bad token on a later row
    f"{SECRET} {SECRET}\n" * 50,
], ids=["first-token", "later-row", "many-lines"])
def test_taps_file_error_quotes_a_short_token_only(tmp_path, content):
    path = tmp_path / "secrets.txt"
    path.write_text(content)
    with pytest.raises(FilterSpecError) as info:
        parse_filter(f"custom:file={path}")
    message = str(info.value)
    assert str(path) in message and "is not a number" in message
    assert echoed(message, content) == [] and SECRET not in message


def test_etc_passwd_named_as_taps_is_not_echoed():
    passwd = Path("/etc/passwd")
    if not passwd.is_file():
        pytest.skip("no /etc/passwd here")
    with pytest.raises(FilterSpecError) as info:
        parse_filter(f"custom:file={passwd}")
    message = str(info.value)
    assert str(passwd) in message
    assert echoed(message, passwd.read_text(errors="replace")) == []


def test_binary_taps_file_names_one_byte(tmp_path):
    path = tmp_path / "blob.txt"
    path.write_bytes(SECRET.encode() + b"\xff\xfe" + SECRET.encode())
    with pytest.raises(FilterSpecError, match=r"not UTF-8 text \(byte 0xff at offset 47\)") as info:
        parse_filter(f"custom:file={path}")
    assert str(path) in str(info.value) and SECRET[:MAX_QUOTED_CHARS + 1] not in str(info.value)


def _npy_with_header(path: Path, header: str) -> Path:
    """A .npy file (format 1.0) whose header dictionary text is ``header``, padded as NumPy pads
    it."""
    text = header.encode("latin1")
    text += b" " * (-(10 + len(text) + 1) % 64) + b"\n"
    path.write_bytes(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text)) + text + b"\x00" * 64)
    return path


@pytest.mark.parametrize("spec, header", [
    ("custom:file={path}", f"{{'descr': '{SECRET}', 'fortran_order': False, 'shape': (3, 3), }}"),
    ("bank:file={path}",
     f"{{'descr': '<f8', 'fortran_order': False, 'shape': (1, 1, 3, 3), '{SECRET}': 1, }}"),
    ("custom:file={path}", f"{SECRET} {SECRET}"),
], ids=["bad-descr", "bank-extra-key", "not-a-dict"])
def test_npy_header_errors_do_not_quote_the_header(tmp_path, spec, header):
    path = _npy_with_header(tmp_path / "weights.npy", header)
    with pytest.raises(FilterSpecError) as info:
        parse_filter(spec.format(path=path))
    message = str(info.value)
    assert str(path) in message and "not a readable .npy (" in message
    assert echoed(message, header) == [] and SECRET not in message


def test_npy_header_claiming_more_data_is_refused_before_allocating(tmp_path):
    # 2**40 float64 would be 8 TiB: refused from the header, with no allocation attempted.
    header = "{'descr': '<f8', 'fortran_order': False, 'shape': (1099511627776,), }"
    path = _npy_with_header(tmp_path / "liar.npy", header)
    with pytest.raises(FilterSpecError, match="header claims more data than it holds"):
        parse_filter(f"custom:file={path}")


@needs_proc
@pytest.mark.parametrize("spec", ["custom:file={path}", "bank:file={path}"])
def test_proc_file_over_the_cap_is_refused_after_reading_one_byte_more(monkeypatch, spec):
    # /proc/self/environ reports st_size 0, so only the bytes read can enforce the cap; lower it
    # under the file's real size and count what is read.
    cap = 16
    monkeypatch.setattr(streamconv.files.tapfiles, "MAX_TAPS_FILE_BYTES", cap)
    monkeypatch.setattr(streamconv.nn.layer, "MAX_LAYER_FILE_BYTES", cap)
    reads = []
    real_read = streamconv.files.resources.read_capped

    def counted_read(path, limit):
        reads.append(real_read(path, limit))
        return reads[-1]

    monkeypatch.setattr(streamconv.files.resources, "read_capped", counted_read)
    assert PROC_ENVIRON.stat().st_size == 0 and len(PROC_ENVIRON.read_bytes()) > cap
    with pytest.raises(FilterSpecError,
                       match=f"{PROC_ENVIRON} is too large \\(over {cap} bytes\\)"):
        parse_filter(spec.format(path=PROC_ENVIRON))
    assert [len(data) for data in reads] == [cap + 1]


@needs_proc
def test_preset_in_proc_over_the_cap_is_refused(monkeypatch):
    monkeypatch.setattr(streamconv.chain.presets, "MAX_PRESET_BYTES", 16)
    with pytest.raises(PresetError,
                       match=f"preset {PROC_ENVIRON} is too large \\(over 16 bytes\\)"):
        load_preset(PROC_ENVIRON)


@needs_proc
def test_preset_that_is_a_proc_file_is_not_echoed():
    with pytest.raises(PresetError) as info:
        load_preset(PROC_ENVIRON)
    message = str(info.value)
    assert message.startswith(f"preset {PROC_ENVIRON}: ")
    assert echoed(message, PROC_ENVIRON.read_bytes().decode("utf-8", "replace")) == []


def test_preset_naming_a_secrets_file_is_not_echoed(tmp_path):
    secrets = tmp_path / "secrets.env"
    secrets.write_text(f"API_TOKEN={SECRET}\nOTHER={SECRET}\n")
    preset = write_preset(tmp_path / "p.toml", f'name = "custom"\nfile = "{secrets}"')
    with pytest.raises(PresetError) as info:
        load_preset(preset)
    message = str(info.value)
    assert info.value.exit_code == 3
    assert str(preset) in message and "filter 1" in message and str(secrets) in message
    assert echoed(message, secrets.read_text()) == [] and SECRET not in message


@pytest.mark.parametrize("text", [
    f'[{SECRET}]\n[{SECRET}]\n',  # tomllib quotes the table declared twice
    f'a = {{ "{SECRET}" = 1, "{SECRET}" = 2 }}\n',  # and a duplicated inline-table key
    f'description = "x"\n{SECRET} = [1, 2\n',
    f'border = "{SECRET}"\n[[filter]]\nname = "box"\n',
    f'[[filter]]\nname = "{SECRET}"\n',
    f'[[filter]]\nname = "box"\n{SECRET} = 3\n',
    f'[[filter]]\nname = "box"\nsize = "{SECRET}"\n',
], ids=["toml-duplicate-table", "toml-duplicate-key", "toml-unclosed", "border", "filter-name",
        "filter-key", "value"])
def test_preset_errors_quote_short_tokens(tmp_path, text):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(PresetError) as info:
        load_preset(path)
    message = str(info.value)
    assert str(path) in message
    assert echoed(message, text) == [] and SECRET not in message


def test_toml_error_keeps_its_position(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text(f'description = "x"\n[{SECRET}]\n[{SECRET}]\n')
    with pytest.raises(PresetError) as info:
        load_preset(path)
    key = f"({SECRET!r},)"[:MAX_QUOTED_CHARS]  # tomllib names the table by its key tuple
    assert f"not valid TOML (Cannot declare {key}... twice (at line 3, column " in str(info.value)


def test_preset_not_utf8_names_one_byte(tmp_path):
    path = tmp_path / "latin1.toml"
    path.write_bytes(f'description = "{SECRET} caf'.encode() + b'\xe9"\n')
    with pytest.raises(PresetError, match=r"not UTF-8 text \(byte 0xe9 at offset \d+\)") as info:
        load_preset(path)
    assert SECRET not in str(info.value)


@needs_proc
def test_cli_filter_file_in_proc_exits_3_without_echo(cli, tmp_path):
    result = cli("run", TINY, "-o", str(tmp_path / "out.mp4"), "--filter",
                 f"custom:file={PROC_ENVIRON}", env={"STREAMCONV_TEST_SECRET": SECRET})
    line = assert_error(result, 3, str(PROC_ENVIRON), "is not a number")
    assert SECRET not in result.stderr
    assert echoed(line, "\n".join(f"{k}={v}" for k, v in os.environ.items())) == []
    assert list(tmp_path.iterdir()) == []


def test_cli_preset_naming_a_secrets_file_exits_3_without_echo(cli, tmp_path):
    secrets = tmp_path / "secrets.env"
    secrets.write_text(f"API_TOKEN={SECRET}\n")
    preset = write_preset(tmp_path / "p.toml", f'name = "custom"\nfile = "{secrets}"')
    result = cli("run", TINY, "-o", str(tmp_path / "out.mp4"), "--pipeline", str(preset))
    assert_error(result, 3, str(preset), str(secrets), "is not a number")
    assert SECRET not in result.stderr


# ---------------------------------------------------------------- defect 12: BOM, relative paths


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_taps_text_file_with_a_byte_order_mark(tmp_path, newline):
    path = tmp_path / "taps.txt"
    lines = ["# from a Windows editor", "1 2 1", "2 4 2", "1 2 1", ""]
    path.write_text(newline.join(lines), encoding="utf-8-sig")
    assert path.read_bytes().startswith(b"\xef\xbb\xbf")
    assert parse_filter(f"custom:file={path}").taps[0].tolist() == [[1, 2, 1], [2, 4, 2], [1, 2, 1]]


def test_preset_with_a_byte_order_mark(tmp_path):
    path = tmp_path / "bom.toml"
    path.write_text('[[filter]]\nname = "box"\nsize = 5\n', encoding="utf-8-sig")
    assert [stage.params for stage in load_preset(path).filters] == [{"size": 5}]


@pytest.fixture
def preset_tree(tmp_path, monkeypatch):
    """presets/p.toml beside presets/taps.txt and presets/sub/w.npy, shared/edge.txt one level up,
    and a decoy taps.txt in the working directory that a cwd-relative lookup would read."""
    folder = tmp_path / "presets"
    (folder / "sub").mkdir(parents=True)
    (folder / "taps.txt").write_text("1 2 1\n2 4 2\n1 2 1\n")
    np.save(folder / "sub" / "w.npy", np.ones((1, 3, 3, 3)))
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "edge.txt").write_text("0 -1 0\n-1 5 -1\n0 -1 0\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "taps.txt").write_text("9\n")
    monkeypatch.chdir(elsewhere)
    return folder


def test_preset_relative_files_resolve_against_its_folder(preset_tree):
    preset = preset_tree / "p.toml"
    preset.write_text('[[filter]]\nname = "custom"\nfile = "taps.txt"\n\n'
                      '[[filter]]\nname = "custom"\nfile = "../shared/edge.txt"\n\n'
                      '[[filter]]\nname = "bank"\nfile = "sub/w.npy"\n', encoding="utf-8")
    blur, sharpen, layer = load_preset(preset).filters
    assert blur.taps[0].tolist() == [[1, 2, 1], [2, 4, 2], [1, 2, 1]]  # not the decoy in the cwd
    assert sharpen.taps[0].tolist() == [[0, -1, 0], [-1, 5, -1], [0, -1, 0]]
    assert layer.layer.weights.shape == (1, 3, 3, 3)
    # Given by a relative path too: still the preset's own folder, named in full.
    relative = load_preset(os.path.relpath(preset)).filters[0]
    assert relative.params["file"] == str(preset_tree / "taps.txt")


def test_preset_absolute_file_stays_as_given(preset_tree, tmp_path):
    absolute = tmp_path / "shared" / "edge.txt"
    preset = write_preset(preset_tree / "abs.toml", f'name = "custom"\nfile = "{absolute}"')
    assert load_preset(preset).filters[0].params["file"] == str(absolute)


def test_preset_missing_relative_file_names_the_resolved_path(preset_tree):
    preset = write_preset(preset_tree / "p.toml", 'name = "custom"\nfile = "nope/taps.txt"')
    with pytest.raises(PresetError) as info:
        load_preset(preset)
    assert f"custom taps file not found: {preset_tree / 'nope' / 'taps.txt'}" in str(info.value)


def test_shipped_preset_relative_file_resolves_against_the_preset_folder(preset_tree, monkeypatch):
    # load_preset("name") looks in preset_dir(); make that a folder of ours, as the shipped one.
    write_preset(preset_tree / "mine.toml", 'name = "custom"\nfile = "taps.txt"')
    monkeypatch.setattr(streamconv.chain.presets, "preset_dir", lambda: preset_tree)
    assert load_preset("mine").filters[0].params["file"] == str(preset_tree / "taps.txt")


def test_cli_preset_relative_file_from_another_working_directory(cli, preset_tree, tmp_path):
    preset = write_preset(preset_tree / "p.toml",
                          'name = "custom"\nfile = "taps.txt"\nnormalize = true')
    out = tmp_path / "out.mkv"
    assert_ok(cli("run", TINY, "-o", str(out), "--pipeline", str(preset),
                  cwd=tmp_path / "elsewhere"))
    assert out.is_file()
    missing = write_preset(preset_tree / "missing.toml", 'name = "custom"\nfile = "gone.txt"')
    result = cli("run", TINY, "-o", str(tmp_path / "out2.mkv"), "--pipeline", str(missing),
                 cwd=tmp_path / "elsewhere")
    assert_error(result, 3, "custom taps file not found", str(preset_tree / "gone.txt"))


def test_a_taps_file_that_is_no_taps_file_has_nothing_of_it_quoted(cli, tmp_path):
    """A shadow-style password file named as taps: its first token is a user, a hash's kind and
    salt; nothing of it is quoted, only where the first value that is no number sits."""
    shadow = tmp_path / "shadow"
    shadow.write_text("alice:$6$Qx7salt$9f8e7d6c5b4a:19000:0:99999:7:::\n"
                      "bob:$y$j9T$pepper$abcdef:19001:0:99999:7:::\n")
    result = cli("run", TINY, "-o", str(tmp_path / "out.mp4"), "--filter", f"custom:file={shadow}")
    line = assert_error(result, 3, f"custom taps file {shadow}: row 1: value 1 is not a number")
    for fragment in ("alice", "$6$", "Qx7", "salt", "bob"):
        assert fragment not in result.stderr, line
    taps = tmp_path / "taps.txt"
    taps.write_text("1 2 1\n2 4x 2\n1 2 1\n")  # a real taps file's typo: placed as well
    result = cli("run", TINY, "-o", str(tmp_path / "out.mp4"), "--filter", f"custom:file={taps}")
    assert_error(result, 3, f"custom taps file {taps}: row 2: value 2 is not a number")
