"""Routing: every router's makespan ≥ the exact optimum (MILP = brute force on tiny batches), Alg. 2 fixes."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from planner.catalog import find_model
from planner.costmodels.models import HeteroCostModel
from planner.deployment.problem import RoutingProblem, ServingInstance
from planner.deployment.routing import ROUTERS, workload_mapper
from planner.deployment.routing_solve import run_router, solve_routing

LLAMA3_8B = find_model("Llama-3-8B")  # 131,072 KV bytes per token


def _inst(name: str, t: int, kv_tokens: int, speed: float) -> ServingInstance:
    cost = HeteroCostModel(model="toy", gpu="g", tensor_parallel=t, time_unit="s",
                           p1=1e-6 / speed, p2=0.0, p3=1e-5 / speed, p4=0.01 / speed,
                           p5=1e-8 / speed, p6=1e-4 / speed, p7=0.0, p8=0.02 / speed)
    return ServingInstance(name=name, gpu="g", tensor_parallel=t, kv_size_bytes=kv_tokens * 131072.0, cost=cost)


def _problem(seed: int, n: int = 7) -> RoutingProblem:
    rng = np.random.default_rng(seed)
    inputs = tuple(int(x) for x in rng.integers(20, 500, n))
    outputs = tuple(int(x) for x in rng.integers(10, 350, n))
    instances = (_inst("fast", 4, 900, 4.0), _inst("slow-a", 1, 700, 1.0), _inst("slow-b", 1, 700, 1.0))
    return RoutingProblem(name="tiny", model=LLAMA3_8B, instances=instances, request_ids=tuple(f"r{k}" for k in range(n)),
                          inputs=inputs, predicted_outputs=outputs)


def _brute_force(problem: RoutingProblem) -> float:
    p, fits = problem.processing_times, problem.fits
    best = np.inf
    for combo in itertools.product(range(len(problem.instances)), repeat=len(problem.request_ids)):
        combo = np.array(combo)
        if not fits[np.arange(len(combo)), combo].all():
            continue
        loads = np.bincount(combo, weights=p[np.arange(len(combo)), combo], minlength=len(problem.instances))
        best = min(best, loads.max())
    return best


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
