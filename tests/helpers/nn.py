"""Layer weights and the tolerance the layer tests hold results to."""

from __future__ import annotations

import numpy as np


TOLERANCE = 1e-4  # relative to the largest reference magnitude


def relative_error(actual: np.ndarray, expected: np.ndarray) -> float:
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    return float(np.max(np.abs(actual - expected)) / max(np.max(np.abs(expected)), 1e-30))


def weights_file(tmp_path, weights) -> str:
    path = tmp_path / "weights.npy"
    np.save(path, np.asarray(weights))
    return str(path)
