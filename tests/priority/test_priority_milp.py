"""Priority family, Dinkelbach MILP (planner/priority/milp.py): optimum = exhaustive search on random
instances (b_max = 2 and 4), the evaluator and the independent validator recompute its G, the
bound under a time limit bounds the optimum, the model's rows hold on a warm start, determinism."""

from __future__ import annotations

import json

import numpy as np
import pytest

from planner.priority.evaluate import FastTables, evaluate
from planner.priority.exact import solve_exact
from planner.priority.generator import generate_priority_problem
from planner.priority.heuristics import fcfs
from planner.priority.formulation import build_parametric_model, decode_plan, start_lower_bounds_s
from planner.priority.milp import shortest_total_s, solve_milp, total_latency_lower_bound_s, warm_start_vector
from planner.priority.pipeline import run_exhaustive, to_schedule
from planner.priority.validator import validate_schedule

CASES = [(4, 2, 0), (5, 2, 1), (6, 2, 2), (6, 2, 3), (4, 4, 4), (5, 4, 5), (6, 4, 6), (6, 4, 7)]


@pytest.mark.parametrize(("jobs", "b_max", "seed"), CASES)
def test_milp_optimum_equals_exhaustive(jobs, b_max, seed):
    # heterogeneous SLOs on even seeds, the paper's constant SLOs on odd ones; start from FCFS
    problem = generate_priority_problem(jobs, b_max, seed, slo_spread=0.6 if seed % 2 == 0 else 0.0)
    exhaustive = run_exhaustive(problem)
    assert exhaustive.proven_optimal
    outcome = solve_milp(problem, fcfs(problem))
    assert outcome.proven
    assert outcome.plan.g == pytest.approx(exhaustive.objective, rel=1e-9)
    met, total = evaluate(FastTables(problem.tables), outcome.plan.order, outcome.plan.sizes)
    assert (met, total) == (outcome.plan.met, pytest.approx(outcome.plan.total_ms, rel=1e-12))
    report = validate_schedule(problem, to_schedule(problem, [(list(range(jobs)), outcome.plan)]))
    assert report.feasible and report.objective == pytest.approx(outcome.plan.g, rel=1e-9)


def test_milp_with_token_capacity_equals_exhaustive():
    problem = generate_priority_problem(6, 3, 3, slo_spread=0.5, token_capacity=2500)
    exhaustive = run_exhaustive(problem)
    outcome = solve_milp(problem, fcfs(problem))
    assert outcome.proven and outcome.plan.g == pytest.approx(exhaustive.objective, rel=1e-9)
    report = validate_schedule(problem, to_schedule(problem, [(list(range(6)), outcome.plan)]))
    assert report.feasible


def test_warm_start_satisfies_every_row_and_scores_the_plan():
    problem = generate_priority_problem(8, 4, 3, slo_spread=0.5)
    plan = fcfs(problem)
    ratio = plan.g
    model, layout = build_parametric_model(problem, ratio)
    values = warm_start_vector(problem, model, layout, plan)
    assert model.max_violation(values) <= 1e-9
    # objective of the warm start = n − λ·t of the plan (t in seconds)
    assert float(model.cost @ values) == pytest.approx(plan.met - ratio * plan.total_ms / 1000.0, abs=1e-9)
    assert decode_plan(problem, layout, values)[1] == list(plan.sizes)


def test_time_limited_bound_bounds_the_optimum():
    problem = generate_priority_problem(10, 3, 1, slo_spread=0.5)
    optimum = solve_exact(problem, fcfs(problem)).plan.g  # the branch-and-bound, proven
    stopped = solve_milp(problem, fcfs(problem), time_limit=0.3)
    assert stopped.plan.g <= optimum * (1 + 1e-9)
    assert stopped.bound_g >= optimum * (1 - 1e-9)


def test_total_latency_lower_bounds_hold():
    problem = generate_priority_problem(7, 2, 9, slo_spread=0.5)
    best_total_s = run_exhaustive(problem).solution.total_latency_ms / 1000.0
    assert shortest_total_s(problem) <= total_latency_lower_bound_s(problem, None)
    # min t over all plans is at most the t of the G-optimal plan
    assert total_latency_lower_bound_s(problem, None) <= best_total_s * (1 + 1e-9)


