"""The Lagrangian bound of `planner.priority.lagrangian`: an upper bound on max n − λ·t, checked
against complete enumeration, and its node bound inside the branch-and-bound."""

from __future__ import annotations

import itertools

import pytest
from support.priority_plans import all_plans, batch_sizes

from planner.priority.evaluate import FastTables, evaluate
from planner.priority.exact import solve_exact
from planner.priority.generator import generate_priority_problem
from planner.priority.heuristics import fcfs
from planner.priority.lagrangian import lagrangian_bound


@pytest.mark.parametrize(("jobs", "b_max", "seed"), [(5, 2, 0), (5, 3, 1), (6, 2, 2), (5, 4, 4)])
def test_bound_is_at_least_the_enumerated_maximum(jobs, b_max, seed):
    problem = generate_priority_problem(jobs, b_max, seed, slo_spread=0.6 if seed % 2 == 0 else 0.0)
    plans = all_plans(problem)
    best_g = max(met / total for met, total in plans)  # per ms
    for lam in (0.0, 0.5 * best_g, best_g, 1.5 * best_g):
        exact = max(met - lam * total for met, total in plans)
        bound = lagrangian_bound(problem, lam, iterations=100, target=exact)
        assert bound.value >= exact - 1e-9
        # the node bound of the empty prefix is the root bound
        root = bound.node_bound(0, 0.0, 0, 0.0, float(bound.multipliers.sum()))
        assert root == pytest.approx(bound.value, abs=1e-9)


def test_bound_reaches_zero_at_the_optimum_on_small_instances():
    # at λ = G* the maximum of n − λ·t is 0; the subgradient steps get the bound down to it here
    problem = generate_priority_problem(6, 2, 2, slo_spread=0.6)
    plans = all_plans(problem)
    best_g = max(met / total for met, total in plans)
    assert lagrangian_bound(problem, best_g, iterations=300, target=1e-6).value <= 1e-6


def test_node_bound_holds_for_every_completion_of_a_prefix():
    problem = generate_priority_problem(6, 2, 5, slo_spread=0.5)
    tables = FastTables(problem.tables)
    plans = all_plans(problem)
    lam = 0.9 * max(met / total for met, total in plans)
    bound = lagrangian_bound(problem, lam, iterations=100)
    # prefix: jobs 0 and 1 in one batch; every completion of it
    prefix_met, prefix_total = evaluate(tables, [0, 1], [2])
    wait = max(problem.tables.exec_ms[0, 1], problem.tables.exec_ms[1, 1])
    node = bound.node_bound(2, wait, prefix_met, prefix_total, float(bound.multipliers[2:].sum()))
    for order in itertools.permutations(range(2, 6)):
        for sizes in batch_sizes(4, 2):
            met, total = evaluate(tables, [0, 1, *order], [2, *sizes])
            assert met - lam * total <= node + 1e-9


@pytest.mark.parametrize("plain_nodes", [0, 5])
def test_branch_and_bound_with_the_bound_matches_enumeration(monkeypatch, plain_nodes):
    from planner.priority import exact

    # 0: the bound from the root even on small instances; 5: a plain search first, then the restart
    monkeypatch.setattr(exact, "PLAIN_NODE_BUDGET", plain_nodes)
    for seed in range(3):
        problem = generate_priority_problem(5, 2 + seed, seed, slo_spread=0.5)
        best_g = max(met / total for met, total in all_plans(problem))
        outcome = solve_exact(problem, fcfs(problem))
        assert outcome.proven
        assert outcome.plan.g == pytest.approx(1000.0 * best_g, rel=1e-9)
        if plain_nodes == 0:
            assert outcome.lagrangian is not None  # the bound was computed and used
