"""The count-split bound of `planner.priority.count_bound`: V(n₀) ≥ n₀ − λ·t for every plan meeting at
least n₀ SLOs, checked against complete enumeration, and the G bound derived from it."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from support.priority_plans import all_plans

from planner.priority.count_bound import count_values, ratio_bound
from planner.priority.generator import generate_priority_problem
from planner.priority.lagrangian import lagrangian_bound, relaxation_data


@pytest.mark.parametrize(("jobs", "b_max", "seed"), [(5, 2, 0), (5, 3, 1), (6, 2, 2), (5, 4, 3), (6, 3, 5)])
def test_count_values_bound_every_count(jobs, b_max, seed):
    problem = generate_priority_problem(jobs, b_max, seed, slo_spread=0.6 if seed % 2 == 0 else 0.0)
    plans = all_plans(problem)
    best_g = max(met / total for met, total in plans)  # per ms
    exec_ms, slack, step, buckets = relaxation_data(problem)
    rng = np.random.default_rng(seed)
    for lam in (0.5 * best_g, best_g, 1.5 * best_g):
        tuned = lagrangian_bound(problem, lam, iterations=50).multipliers
        for multipliers in (np.zeros(jobs), tuned, rng.normal(0.0, 1.0, jobs)):
            values = count_values(exec_ms, slack, lam, step, buckets, multipliers)
            assert values.shape == (jobs + 1,)
            for count in range(jobs + 1):
                reachable = [total for met, total in plans if met >= count]
                if reachable:
                    assert values[count] >= count - lam * min(reachable) - 1e-9
            # a count no plan can reach may still be reachable by a relaxed path, never the reverse
            assert values[0] > -math.inf
            g_bound = ratio_bound(values, lam)
            assert g_bound >= best_g - 1e-15


def test_ratio_bound_arithmetic():
    lam = 0.01
    # n = 2: t ≥ (2 − 1)/λ = 100 → G ≤ 0.02; n = 3: t ≥ (3 − 0.5)/λ → G ≤ 0.012; n = 1 unreachable
    assert ratio_bound(np.array([0.0, -math.inf, 1.0, 0.5]), lam) == pytest.approx(0.02)
    assert ratio_bound(np.array([0.0, -1.0, -2.0]), lam) == pytest.approx(lam)  # no plan beats λ
    assert ratio_bound(np.array([0.0, 1.0]), lam) == math.inf  # V(1) ≥ 1: no bound


@pytest.mark.parametrize(("b_max", "seed"), [(3, 7), (2, 8), (4, 9)])
def test_a_stopped_search_reports_a_valid_bound(monkeypatch, b_max, seed):
    # the bound from the root relaxation on, a node limit stops the search: its bound (possibly the
    # count-split one) stays ≥ the enumerated optimum
    from planner.priority import exact
    from planner.priority.heuristics import fcfs

    monkeypatch.setattr(exact, "PLAIN_NODE_BUDGET", 0)
    problem = generate_priority_problem(6, b_max, seed, slo_spread=0.5)
    best_g = 1000.0 * max(met / total for met, total in all_plans(problem))
    incumbent = fcfs(problem)
    relaxation = exact.root_relaxation(problem, incumbent.met / incumbent.total_ms, None)
    assert 1000.0 * exact.count_split_bound(problem, relaxation) >= best_g - 1e-12
    outcome = exact.solve_exact(problem, incumbent, node_limit=3)
    assert outcome.plan.g <= best_g + 1e-12
    assert outcome.proven or outcome.bound_g >= best_g - 1e-12


def relaxed_paths(exec_ms, slack, lam, step, buckets, multipliers):
    """Every path of the count DP by brute force: (SLOs counted, value) — batches of distinct jobs led by
    their longest member at their size (ties by index), jobs may repeat across batches."""
    jobs, b_max = exec_ms.shape
    last = buckets - 1
    out = []

    def extend(placed, bucket, met, value):
        if placed == jobs:
            out.append((met, value))
            return
        for size in range(1, min(b_max, jobs - placed) + 1):
            col = size - 1
            for batch in itertools.combinations(range(jobs), size):
                leader = max(batch, key=lambda j: (exec_ms[j, col], j))
                gained = sum(1 for j in batch if bucket * step <= slack[j, col])
                added = sum(-lam * exec_ms[j, col] - multipliers[j] for j in batch)
                added -= lam * exec_ms[leader, col] * (jobs - placed - size)
                extend(placed + size, min(bucket + int(exec_ms[leader, col] // step), last), met + gained, value + added)

    extend(0, 0, 0, 0.0)
    return out


@pytest.mark.parametrize(("b_max", "seed"), [(2, 0), (3, 1), (2, 4)])
def test_count_values_equal_the_brute_force_relaxation(b_max, seed):
    problem = generate_priority_problem(4, b_max, seed, slo_spread=0.6)
    exec_ms, slack, step, _ = relaxation_data(problem)
    step *= 250  # coarse buckets keep the enumeration small and make the rounding matter
    buckets = int(slack[np.isfinite(slack)].max() // step) + 2
    best_g = max(met / total for met, total in all_plans(problem))
    multipliers = np.random.default_rng(seed).normal(0.0, 0.5, 4)
    values = count_values(exec_ms, slack, best_g, step, buckets, multipliers)
    paths = relaxed_paths(exec_ms, slack, best_g, step, buckets, multipliers)
    for count in range(5):
        reachable = [value for met, value in paths if met >= count]
        expected = count + multipliers.sum() + max(reachable) if reachable else -math.inf
        assert values[count] == pytest.approx(expected, abs=1e-9)
