"""The sweep engine: results database, skip-finished, failures, kill-and-resume, Ray, bad executors."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from planner.errors import PlannerError
from planner.sweep import ResultsStore, SweepPoint, run_sweep
from planner.sweep.engine import check_ray_address

REPO = Path(__file__).resolve().parents[2]


def square_or_fail(params: dict) -> dict:
    """Module-level sweep function (picklable): x², or a PlannerError for negative x."""
    if params["x"] < 0:
        raise PlannerError(f"x must be non-negative, got {params['x']}")
    return {"square": params["x"] ** 2}


def _points(xs):
    return [SweepPoint(f"x={x}", {"x": x}) for x in xs]


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_serial_sweep_stores_every_point_and_rerun_skips_them(tmp_path):
    db = tmp_path / "results.sqlite"
    results, summary = run_sweep(_points([1, 2, 3]), square_or_fail, db_path=db, fingerprint="f1",
                                 executor="serial", progress=False)
    assert results == {"x=1": {"square": 1}, "x=2": {"square": 4}, "x=3": {"square": 9}}
    assert (summary.skipped, summary.completed, summary.failed) == (0, 3, 0)
    # Re-run with one more point: only the new one is solved.
    results, summary = run_sweep(_points([1, 2, 3, 4]), square_or_fail, db_path=db, fingerprint="f1",
                                 executor="serial", progress=False)
    assert (summary.skipped, summary.completed) == (3, 1)
    assert results["x=4"] == {"square": 16}
    with ResultsStore(db, "f1") as store:
        assert store.attempt_counts() == {"x=1": 1, "x=2": 1, "x=3": 1, "x=4": 1}


def test_failed_point_is_recorded_and_retried_and_others_go_on(tmp_path):
    db = tmp_path / "results.sqlite"
    results, summary = run_sweep(_points([2, -1, 3]), square_or_fail, db_path=db, fingerprint="f",
                                 executor="serial", progress=False)
    assert set(results) == {"x=2", "x=3"}
    assert summary.failures == {"x=-1": "x must be non-negative, got -1"}
    # The next run retries only the failed point (it fails again; nothing else is attempted).
    _, summary = run_sweep(_points([2, -1, 3]), square_or_fail, db_path=db, fingerprint="f",
                           executor="serial", progress=False)
    assert (summary.skipped, summary.completed, summary.failed) == (2, 0, 1)
    with ResultsStore(db, "f") as store:
        assert store.attempt_counts() == {"x=2": 1, "x=-1": 2, "x=3": 1}


def test_done_point_is_never_overwritten(tmp_path):
    with ResultsStore(tmp_path / "r.sqlite", "f") as store:
        store.record_done("a", {"x": 1}, {"v": 1}, 0.1)
        store.record_done("a", {"x": 1}, {"v": 2}, 0.1)
        store.record_failed("a", {"x": 1}, "boom", 0.1)
        assert store.results() == {"a": {"v": 1}}
        assert store.failures() == {}


def test_local_process_pool_gives_the_serial_results(tmp_path):
    serial, _ = run_sweep(_points(range(6)), square_or_fail, db_path=tmp_path / "a.sqlite", fingerprint="f",
                          executor="serial", progress=False)
    pooled, summary = run_sweep(_points(range(6)), square_or_fail, db_path=tmp_path / "b.sqlite", fingerprint="f",
                                executor="local", workers=2, progress=False)
    assert pooled == serial and summary.completed == 6


def test_other_sweep_in_the_same_database_is_refused_and_untouched(tmp_path):
    db = tmp_path / "results.sqlite"
    run_sweep(_points([1]), square_or_fail, db_path=db, fingerprint="first", executor="serial", progress=False)
    before = _digest(db)
    with pytest.raises(PlannerError, match="different sweep"):
        run_sweep(_points([1]), square_or_fail, db_path=db, fingerprint="second", executor="serial", progress=False)
    assert _digest(db) == before


def test_bad_executor_arguments_are_one_line_and_create_no_database(tmp_path):
    db = tmp_path / "results.sqlite"
    with pytest.raises(PlannerError, match="--executor must be one of"):
        run_sweep(_points([1]), square_or_fail, db_path=db, fingerprint="f", executor="slurm", progress=False)
    with pytest.raises(PlannerError, match="--address applies to --executor ray only"):
        run_sweep(_points([1]), square_or_fail, db_path=db, fingerprint="f", executor="local", address="h:1",
                  progress=False)
    with pytest.raises(PlannerError, match="--parallel must be at least 1"):
        run_sweep(_points([1]), square_or_fail, db_path=db, fingerprint="f", executor="local", workers=0,
                  progress=False)
    assert not db.exists()


def test_unreachable_ray_address_is_one_line_and_leaves_the_database_untouched(tmp_path):
    db = tmp_path / "results.sqlite"
    run_sweep(_points([1, 2]), square_or_fail, db_path=db, fingerprint="f", executor="serial", progress=False)
    before = _digest(db)
    with pytest.raises(PlannerError) as info:
        run_sweep(_points([1, 2, 3]), square_or_fail, db_path=db, fingerprint="f", executor="ray",
                  address="127.0.0.1:1", progress=False)
    assert "no Ray cluster reachable" in str(info.value) and "\n" not in str(info.value)
    assert _digest(db) == before
    with pytest.raises(PlannerError, match="expected HOST:PORT"):
        check_ray_address("not-an-address")


# ---- kill-and-resume: the real CLI in a subprocess, SIGKILLed part-way ----------------------------

KILL_SCENARIO = """\
name: kill-resume
model: Llama-2-70B
slos: {ttft_s: 1.6, atgt_s: 0.075}
workload: {distribution: sharegpt}
rates: [1, 1.5, 2, 2.5, 3, 3.5, 4, 4.5, 5, 5.5, 6, 6.5]
gpus:
  - {type: A100-80GB-SXM, price_per_hour: 1.8, tensor_parallel: [2]}
