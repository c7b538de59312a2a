"""Deterministic effort accounting: time budgets spent in *nominal seconds* instead of wall-clock seconds.

A pipeline whose phases stop "when the time is up" (an iterated local search, Lagrangian rounds,
restarts) returns a plan that depends on the machine's load: two runs with the same input, seed and
time limit differ.  Like Gurobi's ``WorkLimit`` (work units) and CPLEX's deterministic ticks, a
`WorkClock` instead charges every step a deterministic *nominal* cost, computed from work counts
(move evaluations, assignment steps, cells of a matrix) times constants calibrated on the reference
machine (a family's ``effort`` module, e.g. `planner.queueing.effort`), and the phases decide on
that count.  Same input, seed and time limit → the same steps → the same plan.

The wall clock is kept as a guard only: `WorkClock.allows` also refuses once the wall time passes
`WALL_GUARD_SHARE` of the time limit (a much slower or busier machine than the reference), so a
call never runs far past its limit; when that happens `wall_cut` is set and the caller reports
that this run was cut by the wall clock (and so may differ from run to run).  Without a time limit
every check passes and nothing is charged against a limit.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

#: Share of the time limit after which the wall clock stops further phases even if nominal work remains.
WALL_GUARD_SHARE = 0.95


@dataclass
class WorkClock:
    """Nominal seconds spent against ``time_limit`` (None = no limit); ``started`` = the call's
    `time.perf_counter` at its start (for the wall-clock guard only)."""

    time_limit: float | None
    started: float = field(default_factory=time.perf_counter)
    spent: float = 0.0
    wall_cut: bool = False
    #: the wall-clock guard's share of the time limit (``math.inf`` turns the guard off: fully repeatable)
    guard_share: float = WALL_GUARD_SHARE

    def charge(self, seconds: float) -> None:
        """Add ``seconds`` of nominal work."""
        self.spent += max(float(seconds), 0.0)

    def left(self) -> float | None:
        """Nominal seconds left of the time limit (≥ 0); None without a limit."""
        return None if self.time_limit is None else max(self.time_limit - self.spent, 0.0)

    def wall_seconds(self) -> float:
        return time.perf_counter() - self.started

    def wall_left(self) -> float | None:
        """Wall-clock seconds left of the time limit (≥ 0); None without a limit."""
        return None if self.time_limit is None else max(self.time_limit - self.wall_seconds(), 0.0)

    def allows(self, seconds: float = 0.0, share: float = 1.0, *, wall_reserve: float = 0.0) -> bool:
        """True when ``seconds`` more nominal work ends within ``share`` of the time limit and the
        wall clock, plus ``wall_reserve`` seconds the caller keeps for later phases, is still under
        ``guard_share`` of it (else False; the wall case sets `wall_cut`)."""
        if self.time_limit is None:
            return True
        if self.spent + seconds > share * self.time_limit:
            return False
        if self.wall_seconds() + wall_reserve >= self.guard_share * self.time_limit:
            self.wall_cut = True
            return False
        return True
