"""Baselines and simulated annealing (Alg. 1) for the priority family.

Baselines (§2.4) — each fixes an order and cuts it greedily into batches of ``b_max`` jobs
(fewer when the token capacity of Eq. 20 is reached):

* ``fcfs``: arrival order (vLLM's FCFS with maximum batch size);
* ``spf``: shortest predicted latency first (``t_exec`` at batch size 1, ascending);
* ``edf``: earliest deadline first (the job's latency SLO: e2e SLO for code, TTFT SLO for chat).

``sa`` is Alg. 1 with the paper's defaults T0 = 500, T_thres = 20, iter = 100, τ = 0.95
(63 temperature levels, 6 300 neighbour evaluations) and the fixes of §2.4:

* the start is the better of J_prio (``spf``) and J_in (``fcfs``), and ``f`` is set to that start's G;
* the iteration counter is reset at every temperature level;
* Metropolis acceptance on a scaled difference: a worse neighbour is accepted with probability
  ``exp(100·(f_new − f)/f / T)`` (the printed rule never accepts a worse neighbour);
* the best plan seen is kept and returned;
* as in the paper, SA stops at J_prio when every job already meets its SLO there.

Operators (one drawn uniformly per iteration):

* squeezeLastIter — a random job outside the first batch moves to the end of the previous batch
  if that batch has fewer than ``b_max`` jobs (boundary shift);
* delayNextIter — a random job moves to the front of the next batch if that has fewer than
  ``b_max`` jobs; [R] a job of the last batch (of size ≥ 2) opens a new last batch, otherwise the
  number of batches could never grow from the all-``b_max`` start;
* randSwapping — two random jobs swap positions.

A neighbour whose batches exceed the token capacity is discarded (counts as an iteration).
Randomness: four uniforms per iteration (operator, two positions, Metropolis test) pre-drawn
from numpy's ``default_rng(seed)`` (`sa_draws`): the same seed gives the same plan.  The loop runs
compiled with numba (`planner.priority.compiled`, ~50× faster than the pure-Python
`simulated_annealing_reference`, which reads the same draws and returns the same plan).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from planner.core.work import WorkClock
from planner.priority.evaluate import FastTables, batches_fit, evaluate, g_per_s, greedy_batches
from planner.priority.problem import PriorityProblem


@dataclass(frozen=True)
class Plan:
    """A raw single-instance plan with its evaluation (internal to the search methods)."""

    order: tuple[int, ...]
    sizes: tuple[int, ...]
    met: int
    total_ms: float

    @property
    def g(self) -> float:
        return g_per_s(self.met, self.total_ms)


@dataclass(frozen=True)
class SAParams:
    initial_temperature: float = 500.0
    threshold_temperature: float = 20.0
    iterations: int = 100
    cooling: float = 0.95
    scale: float = 100.0  # Metropolis on 100·(f_new − f)/f


def _plan_from_order(problem: PriorityProblem, fast: FastTables, order: list[int]) -> Plan:
    sizes = greedy_batches(fast.tokens, order, problem.b_max, problem.token_capacity)
    met, total = evaluate(fast, order, sizes)
    return Plan(tuple(order), tuple(sizes), met, total)


def fcfs(problem: PriorityProblem, seed: int = 0) -> Plan:
    """Arrival order, batches at the maximum size."""
    order = sorted(range(problem.size), key=lambda i: (problem.jobs[i].arrival, i))
    return _plan_from_order(problem, FastTables(problem.tables), order)


def shortest_predicted_first(problem: PriorityProblem, seed: int = 0) -> Plan:
    """Ascending predicted latency t_exec(1, l_i, l_o), batches at the maximum size."""
    exec1 = problem.tables.exec_ms[:, 0]
    order = sorted(range(problem.size), key=lambda i: (exec1[i], i))
    return _plan_from_order(problem, FastTables(problem.tables), order)


def earliest_deadline_first(problem: PriorityProblem, seed: int = 0) -> Plan:
    """Ascending latency SLO (e2e SLO for code jobs, TTFT SLO for chat jobs)."""
    def deadline(i: int) -> float:
        job = problem.jobs[i]
        return job.slo_e2e_ms if job.kind == "e2e" else job.slo_ttft_ms  # type: ignore[return-value]

    order = sorted(range(problem.size), key=lambda i: (deadline(i), i))
    return _plan_from_order(problem, FastTables(problem.tables), order)


def _neighbour(draw: Sequence[float], order: list[int], sizes: list[int], b_max: int) -> tuple[list[int], list[int]] | None:
    """One of the three operators of Alg. 1 applied to copies of (order, sizes); None if not applicable.
    ``draw`` holds the iteration's uniforms: operator, first position, second position (and the
    Metropolis test, used by the caller)."""
    n = len(order)
    op = int(draw[0] * 3)
    if op == 2:  # randSwapping
        if n < 2:
            return None
        a, b = int(draw[1] * n), int(draw[2] * n)
        if a == b:
            return None
        new_order = order[:]
        new_order[a], new_order[b] = new_order[b], new_order[a]
        return new_order, sizes[:]
    pos = int(draw[1] * n)
    batch, start = 0, 0
    while start + sizes[batch] <= pos:
        start += sizes[batch]
        batch += 1
    new_order = order[:]
    new_sizes = sizes[:]
    job = new_order.pop(pos)
    if op == 0:  # squeezeLastIter: to the end of the previous batch
        if batch == 0 or sizes[batch - 1] >= b_max:
            return None
        new_order.insert(start, job)
        new_sizes[batch - 1] += 1
        new_sizes[batch] -= 1
    else:  # delayNextIter: to the front of the next batch (or a new last batch)
        end = start + sizes[batch]
        if batch == len(sizes) - 1:
            if sizes[batch] < 2:
                return None
            new_order.append(job)
            new_sizes.append(1)
        else:
            if sizes[batch + 1] >= b_max:
                return None
            new_order.insert(end - 1, job)
            new_sizes[batch + 1] += 1
        new_sizes[batch] -= 1
    if new_sizes[batch] == 0:
        del new_sizes[batch]
    return new_order, new_sizes


def temperature_levels(params: SAParams) -> list[float]:
    """The temperatures of Alg. 1: T0, T0·τ, … while T ≥ T_thres (63 levels at the defaults)."""
    levels = []
    temperature = params.initial_temperature
    while temperature >= params.threshold_temperature:
        levels.append(temperature)
        temperature *= params.cooling
    return levels


def sa_draws(seed: int, params: SAParams) -> np.ndarray:
    """The uniforms of every SA iteration, one row of four per iteration (operator, two positions,
    Metropolis test), from numpy's ``default_rng(seed)``: the compiled and the reference SA read the
    same numbers, so they return the same plan."""
    rows = len(temperature_levels(params)) * params.iterations
    return np.random.default_rng(seed).random((rows, 4))


def _sa_start(problem: PriorityProblem) -> tuple[Plan, bool]:
    """(start plan, stop at once): the better of J_prio and J_in; stop when J_prio meets every SLO."""
    prio = shortest_predicted_first(problem)
    if prio.met == problem.size:  # every job meets its SLO: the paper stops here
        return prio, True
    arrival = fcfs(problem)
    return (arrival if prio.g < arrival.g else prio), False


def simulated_annealing_reference(problem: PriorityProblem, seed: int = 0, params: SAParams = SAParams()) -> Plan:
    """Alg. 1 in pure Python (the reference the compiled `simulated_annealing` is tested against)."""
    start, done = _sa_start(problem)
    if done:
        return start
    fast = FastTables(problem.tables)
    draws = sa_draws(seed, params).tolist()
    order, sizes = list(start.order), list(start.sizes)
    f = start.g
    best = start
    capacity = problem.token_capacity
    row = 0
    for temperature in temperature_levels(params):
        for _ in range(params.iterations):  # k reset at every level ([P*] fix)
            draw = draws[row]
            row += 1
            move = _neighbour(draw, order, sizes, problem.b_max)
            if move is None:
                continue
            new_order, new_sizes = move
            if capacity is not None and not batches_fit(fast, new_order, new_sizes, capacity):
                continue
            met, total = evaluate(fast, new_order, new_sizes)
            f_new = g_per_s(met, total)
            if f_new > f:
                accept = True
            else:
                scaled = params.scale * (f_new - f) / f if f > 0 else 0.0
                accept = draw[3] < math.exp(scaled / temperature)
            if accept:
                order, sizes, f = new_order, new_sizes, f_new
                if f_new > best.g:
                    best = Plan(tuple(order), tuple(sizes), met, total)
    return best


def simulated_annealing(problem: PriorityProblem, seed: int = 0, params: SAParams = SAParams()) -> Plan:
    """Alg. 1 with the fixes listed in the module docstring, compiled with numba
    (`planner.priority.compiled.anneal`, imported here so that numba loads only when SA runs).
    The returned plan is re-scored by `evaluate` (the single source of truth)."""
    start, done = _sa_start(problem)
    if done:
        return start
    try:
        from planner.priority.compiled import anneal  # lazy: numba's import is slow
    except ImportError:  # numba missing: the reference reads the same draws and returns the same plan
        return simulated_annealing_reference(problem, seed, params)

    tables = problem.tables
    fast = FastTables(tables)
    n = problem.size
    order, sizes, batches, _, _ = anneal(
        tables.exec_ms, np.asarray(fast.slack), tables.tokens,
        -1 if problem.token_capacity is None else int(problem.token_capacity), int(problem.b_max),
        np.asarray(start.order, dtype=np.int64), np.asarray(start.sizes + (0,) * (n + 1 - len(start.sizes)), dtype=np.int64),
        len(start.sizes), np.asarray(temperature_levels(params)), int(params.iterations), float(params.scale),
        sa_draws(seed, params))
    plan_order = [int(j) for j in order]
    plan_sizes = [int(s) for s in sizes[:batches]]
    met, total = evaluate(fast, plan_order, plan_sizes)
    return Plan(tuple(plan_order), tuple(plan_sizes), met, total)


def local_search(problem: PriorityProblem, plan: Plan, max_passes: int = 30, deadline: float | None = None,
                 clock: WorkClock | None = None, share: float = 1.0) -> Plan:
    """Best-improvement descent used to warm-start the exact search (not one of the paper's
    methods): relocate one job to another position (batch sizes kept), swap two jobs, or move
    one batch boundary by one position; repeat while G improves.  Past ``deadline``
    (`time.perf_counter()`; a pass at N = 100 takes seconds) it returns the best plan so far.
    With ``clock`` (a `WorkClock`), every 256 candidates are charged their nominal seconds
    (`planner.priority.effort.evaluations_seconds`) and the descent stops, keeping the best plan so
    far, before a block that would end after ``share`` of the clock's limit — a deterministic stop
    (the clock's wall-clock guard aside, which it records)."""
    import time

    from planner.priority import effort

    fast = FastTables(problem.tables)
    capacity = problem.token_capacity
    best = plan
    for _ in range(max_passes):
        order, sizes = list(best.order), list(best.sizes)
        n = len(order)
        candidates: list[tuple[list[int], list[int]]] = []
        for a in range(n):
            for b in range(n):
                if a != b:
                    moved = order[:]
                    moved.insert(b, moved.pop(a))
                    candidates.append((moved, sizes))
                if a < b:
                    swapped = order[:]
                    swapped[a], swapped[b] = swapped[b], swapped[a]
                    candidates.append((swapped, sizes))
        for k in range(len(sizes) - 1):
            for delta in (-1, 1):
                shifted = sizes[:]
                shifted[k] += delta
                shifted[k + 1] -= delta
                if 0 < shifted[k] <= problem.b_max and 0 <= shifted[k + 1] <= problem.b_max:
                    candidates.append((order, [s for s in shifted if s > 0]))
        if len(sizes) > 0 and sizes[-1] > 1:  # split the last batch
            candidates.append((order, sizes[:-1] + [sizes[-1] - 1, 1]))
        improved = best
        out_of_time = False
        block = effort.evaluations_seconds(256, n)
        for k, (cand_order, cand_sizes) in enumerate(candidates):
            if deadline is not None and k & 255 == 0 and time.perf_counter() > deadline:
                out_of_time = True
                break
            if clock is not None and k & 255 == 0:
                if not clock.allows(block, share):
                    out_of_time = True
                    break
                clock.charge(block)
            if capacity is not None and not batches_fit(fast, cand_order, cand_sizes, capacity):
                continue
            met, total = evaluate(fast, cand_order, cand_sizes)
            if g_per_s(met, total) > improved.g * (1 + 1e-12):
                improved = Plan(tuple(cand_order), tuple(cand_sizes), met, total)
        if improved is best:
            break
        best = improved
        if out_of_time:
            break
    return best


HEURISTICS: dict[str, Callable[[PriorityProblem, int], Plan]] = {
    "sa": simulated_annealing,
    "fcfs": fcfs,
    "spf": shortest_predicted_first,
    "edf": earliest_deadline_first,
}
