"""Upper bound on F(λ) = max over plans of n − λ·t by a Lagrangian relaxation of a time-indexed DP.

Why.  At N = 30, b_max ≥ 2 neither the branch-and-bound's separate bounds (n_UB from Moore–Hodgson,
t_LB from the size-sequence bound) nor the LP of the Dinkelbach MILP (big-M SLO rows) come close to
proving the incumbent: the cost of meeting an SLO is latency, and only a relaxation that keeps both
in one object sees that trade-off.  This one keeps the batch sequence, the batch durations, the start
times and both objective terms exact, and relaxes only "every job runs exactly once".

The DP.  A plan is a sequence of batches; with P jobs placed before a batch of size b led by job l
(its longest member at size b, ties by index), the batch adds to t its members' own execution times
plus ``e_l(b)·(N − P − b)`` (every later job waits for it, Eq. 11), and a member j meets its SLO iff
the batch start S ≤ slack_j(b) (Eq. 7).  The state is (P, s) with ``s = ⌊S/Δ⌋`` kept as a lower
bound on the start (the next state is ``s + ⌊e_l(b)/Δ⌋``, never above the true start, so the SLO
test is optimistic — valid for an upper bound); from the bucket where no slack remains, s stops
growing (nothing can be met there, and t does not depend on S).  A relaxed plan is a path
(0, 0) → (N, ·) whose batches hold distinct jobs with the leader the longest, but a job may appear in
several batches or in none.  With multipliers μ_i on "job i is used once":

    L(μ) = Σ_i μ_i + max over relaxed paths Σ_batches Σ_{j∈batch} ([S ≤ slack_j(b)] − λ·e_j(b) − μ_j)
                                                    − λ·e_l(b)·(N − P − b)

and every real plan is a relaxed path using each job once, so ``L(μ) ≥ F(λ)`` for every μ.  The
best members of a batch given (b, l, s) do not depend on P: the b − 1 shortest-or-equal jobs with the
largest reward, precomputed per (b, l, s).  μ is improved by subgradient steps (g_i = 1 − uses of i).
The token capacity (Eq. 20) is ignored: a relaxation, still valid.

Measured (N = 30 benchmark instances, seed 0, λ = the warm start's G, BUCKETS = 2000, 300 steps):
L = 0.82 jobs at b_max = 2 (gap ≈ 3.8 % on G) and 1.19 at b_max = 4 (≈ 5.2 %); the Dinkelbach MILP
reached 1.75–1.9 and 4.1 in 40–45 s.  Finer buckets barely help (0.79 at 8,000, 0.93 at 500): what
is left is the relaxation itself (the best relaxed path uses some short jobs twice and skips others),
not the multipliers: column generation on the path formulation (whose LP this dual is) stalls at the
same ≈ 0.8 jobs (seed 0, b_max = 2).  Measured and not adopted (seed 0, b_max = 2, L = 0.81): re-tuning μ
for each child of the root (30 warm-started steps on the sub-instance of the jobs left, slacks lowered
by the child's start) lowers its bound to 0.75–0.80 and prunes 14 more of the 134 children the root
table keeps, at ~0.4 s per child; keeping 3 / 6 of the repeated jobs elementary in the state (2^k
masks) gives 0.79 / 0.76 at 8× / 100× the cost per step; fixing the SLO count (`count_bound`) leaves
the largest per-count value at L.  The same ≈ 0.6–0.9-job gap appears at N = 10–18 whenever the optimum
misses an SLO, so closing N = 30 within a minute needs a different relaxation (or branch-and-price),
not more steps.  Robust cuts on the arc variables x(i, s) (job i in a batch starting in bucket s; their
duals would only change arc prices) do not close it either — measured by column generation with DP
pricing and cut rounds at the root, λ = the best known G: the fractional optimum (seed 0, b_max = 2:
LP 0.80) meets 23.8 SLOs at the incumbent's latency (471 s vs 23 at 471 s) with paths that repeat whole
short batches back to back and skip others; SLO-cover cuts Σ_{i∈T} [credited] x ≤ k(T) are never
violated (k(T) = |T| by exact subset DP for every tight-SLO prefix T, and for the LP's 24 credited jobs
all 24 can meet), and "at most k_τ(T) distinct jobs of T start by τ" cuts (T = jobs above / below an
execution-time threshold, k_τ from the batched shortest-first bound in bucket arithmetic) move the LP
0.801 → 0.795 (seed 0), 0.507 → 0.507 (seed 1), 0.188 → 0.146 (seed 2) at b_max = 2 and
0.828 → 0.828 (seed 0) at b_max = 4.  The gap is the count–latency trade-off under non-elementary paths,
which robust cuts do not see.  Tested against complete enumeration (tests/priority/test_priority_lagrangian.py).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from planner.priority.problem import SUCCESS_TOLERANCE_MS, PriorityProblem

BUCKETS = 2000
"""Start-time buckets up to the largest slack; Δ = largest slack / BUCKETS."""
STEP_START = 2.0
"""Polyak step factor θ at the start; halved after STALL_STEPS steps without a better L(μ)."""
STALL_STEPS = 8


@dataclass(frozen=True)
class LagrangianBound:
    """The best L(μ) found, and for node bounds the DP table of that μ: for a node of the search with
    P jobs placed, next batch start W, n and t so far and remaining set R, every completion has
    ``n_total − λ·t_total ≤ n − λ·(t + |R|·W) + to_go[P, ⌊W/Δ⌋] + Σ_{i∈R} μ_i`` (the prefix's batches
    charged to the jobs after them, as in the DP; a completion is a relaxed path from (P, ⌊W/Δ⌋)
    using each job of R once)."""

    value: float  # an upper bound on F(λ) = max n − λ·t (jobs), λ per ms
    iterations: int
    lam: float  # the λ (per ms) of the bound
    step: float  # Δ, ms
    to_go: np.ndarray  # (N + 1, buckets) best relaxed completion value at the best μ
    multipliers: np.ndarray  # μ

    def node_bound(self, placed: int, wait: float, met: int, total: float, remaining_multipliers: float) -> float:
        """Upper bound on n − λ·t over the completions of a node (see the class docstring)."""
        bucket = min(int(wait // self.step), self.to_go.shape[1] - 1)
        remaining = self.to_go.shape[0] - 1 - placed
        return met - self.lam * (total + remaining * wait) + float(self.to_go[placed, bucket]) + remaining_multipliers


def _kernels():
    from planner.priority.compiled_lagrangian import best_members, path_value

    return best_members, path_value


def relaxation_data(problem: PriorityProblem) -> tuple[np.ndarray, np.ndarray, float, int]:
    """(exec_ms, slack_ms with the success tolerance, Δ, buckets) of the DP."""
    tables = problem.tables
    exec_ms = np.ascontiguousarray(tables.exec_ms, dtype=np.float64)
    slack = np.ascontiguousarray(tables.slack_ms + SUCCESS_TOLERANCE_MS, dtype=np.float64)
    finite = slack[np.isfinite(slack)]
    top = float(finite.max()) if finite.size else 0.0
    if top <= 0:
        return exec_ms, slack, 1.0, 2
    step = top / BUCKETS
    buckets = int(top // step) + 2  # bucket buckets−1 starts above every slack
    return exec_ms, slack, step, buckets


def lagrangian_bound(problem: PriorityProblem, lam_per_ms: float, iterations: int = 200,
                     target: float = 0.0, time_limit: float | None = None) -> LagrangianBound:
    """min over the μ visited by subgradient steps of L(μ) (see the module docstring); stops early once
    L(μ) ≤ ``target``, after ``iterations`` steps, when the step size has shrunk below 1e-4 of its
    start, or (after at least one step) when ``time_limit`` seconds have passed."""
    exec_ms, slack, step, buckets = relaxation_data(problem)
    return subgradient_bound(exec_ms, slack, lam_per_ms, step, buckets, iterations, target, time_limit)


def leader_order_and_jumps(exec_ms: np.ndarray, step: float) -> tuple[np.ndarray, np.ndarray]:
    """Per batch size: jobs by exec time (ties by index), and ⌊e_j(b)/Δ⌋ as (size, job) — the DP's inputs."""
    jobs, b_max = exec_ms.shape
    order = np.empty((b_max, jobs), dtype=np.int64)
    for col in range(b_max):
        order[col] = np.lexsort((np.arange(jobs), exec_ms[:, col]))
    jumps = np.ascontiguousarray((exec_ms // step).astype(np.int64).T)
    return order, jumps


def subgradient_bound(exec_ms: np.ndarray, slack: np.ndarray, lam_per_ms: float, step: float, buckets: int,
                      iterations: int, target: float = 0.0, time_limit: float | None = None,
                      multipliers: np.ndarray | None = None, theta: float = STEP_START) -> LagrangianBound:
    """`lagrangian_bound` on explicit tables (rows = jobs), from the given multipliers (zeros if None)
    and Polyak factor ``theta``."""
    started = time.perf_counter()
    best_members, path_value = _kernels()
    jobs, b_max = exec_ms.shape
    order, jumps = leader_order_and_jumps(exec_ms, step)
    values = np.empty((b_max, buckets, jobs))
    members = np.full((b_max, buckets, jobs, max(1, b_max - 1)), -1, dtype=np.int64)
    table = np.empty((jobs + 1, buckets))
    choice = np.empty((jobs + 1, buckets), dtype=np.int64)
    uses = np.zeros(jobs, dtype=np.int64)
    multipliers = np.zeros(jobs) if multipliers is None else np.array(multipliers, dtype=np.float64)
    best = math.inf
    best_table = np.zeros((jobs + 1, buckets))
    best_multipliers = multipliers.copy()
    stalled = 0
    done = 0
    for done in range(1, iterations + 1):
        best_members(exec_ms, slack, multipliers, lam_per_ms, step, order, values, members)
        path_value(exec_ms, lam_per_ms, jumps, values, members, table, choice, uses)
        value = float(table[0, 0]) + float(multipliers.sum())
        if value < best - 1e-12:
            best, stalled = value, 0
            best_table, best_multipliers = table.copy(), multipliers.copy()
        else:
            stalled += 1
            if stalled >= STALL_STEPS:
                theta, stalled = theta / 2.0, 0
        if best <= target or theta < 1e-4:
            break
        if time_limit is not None and time.perf_counter() - started > time_limit:
            break
        gradient = 1.0 - uses  # ∂L/∂μ_i
        norm = float(gradient @ gradient)
        if norm == 0:  # the relaxed optimum is a real plan: L(μ) = its value, nothing to gain
            break
        multipliers -= theta * max(value - target, 1e-3) / norm * gradient
    return LagrangianBound(best, done, lam_per_ms, step, best_table, best_multipliers)

