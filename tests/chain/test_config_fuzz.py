"""Property-based fuzzing of the filter-spec parser and the preset loader.

What is fuzzed: ``streamconv.chain.filters`` (split_spec, parse_filter, parse_chain, build_filter,
inline taps, taps files in text and .npy, layer weight files of the bank filter) and
``streamconv.chain.presets.load_preset`` (TOML documents built from random keys and values, random
bytes, mutated shipped presets, oversized files).

Why: both read text a user typed on the command line or wrote in a file. Whatever that text is, the
answer must be valid stages or a FilterSpecError / PresetError (exit code 3) saying what is wrong:
never another exception (a traceback instead of a message), never a hang, and never evaluation of
the text as code.

The properties:
  1. only FilterSpecError / PresetError escape, within a time bound;
  2. a stage that builds is usable: finite float32 taps, odd square, at most MAX_SIZE, and so on;
  3. Python expressions in specs or presets are data: no eval/exec/os.system, no sentinel file;
  4. messages are streamconv's own: non-empty, naming the filter, key, stage or file at fault;
  5. messages never repeat more than MAX_QUOTED_CHARS characters of a file's contents.

Every run draws the same examples (derandomize=True, no example database) so CI cannot flake.
"""

from __future__ import annotations

import builtins
import contextlib
import json
import math
import os
import signal
import subprocess
import sys
import zipfile  # noqa: F401 -- imported up front: np.load imports it lazily, which would trip the exec spy
from datetime import date, datetime, time
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from streamconv.frames.borders import BORDER_MODES
from streamconv.errors import FilterSpecError, PresetError
from streamconv.chain.filters import (
                                      COMBINE_MAGNITUDE,
                                      COMBINE_NONE,
                                      MAX_SIZE,
                                      REGISTRY,
                                      FilterStage,
                                      build_filter,
                                      parse_chain,
                                      parse_filter,
                                      show_value,
                                      split_spec,
                                      )
from streamconv.nn.layer import MAX_MAPS
from streamconv.chain.presets import MAX_PRESET_BYTES, Preset, load_preset, preset_dir
from streamconv.files.tapfiles import MAX_ABS_TAP, MAX_QUOTED_CHARS, MAX_TAPS_FILE_BYTES

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only, as in streamconv.chain.presets
    import tomli as tomllib

# deadline=None: file I/O and numpy make single examples slow now and then, which is no bug here;
# _bounded() catches real hangs instead.
FUZZ = settings(deadline=None, derandomize=True, database=None, max_examples=150)

NAMES = sorted(REGISTRY)
KEYS = sorted({key for entry in REGISTRY.values() for key in entry.params})
HANG_SECONDS = 10


# --- harness ------------------------------------------------------------------------------------


class Hang(AssertionError):
    """One parse ran past HANG_SECONDS."""


@contextlib.contextmanager
def _bounded(seconds: float = HANG_SECONDS):
    """Fail a call that runs longer than ``seconds`` (SIGALRM; a no-op where there is none)."""
    if not hasattr(signal, "setitimer"):
        yield
        return

    def alarm(signum, frame):
        raise Hang(f"parsing ran past {seconds} s")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _attempt(call, *args):
    """Run ``call(*args)`` bounded in time, with eval/exec/os.system/subprocess spied on.

    Returns (result, None) or (None, error) for FilterSpecError / PresetError; any other exception
    propagates and fails the test (property 1). A spy call fails it too (property 3): the spies
    count only source text, as importlib's exec of code objects is no evaluation of user input.
    """
    evaluated: list[str] = []
    real_eval, real_exec = builtins.eval, builtins.exec

    def spy(real):
        def wrapper(source, *rest, **kwargs):
            if isinstance(source, str):
                evaluated.append(source)
            return real(source, *rest, **kwargs)
        return wrapper

    def refuse(*args, **kwargs):
        evaluated.append(repr(args))
        raise AssertionError(f"a process was started: {args!r}")

    with mock.patch.object(builtins, "eval", spy(real_eval)), \
            mock.patch.object(builtins, "exec", spy(real_exec)), \
            mock.patch.object(os, "system", refuse), \
            mock.patch.object(subprocess, "Popen", refuse), \
            _bounded():
        try:
            result, error = call(*args), None
        except (FilterSpecError, PresetError) as exc:
            result, error = None, exc
    assert not evaluated, f"evaluated {evaluated!r}"
    return result, error


