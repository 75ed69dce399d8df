"""The CUDA binding seam without a GPU: which binding is chosen, how a launch's arguments are
packed, and what a machine without the driver, with an older one or without a binding is told."""

from __future__ import annotations

import ctypes
import importlib.util
import os
import shutil
import subprocess
import sys

import pytest

from helpers.cli import REPO
from streamconv.gpu import setup as cuda_setup
from streamconv.errors import BackendUnavailableError
from streamconv.gpu import binding

NO_DRIVER = cuda_setup.find_driver() is None


def test_the_default_binding_is_cuda_core_and_the_variable_chooses_another(monkeypatch):
    monkeypatch.delenv("STREAMCONV_BINDING", raising=False)
    assert binding.chosen_name() == "cuda-core"
    monkeypatch.setenv("STREAMCONV_BINDING", "pycuda")
    assert binding.chosen_name() == "pycuda"
    monkeypatch.setenv("STREAMCONV_BINDING", "cupy")
    known = "STREAMCONV_BINDING='cupy'; known: cuda-core, pycuda"
    with pytest.raises(BackendUnavailableError, match=known):
        binding.chosen_name()


def test_select_refuses_an_unknown_binding_and_one_that_is_not_in_use():
    with pytest.raises(BackendUnavailableError, match="unknown CUDA binding 'numba'"):
        binding.select("numba")
    loaded, selected = dict(binding._loaded), binding._selected
    try:
        binding._loaded.clear()
        binding._loaded["pycuda"] = object()  # as if the pycuda binding ran already
        with pytest.raises(BackendUnavailableError, match="the pycuda binding is in use already"):
            binding.select("cuda-core")
        binding.select("pycuda")
        assert binding.chosen_name() == "pycuda"
    finally:
        binding._loaded.clear()
        binding._loaded.update(loaded)
        binding._selected = selected


@pytest.mark.skipif(importlib.util.find_spec("cuda.bindings") is None,
                    reason="cuda-bindings not installed")
def test_launch_arguments_are_packed_once_into_pointers_to_their_values():
    from streamconv.gpu.cuda_core_modules import PackedArguments

    args = (0x7F00_1234_5678, -3, 2**40 + 5, 1 << 63, 1920)
    packed = PackedArguments("PiqQi", args)
    pointers = ctypes.cast(packed.address, ctypes.POINTER(ctypes.c_void_p))
    kinds = (ctypes.c_uint64, ctypes.c_int32, ctypes.c_int64, ctypes.c_uint64, ctypes.c_int32)
    read = [kind.from_address(pointers[k]).value for k, kind in enumerate(kinds)]
    assert read == list(args)
    assert PackedArguments("", ()).address == 0  # no arguments: a NULL array
    with pytest.raises(TypeError, match=r"takes 2 arguments \(Pi\), got 1"):
        PackedArguments("Pi", (1,))


@pytest.mark.skipif(importlib.util.find_spec("cuda.bindings") is None,
                    reason="cuda-bindings not installed")
def test_a_struct_of_pointers_is_one_argument_its_members_in_a_row():
    from streamconv.gpu.cuda_core_modules import PackedArguments

    frames = (0x7F00_0000_1000, 0x7F00_0000_2000, 0)
    packed = PackedArguments("[PPP]Pi", (*frames, 0x7F00_0000_3000, 1920))
    pointers = ctypes.cast(packed.address, ctypes.POINTER(ctypes.c_void_p))
    struct = (ctypes.c_uint64 * 3).from_address(pointers[0])  # the kernel reads 24 bytes here
    assert list(struct) == list(frames)
    assert ctypes.c_uint64.from_address(pointers[1]).value == 0x7F00_0000_3000
    assert ctypes.c_int32.from_address(pointers[2]).value == 1920
    with pytest.raises(TypeError, match=r"takes 5 arguments \(\[PPP\]Pi\), got 4"):
        PackedArguments("[PPP]Pi", frames + (1,))


@pytest.mark.parametrize("signature", ["[PP", "PP]", "[]P", "[P[P]]", "[Pi]"])
def test_a_signature_with_broken_brackets_or_a_narrow_member_is_refused(signature):
    with pytest.raises(ValueError, match="kernel signature"):
        binding.signature_slots(signature)
    assert binding.signature_slots("[PP]Pi") == ("PPPi", (0, 2, 3))


