"""Placement heuristics; each returns the same `PlacementSolution` type as the MIP.

Constraint-aware policies open a new worker when nothing fits:

* ``best_fit`` — Aladdin Alg. 1: new requests in arrival order; workers sorted by
  ``capacity_norm`` = ‖(batch size, w·context)‖₂ with w = k3/k2 (FORMULATIONS.md
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

from planner.errors import InfeasibleError
from planner.placement.bounds import lower_bound, precheck
from planner.placement.problem import PlacementArrays, PlacementProblem
from planner.placement.solution import PlacementSolution
from planner.placement.state import WorkerLoad, first_new_label, ongoing_loads


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


def _greedy(
    problem: PlacementProblem,
    order: list[int],
    rank: Callable[[list[WorkerLoad]], list[WorkerLoad]],
    method: str,
) -> PlacementSolution:
    """Place requests in ``order`` on the first worker of ``rank(workers)`` that fits; else open one."""
    a = problem.arrays
    _require_feasible(a)
    loads = ongoing_loads(a)
    next_label = first_new_label(a)
    for i in order:
        target = next((l for l in rank(loads) if l.fits(int(i))), None)
        if target is None:
            target = WorkerLoad(a, next_label)
            next_label += 1
            loads.append(target)
        target.add(int(i))
    return _finish(problem, loads, method)


def best_fit(problem: PlacementProblem) -> PlacementSolution:
    """Aladdin Alg. 1: arrival order, most loaded worker (by capacity_norm) first."""
    weight = capacity_norm_weight(problem)
    order = sorted(problem.arrays.new_indices, key=lambda i: (problem.requests[i].arrival_s, i))
    return _greedy(problem, order, lambda loads: sorted(loads, key=lambda l: (-l.capacity_norm(weight), l.label)),
                   "best_fit")


def normalised_size(a: PlacementArrays) -> np.ndarray:
    """Largest share of one worker a request takes in any dimension (ATGT, KV peak, prefill)."""
    t_max = float(a.atgt_limit.max())
    shares = [a.atgt_load / (t_max - a.decode_base_s), a.kv_peak_alone() / a.kv_capacity]
    if a.colocated and np.isfinite(a.ttft_limit[a.is_new]).any():
        t = float(a.ttft_limit[a.is_new].max())
        shares.append(a.prefill_load / max(t - a.prefill_base_s, 1e-12))
    return np.max(np.vstack(shares), axis=0)


def first_fit_decreasing(problem: PlacementProblem) -> PlacementSolution:
    """Largest normalised size first, each on the first worker (in opening order) where it fits."""
    size = normalised_size(problem.arrays)
    order = sorted(problem.arrays.new_indices, key=lambda i: (-size[i], i))
    return _greedy(problem, order, lambda loads: loads, "first_fit_decreasing")


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
    problem: PlacementProblem, num_workers: int, make_chooser: Callable[[], Chooser], seed: int
) -> list[WorkerLoad] | None:
    """Route new requests over ``num_workers`` workers; None as soon as a constraint breaks."""
    a = problem.arrays
    loads = ongoing_loads(a)
    label = first_new_label(a)
    while len(loads) < num_workers:
        loads.append(WorkerLoad(a, label))
        label += 1
    chooser = make_chooser()
    rng = np.random.default_rng(seed)
    for i in sorted(a.new_indices, key=lambda i: (problem.requests[i].arrival_s, i)):
        target = chooser(loads, int(i), rng)
        if not target.fits(int(i)):
            return None
        target.add(int(i))
    return [l for l in loads if l.requests]


#: Load balancers are tried on pools of up to K + 4·(new requests) workers.
POOL_SEARCH_FACTOR = 4


def _smallest_pool(problem: PlacementProblem, method: str, make_chooser: Callable[[], Chooser], seed: int) -> PlacementSolution:
    a = problem.arrays
    _require_feasible(a)
    start = max(lower_bound(a).value, a.num_ongoing_workers, 1)
    stop = a.num_ongoing_workers + POOL_SEARCH_FACTOR * max(len(a.new_indices), 1)
    for w in range(start, stop + 1):
        loads = _route_fixed_pool(problem, w, make_chooser, seed)
        if loads is not None:
            return _finish(problem, loads, method)
    raise InfeasibleError(
        f"{method} meets every SLO at no pool size from {start} to {stop} workers: its routing ignores the "
        "constraints, so some worker always receives a request it cannot serve"
    )


def jsq(problem: PlacementProblem, seed: int = 0) -> PlacementSolution:
    return _smallest_pool(problem, "jsq", lambda: _jsq, seed)


def power_of_two(problem: PlacementProblem, seed: int = 0) -> PlacementSolution:
    return _smallest_pool(problem, "power_of_two", lambda: _power_of_two, seed)


def round_robin(problem: PlacementProblem, seed: int = 0) -> PlacementSolution:
    return _smallest_pool(problem, "round_robin", _RoundRobin, seed)


HEURISTICS: dict[str, Callable[..., PlacementSolution]] = {
    "best_fit": best_fit,
    "first_fit_decreasing": first_fit_decreasing,
    "jsq": jsq,
    "power_of_two": power_of_two,
    "round_robin": round_robin,
}

#: Heuristics that respect every constraint by construction (used for the MIP warm start).
CONSTRAINT_AWARE = ("best_fit", "first_fit_decreasing")
