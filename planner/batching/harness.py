"""Batching (InferMax) in the family-independent compare harness (`planner.harness`); `solve` is its ``run``
and the package's public entry (`planner.batching.solve`)."""

from __future__ import annotations

from pathlib import Path

from planner.batching.instance import load_batching_instance
from planner.batching.problem import BatchingProblem
from planner.batching.schedule import Schedule
from planner.batching.scheduler import PRESETS
from planner.batching.pipeline import FAMILY, SEARCHED, run_scheduler, search_heuristic_results, solve_batching
from planner.batching.validator import validate_schedule
from planner.core.contract import FamilyHarness, RunOptions
from planner.core.result import Result
from planner.core.status import SolveStatus


def solve(problem: BatchingProblem, method: str, options: RunOptions | None = None) -> Result:
    """The family's public entry (`planner.core.contract.FamilyHarness.run`): ``method`` is ``mip`` (the exact
    pipeline `solve_batching` under the run's solver, time limit, threads and seed), a searched heuristic
    (`SEARCHED`: `search_heuristic_results`; offline instances only, else ``no_solution`` saying why) or a
    preset scheduler (`scheduler.PRESETS`: `run_scheduler`).  The objective is total latency (s), recomputed
    by the validator."""
    options = options if options is not None else RunOptions()
    if method == "mip":
        return solve_batching(problem, solver=options.solver, time_limit=options.time_limit,
                              threads=options.threads, seed=options.seed)
    if method in SEARCHED:
        found = search_heuristic_results(problem, seed=options.seed, time_limit=options.time_limit, methods=(method,))
        if method in found:
            return found[method]
        why = "searched on offline instances only" if problem.online else "the search found no schedule"
        return Result(family=FAMILY, method=method, solver="heuristic search", status=SolveStatus.NO_SOLUTION,
                      objective=None, bound=None, solve_seconds=0.0, solution=None, message=why)
    return run_scheduler(problem, method)


HARNESS = FamilyHarness(
    name="batching",
    description="InferMax batch scheduling: total latency of iteration-level schedules (presets vs optimal MIP)",
    sense="min",
    objective_name="total latency (s)",
    load=lambda path: load_batching_instance(Path(path)),
    heuristics=(*PRESETS, *SEARCHED),
    exact_method="mip",
    run=solve,
    plan_from_dict=Schedule.from_dict,
    validate=lambda problem, schedule: validate_schedule(problem, schedule, "latency"),
)
