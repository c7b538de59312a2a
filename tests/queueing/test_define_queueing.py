"""Every constraint family (`define_*`) of the QLM queueing MILPs checked on hand-solved tiny cases
(docs/formulations.md §4.3 and §4.5; equation numbers of Patke et al., *Queue Management for SLO-Oriented
Large Language Model Serving* (QLM), SoCC'24):

* the **slots** model (`planner/queueing/formulation.py`, corrected Eqs. 6–13, slots counted from the
  end of the queue: slot 0 runs last);
* the **blocks** model (same file: model blocks, EDF inside a block);
* the **reduced slots** model of the certified pipeline (`planner/queueing/reduced_slots.py`);
* the swap rows of the scale-up capacity bound (`planner/queueing/capacity.py`).

Each test builds the model through the family's own build function (`build_model`,
`build_reduced_slots`) — or, for `define_swap_capacity`, calls it on a bare builder — finds the row
block by name and compares it with the matrix and bounds written out by hand from the docstring
equation; where the rows say something about plans, a hand-built point that satisfies them is accepted
and one that breaks them is rejected.

The base case P1: one instance (swap S = 10 s, busy with the group in service for 0.5 s, model A loaded),
two groups g0 (model A, work W = 2 s, tail 1 s, SLO 20 s) and g1 (model B, W = 3 s, tail 1.5 s, SLO 30 s),
``completion`` deadlines, so C = W + tail = (3, 4.5).  Slots L = 2.  The plan "g0 then g1" puts g0 in
slot 1 and g1 in slot 0: g0 starts at 0.5 (busy), g1 at 0.5 + 2 + 10 (swap to B) = 12.5.
"""

from __future__ import annotations

import numpy as np
import pytest
from support.rows import assert_rows, column_upper, holds, point

from planner.queueing.capacity import _bound_model, define_swap_capacity
from planner.queueing.formulation import build_model, queue_constants
from planner.queueing.problem import InstanceType, QueueingProblem, RequestGroup, VirtualQueue
from planner.queueing.reduced_slots import build_reduced_slots
from planner.solver import ModelBuilder

INF = float("inf")
EPS = 1e-3  # the work offset of the symmetry rows (W + ε), so that empty-vs-empty ties are broken too


# ---- helpers -------------------------------------------------------------------------------------

def make(models=("A", "B"), slos=(20.0, 30.0), work=(2.0, 3.0), tail=(1.0, 1.5), *, queues=1, loaded="A",
         busy=0.5, swap=10.0, extra=0, deadline="completion", objective="penalty") -> QueueingProblem:
    groups = tuple(RequestGroup(f"g{i}", m, "c", float(s), 1, 10.0, 10.0, 0.0, 10.0, arrival_s=float(i))
                   for i, (m, s) in enumerate(zip(models, slos)))
    types = (InstanceType("t", "A100", 1, swap, queues, extra),)
    qs = tuple(VirtualQueue(f"q{k}", 0, loaded, busy_s=busy) for k in range(queues))
    return QueueingProblem("hand", groups, types, qs, np.array([work], float), np.array([tail], float),
                           objective=objective, deadline=deadline)


# Plan "g0 then g1" on P1 in the slots model (slot 1 runs first): x[0,0,1] = x[0,1,0] = 1, both slots
# occupied, a swap at slot 0 only (A is loaded), wt = (12.5, 0.5).
SLOTS_PLAN = {("x", 0, 0, 1): 1, ("x", 0, 1, 0): 1, ("occ", 0, 0): 1, ("occ", 0, 1): 1,
              ("t", 0, 0): 1, ("t", 0, 1): 0, ("wt", 0, 0): 12.5, ("wt", 0, 1): 0.5}


# ---- slots formulation ---------------------------------------------------------------------------

def test_assignment_slots_group_once_occupancy_padding():
    """Eq. 6 (QLM, corrected): ``Σ_{g,r} x[g,i,r] = 1``; ``occ[g,r] = Σ_i x[g,i,r]``; ``occ[g,r] ≥ occ[g,r+1]``
    (padding on top, i.e. earliest); x fixed to 0 where the model does not fit (column bound)."""
    m = build_model(make(), "penalty", "slots").model
    assert_rows(m, "group_once", [{("x", 0, 0, 0): 1, ("x", 0, 0, 1): 1},
                                  {("x", 0, 1, 0): 1, ("x", 0, 1, 1): 1}], 1.0, 1.0)
    assert_rows(m, "slot_occupancy", [{("x", 0, 0, 0): 1, ("x", 0, 1, 0): 1, ("occ", 0, 0): -1},
                                      {("x", 0, 0, 1): 1, ("x", 0, 1, 1): 1, ("occ", 0, 1): -1}], 0.0, 0.0)
    assert_rows(m, "padding_last", [{("occ", 0, 0): 1, ("occ", 0, 1): -1}], 0.0, INF)
    for name in ("group_once", "slot_occupancy", "padding_last"):
        assert holds(m, name, SLOTS_PLAN), name
    # both groups in slot 0 with occ ≤ 1 (its column bound): "occ = Σ x" is broken (group_once is not)
    both = {("x", 0, 0, 0): 1, ("x", 0, 1, 0): 1, ("occ", 0, 0): 1}
    assert holds(m, "group_once", both) and not holds(m, "slot_occupancy", both)
    # one group alone in slot 1 (the gap below it at slot 0): the padding must be on top, not below
    assert not holds(m, "padding_last", {("occ", 0, 1): 1})
    assert holds(m, "padding_last", {("occ", 0, 0): 1})
    assert not holds(m, "group_once", {("x", 0, 0, 0): 1})  # g1 nowhere
    # a group whose model does not fit (work = inf) gets x ≤ 0 on that queue
    unfit = build_model(make(work=(2.0, INF)), "penalty", "slots").model
    np.testing.assert_array_equal(column_upper(unfit, "x"), [[[1, 1], [0, 0]]])


