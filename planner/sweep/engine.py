"""The sweep engine shared by `planner capacity` and `planner compare all`.

A sweep is a list of `SweepPoint` (a unique ``key`` and JSON-serialisable ``params``) and one
**module-level** function ``fn(params) -> result`` (JSON-serialisable), so it can run in another
process or on a Ray cluster.  `run_sweep`:

1. connects the executor first (an unreachable Ray address fails here, before the results
   database is even opened, so nothing in it can be touched);
2. opens the results database (`planner.sweep.store.ResultsStore`) and skips every point already
   ``done`` there — re-running the same command resumes a killed sweep;
3. hands the remaining points to the executor, at most ``workers`` at a time, logging each hand-off
   in ``attempts``; every finished point is committed at once in its own transaction by this
   process (the only writer), so a SIGKILL loses at most the points still in flight;
4. shows a progress bar (points done / total, failures, elapsed, ETA) on stderr.

Executors: ``serial`` (in this process; debugging and small tests), ``local`` (a process pool
sized to the machine, ``os.cpu_count()``, spawn start method so no solver thread state is forked)
and ``ray`` (``ray.init(address=...)``; without an address a local Ray instance, or the one already
initialised by the caller).  A point that raises is recorded as ``failed`` with its one-line error
and retried by the next run; the other points go on.

Ending.  Ctrl-C (or any exception) in the sweep process stops the workers at once instead of
waiting for the points in flight: pool workers ignore SIGINT themselves and are terminated by the
sweep process; Ray tasks in flight are cancelled with ``force=True``.  Points in flight are not
recorded (the next run solves them).  Helpers never outlive the sweep process, even when it is
SIGKILLed: pool workers watch their parent (`_exit_with_parent`), and a local Ray instance
started here gets a watchdog process (`planner.sweep.ray_watchdog`) that ends every process of
that instance when the sweep process is gone.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from planner.errors import PlannerError
from planner.sweep.store import ResultsStore

EXECUTORS = ("local", "serial", "ray")


@dataclass(frozen=True)
class SweepPoint:
    """One point of a sweep: ``key`` identifies it in the results database across runs."""

    key: str
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SweepSummary:
    total: int
    skipped: int  # already done in the database before this run
    completed: int  # finished in this run
    failed: int  # failed in this run
    seconds: float
    executor: str
    failures: dict[str, str] = field(default_factory=dict)

    def line(self) -> str:
        return (f"{self.total} points: {self.skipped} already in the database, {self.completed} solved now"
                f" ({self.executor}), {self.failed} failed, {self.seconds:.1f} s")


def call_point(fn: Callable[[dict[str, Any]], Any], params: dict[str, Any]) -> tuple[bool, Any, float]:
    """Run one point in a worker: ``(ok, result or one-line error, seconds)``; never raises."""
    start = time.perf_counter()
    try:
        result = fn(params)
    except PlannerError as exc:
        return False, str(exc), time.perf_counter() - start
    except Exception as exc:  # a bug in one point must not stop the sweep; the message is kept
        return False, f"{type(exc).__name__}: {exc}", time.perf_counter() - start
    return True, result, time.perf_counter() - start


def check_ray_address(address: str, timeout_s: float = 3.0) -> None:
    """One clear line when ``host:port`` of a Ray address does not answer (before ray.init waits)."""
    if address in ("auto", "local"):
        return
    target = address.split("://", 1)[-1].rstrip("/")
    host, sep, port = target.rpartition(":")
    if not sep or not port.isdigit():
        raise PlannerError(f"--address {address!r}: expected HOST:PORT or ray://HOST:PORT")
    try:
        with socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout_s):
            pass
    except OSError as exc:
        raise PlannerError(f"--address {address}: no Ray cluster reachable ({exc.strerror or exc})") from None


class _Executor:
    """Submit ``call_point`` jobs, at most ``slots`` in flight; yield (key, outcome) as they finish."""

    slots: int

    def submit(self, key: str, fn: Callable, params: dict[str, Any]) -> None: ...

    def next_finished(self) -> list[tuple[str, tuple[bool, Any, float]]]: ...

    def close(self) -> None: ...

    def abort(self) -> None:
        """Stop at once (Ctrl-C, an error): by default the same as `close`."""
        self.close()


class _SerialExecutor(_Executor):
    def __init__(self) -> None:
        self.slots = 1
        self.pending: list[tuple[str, tuple[bool, Any, float]]] = []

    def submit(self, key: str, fn: Callable, params: dict[str, Any]) -> None:
        self.pending.append((key, call_point(fn, params)))

    def next_finished(self) -> list[tuple[str, tuple[bool, Any, float]]]:
        done, self.pending = self.pending, []
        return done

    def close(self) -> None:
        pass


def _exit_with_parent(parent_pid: int) -> None:
    """Pool-worker initializer: end this worker when the sweep process dies (e.g. SIGKILL).

    A killed parent cannot shut its pool down; without this, workers blocked on the task queue
    would live on as orphans.  A daemon thread checks once a second whether the parent is gone.
    SIGINT is ignored: a terminal's Ctrl-C reaches the whole process group, and the sweep process
    ends its workers itself (`_LocalExecutor.abort`).
    """
    import threading

    signal.signal(signal.SIGINT, signal.SIG_IGN)

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(1.0)
        os._exit(1)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


class _LocalExecutor(_Executor):
    def __init__(self, workers: int) -> None:
        self.slots = workers
        self.pool = ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
                                        initializer=_exit_with_parent, initargs=(os.getpid(),))
        self.futures: dict[Any, str] = {}

    def submit(self, key: str, fn: Callable, params: dict[str, Any]) -> None:
        self.futures[self.pool.submit(call_point, fn, params)] = key

    def next_finished(self) -> list[tuple[str, tuple[bool, Any, float]]]:
        done, _ = wait(list(self.futures), return_when=FIRST_COMPLETED)
        out = []
        for fut in done:
            key = self.futures.pop(fut)
            exc = fut.exception()
            out.append((key, call_point_outcome_of(exc) if exc else fut.result()))
        return out

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)

    def abort(self) -> None:
        """Terminate every worker now (points in flight are lost, not recorded) and let the pool go."""
        terminate = getattr(self.pool, "terminate_workers", None)  # Python ≥ 3.14
        if terminate is not None:
            with contextlib.suppress(Exception):
                terminate()
        else:
            for process in list((getattr(self.pool, "_processes", None) or {}).values()):
                with contextlib.suppress(Exception):
                    process.terminate()
        with contextlib.suppress(Exception):
            self.pool.shutdown(wait=True, cancel_futures=True)  # quick once the workers are gone
        self.pool = None  # type: ignore[assignment]
        import gc

        gc.collect()  # the pool's queues: their semaphores are released now, not reported leaked at exit


def call_point_outcome_of(exc: BaseException) -> tuple[bool, Any, float]:
    """A worker process that died (e.g. killed, out of memory) fails its point, not the sweep."""
    return False, f"worker process failed: {type(exc).__name__}: {exc}", 0.0


@contextlib.contextmanager
def _stderr_kept_aside() -> Iterator[None]:
    """Send file descriptor 2 to a temporary file while Ray connects.

    Ray's C++ core writes its retry warnings (one line a second for ~20 s when a GCS does not answer)
    straight to the process's stderr, below Python's logging; the user gets one line from us instead.
    The captured text is replayed only when PLANNER_DEBUG is set.
    """
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            if os.environ.get("PLANNER_DEBUG"):
                sink.seek(0)
                sys.stderr.write(sink.read().decode(errors="replace"))


#: Write ends of the pipes of the Ray watchdogs this process started: held open for the life of the
#: process (the kernel closes them when it exits, which is what the watchdogs wait for).
_RAY_WATCHDOG_PIPES: list[int] = []
_RAY_WATCHDOGS: list[subprocess.Popen] = []


def _start_ray_watchdog() -> str | None:
    """Start `planner.sweep.ray_watchdog` for a local Ray instance about to be started; its token.

    None where it cannot work (not Linux: no ``/proc``) or cannot start; the sweep then runs without it.
    `_tell_ray_watchdog` hands it the session directory once Ray is up.
    """
    if not sys.platform.startswith("linux"):
        return None
    from planner.sweep import ray_watchdog

    token = f"{os.getpid()}-{secrets.token_hex(8)}"
    read_end, write_end = os.pipe()  # both non-inheritable: no Ray process holds the write end
    try:
        _RAY_WATCHDOGS.append(subprocess.Popen(
            [sys.executable, ray_watchdog.__file__, token], stdin=read_end, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True))
    except OSError:
        os.close(write_end)
        return None
    finally:
        os.close(read_end)
    _RAY_WATCHDOG_PIPES.append(write_end)
    return token


def _tell_ray_watchdog(ray) -> None:  # noqa: ANN001
    """Send the session directory of the Ray instance just started to the newest watchdog (one line)."""
    if not _RAY_WATCHDOG_PIPES:
        return
    with contextlib.suppress(Exception):  # a private attribute of Ray: without it, the token alone marks
        session_dir = ray._private.worker._global_node.get_session_dir_path()
        os.write(_RAY_WATCHDOG_PIPES[-1], f"{session_dir}\n".encode())


@contextlib.contextmanager
def _environment(name: str, value: str | None) -> Iterator[None]:
    """``os.environ[name] = value`` within the block (nothing when ``value`` is None)."""
    if value is None:
        yield
        return
    before = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


RAY_MISSING = "--executor ray needs Ray, which is an optional extra: pip install 'planner[ray]'"


class _RayExecutor(_Executor):
    def __init__(self, address: str | None, workers: int | None) -> None:
        try:
            import ray
        except ModuleNotFoundError as exc:
            if exc.name != "ray":
                raise
            raise PlannerError(RAY_MISSING) from None

        if not ray.is_initialized():
            if address is not None:
                check_ray_address(address)
            # a local instance started here: its processes carry the watchdog's token (ray_watchdog)
            token = _start_ray_watchdog() if address in (None, "local") else None
            try:
                with _stderr_kept_aside(), _environment("PLANNER_RAY_OWNER", token):
                    ray.init(address=address, include_dashboard=False, log_to_driver=False,
                             logging_level="ERROR", configure_logging=True)
                if token is not None:
                    _tell_ray_watchdog(ray)
            except Exception as exc:  # ray raises ConnectionError, RuntimeError, ... with long texts
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                raise PlannerError(f"Ray: cannot connect to {address or 'a local instance'} ({first})") from None
        self.ray = ray
        cpus = int(ray.cluster_resources().get("CPU", 1))
        self.slots = max(1, min(workers or cpus, cpus))
        self.remote = ray.remote(num_cpus=1)(call_point)
        self.refs: dict[Any, str] = {}

    def submit(self, key: str, fn: Callable, params: dict[str, Any]) -> None:
        self.refs[self.remote.remote(fn, params)] = key

    def next_finished(self) -> list[tuple[str, tuple[bool, Any, float]]]:
        ready: list = []
        while not ready:  # short waits: Ctrl-C is seen between them (a blocking ray.wait notices it ~0.5 s late)
            ready, _ = self.ray.wait(list(self.refs), num_returns=1, timeout=0.1)
        out = []
        for ref in ready:
            key = self.refs.pop(ref)
            try:
                out.append((key, self.ray.get(ref)))
            except Exception as exc:  # the Ray worker died
                out.append((key, call_point_outcome_of(exc)))
        return out

    def close(self) -> None:
        for ref in self.refs:
            with contextlib.suppress(Exception):
                self.ray.cancel(ref, force=True)
        self.refs.clear()


def default_workers() -> int:
    """The machine's CPU count (the local pool's size)."""
    return max(1, os.cpu_count() or 1)


def _make_executor(executor: str, workers: int | None, address: str | None, todo: int) -> _Executor:
    _check_args(executor, workers, address)
    if executor == "ray":
        return _RayExecutor(address, workers)
    if executor == "serial":
        return _SerialExecutor()
    return _LocalExecutor(max(1, min(workers or default_workers(), todo)))


def run_sweep(
    points: Sequence[SweepPoint],
    fn: Callable[[dict[str, Any]], Any],
    *,
    db_path: Path | str,
    fingerprint: str,
    executor: str = "local",
    workers: int | None = None,
    address: str | None = None,
    progress: bool = True,
    description: str = "sweep",
    on_result: Callable[[str, Any], None] | None = None,
) -> tuple[dict[str, Any], SweepSummary]:
    """Run every point not yet done in the database at ``db_path``; return all done results.

    The returned mapping holds every ``done`` point of the sweep, from this run and earlier ones
    (results of keys that are not in ``points`` are left out).
    """
    keys = [p.key for p in points]
    if len(set(keys)) != len(keys):
        raise PlannerError("sweep: duplicate point keys")
    start = time.perf_counter()
    # Validate the executor choice and reach Ray before opening (or creating) the database.
    _check_args(executor, workers, address)
    ex: _Executor | None = None
    if executor == "ray":
        ex = _make_executor(executor, workers, address, len(points))
    ended = False
    try:
        with ResultsStore(db_path, fingerprint) as store:
            finished = store.finished_keys()
            todo = [p for p in points if p.key not in finished]
            skipped = len(points) - len(todo)
            failures: dict[str, str] = {}
            completed = 0
            if todo:
                if ex is None:
                    ex = _make_executor(executor, workers, address, len(todo))
                completed = _drive(ex, todo, fn, store, failures, skipped, len(points), progress, description,
                                   on_result)
            wanted = set(keys)
            results = {k: v for k, v in store.results().items() if k in wanted}
    except BaseException:  # Ctrl-C or an error: stop the workers now, do not wait for the points in flight
        if ex is not None:
            ended = True
            ex.abort()
        raise
    finally:
        if ex is not None and not ended:
            ex.close()
    summary = SweepSummary(len(points), skipped, completed, len(failures), time.perf_counter() - start,
                           executor, failures)
    return results, summary


def _check_args(executor: str, workers: int | None, address: str | None) -> None:
    if executor not in EXECUTORS:
        raise PlannerError(f"--executor must be one of {', '.join(EXECUTORS)}, got {executor!r}")
    if address is not None and executor != "ray":
        raise PlannerError("--address applies to --executor ray only")
    if workers is not None and workers < 1:
        raise PlannerError(f"--parallel must be at least 1, got {workers}")


def _drive(
    ex: _Executor,
    todo: list[SweepPoint],
    fn: Callable,
    store: ResultsStore,
    failures: dict[str, str],
    skipped: int,
    total: int,
    show: bool,
    description: str,
    on_result: Callable[[str, Any], None] | None,
) -> int:
    from planner.core.consoles import err

    params = {p.key: p.params for p in todo}
    queue: Iterable[SweepPoint] = iter(todo)
    in_flight = 0
    completed = 0
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("[red]{task.fields[failed]} failed"), TimeElapsedColumn(), TextColumn("ETA"),
               TimeRemainingColumn())
    with Progress(*columns, console=err, disable=not (show and err.is_terminal), transient=False) as bar:
        task = bar.add_task(description, total=total, completed=skipped, failed=0)

        def fill() -> int:
            n = 0
            while in_flight + n < ex.slots:
                point = next(queue, None)  # type: ignore[call-overload]
                if point is None:
                    break
                store.record_attempt(point.key)
                ex.submit(point.key, fn, point.params)
                n += 1
            return n

        in_flight += fill()
        while in_flight:
            for key, (ok, value, seconds) in ex.next_finished():
                in_flight -= 1
                if ok:
                    store.record_done(key, params[key], value, seconds)
                    completed += 1
                    if on_result is not None:
                        on_result(key, value)
                else:
                    store.record_failed(key, params[key], str(value), seconds)
                    failures[key] = str(value)
                bar.update(task, advance=1, failed=len(failures))
            in_flight += fill()
    return completed
