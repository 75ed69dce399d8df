"""Where kernels come from without a GPU in sight: NVRTC compiles every kernel file, prebuilt
fatbins are found by their source and never served stale, the per-user cache is written whole,
and ``info`` / ``install-cuda`` say what is missing. Compiling needs no GPU, only NVRTC or nvcc;
tests that need one skip with the reason where it is absent.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from streamconv.gpu import (setup as cuda_setup, cache as kernel_cache, loader as kernel_loader,
                            nvrtc, prebuilt)
from streamconv.backends import catalogue as kernel_catalogue, prebuild
from streamconv.errors import BackendUnavailableError, KernelCompileError
from streamconv.gpu.loader import kernel_source, with_defines

from helpers.cli import REPO

NVRTC = nvrtc.find()
needs_nvrtc = pytest.mark.skipif(NVRTC is None, reason='no NVRTC (pip install "streamconv[cuda]")')
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None,
                                reason="nvcc not on PATH (no CUDA toolkit)")


def _one_per_kernel_file() -> list[tuple[str, dict]]:
    """A catalogue specialisation of each kernel file, the richest (most macros) of each."""
    chosen: dict[str, dict] = {}
    for name, defines in kernel_catalogue.catalogue():
        if len(defines) >= len(chosen.get(name, {})):
            chosen[name] = defines
    return sorted(chosen.items())


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A kernel cache of this test's own."""
    monkeypatch.setenv("STREAMCONV_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_catalogue_covers_every_kernel_file_the_backend_uses():
    names = {name for name, _ in kernel_catalogue.catalogue()}
    assert {"conv2d", "conv2d_tc", "conv3_tc", "sepconv", "sepconv_tc", "colour", "hold", "nn_conv",
            "nn_ops"} <= names
    assert len(kernel_catalogue.catalogue()) >= 150


@needs_nvrtc
@pytest.mark.parametrize("name, defines", _one_per_kernel_file(), ids=lambda v: v
                         if isinstance(v, str) else "")
def test_nvrtc_compiles_each_kernel_file(name, defines, cache):
    image = kernel_loader.compile_image(name, defines, "sm_90", "nvrtc")
    assert image.origin == "nvrtc"
    assert image.data[:4] == b"\x7fELF"  # a cubin: machine code, no PTX left for the driver
    assert len(list(cache.glob("*.cubin"))) == 1


@needs_nvrtc
def test_nvrtc_error_carries_its_log(cache):
    with pytest.raises(KernelCompileError) as info:
        kernel_loader.compile_image("conv2d", {"RADIUS": "not_a_number", "CHANNELS": 3}, "sm_90",
                                    "nvrtc")
    message = str(info.value)
    assert "NVRTC" in message and "conv2d[CHANNELS=3,RADIUS=not_a_number]" in message and \
        "error" in message
    assert not cache.exists() or not list(cache.glob("*.cubin"))  # nothing cached for a failure


@needs_nvrtc
def test_parallel_first_compiles_each_find_nvrtc(tmp_path):
    """Compiles started at once in a fresh process, each the first to import cuda-core (whose
    first import is not thread-safe): every one compiles."""
    script = textwrap.dedent("""
        import concurrent.futures as futures
        from streamconv.gpu import loader as kernel_loader
        archs = ["sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120", "sm_87"]
        with futures.ThreadPoolExecutor(8) as pool:
            images = list(pool.map(
                lambda arch: kernel_loader.compile_image("hold", {}, arch, "nvrtc"), archs))
        print(sum(image.data[:4] == b"\\x7fELF" for image in images))
    """)
    env = {**os.environ, "STREAMCONV_CACHE_DIR": str(tmp_path),
           "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env,
                          timeout=300)
    assert done.returncode == 0 and done.stdout.split() == ["8"], done.stderr[-2000:]


@needs_nvrtc
def test_nvrtc_result_is_cached_and_reused(cache):
    name, defines = "hold", {}
    first = kernel_loader.compile_image(name, defines, "sm_80", "nvrtc").data
    (entry,) = cache.glob("*.cubin")
    entry.write_bytes(b"\x7fELF marker")  # what is read back must be the cache's, not a recompile
    assert kernel_loader.compile_image(name, defines, "sm_80", "nvrtc").data == b"\x7fELF marker"
    entry.unlink()
    assert kernel_loader.compile_image(name, defines, "sm_80", "nvrtc").data == first


@needs_nvrtc
def test_unwritable_cache_still_compiles(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("the cache folder cannot be made under a file, not even by root")
    monkeypatch.setenv("STREAMCONV_CACHE_DIR", str(blocker / "kernels"))
    assert kernel_loader.compile_image("hold", {}, "sm_90", "nvrtc").data[:4] == b"\x7fELF"


def test_cache_entries_are_written_whole(cache):
    kernel_cache.write("k" * 32, "sm_90", "nvrtc13.0", b"x" * 1000)
    assert kernel_cache.read("k" * 32, "sm_90", "nvrtc13.0") == b"x" * 1000
    # no temporary left
    assert [p.name for p in cache.iterdir()] == [f"{'k' * 32}-sm_90-nvrtc13.0.cubin"]
    assert kernel_cache.entries() == 1


def test_no_compiler_names_the_fix(monkeypatch):
    monkeypatch.setenv("STREAMCONV_COMPILER", "none")
    with pytest.raises(BackendUnavailableError, match="STREAMCONV_COMPILER=none"):
        kernel_loader.compile_image("hold", {}, "sm_90", "none")
    monkeypatch.setenv("STREAMCONV_COMPILER", "gcc")
    with pytest.raises(BackendUnavailableError, match="known: auto, nvrtc, nvcc, none"):
        kernel_loader.chosen_compiler()
    monkeypatch.setattr(nvrtc, "loaded", lambda: None)
    monkeypatch.setattr(shutil, "which", lambda _name: None)
    with pytest.raises(BackendUnavailableError, match=r'pip install "streamconv\[cuda'):
        kernel_loader.compile_image("hold", {}, "sm_90", "auto")


def test_nvrtc_newer_than_the_driver_is_not_used(monkeypatch):
    thirteen = nvrtc.Nvrtc("/site/nvidia/cu13/lib/libnvrtc.so.13", (13, 0))
    monkeypatch.setattr(nvrtc, "loaded", lambda: thirteen)
    assert nvrtc.find(12) is None and nvrtc.find(13) is thirteen and nvrtc.find(None) is thirteen


@needs_nvrtc
def test_nvrtc_is_the_one_cuda_bindings_found():
    assert NVRTC.version[0] >= 12 and os.path.basename(NVRTC.path).startswith("libnvrtc.so.")
    assert NVRTC.describe() == f"NVRTC {NVRTC.version[0]}.{NVRTC.version[1]} ({NVRTC.path})"


FATBIN_MAGIC = b"\x50\xed\x55\xba"


@pytest.fixture
def small_prebuilt(tmp_path, monkeypatch):
    """A prebuilt folder of two specialisations for sm_80 and sm_90, put where the loader looks."""
    conv = next(defines for name, defines in kernel_catalogue.catalogue() if name == "conv2d")
    folder = tmp_path / "prebuilt"
    prebuild.build(folder, ("sm_80", "sm_90"), jobs=2, progress=lambda _line: None,
                   specialisations=[("hold", {}), ("conv2d", conv)])
    monkeypatch.setattr(prebuilt, "prebuilt_dir", lambda: folder)
    prebuilt.read_index.cache_clear()
    yield folder
    prebuilt.read_index.cache_clear()


@needs_nvcc
def test_prebuilt_found_by_source_never_stale(small_prebuilt):
    text = with_defines(kernel_source("hold"), {})
    assert prebuilt.lookup("hold", text, "sm_90")[:4] == FATBIN_MAGIC
    assert prebuilt.lookup("hold", text, "sm_86") is not None  # sm_80 machine code runs there
    assert prebuilt.lookup("hold", text, "sm_75") is None  # older than every image in it
    assert prebuilt.lookup("hold", text + "\n__device__ int edited_since_the_build;\n",
                           "sm_90") is None
    # a comment edited since the build keeps the key
    commented = text.replace("\n", " (reworded since the build)\n", 1)
    assert commented != text and prebuilt.lookup("hold", commented, "sm_90")[:4] == FATBIN_MAGIC
    # nvcc 13's code, CUDA 12 driver
    assert prebuilt.lookup("hold", text, "sm_90", driver_major=12) is None
    index = json.loads((small_prebuilt / "index.json").read_text())
    assert len(index["entries"]) == 2 and index["archs"] == ["sm_80", "sm_90"]
    # staging gone
    assert not [p for p in small_prebuilt.parent.iterdir() if p.name.startswith(".prebuilt-")]


@needs_nvcc
def test_loader_prefers_prebuilt_unless_told_not_to(small_prebuilt, monkeypatch, cache):
    assert kernel_loader.kernel_image("hold", {}, "sm_90").origin == "prebuilt"
    monkeypatch.setenv("STREAMCONV_PREBUILT", "0")
    if NVRTC is not None:
        assert kernel_loader.kernel_image("hold", {}, "sm_90").origin == "nvrtc"


@needs_nvcc
def test_unreadable_index_is_ignored(small_prebuilt, caplog):
    (small_prebuilt / "index.json").write_text("{ torn")
    prebuilt.read_index.cache_clear()
    assert prebuilt.lookup("hold", with_defines(kernel_source("hold"), {}), "sm_90") is None
    assert "ignoring the prebuilt kernels' index" in caplog.text


def test_prebuild_never_replaces_a_folder_of_something_else(tmp_path, capsys):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "notes.txt").write_text("keep me")
    if shutil.which("nvcc") is None:
        assert prebuild.main(["--out", str(folder)]) == 1
        assert "nvcc not found" in capsys.readouterr().err
    else:
        with pytest.raises(RuntimeError, match="not a prebuilt-kernel folder"):
            prebuild._swap_in(tmp_path / "staging", folder)
    assert (folder / "notes.txt").read_text() == "keep me"


def test_info_names_every_kernel_source_and_fix(cli):
    result = cli("info")
    assert result.returncode == 0, result.stderr
    for line in ("driver ", "binding    ", "kernels:", "  prebuilt: ", "  nvrtc: ", "  nvcc: ",
                 "  compiles with: ", "  cache: "):
        assert line in result.stdout
    chosen = next(line for line in result.stdout.splitlines() if line.startswith("binding "))
    assert "(chosen: " in chosen
    pycuda_missing = "pycuda (STREAMCONV_BINDING=pycuda): not installed" in result.stdout
    if pycuda_missing and "driver     CUDA" in result.stdout:
        assert "fix: streamconv install-cuda" in result.stdout


def test_install_cuda_without_a_driver_says_so(cli):
    if cuda_setup.find_driver() is not None:
        pytest.skip("an NVIDIA driver is installed here")
    result = cli("install-cuda", "--no-index")
    assert result.returncode == 7
    assert "no NVIDIA driver found" in result.stderr


def test_pycuda_is_pointed_at_the_wheels_headers(tmp_path):
    for layout in ("cu13", "cuda_runtime"):
        (tmp_path / layout / "nvidia" / layout / "include").mkdir(parents=True)
    (tmp_path / "cu13" / "nvidia" / "cu13" / "include" / "cuda.h").write_text("")
    (tmp_path / "cu13" / "nvidia" / "cu13" / "include" / "cudaProfiler.h").write_text("")
    assert cuda_setup.header_dirs([str(tmp_path / "cu13")]) == [str(
        tmp_path / "cu13/nvidia/cu13/include")]
    with pytest.raises(FileNotFoundError, match="cuda.h not found"):
        cuda_setup.header_dirs([str(tmp_path / "cuda_runtime")])
    config: dict = {}
    exec(cuda_setup.siteconf(["/h1", "/h2"], "/links"), config)  # PyCUDA reads it as Python
    assert config["CUDA_INC_DIR"] == ["/h1", "/h2"] and config["CUDADRV_LIB_DIR"] == ["/links"]
    assert config["CUDA_ENABLE_CURAND"] is False and config["CUDA_ROOT"] is None


def test_wheels_follow_the_drivers_cuda_version():
    assert cuda_setup.wheel_requirements(cuda_setup.Driver(13000, "libcuda.so.1")) == [
        "nvidia-cuda-runtime==13.0.*", "nvidia-cuda-profiler-api==13.0.*",
        "nvidia-cuda-nvrtc==13.*", "cuda-core>=1.2,<2", "cuda-bindings>=13,<14"]
    twelve = cuda_setup.wheel_requirements(cuda_setup.Driver(12080, "libcuda.so.1"))
    assert "cuda-bindings>=12.9,<13" in twelve
    assert cuda_setup.wheel_requirements(cuda_setup.Driver(12040,
                                                           "libcuda.so.1"))[0] == "nvidia-cuda-runtime-cu12==12.4.*"
