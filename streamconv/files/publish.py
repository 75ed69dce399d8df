"""Every file streamconv writes: never an input, never clobbered, complete or absent.

A video output, ``--stats-json``, ``bench --json``/``--chart`` and any later report go through
here, so they share one set of rules:

- :func:`check_output_path` refuses, before any work, a target that is an input (by path,
  symlink or hard link, ``file:`` URLs included; any file the input reads, as
  :mod:`streamconv.files.inputs` lists them: standard input's, a concat list's), a folder, a name
  the OS refuses, a missing folder, or an existing file without ``overwrite``.
- :class:`AtomicFile` writes under a unique temporary name beside the target, created
  exclusively (``O_EXCL | O_NOFOLLOW``: a link planted at that name is never followed), and
  :meth:`AtomicFile.publish` moves it into place. Without ``overwrite`` a file that appeared
  at the target meanwhile is never replaced (``renameat2(RENAME_NOREPLACE)``, else
  ``link()``); with it, the replaced file's permission bits are kept. Every failure to publish
  removes the temporary file and raises :class:`OutputError` (exit 6).
"""

from __future__ import annotations

import ctypes
import errno
import os
import re
import secrets
import stat
import threading
from pathlib import Path
from typing import BinaryIO, Iterable

from ..errors import OutputError
from .inputs import OpenFile, files_read, local_path
from .leftovers import hold_writer_lock, release_writer_lock, remove_abandoned
from .numbered import is_named_by, is_pattern

_NAME_MAX = 255
"""Bytes in one file name on Linux file systems (ext4, xfs, btrfs, tmpfs)."""


def without_file_scheme(spec: str) -> str:
    """An output spec with FFmpeg's ``file:`` protocol prefix taken off: the rest is the path
    (``file:a.mp4`` is ``a.mp4``, as ffmpeg writes it); any other spec as it is."""
    return str(local_path(spec)) if spec.startswith("file:") else spec


class ProtectedFiles(list):
    """(role, file) pairs already expanded by :func:`protected_files`, so that checking many
    outputs against the same inputs lists an input sequence's folder once, not per output."""


def protected_files(protect) -> ProtectedFiles:
    """(role, file) pairs from ``protect``: a mapping of role -> spec (``{"the output": ...}``),
    or specs that are all inputs, or pairs this function made already (returned as they are).
    Each spec stands for every file it reads (:func:`streamconv.files.inputs.files_read`): an image
    sequence's images, a concat list's entries, the file standard input is; URLs for none."""
    if isinstance(protect, ProtectedFiles):
        return protect
    pairs = protect.items() if isinstance(protect, dict) else (("the input", spec)
                                                               for spec in protect)
    return ProtectedFiles((role if isinstance(file, Path) else f"{role} ({file})", file)
                          for role, spec in pairs for file in files_read(spec))


def _same_file(a: Path | OpenFile, b: Path) -> bool:
    """True when ``a`` and ``b`` are one file: one resolved path, or one inode (a hard link, or
    the file a descriptor has open)."""
    if isinstance(a, OpenFile):
        return a.is_file(b)
    try:
        if a.resolve() == b.resolve():
            return True
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except (OSError, RuntimeError):  # a name the OS refuses, a symlink loop
        return False


