"""The cost plan (min $/h under an inventory) in the family-independent compare harness (`planner.harness`).

TP-enumeration instances (``family: deployment-tp``) are not part of the harness: their objective is a
maximum throughput found by exhaustive enumeration, with no heuristic to compare.
"""

from __future__ import annotations

from pathlib import Path

from planner.core.result import Result
from planner.deployment.cost_solve import HEURISTICS, run_cost_heuristic, solve_cost_plan
from planner.deployment.instance import load_cost_plan_file
from planner.deployment.problem import CostPlanProblem
from planner.harness import FamilyHarness, RunOptions


def _run(problem: CostPlanProblem, method: str, options: RunOptions) -> Result:
    if method == "milp":
        return solve_cost_plan(problem, solver=options.solver, time_limit=options.time_limit,
                               threads=options.threads, seed=options.seed)
    return run_cost_heuristic(problem, method)


def _load(path: Path) -> CostPlanProblem:
    return load_cost_plan_file(path)


HARNESS = FamilyHarness(
    name="deployment",
    description="Heterogeneous-cluster deployment: cost-minimal (GPU type, TP degree) mix serving each model's load within SLO",
    sense="min",
    objective_name="$/h",
    load=_load,
    heuristics=tuple(HEURISTICS),
    exact_method="milp",
    run=_run,
)
