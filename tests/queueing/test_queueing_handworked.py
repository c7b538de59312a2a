"""Hand-solved queueing (QLM) cases: the arithmetic is in the comments."""

from __future__ import annotations

import numpy as np
import pytest
from support.queueing import make_problem

from planner.core.contract import RunOptions
from planner.queueing.formulation import build_model
from planner.queueing.heuristics import edf
from planner.queueing.problem import InstanceType, QueueAssignment, QueueingProblem, RequestGroup, VirtualQueue
from planner.queueing.pipeline import QueueingKnobs, run_heuristic, scale_up, solve_queueing
from planner.queueing.validator import validate_assignment
from planner.solver import SolveStatus, solve


def test_edf_thrashes_and_the_milp_groups_by_model():
    # One instance, nothing loaded, swap S = 10 s, four groups of 1 s work, SLOs 100..103 (EDF order A B A B).
    # EDF: A B A B → starts 10, 1+10+10=21, 32, 43 (4 swaps): Σ start = 106.
    # Optimum: A A B B → starts 10, 11, 11+1+10=22, 23 (2 swaps): Σ start = 66.
    # Penalty = Σ start − Σ SLO = 66 − 406 = −340 (EDF: 106 − 406 = −300).
    p = make_problem(["A", "B", "A", "B"], [100, 101, 102, 103], [1, 1, 1, 1])
    base = run_heuristic(p, "edf")
    assert base.objective == pytest.approx(-300.0)
    assert base.validation.details["swaps"] == 4
    res = solve_queueing(p, RunOptions(), QueueingKnobs(formulation="slots"))
    assert res.status == SolveStatus.OPTIMAL
    assert res.objective == pytest.approx(-340.0)
    assert res.validation.objective == pytest.approx(res.objective)
    assert res.validation.details["swaps"] == 2
    models = [p.groups[i].model for i in res.solution.queues[0]]
    assert models in (["A", "A", "B", "B"], ["B", "B", "A", "A"])


def test_switch_costs_nothing_when_the_model_stays():
    # Instance already holds A, all groups are A: no swap at all. Works 2 and 1 → SPT: starts 0, 1.
    # Σ start = 1; penalty = 1 − (50 + 50) = −99.  A forced switch per slot (the published LP) would add S = 10 per slot.
    p = make_problem(["A", "A"], [50, 50], [2, 1], loaded="A")
    milp = build_model(p, "penalty", "slots")
    out = solve(milp.model)
    assert out.objective == pytest.approx(-99.0)
    t = milp.blocks["t"].values(out.x)
    assert np.allclose(t, 0.0)
    assert milp.sequences(p, out.x) == [[1, 0]]


def test_multi_queue_instances_are_feasible():
    # Regression for the published LP: N slots per queue and no padding made Eq. 6 infeasible with > 1 queue.
    # 3 empty queues (swap 10 s), groups A B A B of 1 s, loose SLOs 100: three groups start at 10 on their own
    # queue and the fourth follows a group of its model at 11 → Σ start = 41; penalty = 41 − 400 = −359.
    p = make_problem(["A", "B", "A", "B"], [100] * 4, [1] * 4, queues=3)
    res = solve_queueing(p, RunOptions(), QueueingKnobs(formulation="slots"))
    assert res.status == SolveStatus.OPTIMAL
    assert res.objective == pytest.approx(41.0 - 400.0)
    assert res.validation.feasible
    assert sum(1 for q in res.solution.queues if q) == 3


