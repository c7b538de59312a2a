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
so far the next round would end after ``share`` of the time limit of ``clock`` (a
`planner.core.work.WorkClock`: nominal seconds from counted Hungarian steps and matrix cells,
`planner.queueing.effort`, so a time-limited run is repeatable).

The relaxation's solution at the best multipliers is also read as a plan (`relaxation_sequences`,
repaired by local search in `planner.queueing.certified`: the Lagrangian heuristic), and its LP
duals (`solve_split_assignment`) drive reduced-cost fixing in `planner.queueing.lagrangian_fixing`.

Measured limit (400 × 8, seed 0): on the 45-group Llama-2-70B queue alone (one model, no swaps:
1|d̄_j|ΣS_j, solved exactly by Smith's backward rule) the best integer-μ value stays 10.0 s below
the optimum and even continuous μ (exact Smith-ratio Lagrangian, 20,000 subgradient steps) 4.4 s
below, against a 0.01 % budget of ~0.4 s for the whole instance: dualising the SLOs cannot certify
the target size; a per-queue exact treatment of the deadlines (column generation over per-queue
group sets, or branching) is needed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.core.work import WorkClock
from planner.queueing import effort
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
    sequences: tuple[tuple[int, ...], ...] = ()  # the relaxation's plan at the best μ (`relaxation_sequences`)


def relaxation_sequences(num_queues: int, group_of: np.ndarray, queue_of: np.ndarray,
                         position: np.ndarray) -> tuple[tuple[int, ...], ...]:
    """A plan read off an assignment relaxation (a start for the local search, the Lagrangian heuristic).

    Row k (a group or a piece of group ``group_of[k]``) sits at (usable queue ``queue_of[k]``,
    position ``position[k]`` from the end).  Each group goes to the queue of its earliest piece
    (the largest position), and every queue lists its groups by decreasing position.  The plan may
    break SLOs or need extra swaps; the caller repairs it by local search and validates it."""
    earliest: dict[int, tuple[int, int]] = {}
    for k in range(len(group_of)):
        group, key = int(group_of[k]), (int(position[k]), -int(queue_of[k]))
        if group not in earliest or key > earliest[group]:
            earliest[group] = key
    sequences: list[list[int]] = [[] for _ in range(num_queues)]
    for group in sorted(earliest, key=lambda i: (-earliest[i][0], i)):
        sequences[-earliest[group][1]].append(group)
    return tuple(tuple(seq) for seq in sequences)


@dataclass(frozen=True)
class SplitAssignment:
    """The min-cost assignment of pieces to (usable queue, position from the end), with its LP duals.

    Row k is a piece of group ``owner[k]``; column ``g · depth + r`` is position r of usable queue g.
    ``row_dual[k] + column_dual[g, r] ≤ cost`` on every cell (``column_dual ≤ 0``, 0 on unused
    columns and on the unsolved positions ``r ≥ depth``, dual feasible there because the cost is
    nondecreasing in r and ``cost(r = depth) ≥ row_dual``, or ``depth`` = pieces)."""

    owner: np.ndarray  # (pieces,)
    piece_work: np.ndarray  # (queues, pieces)
    depth: int
    column_of_row: np.ndarray  # (pieces,)
    row_dual: np.ndarray  # (pieces,)
    column_dual: np.ndarray  # (queues, depth)
    total: float  # the assignment's cost = Σ row_dual + Σ column_dual


def solve_split_assignment(data: RelaxationData, pieces_of: np.ndarray,
                           max_cells: int = MAX_CELLS, clock: WorkClock | None = None) -> SplitAssignment | None:
    """The split-group assignment of the module docstring; None when the matrix would be too large or
    every assignment uses a forbidden cell."""
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
        column_of_row, row_dual, column_dual, steps = assignment_with_duals(np.ascontiguousarray(cost))
        if clock is not None:
            clock.charge(effort.assignment_seconds(steps, cost.size, pieces))
        chosen = cost[np.arange(pieces), column_of_row]
        if (chosen >= big).any():
            return None
        beyond = np.where(forbidden, np.inf, piece_work * depth + piece_base)
        if depth >= pieces or (beyond - row_dual[None, :] >= -1e-9).all():
            break
        depth = min(pieces, 2 * depth)
    return SplitAssignment(owner, piece_work, depth, column_of_row, row_dual, column_dual.reshape(num_queues, depth),
                           float(chosen.sum()))


def split_assignment_value(data: RelaxationData, pieces_of: np.ndarray, scale: int = 1,
                           max_cells: int = MAX_CELLS, with_plan: bool = False,
                           clock: WorkClock | None = None) -> tuple | None:
    """value(μ) of the module docstring for ``μ_i = pieces_of[i] / scale − 1`` (``pieces_of ≥ scale``),
    and the estimate of every group in the relaxation's solution (and, with ``with_plan``, the
    relaxation's plan per usable queue, `relaxation_sequences`).

    The estimate of a group is that of its earliest piece (base + the work of the pieces before it
    on its queue); None when the matrix would be too large or every assignment uses a forbidden cell."""
    solved = solve_split_assignment(data, pieces_of, max_cells, clock)
    if solved is None:
        return None
    num_queues, n = data.work.shape
    owner, depth, column_of_row = solved.owner, solved.depth, solved.column_of_row
    multipliers = pieces_of / scale - 1.0
    value = solved.total / scale - float(data.slo.sum()) - float((multipliers * data.slo).sum())
    queue_of_piece, position = column_of_row // depth, column_of_row % depth
    estimate = np.full(n, np.inf)
    for k in range(num_queues):
        on_queue = np.nonzero(queue_of_piece == k)[0]
        order = on_queue[np.argsort(-position[on_queue], kind="stable")]
        before = np.concatenate([[0.0], np.cumsum(solved.piece_work[k, order])[:-1]])
        group = owner[order]
        np.minimum.at(estimate, group, data.base[k, group] + before)
    if with_plan:
        return value, estimate, relaxation_sequences(num_queues, owner, queue_of_piece, position)
    return value, estimate


def deadline_lagrangian_bound(problem: QueueingProblem, upper: float, *, rounds: int = DEFAULT_ROUNDS,
                              clock: WorkClock | None = None, share: float = 1.0) -> LagrangianBound | None:
    """The best value(μ) over Polyak subgradient rounds towards ``upper`` (module docstring); None if
    not applicable.  ``upper`` = the penalty of a plan meeting every SLO (the incumbent)."""
    data = relaxation_data(problem)
    if data is None or data.forbidden.all(axis=0).any():
        return None
    n = problem.num_groups
    target = np.zeros(n)  # the continuous multipliers λ; μ = round(λ) (capped)
    step_factor = 1.0
    best: LagrangianBound | None = None
    began = clock.spent if clock is not None else 0.0
    done = 0
    for _ in range(rounds):
        if clock is not None and done and not clock.allows((clock.spent - began) / done, share):
            break
        multipliers = np.minimum(np.rint(target).astype(np.int64), MAX_MULTIPLIER)
        cap = int(MAX_EXTRA_PIECES_SHARE * n)
        if multipliers.sum() > cap:  # keep the piece count bounded: scale the multipliers down
            multipliers = multipliers * cap // int(multipliers.sum())
        outcome = split_assignment_value(data, 1 + multipliers, with_plan=True, clock=clock)
        done += 1
        if outcome is None:
            break
        value, estimate, sequences = outcome
        if best is None or value > best.value + 1e-9:
            best = LagrangianBound(value, multipliers.astype(float), done, sequences)
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
    return LagrangianBound(best.value, best.multipliers, done, best.sequences)
