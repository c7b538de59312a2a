"""Scale-up when the SLOs cannot all be met: a proven lower bound on the extra instances, and a fleet
with a validated plan (the witness).

**Capacity bound** (`capacity_lower_bound`).  Take a threshold d and the groups D(d) whose SLO is at
most d.  On one queue g, every group of D(d) placed there must start by d (``start`` deadlines):
the last of them to start, L, starts after the queue's busy time and the work of every other
D(d) group on g, so

    Σ_{i ∈ D(d) on g} W[g,i]  ≤  d − e_g + W[g,L]  ≤  d − e_g + max_{i ∈ D(d)} W[g,i]  =: cap_g(d),

with e_g the earliest start on g (its busy time; the swap time S for a new instance, which loads
its first model before serving anything).  In ``completion`` mode a group also finishes its own
work by d, so ``cap_g(d) = d − e_g``.  A cell (g, i) is impossible when even the head of g is too
late for i (``e_g + S·[model_i ≠ loaded_g] > slo_i``, plus ``W + tail`` in completion mode).
Relaxing "each group on one queue" to fractions y ≥ 0 gives, for every d in a set of thresholds,

    Σ_g y^d_{g,i} = 1  (i ∈ D(d)),    Σ_{i ∈ D(d)} W[g,i]·y^d_{g,i} ≤ cap_g(d)  (existing queue g),
    Σ_{i ∈ D(d)} W[t,i]·y^d_{t,i} ≤ n_t · cap_t(d)   (the n_t new instances of type t, identical),

plus the swap rows of `define_swap_capacity` (an existing queue that serves a D(d) group of another
model than its loaded one loses the swap time S_g of that capacity), and ``min Σ_t cost_t·n_t`` over
integers ``0 ≤ n_t ≤ extra_available_t`` is a lower bound on the cost of every fleet whose plan
meets every SLO (every such plan satisfies the rows).  Any subset of thresholds keeps it valid; `MAX_THRESHOLDS` distinct SLO values (evenly spread) are used.  When
even every candidate instance leaves the rows infeasible, no fleet can meet the SLOs; when the
rows with n = 0 are infeasible, the current fleet provably cannot.

**Witness** (`witness_fleet`).  Fleets (extra instances per type) in order of cost, then of count
(enumerated lazily, `fleets_by_cost`), from the bound's cost upwards: for each, the baselines (EDF,
greedy, FCFS) on the fleet made of the existing instances plus the chosen candidates, each followed
by the relocate/exchange descent of
`planner.queueing.local_search` (which minimises lateness first); the first plan the independent
validator accepts with every SLO hard is the witness.  Its cost is an upper bound on the cheapest
fleet; when it equals the capacity bound the scale-up is proven minimal.  Deterministic.
"""

from __future__ import annotations

import heapq
import math
import time
from dataclasses import dataclass, replace

import numpy as np

from planner.core.work import WorkClock
from planner.queueing import effort
from planner.queueing.heuristics import edf, fcfs, greedy
from planner.queueing.local_search import improve_plan
from planner.queueing.problem import QueueAssignment, QueueingProblem
from planner.queueing.validator import validate_assignment
from planner.solver import ModelBuilder, SolveOptions, SolveStatus, solve

#: Distinct SLO values used as thresholds d (evenly spread over the sorted values; any subset is valid).
MAX_THRESHOLDS = 40
#: Fleets tried by the witness search at most.
MAX_WITNESS_FLEETS = 64
#: The capacity bound is skipped under a time limit when building its model would take more than this
#: share of the limit and more than `BOUND_BUILD_FLOOR_SECONDS` (`bound_model_seconds`).
BOUND_BUILD_SHARE = 0.5
BOUND_BUILD_FLOOR_SECONDS = 1.0
#: Fleets looked at by the witness search at most, the ones cheaper than the capacity bound (skipped) included.
MAX_FLEETS_SCANNED = 100_000


@dataclass(frozen=True)
class CapacityBound:
    """Least cost of extra instances any plan meeting every SLO needs (None: none suffices)."""

    cost: float | None
    extra_instances: dict[str, int]  # the bound's own (fractional-assignment) fleet, not a plan
    current_fleet_infeasible: bool  # the rows with no extra instance are infeasible: SLOs provably unmeetable
    thresholds: int


