"""Priority family, compiled kernels: the numba evaluator = `evaluate.py`, the compiled SA = the
pure-Python reference SA (same draws, same plan), determinism, and the b_max = 1 subset DP =
exhaustive search = branch-and-bound."""

from __future__ import annotations

import numpy as np
import pytest

from planner.priority.evaluate import FastTables, evaluate, greedy_batches
from planner.priority.exact import solve_exact
from planner.priority.exhaustive import exhaustive_search
from planner.priority.generator import generate_priority_problem
from planner.priority.heuristics import (
    SAParams,
    fcfs,
    sa_draws,
    simulated_annealing,
    simulated_annealing_reference,
    temperature_levels,
)
from planner.priority.sequence_dp import solve_sequence_dp
from planner.priority.pipeline import run_method, to_schedule
from planner.priority.validator import validate_schedule


def _random_sizes(rng: np.random.Generator, jobs: int, b_max: int) -> list[int]:
    sizes, left = [], jobs
    while left:
        size = int(rng.integers(1, min(b_max, left) + 1))
        sizes.append(size)
        left -= size
    return sizes


def test_compiled_evaluation_equals_evaluator_on_random_plans():
    from planner.priority.compiled import evaluate_plan, plan_fits

    rng = np.random.default_rng(11)
    for case in range(12):
        jobs, b_max = int(rng.integers(2, 25)), int(rng.integers(1, 5))
        problem = generate_priority_problem(jobs, b_max, case, slo_spread=0.5, token_capacity=3000)
        fast = FastTables(problem.tables)
        slacks = np.asarray(fast.slack)
        for _ in range(20):
            order = rng.permutation(jobs)
            sizes = _random_sizes(rng, jobs, b_max)
            padded = np.zeros(jobs + 1, dtype=np.int64)
            padded[:len(sizes)] = sizes
            met, total = evaluate_plan(problem.tables.exec_ms, slacks, order.astype(np.int64), padded, len(sizes))
            assert (met, total) == evaluate(fast, order.tolist(), sizes)  # bit-identical, same summation order
            fits = all(sum(fast.tokens[j] for j in order[start:start + size]) <= 3000
                       for start, size in zip(np.cumsum([0] + sizes[:-1]), sizes))
            assert plan_fits(problem.tables.tokens, order.astype(np.int64), padded, len(sizes), 3000) == fits


@pytest.mark.parametrize(("jobs", "b_max", "seed", "capacity"),
                         [(6, 1, 0, None), (9, 2, 1, None), (12, 3, 2, None), (15, 4, 3, None), (12, 4, 4, 2500),
                          (20, 2, 5, 1800)])
def test_compiled_sa_equals_reference(jobs, b_max, seed, capacity):
    problem = generate_priority_problem(jobs, b_max, seed, slo_spread=0.5, token_capacity=capacity)
    for sa_seed in (0, 3):
        compiled = simulated_annealing(problem, sa_seed)
        reference = simulated_annealing_reference(problem, sa_seed)
        assert (compiled.order, compiled.sizes, compiled.met) == (reference.order, reference.sizes, reference.met)
        assert compiled.total_ms == reference.total_ms


def test_compiled_sa_is_deterministic_and_valid():
    problem = generate_priority_problem(30, 3, 8, slo_spread=0.5, token_capacity=3000)
    first, again, other = (simulated_annealing(problem, s) for s in (5, 5, 6))
    assert (first.order, first.sizes) == (again.order, again.sizes)
    assert sorted(first.order) == list(range(30)) and sum(first.sizes) == 30 and max(first.sizes) <= 3
    report = validate_schedule(problem, to_schedule(problem, [(list(range(30)), first)]))
    assert report.feasible and report.objective == pytest.approx(first.g, rel=1e-9)
    # the SA keeps the best plan seen, so it is never worse than its start (J_prio or J_in)
    assert first.g >= fcfs(problem).g * (1 - 1e-12) and other.g > 0


def test_sa_draw_count_matches_paper_defaults():
    params = SAParams()
    assert len(temperature_levels(params)) == 63  # 500·0.95^k ≥ 20 for k = 0..62
    assert sa_draws(1, params).shape == (6300, 4)
    assert np.array_equal(sa_draws(1, params), sa_draws(1, params))


@pytest.mark.parametrize(("jobs", "seed"), [(4, 0), (6, 1), (7, 2), (8, 3), (8, 4)])
def test_subset_dp_equals_exhaustive_and_branch_and_bound(jobs, seed):
    problem = generate_priority_problem(jobs, 1, seed, slo_spread=0.6 if seed % 2 == 0 else 0.0)
    exhaustive, finished, _ = exhaustive_search(problem)
    assert finished
    dp = solve_sequence_dp(problem, fcfs(problem))
    assert dp.proven and dp.plan.g == pytest.approx(exhaustive.g, rel=1e-9)
    assert dp.plan.g == pytest.approx(solve_exact(problem, fcfs(problem)).plan.g, rel=1e-9)
    assert greedy_batches(FastTables(problem.tables).tokens, dp.plan.order, 1, None) == list(dp.plan.sizes)


