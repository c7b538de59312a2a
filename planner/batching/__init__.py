"""Batch scheduling (InferMax, FORMULATIONS.md §3): iteration-level scheduler simulator,
the optimal batch-schedule MIP, an independent schedule validator and lower bounds.

Public API (also used by other families, e.g. queueing):

* `BatchingProblem` / `Request` — frozen instance data (`problem.py`).
* `InferMaxCostModel` — the §3.2 batch-time model (`costmodel.py`).
* `SchedulerConfig`, `PRESETS`, `preset_config` and `simulate(problem, config) -> SimulationResult`
  (`scheduler.py`): per-request TTFT/TPOT/E2E table, totals, KV usage over time, the schedule.
* `validate_schedule(problem, schedule) -> ValidationReport` (`validator.py`).
* `solve_batching(problem, ...) -> Result` (`solve.py`), `run_scheduler(problem, name) -> Result`.
"""

from planner.batching.costmodel import InferMaxCostModel
from planner.batching.problem import BatchingProblem
from planner.batching.schedule import Schedule

__all__ = ["BatchingProblem", "InferMaxCostModel", "Schedule"]