def _check_stage(stage: FilterStage) -> None:
    """Property 2: a built stage is one the backends can run."""
    assert isinstance(stage, FilterStage) and stage.name in REGISTRY
    assert set(stage.params) <= set(REGISTRY[stage.name].params)
    assert 1 <= stage.size <= MAX_SIZE and stage.size % 2 == 1
    if stage.geometry is not None:  # scale and crop: a size change, no taps
        assert stage.name in ("scale", "crop") and stage.taps == () and stage.layer is None
        assert stage.geometry.kind == stage.name and stage.describe()
        return
    if stage.layer is not None:
        weights = stage.layer.weights
        assert stage.name == "bank" and stage.taps == ()
        assert weights.dtype == np.float32 and weights.ndim == 4 and not weights.flags.writeable
        assert weights.shape[2] == weights.shape[3] == stage.size
        assert 1 <= weights.shape[0] <= MAX_MAPS and weights.shape[1] >= 1
        assert np.all(np.isfinite(weights)) and np.abs(weights).max() <= MAX_ABS_TAP
        assert stage.layer.pool >= 1
        return
    if stage.temporal is not None:
        taps = stage.temporal.taps
        assert stage.taps == () and taps.dtype == np.float32 and not taps.flags.writeable
        assert taps.ndim == 3 and taps.shape[0] % 2 == 1 and 1 <= taps.shape[0] <= 15
        assert taps.shape[1] == taps.shape[2] == stage.size
        assert np.all(np.isfinite(taps)) and np.abs(taps).max() <= MAX_ABS_TAP
        return
    assert stage.combine in (COMBINE_NONE, COMBINE_MAGNITUDE)
    assert len(stage.taps) == (2 if stage.combine == COMBINE_MAGNITUDE else 1)
    for taps in stage.taps:
        assert isinstance(taps, np.ndarray) and taps.dtype == np.float32
        assert taps.shape == (stage.size, stage.size)
        assert taps.flags.c_contiguous and not taps.flags.writeable
        assert np.all(np.isfinite(taps)) and float(np.abs(taps).max()) <= MAX_ABS_TAP
    assert stage.describe()  # the label the CLI prints must not fail either


def _check_message(error: Exception, kind: type) -> str:
    """Property 4, the part that holds for every error: streamconv's own class, exit 3, some
    text."""
    assert type(error) is kind and error.exit_code == 3
    message = str(error)
    assert message.strip(), "empty error message"
    return message


def _check_spec_outcome(spec: str, stage: FilterStage | None, error: Exception | None) -> None:
    """Properties 2 and 4 for one spec: a valid stage, or a message naming what is wrong."""
    if error is None:
        _check_stage(stage)
        return
    message = _check_message(error, FilterSpecError)
    try:
        name, _ = split_spec(spec)
    except FilterSpecError:
        assert message == "empty filter spec" or repr(spec) in message
        return
    if name in REGISTRY:
        # Every message about a known filter starts with its name ("custom taps: ...", "bank: ...").
        assert message.startswith(name), message
    else:
        assert message.startswith(f"unknown filter {show_value(name)}"), message


# Characters a row-length list or a number in a message can spell by itself: a run of only these
# in a file proves no echo when the message holds it too.
_NUMERIC_TEXT = set("0123456789+-.eE,; ()\n\t")


def _echo(message: str, content: bytes) -> str | None:
    """Property 5: a run of more than MAX_QUOTED_CHARS characters of ``content`` (as UTF-8 text)
    that ``message`` repeats, else None. Runs of only digits, signs and separators are skipped."""
    text = content.decode("utf-8", errors="replace")
    width = MAX_QUOTED_CHARS + 1
    for start in range(len(text) - width + 1):
        run = text[start:start + width]
        if "\ufffd" not in run and set(run) - _NUMERIC_TEXT and run in message:
            return run
    return None


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    """A folder for the files the examples write (module scope: hypothesis reruns the test body
    many times per call, which a function-scoped tmp_path would not follow)."""
    folder = tmp_path_factory.mktemp("fuzz")
    np.save(folder / "good.npy", np.arange(9.0).reshape(3, 3))
    np.save(folder / "bank.npy", np.ones((2, 3, 3, 3)))
    (folder / "good.txt").write_text("# blur\n1 2 1\n2 4 2\n1 2 1\n")
    (folder / "empty.npy").write_bytes(b"")
    return folder