@dataclass(frozen=True)
class Witness:
    extra_instances: dict[str, int]
    cost: float
    problem: QueueingProblem  # existing instances + the chosen candidates (none optional)
    plan: QueueAssignment
    fleets_tried: int


def _thresholds(problem: QueueingProblem) -> np.ndarray:
    values = np.unique(problem.slo())
    if values.size > MAX_THRESHOLDS:
        values = values[np.unique(np.linspace(0, values.size - 1, MAX_THRESHOLDS).round().astype(int))]
    return values


def _queue_classes(problem: QueueingProblem):
    """(work row, tail row, earliest start per group, cap offset, type or None) per existing queue and per type."""
    group_models = [g.model for g in problem.groups]
    classes = []
    for q in problem.queues:
        if q.optional:
            continue
        typ = problem.types[q.type_index]
        swap = np.array([typ.swap_time_s if m != q.loaded_model else 0.0 for m in group_models])
        classes.append((problem.work_s[q.type_index], problem.tail_s[q.type_index], q.busy_s + swap, q.busy_s, None))
    for t, typ in enumerate(problem.types):
        if typ.extra_available > 0:
            s = np.full(problem.num_groups, typ.swap_time_s)
            classes.append((problem.work_s[t], problem.tail_s[t], s, typ.swap_time_s, t))
    return classes


def define_swap_capacity(mb: ModelBuilder, tag: str, cols: np.ndarray, work: np.ndarray, swap: np.ndarray,
                         cap: float) -> None:
    """Rows ``swap_link`` and ``capacity_swap`` of one existing queue g and threshold d::

        y^d_{g,i} ≤ z^d_g  (i of a model other than the loaded one),   z^d_g ∈ {0, 1},
        Σ_{i ∈ D(d)} W[g,i]·y^d_{g,i} + S_g·z^d_g ≤ cap_g(d).

    If a group of another model is among g's D(d) groups, a swap precedes it, so it precedes the
    last of them to start (L, or that group itself): L starts at or after ``e_g + S_g + Σ_{other
    D(d) groups on g} W``, and the capacity of the module docstring shrinks by S_g.  Every plan meeting
    the SLOs satisfies the rows with z = [such a group is on g]; the shares y stay fractional.
    ``swap`` = S_g for those groups, 0 for groups of the loaded model (no row then)."""
    foreign = np.flatnonzero(swap > 0)
    if not foreign.size:
        return
    z = mb.add_variables(f"swap_{tag}", 1, lower=0.0, upper=1.0, integer=True)
    mb.add_constraints(f"swap_link_{tag}", foreign.size, np.repeat(np.arange(foreign.size), 2),
                       np.column_stack([cols[foreign], np.full(foreign.size, z.start)]).ravel(),
                       np.tile([1.0, -1.0], foreign.size), upper=0.0)
    mb.add_constraints(f"capacity_swap_{tag}", 1, np.zeros(cols.size + 1, int), np.append(cols, z.start),
                       np.append(work, float(swap[foreign].max())), upper=cap)


