"""The deadline Lagrangian bound (split-group assignment): validity, exactness at μ = 0, determinism."""

from __future__ import annotations

import numpy as np
import pytest

from planner.core.contract import RunOptions
from planner.queueing.bounds import swap_assignment_bound
from planner.queueing.generator import random_problem
from planner.queueing.heuristics import HEURISTICS
from planner.queueing.lagrangian import deadline_lagrangian_bound, relaxation_data, split_assignment_value
from planner.queueing.local_search import improve_plan
from planner.queueing.problem import InstanceType, QueueingProblem, RequestGroup, VirtualQueue
from planner.queueing.validator import validate_assignment
from support.queueing import brute_force, busy_tiny, random_tiny


def tiny_problems(seed: int):
    return (random_tiny(700 + seed, objective="penalty"), random_tiny(800 + seed, groups=5, objective="penalty"),
            busy_tiny(40 + seed))


@pytest.mark.parametrize("seed", range(6))
def test_split_assignment_value_is_below_the_optimum_for_any_multipliers(seed):
    rng = np.random.default_rng(seed)
    for problem in tiny_problems(seed):
        optimum = brute_force(problem)
        data = relaxation_data(problem)
        if optimum == float("inf") or data.forbidden.all(axis=0).any():
            continue
        for scale in (1, 2):
            for _ in range(3):
                pieces_of = scale + rng.integers(0, 4 * scale, size=problem.num_groups)
                outcome = split_assignment_value(data, pieces_of, scale)
                assert outcome is not None
                assert outcome[0] <= optimum + 1e-7


@pytest.mark.parametrize("seed", range(6))
def test_lagrangian_bound_is_below_the_optimum_and_not_below_the_assignment_bound(seed):
    for problem in tiny_problems(seed):
        optimum = brute_force(problem)
        if optimum == float("inf"):
            continue
        bound = deadline_lagrangian_bound(problem, optimum)
        assignment = swap_assignment_bound(problem)
        assert bound is not None and assignment is not None
        assert bound.value <= optimum + 1e-7
        assert bound.value >= assignment.value - 1e-7
        assert (bound.multipliers >= 0).all()


def test_no_multipliers_give_the_swap_assignment_bound():
    compared = 0
    for problem in (random_problem(60, 3, seed=1), random_problem(80, 4, seed=2), busy_tiny(3),
                    random_tiny(9, objective="penalty")):
        outcome = split_assignment_value(relaxation_data(problem), np.ones(problem.num_groups, dtype=np.int64))
        assignment = swap_assignment_bound(problem)
        assert (outcome is None) == (assignment is None)
        if outcome is not None:
            assert outcome[0] == pytest.approx(assignment.value, abs=1e-6)
            compared += 1
    assert compared >= 2


def test_lagrangian_closes_a_hand_worked_deadline_gap():
    # One queue, model A loaded, no swaps.  Short S (work 1, SLO 100) and urgent U (work 3, SLO 0.5):
    # SPT (S, U) starts U at 1 > 0.5, so the only feasible plan is (U, S): Σ start = 0 + 3 = 3.
    # The assignment bound ignores the SLO: SPT Σ start = 1.  With μ_U = 2, U is three pieces of
    # work 1 (correction −3·2/2 = −3 on U): the split SPT schedule gives U's pieces 0,1,2 (or the tie
    # S first), Σ pieces = 0+1+2+3 = 6, minus 3 = 3, minus μ·slo = 1 → value = 3 − 1 − Σ slo.
    groups = (RequestGroup("S", "A", "c", 100.0, 1, 1, 1, 0, 1), RequestGroup("U", "A", "c", 0.5, 1, 1, 1, 0, 1, 1.0))
    problem = QueueingProblem("deadline", groups, (InstanceType("t", "x", 1, 5.0, 1),), (VirtualQueue("q", 0, "A"),),
                              np.array([[1.0, 3.0]]), np.zeros((1, 2)), objective="penalty")
    optimum = brute_force(problem)
    assert optimum == pytest.approx(3.0 - 100.5)
    assert swap_assignment_bound(problem).value == pytest.approx(1.0 - 100.5)
    data = relaxation_data(problem)
    value, _ = split_assignment_value(data, np.array([1, 3]))
    assert value == pytest.approx(3.0 - 1.0 - 100.5)
    bound = deadline_lagrangian_bound(problem, optimum)
    assert swap_assignment_bound(problem).value < bound.value <= optimum + 1e-9


def test_lagrangian_bound_is_below_every_validated_plan_and_deterministic():
    problem = random_problem(120, 4, seed=3)
    plans = [improve_plan(problem, fn(problem)) for fn in HEURISTICS.values()]
    reports = [validate_assignment(problem, plan) for plan in plans]
    feasible = [r.objective for r in reports if r.feasible]
    assert feasible
    upper = min(feasible)
    first = deadline_lagrangian_bound(problem, upper, rounds=6)
    second = deadline_lagrangian_bound(problem, upper, rounds=6)
    assert first.value == second.value and (first.multipliers == second.multipliers).all()
    assert first.value <= upper + 1e-7
    assert first.value >= swap_assignment_bound(problem).value - 1e-7


def test_certified_pipeline_uses_the_lagrangian_when_it_is_tighter():
    from planner.queueing.pipeline import solve_queueing

    problem = random_problem(30, 2, seed=1)  # two queues, tight SLOs: the assignment bound leaves a gap
    result = solve_queueing(problem, RunOptions(time_limit=2.0, threads=1))
    stats = result.stats
    assert stats["formulation"] == "certified"
    assert result.validation.feasible and result.objective == pytest.approx(result.validation.objective)
    assert stats["lagrangian_bound"] > stats["assignment_bound"] + 1e-6
    assert stats["assignment_bound"] - 1e-9 <= result.bound <= result.objective + 1e-9
    assert result.bound >= min(stats["lagrangian_bound"], result.objective) - 1e-9
    for fn in HEURISTICS.values():
        report = validate_assignment(problem, improve_plan(problem, fn(problem)))
        if report.feasible:
            assert result.bound <= report.objective + 1e-9