# --- strategies ---------------------------------------------------------------------------------

# Characters of any category but surrogates (not valid in UTF-8 files, TOML or most paths).
CHARS = st.characters(exclude_categories=("Cs",))
# Text heavy in the spec syntax's own characters, so that random text reaches past split_spec.
SPEC_TEXT = st.text(st.one_of(CHARS, st.sampled_from(":,=; .-e0123456789")), max_size=60)

PAYLOADS = [
    "__import__('os').system('touch {sentinel}')",
    "__import__('pathlib').Path('{sentinel}').touch()",
    "eval(\"open('{sentinel}', 'w')\")",
    "exec('open(\\'{sentinel}\\', \\'w\\')')",
    "open('{sentinel}', 'w').close() or 3",
    "$(touch {sentinel})",
    "`touch {sentinel}`",
    "1+2",
    "0.5*2",
    "3 if True else 1",
    "{{7*7}}",
    "${{3}}",
    "lambda: 3",
]

NUMBER_WORDS = [
    "", " ", "0", "-0", "1", "3", "-3", "31", "33", "4", "1.5", "3.0", "2.5", "nan", "NaN", "-nan",
    "inf", "-inf", "infinity", "1e308", "1e309", "-1e308", "5e-324", "1e-200", "0x10", "1_001",
    "0b11",
    "+5", "١٣", "３", "9" * 400, "9" * 5000, "1" * 31, "true", "yes", "off", "maybe", "é", "\x00",
    "None",
]


def _render_number(value) -> str:
    return repr(value) if isinstance(value, float) else str(value)


NUMBERS = st.one_of(
    st.integers(min_value=-5, max_value=40),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(min_value=1e-320, max_value=100.0),
)


@st.composite
def taps_text(draw) -> str:
    """Inline taps: mostly well-formed rows of numbers, with odd/even/ragged sizes and bad cells."""
    cell = st.one_of(NUMBERS.map(_render_number), st.sampled_from(NUMBER_WORDS[:24]))
    if draw(st.integers(0, 9)) == 0:
        # Near and over the size limit; one repeated cell keeps the example small.
        side = draw(st.sampled_from([MAX_SIZE - 2, MAX_SIZE, MAX_SIZE + 2]))
        return ";".join([",".join([draw(cell)] * side)] * side)
    rows = draw(st.integers(min_value=0, max_value=6))
    cols = draw(st.integers(min_value=0, max_value=6))
    # Now and then a row one cell short or long: ragged matrices.
    matrix = [[draw(cell) for _ in range(cols + draw(st.integers(-1, 1)) * draw(st.booleans()))]
              for _ in range(rows)]
    row_sep = draw(st.sampled_from([";", "; ", " ;"]))
    cell_sep = draw(st.sampled_from([",", " ", ", "]))
    return row_sep.join(cell_sep.join(row) for row in matrix)


def spec_values(paths: list[str]) -> st.SearchStrategy[str]:
    """A parameter value as text: numbers, number-like words, taps, paths, unicode, payloads."""
    return st.one_of(
        NUMBERS.map(_render_number),
        st.sampled_from(NUMBER_WORDS),
        taps_text(),
        st.sampled_from(paths),
        st.text(CHARS, max_size=12),
        st.sampled_from(PAYLOADS),
    )


@st.composite
def near_valid_specs(draw, paths: list[str]) -> str:
    """``name:key=value,...`` from the real names and keys, with wrong values, repeated and unknown
    keys, odd case and whitespace, and now and then a piece without '='."""
    name = draw(st.one_of(st.sampled_from(NAMES), st.sampled_from(NAMES).map(str.upper),
                          st.text(CHARS, max_size=8)))
    own = list(REGISTRY[name].params) if name in REGISTRY else []
    key = st.one_of(st.sampled_from(own or KEYS), st.sampled_from(KEYS), st.text(CHARS, max_size=6))
    pieces = draw(st.lists(st.tuples(key, spec_values(paths),
                                     st.sampled_from(["=", "=", "=", " = ", ""])),
                           max_size=4))
    if not pieces and draw(st.booleans()):
        return name
    body = ",".join(f"{k}{eq}{v}" for k, eq, v in pieces)
    return f"{draw(st.sampled_from(['', ' ']))}{name}{draw(st.sampled_from([':', ' : ', ':']))}{body}"


