"""Exhaustive search, the paper's baseline (§2.4): every permutation × every batch split.

Batch splits are the compositions of N into parts of size 1..b_max; each composition is scored on
all N! permutations with the vectorised evaluator, streamed in blocks of at most TAIL! rows (one
block per ordered prefix of the first N − TAIL positions) so that memory stays bounded at any N and
the time limit is checked between blocks.  O(N!·2^N): use it for N ≲ 10 at b_max = 1 and N ≲ 7
otherwise.  Ties keep the first plan in (composition, permutation) lexicographic order, so the
result is deterministic.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from functools import cache

import numpy as np

from planner.core.work import WorkClock
from planner.errors import PlannerError
from planner.priority import effort
from planner.priority.evaluate import evaluate_orders, g_per_s
from planner.priority.heuristics import Plan
from planner.priority.problem import PriorityProblem

MAX_EXHAUSTIVE_JOBS = 12
TAIL = 8
"""Blocks hold the 8! = 40320 orders of the last 8 positions (~4 MB of indices at N = 12)."""


def compositions(total: int, largest: int) -> Iterator[tuple[int, ...]]:
    """Ordered ways to write ``total`` as a sum of parts in 1..largest."""
    if total == 0:
        yield ()
        return
    for first in range(1, min(largest, total) + 1):
        for rest in compositions(total - first, largest):
            yield (first, *rest)


@cache
def _all_orders(k: int) -> np.ndarray:
    orders = np.array(list(itertools.permutations(range(k))), dtype=np.int64).reshape(-1, k)
    orders.setflags(write=False)
    return orders


def permutation_blocks(n: int, tail: int = TAIL) -> Iterator[np.ndarray]:
    """All permutations of range(n) in lexicographic order (as `itertools.permutations`), as
    (k!, n) arrays with k = min(n, tail): one block per ordered choice of the first n − k jobs."""
    k = min(n, tail)
    suffixes = _all_orders(k)
    for prefix in itertools.permutations(range(n), n - k):
        rest = np.array(sorted(set(range(n)).difference(prefix)), dtype=np.int64)
        block = np.empty((suffixes.shape[0], n), dtype=np.int64)
        block[:, :n - k] = prefix
        block[:, n - k:] = rest[suffixes]
        yield block


def exhaustive_search(problem: PriorityProblem, time_limit: float | None = None,
                      clock: WorkClock | None = None) -> tuple[Plan, bool, int]:
    """(best plan, finished, plans evaluated).  ``finished`` is False when the time limit cut the
    enumeration short (the plan is then the best found so far).  With ``clock`` the limit is nominal
    (`planner.priority.effort.exhaustive_seconds` per block of plans; the same plans every run), the
    clock's wall-clock guard aside (it records when it decided)."""
    n = problem.size
    if n > MAX_EXHAUSTIVE_JOBS:
        raise PlannerError(f"exhaustive search enumerates N!·splits plans; N = {n} > {MAX_EXHAUSTIVE_JOBS} is out of reach "
                           "(use --method exact)")
    tables = problem.tables
    started = time.perf_counter()
    best: Plan | None = None
    best_key = -1.0
    evaluated = 0
    for sizes in compositions(n, problem.b_max):
        for orders in permutation_blocks(n):
            met, total, fits = evaluate_orders(tables, orders, sizes, problem.token_capacity)
            evaluated += orders.shape[0]
            g = np.where(fits, 1000.0 * met / np.maximum(total, 1e-300), -1.0)
            k = int(np.argmax(g))
            if fits[k] and g[k] > best_key:
                best_key = float(g[k])
                best = Plan(tuple(int(j) for j in orders[k]), tuple(sizes), int(met[k]), float(total[k]))
            if clock is not None:
                clock.charge(effort.exhaustive_seconds(orders.shape[0], n))
                stop = clock.time_limit is not None and not clock.allows(
                    effort.exhaustive_seconds(orders.shape[0], n) + effort.finish_seconds(n))
            else:
                stop = time_limit is not None and time.perf_counter() - started > time_limit
            if stop:
                if best is None:
                    limit = clock.time_limit if clock is not None else time_limit
                    raise PlannerError(f"exhaustive search hit its {limit:g} s limit before finding a plan")
                return best, False, evaluated
    if best is None:
        raise PlannerError("no plan fits the token capacity")  # unreachable: singletons always fit
    assert abs(best.g - g_per_s(best.met, best.total_ms)) < 1e-9
    return best, True, evaluated
