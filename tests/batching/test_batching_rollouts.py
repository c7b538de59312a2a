"""Randomised preemptive-priority rollouts (`planner.batching.rollouts`): valid, repeatable, never below the optimum."""

from __future__ import annotations

import numpy as np
import pytest

from planner.batching.bruteforce import brute_force_latency
from planner.batching.orderings import best_ordered_schedule
from planner.batching.problem import make_problem
from planner.batching.rollouts import _arrays, _policies, _run, best_rollout_schedule, default_rollouts
from planner.batching.schedule import Schedule
from planner.batching.pipeline import solve_batching
from planner.batching.validator import validate_schedule
from planner.solver import SolveStatus


def _random_problem(seed: int, n: int = 5):
    rng = np.random.default_rng(seed)
    inputs, outputs = rng.integers(1, 24, n), rng.integers(1, 16, n)
    need = inputs + outputs - 1
    M = int(max(need.max(), 0.5 * need.sum()))
    limits = {"M": M}
    if seed % 3 == 1:  # token, prefill and running limits that bind
        limits.update(C=int(inputs.max()) + 2, P=int(inputs.max()), R_max=3)
    return make_problem(inputs, outputs, name=f"random-{seed}", **limits)


@pytest.mark.parametrize("seed", range(6))
def test_every_rollout_is_valid_and_its_latency_is_the_validators(seed):
    problem = _random_problem(seed)
    coefficients, max_batches, buffers = _arrays(problem)
    finished = 0
    for policy in _policies(np.random.default_rng(seed), 40, []):  # 40 random policies
        latency, batches, entries, evictions = _run(problem, policy, coefficients, max_batches, buffers)
        if not np.isfinite(latency):
            continue
        finished += 1
        batch, request, tokens, evict_batch, evict_request = buffers
        schedule = Schedule(int(batches), batch[:entries].copy(), request[:entries].copy(), tokens[:entries].copy(),
                            evict_batch[:evictions].copy(), evict_request[:evictions].copy(),
                            tuple(r.request_id for r in problem.requests))
        report = validate_schedule(problem, schedule)
        assert report.feasible, report.summary()
        assert report.objective == pytest.approx(latency, rel=1e-9)
    assert finished >= 30  # stalls (a rollout that cannot place anything) are rare


@pytest.mark.parametrize("seed", [3, 7, 11])
def test_best_rollout_is_never_below_the_brute_force_optimum(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 4))
    inputs, outputs = rng.integers(1, 4, n), rng.integers(1, 4, n)
    M = int(max((inputs + outputs - 1).max(), (inputs + outputs - 1).sum() - 2))
    problem = make_problem(inputs, outputs, M=M)
    schedule, latency = best_rollout_schedule(problem, rollouts=300)
    optimum = brute_force_latency(problem)
    assert latency >= optimum - 1e-12
    assert validate_schedule(problem, schedule).objective == pytest.approx(latency, rel=1e-12)


def test_rollouts_are_repeatable_for_a_seed():
    problem = _random_problem(4, n=6)
    a = best_rollout_schedule(problem, rollouts=300, seed=5)
    b = best_rollout_schedule(problem, rollouts=300, seed=5)
    assert a[1] == b[1]
    assert np.array_equal(a[0].request, b[0].request) and np.array_equal(a[0].tokens, b[0].tokens)
    assert np.array_equal(a[0].evict_batch, b[0].evict_batch)
    other = best_rollout_schedule(problem, rollouts=300, seed=6)  # another search: also valid
    assert validate_schedule(problem, other[0]).objective == pytest.approx(other[1], rel=1e-12)


def test_online_instances_are_not_searched_and_large_ones_run_fewer_rollouts():
    online = make_problem([4, 4], [3, 3], arrivals=[0.0, 0.5], M=20)
    assert best_rollout_schedule(online) is None
    small = make_problem([8] * 4, [8] * 4, M=60)
    large = make_problem([64] * 32, [64] * 32, M=4000)
    assert default_rollouts(small) > default_rollouts(large) >= 200


