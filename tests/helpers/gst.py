"""GStreamer for the element's tests: whether its pipelines can run here (and the reason if not),
the environment in which gst-launch-1.0 and gst-inspect-1.0 find the element, GStreamer's Python
bindings in this test process, and a small runner for in-process pipelines.

The element runs in the Python that GStreamer's plugin loader embeds (the system's: 3.11 on
Debian 12), so its pipelines run only where the tests' Python is that version: there the loader
can import this environment's packages, and the system's gi is importable here too.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import shlex
import shutil
import site
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
_LOADER_GLOBS = (
    "/usr/lib/*/gstreamer-1.0/libgstpython.so",
    "/usr/lib/gstreamer-1.0/libgstpython.so",
    "/usr/lib64/gstreamer-1.0/libgstpython.so",
)
_SYSTEM_PACKAGES = Path("/usr/lib/python3/dist-packages")
_THIS_PYTHON = f"{sys.version_info[0]}.{sys.version_info[1]}"


def _loader() -> Path | None:
    """GStreamer's Python plugin loader: in GStreamer's own plugin folders (the ones
    GST_PLUGIN_SYSTEM_PATH_1_0 names, where set), else the distribution's."""
    named = os.environ.get("GST_PLUGIN_SYSTEM_PATH_1_0") or os.environ.get("GST_PLUGIN_SYSTEM_PATH")
    if named:
        candidates = [Path(folder) / "libgstpython.so" for folder in named.split(os.pathsep)]
        return next((path for path in candidates if path.is_file()), None)
    for pattern in _LOADER_GLOBS:
        found = sorted(Path("/").glob(pattern.lstrip("/")))
        if found:
            return found[0]
    return None


def _gi_packages() -> Path:
    """The folder holding the ``gi`` to use: one already importable here (a GStreamer brought
    along, its folder on PYTHONPATH), else the system's."""
    spec = importlib.util.find_spec("gi")
    if spec is not None and spec.origin:
        return Path(spec.origin).parent.parent
    return _SYSTEM_PACKAGES


def loader_python(loader: Path) -> str | None:
    """The Python version (``3.11``) GStreamer's Python plugin loader is linked with."""
    match = re.search(rb"libpython(3\.\d+)", loader.read_bytes())
    return match.group(1).decode() if match else None


@functools.lru_cache(maxsize=1)
def unavailable_reason() -> str | None:
    """Why the element's pipelines cannot run here, or None when they can."""
    if not (shutil.which("gst-launch-1.0") and shutil.which("gst-inspect-1.0")):
        return "GStreamer's tools are not installed (gstreamer1.0-tools)"
    loader = _loader()
    if loader is None:
        return (
            "GStreamer's Python plugin loader is not installed (gstreamer1.0-python3-plugin-loader)"
        )
    version = loader_python(loader)
    if version != _THIS_PYTHON:
        return (
            f"GStreamer's Python plugin loader runs Python {version}, these tests Python "
            f"{_THIS_PYTHON}: "
            "the element could not import this environment's packages there"
        )
    tag = f"cpython-{sys.version_info[0]}{sys.version_info[1]}"
    if not list((_gi_packages() / "gi" / "overrides").glob(f"_gi_gst.{tag}*.so")):
        return (f"GStreamer's Python bindings for Python {_THIS_PYTHON} are not installed "
                "(python3-gst-1.0)")
    return None


def skip_without_gstreamer() -> None:
    """Skip the calling test, with the reason, where the element's pipelines cannot run."""
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(reason)


@functools.lru_cache(maxsize=1)
def gi_folder() -> Path:
    """The folder ``gi`` is imported from: where it is importable already, else a folder holding
    only a link to the system's, put last on this process's path (nothing of this environment is
    shadowed); children get it on their PYTHONPATH."""
    packages = _gi_packages()
    if packages != _SYSTEM_PACKAGES:
        return packages  # importable already
    folder = Path(tempfile.mkdtemp(prefix="streamconv-gi-"))
    (folder / "gi").symlink_to(_SYSTEM_PACKAGES / "gi")
    sys.path.append(str(folder))
    return folder


