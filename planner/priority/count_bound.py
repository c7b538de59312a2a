"""Upper bound on G that keeps the SLO count integral: V(n₀) ≥ n₀ − λ·t for every plan meeting n₀ SLOs.

Why.  The branch-and-bound turns its bound on n − λ·t (`planner.priority.lagrangian`, ≤ U for every
plan) into a bound on G with the root's t_LB: G ≤ λ + U / t_LB.  At b_max = 4, t_LB is only ~81 % of a
real plan's latency, so a 0.8-job U reads as a ~6 % gap on G.  Splitting by the SLO count n is sharper:
a plan meeting n SLOs has t ≥ (n − V(n))/λ, so G ≤ n·λ / (n − V(n)), and V(n) is far below U for the
counts a plan near λ would need.  (It does not tighten U itself: at N = 30 the largest V(n) equals the
plain L, whose dual equals the LP of the path formulation — column generation stalls at the same
≈ 0.8 jobs — so the rest of the gap is the relaxation's, not the multipliers'.)

The DP.  That of `lagrangian` with a third state component c = SLOs still to meet (0..N): a batch of
size b at start bucket s is a leader l (its longest member at size b, ties by index) and, for some k,
the k best-rewarded followers no longer than l that meet their SLO at s·Δ plus the b − 1 − k best that
do not (reward −λ·e_j(b) − μ_j); it meets [s·Δ ≤ slack_l(b)] + k SLOs, adds −λ·e_l(b)·(N − P − b + 1)
− μ_l + the followers' rewards, and leads to (P + b, s + ⌊e_l(b)/Δ⌋, max(c − met, 0)); paths end in
(N, ·, 0).  V(n₀, μ) = n₀ + Σ_i μ_i + the best path from (0, 0, n₀); one pass gives every n₀.

Validity.  Take a plan meeting n ≥ n₀ SLOs with latency t.  Its batch starts are ≥ s·Δ along its path
(the jumps round down).  For a batch, let A be its followers that meet their SLO at s·Δ (a superset
of those the plan meets) and B the others; the DP offers the same leader with k = |A|: the |A| best
met-at-s rewards sum at least A's, the |B| best missed ones at least B's, and it counts |A| + [leader
meets at s·Δ] ≥ the SLOs the batch really meets, while needing fewer SLOs later never hurts.  The plan
uses each job once, so n₀ − λ·t ≤ V(n₀, μ) for every μ (the root's μ is used).  Hence
G* ≤ max(λ, max over n ≥ 1 of n·λ / (n − V(n))), valid whatever the search does (+∞ if some reachable
n has V(n) ≥ n).  The token capacity (Eq. 20) is ignored: a relaxation.  Tested against complete
enumeration (tests/priority/test_priority_count_bound.py).
"""

from __future__ import annotations

import math

import numpy as np

from planner.priority.lagrangian import leader_order_and_jumps


def _kernels():
    from planner.priority.compiled_count import count_path_value, follower_prefixes

    return follower_prefixes, count_path_value


def count_values(exec_ms: np.ndarray, slack: np.ndarray, lam_per_ms: float, step: float, buckets: int,
                 multipliers: np.ndarray) -> np.ndarray:
    """V(n₀, μ) for every n₀ = 0..N from one DP pass (entry −inf: no path meets n₀ SLOs)."""
    follower_prefixes, count_path_value = _kernels()
    jobs, b_max = exec_ms.shape
    order, jumps = leader_order_and_jumps(exec_ms, step)
    met_prefix = np.empty((b_max, buckets, jobs, b_max))
    missed_prefix = np.empty((b_max, buckets, jobs, b_max))
    width = max(1, b_max - 1)
    met_members = np.full((b_max, buckets, jobs, width), -1, dtype=np.int64)
    missed_members = np.full((b_max, buckets, jobs, width), -1, dtype=np.int64)
    table = np.empty((jobs + 1, buckets, jobs + 1))
    choice = np.empty((jobs + 1, buckets, jobs + 1), dtype=np.int64)
    multipliers = np.asarray(multipliers, dtype=np.float64)
    follower_prefixes(exec_ms, slack, multipliers, lam_per_ms, step, order, met_prefix, missed_prefix,
                      met_members, missed_members)
    count_path_value(exec_ms, slack, multipliers, lam_per_ms, step, jumps, met_prefix, missed_prefix, table, choice)
    return np.arange(jobs + 1) + table[0, 0, :] + float(multipliers.sum())


def ratio_bound(values: np.ndarray, lam_per_ms: float) -> float:
    """Upper bound on G (per ms) from V(n₀) ≥ n₀ − λ·t over the plans meeting ≥ n₀ SLOs: a plan
    meeting n ≥ 1 SLOs has t ≥ (n − V(n))/λ, so G ≤ max(λ, max over n of n·λ/(n − V(n))); +inf if
    some reachable n has V(n) ≥ n (or λ ≤ 0)."""
    if lam_per_ms <= 0:
        return math.inf
    bound = lam_per_ms
    for count in range(1, len(values)):
        value = float(values[count])
        if value == -math.inf:
            continue
        if value >= count:
            return math.inf
        bound = max(bound, count * lam_per_ms / (count - value))
    return bound
