"""`--time-limit` is the whole call: a valid bound at any limit, the same plan on every run, and a MIP
objective that disagrees with the validator is never reported optimal (routing, deployment, priority,
queueing, placement).  Small instances and generous hang guards: no speed is asserted here
(`benchmarks/time_limit.py` measures wall times)."""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys

import numpy as np
import pytest

from planner.core.contract import RunOptions
from planner.queueing.pipeline import QueueingKnobs
from planner.core.work import WorkClock
from planner.deployment import cost_solve, routing_solve
from planner.deployment.cost_solve import (
    cost_lower_bound, load_scale_upper_bound, max_servable_load, solve_cost_plan,
)
from planner.deployment.problem import RoutingProblem
from planner.deployment.routing_bound import makespan_lower_bound
from planner.deployment.routing_solve import solve_routing
from planner.solver import SolveStatus
from support import REPO
from support.deployment import cost_brute_force
from support.deployment import cost_problem as _cost_problem
from support.deployment import routing_brute_force
from support.deployment import routing_problem as tiny_routing

HANG_GUARD = 300  # seconds: a CLI run that takes longer than this is a hang, not a slow machine
NO_GUARD = float("inf")  # a WorkClock guard share that never fires: the nominal budget alone decides


def _routing(n: int, seed: int = 0) -> RoutingProblem:
    """``n`` requests on the three toy instances of tests/deployment/test_routing_core.py (one fast, two slow)."""
    return tiny_routing(seed, n)


# ---- routing ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(4))
def test_makespan_bound_is_valid_and_not_trivial(seed):
    problem = tiny_routing(seed)
    optimum = routing_brute_force(problem)
    bound = makespan_lower_bound(problem)
    assert 0 < bound.value <= optimum * (1 + 1e-12)
    p = np.where(problem.fits, problem.processing_times, np.inf)
    trivial = max(p.min(axis=1).sum() / p.shape[1], p.min(axis=1).max())  # total work / machines, largest job
    assert bound.value >= trivial * (1 - 1e-9)


def test_makespan_bound_beats_total_work_over_machines_on_unequal_instances():
    """One instance 4× faster: Σ best time / S undercounts; the weighted bound is the LP value."""
    problem = _routing(60)
    bound = makespan_lower_bound(problem)
    p = problem.processing_times
    assert bound.value > 1.2 * p.min(axis=1).sum() / p.shape[1]
    assert bound.value <= solve_routing(problem, time_limit=None).objective * (1 + 1e-12)


@pytest.mark.parametrize("limit", [0.05, 0.5])
def test_routing_at_a_tiny_limit_has_a_valid_bound(limit):
    problem = tiny_routing(1)
    optimum = routing_brute_force(problem)
    result = solve_routing(problem, time_limit=limit)
    assert result.validation.feasible and result.bound is not None
    assert 0 < result.bound <= optimum * (1 + 1e-12) <= result.objective * (1 + 1e-12)
    assert result.stats["makespan_bound"] > 0


def test_routing_repeats_under_a_nominal_budget():
    """The same limit gives the same routing: the local search stops on its nominal budget (the
    wall-clock guard is off, so only the budget decides)."""
    problem = _routing(400, seed=3)
    runs = [solve_routing(problem, clock=WorkClock(0.12, guard_share=NO_GUARD)) for _ in range(2)]
    search = runs[0].stats["local_search"]
    assert search["budget_stop"] and search["rounds"] > 0  # the budget, not a local optimum, ended it
    assert runs[0].solution == runs[1].solution
    assert runs[0].stats["local_search"] == runs[1].stats["local_search"]
    assert runs[0].bound == runs[1].bound and not runs[0].stats["wall_cut"]
    more = solve_routing(problem, clock=WorkClock(1.5, guard_share=NO_GUARD))
    assert more.objective <= runs[0].objective


def _fake_report(real, factor):
    def fake(problem, solution):
        report = real(problem, solution)
        return dataclasses.replace(report, objective=report.objective * factor)
    return fake


def test_routing_milp_objective_disagreeing_with_the_validator_is_not_optimal(monkeypatch):
    problem = tiny_routing(2)
    honest = solve_routing(problem, mip_rel_gap=1e-9)
    assert honest.status == SolveStatus.OPTIMAL and honest.solution.method == "milp"
    monkeypatch.setattr(routing_solve, "validate_routing", _fake_report(routing_solve.validate_routing, 1 + 1e-5))
    result = solve_routing(problem, mip_rel_gap=1e-4)  # 1e-5 off: within the gap, so only the check can refuse
    assert result.solution.method == "milp"
    assert result.status != SolveStatus.OPTIMAL
    assert "MILP makespan" in result.message and f"differs from the validator's {result.objective:.9g}" in result.message
    assert result.objective == pytest.approx(honest.objective * (1 + 1e-5), rel=1e-12)