def test_subset_dp_equals_branch_and_bound_beyond_exhaustive():
    problem = generate_priority_problem(13, 1, 21, slo_spread=0.5)
    dp = solve_sequence_dp(problem, fcfs(problem))
    bb = solve_exact(problem, fcfs(problem))
    assert dp.proven and bb.proven
    assert dp.plan.g == pytest.approx(bb.plan.g, rel=1e-9)
    exact = run_method(problem, "exact")
    assert exact.proven_optimal and exact.validation.feasible
    assert exact.objective == pytest.approx(dp.plan.g, rel=1e-9)
    assert exact.solver.startswith("subset DP")


@pytest.mark.parametrize("b_max", [1, 2, 4])
def test_compiled_moore_hodgson_equals_python(b_max):
    from planner.priority.exact import _ParametricSearch

    problem = generate_priority_problem(20, b_max, 30 + b_max, slo_spread=0.5)
    search = _ParametricSearch(problem, 0.0, None, None, {})
    compiled = search.compiled_moore_hodgson
    assert compiled is not None
    rng = np.random.default_rng(b_max)
    for _ in range(200):
        remaining = [i for i in range(20) if rng.random() < 0.6] or [0]
        wait = float(rng.uniform(0, 150_000))
        search.compiled_moore_hodgson = compiled
        fast = search.max_more_met(remaining, wait)
        search.compiled_moore_hodgson = None
        assert fast == search.max_more_met(remaining, wait)


def test_size_sequence_waiting_bound_is_valid_and_tight_on_equal_jobs():
    import itertools

    from planner.priority.compiled import size_sequence_waiting_bound
    from planner.priority.exhaustive import compositions

    rng = np.random.default_rng(5)
    for _ in range(60):
        jobs, b_max = int(rng.integers(1, 7)), int(rng.integers(1, 5))
        mins = np.sort(rng.uniform(1.0, 10.0, size=jobs))
        least = np.inf  # brute force: every order × every batching, a batch lasts its longest member
        for perm in itertools.permutations(range(jobs)):
            for sizes in compositions(jobs, b_max):
                start, waiting, pos = 0.0, 0.0, 0
                for size in sizes:
                    waiting += size * start
                    start += max(mins[perm[p]] for p in range(pos, pos + size))
                    pos += size
                least = min(least, waiting)
        assert size_sequence_waiting_bound(mins, b_max) <= least + 1e-9
    # 10 equal jobs of 1 ms in batches of ≤ 4: batches 4, 4, 2 -> waiting 4·1 + 2·2 = 8 exactly
    assert size_sequence_waiting_bound(np.ones(10), 4) == pytest.approx(8.0)


def test_stopped_search_bound_with_frame_level_bounds(monkeypatch):
    import planner.priority.exact as exact_module

    problem = generate_priority_problem(10, 3, 1, slo_spread=0.5)
    optimum = solve_exact(problem, fcfs(problem)).plan.g
    monkeypatch.setattr(exact_module, "OPEN_CHILDREN_BOUNDED", 0)  # every open frame bounded by its node bound
    stopped = solve_exact(problem, fcfs(problem), node_limit=1000)
    assert not stopped.proven
    assert stopped.plan.g <= optimum * (1 + 1e-9) <= stopped.bound_g * (1 + 2e-9)


@pytest.mark.parametrize("b_max,capacity", [(2, None), (3, 2500), (4, None)])
def test_compiled_children_equal_python_minus_lagrangian_pruned(b_max, capacity):
    """The kernel's children = the Python children (same order, same states) without those whose
    Lagrangian node bound is ≤ the tolerance; the kept non-leaf ones are marked as already tested."""
    from planner.priority.exact import _ParametricSearch
    from planner.priority.lagrangian import lagrangian_bound

    problem = generate_priority_problem(12, b_max, 40 + b_max, slo_spread=0.5, token_capacity=capacity)
    incumbent = fcfs(problem)
    lam = incumbent.met / incumbent.total_ms
    relaxation = lagrangian_bound(problem, lam, iterations=30)
    search = _ParametricSearch(problem, lam, None, None, {}, relaxation)
    assert search.compiled_expand is not None
    rng = np.random.default_rng(b_max)
    pruned_somewhere = False
    for _ in range(60):
        remaining = [i for i in range(12) if rng.random() < 0.7] or [3]
        wait = float(rng.uniform(0, 60_000))
        met = int(rng.integers(0, 12 - len(remaining) + 1))
        total = float(rng.uniform(0, 300_000))
        fast = search.compiled_children(remaining, wait, met, total)
        expand = search.compiled_expand
        search.compiled_expand = None
        slow = search.children(remaining, wait, met, total)
        search.compiled_expand = expand
        kept = []
        for child in slow:
            batch, new_wait, new_met, new_total = child[2:6]
            left = [i for i in remaining if i not in batch]
            if left and search.lagrangian_value(left, new_wait, new_met, new_total) <= search.tolerance:
                pruned_somewhere = True
                continue
            kept.append(child)
        assert [c[:6] for c in fast] == kept
        assert all(c[6] == bool(len(c[2]) < len(remaining)) for c in fast)
    assert pruned_somewhere  # the filter was exercised


