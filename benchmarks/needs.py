"""What a benchmark needs and this machine lacks (a GPU, PyCUDA, CuPy, PyTorch, PyNvVideoCodec),
said in one line instead of a traceback."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

OPTIONAL_MODULES = {
    "cupy": "CuPy (pip install cupy-cuda12x, or cupy-cuda13x for a CUDA 13 driver)",
    "torch": "PyTorch (pip install torch)",
    "pycuda": "PyCUDA (streamconv install-cuda)",
    "PyNvVideoCodec": "PyNvVideoCodec (the nvdec extra)",
}
"""Top-level module -> what to install for it."""


class Missing(RuntimeError):
    """Something the benchmark needs is not here; the message names it."""


def gpu() -> None:
    """Raise Missing, with streamconv's reason, unless its CUDA backend can run on GPU 0."""
    from streamconv.backends import cuda_status

    usable, reason = cuda_status(0)
    if not usable:
        raise Missing(f"a GPU streamconv can use: {reason}")


def torch_gpu():
    """PyTorch, imported, where it sees a CUDA GPU; else raise Missing."""
    import torch

    if not torch.cuda.is_available():
        raise Missing("PyTorch with CUDA (torch.cuda.is_available() is False)")
    return torch


def run(main: Callable[[], int | None]) -> int | str | None:
    """main()'s result for sys.exit; where it needs a module of OPTIONAL_MODULES that is not
    installed, or a GPU streamconv cannot use, one line saying so (sys.exit prints it, status 1)."""
    from streamconv import BackendUnavailableError

    script = Path(sys.argv[0]).name
    try:
        return main()
    except ModuleNotFoundError as exc:
        top = (exc.name or "").partition(".")[0]
        if top not in OPTIONAL_MODULES:
            raise
        return f"{script} needs {OPTIONAL_MODULES[top]}, which is not installed"
    except Missing as exc:
        return f"{script} needs {exc}"
    except BackendUnavailableError as exc:  # its message names what is missing
        return f"{script}: {exc}"