# ---- deployment cost plans --------------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(8))
def test_cost_bounds_are_valid(seed):
    problem = _cost_problem(np.random.default_rng(seed))
    best_cost, best_scale = cost_brute_force(problem)
    assert load_scale_upper_bound(problem) >= best_scale * (1 - 1e-9)
    if math.isfinite(best_cost):
        assert cost_lower_bound(problem) <= best_cost * (1 + 1e-9)
        for limit in (1e-3, 0.5):  # tiny limits: the LP and heuristics, perhaps no MILP
            result = solve_cost_plan(problem, time_limit=limit)
            assert result.bound is not None and result.bound <= best_cost * (1 + 1e-9)
            if result.objective is not None:
                assert result.validation.feasible and result.objective >= best_cost - 1e-6
    else:
        scale, bound, _ = max_servable_load(problem, time_limit=1e-3)
        assert bound is not None and scale is not None and scale <= best_scale * (1 + 1e-9) <= bound * (1 + 1e-9)


def test_cost_plan_repeats_under_a_time_limit():
    path = REPO / "instances" / "deployment" / "synthetic-6x4x10.yaml"
    from planner.deployment.instance import load_cost_plan_file

    problem = load_cost_plan_file(path)
    runs = [solve_cost_plan(problem, time_limit=0.5) for _ in range(2)]
    assert runs[0].solution == runs[1].solution and runs[0].bound == runs[1].bound
    assert runs[0].bound is not None and runs[0].bound <= runs[0].objective
    assert not runs[0].stats["wall_cut"] or "may not repeat" in runs[0].message


def test_cost_milp_objective_disagreeing_with_the_validator_is_not_optimal(monkeypatch):
    problem = _cost_problem(np.random.default_rng(0))
    assert solve_cost_plan(problem).status == SolveStatus.OPTIMAL
    monkeypatch.setattr(cost_solve, "validate_cost_plan", _fake_report(cost_solve.validate_cost_plan, 1 + 1e-4))
    monkeypatch.setattr(cost_solve, "single_type", lambda p: None)  # only the MILP's plan is left to report
    monkeypatch.setattr(cost_solve, "greedy_cheapest", lambda p: None)
    monkeypatch.setattr(cost_solve, "lp_rounding", lambda p, x: None)
    result = solve_cost_plan(problem)
    assert result.solution.method == "milp"
    assert result.status != SolveStatus.OPTIMAL
    assert "differs from the validator's" in result.message and "MILP $/h" in result.message


# ---- queueing -----------------------------------------------------------------------------------

def test_queueing_cheap_bounds_are_valid():
    from planner.queueing.bounds import head_lateness_bound, pooled_start_bound
    from support.queueing import brute_force, random_tiny

    checked = 0
    for seed in range(12):
        problem = random_tiny(seed)
        for objective in ("penalty", "total_lateness", "max_lateness", "late_groups"):
            p = problem.with_objective(objective)
            best = brute_force(p)
            if best is None:
                continue
            bound = pooled_start_bound(p) if objective == "penalty" else head_lateness_bound(p)
            assert bound is not None and bound <= best + 1e-6 * max(1.0, abs(best)), (seed, objective)
            checked += 1
    assert checked >= 20


def test_queueing_result_carries_a_bound_when_the_assignment_bounds_are_too_large(monkeypatch):
    """The assignment relaxations are skipped above their cell caps (2,000 × 16 in the issue); the
    result still carries a valid bound (the pooled bound), never null."""
    from planner.queueing import bounds, certified
    from planner.queueing.generator import random_problem
    from planner.queueing.pipeline import solve_queueing

    problem = random_problem(40, 3, seed=1)
    monkeypatch.setattr(bounds, "MAX_CELLS", 10)  # both assignment bounds refuse
    monkeypatch.setattr(certified, "swap_assignment_bound", lambda *args, **kwargs: None)
    result = solve_queueing(problem, RunOptions(time_limit=2.0), QueueingKnobs(recommend_scale_up=False))
    assert result.objective is not None and result.bound is not None
    assert result.bound <= result.objective
    # the pooled bound, or the fallback MILP's dual bound when that one is higher
    assert "pooled" in result.bound_source or "dual bound" in result.bound_source
    from planner.queueing.bounds import pooled_start_bound
    assert result.bound >= pooled_start_bound(problem)


def test_queueing_milp_objective_disagreeing_with_the_validator_is_not_optimal(monkeypatch):
    from planner.queueing import pipeline as queueing_solve
    from support.queueing import random_tiny

    problem = random_tiny(3).with_objective("total_lateness")
    honest = queueing_solve.solve_queueing(problem, RunOptions(), QueueingKnobs(formulation="slots", recommend_scale_up=False))
    assert honest.status == SolveStatus.OPTIMAL
    real = queueing_solve.validate_assignment

    def fake(problem, plan, objective=None):
        report = real(problem, plan, objective)
        return dataclasses.replace(report, objective=report.objective + 1.0)

    monkeypatch.setattr(queueing_solve, "validate_assignment", fake)
    monkeypatch.setattr(queueing_solve, "fallback_lower_bound", lambda p: None)
    result = queueing_solve.solve_queueing(problem, RunOptions(), QueueingKnobs(formulation="slots", recommend_scale_up=False))
    assert result.solution.method.startswith("milp")  # the MILP's plan is the one reported
    assert result.status != SolveStatus.OPTIMAL
    assert f"MILP objective {honest.objective:.9g} differs from the validator's {honest.objective + 1:.9g}" \
        in result.message


