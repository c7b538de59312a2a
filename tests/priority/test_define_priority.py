"""Every constraint family (`define_*`) of the priority Dinkelbach MILP (`planner/priority/formulation.py`,
docs/formulations.md §2.5; equation numbers of Huang, Xiong et al., *SLO-Aware Scheduling for Large Language
Model Inferences*, SC'25) checked on a hand-solved tiny case.

The case: N = 3 jobs, b_max = 2, so the batch arcs a = (s, b) (positions s..s+b−1) are, in the order the
model numbers them,

    a0 = (0,1)   a1 = (0,2)   a2 = (1,1)   a3 = (1,2)   a4 = (2,1).

Each test calls one ``define_*`` on a builder holding the variables of `MilpLayout`
(``used y[a]``, ``member x[i,a]``, ``duration W[a]``, ``success z[i,a]``, ``start S[s]``), finds the
row block by name and compares it with the matrix and bounds written out by hand from the docstring
equation; where it says something about plans, a hand-built point that satisfies the equation is
accepted and one that breaks it is rejected.  The last test builds the whole model through
`build_parametric_model` and checks a hand-computed plan and its objective.
"""

from __future__ import annotations

import numpy as np
import pytest

from support.rows import assert_rows, dense, holds, point, rows_of

from planner.priority.formulation import (
    MilpLayout,
    build_parametric_model,
    define_assignment,
    define_batch_duration,
    define_batch_fill,
    define_path_flow,
    define_slo_indicators,
    define_start_lower_bound,
    define_start_times,
    define_token_capacity,
    start_lower_bounds_s,
)
from planner.priority.problem import PriorityJob, PriorityProblem
from planner.solver import ModelBuilder

INF = float("inf")
JOBS = 3
ARCS = ((0, 1), (0, 2), (1, 1), (1, 2), (2, 1))
# exec_i(b) in seconds, job i by batch size b = 1, 2
EXEC = np.array([[1.0, 1.5], [2.0, 2.5], [4.0, 5.0]])


# ---- helpers -------------------------------------------------------------------------------------

def builder() -> tuple[ModelBuilder, MilpLayout]:
    mb = ModelBuilder("hand", "max")
    used = mb.add_binaries("used", len(ARCS))
    member = mb.add_binaries("member", (JOBS, len(ARCS)))
    duration = mb.add_variables("duration", len(ARCS))
    success = mb.add_variables("success", (JOBS, len(ARCS)), upper=1.0, integer=True)
    start = mb.add_variables("start", JOBS)
    return mb, MilpLayout(arcs=ARCS, used=used, member=member, duration=duration, start=start, success=success)


# Plan P: job 2 alone at position 0 (arc a0), jobs 0 and 1 together at positions 1–2 (arc a3).
# W[a0] = exec_2(1) = 4; W[a3] = max(exec_0(2), exec_1(2)) = max(1.5, 2.5) = 2.5; S = (0, 4, 4).
PLAN_P = {("used", 0): 1, ("used", 3): 1, ("member", 2, 0): 1, ("member", 0, 3): 1, ("member", 1, 3): 1,
          ("duration", 0): 4.0, ("duration", 3): 2.5, ("start", 0): 0.0, ("start", 1): 4.0, ("start", 2): 4.0}


# ---- one test per define_* ------------------------------------------------------------------------

def test_path_flow_tiles_positions():
    """Eq. 10 (batches are contiguous segments): ``Σ_{a=(s,·)} y[a] − Σ_{a ending at s} y[a] = [s = 0]``, s < N."""
    mb, lay = builder()
    define_path_flow(mb, lay, JOBS)
    m = mb.build()
    # s=0: leaving a0, a1; nothing ends at 0               → y0 + y1 = 1
    # s=1: leaving a2, a3; a0 = (0,1) ends at 1           → y2 + y3 − y0 = 0
    # s=2: leaving a4; a1 = (0,2) and a2 = (1,1) end at 2 → y4 − y1 − y2 = 0  (a3, a4 end at N: no row)
    assert_rows(m, "path_flow", [
        {("used", 0): 1, ("used", 1): 1},
        {("used", 2): 1, ("used", 3): 1, ("used", 0): -1},
        {("used", 4): 1, ("used", 1): -1, ("used", 2): -1},
    ], [1, 0, 0], [1, 0, 0])
    assert holds(m, "path_flow", PLAN_P)
    assert not holds(m, "path_flow", {("used", 0): 1, ("used", 2): 1})  # positions 0 and 1 only: position 2 uncovered
    # a1 and a2 overlap at position 1
    assert not holds(m, "path_flow", {("used", 1): 1, ("used", 2): 1, ("used", 4): 1})