def test_rollouts_beat_the_order_search_on_a_contended_benchmark_instance():
    # B = 8 seed 4 of benchmarks/batching_scaling.py: the prompts do not all fit (M = 0.6 · Σ(I+O−1)),
    # and the better schedules preempt running requests to admit waiting ones, which the presets'
    # LIFO eviction (even over every request order) cannot do.
    rng = np.random.default_rng(4)
    inputs, outputs = rng.integers(1, 65, 8), rng.integers(1, 65, 8)
    M = max(int((inputs + outputs - 1).max()), int(0.6 * (inputs + outputs - 1).sum()))
    problem = make_problem(inputs, outputs, M=M)
    ordered = best_ordered_schedule(problem)
    rolled = best_rollout_schedule(problem)
    assert rolled[1] < ordered[2]
    assert validate_schedule(problem, rolled[0]).feasible


def test_solve_with_and_without_rollouts_proves_the_same_optimum():
    # Σ(I+O−1) = 14 > M = 10: evictions or waiting are needed, so the rollouts are searched
    problem = make_problem([4, 3, 2], [3, 2, 3], M=10)
    with_rollouts = solve_batching(problem, time_limit=30, stop_at_bound=False)
    without = solve_batching(problem, time_limit=30, stop_at_bound=False, rollout_search=False)
    assert with_rollouts.status == without.status == SolveStatus.OPTIMAL
    # the extra warm-start candidate changes the start, not the answer; neither is below brute force
    assert with_rollouts.objective == pytest.approx(without.objective, rel=1e-6)
    assert with_rollouts.objective == pytest.approx(brute_force_latency(problem), rel=1e-9)
    assert with_rollouts.objective <= best_rollout_schedule(problem)[1] + 1e-12


def test_a_rollout_longer_than_its_buffers_is_dropped_not_written_past_them():
    problem = _random_problem(0)
    coefficients, max_batches, _ = _arrays(problem)
    tiny = tuple(np.zeros(size, np.int64) for size in (6, 6, 6, 2, 2))  # room for one batch at most
    policy = next(_policies(np.random.default_rng(0), 1, []))
    latency, _, entries, evictions = _run(problem, policy, coefficients, max_batches, tiny)
    assert latency == np.inf and entries <= 6 and evictions <= 2


def test_searched_results_passed_in_are_used_instead_of_searching_again():
    from planner.batching.pipeline import search_heuristic_results

    problem = make_problem([4, 3, 2], [3, 2, 3], M=10)
    searched = search_heuristic_results(problem, seed=2)
    assert set(searched) == {"order search", "preemptive rollouts"}
    for result in searched.values():  # objective == the independent validator's
        assert validate_schedule(problem, result.solution).objective == pytest.approx(result.objective, rel=1e-12)
    reused = solve_batching(problem, time_limit=30, stop_at_bound=False, searched=searched)
    fresh = solve_batching(problem, time_limit=30, stop_at_bound=False, seed=2)
    assert reused.status == fresh.status == SolveStatus.OPTIMAL
    assert reused.objective == pytest.approx(fresh.objective, rel=1e-9)


def test_more_time_runs_more_independent_searches_and_never_does_worse():
    from planner.batching.rollouts import MAX_SEARCHES, searches_for

    # one search per started minute of the time limit: 60 s → 1, 150 s → 2, capped; no limit → 1
    assert [searches_for(t) for t in (None, 5.0, 60.0, 150.0, 1e6)] == [1, 1, 1, 2, MAX_SEARCHES]
    problem = _random_problem(4, n=6)
    one = best_rollout_schedule(problem, rollouts=300, seed=5)
    three = best_rollout_schedule(problem, rollouts=300, seed=5, searches=3)
    assert one[1] == best_rollout_schedule(problem, rollouts=300, seed=5, searches=1)[1]
    # search 0 of three is the one search (same seed), so the best of three is never worse
    assert three[1] <= one[1]
    assert three[1] == best_rollout_schedule(problem, rollouts=300, seed=5, searches=3)[1]  # repeatable
    assert validate_schedule(problem, three[0]).objective == pytest.approx(three[1], rel=1e-12)
