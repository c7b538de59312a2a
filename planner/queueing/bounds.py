"""Combinatorial lower bounds of the penalty objective (Σ_i estimate_i − slo_i).

`penalty_lower_bound` (kept for the fallback path): drop the SLOs and the swaps (both only delay
groups): what is left is scheduling groups on unrelated parallel instances to minimise the sum of
start times, which is an assignment of groups to (queue g, position r from the end): a group with r
groups after it on queue g delays those r groups by its work, so ``Σ_i start_i = Σ_i (W[g,i]·r_i + busy_g)``.
Every plan is one such assignment, so the min-cost assignment (`scipy.optimize.linear_sum_assignment`,
cost ``W[g,i]·r + busy_g + C[g,i]``; C = own completion term in ``completion`` mode) minus Σ slo is a
valid lower bound.  It is exact when no swap is needed and no SLO binds.

`swap_assignment_bound` (the certified pipeline): the same assignment plus one swap time per group
of a model other than the queue's loaded one and without the cells that are late even at the head
of their queue, solved by a compiled Hungarian method that also returns the LP duals (for
reduced-cost fixing); see `AssignmentBound`.  It never is below the first bound.  Its per
(queue, group) numbers (`relaxation_data`) are shared with the deadline Lagrangian of
`planner.queueing.lagrangian`, which also accounts for the SLOs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import linear_sum_assignment

from planner.core.work import WorkClock
from planner.queueing import effort
from planner.queueing.problem import QueueingProblem

#: Group × slot cells above which the bound is skipped (memory/time).
MAX_CELLS = 5_000_000
#: Positions per queue solved first, as a multiple of groups / queues (grown while the duals say so).
DEPTH_FACTOR = 1.3


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


# ---- the swap-aware assignment bound with duals (certified pipeline) ---------------------------

@dataclass(frozen=True)
class AssignmentBound:
    """The swap-aware assignment relaxation of the penalty objective, with its LP duals.

    Cell (queue g, group i, position r from the end) costs
    ``c[g,i,r] = W[g,i]·r + busy_g + own[g,i] + swap[g,i]`` with ``own`` = the group's own
    completion term (``completion`` mode) and ``swap[g,i] = S_g`` when group i's model is not the
    model loaded on g.  Valid because in every plan

    * ``Σ_i start_i = Σ_i (busy_g(i) + Σ_{k before i} W[g,k] + S_g·#swaps before i)`` and
      ``Σ_i Σ_{k before i} W[g,k] = Σ_k W[g,k]·r_k`` (the assignment of R||ΣC_j);
    * a group whose model is not the loaded one has at least one swap before it (the swaps after
      the first are dropped: that, and the SLOs, is all the relaxation forgets);
    * a cell where the group is late even at the head of the queue (``busy + swap + own > slo``)
      is in no feasible plan and is forbidden.

    ``value`` = min-cost assignment − Σ slo ≤ the penalty of every feasible plan.  The duals make
    ``cost(plan) ≥ value + Σ_{cells of plan} reduced_cost``, hence reduced-cost fixing: a cell
    whose reduced cost exceeds ``UB − value`` is in no plan better than the incumbent UB.
    Positions ``r ≥ depth`` are not in the solved matrix; their columns get dual 0 (they are
    unused), which is dual feasible because ``depth`` is grown until ``c[g,i,depth] ≥ u_i``.
    """

    value: float
    queues: tuple[int, ...]  # usable (non-optional) queue indices, in the order of the duals
    depth: int
    cell_cost: np.ndarray  # (groups, usable queues, depth)
    row_dual: np.ndarray  # (groups,)
    column_dual: np.ndarray  # (usable queues, depth)
    slope: np.ndarray  # (usable queues, groups): W, the cost increase per position
    base: np.ndarray  # (usable queues, groups): busy + own + swap (inf where forbidden)
    assignment: tuple[tuple[int, int], ...]  # (queue, position) of every group in the relaxation

    def reduced_costs(self, slots: int) -> np.ndarray:
        """Reduced cost per (usable queue, group, position < slots); inf on forbidden cells."""
        r = np.arange(slots, dtype=float)
        cost = self.slope[:, :, None] * r[None, None, :] + self.base[:, :, None]
        dual = np.zeros((len(self.queues), slots))
        shown = min(slots, self.depth)
        dual[:, :shown] = self.column_dual[:, :shown]
        return cost - self.row_dual[None, :, None] - dual[:, None, :]


@dataclass(frozen=True)
class RelaxationData:
    """Per (usable queue, group) numbers shared by the relaxations."""

    queues: tuple[int, ...]
    work: np.ndarray  # (queues, groups), 0 where the model does not fit
    base: np.ndarray  # busy + own + swap, (queues, groups)
    forbidden: np.ndarray  # (queues, groups): does not fit, or late even at the head of the queue
    slo: np.ndarray  # (groups,)


def relaxation_data(problem: QueueingProblem) -> RelaxationData | None:
    """Work, base cost and forbidden cells of the usable (non-optional) queues; None without any."""
    queues = [g for g, q in enumerate(problem.queues) if not q.optional]
    n = problem.num_groups
    if not queues or n == 0:
        return None
    work = problem.work_s[[problem.queues[g].type_index for g in queues]]
    tail = problem.tail_s[[problem.queues[g].type_index for g in queues]]
    allowed = np.isfinite(work) & np.isfinite(tail)
    work = np.where(allowed, work, 0.0)
    own = np.where(allowed, work + tail, 0.0) if problem.deadline == "completion" else np.zeros_like(work)
    busy = np.array([problem.queues[g].busy_s for g in queues])
    swap_time = np.array([problem.types[problem.queues[g].type_index].swap_time_s for g in queues])
    loaded = [problem.queues[g].loaded_model for g in queues]
    needs_swap = np.array([[problem.groups[i].model != loaded[k] for i in range(n)] for k in range(len(queues))])
    base = busy[:, None] + own + np.where(needs_swap, swap_time[:, None], 0.0)
    slo = problem.slo()
    forbidden = ~allowed | (base > slo[None, :] + 1e-6 * np.maximum(1.0, np.abs(slo[None, :])))
    return RelaxationData(tuple(queues), work, np.where(forbidden, 0.0, base), forbidden, slo)


def swap_assignment_bound(problem: QueueingProblem, max_cells: int = MAX_CELLS,
                          clock: WorkClock | None = None) -> AssignmentBound | None:
    """The swap-aware assignment bound (`AssignmentBound`) of the penalty objective; None if not
    applicable.  Its nominal seconds (`planner.queueing.effort.assignment_seconds`) are charged to ``clock``."""
    from planner.queueing.compiled import assignment_with_duals  # lazy: numba's import is slow

    data = relaxation_data(problem)
    if data is None or data.forbidden.all(axis=0).any():
        return None
    queues, work, finite_base, forbidden, slo = data.queues, data.work, data.base, data.forbidden, data.slo
    n = problem.num_groups
    big = 1e6 * (float(finite_base.max(initial=0.0)) + float(work.max(initial=0.0)) * n + 1.0)
    depth = min(n, int(DEPTH_FACTOR * -(-n // len(queues))) + 8)
    while True:
        if len(queues) * depth * n > max_cells:
            return None
        r = np.arange(depth, dtype=float)
        cost = work.T[:, :, None] * r[None, None, :] + finite_base.T[:, :, None]
        cost = np.where(forbidden.T[:, :, None], big, cost)
        column_of_row, row_dual, column_dual, steps = assignment_with_duals(np.ascontiguousarray(cost.reshape(n, -1)))
        if clock is not None:
            clock.charge(effort.assignment_seconds(steps, cost.size, n))
        chosen = cost.reshape(n, -1)[np.arange(n), column_of_row]
        if (chosen >= big).any():
            return None  # every plan breaks an SLO at the head of a queue: no bound from here
        # dual feasibility of the unsolved positions r ≥ depth (their column dual is 0)
        beyond = np.where(forbidden, np.inf, work * depth + finite_base)
        if depth >= n or (beyond - row_dual[None, :] >= -1e-9).all():
            break
        depth = min(n, 2 * depth)
    value = float(chosen.sum()) - float(slo.sum())
    assignment = tuple((int(c // depth), int(c % depth)) for c in column_of_row)
    return AssignmentBound(value, tuple(queues), depth, cost, row_dual, column_dual.reshape(len(queues), depth),
                           work, np.where(forbidden, np.inf, finite_base), assignment)