def test_batch_fill_counts_jobs_per_batch():
    """Eq. 10 (batch sizes): ``Σ_i x[i,a] = b·y[a]``."""
    mb, lay = builder()
    define_batch_fill(mb, lay, JOBS)
    m = mb.build()
    rows = [{**{("member", i, a): 1.0 for i in range(JOBS)}, ("used", a): -float(b)} for a, (_, b) in enumerate(ARCS)]
    assert_rows(m, "batch_fill", rows, 0.0, 0.0)
    assert holds(m, "batch_fill", PLAN_P)
    assert not holds(m, "batch_fill", {**PLAN_P, ("member", 1, 3): 0})  # a used size-2 batch with one job


def test_assignment_puts_every_job_in_one_batch():
    """Eq. 12 (g(i,k): each job in one batch): ``Σ_a x[i,a] = 1``."""
    mb, lay = builder()
    define_assignment(mb, lay, JOBS)
    m = mb.build()
    rows = [{("member", i, a): 1.0 for a in range(len(ARCS))} for i in range(JOBS)]
    assert_rows(m, "assignment", rows, 1.0, 1.0)
    assert holds(m, "assignment", PLAN_P)
    assert not holds(m, "assignment", {**PLAN_P, ("member", 2, 4): 1})  # job 2 in two batches


def test_batch_duration_max_mean_min():
    """Eq. 11 (a batch lasts as long as its longest job): ``W[a] ≥ exec_i(b)·x[i,a]``, plus the valid
    aggregates ``b·W[a] ≥ Σ_i exec_i(b)·x[i,a]`` and ``W[a] ≥ min_i exec_i(b)·y[a]``."""
    mb, lay = builder()
    define_batch_duration(mb, lay, EXEC)
    m = mb.build()
    # max: one row per (a, i), in that order, ≥ 0
    rows = [{("duration", a): 1.0, ("member", i, a): -EXEC[i, b - 1]}
            for a, (_, b) in enumerate(ARCS) for i in range(JOBS)]
    assert_rows(m, "batch_duration_max", rows, 0.0, INF)
    # mean: b·W[a] − Σ_i exec_i(b)·x[i,a] ≥ 0; b = 1 column (1, 2, 4), b = 2 column (1.5, 2.5, 5)
    rows = [{("duration", a): float(b), **{("member", i, a): -EXEC[i, b - 1] for i in range(JOBS)}}
            for a, (_, b) in enumerate(ARCS)]
    assert_rows(m, "batch_duration_mean", rows, 0.0, INF)
    # min: W[a] − m_b·y[a] ≥ 0 with m_1 = min(1, 2, 4) = 1 and m_2 = min(1.5, 2.5, 5) = 1.5
    mins = {1: 1.0, 2: 1.5}
    rows = [{("duration", a): 1.0, ("used", a): -mins[b]} for a, (_, b) in enumerate(ARCS)]
    assert_rows(m, "batch_duration_min", rows, 0.0, INF)
    for name in ("batch_duration_max", "batch_duration_mean", "batch_duration_min"):
        assert holds(m, name, PLAN_P), name
    # W[a3] = 2.4 is shorter than job 1's 2.5 s at b = 2: the max rows reject it; the mean row
    # (2·2.4 = 4.8 ≥ 1.5 + 2.5 = 4) and the min row (2.4 ≥ 1.5) do not — they are only valid relaxations.
    short = {**PLAN_P, ("duration", 3): 2.4}
    assert not holds(m, "batch_duration_max", short)
    assert holds(m, "batch_duration_mean", short) and holds(m, "batch_duration_min", short)
    # W[a3] = 1.9: 2·1.9 = 3.8 < 4, the mean row rejects it too
    assert not holds(m, "batch_duration_mean", {**PLAN_P, ("duration", 3): 1.9})
    # a used arc a4 (size 1) with W = 0.5 < m_1 = 1 breaks the min row
    assert not holds(m, "batch_duration_min", {("used", 4): 1, ("duration", 4): 0.5})


