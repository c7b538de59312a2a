"""Scale-up certificates: the capacity lower bound and the witness fleet (planner.queueing.capacity)."""

from __future__ import annotations


import numpy as np
import pytest
from support.queueing import make_problem

from planner.core.contract import RunOptions
from planner.queueing.capacity import capacity_lower_bound, witness_fleet
from planner.queueing.generator import random_problem
from planner.queueing.pipeline import QueueingKnobs, scale_up, solve_milp, solve_queueing
from planner.queueing.validator import validate_assignment
from planner.solver import SolveStatus


def test_capacity_bound_on_the_hand_case_is_the_exact_scale_up():
    # One instance holding A, four groups of 10 s work, SLO 10 s on the start, new instances swap 5 s.
    # Threshold d = 10 holds all four groups (40 s of work).  The existing queue: the last group to
    # start does so by 10, after the others' work → at most 10 − 0 + 10 = 20 s of work (two groups).
    # A new instance starts after its 5 s swap → at most 10 − 5 + 10 = 15 s each.  The 20 s left need
    # n·15 ≥ 20 → n ≥ 2 (integer): the bound is 2 instances of cost 1, and 0 extra is infeasible.
    p = make_problem(["A"] * 4, [10] * 4, [10] * 4, swap=5.0, loaded="A", extra=3)
    bound = capacity_lower_bound(p)
    assert bound.cost == pytest.approx(2.0)
    assert bound.current_fleet_infeasible
    # The witness (EDF + descent) finds a plan with exactly two new instances: proven minimal, no MILP.
    witness = witness_fleet(p, min_cost=bound.cost)
    assert witness.extra_instances == {"t": 2}
    assert validate_assignment(witness.problem, witness.plan).feasible
    rec = scale_up(p, "blocks")  # even the restricted formulation now proves the answer
    assert rec["status"] == "optimal" and rec["extra_instances"] == {"t": 2} and rec["valid"]
    assert rec["formulation"] == "capacity bound + witness"


def test_capacity_bound_charges_the_swap_of_a_foreign_group():
    # One instance holding A (busy 0), swap S = 3 s; groups A1, A2, A3 and B1, 1 s of work each, all
    # with SLO 4 s on the start.  Each alone could start in time (B1 after the swap at 3 ≤ 4).
    # Threshold d = 4: without swaps the queue takes up to 4 − 0 + 1 = 5 s of work ≥ the 4 s there are,
    # so the swap-blind rows accept the current fleet.  But B1 there needs the swap before it, and the
    # swap then precedes the last of the four to start: 3 + 3 (three others) = 6 > 4 (the row:
    # 4 s of work + S = 7 > 5).  So B1 must go elsewhere: a new instance (load 3 ≤ 4) → bound 1, the
    # current fleet provably cannot, and the witness (A's on the old queue at 0, 1, 2; B1 new) costs 1.
    p = make_problem(["A", "A", "A", "B"], [4] * 4, [1] * 4, swap=3.0, loaded="A", extra=2)
    bound = capacity_lower_bound(p)
    assert bound.cost == pytest.approx(1.0) and bound.current_fleet_infeasible
    rec = scale_up(p, "slots")
    assert rec["status"] == "optimal" and rec["extra_instances"] == {"t": 1} and rec["valid"]
    assert rec["formulation"] == "capacity bound + witness"  # proven by the bound, no MILP needed
    exact = solve_milp(p.with_candidates(), "scale_up", "slots")
    assert exact.status == SolveStatus.OPTIMAL
    assert validate_assignment(p.with_candidates(), exact.plan, "scale_up").objective == pytest.approx(1.0)


def test_blocks_path_reports_proven_infeasibility_from_the_capacity_bound():
    # Same case through the model-block MILP, whose own infeasibility proves nothing: the capacity
    # bound (n = 0 infeasible) makes the "SLOs cannot all be met" claim a proven one.
    p = make_problem(["A"] * 4, [10] * 4, [10] * 4, swap=5.0, loaded="A", extra=3)
    res = solve_queueing(p, RunOptions(), QueueingKnobs(formulation="blocks"))
    assert res.status == SolveStatus.INFEASIBLE
    assert "capacity bound" in res.message and "+2 t (proven minimal)" in res.message


