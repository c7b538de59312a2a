"""Every family through the common harness: determinism, validator agreement, HiGHS vs Gurobi.

One small shipped instance per family.  Heuristics, simulators and the exact methods must give the
same plan twice for the same seed (DEVELOPERS.md: deterministic), every result's objective must be
the one its independent validator recomputed, and where both solvers prove optimality, HiGHS and
Gurobi must agree on the optimum.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from planner.harness import RunOptions, available_families
from planner.solver import SolveStatus

REPO = Path(__file__).resolve().parents[2]

#: (family, instance, exact method proves optimality quickly here)
SMALL = [
    ("placement", "instances/placement/sharegpt-70b-a100-n40.yaml", True),
    ("batching", "instances/batching/tiny3.yaml", True),
    ("priority", "instances/priority/fig4_toy.yaml", True),
    ("queueing", "instances/queueing/two-models-one-a100.yaml", True),
    ("deployment", "instances/deployment/cost-two-models.yaml", True),
    ("deployment-tp", "instances/deployment/clusters/llama2-70b-a100-h100.yaml", True),  # enumeration
    ("routing", "instances/routing/llama3-8b-v100-small.yaml", False),  # R||Cmax: stops at its time limit
]


def _plan(result) -> str:
    """The solution as canonical JSON (timings are not part of a solution)."""
    return json.dumps(result.solution.to_dict() if result.solution is not None else None, sort_keys=True, default=str)


def _cases():
    families = available_families()
    return [pytest.param(f, p, e, id=f) for f, p, e in SMALL if f in families]


def test_every_family_present_has_a_small_case():
    assert {f for f, _, _ in SMALL} >= set(available_families())


@pytest.mark.parametrize("family,path,exact_fast", _cases())
def test_heuristics_are_deterministic_and_validated(family, path, exact_fast):
    harness = available_families()[family]
    problem = harness.load(REPO / path)
    for method in harness.heuristics:
        first = harness.run(problem, method, RunOptions(seed=3))
        second = harness.run(problem, method, RunOptions(seed=3))
        assert first.status == second.status, method
        assert first.objective == second.objective, method
        assert _plan(first) == _plan(second), method
        if first.solution is not None and first.validation is not None and first.validation.feasible:
            assert first.validation.objective == pytest.approx(first.objective, rel=1e-9), method


@pytest.mark.parametrize("family,path,exact_fast", [c for c in _cases() if c.values[2]])
def test_exact_is_deterministic_validated_and_solver_independent(family, path, exact_fast, solvers):
    harness = available_families()[family]
    problem = harness.load(REPO / path)
    first = harness.run(problem, harness.exact_method, RunOptions(seed=0))
    second = harness.run(problem, harness.exact_method, RunOptions(seed=0))
    assert first.status == SolveStatus.OPTIMAL
    assert first.objective == second.objective and _plan(first) == _plan(second)
    assert first.validation is not None and first.validation.feasible
    assert first.validation.objective == pytest.approx(first.objective, rel=1e-9)
    for heuristic in harness.heuristics:  # no heuristic beats a proven optimum
        h = harness.run(problem, heuristic, RunOptions(seed=0))
        if h.objective is not None and h.validation is not None and h.validation.feasible:
            assert harness.gap_to(h.objective, first.objective) >= -1e-9, heuristic
    if "gurobi" in solvers:
        other = harness.run(problem, harness.exact_method, RunOptions(solver="gurobi", seed=0))
        if other.status == SolveStatus.OPTIMAL:  # the pip license refuses models above 2000 rows/columns
            assert other.objective == pytest.approx(first.objective, rel=1e-6)
            assert other.validation.feasible
