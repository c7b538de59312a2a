"""The deterministic work clock (`planner.core.work.WorkClock`): nominal budget, shares, wall-clock guard."""

from __future__ import annotations

import time

from planner.core.work import WorkClock


def test_nominal_budget_and_shares():
    clock = WorkClock(2.0)
    clock.charge(0.5)
    clock.charge(-1.0)  # negative work is ignored
    assert clock.spent == 0.5 and clock.left() == 1.5
    assert clock.allows(1.5)  # 0.5 + 1.5 = 2.0 ≤ 2.0
    assert not clock.allows(1.6)
    assert clock.allows(0.5, share=0.5)  # 0.5 + 0.5 = 1.0 ≤ 0.5 · 2.0
    assert not clock.allows(0.6, share=0.5)
    clock.charge(3.0)
    assert clock.left() == 0.0 and not clock.allows()
    assert not clock.wall_cut  # refused on nominal work, not on the wall clock


def test_without_a_limit_everything_is_allowed():
    clock = WorkClock(None, started=time.perf_counter() - 1e6)
    clock.charge(1e9)
    assert clock.allows(1e9) and clock.left() is None and clock.wall_left() is None and not clock.wall_cut


def test_wall_clock_guard_refuses_and_records_the_cut():
    late = WorkClock(1.0, started=time.perf_counter() - 0.96)  # 96 % of the limit gone on the wall clock
    assert late.wall_left() <= 0.04
    assert not late.allows(0.0)
    assert late.wall_cut
    unguarded = WorkClock(1.0, started=time.perf_counter() - 10.0, guard_share=float("inf"))
    assert unguarded.allows(0.5) and not unguarded.wall_cut