def _bound_model(problem: QueueingProblem):
    mb = ModelBuilder("queueing-capacity-bound")
    types = problem.types
    n = mb.add_variables("extra_instances", len(types), lower=0.0,
                         upper=[float(t.extra_available) for t in types], integer=True,
                         cost=[t.cost_per_instance for t in types])
    slo = problem.slo()
    completion = problem.deadline == "completion"
    classes = _queue_classes(problem)
    for d in _thresholds(problem):
        members = np.flatnonzero(slo <= d)
        i_parts, w_parts = [], []  # cells (group i, work), class by class
        for k, (work, tail, earliest, _, _) in enumerate(classes):
            finite = np.isfinite(work[members]) & np.isfinite(tail[members])
            head = earliest[members] + (np.where(finite, work[members] + tail[members], 0.0) if completion else 0.0)
            ok = members[finite & (head <= slo[members] + 1e-9)]  # even the head of the queue is in time
            i_parts.append(ok)
            w_parts.append(work[ok].astype(float))
        i_of, w_of = np.concatenate(i_parts), np.concatenate(w_parts)
        if not i_of.size:
            if members.size:
                return None
            continue
        y = mb.add_variables(f"share_d{d:g}", i_of.size, lower=0.0, upper=1.0)
        mb.add_constraints(f"assign_d{d:g}", len(members), np.searchsorted(members, i_of), y.start + np.arange(i_of.size),
                           np.ones(i_of.size), lower=1.0, upper=1.0,
                           label=lambda r, members=members: f"group {problem.groups[int(members[r])].name}")
        ends = np.cumsum([part.size for part in i_parts])
        for k, (_, _, _, offset, t) in enumerate(classes):
            mine = np.arange(ends[k] - i_parts[k].size, ends[k])  # the cells of class k (contiguous)
            if not mine.size:
                continue
            cap = d - offset + (0.0 if completion else float(w_of[mine].max()))
            cap = max(cap, 0.0)
            cols = y.start + mine
            if t is None:
                mb.add_constraints(f"capacity_d{d:g}_q{k}", 1, np.zeros(cols.size, int), cols, w_of[mine], upper=cap)
                define_swap_capacity(mb, f"d{d:g}_q{k}", cols, w_of[mine], (classes[k][2] - offset)[i_of[mine]], cap)
            else:
                mb.add_constraints(f"capacity_d{d:g}_t{t}", 1, np.zeros(cols.size + 1, int),
                                   np.append(cols, n.start + t), np.append(w_of[mine], -cap), upper=0.0)
    return mb.build(), n


def bound_model_seconds(problem: QueueingProblem) -> float:
    """Estimated seconds to build the capacity bound's model and hand it to the solver: a few rows per
    (threshold, queue class) (`planner.queueing.effort.CAPACITY_ROWS_PER_CLASS`) and one share
    variable per (threshold d, group of D(d), queue class) at most (`effort.CAPACITY_PER_CELL`)."""
    classes = sum(1 for q in problem.queues if not q.optional) + sum(1 for t in problem.types if t.extra_available > 0)
    thresholds = _thresholds(problem)
    members = int(np.searchsorted(np.sort(problem.slo()), thresholds, side="right").sum())  # Σ_d |D(d)|
    return (effort.CAPACITY_ROWS_PER_CLASS * classes * len(thresholds)
            + effort.CAPACITY_PER_CELL * classes * members)


def capacity_lower_bound(problem: QueueingProblem, *, solver: str = "highs", time_limit: float | None = 10.0,
                         threads: int | None = None) -> CapacityBound | None:
    """The capacity bound of the module docstring; None if the solver gave no answer in time, or if
    under ``time_limit`` the model could not even be built in time (`bound_model_seconds` above both
    `BOUND_BUILD_FLOOR_SECONDS` and `BOUND_BUILD_SHARE` of the limit: thousands of existing queues).
    ``time_limit`` covers both solves (with and without extra instances)."""
    started = time.perf_counter()
    if time_limit is not None and bound_model_seconds(problem) > max(BOUND_BUILD_FLOOR_SECONDS,
                                                                     BOUND_BUILD_SHARE * time_limit):
        return None
    built = _bound_model(problem)
    if built is None:
        return CapacityBound(None, {}, True, 0)
    model, n = built
    out = solve(model, solver, SolveOptions(time_limit=time_limit, threads=threads))
    if out.status == SolveStatus.INFEASIBLE:
        return CapacityBound(None, {}, True, len(_thresholds(problem)))
    if out.status != SolveStatus.OPTIMAL or out.x is None:
        return None
    counts = np.round(out.x[n.start:n.start + len(problem.types)]).astype(int)
    extra = {problem.types[t].name: int(c) for t, c in enumerate(counts) if c > 0}
    infeasible_now = False
    if counts.sum() > 0:  # the same rows with no extra instance allowed
        upper = model.col_upper.copy()
        upper[n.columns] = 0.0
        left = None if time_limit is None else max(time_limit - (time.perf_counter() - started), 0.01)
        z = solve(replace(model, col_upper=upper), solver, SolveOptions(time_limit=left, threads=threads))
        infeasible_now = z.status == SolveStatus.INFEASIBLE
    return CapacityBound(float(out.objective), extra, infeasible_now, len(_thresholds(problem)))


