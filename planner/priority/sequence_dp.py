"""Exact optimum of G at b_max = 1 for small N: Dinkelbach iterations over a subset DP.

Why.  At b_max = 1 a plan is a permutation and the start of each job depends only on the *set* of
jobs before it, so for a fixed ratio λ the parametric problem max n − λ·t is solved exactly by
dynamic programming over subsets (`planner.priority.compiled.sequence_dp`, O(2^N·N) time and
memory, compiled with numba).  Dinkelbach's method then maximises G = n / t:

* λ₀ = G of the incumbent; solve max n − λ·t;
* if the optimum is ≤ a tolerance (1e-9·N, as the branch-and-bound's), no plan beats λ: the
  incumbent is optimal (proof);
* otherwise the DP's plan has G > λ: it becomes the incumbent, λ rises to its G, repeat.  λ takes
  finitely many values (one per plan), and in practice 1–4 DPs suffice.

Every DP plan is re-scored by `planner.priority.evaluate.evaluate` (the single source of truth).
When the time limit stops the loop, any plan satisfies n − λ·t ≤ v (the last DP optimum), hence
G ≤ λ + v / t_min with t_min = the SPT total latency (the least Σ-latency of any permutation).

The DP is used for N ≤ `MAX_DP_JOBS` (2^20 subsets: ~17 MB, ~0.2 s per DP; N = 22 was measured at
~1 s per DP and 70 MB);
above that the branch-and-bound of `planner.priority.exact` runs.  The DP and the
branch-and-bound are tested against exhaustive search and against each other.
"""

from __future__ import annotations

import time

import numpy as np

from planner.core.work import WorkClock
from planner.priority import effort
from planner.priority.evaluate import FastTables, evaluate
from planner.priority.exact import VALUE_TOLERANCE, ExactOutcome
from planner.priority.heuristics import Plan
from planner.priority.problem import SUCCESS_TOLERANCE_MS, PriorityProblem

MAX_DP_JOBS = 20


def dp_applies(problem: PriorityProblem) -> bool:
    """The subset DP covers b_max = 1 (singletons always fit the token capacity) up to MAX_DP_JOBS."""
    return problem.b_max == 1 and problem.size <= MAX_DP_JOBS


def _order_from(last: np.ndarray, jobs: int) -> list[int]:
    order = []
    subset = (1 << jobs) - 1
    while subset:
        j = int(last[subset])
        order.append(j)
        subset ^= 1 << j
    order.reverse()
    return order


def solve_sequence_dp(problem: PriorityProblem, incumbent: Plan, time_limit: float | None = None,
                      clock: WorkClock | None = None) -> ExactOutcome:
    """Prove ``incumbent`` optimal or find the optimum at b_max = 1 (see the module docstring).

    With ``clock`` (a `WorkClock` with a limit) each round is charged its nominal seconds
    (`planner.priority.effort.dp_round_seconds`) and no round starts that would end after the limit
    less the final bounds' time (deterministic; the wall-clock guard aside, which sets ``wall_cut``)."""
    if not dp_applies(problem):
        raise ValueError(f"the subset DP needs b_max = 1 and N ≤ {MAX_DP_JOBS}")
    from planner.priority.compiled import sequence_dp  # lazy: numba's import is slow

    started = time.perf_counter()
    tables = problem.tables
    fast = FastTables(tables)
    execs = np.ascontiguousarray(tables.exec_ms[:, 0])
    slacks = np.ascontiguousarray(tables.slack_ms[:, 0] + SUCCESS_TOLERANCE_MS)
    tolerance = VALUE_TOLERANCE * max(1, problem.size)
    best = incumbent
    lam = best.met / best.total_ms if best.total_ms > 0 else 0.0
    rounds = 0
    while True:
        value, last = sequence_dp(execs, slacks, lam)
        rounds += 1
        if value <= tolerance:
            if clock is not None:
                clock.charge(effort.dp_round_seconds(problem.size))
            return ExactOutcome(best, True, best.g, rounds, time.perf_counter() - started,
                                f"subset DP, {rounds} Dinkelbach rounds")
        order = _order_from(last, problem.size)
        met, total = evaluate(fast, order, [1] * problem.size)
        candidate = Plan(tuple(order), (1,) * problem.size, met, total)
        if candidate.g > best.g:
            best = candidate
        new_lam = best.met / best.total_ms
        if clock is not None:
            clock.charge(effort.dp_round_seconds(problem.size))
            out_of_time = clock.time_limit is not None and not clock.allows(
                effort.dp_round_seconds(problem.size) + effort.finish_seconds(problem.size))
        else:
            out_of_time = time_limit is not None and time.perf_counter() - started > time_limit
        if new_lam <= lam or out_of_time:  # no progress (round-off) or time is up: report a bound
            shortest = np.sort(execs)
            least_latency = float(np.sum(shortest * np.arange(problem.size, 0, -1)))
            bound = 1000.0 * max(lam + max(value, 0.0) / least_latency, best.met / best.total_ms)
            reason = "time limit" if out_of_time else "no progress in the Dinkelbach ratio (round-off)"
            return ExactOutcome(best, False, bound, rounds, time.perf_counter() - started,
                                f"subset DP stopped by the {reason} after {rounds} rounds",
                                wall_cut=clock is not None and clock.wall_cut)
        lam = new_lam
