"""Routing of a request batch across heterogeneous instances in the compare harness (`planner.harness`).

Plans are `RoutingSolution` mappings (``kind: routing``, `RoutingSolution.from_dict`), validated by
`planner.deployment.validator.validate_routing`."""

from __future__ import annotations

from pathlib import Path

from planner.core.result import Result
from planner.deployment.instance import load_routing_instance
from planner.deployment.problem import RoutingProblem
from planner.deployment.routing import ROUTERS
from planner.deployment.routing_solve import run_router, solve_routing
from planner.deployment.solution import RoutingSolution
from planner.deployment.validator import validate_routing
from planner.core.contract import FamilyHarness, RunOptions


def _run(problem: RoutingProblem, method: str, options: RunOptions) -> Result:
    if method == "milp":
        return solve_routing(problem, solver=options.solver, time_limit=options.time_limit,
                             threads=options.threads, seed=options.seed)
    return run_router(problem, method)


def _load(path: Path) -> RoutingProblem:
    return load_routing_instance(path)


HARNESS = FamilyHarness(
    name="routing",
    description="Routing a request batch across heterogeneous instances: makespan of RR/WRR/SI/MB/mapper vs R||Cmax MILP",
    sense="min",
    objective_name="makespan (s)",
    load=_load,
    heuristics=tuple(ROUTERS),
    exact_method="milp",
    run=_run,
    plan_from_dict=RoutingSolution.from_dict,
    validate=validate_routing,
)
