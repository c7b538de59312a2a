"""The priority family in the family-independent compare harness (`planner.harness`).

Exhaustive search is not listed: it is O(N!·2^N) and only usable for N ≲ 10; it stays available
as ``planner solve priority --method exhaustive``.
"""

from __future__ import annotations

from pathlib import Path

from planner.core.contract import FamilyHarness
from planner.priority.heuristics import HEURISTICS
from planner.priority.instance import load_priority_instance
from planner.priority.problem import PriorityProblem, PrioritySchedule
from planner.priority.pipeline import solve
from planner.priority.validator import validate_schedule


def _load(path: Path) -> PriorityProblem:
    return load_priority_instance(path)


HARNESS = FamilyHarness(
    name="priority",
    description="SLO-aware priority scheduling (SC'25): order + batch sizes maximising G = SLO-met / Σ latency",
    sense="max",
    objective_name="G (req/s)",
    load=_load,
    heuristics=tuple(HEURISTICS),
    exact_method="exact",
    run=solve,
    plan_from_dict=PrioritySchedule.from_dict,
    validate=validate_schedule,
)
