"""The specialisations a wheel carries prebuilt: what ``auto`` picks for the usual filters.

Each is (kernel file, ``#define``s) as the CUDA backend asks :mod:`streamconv.gpu.loader` for
it, found by planning real chains with :func:`streamconv.backends.plan.plan_chain`, so the list
follows the ``auto`` table by itself. Covered: every built-in filter at its defaults and at the
sizes people use (box 3-9, Gaussian sigma 1-3), the named stages across frames, the
presets, random custom taps of 3x3 to 9x9,
each at 1, 3 and 4 channels, every border, 8- and 16-bit frames; the YUV <-> RGB conversions of
BT.601, BT.709 and BT.2020 at both ranges and 8, 10 and 12 bits; the timing hold; the layer
kernels that take no size-dependent macros; scale between 4K, 1080p and 720p (RGB, 8 and 16 bits,
every kernel). Anything else (other taps' int8 digits, other sizes, the layers' tiles, other
scales and every crop) compiles on first use.
"""

from __future__ import annotations

from typing import Iterator, Mapping

import numpy as np

from ..frames.borders import BORDER_CODES

CHANNELS = (1, 3, 4)
FILTER_SPECS = ("identity", "box", "box:size=5", "box:size=7", "box:size=9", "gaussian",
                "gaussian:sigma=2",
                "gaussian:sigma=3", "sharpen", "emboss", "laplacian", "sobel-x", "sobel-y", "edge")
TEMPORAL_SPECS = ("tmean", "tmean:frames=5", "tmean:frames=3,causal=1", "tgauss", "tdiff",
                  "tdiff:causal=1", "tdenoise")
"""Stages across frames at their defaults and the window people use (a 5-frame mean)."""
CUSTOM_SIZES = (3, 5, 7, 9)
COLOUR_SPACES = (1, 5, 9)
"""AVColorSpace: BT.709, BT.601 (BT.470BG; SMPTE 170M has the same matrix), BT.2020."""
DIRECT_TILE = 16
"""nn.gpu's direct convolution tile (its only macro)."""
SCALES = (((2160, 3840), (1080, 1920)), ((1080, 1920), (720, 1280)), ((1080, 1920), (2160, 3840)),
          ((720, 1280), (1080, 1920)))
"""Scale stages prebuilt: (input, output) (height, width) of RGB frames."""


def filter_chains() -> Iterator[list]:
    """The filter chains whose kernels are prebuilt."""
    from ..chain.filters import build_filter, parse_chain
    from ..chain.presets import list_presets, load_preset

    for spec in FILTER_SPECS + TEMPORAL_SPECS:
        yield parse_chain([spec])
    for name in list_presets():
        yield list(load_preset(name).filters)
    rng = np.random.default_rng(2024)
    for size in CUSTOM_SIZES:
        taps = rng.uniform(-1.0, 1.0, (size, size))
        taps[size // 2, size // 2] += size * size  # a positive sum, as blurs and sharpens have
        text = ";".join(",".join(f"{value:.5f}" for value in row) for row in taps)
        yield [build_filter("custom", {"taps": text, "normalize": True})]


def filter_specialisations() -> set[tuple[str, tuple]]:
    """(kernel file, sorted define items) of every chain of :func:`filter_chains` under ``auto``."""
    from .plan import plan_chain

    wanted = set()
    for chain in filter_chains():
        plan = plan_chain(chain)
        for dtype in (np.uint8, np.uint16):
            for channels in CHANNELS:
                for border in BORDER_CODES.values():
                    for launch in plan.kernel_plans((64, 64, channels), border, dtype):
                        if launch is not None:
                            wanted.add((launch.source, tuple(sorted(launch.defines.items()))))
    return wanted


def scale_specialisations() -> set[tuple[str, tuple]]:
    """resample.cu for each of :data:`SCALES`, every kernel, 8- and 16-bit samples."""
    from .plan import plan_chain
    from ..chain.filters import parse_chain
    from ..chain.resample import KERNELS

    wanted = set()
    for (height, width), (out_height, out_width) in SCALES:
        for kernel in KERNELS:
            plan = plan_chain(parse_chain([f"scale:w={out_width},h={out_height},kernel={kernel}"]))
            for dtype in (np.uint8, np.uint16):
                launch = plan.kernel_plans((height, width, 3), 0, dtype)[0]
                wanted.add((launch.source, tuple(sorted(launch.defines.items()))))
    return wanted


def colour_specialisations() -> set[tuple[str, tuple]]:
    """colour.cu for each matrix, range and depth, and the NVDEC conversions (depth only)."""
    from ..frames.yuv import conversion_coefficients

    wanted = {("colour", (("SAMPLE_BYTES", sample_bytes),)) for sample_bytes in (1, 2)}
    for space in COLOUR_SPACES:
        for full_range in (False, True):
            for bits in (8, 10, 12):
                defines = {**conversion_coefficients(space, full_range, bits), "SAMPLE_BYTES": 1
                           if bits == 8 else 2}
                wanted.add(("colour", tuple(sorted(defines.items()))))
    return wanted


def catalogue() -> list[tuple[str, Mapping[str, object]]]:
    """Every prebuilt specialisation, sorted: (kernel file stem in cuda/, defines)."""
    wanted = filter_specialisations() | colour_specialisations() | scale_specialisations()
    wanted |= {("hold", ()), ("nn_conv", ()), ("nn_ops", ()),
               ("nn_conv", (("DIRECT_TILE", DIRECT_TILE),))}
    return [(name, dict(items))
            for name, items in sorted(wanted, key=lambda item: (item[0], str(item[1])))]