def test_model_switch_slots_with_a_loaded_model():
    """Corrected Eqs. 7/9: ``t[g,r] ≥ u[g,r,μ] − u[g,r+1,μ] − [μ = loaded_g]·(1 − occ[g,r+1])``, and at the
    top slot ``t[g,L−1] ≥ u[g,L−1,μ] − [μ = loaded_g]`` (u[g,r,μ] = Σ_{i of model μ} x[g,i,r])."""
    m = build_model(make(), "penalty", "slots").model
    # rows by (slot r, model μ) with models (A, B), A loaded, g0 of A and g1 of B:
    #   r=0, A: t0 − x[0,0,0] + x[0,0,1] + (−1)(1 − occ1) ≥ 0  →  t0 − x000 + x001 − occ1 ≥ −1
    #   r=0, B: t0 − x[0,1,0] + x[0,1,1] ≥ 0
    #   r=1, A: t1 − x[0,0,1] ≥ −1
    #   r=1, B: t1 − x[0,1,1] ≥ 0
    assert_rows(m, "model_switch", [
        {("t", 0, 0): 1, ("x", 0, 0, 0): -1, ("x", 0, 0, 1): 1, ("occ", 0, 1): -1},
        {("t", 0, 0): 1, ("x", 0, 1, 0): -1, ("x", 0, 1, 1): 1},
        {("t", 0, 1): 1, ("x", 0, 0, 1): -1},
        {("t", 0, 1): 1, ("x", 0, 1, 1): -1},
    ], [-1, 0, -1, 0], INF)
    assert holds(m, "model_switch", SLOTS_PLAN)
    assert not holds(m, "model_switch", {**SLOTS_PLAN, ("t", 0, 0): 0})  # A → B without a swap
    # g0 (A, loaded) alone, in slot 0 under an empty slot 1: no swap needed
    assert holds(m, "model_switch", {("x", 0, 0, 0): 1, ("occ", 0, 0): 1})
    # g1 (B) first: a swap at its slot is required
    assert not holds(m, "model_switch", {("x", 0, 1, 1): 1, ("occ", 0, 1): 1, ("x", 0, 0, 0): 1, ("occ", 0, 0): 1,
                                         ("t", 0, 0): 1})


def test_model_switch_slots_on_an_empty_instance():
    """Corrected Eqs. 7/9 with nothing loaded: every μ has ``[μ = loaded_g] = 0``, so the first group always swaps."""
    m = build_model(make(loaded=None), "penalty", "slots").model
    assert_rows(m, "model_switch", [
        {("t", 0, 0): 1, ("x", 0, 0, 0): -1, ("x", 0, 0, 1): 1},
        {("t", 0, 0): 1, ("x", 0, 1, 0): -1, ("x", 0, 1, 1): 1},
        {("t", 0, 1): 1, ("x", 0, 0, 1): -1},
        {("t", 0, 1): 1, ("x", 0, 1, 1): -1},
    ], 0.0, INF)
    assert not holds(m, "model_switch", {("x", 0, 0, 0): 1, ("occ", 0, 0): 1})
    assert holds(m, "model_switch", {("x", 0, 0, 0): 1, ("occ", 0, 0): 1, ("t", 0, 0): 1})


def test_cumulative_wait_slots():
    """Corrected Eq. 10:
    ``wt[g,r] = wt[g,r+1] + Σ_i W[g,i]·x[g,i,r+1] + S_g·t[g,r] + busy_g·(occ[g,r] − occ[g,r+1])``."""
    m = build_model(make(), "penalty", "slots").model
    # S = 10, busy = 0.5, W = (2, 3):
    #   r=0: wt0 − 10 t0 − 0.5 occ0 − wt1 + 0.5 occ1 − 2 x[0,0,1] − 3 x[0,1,1] = 0
    #   r=1: wt1 − 10 t1 − 0.5 occ1 = 0           (top slot: no slot above)
    assert_rows(m, "cumulative_wait", [
        {("wt", 0, 0): 1, ("t", 0, 0): -10, ("occ", 0, 0): -0.5, ("wt", 0, 1): -1, ("occ", 0, 1): 0.5,
         ("x", 0, 0, 1): -2, ("x", 0, 1, 1): -3},
        {("wt", 0, 1): 1, ("t", 0, 1): -10, ("occ", 0, 1): -0.5},
    ], 0.0, 0.0)
    assert holds(m, "cumulative_wait", SLOTS_PLAN)  # g0 starts at 0.5, g1 at 0.5 + 2 + 10 = 12.5
    assert not holds(m, "cumulative_wait", {**SLOTS_PLAN, ("wt", 0, 0): 2.5})  # swap time left out
    assert not holds(m, "cumulative_wait", {**SLOTS_PLAN, ("wt", 0, 1): 0.0, ("wt", 0, 0): 12.0})  # busy time left out
    # g0 alone in slot 0 (slot 1 empty): it starts after the busy time only
    assert holds(m, "cumulative_wait", {("x", 0, 0, 0): 1, ("occ", 0, 0): 1, ("wt", 0, 0): 0.5})


