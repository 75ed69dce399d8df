"""``streamconv info``: versions, the GPU and its kernels, the codecs, each missing piece named
with the one command that fixes it."""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import platform
import shutil
import sys

import cv2  # (before av: see streamconv.io.sinks.display.check_import_order)
import av
import numpy

from .. import __version__
from ..gpu import (setup as cuda_setup, cache as kernel_cache, loader as kernel_loader, nvrtc,
                   prebuilt)
from ..backends import cuda_status
from ..gpu import binding
from ..io.ffmpeg.encoder_check import hardware_encoders
from ..io.sources.nvdec.caps import NvdecUnsupported, decoder_table, nvdec_module

PACKAGES = {"cuda-core": ("cuda-core", "cuda-bindings"), "pycuda": ("pycuda",)}
"""The packages each binding runs on, whose versions info shows."""


def cmd_info(_args: argparse.Namespace) -> int:
    """``streamconv info``: versions and backend availability."""
    print(f"streamconv {__version__}")
    print(f"python     {platform.python_version()} ({sys.executable})")
    print(f"numpy      {numpy.__version__}")
    print(f"av         {av.__version__} (FFmpeg libavcodec "
          f"{'.'.join(map(str, av.library_versions['libavcodec']))})")
    print(f"opencv     {cv2.__version__}")
    arch = _print_gpu()
    print("backends:")
    print("  cpu: available (NumPy + OpenCV reference)")
    usable, reason = cuda_status(0)
    print(f"  cuda: {'available: ' if usable else 'unavailable: '}{reason}")
    _print_kernels(arch)
    _print_codecs(usable)
    return 0


def _print_gpu() -> str | None:
    """The driver and binding lines; device 0's architecture (``sm_90``) where both work."""
    driver = cuda_setup.find_driver()
    missing = "not found (libcuda.so.1 does not load; install the NVIDIA driver)"
    print(f"driver     {driver.describe() if driver else missing}")
    try:
        chosen = binding.chosen_name()
    except Exception as exc:  # a bad STREAMCONV_BINDING: say so rather than fail info
        print(f"binding    {exc}")
        return None
    how = binding.VARIABLE if os.environ.get(binding.VARIABLE) else "the default"
    for name in sorted(binding.BINDINGS, key=lambda each: each != chosen):
        versions = _versions(name)
        fix = f"not installed (fix: {binding.INSTALL[name]})" if driver else "not installed"
        label = (f"{name} (chosen: {how})" if name == chosen
                 else f"{name} ({binding.VARIABLE}={name})")
        print(f"{'binding' if name == chosen else '':<11}{label}: {versions or fix}")
    if driver is None:
        return None
    try:
        major, minor = binding.binding().device(0).compute_capability
    except Exception:  # no GPU, no binding or a broken driver: cuda_status says which below
        return None
    return f"sm_{major}{minor}"


def _versions(name: str) -> str | None:
    """``cuda-core 1.2.2, cuda-bindings 13.5.0``: the installed packages of binding ``name``, or
    None when one is missing (nothing is imported)."""
    try:
        return ", ".join(f"{package} {importlib.metadata.version(package)}"
                         for package in PACKAGES[name])
    except importlib.metadata.PackageNotFoundError:
        return None


def _print_kernels(arch: str | None) -> None:
    """Where kernels come from here: prebuilt, NVRTC, nvcc, and the cache."""
    print("kernels:")
    major = kernel_loader.driver_cuda_major()
    shown = (prebuilt.summary(arch, major) if kernel_loader.prebuilt_enabled()
             else "not used (STREAMCONV_PREBUILT=0)")
    print(f"  prebuilt: {shown}")
    found = kernel_loader.find_nvrtc()
    hint = nvrtc.INSTALL_HINT.get(major or 13, nvrtc.INSTALL_HINT[13])
    print(f"  nvrtc: {found.describe() if found else f'not found (fix: {hint})'}")
    nvcc = (shutil.which('nvcc')
            or 'not on PATH (not needed: NVRTC compiles what is not prebuilt)')
    print(f"  nvcc: {nvcc}")
    try:
        compiler = kernel_loader.chosen_compiler()
    except Exception as exc:  # a bad STREAMCONV_COMPILER: say so rather than fail info
        print(f"  compiler: {exc}")
        return
    using = kernel_loader.usable_compiler(compiler)
    shown = kernel_loader.compiler_label(
        using) if using else f"none ({kernel_loader.missing_compiler_hint(compiler)})"
    print(f"  compiles with: {shown} "
          f"(STREAMCONV_COMPILER={os.environ.get('STREAMCONV_COMPILER', 'auto')})")
    print(f"  cache: {kernel_cache.cache_dir()} ({kernel_cache.entries()} kernels)")


def _print_codecs(gpu: bool) -> None:
    """The decoders (libavcodec, NVDEC's capabilities on device 0) and the NVENC encoders."""
    print("decoders:")
    print("  cpu: libavcodec (every codec of this FFmpeg build)")
    try:
        nvdec_module()
        rows = decoder_table(0) if gpu else []
        print(f"  nvdec: {_nvdec_summary(rows) if gpu else 'unavailable: no usable GPU'}")
    except NvdecUnsupported as exc:
        print(f"  nvdec: unavailable: {exc}")
    print("encoders (NVENC):")
    for codec, reason in hardware_encoders().items():
        print(f"  {codec}: {'available' if reason is None else f'unavailable: {reason}'}")


def _nvdec_summary(rows) -> str:
    """``h264 8-bit (to 4096x4096); hevc 8/10/12-bit (to 8192x8192); ...`` for the supported
    rows."""
    by_codec: dict[str, list] = {}
    for row in rows:
        if row.supported:
            by_codec.setdefault(row.codec, []).append(row)
    if not by_codec:
        return "unavailable: NVDEC reports no 4:2:0 decoder on device 0"
    parts = [f"{codec} {'/'.join(str(r.bits) for r in found)}-bit (to "
             f"{found[0].max_width}x{found[0].max_height})"
             for codec, found in by_codec.items()]
    return "device 0: " + "; ".join(parts)


