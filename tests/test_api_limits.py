"""The library at its extremes: frames of one pixel or one column, frames too large for the
backends or for memory, and arguments of the wrong type, each refused with a typed error
before any work (CPU backend; the GPU variants marked cuda)."""

from __future__ import annotations

import numpy as np
import pytest
from oracle import reference_chain

import streamconv
from streamconv.filters import parse_chain
from streamconv.frames import available_memory

BACKENDS = ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)]
POISON = 0x5A

# One of each CPU path: OpenCV's float rounding (box), a 1x1 table, exact taps straight through
# filter2D (sharpen), rows summed for a large kernel (gaussian 31), a magnitude bank (edge).
TINY_CHAINS = ["box:size=3", "custom:taps=0.3", "sharpen", "gaussian:size=31", "edge"]
# 1 x 1 frames, and frames 1 pixel wide whose last band of rows is 1 x 1 (65 and 129 rows).
TINY_SHAPES = [(1, 1), (1, 1, 1), (1, 1, 3), (65, 1), (129, 1, 1), (1, 65)]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
@pytest.mark.parametrize("shape", TINY_SHAPES, ids=lambda shape: "x".join(map(str, shape)))
def test_frames_of_one_pixel_or_one_column_are_filtered_as_the_oracle_says(rng, backend, shape, dtype):
    """OpenCV's arithmetic read a 1 x 1 single-channel array as a Scalar and gave 4 x 1:
    ``Filter('box:size=3')`` of a 1x1 grey frame raised ValueError (cannot reshape)."""
    frame = rng.integers(0, np.iinfo(dtype).max + 1, shape, dtype=dtype)
    for spec in TINY_CHAINS:
        with streamconv.Filter(spec, backend=backend) as tiny:
            out = np.full_like(frame, POISON)
            tiny.apply_into(out, frame)
            expected = reference_chain(frame, parse_chain([spec]), "reflect101")
            assert tiny(frame).shape == shape
        assert np.abs(out.astype(np.int64) - expected).max() <= 1, spec  # float32 against float64


def huge(shape: tuple[int, ...]) -> np.ndarray:
    """A frame of ``shape`` that takes one byte of memory, writable (every pixel the same one)."""
    return np.lib.stride_tricks.as_strided(np.zeros(1, np.uint8), shape, (0,) * len(shape), writeable=True)


@pytest.mark.parametrize("backend", BACKENDS)
def test_frames_too_large_are_refused_before_any_work(backend):
    """A 1 x 2^31 frame made OpenCV ask for 18446744067267100678 bytes (its 32-bit counts
    overflowed) and a 100000x100000x3 one raised a bare MemoryError: both are refused, typed,
    before any buffer, by Filter's calls and by StreamFilter's, as the CLI refuses them."""
    wide, large = huge((1, 2**31)), huge((100_000, 100_000, 3))
    available = available_memory()
    if available is None or available >= 2 * large.size:
        pytest.skip("this machine could hold a 100000x100000x3 frame and its result")
    with streamconv.Filter("box:size=3", backend=backend) as blur, \
            streamconv.StreamFilter("box:size=3", backend=backend) as stream:
        for frame, error, words in [(wide, streamconv.FrameFormatError, "too large to filter"),
                                    (large, streamconv.InputError, "of host memory, but only")]:
            for call in (lambda f=frame: blur(f), lambda f=frame: blur.apply_into(f, f),
                         lambda f=frame: stream.input_buffer(f.shape), lambda f=frame: stream.submit(f)):
                with pytest.raises(error, match=words):
                    call()
        assert stream.pending == 0
        small = np.full((4, 5, 3), 90, np.uint8)  # the same objects still work
        assert blur(small)[0, 0].tolist() == [90, 90, 90]
