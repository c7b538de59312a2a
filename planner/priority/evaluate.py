"""The evaluator: n, t and G of any (order, batch sizes) — the one source of truth for every method.

Static (run-to-completion) batching, Eq. 11 with the typo fixed: batch k starts when every earlier
batch has finished, ``W_k = Σ_{k'<k} max_{i∈k'} t_exec,i(b_{k'})``; a job's end-to-end latency is
``W_k + t_exec,i(b_k)`` (Eq. 4) and it meets its SLO when ``W_k ≤ slack_i(b_k)`` (Eqs. 7–9, see
`planner.priority.problem.LatencyTables`).  ``t = Σ_i t_e2e,i`` (Eq. 3), ``n = Σ_i x_i`` (Eq. 6).

`evaluate` scores one plan in pure Python (fast for the sequential SA loop); `evaluate_orders`
scores many orders sharing one batch-size vector at once with numpy (exhaustive search).  Tests
assert the two agree.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from planner.priority.problem import SUCCESS_TOLERANCE_MS, LatencyTables, PriorityProblem


class FastTables:
    """Python-list views of `LatencyTables` for the scalar evaluator (list indexing beats numpy
    scalar indexing by ~10× in tight loops)."""

    def __init__(self, tables: LatencyTables) -> None:
        self.exec = tables.exec_ms.tolist()
        self.slack = (tables.slack_ms + SUCCESS_TOLERANCE_MS).tolist()
        self.tokens = tables.tokens.tolist()


def evaluate(fast: FastTables, order: Sequence[int], sizes: Sequence[int]) -> tuple[int, float]:
    """(n, t_ms) of one plan.  Assumes the plan is structurally valid (see `plan_is_valid`)."""
    execs, slacks = fast.exec, fast.slack
    wait = 0.0
    met = 0
    total = 0.0
    pos = 0
    for size in sizes:
        col = size - 1
        longest = 0.0
        batch_exec = 0.0
        for p in range(pos, pos + size):
            job = order[p]
            e = execs[job][col]
            batch_exec += e
            if e > longest:
                longest = e
            if wait <= slacks[job][col]:
                met += 1
        total += size * wait + batch_exec
        wait += longest
        pos += size
    return met, total


def batches_fit(fast: FastTables, order: Sequence[int], sizes: Sequence[int], capacity: int | None) -> bool:
    """Eq. 20 [R]: every batch's tokens fit the instance's token capacity."""
    if capacity is None:
        return True
    pos = 0
    tokens = fast.tokens
    for size in sizes:
        if sum(tokens[order[p]] for p in range(pos, pos + size)) > capacity:
            return False
        pos += size
    return True


def greedy_batches(tokens: Sequence[int], order: Sequence[int], b_max: int, capacity: int | None) -> list[int]:
    """Cut ``order`` into consecutive batches of at most ``b_max`` jobs (and ``capacity`` tokens)."""
    sizes: list[int] = []
    size = 0
    used = 0
    for job in order:
        need = tokens[job]
        if size == b_max or (capacity is not None and size > 0 and used + need > capacity):
            sizes.append(size)
            size, used = 0, 0
        size += 1
        used += need
    if size:
        sizes.append(size)
    return sizes


def g_per_s(met: int, total_ms: float) -> float:
    """G in requests per second (Eq. 2 with t in ms)."""
    return 1000.0 * met / total_ms if total_ms > 0 else 0.0


def evaluate_orders(tables: LatencyTables, orders: np.ndarray, sizes: Sequence[int],
                    capacity: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Vectorised evaluator: (n, t_ms, fits) for every row of ``orders`` (P × N job indices)
    under one batch-size vector."""
    sizes_arr = np.asarray(sizes, dtype=np.int64)
    starts = np.concatenate(([0], np.cumsum(sizes_arr)[:-1]))
    batch_of_pos = np.repeat(np.arange(sizes_arr.size), sizes_arr)
    col = sizes_arr[batch_of_pos] - 1
    execs = tables.exec_ms[orders, col]  # (P, N)
    longest = np.maximum.reduceat(execs, starts, axis=1)  # (P, M)
    batch_start = np.cumsum(longest, axis=1) - longest
    wait = batch_start[:, batch_of_pos]
    total = (wait + execs).sum(axis=1)
    met = (wait <= tables.slack_ms[orders, col] + SUCCESS_TOLERANCE_MS).sum(axis=1)
    if capacity is None:
        fits = np.ones(orders.shape[0], dtype=bool)
    else:
        fits = (np.add.reduceat(tables.tokens[orders], starts, axis=1) <= capacity).all(axis=1)
    return met, total, fits


def plan_is_valid(problem: PriorityProblem, order: Sequence[int], sizes: Sequence[int]) -> bool:
    """A permutation of all jobs, batch sizes in 1..b_max summing to N, batches within capacity."""
    n = problem.size
    if sorted(order) != list(range(n)) or sum(sizes) != n:
        return False
    if any(s < 1 or s > problem.b_max for s in sizes):
        return False
    return batches_fit(FastTables(problem.tables), order, sizes, problem.token_capacity)
