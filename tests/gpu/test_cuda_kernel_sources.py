"""On the GPU: prebuilt fatbins, NVRTC's cubins and nvcc's give the same frames, each within
1 LSB of the CPU backend, on fresh random data with every output poisoned first.

Skipped with the reason where there is no GPU; each kernel source is skipped where it is absent
here (no prebuilt folder, no NVRTC, no nvcc).
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from streamconv.gpu import loader as kernel_loader, nvrtc, prebuilt
from streamconv.backends.plan import plan_chain
from streamconv.frames.borders import BORDER_CODES
from streamconv.chain.filters import parse_chain

from helpers.gpu_check import check_against_cpu, precompile_plans

pytestmark = pytest.mark.cuda

CHAINS = {  # one of each family auto picks, and one that no catalogue holds
    "sepconv": ["gaussian:sigma=2"],
    "conv3_tc": ["sharpen"],
    "conv2d_tc": ["box:size=5"],
    "conv2d-bank": ["edge"],
    "conv2d-15x15": ["custom:taps=" + ";".join(",".join(str((r * 15 + c) % 7 - 3)
                                                        for c in range(15))
                                              for r in range(15))],
}


def _source_available(source: str) -> str | None:
    """Why ``source`` of kernels cannot be tried here, or None."""
    if source == "prebuilt" and prebuilt.read_index() is None:
        return "no prebuilt kernels in this installation"
    if source == "nvrtc" and kernel_loader.find_nvrtc() is None:
        return "no NVRTC for this driver"
    if source == "nvcc" and shutil.which("nvcc") is None:
        return "nvcc not on PATH"
    return None


def _use(monkeypatch, source: str) -> None:
    monkeypatch.setenv("STREAMCONV_PREBUILT", "1" if source == "prebuilt" else "0")
    monkeypatch.setenv("STREAMCONV_COMPILER",
                       {"prebuilt": "none", "nvrtc": "nvrtc", "nvcc": "nvcc"}[source])


@pytest.mark.parametrize("name", list(CHAINS))
def test_every_kernel_source_gives_the_same_frames(name, monkeypatch, rng):
    chain = parse_chain(CHAINS[name])
    frame = rng.integers(0, 256, (67, 131, 3), dtype=np.uint8)
    results = {}
    for source in ("prebuilt", "nvrtc", "nvcc"):
        if _source_available(source) is not None:
            continue
        _use(monkeypatch, source)
        if source == "prebuilt" and name == "conv2d-15x15":
            with pytest.raises(Exception, match="STREAMCONV_COMPILER=none"):  # not in the catalogue
                check_against_cpu(chain, frame, "reflect101", precompile_plans([]))
            continue
        results[source] = check_against_cpu(chain, frame, "reflect101", precompile_plans([]))
    if len(results) < 2 and name != "conv2d-15x15":
        pytest.skip(f"only {list(results)} here: nothing to compare with")
    first = next(iter(results.values()))
    for source, frame_out in results.items():
        assert np.array_equal(frame_out, first), source


def test_catalogue_kernels_come_prebuilt(monkeypatch, rng):
    reason = _source_available("prebuilt")
    if reason:
        pytest.skip(reason)
    monkeypatch.setenv("STREAMCONV_PREBUILT", "1")
    frame = rng.integers(0, 256, (48, 80, 3), dtype=np.uint8)
    check_against_cpu(parse_chain(["gaussian:sigma=2", "sharpen"]), frame, "replicate",
                      precompile_plans([]))
    arch = next(iter(kernel_loader.origins())).split()[-1]
    plans = plan_chain(parse_chain(["gaussian:sigma=2",
                                    "sharpen"])).kernel_plans((48, 80, 3),
                                                              BORDER_CODES["replicate"])
    loaded = kernel_loader.origins()
    for launch in plans:
        label = f"{kernel_loader.specialisation_name(launch.source, launch.defines)} {arch}"
        assert loaded.get(label) == "prebuilt", (label, loaded.get(label))


def test_nvrtc_is_no_newer_than_the_driver():
    found = kernel_loader.find_nvrtc()
    if found is None:
        pytest.skip("no NVRTC here")
    assert found.version[0] <= kernel_loader.driver_cuda_major()
    assert nvrtc.find(found.version[0] - 1) is None or \
        nvrtc.find(found.version[0] - 1).version[0] < found.version[0]