def test_start_times_running_sum():
    """Eq. 11 (waiting = Σ earlier batch durations) as a running sum:
    ``S[s] = S[s−1] + Σ_{a ending at s} W[a]``, 0 < s < N."""
    mb, lay = builder()
    define_start_times(mb, lay, JOBS)
    m = mb.build()
    # s=1: a0 = (0,1) ends at 1                     → S1 − S0 − W0 = 0
    # s=2: a1 = (0,2) and a2 = (1,1) end at 2       → S2 − S1 − W1 − W2 = 0
    assert_rows(m, "start_time_chain", [
        {("start", 1): 1, ("start", 0): -1, ("duration", 0): -1},
        {("start", 2): 1, ("start", 1): -1, ("duration", 1): -1, ("duration", 2): -1},
    ], 0.0, 0.0)
    assert holds(m, "start_time_chain", PLAN_P)
    assert not holds(m, "start_time_chain", {**PLAN_P, ("start", 1): 3.0})  # job 2's 4 s batch runs before position 1
    # plan {0,1} then {2}: W[a1] = 2.5, S = (0, 0, 2.5)
    assert holds(m, "start_time_chain", {("duration", 1): 2.5, ("start", 2): 2.5})
    assert not holds(m, "start_time_chain", {("duration", 1): 2.5, ("start", 2): 0.0})


def test_start_lower_bound():
    """Valid start-time bound: ``S[s] ≥ L[s]·Σ_{a=(s,·)} y[a]``, 0 < s < N."""
    mb, lay = builder()
    bounds = np.array([0.0, 1.0, 2.5])
    define_start_lower_bound(mb, lay, bounds, JOBS)
    m = mb.build()
    # s=1: arcs leaving 1 are a2, a3 → S1 − 1·y2 − 1·y3 ≥ 0;  s=2: a4 → S2 − 2.5·y4 ≥ 0
    assert_rows(m, "start_lower_bound", [
        {("start", 1): 1, ("used", 2): -1.0, ("used", 3): -1.0},
        {("start", 2): 1, ("used", 4): -2.5},
    ], 0.0, INF)
    assert holds(m, "start_lower_bound", PLAN_P)
    assert not holds(m, "start_lower_bound", {("used", 4): 1, ("start", 2): 2.0})
    assert holds(m, "start_lower_bound", {("used", 4): 0, ("start", 2): 2.0})  # no batch starts at 2: no bound


