"""Packaging: the wheel carries the CUDA sources and the presets and finds them once installed;
every kernel source compiles with nvcc (when nvcc is on the PATH) for a few specialisations.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import numpy as np
import pytest

from streamconv.bench.timing import HOLD_SOURCE

from helpers.cli import REPO

CUDA_SOURCES = sorted((REPO / "cuda").glob("*/*.cu"))
KERNEL_FILES = {source.stem: source for source in CUDA_SOURCES}
"""Kernel file stem -> its cuda/<owner>/<stem>.cu in the checkout."""


def _setuptools_can_build_here() -> bool:
    """True if this environment's setuptools can build the wheel without an isolated environment."""
    if importlib.util.find_spec("setuptools") is None:
        return False
    from importlib.metadata import version

    def parse(text: str) -> tuple[int, ...]:
        return tuple(int(p) for p in text.split(".")[:2] if p.isdigit())

    # pyproject.toml asks for setuptools>=77 (the license as an SPDX expression), which also
    # carries bdist_wheel itself.
    return parse(version("setuptools")) >= (77,)


def _copy_source_tree(target: Path) -> Path:
    """A clean copy of the checkout (no VCS, caches or build leftovers): building there leaves
    the work tree untouched and keeps stale build/ output out of the wheel."""
    shutil.copytree(REPO, target, ignore=shutil.ignore_patterns(
        ".*", "build", "dist", "*.egg-info", "__pycache__", "media", "*.whl"))
    return target


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """Build the wheel once for this module; returns its path."""
    work = tmp_path_factory.mktemp("wheel")
    source = _copy_source_tree(work / "src")
    out = work / "dist"
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(out), str(source)]
    if _setuptools_can_build_here():
        command.insert(4, "--no-build-isolation")
    result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"{' '.join(command)}\n{result.stdout}\n{result.stderr}"
    wheels = list(out.glob("streamconv-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


@pytest.mark.slow
def test_wheel_contains_kernels_and_presets(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "streamconv/cuda/register_blocked/conv2d.cu" in names
    assert "streamconv/cuda/README.md" in names
    for source in CUDA_SOURCES:  # every kernel family of the checkout ships, in its folder
        assert f"streamconv/cuda/{source.relative_to(REPO / 'cuda').as_posix()}" in names
    for header in sorted((REPO / "cuda").glob("*.cuh")):
        assert f"streamconv/cuda/{header.name}" in names
    presets = sorted((REPO / "pipelines").glob("*.toml"))
    assert presets
    for preset in presets:
        assert f"streamconv/pipelines/{preset.name}" in names
    modules = sorted(p.relative_to(REPO).as_posix() for p in (REPO / "streamconv").rglob("*.py"))
    assert "streamconv/nn/__init__.py" in modules
    for module in modules:  # every module of the checkout, subpackages included
        assert module in names
    assert not any(name.startswith(("tests/", "media/", "build/")) for name in names)
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert "streamconv = streamconv.launch:main" in zipfile.ZipFile(wheel).read(
        entry_points).decode()


def pyproject_version() -> str:
    """The one place the version is written: pyproject.toml's [project] table."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    return tomllib.loads((REPO / "pyproject.toml").read_text(
        encoding="utf-8"))["project"]["version"]


def test_a_checkout_reports_the_version_pyproject_declares(cli):
    import streamconv

    assert streamconv.__version__ == pyproject_version()
    assert cli("--version").stdout.strip() == f"streamconv {pyproject_version()}"


def test_a_copy_neither_installed_nor_checked_out_says_its_version_is_unknown(tmp_path):
    from streamconv.version import UNKNOWN, checkout_version

    assert checkout_version(tmp_path) is None
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "other"\nversion = "9.9"\n')
    assert checkout_version(tmp_path) is None  # another project's pyproject.toml
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "streamconv"\nversion = "2.3.4"\n')
    assert checkout_version(tmp_path) == "2.3.4"
    copy = tmp_path / "elsewhere"
    shutil.copytree(REPO / "streamconv", copy / "streamconv",
                    ignore=shutil.ignore_patterns("__pycache__"))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(copy)
    # -S: no site-packages, where an installed streamconv's metadata would answer
    run = subprocess.run([sys.executable, "-S", "-c",
                          "import streamconv; print(streamconv.__version__)"],
                         capture_output=True, text=True, cwd=copy, env=env, timeout=60)
    assert run.stdout.strip() == UNKNOWN, run.stderr


TREE_INDEX = REPO / "cuda" / "prebuilt" / "index.json"


@pytest.mark.slow
@pytest.mark.skipif(not TREE_INDEX.is_file(),
                    reason="no prebuilt kernels in this checkout (python -m "
                           "streamconv.prebuild --out cuda/prebuilt)")
def test_wheel_carries_the_prebuilt_kernels(wheel):
    archive = zipfile.ZipFile(wheel)
    index = json.loads(archive.read("streamconv/cuda/prebuilt/index.json"))
    assert index == json.loads(TREE_INDEX.read_text())
    names = set(archive.namelist())
    assert len(index["entries"]) >= 150
    for entry in index["entries"].values():
        name = f"streamconv/cuda/prebuilt/{entry['file']}"
        assert name in names, entry["label"]
        assert archive.read(name)[:4] == b"\x50\xed\x55\xba", entry["label"]  # a fatbin
        assert "sm_90" in entry["archs"] and "sm_80" in entry["archs"], entry["label"]
    assert {"sm_75", "sm_80", "sm_90"} <= set(index["archs"])


@pytest.mark.slow
def test_installed_wheel_finds_its_data(wheel, tmp_path):
    target = tmp_path / "site"
    result = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index",
                             "--target", str(target), str(wheel)],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    script = textwrap.dedent("""
        import json
        import streamconv
        from streamconv.files.resources import data_dir
        from streamconv.chain.presets import list_presets, load_preset
        from streamconv.gpu import prebuilt
        from streamconv.gpu.loader import kernel_paths
        cuda = data_dir("cuda")
        print(json.dumps({
            "package": streamconv.__file__,
            "version": streamconv.__version__,
            "cuda": str(cuda),
            "cuda_files": sorted(p.name for p in cuda.iterdir()),
            "kernels": sorted(kernel_paths()),
            "pipelines": str(data_dir("pipelines")),
            "presets": list_presets(),
            "edge_stages": len(load_preset("edge").filters),
            "prebuilt": 0 if prebuilt.read_index() is None else len(prebuilt.read_index().entries),
        }))
    """)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(target)
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         cwd=elsewhere, env=env, timeout=120)
    assert run.returncode == 0, run.stderr
    found = json.loads(run.stdout)
    root = target.resolve()
    for key in ("package", "cuda", "pipelines"):
        assert Path(found[key]).resolve().is_relative_to(root), (key, found[key], root)
    assert found["version"] == pyproject_version()  # from the installed copy's metadata
    assert "conv_common.cuh" in found["cuda_files"]
    assert found["kernels"] == sorted(KERNEL_FILES)  # the loader finds each in its folder
    assert "README.md" in found["cuda_files"]
    assert found["presets"] == sorted(p.stem for p in (REPO / "pipelines").glob("*.toml"))
    assert found["edge_stages"] >= 1
    if TREE_INDEX.is_file():  # the installed copy finds its own prebuilt kernels
        assert found["prebuilt"] == len(json.loads(TREE_INDEX.read_text())["entries"])
    # the command runs from the installed copy too
    cli = subprocess.run([sys.executable, "-m", "streamconv", "filters"], capture_output=True,
                         text=True, cwd=elsewhere, env=env, timeout=120)
    assert cli.returncode == 0, cli.stderr
    for name in found["presets"]:
        assert name in cli.stdout


# ---------------------------------------------------------------- nvcc

NVCC = shutil.which("nvcc")
needs_nvcc = pytest.mark.skipif(NVCC is None,
                                reason="nvcc not on PATH (the CUDA toolkit is not installed)")

def _stage(name: str):
    from streamconv.chain.filters import COMBINE_MAGNITUDE, FilterStage, parse_filter, validate_taps

    if name == "bank31":  # edge's combination on the largest taps
        taps = validate_taps(np.arange(31 * 31, dtype=np.float64).reshape(31, 31) / 1e5)
        return FilterStage("edge", {}, (taps, taps.T.copy()), combine=COMBINE_MAGNITUDE)
    return parse_filter(name)


SPECIALISATIONS = {  # filter, frame channels, border code
    "r1-c3-reflect101": ("box:size=3", 3, 2),
    "r15-c4-zero-magnitude": ("bank31", 4, 0),
    "r7-c1-replicate-separable": ("gaussian:sigma=2,size=15", 1, 1),
    "r2-c3-reflect101": ("box:size=5", 3, 2),  # tensor-core with ldmatrix, rows shifted by 8 bytes
    "r2-c1-replicate": ("box:size=5", 1, 1),  # ... by 4 bytes
    "scale-up-c3": ("scale:w=150,h=100,kernel=lanczos3", 3, 2),  # resample.cu's scale
    "crop-c4": ("crop:x=3,y=5,w=40,h=21", 4, 0),  # ... and its crop
    "t5-c3-time": ("tmean:frames=5", 3, 2),  # temporal.cu
    "t3-r1-c4-zero": ("conv3d:taps=1,0,1;0,2,0;1,0,1|0,1,0;1,1,1;0,1,0|1,0,1;0,2,0;1,0,1",
                      4, 0),  # conv3d_tc.cu, and conv3d.cu without int8 tensor cores
    "t7-r2-c3-separable": ("tdenoise", 3, 2),  # conv3d.cu, time x space
}


def _specialisations(name: str) -> list[tuple[Path, dict]]:
    """Every (kernel file, defines) the CUDA backend would compile for this case, any variant."""
    from streamconv.backends import plan as planning

    spec, channels, border = SPECIALISATIONS[name]
    stage = _stage(spec)
    found = {}
    for variant in planning.VARIANTS:
        for tensor_cores in (True, False):
            try:
                plan = planning.plan_stage(stage, variant, tensor_cores=tensor_cores).kernel_plan(
                    (64, 64, channels), border)
            except ValueError:  # separable for taps that are not rank 1, tensor-core without
                continue
            found[(plan.source, tuple(sorted(plan.defines.items())))] = None
    return [(KERNEL_FILES[source], dict(items)) for source, items in found]


def _nvcc(source: Path, defines: dict[str, int], *extra: str) -> subprocess.CompletedProcess:
    # the shared headers' folder on the include path, as the loader gives it
    command = [NVCC, "-arch=sm_90", "-std=c++17", "-O3", "-I", str(REPO / "cuda"), *extra,
               *(f"-D{key}={value}" for key, value in defines.items()), "-c", "-o", os.devnull,
               str(source)]
    return subprocess.run(command, capture_output=True, text=True, timeout=300)


def test_kernel_sources_exist():
    assert (REPO / "cuda" / "register_blocked" / "conv2d.cu").is_file(), \
        "cuda/register_blocked/conv2d.cu is missing"


@needs_nvcc
@pytest.mark.parametrize("name", list(SPECIALISATIONS))
def test_kernels_compile_with_nvcc(name):
    _assert_compiles(_specialisations(name))


def _assert_compiles(specialisations: list[tuple[Path, dict]]) -> None:
    for source, defines in specialisations:
        result = _nvcc(source, defines)
        assert result.returncode == 0, f"{source.name} {defines}:\n{result.stdout}{result.stderr}"


NN_CASES = {  # (N, C, H, W), (M, C, K, K), stride, padding
    "c64-m64-k3": ((1, 64, 1080, 1920), (64, 64, 3, 3), 1, 1),
    "c3-m8-k7-s2": ((1, 3, 64, 64), (8, 3, 7, 7), 2, 3),
    "c2-m4-k31": ((1, 2, 64, 64), (4, 2, 31, 31), 1, 15),
}


def _nn_specialisations(name: str) -> list[tuple[Path, dict]]:
    """Every (kernel file, defines) streamconv.nn would compile for this conv2d call."""
    from streamconv.nn.gpu import gemm_defines, tf32_defines, tiled_defines
    from streamconv.nn.shapes import conv2d_shape

    x_shape, w_shape, stride, padding = NN_CASES[name]
    shape = conv2d_shape(x_shape, w_shape, None, stride, padding)
    return [(KERNEL_FILES["nn_conv"], tiled_defines(shape)),
            (KERNEL_FILES["nn_conv"], {"DIRECT_TILE": 16}),
            (KERNEL_FILES["gemm"], gemm_defines(shape.m)), (KERNEL_FILES["nn_ops"], {}),
            *([(KERNEL_FILES["conv_tf32"], tf32_defines(shape))] if tf32_defines(shape)
              else [])]


@needs_nvcc
@pytest.mark.parametrize("name", list(NN_CASES))
def test_nn_kernels_compile_with_nvcc(name):
    _assert_compiles(_nn_specialisations(name))


def _colour_specialisations() -> list[tuple[Path, dict]]:
    """colour.cu for every matrix and range a yuv420p stream can carry."""
    from streamconv.frames.colour import ColourTags
    from streamconv.frames.yuv import YuvLayout

    layouts = {YuvLayout(2, 2, ColourTags(space), full) for space in (1, 2, 4, 5, 7, 9)
               for full in (False, True)}
    return [(KERNEL_FILES["colour"], layout.kernel_defines) for layout in layouts]


@needs_nvcc
def test_colour_kernels_compile_with_nvcc():
    _assert_compiles(_colour_specialisations())


def test_every_kernel_file_is_used():
    used = {source for name in SPECIALISATIONS for source, _ in _specialisations(name)}
    used |= {source for name in NN_CASES for source, _ in _nn_specialisations(name)}
    used |= {source for source, _ in _colour_specialisations()}
    used.add(KERNEL_FILES[HOLD_SOURCE])  # streamconv bench's
    assert used == set(CUDA_SOURCES)


def _owners() -> dict[str, object]:
    """cuda/'s folder -> the module whose ``SOURCES`` declares its kernel files."""
    from streamconv.backends import plan
    from streamconv.backends.families import resample, temporal
    from streamconv.bench import timing
    from streamconv.frames import yuv
    from streamconv.nn import gpu as nn_gpu

    families = (*plan.FAMILIES, resample, temporal)
    return {**{family.__name__.rsplit(".", 1)[1]: family for family in families},
            "nn": nn_gpu, "frames": yuv, "bench": timing}


def test_each_folder_holds_the_kernel_files_its_owner_declares():
    from streamconv.backends import prebuild

    folders = {source.parent.name for source in CUDA_SOURCES}
    owners = _owners()
    assert folders == set(owners)
    for folder, owner in owners.items():
        files = {source.stem for source in (REPO / "cuda" / folder).glob("*.cu")}
        assert set(owner.SOURCES) == files, folder
        assert set(owner.SOURCES.values()) <= set(prebuild.ARCHS), folder
    assert len(KERNEL_FILES) == len(CUDA_SOURCES)  # a stem names one file
    # the shared headers sit beside the folders, where every compile's include path points
    includes = {line.split('"')[1] for source in CUDA_SOURCES
                for line in source.read_text().splitlines() if line.startswith("#include")}
    assert includes and all((REPO / "cuda" / header).is_file() for header in includes)


def test_prebuild_builds_each_file_from_the_arch_its_owner_declares():
    from streamconv.backends import prebuild

    for owner in _owners().values():
        for stem, oldest in owner.SOURCES.items():
            built = prebuild.archs_for(stem, prebuild.ARCHS)
            assert built == [a for a in prebuild.ARCHS if int(a[3:]) >= int(oldest[3:])], stem
    assert prebuild.archs_for("conv2d_tc", prebuild.ARCHS)[0] == "sm_80"
    assert prebuild.archs_for("sepconv", prebuild.ARCHS)[0] == "sm_75"


@needs_nvcc
def test_kernels_compile_alone_with_their_defaults():
    """The README's by-hand check: each file compiles with no macros given."""
    assert CUDA_SOURCES, "no cuda/*/*.cu to compile"
    for source in CUDA_SOURCES:
        result = _nvcc(source, {})
        assert result.returncode == 0, f"{source.name}:\n{result.stdout}{result.stderr}"


@needs_nvcc
def test_conv2d_rejects_an_unsupported_radius():
    source = KERNEL_FILES["conv2d"]
    result = _nvcc(source, {"RADIUS": 16, "CHANNELS": 3, "BORDER": 2})
    assert result.returncode != 0
    assert "RADIUS must be 0..15" in result.stdout + result.stderr
