"""The kernel loader's parts that need no GPU: finding sources, defines, names and launch grids."""

from __future__ import annotations

import pytest

from streamconv.gpu import loader as kernel_loader, prebuilt
from streamconv.backends.families import register_blocked
from streamconv.errors import BackendUnavailableError


def test_source_found_beside_the_package_not_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    text = kernel_loader.kernel_source("conv2d")
    assert 'extern "C"' in text and "conv2d_u8" in text and "c_taps" in text
    with pytest.raises(BackendUnavailableError, match="missing from the installation"):
        kernel_loader.kernel_source("no_such_kernel")


def test_comments_are_stripped_outside_literals_only():
    text = ('int a; // gone\nint b; /* gone\n too */ int c;\n'
            'const char *s = "// kept /* kept */ \\" // kept";\nchar q = \'"\'; // gone\n'
            '// a line comment continued \\\n still comment\nint d;\n')
    assert prebuilt.strip_comments(text) == (
        'int a; \nint b;   int c;\nconst char *s = "// kept /* kept */ \\" // kept";\n'
        'char q = \'"\'; \n\nint d;\n')


def test_key_ignores_comments_and_follows_code():
    text = kernel_loader.with_defines(kernel_loader.kernel_source("conv2d"), {"RADIUS": 2})
    key = prebuilt.source_key("conv2d", text)
    first_comment = text.index("//")
    reworded = text[:first_comment] + "// reworded" + text[text.index("\n", first_comment):]
    assert reworded != text and prebuilt.source_key("conv2d", reworded) == key
    inline = text.replace('extern "C" {', 'extern "C"/* one space to the compiler */{', 1)
    assert inline != text and prebuilt.source_key("conv2d", inline) == key
    longer = text.replace("\n", "\n// a comment grown by a line\n\n", 1)
    assert prebuilt.source_key("conv2d", longer) == key
    assert prebuilt.source_key("conv2d", text.replace("RADIUS 2", "RADIUS 3")) != key
    assert prebuilt.source_key("conv2d", text + "\n__device__ int added;\n") != key
    assert prebuilt.source_key("sepconv", text) != key


def test_defines_are_sorted_and_prepended():
    source = kernel_loader.with_defines("body", {"RADIUS": 2, "BORDER": 1, "CHANNELS": 3})
    assert source == "#define BORDER 1\n#define CHANNELS 3\n#define RADIUS 2\nbody"


def test_specialisation_names_show_border_by_name():
    name = kernel_loader.specialisation_name("conv2d", {"RADIUS": 2, "BORDER": 2, "BANKS": 1})
    assert name == "conv2d[BANKS=1,BORDER=reflect101,RADIUS=2]"


@pytest.mark.parametrize("radius", range(16))
@pytest.mark.parametrize("channels", [1, 3, 4])
def test_geometry_covers_every_byte(radius, channels):
    geometry = register_blocked.conv2d_geometry(radius, channels)
    assert geometry.out_x % 4 == 0 and (geometry.block_x * geometry.out_x) % 16 == 0
    for height, width in [(1, 1), (49, 65), (1080, 1920), (2160, 3840)]:
        row_bytes = width * channels
        gx, gy, gz = geometry.grid(row_bytes, height)
        assert gz == 1
        assert gx * geometry.block_x * geometry.out_x >= row_bytes > (
            gx - 1) * geometry.block_x * geometry.out_x
        assert gy * geometry.block_y * geometry.out_y >= height > (
            gy - 1) * geometry.block_y * geometry.out_y


def test_conv2d_defines_name_every_macro():
    defines = register_blocked.conv2d_defines(1, 3, 2, 2)
    assert {"RADIUS", "CHANNELS", "BORDER", "BANKS", "COMBINE", "BLOCK_X", "BLOCK_Y", "OUT_X",
            "OUT_Y"} == set(defines)
    assert defines["COMBINE"] == 1 and register_blocked.conv2d_defines(1, 3, 2, 1)["COMBINE"] == 0