def check_output_path(output: str | os.PathLike, *, overwrite: bool, protect: Iterable = (),
                      what: str = "output") -> Path:
    """Refuse an output that would lose data or cannot be written, before any work is done.

    Args:
        output: the file to write.
        overwrite: whether an existing file may be replaced.
        protect: files the output must never be: input specs (paths or ``file:`` URLs), a
            mapping of role -> spec (``{"the output": "out.mp4"}``) that messages name, or
            :func:`protected_files`' result.
        what: how messages name the file (``output``, ``--stats-json``...).

    Returns:
        The output as a Path.

    Raises:
        OutputError: it is an input, a folder, a device, FIFO or socket, its folder is missing or
            not writable, its name is too long or otherwise refused by the OS, or it exists and
            ``overwrite`` is False.
    """
    path = Path(output)
    protected = protected_files(protect)
    for role, other in protected:
        if _same_file(other, path):
            raise OutputError(f"{what} is the same file as {role}: {output}")
    for role, other in protected:
        # a future image
        if isinstance(other, Path) and is_pattern(other) and is_named_by(other, path):
            raise OutputError(f"{what} is one of the files of {role} ({other}): {output}")
    check_name_lengths(path, what)
    try:
        if not path.parent.is_dir():
            raise OutputError(f"{what} folder does not exist: {path.parent}")
        if path.is_dir():
            raise OutputError(f"{what} is a folder: {output}")
        if not os.access(path.parent, os.W_OK | os.X_OK):
            raise OutputError(f"{what} folder is not writable: {path.parent}")
        _refuse_special(path, what)  # first: --overwrite would not replace one either
        if os.path.lexists(path) and not overwrite:
            raise OutputError(f"{what} exists: {output} (pass --overwrite to replace it)")
    except OutputError:
        raise
    except OSError as exc:
        raise OutputError(f"cannot write {what} {output}: {exc.strerror or exc}") from None
    return path


def check_name_lengths(path: str | os.PathLike, what: str) -> None:
    """Refuse a path with a name (the file's or a folder's) over the limit, which the OS refuses
    at every look (ENAMETOOLONG), existence checks too.

    Raises:
        OutputError: naming the part too long, its length and the limit.
    """
    for part in Path(path).parts:
        size = len(os.fsencode(part))
        if size > _NAME_MAX:
            raise OutputError(f"{what} has a name too long for the file system ({size} bytes; the "
                              "limit is "
                              f"{_NAME_MAX}): {part[:60]}...")


def _refuse_special(path: Path, what: str) -> None:
    """Refuse to replace a device such as /dev/null, a FIFO or a socket at ``path``: it would
    be replaced by a regular file (a system's /dev/null, when run as root). A folder is left
    to rename(2), which never replaces a non-empty one."""
    try:
        # through a link too: /dev/stdout is a link to a terminal or pipe
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) or stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
        hint = (" (leave out -o to discard the frames, or give -o - for standard output)"
                if what == "output" else "")
        raise OutputError(f"{what} is not a regular file (a device, pipe or socket): {path}; "
                          f"it is never replaced{hint}")


_TOKEN_HEX = 8  # the random part of a temporary name, in hex digits


def _temp_parts(target: Path) -> tuple[str, str]:
    """(stem, suffix) of ``target``'s temporary names: the extension kept (it names the
    container) unless over 32 bytes, the stem cut so that the name stays within the limit."""
    suffix = target.suffix if len(os.fsencode(target.suffix)) <= 32 else ""
    room = _NAME_MAX - len(os.fsencode(f"..{'0' * _TOKEN_HEX}.partial{suffix}"))
    return os.fsencode(target.stem)[:room].decode(errors="ignore"), suffix


def _temp_name(target: Path) -> str:
    """``.STEM.RANDOM.partial.EXT``: hidden, unique (see :func:`_temp_parts`)."""
    stem, suffix = _temp_parts(target)
    return f".{stem}.{secrets.token_hex(_TOKEN_HEX // 2)}.partial{suffix}"


def claim_path(target: str | os.PathLike, token: str) -> Path:
    """``.STEM.TOKEN.claim.EXT`` beside ``target`` (``token``: 8 hex digits): a name a writer can
    find again (a retried task), removed with the temporary files a killed writer left once a
    batch ends; never taken for an abandoned temporary file while it runs."""
    stem, suffix = _temp_parts(Path(target))
    return Path(target).with_name(f".{stem}.{token}.claim{suffix}")


def temp_name_regex(target: str | os.PathLike, *, claims: bool = True) -> str:
    """A regex of exactly the temporary names :class:`AtomicFile` gives ``target`` and, with
    ``claims``, of the claims (:func:`claim_path`) beside it: no other file's (to find those a
    killed writer left)."""
    stem, suffix = _temp_parts(Path(target))
    kinds = r"\.(?:partial|claim)" if claims else r"\.partial"
    return re.escape(f".{stem}.") + f"[0-9a-f]{{{_TOKEN_HEX}}}" + kinds + re.escape(suffix)