def test_start_lower_bounds_by_hand():
    # minima 1, 2, 3, 4 s and b_max = 2: 2 jobs -> one batch ≥ 2; 3 jobs -> {1},{2,3} ≥ 1 + 3 = 4;
    # 4 jobs -> {1,2},{3,4} ≥ 2 + 4 = 6
    bounds = start_lower_bounds_s(np.array([4.0, 1.0, 3.0, 2.0]), 2)
    assert bounds.tolist() == [0.0, 1.0, 2.0, 4.0, 6.0]


def test_milp_is_deterministic():
    problem = generate_priority_problem(6, 4, 13, slo_spread=0.5)
    first = solve_milp(problem, fcfs(problem))
    again = solve_milp(problem, fcfs(problem))
    assert (first.plan.order, first.plan.sizes) == (again.plan.order, again.plan.sizes)


def test_cli_exact_method_milp_and_bad_name(monkeypatch, capsys):
    from support import REPO, run_cli

    instance = str(REPO / "instances" / "priority" / "fig4_toy.yaml")
    code, out, err = run_cli(monkeypatch, capsys, "solve", "priority", instance, "--formulation", "milp", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["status"] == "optimal" and "MILP" in data["solver"]
    assert data["objective"] == pytest.approx(3 / 1.8)  # Fig. 4 (C): 3 met in 1.8 s
    assert data["validation"]["feasible"]
    code, out, err = run_cli(monkeypatch, capsys, "solve", "priority", instance, "--formulation", "simplex")
    assert code == 2 and "unknown --formulation" in err and "Traceback" not in err


def test_cli_compare_takes_the_exact_method(monkeypatch, capsys):
    from support import REPO, run_cli

    instance = str(REPO / "instances" / "priority" / "fig4_toy.yaml")
    code, out, err = run_cli(monkeypatch, capsys, "compare", "priority", instance, "--formulation", "milp", "--json")
    assert code == 0, err
    data = json.loads(out)
    # the optimum is Fig. 4 (C): 3 jobs met in 1.8 s, proven by the MILP
    exact = next(row for row in data["methods"] if row["kind"] == "exact")
    assert "MILP" in exact["result"]["solver"] and data["optimum"] == pytest.approx(3 / 1.8)
    assert all(row["objective"] <= data["optimum"] + 1e-12 for row in data["methods"])
    code, out, err = run_cli(monkeypatch, capsys, "compare", "priority", instance, "--formulation", "simplex")
    assert code == 2 and "unknown --formulation" in err and "Traceback" not in err


def test_auto_runs_the_branch_and_bound_and_hybrid_runs_the_milp():
    from planner.errors import PlannerError
    from planner.priority.pipeline import best_heuristic_plan, prove_optimum

    small = generate_priority_problem(8, 2, 1, slo_spread=0.5)
    assert prove_optimum(small, best_heuristic_plan(small), time_limit=30.0)[1] == "branch-and-bound"  # small: no bound needed
    large = generate_priority_problem(25, 2, 1, slo_spread=0.5)
    outcome, name = prove_optimum(large, best_heuristic_plan(large), time_limit=1.0, method="hybrid")
    assert "MILP" in name and outcome.bound_g >= outcome.plan.g * (1 - 1e-12)
    with pytest.raises(PlannerError, match="time limit"):
        prove_optimum(small, best_heuristic_plan(small), method="hybrid")


def test_slo_rows_forbid_counting_a_missed_slo():
    # a plan vector that claims the SLO of a job that misses it must violate a row of the model
    claimed = 0
    for seed in range(20):
        problem = generate_priority_problem(8, 2, seed, slo_spread=0.5)
        plan = fcfs(problem)
        model, layout = build_parametric_model(problem, plan.g)
        values = warm_start_vector(problem, model, layout, plan)
        index = {arc: a for a, arc in enumerate(layout.arcs)}
        position = 0
        for size in plan.sizes:
            a = index[(position, size)]
            for i in plan.order[position:position + size]:
                column = layout.success.col(i, a)
                if values[column] < 0.5 and model.col_upper[column] > 0.5:  # missed, though possible at this arc
                    wrong = values.copy()
                    wrong[column] = 1.0
                    assert model.max_violation(wrong) > 1e-6
                    claimed += 1
            position += size
    assert claimed > 0
