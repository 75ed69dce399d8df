"""``python -m streamconv.prebuild``: compile the catalogue's kernels into fatbins for the wheel.

Run it, with nvcc on PATH, before building a wheel: ``cuda/prebuilt/`` then holds one fatbin
per specialisation of :mod:`streamconv.backends.catalogue` and ``index.json``, and the wheel
carries the folder, so a machine with only the NVIDIA driver runs them without a compiler.

Each fatbin holds machine code for Turing (sm_75), Ampere (sm_80, which also runs on sm_86 and
sm_89), Hopper (sm_90) and Blackwell (sm_100, sm_120), from the oldest architecture the kernel
file's owner declares in its ``SOURCES`` on (sm_80 for those that issue the int8 tensor-core
``mma``), and PTX of that oldest one, which the driver compiles for GPUs newer than all of them.
The fatbins are compressed (``-Xfatbin=-compress-all``).

The folder is built beside the target and swapped in whole, so a failed or interrupted build
leaves the previous one (or none), never a mixture.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Mapping, Sequence

from . import catalogue as kernel_catalogue
from .families import resample, temporal
from .families.base import arch_number
from .plan import FAMILIES
from ..frames import yuv
from ..gpu import prebuilt
from ..gpu.loader import NVCC_OPTIONS, kernel_source, specialisation_name, with_defines
from ..files.resources import data_dir
from ..nn import gpu as nn_gpu

ARCHS = ("sm_75", "sm_80", "sm_90", "sm_100", "sm_120")
OWNERS = (*FAMILIES, resample, temporal, nn_gpu, yuv)
"""The modules whose ``SOURCES`` say the oldest architecture each kernel file runs on."""


def archs_for(name: str, archs: Sequence[str]) -> list[str]:
    """The machine-code architectures of ``archs`` the kernel file ``name`` is built for: those
    from the oldest its owner declares on (all of them for a file no owner declares)."""
    oldest = next((owner.SOURCES[name] for owner in OWNERS if name in owner.SOURCES), archs[0])
    return [arch for arch in archs if arch_number(arch) >= arch_number(oldest)]


def nvcc_version(nvcc: str) -> str:
    """``13.0`` from ``nvcc --version``."""
    output = subprocess.run([nvcc, "--version"], capture_output=True, text=True, check=True).stdout
    match = re.search(r"release (\d+\.\d+)", output)
    if not match:
        raise RuntimeError(f"cannot read nvcc's version from: {output.strip()}")
    return match.group(1)


def build_one(nvcc: str, name: str, defines: Mapping[str, object], archs: Sequence[str],
              folder: Path) -> dict:
    """Compile one specialisation into ``folder/<key>.fatbin``; its index entry."""
    text = with_defines(kernel_source(name), defines)
    key = prebuilt.source_key(name, text)
    built = archs_for(name, archs)
    ptx = "compute_" + built[0][3:]
    gencode = [f"-gencode=arch=compute_{arch[3:]},code={arch}" for arch in built]
    gencode.append(f"-gencode=arch={ptx},code={ptx}")
    with tempfile.TemporaryDirectory() as scratch:
        source = Path(scratch) / f"{name}.cu"
        source.write_text(text, encoding="utf-8")
        command = [nvcc, *NVCC_OPTIONS, "--fatbin", "-Xfatbin=-compress-all", *gencode,
                   "-I", str(data_dir("cuda")), str(source), "-o", str(folder / f"{key}.fatbin")]
        result = subprocess.run(command, capture_output=True, text=True)
    label = specialisation_name(name, defines)
    if result.returncode != 0:
        raise RuntimeError(f"nvcc failed on {label}:\n{result.stderr.strip()}")
    return {"label": label, "file": f"{key}.fatbin", "archs": built, "ptx": ptx, "key": key}


def build(target: Path, archs: Sequence[str] = ARCHS, jobs: int = os.cpu_count() or 2,
          nvcc: str | None = None, progress=print,
          specialisations: Sequence[tuple[str, Mapping[str, object]]] | None = None) -> dict:
    """Compile ``specialisations`` (default: the whole catalogue) into ``target`` (replaced
    whole) for the machine-code ``archs``, oldest first; the index written.

    Raises:
        RuntimeError: no nvcc, or nvcc failed on a specialisation (nothing is replaced).
    """
    nvcc = nvcc or shutil.which("nvcc")
    if nvcc is None:
        raise RuntimeError("nvcc not found on PATH: prebuilding kernels needs a CUDA toolkit")
    specialisations = list(specialisations or kernel_catalogue.catalogue())
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        started, done = time.perf_counter(), 0
        entries = {}
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            for entry in pool.map(lambda item: build_one(nvcc, item[0], item[1], archs, staging),
                                  specialisations):
                entries[entry.pop("key")] = entry
                done += 1
                if done % 20 == 0 or done == len(specialisations):
                    progress(f"{done}/{len(specialisations)} kernels, "
                             f"{time.perf_counter() - started:.0f} s")
        index = {"format": prebuilt.FORMAT, "compiler": nvcc_version(nvcc), "archs": list(archs),
                 "ptx": "compute_" + archs[0][3:], "entries": entries}
        (staging / prebuilt.INDEX_NAME).write_text(json.dumps(index, indent=1, sort_keys=True),
                                                   encoding="utf-8")
        _swap_in(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return index


def _swap_in(staging: Path, target: Path) -> None:
    """Replace ``target`` by ``staging``; refuse a target that is not a prebuilt folder."""
    if target.exists() and not (target / prebuilt.INDEX_NAME).is_file() and any(target.iterdir()):
        raise RuntimeError(f"{target} exists and is not a prebuilt-kernel folder; not replacing it")
    old = None
    if target.exists():
        old = target.with_name(f".{target.name}-old-{os.getpid()}")
        target.rename(old)
    staging.rename(target)
    if old is not None:
        shutil.rmtree(old)


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: ``python -m streamconv.prebuild [--out DIR] [--jobs N] [--arch sm_XY ...]``
    (the module :mod:`streamconv.prebuild` runs this)."""
    parser = argparse.ArgumentParser(prog="python -m streamconv.prebuild",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=None,
                        help="folder to fill (default: cuda/prebuilt of this source tree or "
                             "installation)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2,
                        help="nvcc processes at once")
    parser.add_argument("--arch", action="append", dest="archs", metavar="sm_XY",
                        help="machine-code architecture, repeatable, oldest first (default: "
                             f"{' '.join(ARCHS)})")
    args = parser.parse_args(argv)
    target = args.out or prebuilt.prebuilt_dir()
    try:
        index = build(target, tuple(args.archs or ARCHS), max(1, args.jobs))
    except RuntimeError as exc:
        print(f"prebuild: {exc}", file=sys.stderr)
        return 1
    size = sum(path.stat().st_size for path in target.iterdir())
    print(f"{len(index['entries'])} kernels in {target} ({size / 1e6:.1f} MB, nvcc "
          f"{index['compiler']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