_TEMP_NAME = re.compile(r"\.(.+)\.[0-9a-f]{%d}\.partial(\.[^.]*)?" % _TOKEN_HEX)


def temp_target_name(name: str) -> str | None:
    """The name of the file that ``name`` is an :class:`AtomicFile` temporary file of (as far
    as the name tells: a very long name's stem was cut), or None if it is not one."""
    match = _TEMP_NAME.fullmatch(name)
    return None if match is None else match[1] + (match[2] or "")


class AtomicFile:
    """A file written under a temporary name beside ``target`` and published whole.

    Args:
        target: where the finished file goes.
        overwrite: replace a file at ``target`` (keeping its permission bits); otherwise
            publishing never replaces one, even one that appeared after the work began.
        protect: as for :func:`check_output_path`; checked again at publishing.
        what: how messages name the file.
        sweep: on :meth:`create`, first remove the temporary files of ``target`` that killed
            writers left (:func:`streamconv.files.leftovers.remove_abandoned`); a live writer's
            stay.

    :meth:`create` makes the temporary file; :meth:`publish` moves it into place;
    :meth:`discard` removes it. ``publish`` and ``discard`` may race from two threads (a
    second Ctrl-C while a file is being finished): whichever comes first wins.

    A sink's output target: ``container_options`` are the muxer options it needs (none), and
    ``published_as_written`` is False (the file appears only once whole), unlike the targets of
    :mod:`streamconv.io.sinks.targets`.
    """

    container_options: dict[str, str] = {}
    published_as_written = False

    def __init__(self, target: str | os.PathLike, *, overwrite: bool = False,
                 protect: Iterable = (), what: str = "output", sweep: bool = False) -> None:
        self.target = Path(target)
        self.overwrite, self.sweep = overwrite, sweep
        self.protect = protect if isinstance(protect, (dict, ProtectedFiles)) else tuple(protect)
        self.what = what
        self.temp: Path | None = None
        self.handle: BinaryIO | None = None
        self._writer_lock: int | None = None  # held while the temporary file is ours (leftovers)
        self._lock = threading.Lock()
        self._ended = False  # published or discarded

    def create(self) -> BinaryIO:
        """Create the temporary file exclusively (never following a link) and open it for
        binary writing; its ``name`` keeps the target's extension.

        Raises:
            OutputError: it cannot be created (permissions, a full disk, a read-only folder).
        """
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW",
                                                               0) | getattr(os, "O_CLOEXEC", 0)
        if self.sweep:  # a Ray task's claim beside it is no temporary file: it outlives its writer
            remove_abandoned(self.target.parent,
                             re.compile(temp_name_regex(self.target, claims=False)).fullmatch)
        for _attempt in range(100):
            temp = self.target.with_name(_temp_name(self.target))
            try:
                fd = os.open(temp, flags, 0o666)  # the umask applies, as for any new file
            except FileExistsError:
                continue  # someone else's file (or a planted link) at that name: pick another
            except OSError as exc:
                raise OutputError(f"cannot write {self.what} {self.target}: "
                                  f"{exc.strerror or exc}") from None
            self.temp = temp
            self._writer_lock = hold_writer_lock(temp)
            self.handle = os.fdopen(fd, "wb")
            self.handle.raw.name = str(temp)  # PyAV guesses the container from the name
            return self.handle
        raise OutputError(f"cannot write {self.what} {self.target}: no free temporary name beside "
                          "it")

    def publish(self) -> None:
        """Flush the temporary file to disk and move it to the target.

        Raises:
            OutputError: the target appeared meanwhile (without ``overwrite``), became an
                input, or the move failed; the temporary file is removed.
        """
        with self._lock:
            if self._ended:
                raise OutputError(f"{self.what} {self.target} was discarded; not published")
            doing = "write"
            try:
                if self.handle is not None and not self.handle.closed:
                    self.handle.flush()
                    os.fsync(self.handle.fileno())  # complete on disk before it has the name
                    self.handle.close()
                doing = "publish"
                self._move()
            except OSError as exc:
                self._remove_temp()
                if isinstance(exc, OutputError):
                    raise
                if exc.errno == errno.EEXIST:
                    raise OutputError(f"{self.what} {self.target} appeared while it was being "
                                      "written; "
                                      f"left as it is (pass --overwrite to replace it)") from None
                raise OutputError(f"cannot {doing} {self.what} {self.target}: "
                                  f"{exc.strerror or exc}; nothing was left behind") from None
            finally:
                self._ended = True
                self._release()

    def discard(self) -> None:
        """Remove the temporary file (the target is left as it was); safe to call again."""
        with self._lock:
            if self._ended:
                return
            self._ended = True
            self._remove_temp()
            self._release()

    def _release(self) -> None:
        """Let go of the writer's lock: the temporary file has its final name, or is gone."""
        release_writer_lock(self._writer_lock)
        self._writer_lock = None

    def _remove_temp(self) -> None:
        if self.handle is not None and not self.handle.closed:
            try:
                self.handle.close()
            except OSError:
                pass
        if self.temp is not None:
            try:
                os.unlink(self.temp)
            except FileNotFoundError:
                pass

    def _move(self) -> None:
        for role, other in protected_files(self.protect):
            if _same_file(other, self.target):
                raise OutputError(f"{self.what} became the same file as {role}: {self.target}; "
                                  f"not replaced")
        if not self.overwrite:
            _rename_noreplace(self.temp, self.target)
            return
        _refuse_special(self.target, self.what)
        try:
            old = os.lstat(self.target)
        except FileNotFoundError:
            old = None
        if old is not None and stat.S_ISREG(old.st_mode):
            os.chmod(self.temp, stat.S_IMODE(old.st_mode))  # a replaced 0640 file stays 0640
        os.replace(self.temp, self.target)


