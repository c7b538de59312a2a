"""Order search over the preset schedulers: a cheap primal heuristic for the MIP's warm start.

The Table 1 presets rank waiting and running requests by arrival, and offline every request arrives
at t = 0, so the *request order* is a free decision of the simulator: it decides who is admitted
first, who is the LIFO eviction victim and who waits.  When the prompts do not fit the KV budget
together the order matters: on the ten random B = 8 instances of `benchmarks/batching_scaling.py`
the search lowers the best preset's latency by up to 14 % (seed 9: 0.354 → 0.306 s).

`best_ordered_schedule` runs a deterministic local search over orders for a few presets: start
from the index order and the orders by input / output length (both directions), then first-improvement
over all pair swaps, until no swap helps or ``max_evaluations`` simulations were spent.  A schedule
of a permuted instance maps back by renaming requests; it is a valid schedule of the original
instance (the rules of §3.3 do not depend on the order), and the returned one is re-checked by the
independent validator.  Offline instances only (online, the order by arrival is part of the policy).
No optimality claim.
"""

from __future__ import annotations

import time

import numpy as np

from planner.batching.problem import BatchingProblem
from planner.batching.schedule import Schedule
from planner.batching.scheduler import simulate
from planner.batching.validator import validate_schedule
from planner.errors import PlannerError

#: Presets searched by default: the hybrid and non-hybrid prefill-first ones and their
#: decode-first counterparts (the chunked variants are left out; adding all twelve presets found
#: nothing better on the benchmark instances).
SEARCH_PRESETS = ("vllm-hy", "vllm", "sarathi-nocp", "sarathi-nohy")
#: Default search budget in request-simulations: 400 simulations at B = 8, where the search had
#: converged on the ten random instances of `benchmarks/batching_scaling.py` (same result as 600).
REQUEST_SIMULATIONS = 3200
#: Larger instances are not searched (the MIP is not built for them either, `solve.MAX_MIP_CELLS`).
MAX_ORDER_SEARCH_REQUESTS = 64
MAX_ORDER_SEARCH_TOKENS = 4096  # Σ O_i: one simulation stays in the milliseconds


def permuted(problem: BatchingProblem, order: np.ndarray) -> BatchingProblem:
    """The instance with its requests listed in ``order`` (position k holds original request order[k])."""
    return problem.model_copy(update={"requests": tuple(problem.requests[int(i)] for i in order)})


def map_back(schedule: Schedule, order: np.ndarray, request_ids: tuple[str, ...]) -> Schedule:
    """The schedule of `permuted`(problem, order) in the original request numbering."""
    order = np.asarray(order, np.int64)
    return Schedule(schedule.num_batches, schedule.batch.copy(), order[schedule.request],
                    schedule.tokens.copy(), schedule.evict_batch.copy(), order[schedule.evict_request],
                    request_ids)


def _latency(problem: BatchingProblem, preset: str, order: np.ndarray) -> tuple[float, Schedule | None]:
    try:
        result = simulate(permuted(problem, order), preset)
    except PlannerError:
        return float("inf"), None
    return float(result.schedule.metrics["total_latency"]), result.schedule


def _simulate_new(problem: BatchingProblem, preset: str, order: np.ndarray,
                  seen: set[tuple[int, ...]]) -> tuple[float, Schedule | None] | None:
    """The preset's latency and schedule under ``order``, or None if ``order`` is in ``seen`` (then
    nothing is simulated); the order is added to ``seen``."""
    key = tuple(order.tolist())
    if key in seen:
        return None
    seen.add(key)
    return _latency(problem, preset, order)


