"""Shared fixtures: random generators, the sample clip, a CLI runner and the cuda skip."""

from __future__ import annotations

import secrets
import signal
from pathlib import Path

import numpy as np
import pytest

from helpers.cli import REPO, run_cli

pytest_plugins = ("helpers.damage", "helpers.xdisplay")
"""Helper modules whose fixtures tests take by name."""

SAMPLE = REPO / "media" / "sample.mp4"

# The tests send SIGINT to their children as a terminal's Ctrl-C would. A runner that starts the
# suite as a shell's background job has SIGINT ignored, and an ignored signal stays ignored across
# exec (streamconv keeps it so, as Python does): a handler here gives every child the default.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture
def rng() -> np.random.Generator:
    """A freshly seeded generator; the seed is printed so a failure can be replayed."""
    seed = secrets.randbits(32)
    print(f"rng seed {seed}")
    return np.random.default_rng(seed)


@pytest.fixture
def sample_clip() -> Path:
    """media/sample.mp4: 120 frames of 640x360 H.264 at 30 fps."""
    assert SAMPLE.is_file(), "media/sample.mp4 is missing (python media/make_sample.py)"
    return SAMPLE


@pytest.fixture
def cli():
    """The run_cli function: cli("run", "test", ...) -> CompletedProcess."""
    return run_cli


def _cuda_reason() -> str | None:
    from streamconv.backends import cuda_status

    usable, reason = cuda_status(0)
    return None if usable else reason


def pytest_collection_modifyitems(config, items):
    cuda_items = [item for item in items if "cuda" in item.keywords]
    if not cuda_items:
        return
    reason = _cuda_reason()
    if reason is None:
        return
    skip = pytest.mark.skip(reason=f"cuda backend unavailable: {reason}")
    for item in cuda_items:
        item.add_marker(skip)