def _spec_paths(folder: Path) -> list[str]:
    return [str(folder / "good.npy"), str(folder / "bank.npy"), str(folder / "good.txt"),
            str(folder / "empty.npy"), str(folder / "missing.npy"), str(folder / "missing.txt"),
            str(folder), "a" * 300, "a" * 300 + ".npy", "x\x00y.npy", "/dev/null", "-",
            "~/taps.txt"]


TOML_SCALARS = st.one_of(
    st.booleans(),
    st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1),
    # Over TOML's 64 bits, which tomllib reads all the same; as powers, since hypothesis cannot
    # repr() an int over 4300 digits when it lists a sampled_from.
    st.sampled_from([63, 64, 1329, 20000]).map(lambda bits: 1 << bits),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(CHARS, max_size=12),
    st.dates(), st.times(), st.datetimes(),
)
TOML_VALUES = st.recursive(
    TOML_SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(CHARS, max_size=5), inner,
                                                                max_size=3),
    max_leaves=6,
)


@st.composite
def stage_tables(draw, paths: list[str]) -> dict:
    """One [[filter]] table: a real or wrong name, real or unknown keys, values of any TOML type."""
    name = draw(st.one_of(st.sampled_from(NAMES), st.sampled_from(["BOX", "blur", ""]),
                          TOML_SCALARS))
    own = list(REGISTRY[name].params) if isinstance(name, str) and name in REGISTRY else []
    value = st.one_of(NUMBERS, st.sampled_from(NUMBER_WORDS), taps_text(), st.sampled_from(paths),
                      st.sampled_from(PAYLOADS), TOML_VALUES)
    params = draw(st.dictionaries(st.one_of(st.sampled_from(own or KEYS),
                                            st.text(CHARS, max_size=6)), value,
                                  max_size=3))
    return {**({} if draw(st.integers(0, 9)) == 0 else {"name": name}), **params}


@st.composite
def preset_documents(draw, paths: list[str]) -> dict:
    """A preset as a dict: the real top-level keys with right or wrong values, and stray keys."""
    doc: dict = {}
    if draw(st.booleans()):
        doc["description"] = draw(st.one_of(st.text(CHARS, max_size=20), TOML_SCALARS))
    if draw(st.booleans()):
        doc["border"] = draw(st.one_of(st.sampled_from(BORDER_MODES), st.text(CHARS, max_size=8),
                                       TOML_SCALARS))
    if draw(st.integers(0, 9)):
        doc["filter"] = draw(st.one_of(st.lists(stage_tables(paths), max_size=4), TOML_VALUES))
    if draw(st.integers(0, 9)) == 0:
        doc.update(draw(st.dictionaries(st.text(CHARS, max_size=6), TOML_VALUES, max_size=2)))
    return doc


# --- a small TOML writer (the standard library only reads TOML) ---------------------------------


def _toml_string(text: str) -> str:
    # JSON's escapes are TOML's; DEL is the one control character JSON leaves raw and TOML refuses.
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        # str() of an int over 4300 digits raises ValueError; hexadecimal has no such limit.
        return hex(value) if value.bit_length() > 4000 else str(value)
    if isinstance(value, float):
        return repr(value)  # inf, -inf, nan, 1e+300 and 5e-324 are all TOML floats
    if isinstance(value, str):
        return _toml_string(value)
    if isinstance(value, (datetime, date, time)):
        return value.isoformat()
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return "{" + ", ".join(f"{_toml_string(k)} = {_toml_value(v)}" for k, v in value.items()) + "}"


def _toml_document(doc: dict) -> str:
    """``doc`` as TOML; a non-empty list of tables is written as [[key]] sections, like a preset."""
    def table_array(v):
        return isinstance(v, list) and v and all(isinstance(t, dict) for t in v)

    lines = [f"{_toml_string(k)} = {_toml_value(v)}" for k, v in doc.items() if not table_array(v)]
    for key, tables in doc.items():
        if table_array(tables):
            for table in tables:
                lines.append(f"[[{_toml_string(key)}]]")
                lines += [f"{_toml_string(k)} = {_toml_value(v)}" for k, v in table.items()]
    return "\n".join(lines) + "\n"