def best_ordered_schedule(problem: BatchingProblem, presets: tuple[str, ...] = SEARCH_PRESETS,
                          max_evaluations: int | None = None, info: dict | None = None,
                          deadline: float | None = None) -> tuple[str, Schedule, float] | None:
    """(preset name with the order, schedule in the original numbering, validated latency) of the
    cheapest order found (module docstring), or None (online instance, more than
    `MAX_ORDER_SEARCH_REQUESTS` requests or `MAX_ORDER_SEARCH_TOKENS` output tokens, or nothing finishes).
    ``max_evaluations`` (simulations, shared by the presets) defaults to `REQUEST_SIMULATIONS` / n,
    so the search costs about the same for every instance size (a simulation's cost grows with n).
    ``info["evaluations"]``: the simulations run (a count, the same on every run).  ``deadline`` (a
    `time.perf_counter` value) is a wall-clock guard: once it has passed no further swap is simulated
    (``info["wall_cut"]`` is then True and the result depends on timing)."""
    if not _searched(problem):
        return None
    if max_evaluations is None:
        max_evaluations = max(4 * len(presets), REQUEST_SIMULATIONS // problem.n)
    starts = _start_orders(problem)
    per_preset = max(1, max_evaluations // max(1, len(presets)))
    best: tuple[float, str, np.ndarray, Schedule] | None = None
    if info is not None:
        info["evaluations"] = 0
    for preset in presets:
        seen: set[tuple[int, ...]] = set()  # orders simulated for this preset (their count is the budget used)
        current = _best_start(problem, preset, starts, seen)
        if current is not None:
            current, per_preset = _improve_by_swaps(problem, preset, current, seen, per_preset, deadline, info)
        if info is not None:
            info["evaluations"] += len(seen)
        if current is None:
            continue
        if best is None or current[0] < best[0]:
            best = (current[0], f"{preset} (order {'-'.join(str(int(i)) for i in current[1])})", current[1],
                    current[2])
    return _validated(problem, best)


def _searched(problem: BatchingProblem) -> bool:
    """Whether the order search runs on ``problem``: offline, 2 to `MAX_ORDER_SEARCH_REQUESTS` requests and at
    most `MAX_ORDER_SEARCH_TOKENS` output tokens."""
    return not (problem.online or problem.n < 2 or problem.n > MAX_ORDER_SEARCH_REQUESTS
                or int(problem.outputs.sum()) > MAX_ORDER_SEARCH_TOKENS)


def _start_orders(problem: BatchingProblem) -> list[np.ndarray]:
    """The index order and the orders by input and by output length, each ascending and descending (stable)."""
    I, O = problem.inputs, problem.outputs
    return [np.arange(problem.n), np.argsort(I, kind="stable"), np.argsort(-I, kind="stable"),
            np.argsort(O, kind="stable"), np.argsort(-O, kind="stable")]


def _best_start(problem: BatchingProblem, preset: str, starts: list[np.ndarray],
                seen: set[tuple[int, ...]]) -> tuple[float, np.ndarray, Schedule] | None:
    """(latency, order, schedule) of the start order with the lowest latency under ``preset`` (the first
    on ties), or None when no start order finishes."""
    current = None
    for order in starts:
        outcome = _simulate_new(problem, preset, order, seen)
        if outcome is None:
            continue
        value, schedule = outcome
        if schedule is not None and (current is None or value < current[0]):
            current = (value, order, schedule)
    return current


def _improve_by_swaps(problem: BatchingProblem, preset: str, current: tuple[float, np.ndarray, Schedule],
                      seen: set[tuple[int, ...]], per_preset: int, deadline: float | None,
                      info: dict | None) -> tuple[tuple[float, np.ndarray, Schedule], int]:
    """First-improvement local search over pair swaps from ``current`` until no swap helps or ``seen``
    holds ``per_preset`` orders; returns the best (latency, order, schedule) and the per-preset budget
    (cut to the orders simulated when ``deadline`` passes, which also stops the next presets' swaps)."""
    while len(seen) < per_preset:
        better, per_preset = _first_improving_swap(problem, preset, current, seen, per_preset, deadline, info)
        if better is None:
            break
        current = better
    return current, per_preset


def _first_improving_swap(problem: BatchingProblem, preset: str, current: tuple[float, np.ndarray, Schedule],
                          seen: set[tuple[int, ...]], per_preset: int, deadline: float | None,
                          info: dict | None) -> tuple[tuple[float, np.ndarray, Schedule] | None, int]:
    """The first swap of positions (a, b), a < b in lexicographic order, whose order (not simulated before)
    lowers the latency by more than a relative 1e-12, with the per-preset budget; None when no swap does
    within the budget or before ``deadline`` (then ``info["wall_cut"]`` is set and the budget is cut to
    the orders simulated)."""
    n = problem.n
    for a in range(n - 1):
        for b in range(a + 1, n):
            if len(seen) >= per_preset:
                return None, per_preset
            if deadline is not None and time.perf_counter() > deadline:
                if info is not None:
                    info["wall_cut"] = True
                return None, len(seen)
            order = current[1].copy()
            order[a], order[b] = order[b], order[a]
            outcome = _simulate_new(problem, preset, order, seen)
            if outcome is None:
                continue
            value, schedule = outcome
            if schedule is not None and value < current[0] * (1 - 1e-12):
                return (value, order, schedule), per_preset
    return None, per_preset


def _validated(problem: BatchingProblem, best: tuple[float, str, np.ndarray, Schedule] | None
               ) -> tuple[str, Schedule, float] | None:
    """The best order's schedule in the original numbering with its latency as the independent validator
    counts it; None when there is none or the validator rejects it."""
    if best is None:
        return None
    schedule = map_back(best[3], best[2], tuple(r.request_id for r in problem.requests))
    report = validate_schedule(problem, schedule)
    if not report.feasible:
        return None
    return best[1], schedule, float(report.objective)