def test_capacity_bound_never_exceeds_the_exact_scale_up():
    # Random one-type instances (five groups, works 1–10 s, SLOs 5–30 s, swap 5 s, up to three new
    # instances): the exact slots MILP's scale-up cost is the optimum; the bound (a relaxation) must
    # not exceed it and the witness (a validated fleet) must not be below it.
    rng = np.random.default_rng(7)
    costs = []
    for _ in range(10):
        work = rng.integers(1, 11, 5).tolist()
        slos = rng.integers(5, 31, 5).tolist()
        p = make_problem(["A"] * 5, slos, work, swap=5.0, loaded="A", extra=3)
        candidates = p.with_candidates().with_objective("penalty")
        run = solve_milp(candidates, "scale_up", "slots")
        bound = capacity_lower_bound(p)
        witness = witness_fleet(p)
        if run.status == SolveStatus.INFEASIBLE:  # even three new instances do not suffice
            assert witness is None
            continue
        assert run.status == SolveStatus.OPTIMAL
        optimum = validate_assignment(candidates, run.plan, "scale_up").objective
        costs.append(optimum)
        assert bound is not None and bound.cost is not None and bound.cost <= optimum + 1e-9
        if bound.current_fleet_infeasible:
            assert optimum >= 1
        assert witness is not None and witness.cost >= optimum - 1e-9
        assert validate_assignment(witness.problem, witness.plan).feasible
    assert len(set(costs)) >= 2  # the sample holds different scale-ups, not only "none needed"


def test_capacity_bound_with_swap_rows_never_exceeds_the_exact_scale_up():
    # As above with two models (the swap rows of define_swap_capacity are active: the queue holds A,
    # B groups need the 3 s swap): the bound stays ≤ the exact scale-up, and when it says the current
    # fleet cannot meet every SLO the exact answer needs at least one new instance.
    rng = np.random.default_rng(11)
    raised = 0
    for _ in range(12):
        models = ["A" if b else "B" for b in rng.integers(0, 2, 5)]
        work = rng.integers(1, 6, 5).tolist()
        slos = rng.integers(3, 16, 5).tolist()
        p = make_problem(models, slos, work, swap=3.0, loaded="A", extra=3)
        candidates = p.with_candidates().with_objective("penalty")
        run = solve_milp(candidates, "scale_up", "slots")
        bound = capacity_lower_bound(p)
        if run.status == SolveStatus.INFEASIBLE:
            continue
        assert run.status == SolveStatus.OPTIMAL
        optimum = validate_assignment(candidates, run.plan, "scale_up").objective
        assert bound is not None and bound.cost is not None and bound.cost <= optimum + 1e-9
        if bound.current_fleet_infeasible:
            assert optimum >= 1
        raised += bound.cost >= 1
    assert raised >= 2  # the sample holds cases where the bound asks for new instances


def test_witness_and_bound_on_a_120_group_overload():
    # 120 groups on 2 queues.  SLOs cut to two thirds: the current fleet misses some SLOs, and a
    # fleet with a validated plan is reported (from the witness or the MILP, whichever is cheaper).
    base = random_problem(120, 2, seed=3)
    tighter = base._replace(groups=tuple(g.__class__(**{**g.__dict__, "slo_s": g.slo_s / 1.5}) for g in base.groups))
    rec = scale_up(tighter, "blocks", time_limit=2.0)
    assert rec["extra_instances"] and rec["valid"], rec
    assert rec["cost"] >= (rec["lower_bound_cost"] or 0.0) - 1e-9
    # SLOs cut to a third: even all four candidates cannot do it, and the capacity bound proves it
    # (the MILP would only run out of time).
    hopeless = base._replace(groups=tuple(g.__class__(**{**g.__dict__, "slo_s": g.slo_s / 3}) for g in base.groups))
    rec = scale_up(hopeless, "blocks", time_limit=2.0)
    assert rec["status"] == "infeasible" and rec["extra_instances"] == {}
    assert "capacity bound" in rec["message"]


