"""Queueing's pipelines as named phases (`planner.queueing.pipeline.PHASES`, `planner.queueing.certified.PHASES`)
and the family's public entry."""

from __future__ import annotations

import pytest
from support.queueing import make_problem

from planner.core.contract import RunOptions
from planner.errors import PlannerError
from planner.queueing import certified
from planner.queueing.generator import random_problem
from planner.queueing.harness import HARNESS
from planner.queueing.pipeline import PHASES, QueueingKnobs, run_heuristic, solve, solve_queueing
from planner.solver import SolveStatus

SLOTS = QueueingKnobs(formulation="slots")


def test_a_feasible_slots_solve_runs_check_baselines_milp_validate():
    p = make_problem(["A", "B", "A", "B"], [100, 101, 102, 103], [1] * 4)
    res = solve_queueing(p, RunOptions(), SLOTS)
    assert res.status == SolveStatus.OPTIMAL and res.objective == pytest.approx(-340.0)
    assert list(res.stats["phases"]) == ["check", "baselines", "milp", "validate"]
    assert all(seconds >= 0 for seconds in res.stats["phases"].values())


def test_unmeetable_slos_end_in_the_infeasible_phase():
    # the hand-worked infeasible case: the soft version and the exact scale-up (+2 instances)
    p = make_problem(["A"] * 4, [10] * 4, [10] * 4, swap=5.0, loaded="A", extra=3)
    res = solve_queueing(p, RunOptions(), SLOTS)
    assert res.status == SolveStatus.INFEASIBLE and res.stats["scale_up"]["extra_instances"] == {"t": 2}
    assert list(res.stats["phases"]) == ["check", "baselines", "milp", "infeasible"]


def test_the_certified_pipeline_ends_the_run_with_its_own_phases():
    p = random_problem(12, 2, seed=0)
    res = solve_queueing(p, RunOptions(threads=1))
    assert res.stats["formulation"] == "certified"
    assert list(res.stats["phases"]) == ["check", "baselines", "certified"]
    inner = list(res.stats["certified_phases"])
    names = [phase.name for phase in certified.PHASES]
    assert inner[:2] == ["local_search", "assignment_bound"] and inner == [n for n in names if n in inner]


def test_bad_input_is_one_line_before_any_milp():
    p = make_problem(["A"], [100], [1])
    with pytest.raises(PlannerError, match="soft objective must be one of"):
        solve_queueing(p, RunOptions(), QueueingKnobs(soft_objective="penalty"))
    with pytest.raises(PlannerError, match="unknown formulation"):
        solve_queueing(p, RunOptions(), QueueingKnobs(formulation="dense"))
    assert [phase.name for phase in PHASES][:2] == ["check", "baselines"]


def test_the_public_entry_is_the_harness_run():
    assert HARNESS.run is solve
    p = make_problem(["A", "B", "A", "B"], [100, 101, 102, 103], [1] * 4)
    milp = solve(p, "milp", RunOptions())
    assert milp.method == "milp" and milp.objective == pytest.approx(solve_queueing(p).objective)
    assert solve(p, "edf", RunOptions()).solution == run_heuristic(p, "edf").solution
