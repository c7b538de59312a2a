"""Properties of the queueing MILP: brute force = MILP on tiny cases, MILP ≤ baselines, determinism."""

from __future__ import annotations


import numpy as np
import pytest

from planner.core.contract import RunOptions
from planner.queueing.heuristics import HEURISTICS
from planner.queueing.problem import InstanceType, QueueingProblem, RequestGroup, VirtualQueue
from planner.queueing.pipeline import QueueingKnobs, solve_queueing
from planner.queueing.validator import validate_assignment
from planner.solver import SolveStatus
from support.queueing import brute_force, random_tiny






@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("objective", ["total_lateness", "penalty"])
def test_brute_force_equals_milp(seed, objective):
    p = random_tiny(seed, objective=objective)
    expected = brute_force(p)
    res = solve_queueing(p, RunOptions(), QueueingKnobs(formulation="slots", recommend_scale_up=False))
    if expected == float("inf"):
        assert res.status == SolveStatus.INFEASIBLE
        return
    assert res.status == SolveStatus.OPTIMAL
    assert res.objective == pytest.approx(expected, rel=1e-6, abs=1e-6)
    assert res.validation.objective == pytest.approx(res.objective)


@pytest.mark.parametrize("seed", range(6))
def test_milp_never_worse_than_a_baseline(seed):
    objective = ["total_lateness", "max_lateness", "late_groups"][seed % 3]
    p = random_tiny(100 + seed, groups=5, queues=2, objective=objective)
    res = solve_queueing(p, RunOptions(), QueueingKnobs(formulation="slots"))
    assert res.status == SolveStatus.OPTIMAL
    for name, fn in HEURISTICS.items():
        rep = validate_assignment(p, fn(p))
        assert res.objective <= rep.objective + 1e-6, name


def test_blocks_is_a_valid_upper_bound_of_slots():
    for seed in range(2):
        p = random_tiny(200 + seed, groups=5, queues=2, objective="total_lateness")
        exact = solve_queueing(p, RunOptions(), QueueingKnobs(formulation="slots"))
        blocks = solve_queueing(p, RunOptions(), QueueingKnobs(formulation="blocks"))
        assert blocks.validation.feasible
        assert blocks.objective >= exact.objective - 1e-6


def test_deterministic():
    p = random_tiny(7, groups=5, queues=2)
    a = solve_queueing(p, RunOptions(seed=0), QueueingKnobs(formulation="slots"))
    b = solve_queueing(p, RunOptions(seed=0), QueueingKnobs(formulation="slots"))
    assert a.solution.queues == b.solution.queues and a.objective == b.objective


@pytest.mark.parametrize("seed", range(4))
def test_assignment_bound_is_below_the_optimum(seed):
    from planner.queueing.bounds import penalty_lower_bound

    p = random_tiny(300 + seed, objective="penalty")
    optimum = brute_force(p)
    bound = penalty_lower_bound(p)
    assert bound is not None
    if optimum < float("inf"):
        assert bound <= optimum + 1e-9


def test_assignment_bound_is_exact_without_swaps_and_binding_slos():
    # One queue holding A, works 2 and 1, loose SLOs 50: SPT gives Σ start = 0 + 1 = 1; penalty 1 − 100 = −99.
    from planner.queueing.bounds import penalty_lower_bound

    groups = (RequestGroup("a", "A", "c", 50.0, 1, 1, 1, 0, 1), RequestGroup("b", "A", "c", 50.0, 1, 1, 1, 0, 1))
    p = QueueingProblem("spt", groups, (InstanceType("t", "x", 1, 10.0, 1),), (VirtualQueue("q", 0, "A"),),
                        np.array([[2.0, 1.0]]), np.zeros((1, 2)))
    assert penalty_lower_bound(p) == pytest.approx(-99.0)