def _load(path: Path):
    """load_preset(path) through _attempt, with the preset properties checked."""
    preset, error = _attempt(load_preset, path)
    if error is None:
        assert isinstance(preset, Preset) and preset.name == path.stem
        assert isinstance(preset.description, str)
        assert preset.border is None or preset.border in BORDER_MODES
        assert preset.filters
        for stage in preset.filters:
            _check_stage(stage)
    else:
        message = _check_message(error, PresetError)
        assert str(path) in message, message  # it names the file at fault
    return preset, error


# --- filter specs ---------------------------------------------------------------------------------


@settings(FUZZ, max_examples=250)
@given(spec=SPEC_TEXT)
@example(spec="gaussian:sigma=1e308")  # regression: math.ceil(inf) raised OverflowError
@example(spec="gaussian:sigma=1e-200")  # regression: 2 * sigma**2 underflowed, NaN taps
@example(spec="box:size=" + "9" * 5000)  # int() refuses over 4300 digits: a ValueError to catch
@example(spec=":=,")
def test_arbitrary_text_specs(spec):
    """Properties 1, 2 and 4 for any text at all."""
    stage, error = _attempt(parse_filter, spec)
    _check_spec_outcome(spec, stage, error)


@settings(FUZZ, max_examples=300)
@given(data=st.data())
def test_near_valid_specs(workdir, data):
    """Properties 1, 2 and 4 for specs built from the real names and keys with bad values."""
    spec = data.draw(near_valid_specs(_spec_paths(workdir)), label="spec")
    stage, error = _attempt(parse_filter, spec)
    _check_spec_outcome(spec, stage, error)


@pytest.mark.parametrize("spec, message", [
    ("gaussian:sigma=1e308", "needs size inf > 31"),
    ("custom:file=" + "a" * 300, "custom taps file not found"),  # was OSError: file name too long
    ("bank:file=" + "a" * 300 + ".npy", "bank: weights file not found"),
    ("custom:file={dir}/empty.npy", "not a readable .npy"),  # was EOFError from np.load
    ("bank:file={dir}/zip.npy", "an .npz archive"),  # was AttributeError: NpzFile has no dtype
    ("custom:file={dir}/liar.npy", "not a readable .npy"),  # was MemoryError: header claims 909 TiB
], ids=["huge-sigma", "long-taps-name", "long-bank-name", "empty-npy", "npz-as-npy",
        "lying-header"])
def test_regressions_refused_with_a_reason(workdir, spec, message):
    np.savez(workdir / "zip.npz", a=np.ones((1, 1, 3, 3)))
    (workdir / "zip.npy").write_bytes((workdir / "zip.npz").read_bytes())
    with (workdir / "liar.npy").open("wb") as handle:
        np.lib.format.write_array_header_1_0(handle, {"descr": "|i1", "fortran_order": False,
                                                      "shape": (10**15,)})
        handle.write(b"\x01\x02\x03")
    with pytest.raises(FilterSpecError) as info:
        parse_filter(spec.format(dir=workdir))
    assert message in str(info.value)


def test_tiny_sigma_is_a_delta():
    """Regression: sigma under ~1e-154 gave NaN taps (0 / 0); the limit of a Gaussian is the delta,
    which sigma=0.01 already gives exactly."""
    for sigma in (1e-200, 5e-324, 0.001):
        stage = parse_filter(f"gaussian:sigma={sigma!r},size=5")
        assert stage.taps[0].tolist() == parse_filter("gaussian:sigma=0.01,size=5").taps[0].tolist()
        assert stage.taps[0][2, 2] == 1.0 and stage.taps[0].sum() == 1.0


@settings(FUZZ)
@given(specs=st.lists(st.one_of(SPEC_TEXT, st.sampled_from(NAMES)), max_size=5))
def test_chains_are_all_valid_or_refused(specs):
    """parse_chain: a stage per spec, each valid, or one error."""
    chain, error = _attempt(parse_chain, specs)
    if error is None:
        assert len(chain) == len(specs)
        for stage in chain:
            _check_stage(stage)
    else:
        _check_message(error, FilterSpecError)


TYPED_VALUES = st.one_of(NUMBERS, st.none(), st.sampled_from(NUMBER_WORDS), TOML_VALUES)