simulation: {duration_s: 240}
solve: {time_limit_s: 30, exact_max_requests: 0, seed: 3}
"""


def _done_rows(db: Path) -> dict[str, dict]:
    conn = sqlite3.connect(db)
    try:
        rows = conn.execute("SELECT key, params, result FROM points WHERE status='done'").fetchall()
    finally:
        conn.close()
    out = {}
    for key, params, result in rows:
        value = json.loads(result)
        value.pop("seconds")  # wall time is the only field allowed to differ between runs
        if isinstance(value.get("snapshot"), dict):
            value["snapshot"].pop("seconds", None)
        out[key] = {"params": json.loads(params), "result": value}
    return out


def _done_count(db: Path) -> int:
    if not db.exists():
        return 0
    try:
        conn = sqlite3.connect(db, timeout=1)
        try:
            return conn.execute("SELECT COUNT(*) FROM points WHERE status='done'").fetchone()[0]
        finally:
            conn.close()
    except sqlite3.OperationalError:  # the schema is not created yet
        return 0


def _sweep_in_process(scenario_file: Path, out: Path):
    from planner.capacity.points import solve_capacity_point
    from planner.capacity.run import DB_NAME, build_points, configurations
    from planner.capacity.scenario import load_scenario

    scenario = load_scenario(scenario_file)
    points = build_points(scenario, configurations(scenario)[0])
    return run_sweep(points, solve_capacity_point, db_path=out / DB_NAME, fingerprint=scenario.fingerprint(),
                     executor="serial", progress=False)


def test_sigkill_then_rerun_equals_an_uninterrupted_run_and_solves_no_point_twice(tmp_path):
    scenario = tmp_path / "kill.yaml"
    scenario.write_text(KILL_SCENARIO)
    killed_dir = tmp_path / "killed"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-m", "planner.cli.main", "capacity", str(scenario), "--report", str(killed_dir),
           "--executor", "serial", "--no-progress"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    db = killed_dir / "results.sqlite"
    deadline = time.monotonic() + 60
    while _done_count(db) < 3 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    finished_before = set(_done_rows(db))
    total = 12  # 12 rates × 1 TP degree
    assert 3 <= len(finished_before) < total, "the sweep should be killed part-way"

    _, resumed = _sweep_in_process(scenario, killed_dir)  # the same sweep again, on the same database
    assert (resumed.skipped, resumed.completed, resumed.failed) == (len(finished_before), total - len(finished_before), 0)
    _sweep_in_process(scenario, tmp_path / "clean")  # an uninterrupted run

    assert _done_rows(db) == _done_rows(tmp_path / "clean" / "results.sqlite")
    assert len(_done_rows(db)) == total
    conn = sqlite3.connect(db)
    attempts = dict(conn.execute("SELECT key, COUNT(*) FROM attempts GROUP BY key").fetchall())
    conn.close()
    assert all(attempts[k] == 1 for k in finished_before), "a point finished before the kill was solved again"
    assert set(attempts) == set(_done_rows(db))


# ---- Ray ------------------------------------------------------------------------------------------

def test_ray_executor_gives_the_same_results_as_running_locally(tmp_path):
    ray = pytest.importorskip("ray")
    scenario_file = tmp_path / "s.yaml"
    scenario_file.write_text(KILL_SCENARIO.replace("rates: [1, 1.5, 2, 2.5, 3, 3.5, 4, 4.5, 5, 5.5, 6, 6.5]",
                                                   "rates: [1, 2, 4]"))
    local, _ = _sweep_in_process(scenario_file, tmp_path / "local")  # in-process (serial) run; local pool == serial is tested above
    from planner.capacity.points import solve_capacity_point
    from planner.capacity.run import build_points, configurations
    from planner.capacity.scenario import load_scenario

    scenario = load_scenario(scenario_file)
    points = build_points(scenario, configurations(scenario)[0])
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        remote, summary = run_sweep(points, solve_capacity_point, db_path=tmp_path / "ray.sqlite",
                                    fingerprint=scenario.fingerprint(), executor="ray", progress=False)
    finally:
        ray.shutdown()
    assert summary.completed == len(points) == 3
    def strip(results: dict) -> dict:  # wall times are the only fields allowed to differ
        out = {}
        for key, r in results.items():
            r = {f: v for f, v in r.items() if f != "seconds"}
            if isinstance(r.get("snapshot"), dict):
                r["snapshot"] = {f: v for f, v in r["snapshot"].items() if f != "seconds"}
            out[key] = r
        return out

    assert strip(remote) == strip(local)


def test_a_database_that_is_not_ours_is_refused_and_left_byte_for_byte(tmp_path):
    db = tmp_path / "results.sqlite"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE notes (text TEXT)")
    conn.execute("INSERT INTO notes VALUES ('the user''s own database')")
    conn.commit()
    conn.close()
    before = _digest(db)
    with pytest.raises(PlannerError, match="not a planner results database"):
        run_sweep(_points([1]), square_or_fail, db_path=db, fingerprint="f", executor="serial", progress=False)
    assert _digest(db) == before  # not even switched to WAL mode
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.sqlite"]


# ---- Ctrl-C and SIGKILL: no helper process outlives the sweep -----------------------------------------

BUSY_SCENARIO = """\
name: busy
model: Llama-2-70B
slos: {ttft_s: 1.6, atgt_s: 0.075}
workload: {distribution: sharegpt}
rates: [8, 10, 12, 14, 16, 18]
gpus:
  - {type: A100-80GB-SXM, price_per_hour: 1.8, tensor_parallel: [2]}