def test_slo_indicators_rows_and_dropped_rows():
    """Eqs. 6–9 (SLO indicators): ``z[i,a] ≤ x[i,a]`` and, per job i and start s > 0,
    ``S[s] + Σ_b M_ib·z[i,(s,b)] ≤ S̄_s`` with ``M_ib = max(0, S̄_s − slack_i(b))``; entries with M ≤ 0 or
    M infinite (TPOT fails) are left out, and rows with no entry are dropped."""
    mb, lay = builder()
    slack = np.array([[10.0, 10.0],   # job 0 always meets its SLO: M < 0 everywhere, no rows
                      [3.0, 2.0],
                      [-INF, 4.0]])   # job 2 fails TPOT at b = 1
    upper = np.array([0.0, 5.0, 9.0, 12.0])  # S̄_s
    define_slo_indicators(mb, lay, slack, upper)
    m = mb.build()
    rows = [{("success", i, a): 1.0, ("member", i, a): -1.0} for i in range(JOBS) for a in range(len(ARCS))]
    assert_rows(m, "success_in_batch", rows, -INF, 0.0)
    # s=1 (arcs a2 = (1,1), a3 = (1,2)), S̄_1 = 5:
    #   job 0: 5 − 10 < 0 twice → dropped
    #   job 1: M = 5 − 3 = 2 on a2, 5 − 2 = 3 on a3     → S1 + 2 z[1,a2] + 3 z[1,a3] ≤ 5
    #   job 2: slack −∞ on a2 (left out), 5 − 4 = 1 on a3 → S1 + 1 z[2,a3] ≤ 5
    # s=2 (arc a4 = (2,1)), S̄_2 = 9:
    #   job 0: dropped; job 1: M = 9 − 3 = 6 → S2 + 6 z[1,a4] ≤ 9; job 2: slack −∞ → dropped
    assert_rows(m, "slo_deadline", [
        {("start", 1): 1, ("success", 1, 2): 2.0, ("success", 1, 3): 3.0},
        {("start", 1): 1, ("success", 2, 3): 1.0},
        {("start", 2): 1, ("success", 1, 4): 6.0},
    ], -INF, [5.0, 5.0, 9.0])
    # Plan P puts job 1 in a3 starting at S1 = 4 > slack_1(2) = 2: counting it as met is rejected
    assert holds(m, "slo_deadline", {**PLAN_P, ("success", 1, 3): 0})
    assert not holds(m, "slo_deadline", {**PLAN_P, ("success", 1, 3): 1})
    # starting exactly at the slack (S1 = 2) it meets: 2 + 3 = 5 ≤ 5
    assert holds(m, "slo_deadline", {("start", 1): 2.0, ("success", 1, 3): 1})
    # z without the job in the batch breaks z ≤ x
    assert not holds(m, "success_in_batch", {("success", 0, 1): 1})
    assert holds(m, "success_in_batch", {("success", 0, 1): 1, ("member", 0, 1): 1})


def test_token_capacity():
    """Eq. 20 [R] (token capacity per batch): ``Σ_i tokens_i·x[i,a] ≤ capacity·y[a]``."""
    mb, lay = builder()
    tokens = np.array([3, 4, 5])
    define_token_capacity(mb, lay, tokens, 8)
    m = mb.build()
    rows = [{("member", 0, a): 3.0, ("member", 1, a): 4.0, ("member", 2, a): 5.0, ("used", a): -8.0}
            for a in range(len(ARCS))]
    assert_rows(m, "token_capacity", rows, -INF, 0.0)
    assert holds(m, "token_capacity", {("used", 1): 1, ("member", 0, 1): 1, ("member", 2, 1): 1})  # 3 + 5 = 8 ≤ 8
    assert not holds(m, "token_capacity", {("used", 1): 1, ("member", 1, 1): 1, ("member", 2, 1): 1})  # 4 + 5 = 9 > 8
    assert not holds(m, "token_capacity", {("member", 0, 2): 1})  # a job in an unused batch


def test_parametric_model_accepts_a_hand_plan_with_its_objective():
    """The whole model of `build_parametric_model` (docs/formulations.md §2.5, objective
    ``max Σ z − λ·(Σ_a (N − s − b)·W[a] + Σ_{i,a} exec_i(b)·x[i,a])``) on three e2e jobs, λ = 0.1 req/s.

    Plan P (job 2 alone, then jobs 0 and 1): job 2 ends at 4 ≤ 4.5 s (met); jobs 0, 1 start at 4 and
    end at 5.5 ≤ 10 (met) and 6.5 > 5 (missed): n = 2, t = 4 + 5.5 + 6.5 = 16 s, objective 2 − 0.1·16 = 0.4.
    In the model: arc a0 has N − s − b = 2 jobs behind it: 2·4 = 8; own executions 4 + 1.5 + 2.5 = 8."""
    jobs = tuple(PriorityJob(name=f"j{i}", kind="e2e", input_tokens=10, output_tokens=10, slo_e2e_ms=slo,
                             exec_ms=tuple(1000.0 * EXEC[i]))
                 for i, slo in enumerate((10_000.0, 5_000.0, 4_500.0)))
    problem = PriorityProblem(name="hand", jobs=jobs, b_max=2)
    model, layout = build_parametric_model(problem, 0.1)
    assert layout.arcs == ARCS
    assert model.families == ("path_flow", "batch_fill", "assignment", "batch_duration_max", "batch_duration_mean",
                              "batch_duration_min", "start_time_chain", "start_lower_bound", "success_in_batch",
                              "slo_deadline")
    met = {("success", 2, 0): 1, ("success", 0, 3): 1}
    x = point(model, {**PLAN_P, **met})
    assert model.max_violation(x) <= 1e-9
    assert float(model.cost @ x + model.offset) == pytest.approx(0.4)
    # job 1 (slack 5 − 2.5 = 2.5 s at b = 2) cannot be counted as met when its batch starts at 4 s
    assert model.max_violation(point(model, {**PLAN_P, **met, ("success", 1, 3): 1})) > 1e-6
    # with a token capacity the Eq. 20 rows are added
    capped = PriorityProblem(name="hand", jobs=jobs, b_max=2, token_capacity=40)
    assert "token_capacity" in build_parametric_model(capped, 0.1)[0].families


