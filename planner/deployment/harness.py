"""The cost plan (min $/h under an inventory) in the family-independent compare harness (`planner.harness`).

A mixed fleet for request classes (`planner.deployment.classes`) runs under the same method names:
``greedy`` (each class on its cheapest configuration), ``single-type`` (one configuration per model)
and ``milp``.

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


def _run(problem, method: str, options: RunOptions) -> Result:
    from planner.deployment.classes import ClassPlanProblem, run_class_heuristic, solve_class_plan

    if isinstance(problem, ClassPlanProblem):  # request classes: the same method names
        if method == "milp":
            return solve_class_plan(problem, solver=options.solver, time_limit=options.time_limit,
                                    threads=options.threads, seed=options.seed)
        return run_class_heuristic(problem, method)
    if method == "milp":
        return solve_cost_plan(problem, solver=options.solver, time_limit=options.time_limit,
                               threads=options.threads, seed=options.seed)
    return run_cost_heuristic(problem, method)


def _load(path: Path):
    """A cost plan, or a mixed fleet for request classes (keys ``gpus``, ``models``)."""
    from planner.deployment.classes import ClassPlanProblem
    from planner.deployment.instance import load_deployment_instance

    problem = load_deployment_instance(path)
    if isinstance(problem, (ClassPlanProblem, CostPlanProblem)):
        return problem
    return load_cost_plan_file(path)  # its one-line refusal of a cluster file


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
