"""Priority family: exact = exhaustive on random instances, every method ≤ the optimum,
determinism, the exact search's bound under a node limit, and Alg. 2."""

from __future__ import annotations

import itertools
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from planner.priority.exact import batched_waiting_bound, solve_exact
from planner.priority.exhaustive import compositions, exhaustive_search, permutation_blocks
from planner.priority.generator import generate_priority_problem
from planner.priority.heuristics import HEURISTICS, fcfs
from planner.priority.instance import load_priority_instance
from planner.priority.multi import assign_instances, token_num
from planner.priority.pipeline import run_exhaustive, run_method, run_multi_instance, to_schedule
from planner.priority.validator import validate_schedule

CASES = [(5, 1, 0), (6, 1, 1), (7, 1, 2), (7, 1, 3), (5, 2, 4), (6, 2, 5), (7, 2, 6), (6, 3, 7), (7, 3, 8),
         (5, 4, 9), (6, 4, 10), (7, 4, 11)]


@pytest.mark.parametrize(("jobs", "b_max", "seed"), CASES)
def test_exact_equals_exhaustive_and_bounds_every_method(jobs, b_max, seed):
    # Heterogeneous SLOs (spread 0.6) on even seeds, the paper's constant SLOs on odd ones.
    problem = generate_priority_problem(jobs, b_max, seed, slo_spread=0.6 if seed % 2 == 0 else 0.0)
    exhaustive = run_exhaustive(problem)
    assert exhaustive.proven_optimal
    heuristics = {method: run_method(problem, method) for method in HEURISTICS}
    for method, result in heuristics.items():
        assert result.validation.feasible, method
        assert result.objective == pytest.approx(result.solution.g_per_s, rel=1e-9)
        assert result.objective <= exhaustive.objective * (1 + 1e-9), method
    # the exact search from the weakest incumbent (FCFS) must still reach the optimum and prove it
    outcome = solve_exact(problem, fcfs(problem))
    assert outcome.proven
    assert outcome.plan.g == pytest.approx(exhaustive.objective, rel=1e-9)
    exact = to_schedule(problem, [(list(range(jobs)), outcome.plan)])
    report = validate_schedule(problem, exact)
    assert report.feasible and report.objective == pytest.approx(outcome.plan.g, rel=1e-9)


def test_exact_pipeline_result():
    problem = generate_priority_problem(7, 2, 12, slo_spread=0.6)
    exact = run_method(problem, "exact")
    assert exact.proven_optimal and exact.validation.feasible
    assert exact.bound == pytest.approx(exact.objective, rel=1e-9) and exact.gap == pytest.approx(0.0, abs=1e-9)
    assert exact.objective == pytest.approx(run_exhaustive(problem).objective, rel=1e-9)


def test_compositions_count():
    # compositions of 4 into parts ≤ 2: 1111, 112, 121, 211, 22 -> 5; parts ≤ 4: 2^3 = 8
    assert len(list(compositions(4, 2))) == 5
    assert len(list(compositions(4, 4))) == 8


def test_sa_is_deterministic_for_a_seed():
    problem = generate_priority_problem(12, 2, 5, slo_spread=0.5)
    first = HEURISTICS["sa"](problem, 7)
    again = HEURISTICS["sa"](problem, 7)
    assert (first.order, first.sizes) == (again.order, again.sizes)
    assert first.g >= fcfs(problem).g  # starts from the better of J_prio and J_in and keeps the best


def test_node_limit_returns_incumbent_and_valid_bound():
    problem = generate_priority_problem(10, 3, 1, slo_spread=0.5)
    optimum = solve_exact(problem, fcfs(problem)).plan.g
    stopped = solve_exact(problem, fcfs(problem), node_limit=1000)
    assert not stopped.proven
    assert stopped.plan.g <= optimum * (1 + 1e-9)
    assert stopped.bound_g >= optimum * (1 - 1e-9)  # the reported bound really bounds the optimum


def test_batched_waiting_bound_by_hand():
    # 4 jobs of 1, 2, 3, 4 ms, batches of ≤ 2.  Q = 2: batches {1,2},{3,4} last ≥ 2 and ≥ 4; the first
    # delays 2 jobs -> 2*2 = 4 (the best schedule: {1,2} then {3,4} waits exactly 2+2 = 4).
    # Q = 3: durations ≥ 1, 2, 4 with delays ≥ max(4-2, 2)=2, max(4-4, 1)=1 -> 1*2 + 2*1 = 4 as well
    # (floor for Q=3: 1*2 + 2*1 = 4 ≥ best -> stop).  Q = 4 would be ≥ 1*3 + 2*2 + 3*1 = 10.
    assert batched_waiting_bound([1.0, 2.0, 3.0, 4.0], 2) == pytest.approx(4.0)
    # b_max = 1 degenerates to SPT: 1*3 + 2*2 + 3*1 = 10
    assert batched_waiting_bound([1.0, 2.0, 3.0, 4.0], 1) == pytest.approx(10.0)


def test_multi_instance_assignment_and_plan():
    problem = generate_priority_problem(10, 2, 3, slo_spread=0.5, token_capacity=3000)
    groups = assign_instances(problem, 2)
    assert sorted(j for g in groups for j in g) == list(range(10))
    result = run_multi_instance(problem, 2, "sa", seed=1)
    assert result.validation.feasible
    assert len(result.solution.plans) == 2
    assert result.objective == pytest.approx(result.solution.g_per_s, rel=1e-9)
    # Eq. 20: 64 GB at utility 0.9, 0.5 MB per token -> 64e9 * 0.9 / 524288 = 109863 tokens
    assert token_num(64e9, 0.9, 524288) == 109863


@pytest.mark.parametrize("tail", [1, 2, 3, 8])
def test_permutation_blocks_stream_every_order_in_lexicographic_order(tail):
    for n in range(1, 8):
        blocks = list(permutation_blocks(n, tail))
        assert all(block.shape == (len(blocks[0]), n) for block in blocks)
        assert np.concatenate(blocks).tolist() == [list(p) for p in itertools.permutations(range(n))]


def test_exhaustive_at_the_largest_n_honours_the_time_limit_in_bounded_memory():
    # N = 12 is allowed; building all 12! orders at once used to need ~46 GB before the first time check.
    problem = load_priority_instance(Path(__file__).resolve().parents[2] / "instances" / "priority" /
                                     "hetero_n12_b4_mem.yaml")
    assert problem.size == 12
    tracemalloc.start()
    try:
        started = time.perf_counter()
        plan, finished, evaluated = exhaustive_search(problem, time_limit=0.3)
        seconds = time.perf_counter() - started
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert not finished and 0 < evaluated < 479_001_600
    assert seconds < 3.0
    assert peak < 100e6
    assert sorted(plan.order) == list(range(12)) and sum(plan.sizes) == 12
