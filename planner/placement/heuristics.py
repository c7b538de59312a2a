"""Placement heuristics; each returns the same `PlacementSolution` type as the MIP.

Constraint-aware policies open a new worker when nothing fits:

* ``best_fit`` — Aladdin Alg. 1: new requests in arrival order; workers sorted by
  ``capacity_norm`` = ‖(batch size, w·context)‖₂ with w = k3/k2 (docs/formulations.md
  §1.5 [R]) in descending order; the request goes to the first (most loaded)
  worker where every constraint family still holds.
* ``first_fit_decreasing`` — requests by decreasing normalised size (the
  largest of their ATGT, KV-peak and prefill shares of a worker), each to the
  first worker, in opening order, where it fits.

Load-balancing policies of the baselines do not look at constraints; they
route over a fixed pool of W workers.  Their worker count is the smallest W
(from the lower bound upward) at which their routing meets every SLO and KV
limit — "the workers needed for P100 SLO attainment", the paper's metric:

* ``jsq`` — join the worker with the fewest outstanding requests (ties: lowest label).
* ``power_of_two`` — sample two workers uniformly (seeded), join the one with
  fewer predicted outstanding decode tokens [R].
* ``round_robin`` — cycle over the workers.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from planner.errors import InfeasibleError, PlannerError
from planner.placement import effort
from planner.placement.bounds import lower_bound, precheck
from planner.placement.problem import PlacementArrays, PlacementProblem, normalised_size
from planner.placement.solution import PlacementSolution
from planner.placement.state import LoadTable, WorkerLoad, first_new_label, ongoing_loads


def _finish(problem: PlacementProblem, loads: list[WorkerLoad], method: str) -> PlacementSolution:
    assignment = np.full(problem.num_requests, -1, dtype=np.int64)
    for load in loads:
        for i in load.requests:
            assignment[i] = load.label
    return PlacementSolution.from_array(
        problem.arrays.request_ids, assignment, method, problem.worker.tensor_parallel
    )


def _require_feasible(arrays: PlacementArrays) -> None:
    problems = precheck(arrays)
    if problems:
        raise InfeasibleError(problems[0] + (f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""))


def capacity_norm_weight(problem: PlacementProblem) -> float:
    """w = k3/k2: context tokens in request-equivalents of marginal decode time [R]."""
    k2 = problem.cost.decode_s_per_request
    k3 = problem.cost.decode_s_per_context_token
    return k3 / k2 if k2 > 0 else 1.0


def _greedy(problem: PlacementProblem, order: list[int], by_norm: bool, method: str,
            work: dict | None = None) -> PlacementSolution:
    """Place requests in ``order`` on the first worker that fits; else open one.

    Workers are tried most loaded first by ``capacity_norm`` (ties: lowest label) when ``by_norm``,
    else in opening order.  `LoadTable` makes the same fit decisions as `WorkerLoad`, vectorised
    over the workers.  ``work`` (optional) receives the work counts for the effort accounting.
    """
    a = problem.arrays
    _require_feasible(a)
    table = LoadTable(a, capacity_norm_weight(problem) if by_norm else 1.0)
    assignment = np.array(a.ongoing_worker, copy=True)
    next_label = first_new_label(a)
    for i in order:
        i = int(i)
        n = table.n
        ok = table.scalar_fits(i)
        if by_norm:
            ranked = np.lexsort((np.arange(n), -table.norm[:n]))
            rows = ranked[ok[ranked]]
        else:
            rows = np.flatnonzero(ok)
        row = table.first_fit(i, rows)
        if row is None:
            row = table.open(next_label)
            next_label += 1
        table.add(row, i)
        assignment[i] = table.labels[row]
    if work is not None:
        work.update(rows_checked=table.rows_checked, kv_checks=table.kv_checks, kv_cells=table.kv_cells,
                    workers=table.n)
    return PlacementSolution.from_array(a.request_ids, assignment, method, problem.worker.tensor_parallel)


def best_fit(problem: PlacementProblem, work: dict | None = None) -> PlacementSolution:
    """Aladdin Alg. 1: arrival order, most loaded worker (by capacity_norm) first."""
    order = sorted(problem.arrays.new_indices, key=lambda i: (problem.requests[i].arrival_s, i))
    return _greedy(problem, order, True, "best_fit", work)


def first_fit_decreasing(problem: PlacementProblem, work: dict | None = None) -> PlacementSolution:
    """Largest normalised size first, each on the first worker (in opening order) where it fits."""
    size = normalised_size(problem.arrays)
    order = sorted(problem.arrays.new_indices, key=lambda i: (-size[i], i))
    return _greedy(problem, order, False, "first_fit_decreasing", work)


Chooser = Callable[[list[WorkerLoad], int, np.random.Generator], WorkerLoad]


def _jsq(loads: list[WorkerLoad], i: int, rng: np.random.Generator) -> WorkerLoad:
    return min(loads, key=lambda l: (l.num_requests, l.label))


def _power_of_two(loads: list[WorkerLoad], i: int, rng: np.random.Generator) -> WorkerLoad:
    if len(loads) == 1:
        return loads[0]
    a, b = rng.choice(len(loads), size=2, replace=False)
    la, lb = loads[int(a)], loads[int(b)]
    return min((la, lb), key=lambda l: (l.outstanding_decode, l.label))


class _RoundRobin:
    def __init__(self) -> None:
        self.next = 0

    def __call__(self, loads: list[WorkerLoad], i: int, rng: np.random.Generator) -> WorkerLoad:
        target = loads[self.next % len(loads)]
        self.next += 1
        return target


def _route_fixed_pool(
    problem: PlacementProblem, num_workers: int, make_chooser: Callable[[], Chooser], seed: int,
    work: dict | None = None,
) -> list[WorkerLoad] | None:
    """Route new requests over ``num_workers`` workers; None as soon as a constraint breaks.

    ``work`` (optional) receives ``routed``: the requests routed, the last one included."""
    a = problem.arrays
    loads = ongoing_loads(a)
    label = first_new_label(a)
    while len(loads) < num_workers:
        loads.append(WorkerLoad(a, label))
        label += 1
    chooser = make_chooser()
    rng = np.random.default_rng(seed)
    routed = 0
    try:
        for i in sorted(a.new_indices, key=lambda i: (problem.requests[i].arrival_s, i)):
            routed += 1
            target = chooser(loads, int(i), rng)
            if not target.fits(int(i)):
                return None
            target.add(int(i))
    finally:
        if work is not None:
            work["routed"] = routed
    return [l for l in loads if l.requests]


#: Load balancers are tried on pools of up to K + 4·(new requests) workers.
POOL_SEARCH_FACTOR = 4


class SearchStopped(PlannerError):
    """A heuristic's search was stopped by its time budget before it found a plan."""


