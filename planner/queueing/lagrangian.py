"""A deadline-aware lower bound: Lagrangian relaxation of the SLOs, solved as a split-group assignment.

The swap-aware assignment bound (`planner.queueing.bounds.swap_assignment_bound`) forgets the SLOs
(except cells late even at the head of a queue); on large instances its optimum puts a few tight
groups (interactive, batch-1) late in a queue, and that is most of the certified gap.  Here the
SLO rows ``estimate_i ≤ slo_i`` are dualised with multipliers ``μ_i ≥ 0`` (multiples of ``1 / K``,
K = the scale, 1 or 2):

    penalty(P) = Σ_i (estimate_i − slo_i)
               ≥ Σ_i (estimate_i − slo_i) + Σ_i μ_i (estimate_i − slo_i)       (P meets every SLO)
               = Σ_i w_i · estimate_i − Σ_i slo_i − Σ_i μ_i slo_i,   w_i = 1 + μ_i,

so any lower bound of ``min_P Σ_i w_i · estimate_i`` over plans *without* SLOs gives one of the
penalty.  Weighted sums of starts are not an assignment problem, but ``K · Σ_i w_i · estimate_i``
is after **splitting**: group i becomes ``c_i = K·w_i`` unit-weight pieces, each of work
``W[g,i] / c_i`` on queue g.  Any plan maps to a plan of pieces (i's pieces back to back where i
was); the pieces' starts are ``start_i + a·W[g,i]/c_i`` (a = 0 … c_i − 1), so

    Σ_pieces start = Σ_i c_i · start_i + Σ_i W[g(i),i] · (c_i − 1) / 2.

Every piece of i on queue g gets the constant ``− W[g,i] · (c_i − 1) / (2 c_i)`` (they add up to
the correction when the pieces stay together) and the base cost of its group (busy + own + one
swap time when i's model is not the loaded one, as in the swap-aware bound, with the same
forbidden cells: late even at the head of the queue; own = the group's work + tail in
``completion`` mode, whose estimate is start + own).  The min-cost assignment of pieces to (queue,
position from the end) with cost ``W[g,i]/c_i · r + base − correction`` (R||ΣC_j over pieces, as
in `swap_assignment_bound`) is ≤ the cost of every mapped plan (pieces may also be split over
queues or positions: that only enlarges the set), hence

    value(μ) = assignment(μ) / K − Σ_i slo_i − Σ_i μ_i slo_i  ≤  penalty of every feasible plan.

With K = 1 and μ = 0 it is the swap-aware assignment bound.  Positions ``r ≥ depth`` are left out
of the solved matrix only when the Hungarian duals prove them useless (``cost(r = depth) ≥ row
dual`` for every piece and queue, the cost being nondecreasing in r), as in `swap_assignment_bound`.

`deadline_lagrangian_bound` uses K = 1 (K = 2 allows halves but costs about eight times as much:
twice the pieces and positions).  Its multipliers follow a deterministic Polyak subgradient method
on continuous targets λ (μ = round(λ), capped at `MAX_MULTIPLIER`): the subgradient of group i is
``estimate_i − slo_i`` in the relaxation's solution (its earliest piece), the step
``f · (UB − value) / ‖subgradient‖²`` towards the incumbent's penalty UB, f × `STEP_DECAY` after a
round without improvement; the best value is returned.  It stops after ``rounds`` rounds, when the
subgradient vanishes, the value reaches UB or f falls below `MIN_STEP_FACTOR`, or when at the pace
so far the next round would end after ``deadline`` (a `time.perf_counter` value) — the only
timing-dependent part.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from planner.queueing.bounds import RelaxationData, relaxation_data
from planner.queueing.problem import QueueingProblem

#: Largest multiplier of one group (its number of pieces is μ + 1).
MAX_MULTIPLIER = 8
#: Pieces beyond the groups (Σ μ) are capped at this multiple of the number of groups.
MAX_EXTRA_PIECES_SHARE = 1.0
#: Polyak step factor decay after a round that did not improve the best value; stop below the minimum.
STEP_DECAY = 0.7
MIN_STEP_FACTOR = 0.02
#: Default number of multiplier rounds.
DEFAULT_ROUNDS = 20
#: Positions per queue solved first, as a multiple of pieces / queues (grown while the duals say so).
DEPTH_FACTOR = 1.3
#: Piece × column cells above which the bound is skipped (memory/time).
MAX_CELLS = 8_000_000


@dataclass(frozen=True)
class LagrangianBound:
    """The best Lagrangian value found, its multipliers, and how many rounds ran."""

    value: float
    multipliers: np.ndarray  # (groups,) μ of the best value
    rounds: int  # rounds run


def split_assignment_value(data: RelaxationData, pieces_of: np.ndarray, scale: int = 1,
                           max_cells: int = MAX_CELLS) -> tuple[float, np.ndarray] | None:
    """value(μ) of the module docstring for ``μ_i = pieces_of[i] / scale − 1`` (``pieces_of ≥ scale``),
    and the estimate of every group in the relaxation's solution.

    The estimate of a group is that of its earliest piece (base + the work of the pieces before it
    on its queue); None when the matrix would be too large or every assignment uses a forbidden cell."""
    from planner.queueing.compiled import assignment_with_duals  # lazy: numba's import is slow

    num_queues, n = data.work.shape
    owner = np.repeat(np.arange(n), pieces_of)
    pieces = len(owner)
    count = pieces_of[owner].astype(float)
    piece_work = data.work[:, owner] / count[None, :]
    correction = data.work[:, owner] * ((count - 1.0) / (2.0 * count))[None, :]
    piece_base = data.base[:, owner] - correction
    forbidden = data.forbidden[:, owner]
    big = 1e6 * (float(np.abs(piece_base).max(initial=0.0)) + float(data.work.max(initial=0.0)) * pieces + 1.0)
    depth = min(pieces, int(DEPTH_FACTOR * -(-pieces // num_queues)) + 8)
    while True:
        if num_queues * depth * pieces > max_cells:
            return None
        r = np.arange(depth, dtype=float)
        cost = piece_work.T[:, :, None] * r[None, None, :] + piece_base.T[:, :, None]
        cost = np.where(forbidden.T[:, :, None], big, cost).reshape(pieces, -1)
        column_of_row, row_dual, _ = assignment_with_duals(np.ascontiguousarray(cost))
        chosen = cost[np.arange(pieces), column_of_row]
        if (chosen >= big).any():
            return None
        beyond = np.where(forbidden, np.inf, piece_work * depth + piece_base)
        if depth >= pieces or (beyond - row_dual[None, :] >= -1e-9).all():
            break
        depth = min(pieces, 2 * depth)
    multipliers = pieces_of / scale - 1.0
    value = float(chosen.sum()) / scale - float(data.slo.sum()) - float((multipliers * data.slo).sum())
    queue_of_piece, position = column_of_row // depth, column_of_row % depth
    estimate = np.full(n, np.inf)
    for k in range(num_queues):
        on_queue = np.nonzero(queue_of_piece == k)[0]
        order = on_queue[np.argsort(-position[on_queue], kind="stable")]
        before = np.concatenate([[0.0], np.cumsum(piece_work[k, order])[:-1]])
        group = owner[order]
        np.minimum.at(estimate, group, data.base[k, group] + before)
    return value, estimate


def deadline_lagrangian_bound(problem: QueueingProblem, upper: float, *, rounds: int = DEFAULT_ROUNDS,
                              deadline: float | None = None) -> LagrangianBound | None:
    """The best value(μ) over Polyak subgradient rounds towards ``upper`` (module docstring); None if
    not applicable.  ``upper`` = the penalty of a plan meeting every SLO (the incumbent)."""
    data = relaxation_data(problem)
    if data is None or data.forbidden.all(axis=0).any():
        return None
    n = problem.num_groups
    target = np.zeros(n)  # the continuous multipliers λ; μ = round(λ) (capped)
    step_factor = 1.0
    best: LagrangianBound | None = None
    began = time.perf_counter()
    done = 0
    for _ in range(rounds):
        pace = (time.perf_counter() - began) / done if done else 0.0
        if deadline is not None and done and time.perf_counter() + pace >= deadline:
            break
        multipliers = np.minimum(np.rint(target).astype(np.int64), MAX_MULTIPLIER)
        cap = int(MAX_EXTRA_PIECES_SHARE * n)
        if multipliers.sum() > cap:  # keep the piece count bounded: scale the multipliers down
            multipliers = multipliers * cap // int(multipliers.sum())
        outcome = split_assignment_value(data, 1 + multipliers)
        done += 1
        if outcome is None:
            break
        value, estimate = outcome
        if best is None or value > best.value + 1e-9:
            best = LagrangianBound(value, multipliers.astype(float), done)
        else:
            step_factor *= STEP_DECAY
        subgradient = estimate - data.slo
        subgradient = np.where((target <= 0.0) & (subgradient < 0.0), 0.0, subgradient)
        norm = float(subgradient @ subgradient)
        if norm <= 1e-12 or best.value >= upper - 1e-9 or step_factor < MIN_STEP_FACTOR:
            break
        step = step_factor * max(upper - value, 0.0) / norm
        target = np.clip(target + step * subgradient, 0.0, MAX_MULTIPLIER + 1.0)
    if best is None:
        return None
    return LagrangianBound(best.value, best.multipliers, done)
