"""``streamconv install-cuda``: the GPU path on a machine with only the NVIDIA driver, in one
command."""

from __future__ import annotations

import argparse

from ..gpu import setup as cuda_setup
from ..errors import BackendUnavailableError
from .messages import say_error


def add_install_cuda_parser(commands) -> None:
    """Add ``streamconv install-cuda [PIP OPTION ...]``."""
    command = commands.add_parser(
        "install-cuda", usage="streamconv install-cuda [-h] [PIP OPTION ...]",
        help="install PyCUDA and NVRTC from wheels and source, no CUDA toolkit needed",
        description="Install what the GPU backend needs into this Python environment, with no CUDA "
                    "toolkit: "
                    "NVIDIA's header and NVRTC wheels at the driver's CUDA version, then PyCUDA "
                    "built from "
                    "source against those headers and the driver. Needs the NVIDIA driver, a C++ "
                    "compiler "
                    "and the Python headers (e.g. Debian's g++ and python3-dev). Further arguments "
                    "are pip options, "
                    "passed to every pip step.",
        epilog="Examples:\n  streamconv install-cuda\n"
               "  streamconv install-cuda --no-index --find-links wheels/ --no-build-isolation   # "
               "offline",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    command.set_defaults(pip_args=[])  # every further argument, as _main hands them over


def take_pip_args(args: argparse.Namespace, extra: list[str]) -> None:
    """Keep the arguments argparse did not know as pip's options (a leading ``--`` dropped)."""
    args.pip_args = extra[1:] if extra[:1] == ["--"] else list(extra)


def cmd_install_cuda(args: argparse.Namespace) -> int:
    """Run :func:`streamconv.gpu.setup.install`; exit 7 (backend unavailable) if a step fails."""
    try:
        cuda_setup.install(list(args.pip_args))
    except (RuntimeError, FileNotFoundError) as exc:
        say_error(exc)
        return BackendUnavailableError.exit_code
    return 0