@pytest.mark.parametrize(("deadline", "coef"), [("completion", (3.0 - 20.0, 4.5 - 30.0)), ("start", (-20.0, -30.0))])
def test_deadlines_slots_hard(deadline, coef):
    """Eqs. 11–12: ``wt[g,r] + Σ_i (C[g,i] − slo_i)·x[g,i,r] ≤ 0``; C = W + tail in ``completion`` mode,
    0 in ``start`` mode."""
    m = build_model(make(deadline=deadline), "penalty", "slots").model
    assert_rows(m, "deadline", [{("wt", 0, r): 1, ("x", 0, 0, r): coef[0], ("x", 0, 1, r): coef[1]} for r in range(2)],
                -INF, 0.0)
    assert holds(m, "deadline", SLOTS_PLAN)  # g0 ends 3.5 ≤ 20, g1 ends 17 ≤ 30
    # g1 starting at 26: completes at 30.5 > 30 (rejected in completion mode), starts at 26 ≤ 30 (start mode)
    late = {**SLOTS_PLAN, ("wt", 0, 0): 26.0}
    assert holds(m, "deadline", late) == (deadline == "start")
    assert not holds(m, "deadline", {**SLOTS_PLAN, ("wt", 0, 0): 31.0})


def test_deadlines_slots_soft_versions():
    """Eqs. 11–12, soft: ``… − late[g,r] ≤ 0`` (lateness objectives) or ``… − M_g·v[g,r] ≤ 0`` (late groups) with
    ``M_g = busy + Σ_i W + S·(N+1) + max C + max slo + 1 = 0.5 + 5 + 30 + 4.5 + 30 + 1 = 71``."""
    m = build_model(make(objective="total_lateness"), "total_lateness", "slots").model
    assert_rows(m, "deadline", [{("wt", 0, r): 1, ("x", 0, 0, r): -17.0, ("x", 0, 1, r): -25.5, ("late", 0, r): -1}
                                for r in range(2)], -INF, 0.0)
    late = {**SLOTS_PLAN, ("wt", 0, 0): 26.0}  # 0.5 s late
    assert not holds(m, "deadline", late)
    assert holds(m, "deadline", {**late, ("late", 0, 0): 0.5})
    m = build_model(make(objective="late_groups"), "late_groups", "slots").model
    assert_rows(m, "deadline", [{("wt", 0, r): 1, ("x", 0, 0, r): -17.0, ("x", 0, 1, r): -25.5,
                                 ("late_flag", 0, r): -71.0} for r in range(2)], -INF, 0.0)
    assert not holds(m, "deadline", late)
    assert holds(m, "deadline", {**late, ("late_flag", 0, 0): 1})
    # max lateness: the same rows as total lateness plus ``max_late ≥ late[g,r]`` for every slot
    m = build_model(make(objective="max_lateness"), "max_lateness", "slots").model
    assert_rows(m, "deadline", [{("wt", 0, r): 1, ("x", 0, 0, r): -17.0, ("x", 0, 1, r): -25.5, ("late", 0, r): -1}
                                for r in range(2)], -INF, 0.0)
    assert_rows(m, "max_lateness", [{("max_late", 0): 1, ("late", 0, r): -1} for r in range(2)], 0.0, INF)
    assert not holds(m, "max_lateness", {("late", 0, 1): 0.5, ("max_late", 0): 0.4})


@pytest.mark.parametrize("formulation", ["slots", "blocks"])
def test_late_flag_relaxes_a_deadline_that_passed_long_ago(formulation):
    """Eqs. 11–12, late-groups version: ``… − M·v ≤ 0`` must hold for *every* plan with v = 1, so M must be at
    least ``start + C − slo`` of any group.  One group of the loaded model (W = 1, S = 10, nothing busy) whose
    deadline passed 100 s ago (slo = −100, ``start`` mode): it starts at 0, so the row needs M ≥ 0 + 0 + 100;
    `queue_constants` gives M = 0 + 1 + 10·2 + 0 + max(−100, 0) + max(0, 100) + 1 = 122 (without the −min slo
    term it would be 22 and the late_groups MILP infeasible).  Every plan is feasible with the group late."""
    assert queue_constants(make(models=("A",), slos=(-100.0,), work=(1.0,), tail=(0.0,), busy=0.0, deadline="start",
                                objective="late_groups"))[4].tolist() == [122.0]
    p = make(models=("A",), slos=(-100.0,), work=(1.0,), tail=(0.0,), busy=0.0, deadline="start",
             objective="late_groups")
    m = build_model(p, "late_groups", formulation).model
    plan = ({("x", 0, 0, 0): 1, ("occ", 0, 0): 1, ("wt", 0, 0): 0.0, ("late_flag", 0, 0): 1} if formulation == "slots"
            else {("y", 0, 0): 1, ("active", 0, 0): 1, ("s", 0): 0.0, ("late_flag", 0): 1})
    assert holds(m, "deadline", plan)


