"""A combinatorial lower bound of the penalty objective (Σ_i estimate_i − slo_i).

Drop the SLOs and the swaps (both only delay groups): what is left is scheduling groups on
unrelated parallel instances to minimise the sum of start times, which is an assignment of groups to
(queue g, position r from the end): a group with r groups after it on queue g delays those r groups
by its work, so ``Σ_i start_i = Σ_i (W[g,i]·r_i + busy_g)``.
Every plan is one such assignment, so the min-cost assignment (`scipy.optimize.linear_sum_assignment`,
cost ``W[g,i]·r + busy_g + C[g,i]``; C = own completion term in ``completion`` mode) minus Σ slo is a
valid lower bound.  It is exact when no swap is needed and no SLO binds.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import linear_sum_assignment

from planner.queueing.problem import QueueingProblem

#: Group × slot cells above which the bound is skipped (memory/time).
MAX_CELLS = 5_000_000


def penalty_lower_bound(problem: QueueingProblem) -> float | None:
    """Lower bound of the penalty objective over plans on the existing (non-optional) instances."""
    queues = [g for g, q in enumerate(problem.queues) if not q.optional]
    n = problem.num_groups
    if not queues or n == 0 or n * n * len(queues) > MAX_CELLS:
        return None
    work = problem.work_s[[problem.queues[g].type_index for g in queues]]  # (G, N)
    tail = problem.tail_s[[problem.queues[g].type_index for g in queues]]
    own = work + tail if problem.deadline == "completion" else np.zeros_like(work)
    busy = np.array([problem.queues[g].busy_s for g in queues])
    positions = np.arange(n, dtype=float)
    # cost[i, (g, r)] = W[g,i]·r + busy_g + own[g,i]
    cost = work.T[:, :, None] * positions[None, None, :] + busy[None, :, None] + own.T[:, :, None]
    cost = np.where(np.isfinite(cost), cost, 1e18).reshape(n, -1)
    rows, cols = linear_sum_assignment(cost)
    total = float(cost[rows, cols].sum())
    if total >= 1e17:
        return None
    return total - float(problem.slo().sum())
