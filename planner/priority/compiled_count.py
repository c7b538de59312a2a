"""numba kernels of `planner.priority.count_bound` (imported lazily: numba's import is slow).

`follower_prefixes`: for every batch size b (column b − 1), start bucket s and leader l, the sums of the
q best rewards ``−λ·e_j(b) − μ_j`` among the jobs no longer than l at size b (ties by index) that meet
their SLO when the batch starts at s·Δ (``met_prefix``) and among those that do not (``missed_prefix``),
q = 0..b − 1 (−inf when fewer than q exist), with the members themselves.  `count_path_value`: the DP
over (jobs placed, start bucket, SLOs still to meet) of `planner.priority.count_bound`.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from planner.priority.compiled_lagrangian import insert_best


@njit(cache=True)
def write_prefix(prefix, members, values, jobs, kept, need):
    """``prefix[q]`` = the sum of the first q of the ``kept`` best ``values`` (−inf beyond ``kept``) and
    ``members[q − 1]`` their jobs, q = 0..need."""
    total = 0.0
    prefix[0] = 0.0
    for q in range(1, need + 1):
        if q <= kept:
            total += values[q - 1]
            prefix[q] = total
            members[q - 1] = jobs[q - 1]
        else:
            prefix[q] = -np.inf


@njit(cache=True)
def follower_prefixes(exec_ms, slack, multipliers, lam, step, order, met_prefix, missed_prefix,
                      met_members, missed_members):
    jobs, b_max = exec_ms.shape
    buckets = met_prefix.shape[1]
    met_value = np.empty(b_max)
    met_job = np.empty(b_max, dtype=np.int64)
    missed_value = np.empty(b_max)
    missed_job = np.empty(b_max, dtype=np.int64)
    for col in range(b_max):
        need = col
        for s in range(buckets):
            start = s * step
            met_kept = 0
            missed_kept = 0
            for rank in range(jobs):
                leader = order[col, rank]
                write_prefix(met_prefix[col, s, leader], met_members[col, s, leader], met_value, met_job,
                             met_kept, need)
                write_prefix(missed_prefix[col, s, leader], missed_members[col, s, leader], missed_value,
                             missed_job, missed_kept, need)
                if need == 0:
                    continue
                value = -lam * exec_ms[leader, col] - multipliers[leader]
                if start <= slack[leader, col]:
                    met_kept = insert_best(met_value, met_job, met_kept, need, value, leader)
                else:
                    missed_kept = insert_best(missed_value, missed_job, missed_kept, need, value, leader)


@njit(cache=True)
def count_path_value(exec_ms, slack, multipliers, lam, step, jumps, met_prefix, missed_prefix, best, choice):
    """``best`` (N + 1, buckets, counts): best completion value from (placed, s) that still meets at least
    c SLOs (−inf: none); ``choice`` = (col·N + leader)·b_max + met followers of the best batch, −1 if none."""
    jobs, b_max = exec_ms.shape
    buckets = met_prefix.shape[1]
    counts = best.shape[2]
    last = buckets - 1
    best[jobs, :, :] = -np.inf
    best[jobs, :, 0] = 0.0
    for placed in range(jobs - 1, -1, -1):
        for s in range(buckets):
            start = s * step
            for c in range(counts):
                top = -np.inf
                pick = -1
                if c <= jobs - placed:
                    for col in range(b_max):
                        size = col + 1
                        if placed + size > jobs:
                            break
                        after = jobs - placed - size
                        ahead = best[placed + size]
                        for leader in range(jobs):
                            led = 1 if start <= slack[leader, col] else 0
                            nxt = min(s + jumps[col, leader], last)
                            base = -lam * exec_ms[leader, col] * (after + 1) - multipliers[leader]
                            for followers_met in range(col + 1):
                                rest = met_prefix[col, s, leader, followers_met] + missed_prefix[col, s, leader, col - followers_met]
                                if rest == -np.inf:
                                    continue
                                left = c - led - followers_met
                                left = max(left, 0)
                                follow = ahead[nxt, left]
                                if follow == -np.inf:
                                    continue
                                cand = base + rest + follow
                                if cand > top:
                                    top = cand
                                    pick = (col * jobs + leader) * b_max + followers_met
                best[placed, s, c] = top
                choice[placed, s, c] = pick