def test_time_limit_is_one_budget_for_the_soft_milp_and_the_scale_up(monkeypatch):
    # The hand case of test_infeasible_case_gives_the_exact_scale_up_and_soft_version: the hard MILP,
    # the soft MILP and the scale-up (capacity bound, witness, MILP) all run.  Every limit handed on is
    # what is left of the caller's 4 s (less as time passes), never a fresh 4 s per MILP: the soft MILP
    # gets SOFT_SHARE of what is left, the capacity bound at most half of the scale-up's part.
    from planner.queueing import pipeline as solve_module
    from planner.queueing import capacity

    limits: list[tuple[str, float | None]] = []
    real_milp, real_bound = solve_module.solve_milp, capacity.capacity_lower_bound

    def record_milp(problem, purpose, formulation, **kwargs):
        limits.append((purpose, kwargs.get("time_limit")))
        return real_milp(problem, purpose, formulation, **kwargs)

    def record_bound(problem, **kwargs):
        limits.append(("capacity", kwargs.get("time_limit")))
        return real_bound(problem, **kwargs)

    monkeypatch.setattr(solve_module, "solve_milp", record_milp)
    monkeypatch.setattr(solve_module, "capacity_lower_bound", record_bound)
    p = make_problem(["A"] * 4, [10] * 4, [10] * 4, swap=5.0, loaded="A", extra=3)
    res = solve_queueing(p, RunOptions(time_limit=4.0), QueueingKnobs(formulation="slots"))
    assert res.stats["scale_up"]["extra_instances"] == {"t": 2}  # the answer does not change
    purposes = [purpose for purpose, _ in limits]
    assert purposes[:2] == ["penalty", "total_lateness"] and "capacity" in purposes
    budget = dict(limits)
    assert all(limit is not None and 0 < limit <= 4.0 for _, limit in limits)
    assert budget["total_lateness"] <= solve_module.SOFT_SHARE * 4.0 + 1e-9
    assert budget["capacity"] <= 0.5 * 4.0 + 1e-9
    if "scale_up" in budget:  # the witness may settle it before the scale-up MILP
        assert budget["total_lateness"] + budget["scale_up"] <= 4.0 + 1e-9


def test_witness_budget_does_not_depend_on_how_long_the_milps_took(monkeypatch):
    # The witness search spends nominal seconds; its budget must be fixed by the caller's time limit
    # (WITNESS_SHARE × (1 − SOFT_SHARE) × 4 s = 0.4 × 0.75 × 4 = 1.2 s), not by the wall time that the
    # hard and soft MILPs left over — else a slower MILP changes the witness and the reported fleet.
    import time

    from planner.queueing import pipeline as solve_module

    seen: list[float | None] = []
    real_scale_up, real_milp = solve_module.scale_up, solve_module.solve_milp

    def record(problem, formulation="auto", **kwargs):
        seen.append(kwargs.get("witness_seconds"))
        return real_scale_up(problem, formulation, **kwargs)

    p = make_problem(["A"] * 4, [10] * 4, [10] * 4, swap=5.0, loaded="A", extra=3)
    monkeypatch.setattr(solve_module, "scale_up", record)
    fast = solve_queueing(p, RunOptions(time_limit=4.0), QueueingKnobs(formulation="slots"))

    def slow_milp(*args, **kwargs):  # the MILPs now eat 0.5 s more wall time each
        time.sleep(0.5)
        return real_milp(*args, **kwargs)

    monkeypatch.setattr(solve_module, "solve_milp", slow_milp)
    slow = solve_queueing(p, RunOptions(time_limit=4.0), QueueingKnobs(formulation="slots"))
    expected = solve_module.WITNESS_SHARE * (1.0 - solve_module.SOFT_SHARE) * 4.0
    assert seen == [pytest.approx(expected), pytest.approx(expected)]
    assert fast.stats["scale_up"]["extra_instances"] == slow.stats["scale_up"]["extra_instances"] == {"t": 2}


def test_witness_clock_stops_at_the_call_deadline():
    # A nominal budget of 10 s with only ~1 s of wall time left before the call's deadline: the wall
    # guard sits at ≤ 1/10 of the budget, so the search cannot run past the deadline.
    import time

    from planner.queueing.pipeline import WITNESS_SHARE, _witness_clock

    clock = _witness_clock(20.0, 10.0, time.perf_counter() + 1.0)
    assert clock.time_limit == 10.0 and clock.guard_share <= 0.1 + 1e-6
    late = _witness_clock(20.0, 10.0, time.perf_counter() - 1.0)  # the deadline has passed already
    assert not late.allows() and late.wall_cut
    assert _witness_clock(None, None, None) is None
    assert _witness_clock(5.0, None, None).time_limit == pytest.approx(WITNESS_SHARE * 5.0)
