"""Taps and layer weights as the user writes them: inline text, text files and .npy files.

Files are read with a byte cap, whatever size they claim (files in /proc claim 0), .npy files
without pickles and only after their header is checked against their size; errors name the file
and quote at most MAX_QUOTED_CHARS characters of it, so that naming a file by mistake (or on
purpose) never prints it. A taps text file is quoted not at all: a password file named by mistake
fails at its first token, and even 20 characters of that are a user, a hash's kind and its salt.
:func:`validate_taps` checks a tap matrix (a 2-D filter's, and each frame of a 3-D one's); the
convolution layers (:mod:`streamconv.nn.layer`) check their weights themselves.
"""

from __future__ import annotations

import io
import math
import numbers
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import FilterSpecError
from .resources import is_file, read_limited

MAX_SIZE = 31
"""Largest tap matrix side (radius 15); the CUDA kernels are built for radius <= 15."""

MAX_ABS_TAP = 1.0e6
"""Taps and layer weights beyond this magnitude are refused: they would only saturate and lose
float32 precision."""

MAX_TAPS_FILE_BYTES = 1 << 20
"""A taps file larger than this is refused: at most one byte more is ever read."""

MAX_QUOTED_CHARS = 20
"""Error messages quote at most this many characters of a value or token: enough to spot a typo,
too few to turn an error into a way of printing a file that was named by mistake (or on purpose)."""


def quote_text(text: str, limit: int = MAX_QUOTED_CHARS) -> str:
    """repr() of at most the first ``limit`` characters of ``text``, with ``...`` after it if
    cut."""
    return repr(text[:limit]) + ("..." if len(text) > limit else "")


def show_value(value: Any) -> str:
    """A value for an error message: repr(value), cut to MAX_QUOTED_CHARS characters of a string or
    twice that of other types (a value may come from a file); repr of an int (even nested) over
    4300 digits raises ValueError, so such a value is named by its type."""
    if isinstance(value, str):
        return quote_text(value)
    try:
        text = repr(value)
    except ValueError:
        return f"<a {type(value).__name__} too large to show>"
    limit = 2 * MAX_QUOTED_CHARS
    return text[:limit] + "..." if len(text) > limit else text


def brief_reason(exc: BaseException, limit: int = 60) -> str:
    """A short reason from a library's exception that may quote the data it failed on.

    NumPy's .npy errors put the offending bytes after ``": "`` or in quotes ("Cannot parse
    header: b'...'"); the text before them says what is wrong. Keep that, at most ``limit``
    characters, else the exception's class name.
    """
    text = str(exc).split("\n", 1)[0]
    for mark in (": ", "'", '"'):
        text = text.split(mark, 1)[0]
    text = text.strip(" ;,")
    if len(text) > limit:
        text = text[:limit] + "..."
    return text or type(exc).__name__


def decode_text(data: bytes, what: str, error: type[Exception]) -> str:
    """Decode a file's bytes as UTF-8, a leading byte-order mark dropped (Windows editors write
    one).

    Raises:
        ``error``: not UTF-8; the message names the first bad byte and its offset, not the text.
    """
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise error(f"{what}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset "
                    f"{exc.start})") from None


def parse_inline_taps(text: str, *, what: str = "custom taps", quote: bool = True) -> np.ndarray:
    """Parse ``"a,b,c;d,e,f;g,h,i"`` (rows split by ';', values by ',' or spaces).

    A cell that is not a number is quoted in the error, cut to MAX_QUOTED_CHARS characters, or
    with ``quote`` False (text read from a file, which may be no taps file at all: a password
    file named by mistake) only placed by row and column; ``what`` starts each message.

    Returns:
        (K, K) float64 host array (not yet validated for size).
    """
    rows = [row for row in text.strip().split(";")]
    parsed: list[list[float]] = []
    for number, row in enumerate(rows, start=1):
        cells = [c for c in row.replace(",", " ").split() if c]
        if not cells:
            raise FilterSpecError(f"{what}: row {number} is empty")
        try:
            parsed.append([float(c) for c in cells])
        except ValueError:
            column, bad = next((n, c) for n, c in enumerate(cells, 1) if not _is_float(c))
            cell = quote_text(bad) if quote else f"value {column}"
            raise FilterSpecError(f"{what}: row {number}: {cell} is not a number") from None
    widths = {len(r) for r in parsed}
    if len(widths) != 1:
        lengths = ", ".join(str(len(r)) for r in parsed)
        raise FilterSpecError(f"{what}: rows have different lengths ({lengths})")
    return np.array(parsed, dtype=np.float64)


def _is_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def read_file(path: Path, what: str, max_bytes: int) -> bytes:
    """The bytes of a regular file of at most ``max_bytes`` (host), read with that cap.

    Raises:
        FilterSpecError: missing, not a regular file, unreadable, or larger than ``max_bytes``.
    """
    if not is_file(path):
        kind = _not_a_file(path)
        raise FilterSpecError(f"{what} {path}: {kind}" if kind else f"{what} not found: {path}")
    return read_limited(path, max_bytes, what=f"{what} {path}", error=FilterSpecError)


def _not_a_file(path: Path) -> str | None:
    """What is at ``path``, which is not a regular file: a folder, something else (a device, a FIFO:
    reading one could block or never end), or None for nothing (or a name the OS refuses)."""
    try:
        if path.is_dir():
            return "a folder, not a file"
        return "not a regular file" if path.exists() else None
    except OSError:
        return None


