"""The parametric MILP of one trial ratio λ (Dinkelbach), docs/formulations.md §2: variables, the constraint
families (`define_*`) and the decoding of a solution.  The loop over λ is `planner.priority.milp`.

Model (one MILP per λ).  Positions 0..N of the priority order; a batch is an arc ``a = (s, b)``
covering positions s..s+b−1 (1 ≤ b ≤ b_max).  Variables: ``y[a]`` (batch used), ``x[i,a]`` (job i
in it), ``W[a]`` (its duration, s), ``z[i,a]`` (job i meets its SLO in it).  With
``S_s = Σ_{a'=(s',b'): s'+b' ≤ s} W[a']`` the batch start time, the objective is linear:

    max Σ z − λ·( Σ_a (N − s − b)·W[a] + Σ_{i,a} exec_i(b)·x[i,a] )

because the N − s − b jobs after batch a each wait W[a] (Eq. 11) and every job adds its own
execution time (Eq. 4).  Unused batches have W = 0 at the optimum of every λ ≥ 0 (W only hurts).
No symmetry breaking on the order of batches is imposed: with SLO indicators neither a size order
nor a shortest-first order between batches is optimal in general (Fig. 3 of the paper is a
counter-example to shortest-first), so none is assumed.  The start times are a running sum
``S[s] = S[s−1] + Σ_{a ending at s} W[a]`` (`define_start_times`), so each SLO row has 2–5 entries;
at N = 30 (seed 0) the matrix has 15,460 nonzeros at b_max = 2 and 29,014 at b_max = 4, against
63,980 and 198,500 when every SLO row summed the earlier arcs' W.  At N = 30 HiGHS still explores
only a few nodes within 60 s (root LP bound 2.28 jobs, 1.85 after cuts), so there it gives bounds,
not proofs; the branch-and-bound with the Lagrangian bound (`planner.priority.lagrangian`) ends with
smaller gaps and is what ``--formulation auto`` runs; this model is ``milp`` / ``hybrid``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from planner.priority.problem import SUCCESS_TOLERANCE_MS, PriorityProblem
from planner.solver import LinearModel, ModelBuilder, VarBlock


@dataclass(frozen=True)
class MilpLayout:
    """Where each variable family sits in the model, plus the per-arc data."""

    arcs: tuple[tuple[int, int], ...]  # (start position s, size b)
    used: VarBlock  # y[a]
    member: VarBlock  # x[i, a]
    duration: VarBlock  # W[a], seconds
    start: VarBlock  # S[s], seconds: start time of (the batch holding) position s
    success: VarBlock | None  # z[i, a]; None in the t-only model


def start_lower_bounds_s(mins_s: np.ndarray, b_max: int) -> np.ndarray:
    """``L[s]``: no set of s jobs finishes before L[s] seconds.  The s jobs with the shortest
    minimal execution times, cut from the top into batches of b_max, give batch maxima of at
    least m_(s), m_(s−b_max), … (1-based ranks of the ascending minima)."""
    ordered = np.sort(mins_s)
    bounds = np.zeros(ordered.size + 1)
    for s in range(1, ordered.size + 1):
        bounds[s] = ordered[s - 1::-b_max].sum()
    return bounds


def define_path_flow(builder: ModelBuilder, layout: MilpLayout, jobs: int) -> None:
    """Eq. 10 (batches are contiguous segments of the order): batches tile positions 0..N: ``Σ_{a=(s,·)} y[a] − Σ_{a=(s',b'): s'+b'=s} y[a] = [s = 0]`` for s < N."""
    rows, cols, vals = [], [], []
    for a, (start, size) in enumerate(layout.arcs):
        rows.append(start), cols.append(layout.used.col(a)), vals.append(1.0)
        if start + size < jobs:
            rows.append(start + size), cols.append(layout.used.col(a)), vals.append(-1.0)
    rhs = np.zeros(jobs)
    rhs[0] = 1.0
    builder.add_constraints("path_flow", jobs, np.array(rows), np.array(cols), np.array(vals), lower=rhs, upper=rhs,
                            label=lambda r: f"position {r}")


def define_batch_fill(builder: ModelBuilder, layout: MilpLayout, jobs: int) -> None:
    """Eq. 10 (batch sizes): a used batch of size b holds b jobs: ``Σ_i x[i,a] = b·y[a]``."""
    rows, cols, vals = [], [], []
    for a, (_, size) in enumerate(layout.arcs):
        rows += [a] * (jobs + 1)
        cols += [layout.member.col(i, a) for i in range(jobs)] + [layout.used.col(a)]
        vals += [1.0] * jobs + [-float(size)]
    builder.add_constraints("batch_fill", len(layout.arcs), np.array(rows), np.array(cols), np.array(vals),
                            lower=0.0, upper=0.0, label=lambda r: f"batch {layout.arcs[r]}")


def define_assignment(builder: ModelBuilder, layout: MilpLayout, jobs: int) -> None:
    """Eq. 12 (g(i,k): each job in one batch): every job is in exactly one batch: ``Σ_a x[i,a] = 1``."""
    arcs = len(layout.arcs)
    builder.add_constraints("assignment", jobs, np.repeat(np.arange(jobs), arcs), layout.member.columns,
                            np.ones(jobs * arcs), lower=1.0, upper=1.0, label=lambda r: f"job {r}")


def define_batch_duration(builder: ModelBuilder, layout: MilpLayout, exec_s: np.ndarray) -> None:
    """The batch lasts as long as its longest job (Eq. 11): ``W[a] ≥ exec_i(b)·x[i,a]`` for every i;
    plus the valid aggregates ``b·W[a] ≥ Σ_i exec_i(b)·x[i,a]`` (max ≥ mean) and
    ``W[a] ≥ min_i exec_i(b)·y[a]``, which tighten the LP relaxation."""
    jobs = exec_s.shape[0]
    rows, cols, vals = [], [], []
    r = 0
    for a, (_, size) in enumerate(layout.arcs):
        for i in range(jobs):
            rows += [r, r]
            cols += [layout.duration.col(a), layout.member.col(i, a)]
            vals += [1.0, -exec_s[i, size - 1]]
            r += 1
    builder.add_constraints("batch_duration_max", r, np.array(rows), np.array(cols), np.array(vals), lower=0.0,
                            label=lambda k: f"batch {layout.arcs[k // jobs]}, job {k % jobs}")
    rows, cols, vals = [], [], []
    for a, (_, size) in enumerate(layout.arcs):
        rows += [a] * (jobs + 1)
        cols += [layout.duration.col(a)] + [layout.member.col(i, a) for i in range(jobs)]
        vals += [float(size)] + (-exec_s[:, size - 1]).tolist()
    builder.add_constraints("batch_duration_mean", len(layout.arcs), np.array(rows), np.array(cols), np.array(vals),
                            lower=0.0, label=lambda k: f"batch {layout.arcs[k]}")
    rows, cols, vals = [], [], []
    for a, (_, size) in enumerate(layout.arcs):
        rows += [a, a]
        cols += [layout.duration.col(a), layout.used.col(a)]
        vals += [1.0, -float(exec_s[:, size - 1].min())]
    builder.add_constraints("batch_duration_min", len(layout.arcs), np.array(rows), np.array(cols), np.array(vals),
                            lower=0.0, label=lambda k: f"batch {layout.arcs[k]}")


def define_start_times(builder: ModelBuilder, layout: MilpLayout, jobs: int) -> None:
    """Start time of position s (of the batch holding it) as a running sum:
    ``S[s] = S[s−1] + Σ_{a=(s',b'): s'+b' = s} W[a]`` for 0 < s < N, and S[0] = 0 (column bound).
    Equivalent to ``S_s = Σ_{a: s'+b' ≤ s} W[a]`` but with O(b_max) entries per row instead of one
    per earlier arc, which keeps the SLO rows below at two or three entries each."""
    rows, cols, vals = [], [], []
    for position in range(1, jobs):
        rows += [position - 1, position - 1]
        cols += [layout.start.col(position), layout.start.col(position - 1)]
        vals += [1.0, -1.0]
    for a, (start, size) in enumerate(layout.arcs):
        if start + size < jobs:
            rows.append(start + size - 1), cols.append(layout.duration.col(a)), vals.append(-1.0)
    builder.add_constraints("start_time_chain", jobs - 1, np.array(rows), np.array(cols), np.array(vals), lower=0.0,
                            upper=0.0, label=lambda r: f"position {r + 1}")


def define_start_lower_bound(builder: ModelBuilder, layout: MilpLayout, start_bounds: np.ndarray, jobs: int) -> None:
    """If a batch starts at position s, the s jobs before it took at least L[s]:
    ``S[s] ≥ L[s]·Σ_{a=(s,·)} y[a]`` for 0 < s < N."""
    rows, cols, vals = [], [], []
    for position in range(1, jobs):
        rows.append(position - 1), cols.append(layout.start.col(position)), vals.append(1.0)
        for a, (start, size) in enumerate(layout.arcs):
            if start == position:
                rows.append(position - 1), cols.append(layout.used.col(a)), vals.append(-start_bounds[position])
    builder.add_constraints("start_lower_bound", jobs - 1, np.array(rows), np.array(cols), np.array(vals), lower=0.0,
                            label=lambda r: f"position {r + 1}")


def define_slo_indicators(builder: ModelBuilder, layout: MilpLayout, slack_s: np.ndarray,
                          start_upper_s: np.ndarray) -> None:
    """Eqs. 6–9: ``z[i,a] ≤ x[i,a]``, and per job i and start position s one deadline row over the
    arcs a = (s, b) leaving s: ``S[s] + Σ_b M_ib·z[i,(s,b)] ≤ S̄_s`` with ``M_ib = max(0, S̄_s − slack_i(b))``
    (S̄_s: the s longest executions in a row, an upper bound on S[s]).  With z[i,(s,b)] = 1 (at most
    one of them: job i is in one batch) the row reads S[s] ≤ slack_i(b); with all zero, S[s] ≤ S̄_s.
    One row per (i, s) implies the per-arc big-M rows and is tighter.  z is fixed to 0 (column
    bound) where the SLO can never be met (TPOT fails at b, or slack below L[s]); rows whose
    coefficients are all 0 are dropped (the SLO always holds there)."""
    jobs = slack_s.shape[0]
    arcs = len(layout.arcs)
    builder.add_constraints("success_in_batch", jobs * arcs, np.tile(np.arange(jobs * arcs), 2),
                            np.concatenate([layout.success.columns, layout.member.columns]),
                            np.concatenate([np.ones(jobs * arcs), -np.ones(jobs * arcs)]), upper=0.0,
                            label=lambda k: f"job {k // arcs}, batch {layout.arcs[k % arcs]}")
    leaving: dict[int, list[int]] = {}
    for a, (start, _) in enumerate(layout.arcs):
        leaving.setdefault(start, []).append(a)
    rows, cols, vals, upper, labels = [], [], [], [], []
    for start in range(1, jobs):
        for i in range(jobs):
            entries = []
            for a in leaving.get(start, []):
                big_m = start_upper_s[start] - slack_s[i, layout.arcs[a][1] - 1]
                if math.isfinite(big_m) and big_m > 0:
                    entries.append((layout.success.col(i, a), big_m))
            if not entries:
                continue
            r = len(upper)
            rows += [r] * (len(entries) + 1)
            cols += [layout.start.col(start)] + [c for c, _ in entries]
            vals += [1.0] + [m for _, m in entries]
            upper.append(start_upper_s[start])
            labels.append(f"job {i}, position {start}")
    builder.add_constraints("slo_deadline", len(upper), np.array(rows, dtype=np.int64), np.array(cols, dtype=np.int64),
                            np.array(vals), upper=np.array(upper), label=lambda r: labels[r])


def define_token_capacity(builder: ModelBuilder, layout: MilpLayout, tokens: np.ndarray, capacity: int) -> None:
    """Eq. 20 [R]: ``Σ_i tokens_i·x[i,a] ≤ capacity·y[a]``."""
    jobs = tokens.size
    rows, cols, vals = [], [], []
    for a in range(len(layout.arcs)):
        rows += [a] * (jobs + 1)
        cols += [layout.member.col(i, a) for i in range(jobs)] + [layout.used.col(a)]
        vals += tokens.astype(float).tolist() + [-float(capacity)]
    builder.add_constraints("token_capacity", len(layout.arcs), np.array(rows), np.array(cols), np.array(vals),
                            upper=0.0, label=lambda r: f"batch {layout.arcs[r]}")


def build_parametric_model(problem: PriorityProblem, ratio: float, count_slos: bool = True) -> tuple[LinearModel, MilpLayout]:
    """The MILP ``max n − ratio·t`` (t in seconds, ratio in req/s); with ``count_slos=False`` the
    SLO part is left out, so it is ``max −ratio·t`` (its bound gives a lower bound on t)."""
    tables = problem.tables
    jobs, b_max = problem.size, problem.b_max
    exec_s = tables.exec_ms / 1000.0
    slack_s = (tables.slack_ms + SUCCESS_TOLERANCE_MS) / 1000.0
    arcs = tuple((s, b) for s in range(jobs) for b in range(1, b_max + 1) if s + b <= jobs)
    start_bounds = start_lower_bounds_s(exec_s.min(axis=1), b_max)
    start_upper = np.concatenate(([0.0], np.cumsum(np.sort(exec_s.max(axis=1))[::-1])))
    others = [start_lower_bounds_s(np.delete(exec_s.min(axis=1), i), b_max) for i in range(jobs)]
    possible = np.zeros((jobs, len(arcs)))
    for a, (start, size) in enumerate(arcs):
        for i in range(jobs):
            possible[i, a] = 1.0 if slack_s[i, size - 1] >= others[i][start] else 0.0
    builder = ModelBuilder(f"{problem.name}-dinkelbach", sense="max")
    used = builder.add_binaries("used", len(arcs))
    member = builder.add_binaries("member", (jobs, len(arcs)),
                                  cost=-ratio * np.array([[exec_s[i, b - 1] for (_, b) in arcs] for i in range(jobs)]))
    duration = builder.add_variables("duration", len(arcs), lower=0.0,
                                     upper=np.array([exec_s[:, b - 1].max() for (_, b) in arcs]),
                                     cost=np.array([-ratio * (jobs - s - b) for (s, b) in arcs]))
    success = (builder.add_variables("success", (jobs, len(arcs)), lower=0.0, upper=possible, integer=True, cost=1.0)
               if count_slos else None)
    start = builder.add_variables("start", jobs, lower=0.0, upper=np.concatenate(([0.0], start_upper[1:jobs])))
    layout = MilpLayout(arcs=arcs, used=used, member=member, duration=duration, start=start, success=success)
    define_path_flow(builder, layout, jobs)
    define_batch_fill(builder, layout, jobs)
    define_assignment(builder, layout, jobs)
    define_batch_duration(builder, layout, exec_s)
    define_start_times(builder, layout, jobs)
    define_start_lower_bound(builder, layout, start_bounds, jobs)
    if count_slos:
        define_slo_indicators(builder, layout, slack_s, start_upper)
    if problem.token_capacity is not None:
        define_token_capacity(builder, layout, tables.tokens, problem.token_capacity)
    return builder.build(), layout


def decode_plan(problem: PriorityProblem, layout: MilpLayout, values: np.ndarray) -> tuple[list[int], list[int]]:
    """(order, batch sizes) of a MILP solution; jobs inside a batch in index order (their order
    inside a batch does not change n or t)."""
    used = layout.used.values(values)
    member = layout.member.values(values)
    order, sizes, position = [], [], 0
    while position < problem.size:
        a = next(a for a, (s, _) in enumerate(layout.arcs) if s == position and used[a] > 0.5)
        size = layout.arcs[a][1]
        order += [i for i in range(problem.size) if member[i, a] > 0.5]
        sizes.append(size)
        position += size
    return order, sizes
