"""Standard output belongs to planner: native libraries never write to it.

Solver libraries print from C/C++ straight to file descriptor 1, below Python's ``sys.stdout``
(highspy ≥ 1.16 prints a two-line banner from the ``Highs()`` constructor whatever its options;
Gurobi prints license notices).  A ``--json`` result must be the only thing on stdout, so two
guards exist:

* `reserve_stdout` (the CLI, once per process): file descriptor 1 is pointed at stderr for the rest
  of the process, and ``sys.stdout`` is re-opened on a private duplicate of the original stdout.
  Whatever native code — or a child process started afterwards, which inherits descriptor 1 —
  writes to "stdout" reaches stderr; only Python's ``print`` / rich output reaches the real stdout.
* `native_stdout_to_stderr` (library code around a native call known to print): the same
  redirection for the duration of a ``with`` block, for library users and pool workers that did
  not call `reserve_stdout`.  It is a no-op once `reserve_stdout` has run.
* `native_stdout_discarded`: descriptor 1 points at the null device for a ``with`` block, for
  native output that is noise to every user (the HiGHS banner: on stderr it would be an extra line
  before a one-line error).
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import os
import sys
import threading
from collections.abc import Iterator

_LOCK = threading.RLock()
_RESERVED = False


def _flush_c_stdio() -> None:
    """Flush C's stdio buffers, so text a native library buffered lands where it was written."""
    with contextlib.suppress(Exception):
        ctypes.CDLL(None).fflush(None)


def reserve_stdout() -> None:
    """Point descriptor 1 at stderr for the rest of the process; keep ``sys.stdout`` on the real stdout.

    Idempotent.  Does nothing when descriptors 1 or 2 are not open, or when ``sys.stdout`` is not the
    process's own stdout (an embedding host or a test harness such as pytest's ``capsys`` redirected it,
    and Python-level output must keep going where it pointed).
    """
    global _RESERVED
    with _LOCK:
        if _RESERVED or sys.stdout is not sys.__stdout__:
            return
        try:
            sys.stdout.flush()
            _flush_c_stdio()
            saved = os.dup(1)
            os.dup2(2, 1)
        except (OSError, ValueError, AttributeError):
            return
        encoding = getattr(sys.stdout, "encoding", None) or "utf-8"
        errors = getattr(sys.stdout, "errors", None) or "strict"
        line_buffering = bool(getattr(sys.stdout, "line_buffering", False))
        sys.stdout = io.TextIOWrapper(os.fdopen(saved, "wb", closefd=True), encoding=encoding, errors=errors,
                                      line_buffering=line_buffering, write_through=False)
        _RESERVED = True


def stdout_reserved() -> bool:
    return _RESERVED


@contextlib.contextmanager
def native_stdout_to_stderr() -> Iterator[None]:
    """Within the block, whatever native code writes to descriptor 1 goes to stderr."""
    if _RESERVED:
        yield
        return
    with _LOCK:
        try:
            with contextlib.suppress(Exception):
                sys.stdout.flush()
            saved = os.dup(1)
        except OSError:
            yield
            return
        try:
            os.dup2(2, 1)
            yield
        finally:
            with contextlib.suppress(Exception):
                sys.stdout.flush()
            _flush_c_stdio()
            os.dup2(saved, 1)
            os.close(saved)


@contextlib.contextmanager
def native_stdout_discarded() -> Iterator[None]:
    """Within the block, whatever native code writes to descriptor 1 is dropped (restored afterwards)."""
    with _LOCK:
        try:
            with contextlib.suppress(Exception):
                sys.stdout.flush()
            _flush_c_stdio()
            saved = os.dup(1)
            null = os.open(os.devnull, os.O_WRONLY)
        except OSError:
            yield
            return
        try:
            os.dup2(null, 1)
            yield
        finally:
            _flush_c_stdio()
            os.dup2(saved, 1)
            os.close(saved)
            os.close(null)