def test_whole_slots_model_accepts_the_hand_plan_at_its_penalty():
    """The slots model of `build_model` with the Eq. 13 objective written without big-M,
    ``Σ (W[g,i]·r + busy_g + C[g,i])·x + Σ S_g·(r+1)·t − Σ slo``: plan "g0 then g1" completes at 3.5 and 17,
    penalty 3.5 + 17 − 50 = −29.5 (in the model: x costs 2·1 + 0.5 + 3 = 5.5 and 0 + 0.5 + 4.5 = 5, t0 costs 10)."""
    m = build_model(make(), "penalty", "slots").model
    assert m.families == ("group_once", "slot_occupancy", "padding_last", "model_switch", "cumulative_wait", "deadline")
    x = point(m, SLOTS_PLAN)
    assert m.max_violation(x) <= 1e-9
    assert float(m.cost @ x + m.offset) == pytest.approx(-29.5)


def test_open_queues_slots():
    """Scale-up: a candidate queue holds groups only when opened, ``occ[g,0] ≤ open[g]``; closed (open ≤ 0)
    unless this is the scale-up MILP."""
    p = make(queues=2, loaded=None, busy=0.0, extra=1).with_candidates()  # q0, q1 existing, "t+1" a candidate
    m = build_model(p, "scale_up", "slots").model
    assert_rows(m, "open_queue", [{("occ", 2, 0): 1, ("open", 0): -1}], -INF, 0.0)
    assert not holds(m, "open_queue", {("occ", 2, 0): 1})
    assert holds(m, "open_queue", {("occ", 2, 0): 1, ("open", 0): 1})
    assert column_upper(m, "open").tolist() == [1.0]
    closed = build_model(p, "penalty", "slots").model
    assert column_upper(closed, "open").tolist() == [0.0]


def test_symmetry_slots():
    """Interchangeable queues (same type, loaded model, optionality, busy time): the earlier holds at least
    as much work, ``Σ_{i,r} (W[a,i] + ε)·x[a,i,r] − Σ_{i,r} (W[b,i] + ε)·x[b,i,r] ≥ 0``."""
    p = make(queues=2, loaded=None, busy=0.0, extra=1).with_candidates()  # the candidate differs (optional): no pair
    m = build_model(p, "scale_up", "slots").model
    row = {**{("x", 0, i, r): w + EPS for i, w in enumerate((2.0, 3.0)) for r in range(2)},
           **{("x", 1, i, r): -(w + EPS) for i, w in enumerate((2.0, 3.0)) for r in range(2)}}
    assert_rows(m, "symmetry", [row], 0.0, INF)
    assert holds(m, "symmetry", {("x", 0, 1, 0): 1, ("x", 1, 0, 0): 1})  # 3 on q0 ≥ 2 on q1
    assert not holds(m, "symmetry", {("x", 0, 0, 0): 1, ("x", 1, 1, 0): 1})  # 2 on q0 < 3 on q1
    assert not holds(m, "symmetry", {("x", 1, 0, 0): 1})  # q0 empty, q1 used
    # queues that differ (another loaded model) are not interchangeable: no symmetry rows
    differ = make(queues=1)._replace(queues=(VirtualQueue("q0", 0, "A"), VirtualQueue("q1", 0, "B")))
    assert "symmetry" not in build_model(differ, "penalty", "slots").model.families


# ---- blocks formulation --------------------------------------------------------------------------
# P_B: one instance (A loaded, busy 0.5, S = 10), groups g0 (A, W 2, tail 1, SLO 20), g1 (B, W 3, tail 1.5,
# SLO 30), g2 (A, W 1, tail 0.5, SLO 10); completion deadlines: C = (3, 4.5, 1.5).  EDF: g2, g0, g1.
# Big-M = busy + Σ W + S·(N+1) + max C + max slo + 1 = 0.5 + 6 + 40 + 4.5 + 30 + 1 = 82.
# Plan: A block g2, g0 from B_A = 0.5 (starts 0.5, 1.5), then B block from B_B = 0.5 + 1 + 2 + 10 = 13.5.
BIG_M = 82.0
BLOCKS_PLAN = {("y", 0, 0): 1, ("y", 1, 0): 1, ("y", 2, 0): 1, ("active", 0, 0): 1, ("active", 0, 1): 1,
               ("block_start", 0, 0): 0.5, ("block_start", 0, 1): 13.5, ("block_order", 0, 0, 1): 1,
               ("s", 0): 1.5, ("s", 1): 13.5, ("s", 2): 0.5}


def blocks_problem(**kw) -> QueueingProblem:
    return make(models=("A", "B", "A"), slos=(20.0, 30.0, 10.0), work=(2.0, 3.0, 1.0), tail=(1.0, 1.5, 0.5), **kw)


