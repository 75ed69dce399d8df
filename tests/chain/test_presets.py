"""Pipeline presets: the shipped ones load through the registry; bad ones are refused with
reasons."""

from __future__ import annotations

import pytest

from streamconv.errors import PresetError
from streamconv.chain.presets import list_presets, load_preset


def test_shipped_presets_load():
    names = list_presets()
    assert {"edge", "blur", "sharpen", "emboss"} <= set(names)
    for name in names:
        preset = load_preset(name)
        assert preset.description and preset.filters
    assert [f.name for f in load_preset("edge").filters] == ["gaussian", "edge"]
    assert load_preset("emboss").border == "replicate"


@pytest.mark.parametrize("text, message", [
    ('description = "x"\n', "needs one or more [[filter]]"),
    ('colour = 1\n[[filter]]\nname = "box"\n', "unknown key 'colour'"),
    ('border = "wrap"\n[[filter]]\nname = "box"\n', "unknown border mode 'wrap'"),
    ('border = 3\n[[filter]]\nname = "box"\n', "border must be a string"),
    ('[[filter]]\nsize = 3\n', "filter 1 needs name"),
    ('[[filter]]\nname = "box"\nsize = "big"\n', "filter 1: box: size: expected an integer"),
    ('[[filter]]\nname = "box"\nsize = 3.5\n', "expected an integer"),
    ('[[filter]]\nname = "gaussian"\nsigma = nan\n', "finite number"),
    ('[[filter]]\nname = "box"\n[[filter]]\nname = "blurry"\n',
     "filter 2: unknown filter 'blurry'"),
    ('[[filter]]\nname = "custom"\ntaps = "1,2;3"\n', "rows have different lengths"),
    ('[[filter]\nname = "box"\n', "not valid TOML"),
])
def test_bad_presets_are_refused(tmp_path, text, message):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(PresetError) as info:
        load_preset(path)
    assert message in str(info.value)


def test_unknown_and_missing_presets(tmp_path):
    with pytest.raises(PresetError, match="unknown preset 'nope'; known presets: blur"):
        load_preset("nope")
    with pytest.raises(PresetError, match="preset file not found"):
        load_preset(tmp_path / "missing.toml")
    huge = tmp_path / "huge.toml"
    huge.write_text("# " + "x" * 70000 + "\n")
    with pytest.raises(PresetError, match="too large"):
        load_preset(huge)
