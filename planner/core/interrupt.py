"""Ctrl-C: a process-wide request that every long-running part honours within about a second.

Python turns SIGINT into KeyboardInterrupt only in the main thread and only between bytecodes, and
a KeyboardInterrupt raised while a weakref or import-lock callback runs is printed as "Exception
ignored" and lost (seen: `planner compare batching` then ran on for 8 s and exited 0).  So the CLI
(`sigint_handler`, installed by `planner.cli.main.main`) records the request as well as raising:

* `requested()` is true from the first SIGINT on; native solves poll it (HiGHS's interrupt
  callbacks, `planner.solver.highs_backend`; Gurobi's callback, `planner.solver.gurobi_backend`)
  and output writers check it (`check`) before a file is put in place, so a lost
  KeyboardInterrupt can neither keep a solve running nor let a result file appear;
* a watchdog thread started by the first SIGINT calls ``on_timeout`` (the CLI prints
  "interrupted" and exits 130) if the process has not ended `WATCHDOG_S` seconds later.

Library users who never install the handler see Python's usual behaviour.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Callable, Iterator

#: Seconds after the first Ctrl-C at which the watchdog ends a process that is still running.
WATCHDOG_S = 1.0

_REQUESTED = threading.Event()


def requested() -> bool:
    """Whether Ctrl-C was pressed (the CLI's handler is installed and SIGINT arrived)."""
    return _REQUESTED.is_set()


def check() -> None:
    """Raise KeyboardInterrupt if Ctrl-C was pressed (e.g. before an output file is put in place)."""
    if _REQUESTED.is_set():
        raise KeyboardInterrupt


@contextlib.contextmanager
def sigint_handler(on_timeout: Callable[[], None]) -> Iterator[None]:
    """Within the block, SIGINT sets `requested`, starts the watchdog and raises KeyboardInterrupt.

    Installed only in the main thread and only over Python's default handler (a shell that
    started the process with SIGINT ignored, or a host with its own handler, keeps it); the
    previous handler is restored on exit.
    """
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield
        return

    def watchdog() -> None:
        time.sleep(WATCHDOG_S)
        on_timeout()

    def handler(signum, frame) -> None:  # noqa: ANN001
        if not _REQUESTED.is_set():
            _REQUESTED.set()
            threading.Thread(target=watchdog, name="planner-interrupt-watchdog", daemon=True).start()
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        _REQUESTED.clear()