def test_assignment_blocks():
    """Eq. 6 (blocks): each group on exactly one queue, ``Σ_g y[i,g] = 1`` (y ≤ 0 where the model does not fit)."""
    p = make(queues=2, loaded=None)
    m = build_model(p, "penalty", "blocks").model
    assert_rows(m, "group_once", [{("y", 0, 0): 1, ("y", 0, 1): 1}, {("y", 1, 0): 1, ("y", 1, 1): 1}], 1.0, 1.0)
    assert holds(m, "group_once", {("y", 0, 1): 1, ("y", 1, 0): 1})
    assert not holds(m, "group_once", {("y", 0, 0): 1, ("y", 0, 1): 1, ("y", 1, 0): 1})  # g0 on two queues
    unfit = build_model(make(work=(2.0, INF)), "penalty", "blocks").model
    np.testing.assert_array_equal(column_upper(unfit, "y"), [[1], [0]])


def test_block_activity():
    """``a[g,μ] ≥ y[i,g]`` for every group i of model μ (the block of μ on g is used)."""
    m = build_model(blocks_problem(), "penalty", "blocks").model
    # one row per (group i, queue g): models (A, B); g0, g2 of A, g1 of B
    assert_rows(m, "block_active", [{("active", 0, 0): 1, ("y", 0, 0): -1},
                                    {("active", 0, 1): 1, ("y", 1, 0): -1},
                                    {("active", 0, 0): 1, ("y", 2, 0): -1}], 0.0, INF)
    assert holds(m, "block_active", BLOCKS_PLAN)
    assert not holds(m, "block_active", {**BLOCKS_PLAN, ("active", 0, 1): 0})


def test_block_sequence_first_swap_and_order():
    """Block starts: ``B[g,μ] ≥ (busy_g + S0[g,μ])·a[g,μ]`` (S0 = 0 for the loaded model, S_g otherwise) and
    ``B[g,ν] ≥ B[g,μ] + Σ_{k∈μ} W[g,k]·y[k,g] + S_g·a[g,ν] − M_g·(1 − [μ before ν])`` with
    ``[μ before ν] = o[g,μ,ν]`` (μ < ν) or ``1 − o[g,ν,μ]`` (μ > ν)."""
    m = build_model(blocks_problem(), "penalty", "blocks").model
    assert_rows(m, "block_first_swap", [{("block_start", 0, 0): 1, ("active", 0, 0): -0.5},
                                        {("block_start", 0, 1): 1, ("active", 0, 1): -10.5}], 0.0, INF)
    # (μ, ν) = (A, B): B_B − B_A − 10 a_B − 2 y0 − 1 y2 − 82 o ≥ −82
    # (μ, ν) = (B, A): B_A − B_B − 10 a_A − 3 y1 + 82 o ≥ 0
    assert_rows(m, "block_sequence", [
        {("block_start", 0, 1): 1, ("block_start", 0, 0): -1, ("active", 0, 1): -10, ("y", 0, 0): -2, ("y", 2, 0): -1,
         ("block_order", 0, 0, 1): -BIG_M},
        {("block_start", 0, 0): 1, ("block_start", 0, 1): -1, ("active", 0, 0): -10, ("y", 1, 0): -3,
         ("block_order", 0, 0, 1): BIG_M},
    ], [-BIG_M, 0.0], INF)
    assert column_upper(m, "block_order").tolist() == [[[0, 1], [0, 0]]]  # only o[g,μ,ν] with μ < ν
    for name in ("block_first_swap", "block_sequence"):
        assert holds(m, name, BLOCKS_PLAN), name
    assert not holds(m, "block_sequence", {**BLOCKS_PLAN, ("block_start", 0, 1): 3.5})  # the B block without its swap
    assert not holds(m, "block_first_swap", {**BLOCKS_PLAN, ("block_start", 0, 0): 0.0})  # before the busy group ends
    # the other order (B block first, o = 0): B_B = 10.5 (busy + swap), A block after 3 s of work and a swap back
    b_first = {**BLOCKS_PLAN, ("block_order", 0, 0, 1): 0, ("block_start", 0, 1): 10.5, ("block_start", 0, 0): 23.5}
    assert holds(m, "block_sequence", b_first) and holds(m, "block_first_swap", b_first)
    assert not holds(m, "block_sequence", {**b_first, ("block_start", 0, 0): 13.5})  # no swap back to A


def test_group_start_blocks_edf_inside_a_block():
    """EDF inside a block: ``s_i ≥ B[g,μ_i] + Σ_{k ≺ i, μ_k = μ_i} W[g,k]·y[k,g] − M_g·(1 − y[i,g])``."""
    m = build_model(blocks_problem(), "penalty", "blocks").model
    # EDF ranks: g2 (SLO 10) ≺ g0 (20) ≺ g1 (30); only g0 has a same-model predecessor (g2)
    assert_rows(m, "group_start", [
        {("s", 0): 1, ("block_start", 0, 0): -1, ("y", 0, 0): -BIG_M, ("y", 2, 0): -1.0},
        {("s", 1): 1, ("block_start", 0, 1): -1, ("y", 1, 0): -BIG_M},
        {("s", 2): 1, ("block_start", 0, 0): -1, ("y", 2, 0): -BIG_M},
    ], -BIG_M, INF)
    assert holds(m, "group_start", BLOCKS_PLAN)
    assert not holds(m, "group_start", {**BLOCKS_PLAN, ("s", 0): 0.5})  # g0 cannot start before g2 (EDF) ends
    # not on the queue (y = 0): the row is slack whatever s is
    assert holds(m, "group_start", {("block_start", 0, 0): 50.0, ("s", 2): 0.0, ("y", 2, 0): 0})