@settings(FUZZ, max_examples=200)
@given(name=st.one_of(st.sampled_from(NAMES), st.text(CHARS, max_size=8)),
       params=st.dictionaries(st.one_of(st.sampled_from(KEYS), st.text(CHARS, max_size=6)),
                              TYPED_VALUES, max_size=3))
@example(name="gaussian", params={"sigma": 10**400})  # regression: float() raised OverflowError
@example(name="box", params={"size": 16**5000})  # regression: str() of the int raised ValueError
@example(name="custom", params={"normalize": [16**5000]})  # regression: str() of the list, likewise
def test_build_filter_with_typed_values(name, params):
    """build_filter takes TOML's typed values (and any caller's): same properties as specs."""
    stage, error = _attempt(build_filter, name, params)
    if error is None:
        _check_stage(stage)
        return
    message = _check_message(error, FilterSpecError)
    assert message.startswith(name if name in REGISTRY
                              else f"unknown filter {show_value(name)}"), message


@settings(FUZZ)
@given(name=st.sampled_from(NAMES).filter(lambda n: REGISTRY[n].params), data=st.data())
def test_wrong_types_name_the_key(name, data):
    """Property 4: a value of the wrong type is refused with 'filter: key' in the message."""
    key = data.draw(st.sampled_from(sorted(REGISTRY[name].params)), label="key")
    kind = REGISTRY[name].params[key].kind
    wrong = st.one_of(st.none(), st.lists(TOML_SCALARS, max_size=3),
                      st.dictionaries(st.text(max_size=3), TOML_SCALARS, max_size=2))
    if kind in (int, float):
        wrong |= st.text("abcdghjklmopqrsuvwxz", min_size=1)  # no digits, no 'inf'/'nan'/'e'
    if kind is str:
        wrong |= NUMBERS | st.booleans()
    value = data.draw(wrong, label="value")
    _, error = _attempt(build_filter, name, {key: value})
    assert error is not None, f"{name}: {key}={value!r} was accepted"
    assert f"{name}: {key}" in _check_message(error, FilterSpecError)


@settings(FUZZ)
@given(name=st.sampled_from(NAMES), key=st.text(CHARS, min_size=1, max_size=8))
def test_unknown_keys_are_named(name, key):
    """Property 4: an unknown parameter is refused by name."""
    if key in REGISTRY[name].params:
        return  # drew a real key: the property is about the others
    _, error = _attempt(build_filter, name, {key: "1"})
    message = _check_message(error, FilterSpecError)
    assert f"unknown parameter {show_value(key)}" in message, message


# 


@settings(FUZZ, max_examples=200)
@given(payload=st.sampled_from(PAYLOADS), where=st.sampled_from(["name", "key", "value", "tail"]),
       name=st.sampled_from(NAMES), data=st.data())
def test_expressions_are_never_evaluated(workdir, payload, where, name, data):
    """A payload anywhere in a spec or a preset is refused or kept as text, never run."""
    sentinel = workdir / "SENTINEL"
    text = payload.format(sentinel=sentinel)
    key = data.draw(st.sampled_from(sorted(REGISTRY[name].params) or ["size"]), label="key")
    spec = {"name": f"{text}:size=3", "key": f"{name}:{text}=1", "value": f"{name}:{key}={text}",
            "tail": f"{name}:{key}=1,{text}"}[where]
    stage, error = _attempt(parse_filter, spec)
    _check_spec_outcome(spec, stage, error)
    if stage is not None and where == "value":
        # Kept as data: the only way a payload value builds is as a string parameter, verbatim.
        assert REGISTRY[name].params[key].kind is str and \
            stage.params.get(key, text) == text.strip()
    if where == "value" and REGISTRY[name].params.get(key) and \
            REGISTRY[name].params[key].kind in (int, float):
        assert error is not None, f"{spec!r} built: the expression was read as a number"
    # The same text as TOML values of a preset.
    path = workdir / "payload.toml"
    doc = {"description": text, "filter": [{"name": name, key: text}, {"name": text}]}
    path.write_text(_toml_document(doc), encoding="utf-8")
    _load(path)
    path.write_text(text + "\n", encoding="utf-8")  # and as the whole file
    _load(path)
    ran = sentinel.exists()
    sentinel.unlink(missing_ok=True)  # so that one failure does not fail every later example
    assert not ran, f"{spec!r} or its preset ran code"


# --- taps and weight files -----------------------------------------------------------------------

