"""The results database of a sweep: one SQLite file in the output directory.

Tables:

* ``meta(key, value)`` — the sweep's ``fingerprint`` (a hash of what defines the sweep: the
  scenario, the instance set, the options).  A re-run with a different fingerprint is refused
  with one line instead of mixing results of two different sweeps.
* ``points(key, params, status, result, error, seconds, finished_at)`` — one row per finished
  point: ``status`` is ``done`` or ``failed``; ``result`` is the point's JSON result.
* ``attempts(key, started_at, pid)`` — one row each time a point is handed to a worker.  A point
  that is attempted again after it finished would show up here (the kill-and-resume test checks
  that it never does).

Writes happen only in the process that runs the sweep (one writer), each finished point in its
own transaction, in WAL mode: a SIGKILL at any instant leaves every committed point intact and
no half-written row.  A ``done`` point is never overwritten; a ``failed`` point is retried by the
next run and replaced when it succeeds.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path
from typing import Any

from planner.errors import PlannerError

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS points (
    key TEXT PRIMARY KEY,
    params TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('done', 'failed')),
    result TEXT,
    error TEXT,
    seconds REAL,
    finished_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS attempts (key TEXT NOT NULL, started_at REAL NOT NULL, pid INTEGER NOT NULL);
"""


class ResultsStore:
    """Open (creating if needed) the results database at ``path`` for a sweep with ``fingerprint``.

    Raises `PlannerError` when the file holds another sweep's results or is not a results database.
    """

    def __init__(self, path: Path | str, fingerprint: str) -> None:
        self.path = Path(path)
        self.fingerprint = fingerprint
        self.conn = self._connect()

    def _connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
            # read-only checks first: a file that is not ours (another SQLite database, another sweep's
            # results) is refused before anything in it changes (WAL mode is written to the file's header)
            existing = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            if existing and not {"meta", "points", "attempts"} <= existing:
                conn.close()
                raise PlannerError(f"{self.path}: not a planner results database (tables {sorted(existing)})")
            row = conn.execute("SELECT value FROM meta WHERE key='fingerprint'").fetchone() if existing else None
            if row is not None and row[0] != self.fingerprint:
                conn.close()
                raise PlannerError(
                    f"{self.path}: holds the results of a different sweep (other scenario or options); "
                    "use another --report directory or delete this file"
                )
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.executescript(SCHEMA)
        except sqlite3.DatabaseError as exc:
            raise PlannerError(f"{self.path}: cannot open the results database ({exc})") from None
        if row is None:
            with conn:
                conn.execute("BEGIN")
                conn.execute("INSERT INTO meta VALUES ('fingerprint', ?)", (self.fingerprint,))
        return conn

    # ---- reading ----------------------------------------------------------------------------
    def finished_keys(self) -> set[str]:
        return {row[0] for row in self.conn.execute("SELECT key FROM points WHERE status='done'")}

    def results(self) -> dict[str, Any]:
        """``key → result`` of every ``done`` point."""
        return {k: json.loads(r) for k, r in self.conn.execute("SELECT key, result FROM points WHERE status='done'")}

    def failures(self) -> dict[str, str]:
        return dict(self.conn.execute("SELECT key, error FROM points WHERE status='failed'"))

    def attempt_counts(self) -> dict[str, int]:
        return dict(self.conn.execute("SELECT key, COUNT(*) FROM attempts GROUP BY key"))

    # ---- writing (one transaction each) -----------------------------------------------------
    def record_attempt(self, key: str) -> None:
        with self.conn:
            self.conn.execute("BEGIN")
            self.conn.execute("INSERT INTO attempts VALUES (?, ?, ?)", (key, time.time(), os.getpid()))

    def record_done(self, key: str, params: dict[str, Any], result: Any, seconds: float) -> None:
        with self.conn:
            self.conn.execute("BEGIN")
            self.conn.execute(
                "INSERT INTO points VALUES (?, ?, 'done', ?, NULL, ?, ?) "
                "ON CONFLICT(key) DO UPDATE SET status='done', result=excluded.result, error=NULL, "
                "seconds=excluded.seconds, finished_at=excluded.finished_at WHERE points.status != 'done'",
                (key, json.dumps(params, sort_keys=True), json.dumps(result, sort_keys=True), seconds, time.time()),
            )

    def record_failed(self, key: str, params: dict[str, Any], error: str, seconds: float) -> None:
        with self.conn:
            self.conn.execute("BEGIN")
            self.conn.execute(
                "INSERT INTO points VALUES (?, ?, 'failed', NULL, ?, ?, ?) "
                "ON CONFLICT(key) DO UPDATE SET error=excluded.error, seconds=excluded.seconds, "
                "finished_at=excluded.finished_at WHERE points.status = 'failed'",
                (key, json.dumps(params, sort_keys=True), error, seconds, time.time()),
            )

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> "ResultsStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