def test_compiled_batched_waiting_bound_equals_python():
    from planner.priority.compiled_search import batched_waiting_bound as compiled
    from planner.priority.exact import batched_waiting_bound

    rng = np.random.default_rng(11)
    for _ in range(300):
        r, b_max = int(rng.integers(0, 25)), int(rng.integers(1, 5))
        mins = np.sort(rng.uniform(10.0, 5000.0, size=r))
        assert compiled(mins, b_max) == batched_waiting_bound(mins.tolist(), b_max)


@pytest.mark.parametrize("jobs,b_max,seed,capacity", [(9, 2, 1, None), (11, 2, 2, None), (10, 3, 3, 3000),
                                                      (10, 4, 4, None), (12, 2, 5, 2500), (12, 4, 6, None)])
def test_compiled_search_equals_python_search(monkeypatch, jobs, b_max, seed, capacity):
    """The compiled depth-first search visits the same nodes as `visit` (same count) and ends with
    the same plan and proof; a node-limited run of each returns a valid bound."""
    import planner.priority.exact as exact_module

    problem = generate_priority_problem(jobs, b_max, seed, slo_spread=0.5, token_capacity=capacity)
    monkeypatch.setattr(exact_module, "PLAIN_NODE_BUDGET", 0)  # the Lagrangian bound from the start
    monkeypatch.setattr(exact_module, "RESTART_GAIN", None)  # restarts are checked per chunk vs per 64 nodes
    runs = {}
    for compiled in (True, False):
        monkeypatch.setattr(exact_module, "USE_COMPILED_SEARCH", compiled)
        runs[compiled] = solve_exact(problem, fcfs(problem))
    fast, slow = runs[True], runs[False]
    assert fast.proven and slow.proven
    assert fast.nodes == slow.nodes
    assert fast.plan == slow.plan
    assert evaluate(FastTables(problem.tables), fast.plan.order, fast.plan.sizes) == (fast.plan.met, fast.plan.total_ms)
    for compiled in (True, False):
        monkeypatch.setattr(exact_module, "USE_COMPILED_SEARCH", compiled)
        stopped = solve_exact(problem, fcfs(problem), node_limit=max(fast.nodes // 3, 2))
        assert stopped.plan.g <= fast.plan.g * (1 + 1e-9) <= stopped.bound_g * (1 + 2e-9)


@pytest.mark.parametrize("jobs,b_max,seed", [(9, 2, 1), (10, 3, 3), (11, 4, 7)])
def test_restarts_keep_the_optimum(monkeypatch, jobs, b_max, seed):
    """Restarts at a better λ (re-tuned Lagrangian bound) prove the same G* as the search without
    them; every returned plan re-evaluates to its (n, t); a node-limited run returns a valid bound."""
    import planner.priority.exact as exact_module

    problem = generate_priority_problem(jobs, b_max, seed, slo_spread=0.5)
    monkeypatch.setattr(exact_module, "PLAIN_NODE_BUDGET", 0)
    monkeypatch.setattr(exact_module, "RESTART_GAIN", None)
    plain = solve_exact(problem, fcfs(problem))
    monkeypatch.setattr(exact_module, "RESTART_GAIN", 0.0)  # restart on every better plan
    restarted = solve_exact(problem, fcfs(problem))
    stopped = solve_exact(problem, fcfs(problem), node_limit=max(plain.nodes // 4, 2))
    for outcome in (plain, restarted):
        assert outcome.proven
        assert outcome.plan.g == pytest.approx(plain.plan.g, rel=1e-12)
        assert evaluate(FastTables(problem.tables), outcome.plan.order, outcome.plan.sizes) == \
            (outcome.plan.met, outcome.plan.total_ms)
    assert stopped.plan.g <= plain.plan.g * (1 + 1e-9) <= stopped.bound_g * (1 + 2e-9)