def test_deadlines_blocks():
    """Eqs. 11–12 per group: ``s_i + Σ_g C[g,i]·y[i,g] − late_i − M·v_i ≤ slo_i``."""
    m = build_model(blocks_problem(), "penalty", "blocks").model
    assert_rows(m, "deadline", [{("s", 0): 1, ("y", 0, 0): 3.0}, {("s", 1): 1, ("y", 1, 0): 4.5},
                                {("s", 2): 1, ("y", 2, 0): 1.5}], -INF, [20.0, 30.0, 10.0])
    assert holds(m, "deadline", BLOCKS_PLAN)  # completions 4.5, 18, 2
    assert not holds(m, "deadline", {**BLOCKS_PLAN, ("s", 2): 9.0})  # g2 would end at 10.5 > 10
    soft = build_model(blocks_problem(objective="total_lateness"), "total_lateness", "blocks").model
    assert_rows(soft, "deadline", [{("s", 0): 1, ("y", 0, 0): 3.0, ("late", 0): -1},
                                   {("s", 1): 1, ("y", 1, 0): 4.5, ("late", 1): -1},
                                   {("s", 2): 1, ("y", 2, 0): 1.5, ("late", 2): -1}], -INF, [20.0, 30.0, 10.0])
    count = build_model(blocks_problem(objective="late_groups"), "late_groups", "blocks").model
    assert_rows(count, "deadline", [{("s", 0): 1, ("y", 0, 0): 3.0, ("late_flag", 0): -BIG_M},
                                    {("s", 1): 1, ("y", 1, 0): 4.5, ("late_flag", 1): -BIG_M},
                                    {("s", 2): 1, ("y", 2, 0): 1.5, ("late_flag", 2): -BIG_M}],
                -INF, [20.0, 30.0, 10.0])


def test_whole_blocks_model_accepts_the_hand_plan_at_its_penalty():
    """The blocks model of `build_model` on P_B with the plan of the block comment (A block g2, g0, then the B
    block g1): completions 0.5 + 1.5 = 2, 1.5 + 3 = 4.5, 13.5 + 4.5 = 18, penalty 24.5 − 60 = −35.5
    (in the model: starts 0.5 + 1.5 + 13.5 = 15.5 at cost 1, own completion C = 3 + 4.5 + 1.5 = 9 on y)."""
    m = build_model(blocks_problem(), "penalty", "blocks").model
    assert m.families == ("group_once", "block_active", "block_first_swap", "block_sequence", "group_start", "deadline")
    x = point(m, BLOCKS_PLAN)
    assert m.max_violation(x) <= 1e-9
    assert float(m.cost @ x + m.offset) == pytest.approx(-35.5)


def test_open_queues_blocks():
    """Scale-up (blocks): ``y[i,g] ≤ open[g]`` on every candidate queue g, for every group i."""
    p = make(queues=2, loaded=None, busy=0.0, extra=1).with_candidates()
    m = build_model(p, "scale_up", "blocks").model
    assert_rows(m, "open_queue", [{("y", 0, 2): 1, ("open", 0): -1}, {("y", 1, 2): 1, ("open", 0): -1}], -INF, 0.0)
    assert not holds(m, "open_queue", {("y", 1, 2): 1})
    assert holds(m, "open_queue", {("y", 1, 2): 1, ("open", 0): 1})
    assert column_upper(build_model(p, "penalty", "blocks").model, "open").tolist() == [0.0]


def test_symmetry_blocks():
    """Interchangeable queues (blocks): ``Σ_i (W[a,i] + ε)·y[i,a] − Σ_i (W[b,i] + ε)·y[i,b] ≥ 0``."""
    p = make(queues=2, loaded=None, busy=0.0, extra=1).with_candidates()
    m = build_model(p, "scale_up", "blocks").model
    assert_rows(m, "symmetry", [{("y", 0, 0): 2 + EPS, ("y", 1, 0): 3 + EPS, ("y", 0, 1): -(2 + EPS),
                                 ("y", 1, 1): -(3 + EPS)}], 0.0, INF)
    assert holds(m, "symmetry", {("y", 1, 0): 1, ("y", 0, 1): 1})
    assert not holds(m, "symmetry", {("y", 0, 0): 1, ("y", 1, 1): 1})


# ---- reduced slots (certified pipeline) ----------------------------------------------------------
# P1 with the kept cells (queue, group, slot): k0 = (0,0,0), k1 = (0,0,1), k2 = (0,1,0) — g1 cannot sit in
# slot 1.  Slots (0,0) → s0, (0,1) → s1.  Plan "g0 then g1": x = (0, 1, 1) (g0 in slot 1, g1 in slot 0).
CELLS = np.array([[0, 0, 0], [0, 0, 1], [0, 1, 0]])
REDUCED_PLAN = {("x", 1): 1, ("x", 2): 1, ("occ", 0): 1, ("occ", 1): 1, ("t", 0): 1, ("t", 1): 0,
                ("wt", 0): 12.5, ("wt", 1): 0.5}


