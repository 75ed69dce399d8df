"""Which options a muxer has, asked of the libavformat that PyAV runs on.

PyAV hands an output's muxer options to FFmpeg (``avformat_write_header``) and says nothing of
those FFmpeg did not use, so a misspelt ``--output-option`` (``movflag=+faststart``) would be
dropped without a word. FFmpeg's own command line refuses such an option; so does
:func:`check_muxer_options`. PyAV exposes no muxer's option list, so the libraries
it loaded are asked through ctypes: a throw-away output context of that muxer, searched with
``av_opt_find`` (its generic options and the muxer's own, as ``avformat_write_header`` applies
them).
"""

from __future__ import annotations

import ctypes
import functools
import os
from typing import Iterable

import cv2  # noqa: F401  (before av: see streamconv.io.sinks.display.check_import_order)
import av  # loads libavformat and libavutil, which are looked up below

from ...errors import OutputError

SEARCH_CHILDREN = 1
"""FFmpeg's AV_OPT_SEARCH_CHILDREN: the muxer's private options too."""


@functools.lru_cache(maxsize=1)
def _libraries() -> tuple[ctypes.CDLL, ctypes.CDLL] | None:
    """(libavformat, libavutil) as this process loaded them for PyAV, or None where they
    cannot be found (no /proc/self/maps) or called."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            loaded = {line.split()[-1] for line in maps if ".so" in line}
        avformat, avutil = ctypes.CDLL(_pyavs(loaded,
                                              "libavformat")), ctypes.CDLL(_pyavs(
                                                  loaded, "libavutil"))
        avformat.avformat_alloc_output_context2.argtypes = [ctypes.POINTER(ctypes.c_void_p),
                                                            ctypes.c_void_p,
                                                           ctypes.c_char_p, ctypes.c_char_p]
        avformat.avformat_free_context.argtypes = [ctypes.c_void_p]
        avutil.av_opt_find.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p,
                                       ctypes.c_int, ctypes.c_int]
        avutil.av_opt_find.restype = ctypes.c_void_p
    except (OSError, KeyError, AttributeError):
        return None
    return avformat, avutil


def _pyavs(loaded: set[str], library: str) -> str:
    """The path of PyAV's ``library`` among the ``loaded`` ones: OpenCV's wheel may bring an
    FFmpeg of its own, so one beside PyAV's package (its wheel's ``av.libs``) comes first.

    Raises:
        KeyError: none, or several and none of them PyAV's.
    """
    found = sorted(path for path in loaded
                   if os.path.basename(path).split("-")[0].split(".")[0] == library)
    home = os.path.dirname(os.path.abspath(av.__file__))
    own = [path for path in found if path.startswith((home + os.sep, home + ".libs" + os.sep))]
    if own or len(found) == 1:
        return (own or found)[0]
    raise KeyError(library)


def unknown_muxer_options(muxer: str | None, target: str, names: Iterable[str]) -> list[str] | None:
    """The option names among ``names`` that FFmpeg's muxer ``muxer`` (None: the one FFmpeg
    picks for ``target``'s name) does not have, in order; None when that cannot be asked
    (the libraries not found, or no such muxer).

    Args:
        muxer: FFmpeg's muxer name (``mp4``, ``matroska``, ``image2pipe``) or None.
        target: the output's name (its extension picks the muxer when ``muxer`` is None).
        names: option names, as given to ``--output-option``.
    """
    libraries = _libraries()
    names = list(names)
    if libraries is None or not names:
        return None if libraries is None else []
    avformat, avutil = libraries
    context = ctypes.c_void_p()
    if avformat.avformat_alloc_output_context2(ctypes.byref(context), None, muxer.encode() if muxer
                                               else None, os.fsencode(target)) < 0 or not context:
        return None
    try:
        return [name for name in names
                if not avutil.av_opt_find(context, name.encode(), None, 0, SEARCH_CHILDREN)]
    finally:
        avformat.avformat_free_context(context)


def check_muxer_options(muxer: str | None, target: str | os.PathLike, names: Iterable[str]) -> None:
    """Refuse an option (``--output-option NAME=...``) that the muxer of ``target`` does not
    have, which FFmpeg would drop without a word; nothing is refused where the muxer's options
    cannot be asked (see :func:`unknown_muxer_options`, whose arguments these are).

    Raises:
        OutputError: (exit 6) naming the first such option and the muxer.
    """
    unknown = unknown_muxer_options(muxer, os.fspath(target), names)
    if unknown:
        named = f"the {muxer} muxer" if muxer else f"the muxer FFmpeg picks for {os.fspath(target)}"
        raise OutputError(f"--output-option {unknown[0]}: {named} has no such option, so FFmpeg "
                          "would drop it "
                          f"(see `ffmpeg -h muxer={muxer or 'NAME'}`)")
