"""Registers the ``streamconv`` element: GStreamer's Python plugin loader imports this file from
``<streamconv gst-path>/python/`` (GST_PLUGIN_PATH) and registers ``__gstelementfactory__``.

The loader runs the Python that GStreamer was built with (the system's: 3.11 on Debian 12), so the
streamconv installation this file belongs to is put on its path first, and the packages of an
activated virtual environment (``VIRTUAL_ENV``) of that Python version after it. When streamconv
or its dependencies cannot be imported there, one line on stderr says why and no element is
registered (``gst-inspect-1.0 streamconv`` then finds none); no traceback.
"""

import os
import site
import sys
from pathlib import Path

_HERE = Path(__file__).resolve()
_ROOT = _HERE.parents[
    4
]  # <root>/streamconv/gst/plugin/python/gststreamconv.py: <root> holds streamconv
_VERSION = f"python{sys.version_info[0]}.{sys.version_info[1]}"


def _add_front(path: Path) -> None:
    """Put ``path`` (with the .pth files of a site-packages folder) first on sys.path."""
    before = list(sys.path)
    site.addsitedir(str(path))
    added = [entry for entry in sys.path if entry not in before]
    sys.path[:] = added + [entry for entry in sys.path if entry not in added]


def _environment_packages() -> list:
    """The site-packages of the activated virtual environment for this Python version, if any."""
    environment = os.environ.get("VIRTUAL_ENV")
    if not environment:
        return []
    return sorted(Path(environment).glob(f"lib/{_VERSION}/site-packages"))


def _mismatch() -> str:
    """Where streamconv sits in another Python version's site-packages, a note saying so."""
    for folder in [
        _ROOT,
        *(Path(os.environ.get("VIRTUAL_ENV", "/nonexistent")) / "lib").glob("python3.*"),
    ]:
        name = folder.parent.name if folder.name == "site-packages" else folder.name
        if name.startswith("python3.") and name != _VERSION:
            return (
                f" (streamconv is installed for {name}, but GStreamer's Python plugin loader runs "
                f"{_VERSION}: install streamconv for {_VERSION})"
            )
    return ""


try:
    for _folder in [*_environment_packages(), _ROOT]:
        _add_front(_folder)
    from streamconv.gst.element import ELEMENT_FACTORY

    __gstelementfactory__ = ELEMENT_FACTORY
except Exception as _error:  # noqa: BLE001 - any failure: one line, and GStreamer goes on without the element
    sys.stderr.write(
        f"streamconv: the GStreamer element is unavailable in GStreamer's Python ({_VERSION}): "
        f"{type(_error).__name__}: {_error}{_mismatch()}\n"
    )