def reduced():
    return build_reduced_slots(make(), CELLS).model


def test_reduced_assignment_and_objective():
    """Eq. 6 on kept cells, ``group_once``: ``Σ_{(g,r) kept} x[g,i,r] = 1``; objective (Eq. 13)
    ``(W·r + busy + C)`` per cell: k0 = 0 + 0.5 + 3, k1 = 2 + 0.5 + 3, k2 = 0 + 0.5 + 4.5; t costs S·(r+1)."""
    m = reduced()
    assert_rows(m, "group_once", [{("x", 0): 1, ("x", 1): 1}, {("x", 2): 1}], 1.0, 1.0)
    assert holds(m, "group_once", REDUCED_PLAN)
    assert not holds(m, "group_once", {("x", 1): 1})
    np.testing.assert_allclose(m.cost[:3], [3.5, 5.5, 5.0])
    assert m.max_violation(point(m, REDUCED_PLAN)) <= 1e-9
    assert float(m.cost @ point(m, REDUCED_PLAN) + m.offset) == pytest.approx(-29.5)  # as the full slots model


def test_reduced_occupancy_and_padding():
    """Eq. 6 with padding: ``occ[g,r] = Σ_i x[g,i,r]`` over kept cells and ``occ[g,r] ≥ occ[g,r+1]``."""
    m = reduced()
    assert_rows(m, "slot_occupancy", [{("occ", 0): 1, ("x", 0): -1, ("x", 2): -1}, {("occ", 1): 1, ("x", 1): -1}],
                0.0, 0.0)
    assert_rows(m, "padding_order", [{("occ", 0): 1, ("occ", 1): -1}], 0.0, INF)
    assert holds(m, "slot_occupancy", REDUCED_PLAN) and holds(m, "padding_order", REDUCED_PLAN)
    assert not holds(m, "slot_occupancy", {("x", 0): 1, ("x", 2): 1, ("occ", 0): 1})
    assert not holds(m, "padding_order", {("occ", 1): 1})


def test_reduced_model_switch():
    """Corrected Eqs. 7/9 on kept cells: one row per (slot, model with a kept cell there),
    ``t[g,r] ≥ u[g,r,μ] − u[g,r+1,μ] − [μ = loaded_g]·(1 − occ[g,r+1])``."""
    m = reduced()
    # (s0, A): t0 − x0 + x1 − occ1 ≥ −1;  (s0, B): t0 − x2 ≥ 0 (no B cell in slot 1);  (s1, A): t1 − x1 ≥ −1
    assert_rows(m, "model_switch", [{("t", 0): 1, ("x", 0): -1, ("x", 1): 1, ("occ", 1): -1},
                                    {("t", 0): 1, ("x", 2): -1},
                                    {("t", 1): 1, ("x", 1): -1}], [-1, 0, -1], INF)
    assert holds(m, "model_switch", REDUCED_PLAN)
    assert not holds(m, "model_switch", {**REDUCED_PLAN, ("t", 0): 0})


def test_reduced_cumulative_wait():
    """Corrected Eq. 10 on kept cells:
    ``wt[g,r] = wt[g,r+1] + Σ_i W[g,i]·x[g,i,r+1] + S_g·t[g,r] + busy_g·(occ[g,r] − occ[g,r+1])``."""
    m = reduced()
    assert_rows(m, "cumulative_wait", [
        {("wt", 0): 1, ("t", 0): -10, ("occ", 0): -0.5, ("wt", 1): -1, ("occ", 1): 0.5, ("x", 1): -2},
        {("wt", 1): 1, ("t", 1): -10, ("occ", 1): -0.5},
    ], 0.0, 0.0)
    assert holds(m, "cumulative_wait", REDUCED_PLAN)
    assert not holds(m, "cumulative_wait", {**REDUCED_PLAN, ("wt", 0): 2.5})


def test_reduced_deadlines():
    """Eqs. 11–12 on kept cells: ``wt[g,r] + Σ_i (C[g,i] − slo_i)·x[g,i,r] ≤ 0``."""
    m = reduced()
    assert_rows(m, "deadline", [{("wt", 0): 1, ("x", 0): -17.0, ("x", 2): -25.5}, {("wt", 1): 1, ("x", 1): -17.0}],
                -INF, 0.0)
    assert holds(m, "deadline", REDUCED_PLAN)
    assert not holds(m, "deadline", {**REDUCED_PLAN, ("wt", 0): 26.0})


def test_reduced_swap_count():
    """Valid cut: ``Σ_r (r+1)·t[g,r] ≥ Σ_{i: model_i ≠ loaded_g} Σ_r x[g,i,r]`` per queue: t0 + 2·t1 − x2 ≥ 0."""
    m = reduced()
    assert_rows(m, "swap_count", [{("t", 0): 1, ("t", 1): 2, ("x", 2): -1}], 0.0, INF)
    assert holds(m, "swap_count", REDUCED_PLAN)
    assert not holds(m, "swap_count", {("x", 2): 1})  # a foreign group with no swap at or above its slot
    # nothing loaded: every group is foreign
    m = build_reduced_slots(make(loaded=None), CELLS).model
    assert_rows(m, "swap_count", [{("t", 0): 1, ("t", 1): 2, ("x", 0): -1, ("x", 1): -1, ("x", 2): -1}], 0.0, INF)