def fleet_problem(problem: QueueingProblem, extra: dict[int, int]) -> QueueingProblem:
    """The existing instances plus ``extra[t]`` new instances of type t (names ``type+k``), none optional."""
    candidates = problem.with_candidates()
    taken: dict[int, int] = {}
    queues = []
    for q in candidates.queues:
        if not q.optional:
            queues.append(q)
        elif taken.get(q.type_index, 0) < extra.get(q.type_index, 0):
            taken[q.type_index] = taken.get(q.type_index, 0) + 1
            queues.append(replace(q, optional=False))
    return candidates._replace(queues=tuple(queues), objective="penalty")


def _fleet_key(problem: QueueingProblem, counts: tuple[int, ...]) -> tuple[float, int, tuple[int, ...]]:
    return sum(problem.types[t].cost_per_instance * k for t, k in enumerate(counts)), sum(counts), counts


def fleets_by_cost(problem: QueueingProblem):
    """Every fleet of extra instances (count per type, ``0 ≤ k_t ≤ extra_available_t``) as (cost, counts),
    in order of cost, then number of instances, then counts — lazily, best first from the empty
    fleet (a heap): the full product of the ranges can hold ~10¹² fleets.  Every fleet but the empty one
    has a predecessor (one instance fewer) with a smaller key, so the order is exact."""
    size = len(problem.types)
    start = (0,) * size
    heap = [_fleet_key(problem, start)]
    seen = {start}
    while heap:
        cost, _, counts = heapq.heappop(heap)
        yield cost, counts
        for t in range(size):
            if counts[t] < problem.types[t].extra_available:
                more = counts[:t] + (counts[t] + 1,) + counts[t + 1:]
                if more not in seen:
                    seen.add(more)
                    heapq.heappush(heap, _fleet_key(problem, more))


def witness_fleet(problem: QueueingProblem, *, min_cost: float = 0.0, clock: WorkClock | None = None) -> Witness | None:
    """The cheapest fleet (from ``min_cost`` up) on which a baseline + descent meets every SLO.

    Each fleet tried is charged to ``clock`` (nominal seconds of `planner.queueing.effort`, so the
    search is repeatable); a further fleet is tried only while the clock allows it."""
    types = problem.types
    tried = 0
    for scanned, (cost, counts) in enumerate(fleets_by_cost(problem)):
        if scanned >= MAX_FLEETS_SCANNED or (clock is not None and scanned % 1024 == 1023 and not clock.allows()):
            return None
        if cost < min_cost - 1e-9:
            continue
        if tried >= MAX_WITNESS_FLEETS or (clock is not None and not clock.allows()):
            return None
        tried += 1
        sub = fleet_problem(problem, {t: k for t, k in enumerate(counts) if k})
        for baseline in (edf, greedy, fcfs):
            start = baseline(sub)
            plan = improve_plan(sub, start, clock=clock)
            if clock is not None:
                clock.charge(effort.baseline_seconds(sub.num_queues, sub.num_groups) / 3
                             + effort.replay_seconds(sub.num_groups))
            if validate_assignment(sub, plan).feasible:
                extra = {types[t].name: int(k) for t, k in enumerate(counts) if k}
                return Witness(extra, float(cost), sub, plan, tried)
    return None


def describe_bound(bound: CapacityBound | None) -> str:
    if bound is None:
        return "capacity bound: no answer in time"
    if bound.cost is None:
        return "capacity bound: even every candidate instance cannot meet every SLO"
    return f"capacity bound: extra instances cost at least {bound.cost:g}" + (
        " (the current fleet cannot meet every SLO)" if bound.current_fleet_infeasible else "")


def is_at_bound(cost: float, bound: CapacityBound | None) -> bool:
    return bound is not None and bound.cost is not None and math.isclose(cost, bound.cost, rel_tol=1e-9, abs_tol=1e-9)
