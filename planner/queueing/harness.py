"""Queueing (QLM) in the family-independent compare harness (`planner.harness`)."""

from __future__ import annotations

from pathlib import Path

from planner.core.result import Result
from planner.harness import FamilyHarness, RunOptions
from planner.queueing.heuristics import HEURISTICS
from planner.queueing.instance import load_queueing_instance
from planner.queueing.problem import QueueingProblem
from planner.queueing.solve import run_heuristic, solve_queueing


def _run(problem: QueueingProblem, method: str, options: RunOptions) -> Result:
    if method == "milp":
        return solve_queueing(problem, solver=options.solver, time_limit=options.time_limit,
                              threads=options.threads, seed=options.seed)
    return run_heuristic(problem, method)


def _load(path: Path) -> QueueingProblem:
    return load_queueing_instance(path)


HARNESS = FamilyHarness(
    name="queueing",
    description="QLM queue ordering: request groups to virtual queues and positions under SLOs and model swaps",
    sense="min",
    objective_name="objective (penalty s / lateness)",
    load=_load,
    heuristics=tuple(HEURISTICS),
    exact_method="milp",
    run=_run,
)
