"""Output files: checked before any work, never overwritten without ``--force``, written atomically.

The rules every command that writes files follows (``--out``, ``--out-dir``, generated instances):

* **Checked first.**  `check_output_file` / `check_output_dir` run before any solving, so a refusal
  costs nothing: the path must not be a directory (a file is wanted) or a file (a directory is
  wanted), it must not exist unless ``force``, and its nearest existing ancestor must be a directory
  in which a file can be created (probed with a temporary file that is removed at once, since
  ``os.access`` answers "writable" to root on read-only pseudo file systems such as ``/proc``).
  Missing parent directories are created only when the file is written.
* **Never overwritten without force.**  Without ``force`` the final step is ``link(2)`` of the
  finished temporary file to the target, which fails if the target appeared meanwhile (another
  process, a second run): the check and the write cannot race.  File systems without hard links
  fall back to check-then-rename.
* **Atomic, with private temporary names.**  The text goes to a temporary file created by
  ``mkstemp`` in the target's directory (``.NAME.<random>.tmp``: never a name a user's file could
  already have), then is renamed (or linked) into place.  The file gets the mode a plain ``open``
  would give it (0666 less the umask).  On any failure, KeyboardInterrupt included, the temporary
  file is removed: an interrupted write leaves neither a partial target nor a temporary file.
* `write_files` writes several files all-or-nothing (e.g. two CSV tables): every temporary file is
  finished first, then they are placed; if placing one fails, the files this call created are
  removed again (files that existed before, replaced with ``force``, cannot be restored).
"""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

from planner.core import interrupt
from planner.errors import PlannerError


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _nearest_existing(path: Path) -> Path:
    """``path`` itself or its closest ancestor that exists (``.`` for a relative path with none)."""
    current = path
    while not os.path.lexists(current):
        parent = current.parent
        if parent == current:
            break
        current = parent
    return current


def _check_can_create_in(directory: Path, option: str, target: Path) -> None:
    """One line unless a file can be created in ``directory`` (or in a directory made under it)."""
    anchor = _nearest_existing(directory)
    if not anchor.is_dir():
        raise PlannerError(f"{option} {target}: {anchor} is not a directory")
    try:
        fd, probe = tempfile.mkstemp(dir=anchor, prefix=".planner-write-check.", suffix=".tmp")
    except OSError as error:
        raise PlannerError(f"{option} {target}: cannot write in {anchor} ({error.strerror or error})") from None
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(probe)


def check_output_file(path: Path | None, force: bool, option: str = "--out") -> None:
    """Refuse, before any work, an output file that could not or must not be written (module docstring)."""
    if path is None:
        return
    path = Path(path)
    if path.is_dir():
        raise PlannerError(f"{option} {path}: is a directory; give a file name")
    if os.path.lexists(path) and not force:
        raise PlannerError(f"{path}: already exists; pass --force to overwrite it")
    _check_can_create_in(path.parent, option, path)


def check_output_dir(path: Path, option: str = "--out") -> None:
    """Refuse, before any work, an output directory that is a file or cannot be created or written."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise PlannerError(f"{path}: {option} must be a directory")
    _check_can_create_in(path, option, path)


def _temporary(path: Path, data: bytes) -> Path:
    """A finished temporary copy of ``data`` beside ``path`` (unique name, mode as for ``open``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    tmp = Path(name)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, 0o666 & ~_umask())
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    return tmp


def _place(tmp: Path, path: Path, force: bool) -> None:
    """Move the finished ``tmp`` to ``path``; without ``force`` fail if ``path`` exists (even if it just appeared)."""
    if force:
        os.replace(tmp, path)
        return
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise PlannerError(f"{path}: already exists; pass --force to overwrite it") from None
    except OSError as error:
        if error.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK, errno.ENOSYS):
            raise
        if os.path.lexists(path):  # no hard links on this file system: check, then rename
            raise PlannerError(f"{path}: already exists; pass --force to overwrite it") from None
        os.replace(tmp, path)
        return
    os.unlink(tmp)


def write_files(files: Sequence[tuple[Path, bytes | str]], force: bool, option: str = "--out") -> None:
    """Write every file or none (module docstring); `PlannerError` with one line on failure."""
    temps: list[tuple[Path, Path, bool]] = []
    placed: list[Path] = []
    current = Path(files[0][0]) if files else None
    try:
        for path, data in files:
            current = path = Path(path)
            if path.is_dir():
                raise PlannerError(f"{option} {path}: is a directory; give a file name")
            if os.path.lexists(path) and not force:
                raise PlannerError(f"{path}: already exists; pass --force to overwrite it")
            existed = os.path.lexists(path)
            temps.append((_temporary(path, data.encode() if isinstance(data, str) else data), path, existed))
        interrupt.check()  # Ctrl-C while the files were prepared: none is put in place
        for tmp, path, _ in temps:
            current = path
            _place(tmp, path, force)
            placed.append(path)
    except BaseException as error:
        for tmp, path, existed in temps:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
            if path in placed and not existed:
                with contextlib.suppress(OSError):
                    path.unlink()
        if isinstance(error, OSError):
            raise PlannerError(f"{option} {current}: cannot write ({error.strerror or error})") from None
        raise


def replace_atomically(path: Path | str, data: bytes | str) -> Path:
    """Library writers (cost models, distributions, instances): a private temporary file renamed over
    ``path``; the caller has already decided that ``path`` may be replaced.  Raises ``OSError``."""
    path = Path(path)
    tmp = _temporary(path, data.encode() if isinstance(data, str) else data)
    try:
        interrupt.check()
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    return path


def write_file(path: Path, data: bytes | str, force: bool, option: str = "--out") -> None:
    """Write one file atomically; never over an existing one without ``force`` (module docstring)."""
    write_files([(Path(path), data)], force, option)