def test_parametric_model_bounds_behind_the_rows():
    """The column bounds `define_slo_indicators` and `define_start_lower_bound` rely on (docs/formulations.md §2.5):
    ``L[s]`` (no s jobs finish before it), ``S̄_s`` (the s longest executions in a row) and z fixed to 0
    where the SLO can never be met: slack_i(b) below the L of the *other* jobs at the arc's start.

    Minimal executions (1, 2, 4) s, b_max = 2: L = (0, 1, 2, 4 + 1) — the s shortest, cut from the top
    into batches of 2 (s = 3: batches {4, 2}, {1} → 4 + 1).  Largest executions (1.5, 2.5, 5):
    S̄ = (0, 5, 7.5, 9), so S ≤ (0, 5, 7.5).  Slacks (SLO − exec): job 0 (9, 8.5), job 1 (3, 2.5),
    job 2 (0.5, −0.5); L without job 1 = (0, 1, 4) (s = 2: {2, 4} in one batch), without job 2 = (0, 1, 2)."""
    np.testing.assert_allclose(start_lower_bounds_s(np.array([4.0, 1.0, 2.0]), 2), [0.0, 1.0, 2.0, 5.0])
    np.testing.assert_allclose(start_lower_bounds_s(np.array([4.0, 1.0, 2.0]), 1), [0.0, 1.0, 3.0, 7.0])
    jobs = tuple(PriorityJob(name=f"j{i}", kind="e2e", input_tokens=10, output_tokens=10, slo_e2e_ms=slo,
                             exec_ms=tuple(1000.0 * EXEC[i]))
                 for i, slo in enumerate((10_000.0, 5_000.0, 4_500.0)))
    model, layout = build_parametric_model(PriorityProblem(name="hand", jobs=jobs, b_max=2), 0.1)
    blk = layout.start
    np.testing.assert_allclose(model.col_upper[blk.start:blk.start + blk.size], [0.0, 5.0, 7.5])
    blk = layout.success
    # arcs a0..a4 = (0,1) (0,2) (1,1) (1,2) (2,1):
    #   job 1 at a4 = (2,1): slack 3 < L^{-1}[2] = 4 → 0
    #   job 2: only a0 (slack 0.5 ≥ 0); b = 2 has slack −0.5 < 0; s ≥ 1 needs slack ≥ 1 (or 2)
    np.testing.assert_array_equal(model.col_upper[blk.start:blk.start + blk.size].reshape(3, 5),
                                  [[1, 1, 1, 1, 1], [1, 1, 1, 1, 0], [1, 0, 0, 0, 0]])
    # the slo_deadline rows use S̄: job 1 at position 1 (a2, a3): M = 5 − 3 = 2 and 5 − 2.5 = 2.5, bound 5
    a, _, up = rows_of(model, "slo_deadline")
    row = dense(model, [{("start", 1): 1, ("success", 1, 2): 2.0, ("success", 1, 3): 2.5}])[0]
    hits = [k for k in range(a.shape[0]) if np.allclose(a[k], row, atol=1e-9)]
    assert len(hits) == 1 and up[hits[0]] == pytest.approx(5.0)
