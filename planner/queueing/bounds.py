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


# ---- bounds that are cheap at any size (the fallback path's bound when the assignments are too large) ----

def _head_estimates(problem: QueueingProblem) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(least work m_i, least head estimate h_i, speed factor c_g) over the existing queues:
    ``m_i = min_g W[g,i]`` and ``h_i = min_g (busy_g + swap + own)`` over the queues group i fits on
    (one swap time when its model is not the one loaded on g; ``own`` = its work and tail in completion
    mode), and ``c_g = min_i W[g,i] / m_i`` over the groups that fit on g (so ``W[g,i] ≥ c_g·m_i``).
    None when some group fits on no existing queue (no plan exists)."""
    queues = [g for g, q in enumerate(problem.queues) if not q.optional]
    if not queues or problem.num_groups == 0:
        return None
    work = problem.work_s[[problem.queues[g].type_index for g in queues]]
    tail = problem.tail_s[[problem.queues[g].type_index for g in queues]]
    allowed = np.isfinite(work) & np.isfinite(tail)
    if not allowed.any(axis=0).all():
        return None
    own = work + tail if problem.deadline == "completion" else np.zeros_like(work)
    busy = np.array([problem.queues[g].busy_s for g in queues])
    swap = np.array([problem.types[problem.queues[g].type_index].swap_time_s for g in queues])
    loaded = [problem.queues[g].loaded_model for g in queues]
    switch = np.array([[grp.model != loaded[k] for grp in problem.groups] for k in range(len(queues))])
    head = busy[:, None] + np.where(switch, swap[:, None], 0.0) + own
    least_work = np.where(allowed, work, np.inf).min(axis=0)
    least_head = np.where(allowed, head, np.inf).min(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(allowed & (least_work[None, :] > 0), work / least_work[None, :], np.inf)
    speed = ratio.min(axis=1)
    speed = np.where(np.isfinite(speed), np.maximum(speed, 1.0), 1.0)  # c_g ≥ 1 always holds (m_i is the least)
    return least_work, least_head, speed


def pooled_start_bound(problem: QueueingProblem) -> float | None:
    """A lower bound on the penalty ``Σ_i (estimate_i − slo_i)`` of every plan on the existing queues,
    in O(groups · queues · log) (for sizes where the assignment bounds are not computed):

    ``Σ_k m_(k)·u_(k) + Σ_i h_i − Σ_i slo_i``, with m sorted in decreasing order, u = the n smallest
    numbers of the union over queues g of {c_g·r : r = 0, 1, …} in increasing order, and m_i, h_i,
    c_g of `_head_estimates` (all c_g = 1 gives u_(k) = ⌊k / G⌋, G queues).

    Proof.  In any plan a group i on queue g with r_i groups after it delays each of them by its work:
    ``Σ_i estimate_i = Σ_i (W[g_i,i]·r_i + head_{g_i,i} + Σ swaps after the first)`` with
    ``head_{g,i}`` = busy_g + (one swap time if i's model is not g's loaded one) + own (as in
    `AssignmentBound`; only more swaps are dropped).  So ``Σ_i estimate_i ≥ Σ_i m_i·(c_{g_i}·r_i) +
    Σ_i h_i``.  The numbers ``x_i = c_{g_i}·r_i`` of a plan are distinct elements of the union above (a
    queue holding n_g groups uses r = 0 … n_g − 1), so the k-th smallest x is at least u_(k);
    pairing the largest m with the smallest x minimises ``Σ m_i·x_i`` (rearrangement inequality, m ≥ 0),
    which gives the first sum.  ∎"""
    heads = _head_estimates(problem)
    if heads is None:
        return None
    least_work, least_head, speed = heads
    n = len(least_work)
    slots = np.sort((speed[:, None] * np.arange(n, dtype=float)[None, :]).ravel(), kind="stable")[:n]
    ordered = np.sort(least_work)[::-1]
    total_start = float((ordered * slots).sum() + least_head.sum())
    return total_start * (1.0 - 1e-12) - float(problem.slo().sum())  # shaved against summation rounding


def head_lateness_bound(problem: QueueingProblem) -> float | None:
    """A lower bound on the soft objectives of every plan on the existing queues: a group is never
    earlier than at the head of its best queue (``estimate_i ≥ h_i`` of `_head_estimates`), so its
    lateness is at least ``ℓ_i = max(0, h_i − slo_i)``: total lateness ≥ Σ ℓ_i, max lateness ≥ max ℓ_i,
    late groups ≥ #{i: ℓ_i above the validator's tolerance}.  None for the penalty objective."""
    from planner.queueing.validator import TOLERANCE

    heads = _head_estimates(problem)
    if heads is None or problem.objective == "penalty":
        return None
    _, least_head, _ = heads
    slo = problem.slo()
    lateness = np.maximum(least_head - slo, 0.0)
    if problem.objective == "total_lateness":
        return float(lateness.sum())
    if problem.objective == "max_lateness":
        return float(lateness.max(initial=0.0))
    return float(np.sum(lateness > TOLERANCE))  # the validator's count: lateness above TOLERANCE


def fallback_lower_bound(problem: QueueingProblem) -> tuple[float, str] | None:
    """The best cheap bound of the problem's objective (value, source): for the penalty the larger of
    `penalty_lower_bound` (when its assignment is small enough) and `pooled_start_bound`; for the soft
    objectives `head_lateness_bound`.  None when no plan exists on the existing queues."""
    if problem.objective != "penalty":
        value = head_lateness_bound(problem)
        return None if value is None else (value, "lateness at the head of the best queue")
    best = None
    pooled = pooled_start_bound(problem)
    if pooled is not None:
        best = (pooled, "pooled positions (least work per group and speed per queue, rearrangement; "
                        "no swaps beyond the first, no SLOs)")
    assignment = penalty_lower_bound(problem)
    if assignment is not None and (best is None or assignment > best[0]):
        best = (assignment, "assignment relaxation (no swaps, no SLOs)")
    return best