NPY_DTYPES = st.sampled_from(["f2", "f4", "<f8", ">f8", "i1", "u1", "<i8", ">i4", "?", "c8", "U2",
                              "S2", "M8[s]"])


@settings(FUZZ, max_examples=150)
@given(array=hnp.arrays(NPY_DTYPES,
                        hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=5)),
       pool=st.sampled_from(["", ",pool=1", ",pool=2", ",pool=0", ",pool=-1", ",relu=1"]))
def test_npy_files_of_any_shape_and_dtype(workdir, array, pool):
    """Taps and layer weights from .npy files of any dtype and shape, NaN and inf included."""
    path = workdir / "fuzz.npy"
    np.save(path, array)
    for spec in (f"custom:file={path}", f"custom:file={path},normalize=1",
                 f"bank:file={path}{pool}"):
        stage, error = _attempt(parse_filter, spec)
        _check_spec_outcome(spec, stage, error)


@settings(FUZZ, max_examples=150)
@given(shape=st.lists(st.integers(min_value=-1, max_value=1 << 62), max_size=4).map(tuple),
       descr=st.sampled_from(["|i1", "<f8", ">f4", "|b1", "<c16", "|O", "|V8"]),
       payload=st.binary(max_size=64), raw=st.binary(max_size=200))
@example(shape=(10**15,), descr="|i1", payload=b"\x01", raw=b"")  # regression: MemoryError leaked
def test_corrupt_npy_files(workdir, shape, descr, payload, raw):
    """Headers that lie about the shape, odd dtypes, truncated data and raw bytes after the
    magic."""
    path = workdir / "corrupt.npy"
    with path.open("wb") as handle:
        try:
            np.lib.format.write_array_header_1_0(handle, {"descr": descr, "fortran_order": False,
                                                          "shape": shape})
        except ValueError:
            return  # numpy will not even write this header; raw bytes below still cover junk
        handle.write(payload)
    for content in (None, b"\x93NUMPY" + raw, raw):
        if content is not None:
            path.write_bytes(content)
        for spec in (f"custom:file={path}", f"bank:file={path}"):
            stage, error = _attempt(parse_filter, spec)
            _check_spec_outcome(spec, stage, error)
            assert error is None or _echo(str(error), path.read_bytes()) is None, str(error)


@settings(FUZZ, max_examples=150)
@given(content=st.one_of(st.binary(max_size=300), st.text(CHARS, max_size=300).map(str.encode),
                         taps_text().map(lambda t: t.replace(";", "\n").encode())),
       suffix=st.sampled_from([".txt", ".npy", ".csv", ""]))
def test_taps_files_of_random_content(workdir, content, suffix):
    """Random bytes, random text and near-valid matrices (comments, ';' or newlines) as taps files;
    an error quotes at most MAX_QUOTED_CHARS characters of them."""
    path = workdir / f"taps{suffix}"
    path.write_bytes(content)
    spec = f"custom:file={path}"
    stage, error = _attempt(parse_filter, spec)
    _check_spec_outcome(spec, stage, error)
    assert error is None or _echo(str(error), content) is None, str(error)


def _padded_file(path: Path, body: str, size: int) -> Path:
    """``body`` padded with a comment to exactly ``size`` bytes (both formats take # comments)."""
    path.write_text(body + "#" * (size - len(body)))
    return path