def test_infeasible_case_gives_the_exact_scale_up_and_soft_version():
    # One instance holding A (no swap), four groups of 10 s work, SLO 10 s on the start.
    # Alone it starts them at 0, 10, 20, 30 → two are late (20 > 10, 30 > 10).
    # A new instance loads A first (swap 5 s): starts 5 (ok) and 15 (late) → one group each.
    # So the existing queue takes 2 and two new instances take 1 each: +2 instances exactly.
    # Soft version (total lateness): 0 + 0 + 10 + 20 = 30, whatever the order.
    p = make_problem(["A"] * 4, [10] * 4, [10] * 4, swap=5.0, loaded="A", extra=3)
    res = solve_queueing(p, RunOptions(), QueueingKnobs(formulation="slots"))
    assert res.status == SolveStatus.INFEASIBLE
    assert res.stats["scale_up"]["extra_instances"] == {"t": 2}
    assert res.stats["scale_up"]["status"] == "optimal"
    assert res.stats["soft"]["value"] == pytest.approx(30.0)
    assert "+2 t" in res.message
    direct = scale_up(p, "slots")
    assert direct["extra_instances"] == {"t": 2} and direct["valid"]


def test_soft_objectives_on_the_infeasible_case():
    # Same case: max lateness = 30 − 10 = 20; late groups = 2.
    p = make_problem(["A"] * 4, [10] * 4, [10] * 4, swap=5.0, loaded="A")
    assert solve_queueing(p.with_objective("max_lateness"), RunOptions(), QueueingKnobs(formulation="slots")).objective == pytest.approx(20.0)
    assert solve_queueing(p.with_objective("late_groups"), RunOptions(), QueueingKnobs(formulation="slots")).objective == pytest.approx(2.0)


def test_completion_deadline_counts_own_work_and_tail():
    # Loaded A, groups work 4 and 2, tail 1 each, SLO 5 on completion.
    # Order (1, 0): completion 2+1 = 3 ≤ 5, then 2+4+1 = 7 > 5 → late;  order (0, 1): 5 ≤ 5, 4+2+1 = 7 > 5.
    # Hard: infeasible on one queue.  Soft total lateness = 2 (either order).
    p = make_problem(["A", "A"], [5, 5], [4, 2], loaded="A", tail=[1, 1], deadline="completion",
                     objective="total_lateness")
    res = solve_queueing(p, RunOptions(), QueueingKnobs(formulation="slots"))
    assert res.objective == pytest.approx(2.0)
    hard = solve_queueing(p.with_objective("penalty"), RunOptions(), QueueingKnobs(formulation="slots", recommend_scale_up=False))
    assert hard.status == SolveStatus.INFEASIBLE


def test_validator_rejects_bad_plans():
    p = make_problem(["A", "B"], [100, 100], [1, 1])
    missing = QueueAssignment.of(p, [[0]], "bad")
    assert not validate_assignment(p, missing).feasible
    twice = QueueAssignment.of(p, [[0, 1, 1]], "bad")
    assert not validate_assignment(p, twice).feasible
    late = make_problem(["A", "A"], [0.5, 0.5], [1, 1], loaded="A")
    rep = validate_assignment(late, edf(late))
    # starts 0 and 1: the second group is late for the hard penalty objective.
    assert not rep.feasible and rep.violations[0].constraint == "deadline"


def test_blocks_formulation_matches_on_the_thrash_case():
    p = make_problem(["A", "B", "A", "B"], [100, 101, 102, 103], [1, 1, 1, 1])
    res = solve_queueing(p, RunOptions(), QueueingKnobs(formulation="blocks"))
    assert res.objective == pytest.approx(-340.0)
    assert res.validation.objective == pytest.approx(res.objective)


@pytest.mark.parametrize("formulation", ["slots", "blocks"])
def test_busy_queue_delays_every_group(formulation):
    # The instance holds A and is busy 5 s with a group in service; two A groups of 2 s and 1 s, SLO 100.
    # SPT: starts 5 and 5 + 1 = 6 → Σ start = 11; penalty = 11 − 200 = −189.
    groups = (RequestGroup("a", "A", "c", 100.0, 1, 1, 1, 0, 1), RequestGroup("b", "A", "c", 100.0, 1, 1, 1, 0, 1))
    p = QueueingProblem("busy", groups, (InstanceType("t", "x", 1, 10.0, 1),), (VirtualQueue("q", 0, "A", busy_s=5.0),),
                        np.array([[2.0, 1.0]]), np.zeros((1, 2)))
    res = solve_queueing(p, RunOptions(), QueueingKnobs(formulation=formulation))
    assert res.objective == pytest.approx(-189.0)
    assert res.validation.details["start_s"] == {"a": 6.0, "b": 5.0}


