"""Routing: every router's makespan ≥ the exact optimum (MILP = brute force on tiny batches), Alg. 2 fixes."""

from __future__ import annotations

import numpy as np
import pytest
from support.deployment import LLAMA3_8B
from support.deployment import routing_brute_force as _brute_force
from support.deployment import routing_problem as _problem
from support.deployment import serving_instance as _inst

from planner.deployment.problem import RoutingProblem
from planner.deployment.routing import ROUTERS, workload_mapper
from planner.deployment.routing_solve import run_router, solve_routing




@pytest.mark.parametrize("seed", range(4))
def test_milp_equals_brute_force_and_routers_are_not_better(seed, solvers):
    problem = _problem(seed)
    optimum = _brute_force(problem)
    assert np.isfinite(optimum)
    for solver in solvers:
        exact = solve_routing(problem, solver=solver, mip_rel_gap=1e-9)
        assert exact.validation.feasible
        assert exact.objective == pytest.approx(optimum, rel=1e-6)
        assert exact.objective == pytest.approx(exact.validation.objective, rel=1e-9)
        for method in ROUTERS:
            r = run_router(problem, method)
            assert r.validation.feasible, method
            assert r.objective >= optimum * (1 - 1e-9), method


def test_kv_limit_excludes_pairs():
    # request of 500 + 400 = 900 tokens fits only "fast" (900 tokens of KV), not the 700-token instances
    instances = (_inst("fast", 4, 900, 4.0), _inst("slow", 1, 700, 1.0))
    problem = RoutingProblem(name="kv", model=LLAMA3_8B, instances=instances, request_ids=("big", "small"),
                             inputs=(500, 10), predicted_outputs=(400, 10))
    assert problem.fits.tolist() == [[True, False], [True, True]]
    for method in ROUTERS:
        assert run_router(problem, method).solution.assignment[0] == 0, method
    exact = solve_routing(problem, mip_rel_gap=1e-9)
    assert exact.solution.assignment[0] == 0


def test_mapper_min_initialisation_fix_spreads_load():
    # With the printed initialisation (minGlobalLoad = 0, test "> tmp") instance 0 would get every request.
    # With +∞, identical requests on two identical instances alternate: loads stay balanced.
    instances = (_inst("a", 1, 2000, 1.0), _inst("b", 1, 2000, 1.0))
    problem = RoutingProblem(name="eq", model=LLAMA3_8B, instances=instances, request_ids=tuple(f"r{k}" for k in range(6)),
                             inputs=(100,) * 6, predicted_outputs=(50,) * 6)
    sol = workload_mapper(problem)
    assert sol.assignment.count(0) == 3 and sol.assignment.count(1) == 3
    assert sol.assignment[0] == 0  # tie on the first request: smallest L + w, then the lower index


def test_eq5_batch_size_floor_min_one():
    # KV of 700 tokens; request of 100+50 = 150 tokens → floor(700/150) = 4; a 1000-token request → at least 1
    instances = (_inst("a", 1, 700, 1.0),)
    problem = RoutingProblem(name="b", model=LLAMA3_8B, instances=instances, request_ids=("x", "y"),
                             inputs=(100, 600), predicted_outputs=(50, 400))
    assert problem.batch_sizes[:, 0].tolist() == [4.0, 1.0]
