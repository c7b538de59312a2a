"""numba kernels of `planner.priority.lagrangian` (imported lazily: numba's import is slow).

`best_members`: for every batch size b, start bucket s and leader l, the reward of the best batch
(l plus the b − 1 members that run no longer than l at size b, ties by index, with the largest
rewards ``[s·Δ ≤ slack_j(b)] − λ·e_j(b) − μ_j``).  `path_value`: the DP over (jobs placed, start
bucket) of the module docstring of `lagrangian`: fills the table of best relaxed completion values
(entry [0, 0]: the best relaxed path) and ``uses`` with how often that path uses each job.
Outputs are passed in (allocated once per bound, reused by every subgradient step); arrays are laid
out (size, bucket, leader) so the DP's innermost loop reads contiguous memory.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def insert_best(top_value, top_job, kept, need, value, job):
    """Insert (value, job) into the descending top-``need`` list ``top_value/top_job`` holding
    ``kept`` entries; returns the new count (a value below a full list's last is dropped)."""
    if kept < need:
        position = kept
        kept += 1
    elif value > top_value[need - 1]:
        position = need - 1
    else:
        return kept
    while position > 0 and top_value[position - 1] < value:
        top_value[position] = top_value[position - 1]
        top_job[position] = top_job[position - 1]
        position -= 1
    top_value[position] = value
    top_job[position] = job
    return kept


@njit(cache=True)
def best_members(exec_ms, slack, multipliers, lam, step, order, values, members):
    jobs, b_max = exec_ms.shape
    buckets = values.shape[1]
    width = members.shape[3]
    top_value = np.empty(width)
    top_job = np.empty(width, dtype=np.int64)
    values[:] = -np.inf
    for col in range(b_max):
        need = col  # followers in a batch of size col + 1
        for s in range(buckets):
            start = s * step
            kept = 0
            for rank in range(jobs):
                leader = order[col, rank]
                on = 1.0 if start <= slack[leader, col] else 0.0
                reward = on - lam * exec_ms[leader, col] - multipliers[leader]
                if kept >= need:
                    total = reward
                    for k in range(need):
                        total += top_value[k]
                        members[col, s, leader, k] = top_job[k]
                    values[col, s, leader] = total
                if need > 0:  # insert the leader's reward among the best `need` seen so far
                    kept = insert_best(top_value, top_job, kept, need, reward, leader)


@njit(cache=True)
def path_value(exec_ms, lam, jumps, values, members, best, choice, uses):
    """``jumps[col, l]`` = ⌊e_l(b)/Δ⌋; ``best`` (N + 1, buckets) and ``choice`` (N + 1, buckets)
    (col·N + leader of the best batch) are filled."""
    jobs, b_max = exec_ms.shape
    buckets = values.shape[1]
    last = buckets - 1
    best[jobs, :] = 0.0
    for placed in range(jobs - 1, -1, -1):
        for s in range(buckets):
            top = -np.inf
            pick = -1
            for col in range(b_max):
                size = col + 1
                if placed + size > jobs:
                    break
                after = jobs - placed - size
                row = values[col, s]
                ahead = best[placed + size]
                for leader in range(jobs):
                    v = row[leader]
                    if v == -np.inf:
                        continue
                    nxt = min(s + jumps[col, leader], last)
                    cand = v - lam * exec_ms[leader, col] * after + ahead[nxt]
                    if cand > top:
                        top = cand
                        pick = col * jobs + leader
            best[placed, s] = top
            choice[placed, s] = pick
    uses[:] = 0
    placed, s = 0, 0
    while placed < jobs:
        col = choice[placed, s] // jobs
        leader = choice[placed, s] % jobs
        uses[leader] += 1
        for k in range(col):
            uses[members[col, s, leader, k]] += 1
        nxt = min(s + jumps[col, leader], last)
        placed += col + 1
        s = nxt