solve: {time_limit_s: 60, exact_max_requests: 400, seed: 0}
"""


def _descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                ppid = int(fh.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except (OSError, IndexError):
        return False


def _comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as fh:
            return fh.read().strip()
    except OSError:
        return "?"


def _start_capacity(tmp_path: Path, executor: str) -> tuple[subprocess.Popen, Path]:
    scenario = tmp_path / "busy.yaml"
    scenario.write_text(BUSY_SCENARIO)
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "planner.cli.main", "capacity", str(scenario), "--report", str(out), "--executor",
           executor, "--parallel", "2", "--no-progress"]
    proc = subprocess.Popen(cmd, env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    return proc, out


def _wait_for_helpers(proc: subprocess.Popen, ready, timeout: float) -> set[int]:
    """Every descendant of ``proc`` seen until ``ready(descendants)`` holds (or ``timeout``)."""
    seen: set[int] = set()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        now = _descendants(proc.pid)
        seen |= now
        if ready(now):
            break
        time.sleep(0.2)
    return seen | _descendants(proc.pid)


def _still_alive_after(pids: set[int], seconds: float) -> list[tuple[int, str]]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        left = [p for p in pids if _alive(p)]
        if not left:
            return []
        time.sleep(0.1)
    left = [(p, _comm(p)) for p in pids if _alive(p)]
    for pid, _ in left:  # do not leave them to the next test
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    return left


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_ctrl_c_of_a_local_pool_sweep_ends_the_workers_at_once_and_writes_no_report(tmp_path):
    proc, out = _start_capacity(tmp_path, "local")
    # the two pool workers are up and solving once the database holds attempts
    helpers = _wait_for_helpers(proc, lambda now: len(now) >= 2 and _attempts(out / "results.sqlite") >= 2, 90)
    assert proc.poll() is None and helpers, "the sweep should still be running"
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and err.strip() == "interrupted", err
    assert time.monotonic() - sent < 3.0
    assert _still_alive_after(helpers, 3.0) == []
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith("results.sqlite")) == []  # no report yet


def _attempts(db: Path) -> int:
    if not db.exists():
        return 0
    try:
        conn = sqlite3.connect(db, timeout=1)
        try:
            return conn.execute("SELECT COUNT(*) FROM attempts").fetchone()[0]
        finally:
            conn.close()
    except sqlite3.OperationalError:
        return 0


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_sigkill_of_a_ray_sweep_leaves_no_ray_process_behind(tmp_path):
    pytest.importorskip("ray")
    proc, out = _start_capacity(tmp_path, "ray")
    # wait until Ray is fully up: its agents run and a worker executes a point (Ray start-up: 5-20 s here)
    helpers = _wait_for_helpers(proc, lambda now: any(_comm(p).startswith("ray::call_point") for p in now), 120)
    names = {_comm(p) for p in helpers}
    assert proc.poll() is None, proc.communicate()[1]
    # raylet and its agents (ray::DashboardAgent / ray::RuntimeEnvAgent in recent Ray; plain "python" in Ray 2.9)
    assert "raylet" in names and len(names - {"raylet", "gcs_server"}) >= 2, names
    proc.kill()  # SIGKILL: the driver can clean nothing up itself
    proc.wait()
    assert _still_alive_after(helpers, 15.0) == []
