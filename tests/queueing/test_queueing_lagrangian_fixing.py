"""Reduced-cost fixing with the deadline Lagrangian's duals, and the Lagrangian heuristic (relaxation → plan)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from planner.core.contract import RunOptions
from planner.queueing.bounds import relaxation_data, swap_assignment_bound
from planner.queueing.certified import kept_cells, relaxation_plan, repair_relaxation_plan
from planner.queueing.generator import random_problem
from planner.queueing.lagrangian import deadline_lagrangian_bound, relaxation_sequences, split_assignment_value
from planner.queueing.lagrangian_fixing import _range_minimum, lagrangian_reduced_costs
from planner.queueing.local_search import improve_plan
from planner.queueing.problem import QueueAssignment
from planner.queueing.pipeline import run_heuristic
from planner.queueing.validator import validate_assignment
from support.queueing import busy_tiny, random_tiny


def feasible_plans(problem):
    """Every plan meeting every SLO (each permutation cut into the queues): (penalty, sequences)."""
    n, g = problem.num_groups, problem.num_queues
    plans = {}
    for perm in itertools.permutations(range(n)):
        for cuts in itertools.combinations_with_replacement(range(n + 1), g - 1):
            limits = (0, *cuts, n)
            seqs = tuple(tuple(perm[limits[k]:limits[k + 1]]) for k in range(g))
            report = validate_assignment(problem, QueueAssignment.of(problem, [list(s) for s in seqs], "brute"))
            if report.feasible:
                plans[seqs] = report.objective
    return [(value, seqs) for seqs, value in plans.items()]


def test_range_minimum_matches_a_direct_scan():
    rng = np.random.default_rng(0)
    values = rng.normal(size=(3, 40))
    for width in (0, 1, 2, 5, 8, 13):
        count = 40 - width
        expected = np.array([[values[q, r:r + width + 1].min() for r in range(count)] for q in range(3)])
        assert np.array_equal(_range_minimum(values, width, count), expected)


@pytest.mark.parametrize("seed", range(5))
def test_lagrangian_fixing_keeps_every_plan_below_the_incumbent(seed):
    rng = np.random.default_rng(seed)
    fixed_somewhere = False
    for problem in (random_tiny(900 + seed, groups=5, objective="penalty"), busy_tiny(60 + seed)):
        plans = feasible_plans(problem)
        data = relaxation_data(problem)
        if not plans or data.forbidden.all(axis=0).any():
            continue
        values = sorted(v for v, _ in plans)
        upper = values[min(len(values) - 1, len(values) // 4)]  # a quarter of the plans are at or below it
        queues = relaxation_data(problem).queues
        for _ in range(4):
            multipliers = rng.integers(0, 3, size=problem.num_groups)
            outcome = lagrangian_reduced_costs(data, multipliers, problem.num_groups)
            assert outcome is not None
            value, reduced = outcome
            assert value == pytest.approx(split_assignment_value(data, 1 + multipliers)[0], abs=1e-7)
            keep = reduced <= upper - value + 1e-7
            fixed_somewhere |= not keep.all()
            for penalty, seqs in plans:
                if penalty > upper + 1e-9:
                    continue
                for local, queue in enumerate(queues):
                    sequence = seqs[queue]
                    for k, group in enumerate(sequence):
                        assert keep[local, group, len(sequence) - 1 - k], (penalty, seqs, multipliers)
    assert fixed_somewhere or seed % 2  # the test bites: some cells are fixed


def test_lagrangian_fixing_cells_are_a_subset_and_keep_the_incumbent():
    problem = random_problem(80, 4, seed=1)  # the SLOs bind: the Lagrangian has multipliers > 0
    plan = improve_plan(problem, run_heuristic(problem, "greedy").solution)
    report = validate_assignment(problem, plan)
    assert report.feasible
    upper = report.objective
    bound = swap_assignment_bound(problem)
    lagrangian = deadline_lagrangian_bound(problem, upper, rounds=8)
    assert lagrangian is not None and lagrangian.multipliers.any()
    fixing = lagrangian_reduced_costs(relaxation_data(problem), lagrangian.multipliers, problem.num_groups)
    both = {tuple(c) for c in kept_cells(problem, bound, upper, fixing)}
    alone = {tuple(c) for c in kept_cells(problem, bound, upper)}
    assert both <= alone
    assert len(both) < len(alone)  # the Lagrangian's duals fix cells the assignment bound's do not
    for queue, sequence in enumerate(plan.queues):
        for k, group in enumerate(sequence):
            assert (queue, group, len(sequence) - 1 - k) in both


def test_relaxation_sequences_place_every_group_once_by_earliest_piece():
    # pieces of group 0 on queues 0 and 1 (earliest at queue 1, position 5); group 1 on queue 0
    sequences = relaxation_sequences(2, np.array([0, 0, 1, 2]), np.array([0, 1, 0, 0]), np.array([2, 5, 4, 0]))
    assert sequences == ((1, 2), (0,))


@pytest.mark.parametrize("seed", range(3))
def test_repaired_relaxation_plan_is_validated_and_better(seed):
    problem = random_problem(40, 2, seed=seed)
    bound = swap_assignment_bound(problem)
    n = problem.num_groups
    sequences = relaxation_sequences(len(bound.queues), np.arange(n), np.array([q for q, _ in bound.assignment]),
                                     np.array([r for _, r in bound.assignment]))
    start = relaxation_plan(problem, bound.queues, sequences, "assignment relaxation")
    assert sorted(i for seq in start.queues for i in seq) == list(range(n))
    repaired = repair_relaxation_plan(problem, start, float("inf"))
    if repaired is None:  # the descent could not reach a plan meeting every SLO
        return
    plan, report = repaired
    assert report.feasible and report.objective == pytest.approx(validate_assignment(problem, plan).objective)
    assert report.objective >= bound.value - 1e-6
    assert repair_relaxation_plan(problem, start, report.objective) is None  # not strictly better than itself


def test_pipeline_with_the_relaxation_plan_is_deterministic_and_validated():
    from planner.queueing.pipeline import solve_queueing

    problem = random_problem(50, 4, seed=0)  # the repaired assignment-relaxation plan closes the gap here
    first = solve_queueing(problem, RunOptions(threads=1))
    second = solve_queueing(problem, RunOptions(threads=1))
    assert "relaxation" in first.stats["plan_from"]
    assert first.solution.queues == second.solution.queues
    assert first.objective == second.objective and first.bound == second.bound
    report = validate_assignment(problem, first.solution)
    assert report.feasible and report.objective == pytest.approx(first.objective, abs=1e-9)
    assert first.bound <= first.objective + 1e-9
