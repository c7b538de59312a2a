"""Batch scheduling (InferMax, docs/formulations.md §3): iteration-level scheduler simulator,
the optimal batch-schedule MIP, an independent schedule validator and lower bounds.

Public API (also used by other families, e.g. queueing):

* `BatchingProblem` / `Request` — frozen instance data (`problem.py`).
* `InferMaxCostModel` — the §3.2 batch-time model (`costmodel.py`).
* `SchedulerConfig`, `PRESETS`, `preset_config` and `simulate(problem, config) -> SimulationResult`
  (`scheduler.py`): per-request TTFT/TPOT/E2E table, totals, KV usage over time, the schedule.
* `validate_schedule(problem, schedule) -> ValidationReport` (`validator.py`).
* `solve(problem, method, options: RunOptions) -> Result` — the public entry (the harness's ``run``):
  ``mip``, a searched heuristic or a preset; `solve_batching(problem, ...) -> Result` (`pipeline.py`, the
  exact pipeline, phase by phase: `pipeline.MIP_PHASES`), `run_scheduler(problem, name) -> Result`.

MIP models: `flow_formulation.py` (per-request time-expanded paths; the default for offline latency
instances where its dominance conditions hold) and `formulation.py` (the §3.3 big-M model, used
otherwise and available with ``formulation="bigm"``).  `ttft.py`: the mean-TTFT objective is solved
on the first-token instance (every O_i = 1) and completed.  `staggered.py` builds the lazy staggered
warm-start schedule; `bounds.py` the combinatorial lower bound; `bruteforce.py` the exhaustive oracle
of the tests; `effort.py` the nominal seconds that make a time-limited solve repeatable.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from planner.batching.costmodel import InferMaxCostModel
from planner.batching.problem import BatchingProblem
from planner.batching.schedule import Schedule

if TYPE_CHECKING:
    from planner.core.contract import RunOptions
    from planner.core.result import Result

__all__ = ["BatchingProblem", "InferMaxCostModel", "Schedule", "solve"]


def solve(problem: Any, method: str, options: RunOptions | None = None) -> Result:
    """The family's public entry: ``mip``, a searched heuristic or a preset (`planner.batching.harness.solve`;
    imported on first use, so that importing the package stays light)."""
    from planner.batching.harness import solve as run
    from planner.core.contract import RunOptions

    return run(problem, method, options if options is not None else RunOptions())
