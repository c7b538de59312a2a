"""The deployment and routing pipelines: phases, the one heuristic runner, the routing warm start, the public entry."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from planner.core.contract import RunOptions
from planner.core.status import SolveStatus
from support.deployment import routing_problem as tiny_routing

ROOT = Path(__file__).resolve().parents[2]
ROUTING = ROOT / "instances" / "routing" / "llama3-8b-v100-small.yaml"
MELANGE = ROOT / "instances" / "deployment" / "melange-example.yaml"
COST = ROOT / "instances" / "deployment" / "cost-two-models.yaml"


def _routing():
    from planner.deployment.instance import load_routing_instance

    return load_routing_instance(ROUTING)


# ---- routing warm start --------------------------------------------------------------------------

def test_routing_warm_start_satisfies_every_row():
    """The MILP's warm start puts identical instances in the order of the symmetry rows: every row of the
    model holds at it (row activity within bounds), for every router's routing; without the ordering some
    routing breaks a symmetry row (so the check can fail)."""
    from planner.deployment.routing import ROUTERS
    from planner.deployment.routing_formulation import build_routing_model, identical_successors
    from planner.deployment.routing_solve import warm_start_vector

    problem = _routing()
    assert identical_successors(problem), "the instance must have identical consecutive instances"
    model, x, pairs = build_routing_model(problem)
    req, inst = pairs
    unordered_violations = []
    for name, router in ROUTERS.items():
        assignment = router(problem).as_array()
        x0 = warm_start_vector(problem, model, x, pairs, assignment)
        assert model.max_violation(x0) <= 1e-9, name
        naive = np.zeros(model.num_cols)
        naive[x.columns[assignment[req] == inst]] = 1.0
        naive[-1] = x0[-1]
        unordered_violations.append(model.max_violation(naive))
    assert max(unordered_violations) > 1e-6


def test_cbc_accepts_the_routing_warm_start():
    """CBC checks a warm start against every row and drops one that breaks a row: the ordered start is kept."""
    from planner.deployment.routing import ROUTERS
    from planner.deployment.routing_formulation import build_routing_model
    from planner.deployment.routing_solve import warm_start_vector
    from planner.solver import SolveOptions, solve

    problem = _routing()
    model, x, pairs = build_routing_model(problem)
    x0 = warm_start_vector(problem, model, x, pairs, ROUTERS["wrr"](problem).as_array())
    outcome = solve(model, "cbc", SolveOptions(warm_start=x0, node_limit=1, time_limit=60))
    assert outcome.warm_start_accepted is True
    assert outcome.objective is not None and outcome.objective <= x0[-1] * (1 + 1e-9)


def test_routing_warm_start_keeps_the_makespan():
    """Ordering identical instances moves whole request sets between identical instances: every instance's
    load multiset and the makespan are unchanged."""
    from planner.deployment.routing import ROUTERS
    from planner.deployment.routing_bound import makespan
    from planner.deployment.routing_formulation import symmetric_order

    problem = _routing()
    p = problem.processing_times
    for router in ROUTERS.values():
        assignment = router(problem).as_array()
        ordered = symmetric_order(problem, assignment)
        rows = np.arange(len(assignment))
        before = np.bincount(assignment, weights=p[rows, assignment], minlength=p.shape[1])
        after = np.bincount(ordered, weights=p[rows, ordered], minlength=p.shape[1])
        assert np.allclose(np.sort(before), np.sort(after))
        assert makespan(problem, ordered) == pytest.approx(makespan(problem, assignment), rel=1e-12)
        assert problem.fits[rows, ordered].all()


# ---- phases --------------------------------------------------------------------------------------

def test_pipelines_report_their_phases():
    """Each pipeline's ``stats["phases"]`` names the phases it ran, in order, with their wall seconds."""
    from planner.deployment import route, solve
    from planner.deployment.instance import load_deployment_instance

    runs = {
        "routing": route(tiny_routing(0, 12), "milp", RunOptions()),
        "classes": solve(load_deployment_instance(MELANGE), "milp", RunOptions()),
        "cost": solve(load_deployment_instance(COST), "milp", RunOptions()),
    }
    first = {"routing": "bound", "classes": "build", "cost": "build"}
    for name, result in runs.items():
        phases = result.stats["phases"]
        assert list(phases)[0] == first[name] and list(phases)[-1] == "answer", (name, phases)
        assert all(isinstance(v, float) and v >= 0 for v in phases.values()), name
        assert result.validation is not None and result.validation.feasible, name


# ---- one heuristic runner ------------------------------------------------------------------------

def test_invalid_heuristic_plans_are_errors_with_the_plan_kept(monkeypatch):
    """An invalid heuristic plan (cost plan, request classes, router) is an error; its plan, the validator's
    report and a message naming the violations are kept."""
    from planner.deployment import classes, cost_solve, routing_solve
    from planner.deployment.instance import load_deployment_instance
    from planner.deployment.routing import ROUTERS

    class_problem = load_deployment_instance(MELANGE)
    valid = classes.greedy_classes(class_problem)
    broken_class = replace(valid, counts=tuple(0 for _ in valid.counts))
    monkeypatch.setitem(classes.HEURISTICS, "greedy", lambda p: broken_class)

    cost_problem = load_deployment_instance(COST)
    broken_cost = replace(cost_solve.greedy_cheapest(cost_problem),
                          counts=tuple(0 for _ in cost_solve.greedy_cheapest(cost_problem).counts))
    monkeypatch.setitem(cost_solve.HEURISTICS, "greedy", lambda p: broken_cost)

    problem = _routing()
    good = ROUTERS["rr"](problem)
    assignment = good.as_array()
    assignment[0] = len(problem.instances)  # no such instance
    broken_route = replace(good, assignment=tuple(int(s) for s in assignment))
    monkeypatch.setitem(ROUTERS, "rr", lambda p: broken_route)

    results = [(classes.run_class_heuristic(class_problem, "greedy"), broken_class),
               (cost_solve.run_cost_heuristic(cost_problem, "greedy"), broken_cost),
               (routing_solve.run_router(problem, "rr"), broken_route)]
    for result, plan in results:
        assert result.status == SolveStatus.ERROR
        assert result.solution is plan
        assert result.validation is not None and not result.validation.feasible
        assert result.validation.violations
        assert result.validation.violations[0].message in result.message
        assert f"validator rejects the {result.method} plan" in result.message


def test_heuristic_without_a_plan_is_no_solution():
    """A heuristic that finds no plan is ``no_solution`` with the reason, and no plan."""
    from planner.deployment.cost_solve import run_cost_heuristic
    from planner.deployment.instance import load_deployment_instance

    result = run_cost_heuristic(load_deployment_instance(ROOT / "instances" / "deployment" / "cost-overload.yaml"),
                                "greedy")
    assert result.status == SolveStatus.NO_SOLUTION and result.solution is None
    assert "greedy found no plan" in result.message


# ---- public entry --------------------------------------------------------------------------------

def test_public_entries_are_the_harness_runs():
    """`planner.deployment.solve` and `planner.deployment.route` run the harnesses' ``run``."""
    import planner.deployment as deployment
    from planner.deployment.harness import HARNESS
    from planner.deployment.routing_harness import HARNESS as ROUTING_HARNESS

    problem = HARNESS.load(MELANGE)
    result = deployment.solve(problem, "greedy", RunOptions())
    assert result.status == SolveStatus.FEASIBLE and result.validation.feasible
    assert result.objective == HARNESS.run(problem, "greedy", RunOptions()).objective
    assert callable(deployment.route) and ROUTING_HARNESS.name == "routing"
