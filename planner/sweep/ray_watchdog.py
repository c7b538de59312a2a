"""Ends the local Ray instance a sweep started, when the sweep's process ends (however it ends).

Run as a script (standard library only, so it starts fast and imports nothing of planner)::

    python ray_watchdog.py TOKEN      # standard input: a pipe whose write end only the driver holds

Why: when the driver of a local Ray instance is killed (SIGKILL, OOM killer), Ray's GCS server
and raylet die with it (they are started with a parent-death signal), but the raylet's
DashboardAgent and RuntimeEnvAgent stay alive for minutes (measured with Ray 2.60: still alive
57 s after ``kill -9`` of ``planner capacity --executor ray``), and so may workers.

How: `planner.sweep.engine` starts this process in its own session (so a terminal's Ctrl-C does
not reach it) before ``ray.init``, with the environment variable ``PLANNER_RAY_OWNER=TOKEN`` set
while Ray starts, so every process of that Ray instance inherits it (GCS, raylet, agents,
workers: the raylet hands its environment on).  Once Ray is up the driver writes the instance's
session directory (``/tmp/ray/session_<date>_<time>_<µs>_<driver pid>``) to the pipe, one line.
A process of the instance is one whose initial environment (``/proc/PID/environ``) holds the
token, or that has a file of the session directory open (every Ray process keeps its log files
open there): the session directory named by the driver, or, when the driver was stopped before it
could name it (Ctrl-C or SIGKILL during ``ray.init``), any ``session_*_<driver pid>`` directory —
the token starts with the driver's pid.  Both marks, because Ray's agents rename themselves with
setproctitle, which may overwrite the environment block that ``/proc`` shows (seen: the token
visible in 2 of 3 starts).  The driver keeps the write end of the pipe open for
its whole life; the kernel closes it when the driver exits, normally or not, and this process then
reads end-of-file.  It sends SIGTERM to every process of the instance, then SIGKILL to those
still alive 0.5 s later, repeating until none is left (at most ~5 s), and exits.  Nothing else is
touched: a Ray cluster the sweep only connected to has neither mark.  Linux only (``/proc``).
"""

from __future__ import annotations

import os
import re
import signal
import sys
import time

ENV = "PLANNER_RAY_OWNER"


def _has_open_file_under(pid: str, session: re.Pattern[str]) -> bool:
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            if session.search(os.readlink(f"/proc/{pid}/fd/{fd}")):
                return True
        except OSError:
            continue
    return False


def session_pattern(token: str, session_dir: str | None) -> re.Pattern[str]:
    """Paths inside the instance's session directory: the one named, else any of the driver's pid."""
    if session_dir:
        return re.compile("^" + re.escape(session_dir.rstrip("/") + "/"))
    driver_pid = token.split("-", 1)[0]
    return re.compile(r"/session_\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d_\d+_" + re.escape(driver_pid) + "/")


def marked_processes(token: str, session_dir: str | None = None) -> list[int]:
    """PIDs (other than this one) of the instance: ``PLANNER_RAY_OWNER=token`` in the initial
    environment, or a file of the session directory open (module docstring)."""
    needle = f"{ENV}={token}".encode()
    session = session_pattern(token, session_dir)
    found = []
    me = os.getpid()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as fh:
                environ = fh.read()
        except OSError:  # gone, or not ours
            continue
        if needle in environ.split(b"\0") or _has_open_file_under(name, session):
            found.append(int(name))
    return found


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for its reaper counts as ended)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            state = fh.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in (b"Z", b"X")


def end_processes(token: str, session_dir: str | None = None, rounds: int = 10) -> None:
    """SIGTERM, then SIGKILL after 0.5 s, every marked process; repeated while new ones show up."""
    for _ in range(rounds):
        pids = [p for p in marked_processes(token, session_dir) if _alive(p)]
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGTERM)
            except OSError:
                pass
        deadline = time.monotonic() + 0.5
        while time.monotonic() < deadline and any(_alive(p) for p in pids):
            time.sleep(0.05)
        for pid in pids:
            if _alive(pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass


def main(argv: list[str]) -> int:
    if len(argv) != 2 or not argv[1]:
        print("usage: ray_watchdog.py TOKEN (standard input: the driver's pipe)", file=sys.stderr)
        return 2
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    received = b""
    while True:  # until the driver's end of the pipe is closed
        try:
            chunk = os.read(0, 4096)
        except InterruptedError:
            continue
        except OSError:
            break
        if not chunk:
            break
        received += chunk
    lines = [line for line in received.decode(errors="replace").splitlines() if line.startswith("/")]
    try:
        end_processes(argv[1], lines[-1] if lines else None)
    except Exception:  # noqa: BLE001 - one more pass on the token alone rather than none
        end_processes(argv[1], None)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
