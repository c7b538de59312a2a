"""Placement (Aladdin) in the family-independent compare harness (`planner.harness`)."""

from __future__ import annotations

from pathlib import Path

from planner.core.contract import FamilyHarness
from planner.placement.heuristics import HEURISTICS
from planner.placement.instance import load_placement_instance
from planner.placement.problem import PlacementProblem
from planner.placement.solution import PlacementSolution
from planner.placement.pipeline import solve
from planner.placement.validator import validate_placement


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
    run=solve,
    plan_from_dict=PlacementSolution.from_dict,
    validate=validate_placement,
)