#: ``budget(seconds)``: may a step of about ``seconds`` nominal seconds still run?  ``charge(seconds)``: it ran.
Budget = tuple[Callable[[float], bool], Callable[[float], None]]


def _smallest_pool(problem: PlacementProblem, method: str, make_chooser: Callable[[], Chooser], seed: int,
                   budget: Budget | None = None) -> PlacementSolution:
    """The smallest pool, from the lower bound up, on which the routing meets every constraint.

    With a ``budget`` (`planner.placement.pipeline.solve` under a time limit), each pool size tried is charged
    `effort.pool_attempt_seconds` of its counted work, and the search stops — `SearchStopped` —
    when the next size (estimated as the last one) would not fit: deterministic, like the counts.
    """
    a = problem.arrays
    _require_feasible(a)
    start = max(lower_bound(a).value, a.num_ongoing_workers, 1)
    stop = a.num_ongoing_workers + POOL_SEARCH_FACTOR * max(len(a.new_indices), 1)
    last = 0.0
    for w in range(start, stop + 1):
        if budget is not None and not budget[0](last):
            raise SearchStopped(
                "stopped by the time limit before trying a pool size" if w == start else
                f"stopped by the time limit after pool size {start} (its routing breaks a constraint there)"
                if w == start + 1 else
                f"stopped by the time limit after pool sizes {start} to {w - 1} (its routing breaks a constraint on each)"
            )
        work: dict = {}
        loads = _route_fixed_pool(problem, w, make_chooser, seed, work)
        if budget is not None:
            last = effort.pool_attempt_seconds(method, w, work["routed"])
            budget[1](last)
        if loads is not None:
            return _finish(problem, loads, method)
    raise InfeasibleError(
        f"{method} meets every SLO at no pool size from {start} to {stop} workers: its routing ignores the "
        "constraints, so some worker always receives a request it cannot serve"
    )


def jsq(problem: PlacementProblem, seed: int = 0, budget: Budget | None = None) -> PlacementSolution:
    return _smallest_pool(problem, "jsq", lambda: _jsq, seed, budget)


def power_of_two(problem: PlacementProblem, seed: int = 0, budget: Budget | None = None) -> PlacementSolution:
    return _smallest_pool(problem, "power_of_two", lambda: _power_of_two, seed, budget)


def round_robin(problem: PlacementProblem, seed: int = 0, budget: Budget | None = None) -> PlacementSolution:
    return _smallest_pool(problem, "round_robin", _RoundRobin, seed, budget)


HEURISTICS: dict[str, Callable[..., PlacementSolution]] = {
    "best_fit": best_fit,
    "first_fit_decreasing": first_fit_decreasing,
    "jsq": jsq,
    "power_of_two": power_of_two,
    "round_robin": round_robin,
}

#: Heuristics that respect every constraint by construction (used for the MIP warm start).
CONSTRAINT_AWARE = ("best_fit", "first_fit_decreasing")