def environment_packages() -> list[str]:
    """The folders this test process imports NumPy, PyAV and OpenCV from."""
    import numpy

    return [str(Path(numpy.__file__).resolve().parents[1])]


@functools.lru_cache(maxsize=1)
def launch_environment() -> dict[str, str]:
    """The environment of gst-launch-1.0 and gst-inspect-1.0: the element's folder on
    GST_PLUGIN_PATH (as ``streamconv gst-path`` prints it), this environment's packages on
    PYTHONPATH, and a registry of the tests' own (built at its first use, then reused).

    The embedded Python finds its home through the first ``python3`` on PATH: a virtual
    environment's (without the system's packages, so without gi) would be taken for its own, so
    this environment's bin folder is left off PATH and its packages named on PYTHONPATH instead."""
    from streamconv.gst import plugin_path

    registry = Path(tempfile.mkdtemp(prefix="streamconv-gst-registry-")) / "registry.bin"
    inherited = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    paths = [str(REPO), *environment_packages(), *site.getsitepackages(), *filter(None, inherited)]
    environment = dict(
        os.environ,
        GST_PLUGIN_PATH=str(plugin_path()),
        GST_REGISTRY=str(registry),
        PYTHONPATH=os.pathsep.join(dict.fromkeys(paths)),
    )
    environment.pop(
        "VIRTUAL_ENV", None
    )  # the packages are named above; an activated one could differ
    own_bin = str(Path(sys.prefix) / "bin")
    environment["PATH"] = os.pathsep.join(
        entry
        for entry in os.environ.get("PATH", "").split(os.pathsep)
        if sys.prefix == sys.base_prefix or entry != own_bin
    )
    return environment


def gst_launch(description: str) -> subprocess.CompletedProcess:
    """Run ``gst-launch-1.0 -q`` on a pipeline description (values with spaces shell-quoted)."""
    return gst_tool("launch", "-q", *shlex.split(description))


def gst_tool(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run gst-launch-1.0 (``launch``) or gst-inspect-1.0 (``inspect``) with ARGS in
    :func:`launch_environment`; text output."""
    tool = {"launch": "gst-launch-1.0", "inspect": "gst-inspect-1.0"}[args[0]]
    return subprocess.run(
        [tool, *args[1:]],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=launch_environment(),
        cwd=REPO,
        check=False,
    )


@functools.lru_cache(maxsize=1)
def gst():
    """GStreamer's ``Gst`` module in this process, initialised, the element registered."""
    skip_without_gstreamer()
    gi_folder()
    import gi

    gi.require_version("Gst", "1.0")
    from gi.repository import Gst

    Gst.init(None)
    import streamconv.gst

    assert streamconv.gst.register()
    return Gst


def pull_frames(pipeline, sink_name: str = "out", *, timeout: float = 30) -> list:
    """Play ``pipeline`` to its end, taking every sample of its appsink ``sink_name``; returns
    [(pts, frame bytes as a NumPy uint8 array, caps string)] and fails on an error message."""
    Gst = gst()
    sink = pipeline.get_by_name(sink_name)
    pipeline.set_state(Gst.State.PLAYING)
    samples = []
    try:
        while True:
            sample = sink.emit("try-pull-sample", int(timeout * Gst.SECOND))
            if sample is None:
                break
            samples.append(sample_frame(sample))
        assert sink.get_property("eos"), bus_error(pipeline) or "no EOS"
    finally:
        pipeline.set_state(Gst.State.NULL)
    return samples


def sample_frame(sample) -> tuple[int, np.ndarray, str]:
    """(pts, a copy of the buffer's bytes, the caps string) of an appsink sample."""
    Gst = gst()
    buffer = sample.get_buffer()
    ok, mapping = buffer.map(Gst.MapFlags.READ)
    assert ok
    try:
        data = np.frombuffer(mapping.data, np.uint8).copy()
    finally:
        buffer.unmap(mapping)
    return buffer.pts, data, sample.get_caps().to_string()


def bus_error(pipeline) -> str | None:
    """The text of the first error message waiting on the pipeline's bus, or None."""
    Gst = gst()
    message = pipeline.get_bus().pop_filtered(Gst.MessageType.ERROR)
    return None if message is None else message.parse_error()[0].message