# ---- priority ---------------------------------------------------------------------------------------

def test_priority_exact_repeats_and_bounds_under_a_nominal_budget():
    from planner.priority.generator import generate_priority_problem
    from planner.priority.pipeline import run_exact

    problem = generate_priority_problem(14, 3, seed=2)
    optimum = run_exact(problem).objective  # proven (no limit)
    runs = [run_exact(problem, clock=WorkClock(2.15, guard_share=NO_GUARD)) for _ in range(2)]
    assert runs[0].solution == runs[1].solution and runs[0].stats["nodes"] == runs[1].stats["nodes"]
    for r in runs:
        assert r.bound is not None and r.bound >= optimum * (1 - 1e-9) and r.objective <= optimum * (1 + 1e-9)
        assert not r.stats["wall_cut"]


def test_priority_milp_objective_disagreeing_with_the_validator_is_not_proven(monkeypatch):
    from planner.priority import milp
    from planner.priority.heuristics import fcfs
    from planner.priority.instance import load_priority_instance

    problem = load_priority_instance(REPO / "instances" / "priority" / "fig4_toy.yaml")
    assert milp.solve_milp(problem, fcfs(problem)).proven
    real = milp.validate_schedule

    def fake(problem, schedule):
        report = real(problem, schedule)
        return dataclasses.replace(report, details={**report.details, "slo_met": report.details["slo_met"] + 1})

    monkeypatch.setattr(milp, "validate_schedule", fake)
    outcome = milp.solve_milp(problem, fcfs(problem))
    assert not outcome.proven
    assert "differs from the validator's" in outcome.message and "not reported optimal" in outcome.message


# ---- placement ----------------------------------------------------------------------------------

def test_placement_mip_objective_disagreeing_with_the_validator_is_not_optimal(monkeypatch):
    from support import toy_problem
    from planner.placement import pipeline as placement_solve

    problem = toy_problem([(500, 5)] * 3, ttft=1.0, mode="colocated", gpu_memory_gb=10.0)
    honest = placement_solve.solve_placement(problem)
    assert honest.status == SolveStatus.OPTIMAL and honest.objective == 3
    real = placement_solve.solve_model

    def off_by_one(model, solver, options):  # the solver reports one worker more than its point uses
        outcome = real(model, solver, options)
        return dataclasses.replace(outcome, objective=outcome.objective + 1)

    monkeypatch.setattr(placement_solve, "solve_model", off_by_one)
    result = placement_solve.solve_placement(problem)
    assert result.objective == 3 and result.status != SolveStatus.OPTIMAL
    assert "MIP objective 4 differs from the validator's 3" in result.message


# ---- the CLI: the same plan twice, a bound at the limit --------------------------------------------

def _cli(*args: str) -> dict:
    out = subprocess.run([sys.executable, "-m", "planner", *args, "--json"], capture_output=True, text=True,
                         timeout=HANG_GUARD, cwd=REPO)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.mark.parametrize("command", [
    ("solve", "routing", "instances/routing/llama3-8b-8inst-500.yaml"),
    ("solve", "deployment", "instances/deployment/synthetic-6x4x10.yaml"),
])
def test_cli_repeats_at_a_short_limit_or_says_why_not(command):
    runs = [_cli(*command, "--time-limit", "1") for _ in range(2)]
    for r in runs:
        assert r["bound"] is not None and r["bound"] > 0 and r["bound"] <= r["objective"] * (1 + 1e-12)
    cut = [r["stats"].get("wall_cut") for r in runs]
    if not any(cut):
        assert runs[0]["solution"] == runs[1]["solution"]
    else:  # the wall-clock guard decided (a much busier machine than the calibration): the result says so
        assert all("may not repeat" in r["message"] for r, c in zip(runs, cut) if c)


def test_routers_and_compare_share_one_budget():
    """`compare routing` (`planner.compare`) under a short time limit: every router runs, the exact part
    still has a valid bound, and no router beats it."""
    from planner.compare import compare
    from planner.harness import RunOptions

    comparison = compare(_routing(120, seed=1), "routing", options=RunOptions(time_limit=0.3))
    routers = [row for row in comparison.rows if row.kind == "heuristic"]
    exact = comparison.exact
    assert len(routers) == 5 and exact is not None and exact.bound is not None and exact.bound <= exact.objective
    assert all(r.valid and r.objective >= exact.bound * (1 - 1e-12) for r in routers)
