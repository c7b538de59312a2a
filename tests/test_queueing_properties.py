"""Properties of the queueing MILP: brute force = MILP on tiny cases, MILP ≤ baselines, determinism."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from planner.core.contract import RunOptions
from planner.queueing.heuristics import HEURISTICS
from planner.queueing.problem import InstanceType, QueueAssignment, QueueingProblem, RequestGroup, VirtualQueue
from planner.queueing.pipeline import QueueingKnobs, solve_queueing
from planner.queueing.validator import validate_assignment
from planner.solver import SolveStatus


def random_tiny(seed: int, groups: int = 4, queues: int = 2, objective: str = "total_lateness") -> QueueingProblem:
    rng = np.random.default_rng(seed)
    models = ["A", "B"]
    gs = tuple(RequestGroup(f"g{i}", models[int(rng.integers(2))], "c", float(rng.uniform(2, 30)), 1, 1, 1, 0, 1,
                            arrival_s=float(i)) for i in range(groups))
    types = (InstanceType("fast", "x", 1, 4.0, 1), InstanceType("slow", "x", 1, 6.0, queues - 1))
    qs = (VirtualQueue("fast-1", 0, "A"),) + tuple(VirtualQueue(f"slow-{k}", 1, None) for k in range(queues - 1))
    work = rng.uniform(1, 10, size=(1, groups))
    work = np.vstack([work, 1.5 * work])  # the slow type has 2/3 of the throughput
    tail = rng.uniform(0, 3, size=(2, groups))
    return QueueingProblem(f"tiny{seed}", gs, types, qs, work, tail, objective=objective,
                           deadline="completion" if seed % 2 else "start")


def brute_force(problem: QueueingProblem) -> float:
    """Every permutation of the groups cut into the queues (in order): the best validator objective."""
    n, g = problem.num_groups, problem.num_queues
    best = float("inf")
    for perm in itertools.permutations(range(n)):
        for cuts in itertools.combinations_with_replacement(range(n + 1), g - 1):
            bounds = (0, *cuts, n)
            seqs = [list(perm[bounds[k]:bounds[k + 1]]) for k in range(g)]
            rep = validate_assignment(problem, QueueAssignment.of(problem, seqs, "brute"))
            if rep.feasible:
                best = min(best, rep.objective)
    return best


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
