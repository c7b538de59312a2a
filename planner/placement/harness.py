"""Placement (Aladdin) in the family-independent compare harness (`planner.harness`)."""

from __future__ import annotations

from pathlib import Path

from planner.core.result import Result
from planner.harness import FamilyHarness, RunOptions
from planner.placement.heuristics import HEURISTICS
from planner.placement.instance import load_placement_instance
from planner.placement.problem import PlacementProblem
from planner.placement.solve import run_heuristic, solve_placement


def _run(problem: PlacementProblem, method: str, options: RunOptions) -> Result:
    if method == "mip":
        return solve_placement(problem, solver=options.solver, time_limit=options.time_limit,
                               threads=options.threads, seed=options.seed)
    return run_heuristic(problem, method, seed=options.seed)


def _load(path: Path) -> PlacementProblem:
    return load_placement_instance(path)


HARNESS = FamilyHarness(
    name="placement",
    description="Aladdin request placement: workers needed for one heartbeat under TTFT/ATGT/KV limits",
    sense="min",
    objective_name="workers",
    load=_load,
    heuristics=tuple(HEURISTICS),
    exact_method="mip",
    run=_run,
)