def test_blocks_infeasibility_is_not_reported_as_proven():
    # The model-block MILP is a restriction of the slots MILP: when it finds no plan meeting every SLO,
    # the problem is not proven infeasible.  Same infeasible case as above (one queue, SLO 10, work 10 each).
    p = make_problem(["A"] * 4, [10] * 4, [10] * 4, swap=5.0, loaded="A")
    exact = solve_queueing(p, RunOptions(), QueueingKnobs(formulation="slots", recommend_scale_up=False))
    restricted = solve_queueing(p, RunOptions(), QueueingKnobs(formulation="blocks", recommend_scale_up=False))
    assert exact.status == SolveStatus.INFEASIBLE
    assert restricted.status == SolveStatus.NO_SOLUTION
    assert "might" in restricted.message


def test_blocks_restriction_infeasible_but_a_baseline_meets_every_slo():
    # One queue with A loaded, swap 1 s.  A1 (work 1, SLO 1), B1 (work 1, SLO 2.5), A2 (work 5, SLO 10).
    # Only A1 B1 A2 meets every SLO: starts 0, 1 + 1 = 2, 2 + 1 + 1 = 4 (two swaps); Σ start 6, penalty
    # 6 − 13.5 = −7.5.  The model-block MILP (one run per model) cannot: A1 A2 B1 starts B1 at 7 > 2.5
    # and B1 A1 A2 starts A1 at 3 > 1.  EDF (by SLO) finds A1 B1 A2, so that plan is the answer, not an
    # "infeasible" with a soft plan.
    p = make_problem(["A", "B", "A"], [1, 2.5, 10], [1, 1, 5], swap=1.0, loaded="A", extra=1)
    exact = solve_queueing(p, RunOptions(), QueueingKnobs(formulation="slots"))
    assert exact.status == SolveStatus.OPTIMAL and exact.objective == pytest.approx(-7.5)
    restricted = solve_queueing(p, RunOptions(), QueueingKnobs(formulation="blocks"))
    assert restricted.status == SolveStatus.FEASIBLE
    assert restricted.solution.queues == ((0, 1, 2),)
    assert restricted.objective == pytest.approx(-7.5) == restricted.validation.objective
    assert "restriction" in restricted.message


def test_blocks_restriction_infeasible_the_witness_plan_is_returned():
    # One queue, A loaded, swap 2 s; groups (model, work, SLO): g0 (B, 4, 20), g1 (A, 2, 4), g2 (B, 4, 13),
    # g3 (A, 5, 18), g4 (A, 5, 22).  No baseline meets every SLO and neither does any one-run-per-model
    # plan (A first: the B run starts at 2 + 5 + 5 + 2 = 14 > 13; B first: g1 starts at 2 + 8 + 2 = 12 > 4).
    # The scale-up's witness (baseline + local search) finds g1 g3 g2 g0 g4: starts 0, 2, 2+5+2 = 9, 13,
    # 13+4+2 = 19, every SLO met; Σ start 43 − Σ SLO 77 = −34 — a plan of the current fleet, so it is
    # the answer (feasible, not proven optimal), not a "scale-up: none needed" next to a soft plan.
    p = make_problem(["B", "A", "B", "A", "A"], [20, 4, 13, 18, 22], [4, 2, 4, 5, 5], swap=2.0, loaded="A", extra=1)
    assert not any(run_heuristic(p, name).validation.feasible for name in ("edf", "fcfs", "greedy"))
    res = solve_queueing(p, RunOptions(), QueueingKnobs(formulation="blocks"))
    assert res.status == SolveStatus.FEASIBLE
    assert res.validation.feasible and res.objective == pytest.approx(res.validation.objective)
    assert res.objective == pytest.approx(-34.0)
    assert "witness" in res.message
    exact = solve_queueing(p, RunOptions(), QueueingKnobs(formulation="slots"))
    assert exact.status == SolveStatus.OPTIMAL and exact.objective <= res.objective + 1e-9