def _info(env: dict) -> str:
    path = f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"
    done = subprocess.run([sys.executable, "-m", "streamconv", "info"], capture_output=True,
                          text=True, env={**os.environ, **env, "PYTHONPATH": path}, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.skipif(not NO_DRIVER, reason="an NVIDIA driver is installed here")
def test_without_a_driver_the_cpu_is_chosen_and_no_install_command_is_suggested(cli, tmp_path):
    from streamconv.gpu.device import cuda_status

    usable, reason = cuda_status(0)
    assert not usable and reason.startswith("no NVIDIA driver (libcuda.so.1 does not load)")
    with pytest.raises(BackendUnavailableError, match="no NVIDIA driver"):
        from streamconv.gpu.device import load_binding
        load_binding("a test")
    done = cli("run", "test:64x48,frames=2", "--filter", "box", "-o", str(tmp_path / "out.mp4"))
    assert done.returncode == 0, done.stderr
    notice = [line for line in done.stderr.splitlines() if "using the cpu backend" in line]
    assert len(notice) == 1 and "no NVIDIA driver" in notice[0], done.stderr
    assert "install" not in notice[0]
    shown = _info({"STREAMCONV_BINDING": "pycuda"})
    assert "cuda: unavailable: no NVIDIA driver" in shown and "install-cuda" not in shown


@pytest.mark.skipif(not NO_DRIVER, reason="an NVIDIA driver is installed here")
def test_the_cuda_core_binding_without_a_driver_says_what_is_missing():
    if importlib.util.find_spec("cuda.bindings") is None:
        pytest.skip("cuda-bindings not installed")
    from streamconv.gpu import cuda_core_binding

    missing = r"no usable NVIDIA driver \(libcuda.so.1 not found"
    with pytest.raises(BackendUnavailableError, match=missing):
        cuda_core_binding.load()


@pytest.mark.skipif(importlib.util.find_spec("pycuda") is not None,
                    reason="PyCUDA is installed here")
def test_a_missing_pycuda_binding_names_the_command_that_builds_it():
    from streamconv.gpu import pycuda_binding

    missing = r"pycuda binding not installed .*streamconv install-cuda"
    with pytest.raises(BackendUnavailableError, match=missing):
        pycuda_binding.load()


@pytest.mark.skipif(shutil.which("cc") is None or importlib.util.find_spec("cuda.bindings") is None,
                    reason="needs a C compiler (for a stub driver) and cuda-bindings")
def test_a_cuda_12_driver_is_told_the_extra_that_suits_it(tmp_path):
    """A driver of CUDA 12.8 (a stub libcuda.so.1 saying so) under cuda-bindings 13: one clear
    message naming the cuda12 extra, from cuda_status and from info."""
    from helpers.libcuda_stub import write_stub

    if not str(__import__("cuda.bindings").bindings.__version__).startswith("13."):
        pytest.skip("cuda-bindings 13 is not the one installed")
    folder = write_stub(tmp_path / "driver", set(), version=12080).parent
    env = {"LD_LIBRARY_PATH": f"{folder}{os.pathsep}{os.environ.get('LD_LIBRARY_PATH', '')}",
           "STREAMCONV_BINDING": "cuda-core"}
    shown = _info(env)
    assert "driver     CUDA 12.8" in shown
    (line,) = [line for line in shown.splitlines() if line.startswith("  cuda: ")]
    assert 'runs CUDA 12.8, older than the installed cuda-bindings 13' in line
    assert 'pip install "streamconv[cuda12]"' in line


@pytest.mark.skipif(importlib.util.find_spec("cuda.bindings") is None,
                    reason="cuda-bindings not installed")
def test_resources_of_a_context_let_go_for_the_last_time_are_not_freed_again(monkeypatch):
    """The driver frees what a primary context held when its last retain goes; pushing it again
    to free a leftover stream would touch freed memory (seen: a segmentation fault)."""
    from streamconv.gpu import cuda_core_driver as driver

    calls = []
    monkeypatch.setitem(driver._RETAINS, 0x5000, 0)  # retained, then let go for the last time
    monkeypatch.setitem(driver._RETAINS, 0x6000, 1)
    assert driver.gone(0x5000) and not driver.gone(0x6000) and not driver.gone(0x7000)
    driver.release(0x5000, calls.append, "stream")
    assert calls == []
