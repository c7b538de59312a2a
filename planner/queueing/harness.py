"""Queueing (QLM) in the family-independent compare harness (`planner.harness`).

Plans are `QueueAssignment` mappings (`QueueAssignment.from_dict`), validated on the objective and
deadline mode they name (`planner.queueing.validator.validate_plan`)."""

from __future__ import annotations

from pathlib import Path

from planner.core.contract import FamilyHarness
from planner.queueing.heuristics import HEURISTICS
from planner.queueing.instance import load_queueing_instance
from planner.queueing.problem import QueueAssignment, QueueingProblem
from planner.queueing.pipeline import solve
from planner.queueing.validator import validate_plan


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
    run=solve,
    plan_from_dict=QueueAssignment.from_dict,
    validate=validate_plan,
)
