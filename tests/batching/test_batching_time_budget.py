"""`solve_batching(time_limit=…)` bounds the whole call: the heuristics' MIPs get what is left of it.

No wall-clock assertions (speed is measured in benchmarks/): the tests use deadlines that have already
passed, where the outcome does not depend on timing.
"""

from __future__ import annotations

import time

import pytest

from planner.batching.problem import make_problem
from planner.batching.pipeline import solve_batching
from planner.batching.staggered import best_staggered, single_prefill_batch_impossible
from planner.solver import SolveStatus


def test_lazy_search_starts_no_plan_mip_after_its_deadline():
    # Without a deadline the lazy search finds a 4-batch schedule (the longest request has 4 tokens);
    # with a deadline already passed it starts no plan MIP and returns nothing.
    problem = make_problem([3, 5, 2], [2, 3, 4], M=100)
    assert best_staggered(problem, threads=1) is not None
    assert best_staggered(problem, threads=1, deadline=time.perf_counter() - 1.0) is None


def test_single_prefill_test_without_time_proves_only_the_cheap_cases():
    # Σ I = 39 > M = 26: no schedule holds every prompt at once, proven without a MIP even with no time.
    tight = make_problem([14, 11, 9, 5], [5, 1, 2, 1], M=26)
    assert single_prefill_batch_impossible(tight, 10, time_limit=0.0, threads=1)
    # Σ I = 10 ≤ M = 100: only the MIP could prove it; with no time it proves nothing (False is safe).
    roomy = make_problem([3, 5, 2], [2, 3, 4], M=100)
    assert not single_prefill_batch_impossible(roomy, 4, time_limit=0.0, threads=1)


def test_a_spent_time_limit_still_returns_a_validated_schedule_and_bound():
    # A 1 ms limit is spent by the presets alone: the lazy search is skipped, the MIP gets its minimum
    # second; the result is still a validated schedule with a bound below it.
    problem = make_problem([14, 11, 9, 5], [5, 1, 2, 1], M=26)
    result = solve_batching(problem, time_limit=0.001, threads=1, stop_at_bound=False)
    assert result.status in (SolveStatus.OPTIMAL, SolveStatus.FEASIBLE)
    assert result.validation.feasible
    assert result.validation.objective == pytest.approx(result.objective, rel=1e-9)
    assert result.bound <= result.objective * (1 + 1e-9)
    unlimited = solve_batching(problem, time_limit=None, threads=1, stop_at_bound=False)
    assert unlimited.status == SolveStatus.OPTIMAL
    assert result.objective >= unlimited.objective * (1 - 1e-9)


def test_presets_after_a_spent_deadline_are_skipped_and_named():
    # heuristic_results runs the first preset whatever the deadline (a plan must exist), then skips the
    # rest once the deadline has passed and lists them; without a deadline every preset runs.
    from planner.batching.pipeline import PRESETS, heuristic_results

    problem = make_problem([14, 11, 9, 5], [5, 1, 2, 1], M=26)
    skipped: list[str] = []
    early = heuristic_results(problem, deadline=time.perf_counter() - 1.0, skipped=skipped)
    assert len(early) == 1 and set(early) | set(skipped) == set(PRESETS)
    none_skipped: list[str] = []
    full = heuristic_results(problem, skipped=none_skipped)
    assert none_skipped == [] and len(full) > 1 and set(early) <= set(full)
    result = solve_batching(problem, time_limit=0.001, threads=1, stop_at_bound=False)
    assert "time limit reached during the presets" in result.message
    assert result.validation.feasible
