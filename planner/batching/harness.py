"""Batching (InferMax) in the family-independent compare harness (`planner.harness`)."""

from __future__ import annotations

from pathlib import Path

from planner.batching.instance import load_batching_instance
from planner.batching.problem import BatchingProblem
from planner.batching.scheduler import PRESETS
from planner.batching.solve import run_scheduler, solve_batching
from planner.core.result import Result
from planner.harness import FamilyHarness, RunOptions


def _run(problem: BatchingProblem, method: str, options: RunOptions) -> Result:
    if method == "mip":
        return solve_batching(problem, solver=options.solver, time_limit=options.time_limit,
                              threads=options.threads, seed=options.seed)
    return run_scheduler(problem, method)


HARNESS = FamilyHarness(
    name="batching",
    description="InferMax batch scheduling: total latency of iteration-level schedules (presets vs optimal MIP)",
    sense="min",
    objective_name="total latency (s)",
    load=lambda path: load_batching_instance(Path(path)),
    heuristics=tuple(PRESETS),
    exact_method="mip",
    run=_run,
)