def write_atomically(target: str | os.PathLike, data: bytes | str, *, overwrite: bool = False,
                     protect: Iterable = (), what: str = "output", sweep: bool = True) -> None:
    """Write a small file (a report, a manifest) whole, with :class:`AtomicFile`'s rules.

    Args:
        data: the bytes, or text written as UTF-8.
        sweep: first remove the temporary files of ``target`` that killed writers left (as
            :class:`AtomicFile`'s ``sweep``); a file rewritten often sweeps on its first write.

    Raises:
        OutputError: as :func:`check_output_path` and :meth:`AtomicFile.publish`; a failed
            write (a full disk) leaves nothing behind.
    """
    target = check_output_path(target, overwrite=overwrite, protect=protect, what=what)
    file = AtomicFile(target, overwrite=overwrite, protect=protect, what=what, sweep=sweep)
    handle = file.create()
    try:
        handle.write(data.encode("utf-8") if isinstance(data, str) else data)
    except BaseException as exc:
        file.discard()
        if isinstance(exc, OSError):
            raise OutputError(f"cannot write {what} {target}: {exc.strerror or exc}; "
                              f"nothing was left behind") from None
        raise
    file.publish()


_AT_FDCWD = -100
_RENAME_NOREPLACE = 1


def _load_renameat2():
    try:
        function = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):  # not glibc >= 2.28, or not Linux
        return None
    function.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                         ctypes.c_uint)
    function.restype = ctypes.c_int
    return function


_renameat2 = _load_renameat2()


def _rename_noreplace(source: Path, target: Path) -> None:
    """Move ``source`` to ``target`` atomically, failing with EEXIST if ``target`` exists.

    ``renameat2(RENAME_NOREPLACE)`` where the kernel and file system have it; else a hard link
    (also refused atomically when the name exists) and an unlink; on a file system with
    neither, a check and a rename, which leaves a short window.
    """
    if _renameat2 is not None:
        if _renameat2(_AT_FDCWD, os.fsencode(source), _AT_FDCWD, os.fsencode(target),
                      _RENAME_NOREPLACE) == 0:
            return
        code = ctypes.get_errno()
        if code not in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP):
            raise OSError(code, os.strerror(code), str(target))
    try:
        os.link(source, target)
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK):
            raise
    else:
        os.unlink(source)
        return
    if os.path.lexists(target):
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(target))
    os.rename(source, target)