@settings(FUZZ, max_examples=6,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(extra=st.integers(min_value=-3, max_value=3))
@example(extra=0)
@example(extra=1)
def test_taps_file_size_limit(workdir, extra):
    """A taps file of up to MAX_TAPS_FILE_BYTES is read; one byte more is refused unread."""
    size = MAX_TAPS_FILE_BYTES + extra
    path = _padded_file(workdir / "big.txt", "1 2 1\n2 4 2\n1 2 1\n", size)
    stage, error = _attempt(parse_filter, f"custom:file={path}")
    if size > MAX_TAPS_FILE_BYTES:
        assert "too large" in _check_message(error, FilterSpecError)
    else:
        assert error is None and stage.taps[0].tolist() == [[1, 2, 1], [2, 4, 2], [1, 2, 1]]


# --- presets ------------------------------------------------------------------------------------


@settings(FUZZ, max_examples=200)
@given(data=st.data())
def test_random_preset_documents(workdir, data):
    """Properties 1, 2 and 4 for TOML documents of random keys and values, near-valid or not."""
    doc = data.draw(preset_documents(_spec_paths(workdir)), label="doc")
    text = _toml_document(doc)
    tomllib.loads(text)  # the writer's own check: the fuzz must reach past the TOML parser
    path = workdir / "doc.toml"
    path.write_text(text, encoding="utf-8")
    _load(path)


@settings(FUZZ, max_examples=120)
@given(data=st.data(), valid=st.integers(min_value=0, max_value=2))
def test_bad_stage_is_named(workdir, data, valid):
    """Property 4: after ``valid`` good stages, a refused stage is named by its number."""
    bad = data.draw(stage_tables(_spec_paths(workdir)), label="stage")
    doc = {"description": "fuzz", "filter": [{"name": "box", "size": 3}] * valid + [bad]}
    path = workdir / "stage.toml"
    path.write_text(_toml_document(doc), encoding="utf-8")
    preset, error = _load(path)
    if error is not None:
        assert f"filter {valid + 1}" in str(error), str(error)
    else:
        assert len(preset.filters) == valid + 1


SHIPPED = sorted(preset_dir().glob("*.toml"))


@st.composite
def mutated_presets(draw) -> bytes:
    """A shipped preset with a few bytes inserted, deleted or replaced: near-valid TOML."""
    content = bytearray(draw(st.sampled_from(SHIPPED)).read_bytes())
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        at = draw(st.integers(min_value=0, max_value=len(content)))
        new = draw(st.one_of(st.binary(max_size=3),
                             st.sampled_from([b"[", b"]", b"=", b"\"", b"\n", b"{",
                                                                       b"nan", b"1e999", b"\xff",
                                              b"#"])))
        cut = draw(st.integers(min_value=0, max_value=3))
        content[at:at + cut] = new
    return bytes(content)


@settings(FUZZ, max_examples=200)
@given(content=st.one_of(st.binary(max_size=400), mutated_presets()))
@example(content=b"a = " + b"[" * 20000 + b"]" * 20000)  # regression: RecursionError from tomllib
@example(content=b"a = " + b"9" * 5000)  # regression: tomllib's plain ValueError (int digits limit)
# regression: str(int) raised
@example(content=b"[[filter]]\nname = \"box\"\nsize = 0x" + b"f" * 5000)
# regression: repr(int) raised
@example(content=b"border = 0x" + b"f" * 5000 + b"\n[[filter]]\nname = \"box\"")
@example(content=b"\xff\xfe")
def test_random_bytes_as_preset(workdir, content):
    """Random bytes and mutated shipped presets: loaded and valid, or a PresetError naming the
    file."""
    path = workdir / "bytes.toml"
    path.write_bytes(content)
    _load(path)


@settings(FUZZ, max_examples=8)
@given(extra=st.integers(min_value=-100, max_value=100))
@example(extra=0)
@example(extra=1)
def test_preset_size_limit(workdir, extra):
    """A preset of up to MAX_PRESET_BYTES loads; a byte more is refused before it is parsed."""
    size = MAX_PRESET_BYTES + extra
    path = _padded_file(workdir / "sized.toml", '[[filter]]\nname = "box"\n', size)
    preset, error = _load(path)
    if size > MAX_PRESET_BYTES:
        assert "too large" in str(error)
    else:
        assert error is None and [s.name for s in preset.filters] == ["box"]


@settings(FUZZ)
@given(name=st.one_of(st.text(CHARS, max_size=30),
                      st.sampled_from(["a" * 300, "a" * 300 + ".toml", "x\x00y",
                                                                     "../x", "edge", "."])))
def test_arbitrary_preset_names(name):
    """load_preset(NAME) for any name: a shipped preset or a PresetError, even for names the OS
    refuses (regression: 300 characters raised OSError 'File name too long')."""
    preset, error = _attempt(load_preset, name)
    if error is None:
        assert preset.filters
    else:
        message = _check_message(error, PresetError)
        assert name in message or repr(name) in message, message


def test_shipped_presets_survive_the_writer():
    """The TOML writer above round-trips the shipped presets, so its documents mean what they
    say."""
    for path in SHIPPED:
        data = tomllib.loads(path.read_text())
        assert tomllib.loads(_toml_document(data)) == data
    assert math.isnan(tomllib.loads(_toml_document({"x": float("nan")}))["x"])