def _npy_claims_more_than(data: bytes) -> bool:
    """Whether a .npy header (format 1.0 or 2.0) claims more array bytes than follow it in ``data``.

    np.load on bytes in memory allocates the claimed array before reading it, so a header that
    lies about its shape would cost that much memory; such a file is refused first. Anything this
    cannot read is left to np.load to refuse.
    """
    stream = io.BytesIO(data)
    try:
        version = np.lib.format.read_magic(stream)
        if version == (1, 0):
            shape, _, dtype = np.lib.format.read_array_header_1_0(stream)
        elif version == (2, 0):
            shape, _, dtype = np.lib.format.read_array_header_2_0(stream)
        else:
            return False
    except (ValueError, TypeError, EOFError, OverflowError, SyntaxError, RecursionError,
            MemoryError):
        return False
    return math.prod(shape) * dtype.itemsize > len(data) - stream.tell()


def load_npy(path: Path, *, what: str, max_bytes: int) -> np.ndarray:
    """Read a numeric .npy file (no pickles) no larger than ``max_bytes``; at most one byte more
    is read, whatever size the file reports (files in /proc report 0).

    Returns:
        The array as float64 (host).

    Raises:
        FilterSpecError: missing, too large, unreadable or not numeric; the message starts with
            ``what`` and names the file, never its contents.
    """
    data = read_file(path, what, max_bytes)
    if _npy_claims_more_than(data):
        raise FilterSpecError(f"{what} {path}: not a readable .npy (its header claims more data "
                              "than it holds)")
    try:
        # EOFError: an empty file; MemoryError: a header claiming a shape far larger than the file.
        array = np.load(io.BytesIO(data), allow_pickle=False)
    except (ValueError, OSError, EOFError, MemoryError) as exc:
        raise FilterSpecError(f"{what} {path}: not a readable .npy ({brief_reason(exc)})") from None
    # np.load opens a zip as an .npz archive, whatever the suffix
    if not isinstance(array, np.ndarray):
        array.close()
        raise FilterSpecError(f"{what} {path}: an .npz archive, not a .npy array")
    if array.dtype.kind not in "biuf":
        raise FilterSpecError(f"{what} {path}: dtype {array.dtype} is not numeric")
    return np.asarray(array, dtype=np.float64)


def load_taps_file(path: str | Path) -> np.ndarray:
    """Read taps from a .npy file or a UTF-8 text file (rows of numbers; ';' or newlines between
    rows; '#' starts a comment; a byte-order mark is allowed). At most MAX_TAPS_FILE_BYTES + 1
    bytes are read.

    Returns:
        2-D float64 host array (not yet validated for size).

    Raises:
        FilterSpecError: missing, too large, unreadable, not UTF-8, or not a matrix of numbers;
            the message names the file and quotes nothing of it (a bad value by row and column).
    """
    path = Path(path)
    if path.suffix.lower() == ".npy":
        return load_npy(path, what="custom taps file", max_bytes=MAX_TAPS_FILE_BYTES)
    data = read_file(path, "custom taps file", MAX_TAPS_FILE_BYTES)
    text = decode_text(data, f"custom taps file {path}", FilterSpecError)
    lines = [ln.split("#", 1)[0].strip() for ln in text.replace(";", "\n").splitlines()]
    return parse_inline_taps(";".join(ln for ln in lines if ln), what=f"custom taps file {path}",
                             quote=False)


def validate_taps(taps: Any, *, what: str = "taps") -> np.ndarray:
    """Check a tap matrix and return it as a read-only (K, K) float32 C-contiguous array.

    Args:
        taps: anything ``np.asarray`` turns into a 2-D numeric array (host memory).
        what: how to name it in error messages.

    Raises:
        FilterSpecError: not 2-D, not square, even or out-of-range size, non-finite or
            too-large values, or not real numbers (complex, text or other objects).
    """
    try:
        array = np.asarray(taps)
    except (TypeError, ValueError) as exc:
        raise FilterSpecError(f"{what}: not a numeric matrix ({exc})") from None
    if array.ndim == 1 and array.size == 1:
        array = array.reshape(1, 1)
    if array.ndim != 2:
        raise FilterSpecError(f"{what}: expected a 2-D matrix, got shape {array.shape}")
    rows, cols = array.shape
    if rows != cols or rows % 2 == 0:
        raise FilterSpecError(f"{what}: expected an odd square matrix, got {rows}x{cols}")
    if rows > MAX_SIZE:
        raise FilterSpecError(f"{what}: {rows}x{cols} is too large (at most {MAX_SIZE}x{MAX_SIZE})")
    array = _real_taps(array, what)
    if not np.all(np.isfinite(array)):
        raise FilterSpecError(f"{what}: contains NaN or infinity")
    largest = float(np.max(np.abs(array)))
    if largest > MAX_ABS_TAP:
        raise FilterSpecError(f"{what}: |tap| = {largest:g} exceeds {MAX_ABS_TAP:g}")
    result = np.ascontiguousarray(array, dtype=np.float32)
    result.setflags(write=False)
    return result


def _real_taps(array: np.ndarray, what: str) -> np.ndarray:
    """A (K, K) host array of real numbers as float64; complex taps are refused as a complex .npy
    is (casting would drop the imaginary part with only a warning), and so is an object such as None
    (it would turn into NaN).

    Raises:
        FilterSpecError: a dtype other than bool, integer or float, or objects that are not real
            numbers.
    """
    if array.dtype.kind == "O":
        for value in array.flat:
            if not isinstance(value, numbers.Real):
                raise FilterSpecError(f"{what}: taps must be real numbers, got "
                                      f"{type(value).__name__}")
    elif array.dtype.kind not in "biuf":
        raise FilterSpecError(f"{what}: dtype {array.dtype} is not numeric; taps must be real "
                              f"numbers")
    try:
        return array.astype(np.float64)
    except OverflowError:  # a Python int beyond float64
        raise FilterSpecError(f"{what}: |tap| exceeds {MAX_ABS_TAP:g}") from None
