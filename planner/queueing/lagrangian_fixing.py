"""Reduced-cost fixing with the deadline Lagrangian (certified pipeline).

The swap-aware assignment bound fixes cells (queue g, group i, slot r = groups after i on g) with its
own duals; the deadline Lagrangian (`planner.queueing.lagrangian`) is tighter, so its duals fix more.
Its rows are *pieces*, not groups: group i is split into ``c_i = 1 + μ_i`` pieces (K = 1).  Argument:

* Take a plan P meeting every SLO with penalty(P) ≤ UB.  Map it to the plan of pieces that keeps
  i's pieces back to back where i is (module docstring of `planner.queueing.lagrangian`):
  ``UB ≥ penalty(P) ≥ L_μ(P) = Σ_{pieces} cost(piece, its column) − Σ slo − Σ μ slo``.
* Dual feasibility of the split assignment (`SplitAssignment`: ``u_k + v_{g,R} ≤ cost``,
  ``v ≤ 0``, ``Σ u + Σ v`` = the assignment optimum A) gives, with the reduced cost
  ``rc = cost − u − v ≥ 0``: ``Σ_pieces cost ≥ Σ_all u + Σ_used v + Σ_pieces rc ≥ A + Σ_pieces rc``
  (the unused columns have ``v ≤ 0``).  Hence ``Σ_{pieces of P} rc ≤ UB − value(μ)`` and, every rc
  being ≥ 0, the pieces of *each* group i satisfy ``Σ_{pieces of i} rc ≤ UB − value(μ)``.
* If i sits in slot r of queue g, the pieces after it are ``R = r + Σ_{j after i} μ_j`` with
  ``R ∈ [r, r + Σ_{j ≠ i} μ_j]``, and i's pieces occupy positions ``R … R + c_i − 1`` of g.  Their
  reduced costs add up to ``window(g, i, R) = Σ_{a<c_i} (cost_i(g, R + a) − v_{g,R+a}) − Σ_{pieces
  of i} u`` whichever piece takes which position (the pieces of i have the same cost row), and
  ``Σ_a cost_i(g, R + a) = W[g,i]·R + c_i·base[g,i]`` (the correction of the split cancels).

So the cell (g, i, r) is in no plan with penalty ≤ UB when ``min_{R ∈ [r, r + Σ_{j≠i} μ_j]}
window(g, i, R) > UB − value(μ)``: `lagrangian_reduced_costs` returns that minimum per cell, and
the caller keeps the cells passing both this test and the swap-aware bound's one (each alone is
valid, so their intersection is).
"""

from __future__ import annotations

import numpy as np

from planner.core.work import WorkClock
from planner.queueing import effort
from planner.queueing.bounds import RelaxationData
from planner.queueing.lagrangian import solve_split_assignment


def _range_minimum(values: np.ndarray, width: int, count: int) -> np.ndarray:
    """``out[:, r] = min(values[:, r : r + width + 1])`` for r < count (values wide enough, inf-padded)."""
    span, table = 1, values
    while 2 * span <= width + 1:
        table = np.minimum(table[:, :-span], table[:, span:])  # table[:, R] = min over [R, R + 2·span)
        span *= 2
    # min over [r, r + width] = min(table[r], table[r + width + 1 − span])
    return np.minimum(table[:, :count], table[:, width + 1 - span: width + 1 - span + count])


def lagrangian_reduced_costs(data: RelaxationData, multipliers: np.ndarray, slots: int,
                             clock: WorkClock | None = None) -> tuple[float, np.ndarray] | None:
    """(value(μ), the least reduced cost per (usable queue, group, slot < ``slots``)) for integer
    multipliers ``μ`` (module docstring); inf on forbidden cells; None if the assignment is not solved."""
    multipliers = np.asarray(multipliers, dtype=np.int64)
    pieces_of = 1 + multipliers
    solved = solve_split_assignment(data, pieces_of, clock=clock)
    if solved is None:
        return None
    num_queues, n = data.work.shape
    pieces = int(pieces_of.sum())
    extra = int(multipliers.sum())
    value = solved.total - float(data.slo.sum()) - float((multipliers * data.slo).sum())
    width = pieces + extra + 2  # positions R ∈ [0, pieces) plus inf padding for the range minimum
    column_dual = np.zeros((num_queues, width))
    column_dual[:, :solved.depth] = solved.column_dual
    dual_sums = np.concatenate([np.zeros((num_queues, 1)), np.cumsum(column_dual, axis=1)], axis=1)
    first = np.concatenate([[0], np.cumsum(pieces_of)[:-1]])
    positions = np.arange(width, dtype=float)
    reduced = np.full((num_queues, n, slots), np.inf)
    for i in range(n):
        c = int(pieces_of[i])
        row_dual = float(solved.row_dual[first[i]:first[i] + c].sum())
        count = width - c + 1  # window starts R with R + c ≤ width
        window = (data.work[:, i, None] * positions[None, :count] + c * data.base[:, i, None]
                  - (dual_sums[:, c:c + count] - dual_sums[:, :count]) - row_dual)
        window[:, pieces - c + 1:] = np.inf  # the last piece must fit: R + c ≤ pieces
        reach = extra - int(multipliers[i])
        least = _range_minimum(window, reach, slots)
        least[data.forbidden[:, i], :] = np.inf
        reduced[:, i, :] = least
    if clock is not None:
        clock.charge(effort.fixing_seconds(n * num_queues * width, n))
    return value, reduced