def test_reduced_symmetry():
    """Interchangeable queues a, b: ``Σ (W+ε)·x on a − Σ (W+ε)·x on b ≥ 0`` over kept cells."""
    cells = np.array([[0, 0, 0], [0, 1, 0], [1, 0, 0], [1, 1, 1]])
    m = build_reduced_slots(make(queues=2, loaded=None, busy=0.0), cells).model
    assert_rows(m, "symmetry", [{("x", 0): 2 + EPS, ("x", 1): 3 + EPS, ("x", 2): -(2 + EPS), ("x", 3): -(3 + EPS)}],
                0.0, INF)
    assert holds(m, "symmetry", {("x", 1): 1, ("x", 2): 1})
    assert not holds(m, "symmetry", {("x", 0): 1, ("x", 3): 1})


# ---- scale-up capacity bound ---------------------------------------------------------------------

def test_swap_capacity_rows():
    """Capacity bound swap rows (docs/formulations.md §4.5): ``y^d_{g,i} ≤ z^d_g`` for groups of another
    model than the loaded one, and ``Σ_{i∈D(d)} W[g,i]·y^d_{g,i} + S_g·z^d_g ≤ cap_g(d)``."""
    mb = ModelBuilder("hand")
    y = mb.add_variables("share", 3, lower=0.0, upper=1.0)
    # groups 1 and 2 are of another model (swap 10), group 0 of the loaded one; W = (2, 3, 4), cap = 15
    define_swap_capacity(mb, "d30_q0", y.columns, np.array([2.0, 3.0, 4.0]), np.array([0.0, 10.0, 10.0]), 15.0)
    m = mb.build()
    assert_rows(m, "swap_link_d30_q0", [{("share", 1): 1, ("swap_d30_q0", 0): -1},
                                        {("share", 2): 1, ("swap_d30_q0", 0): -1}], -INF, 0.0)
    assert_rows(m, "capacity_swap_d30_q0",
                [{("share", 0): 2, ("share", 1): 3, ("share", 2): 4, ("swap_d30_q0", 0): 10}], -INF, 15.0)
    assert m.integrality[next(b for b in m.var_blocks if b.name == "swap_d30_q0").start]
    # groups 0 and 1 whole: 2 + 3 + 10 (swap) = 15 ≤ 15; without z the link rows reject the share of group 1
    assert holds(m, "capacity_swap_d30_q0", {("share", 0): 1, ("share", 1): 1, ("swap_d30_q0", 0): 1})
    assert not holds(m, "swap_link_d30_q0", {("share", 0): 1, ("share", 1): 1})
    # groups 1 and 2 whole: 3 + 4 + 10 = 17 > 15
    assert not holds(m, "capacity_swap_d30_q0", {("share", 1): 1, ("share", 2): 1, ("swap_d30_q0", 0): 1})
    # no group of another model: no swap variable and no rows
    mb = ModelBuilder("hand")
    y = mb.add_variables("share", 2, lower=0.0, upper=1.0)
    define_swap_capacity(mb, "d30_q0", y.columns, np.array([2.0, 3.0]), np.zeros(2), 15.0)
    m = mb.build()
    assert m.row_blocks == () and [b.name for b in m.var_blocks] == ["share"]


def test_swap_capacity_rows_in_the_capacity_bound():
    """The capacity bound built on P1 (``start`` deadlines) uses the swap rows where the module docstring says:
    thresholds d = 20 (D = {g0}, of the loaded model A: no swap rows) and d = 30 (D = {g0, g1}; g1 of model B),
    ``cap_q0(30) = d − e_g + max W = 30 − 0.5 + 3 = 32.5``, so ``2·y0 + 3·y1 + 10·z ≤ 32.5`` and ``y1 ≤ z``."""
    m, _ = _bound_model(make(deadline="start"))
    swap_rows = [b.name for b in m.row_blocks if b.name.startswith(("swap_link", "capacity_swap"))]
    assert swap_rows == ["swap_link_d30_q0", "capacity_swap_d30_q0"]
    assert_rows(m, "capacity_swap_d30_q0", [{("share_d30", 0): 2.0, ("share_d30", 1): 3.0, ("swap_d30_q0", 0): 10.0}],
                -INF, 32.5)
    assert_rows(m, "swap_link_d30_q0", [{("share_d30", 1): 1.0, ("swap_d30_q0", 0): -1.0}], -INF, 0.0)


def test_late_groups_milp_proves_its_optimum_when_a_deadline_has_passed():
    """End to end: groups with SLOs −100 s (deadline passed) and 50 s on one queue, late-groups objective: the
    first is late whatever the plan, the second can be on time, so the MILP proves 1 late group (with M too
    small it was infeasible, and only a baseline plan came back, unproven)."""
    from planner.core.contract import RunOptions
    from planner.queueing.harness import HARNESS

    result = HARNESS.run(make(slos=(-100.0, 50.0), objective="late_groups"), "milp", RunOptions(time_limit=30))
    assert result.status.value == "optimal", result.message
    assert result.objective == pytest.approx(1.0) and result.bound == pytest.approx(1.0)
    assert result.validation is not None and result.validation.feasible
