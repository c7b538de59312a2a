"""Exhaustive search, the paper's baseline (§2.4): every permutation × every batch split.

Batch splits are the compositions of N into parts of size 1..b_max; each composition is scored on
all N! permutations at once with the vectorised evaluator (in chunks).  O(N!·2^N): use it for
N ≲ 10 at b_max = 1 and N ≲ 7 otherwise.  Ties keep the first plan in (composition, permutation)
lexicographic order, so the result is deterministic.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator

import numpy as np

from planner.errors import PlannerError
from planner.priority.evaluate import evaluate_orders, g_per_s
from planner.priority.heuristics import Plan
from planner.priority.problem import PriorityProblem

MAX_EXHAUSTIVE_JOBS = 12
CHUNK = 200_000


def compositions(total: int, largest: int) -> Iterator[tuple[int, ...]]:
    """Ordered ways to write ``total`` as a sum of parts in 1..largest."""
    if total == 0:
        yield ()
        return
    for first in range(1, min(largest, total) + 1):
        for rest in compositions(total - first, largest):
            yield (first, *rest)


def exhaustive_search(problem: PriorityProblem, time_limit: float | None = None) -> tuple[Plan, bool, int]:
    """(best plan, finished, plans evaluated).  ``finished`` is False when the time limit cut the
    enumeration short (the plan is then the best found so far)."""
    n = problem.size
    if n > MAX_EXHAUSTIVE_JOBS:
        raise PlannerError(f"exhaustive search enumerates N!·splits plans; N = {n} > {MAX_EXHAUSTIVE_JOBS} is out of reach "
                           "(use --method exact)")
    tables = problem.tables
    started = time.perf_counter()
    perms = np.array(list(itertools.permutations(range(n))), dtype=np.int64)
    best: Plan | None = None
    best_key = -1.0
    evaluated = 0
    for sizes in compositions(n, problem.b_max):
        for lo in range(0, perms.shape[0], CHUNK):
            chunk = perms[lo:lo + CHUNK]
            met, total, fits = evaluate_orders(tables, chunk, sizes, problem.token_capacity)
            evaluated += chunk.shape[0]
            g = np.where(fits, 1000.0 * met / np.maximum(total, 1e-300), -1.0)
            k = int(np.argmax(g))
            if fits[k] and g[k] > best_key:
                best_key = float(g[k])
                best = Plan(tuple(int(j) for j in chunk[k]), tuple(sizes), int(met[k]), float(total[k]))
            if time_limit is not None and time.perf_counter() - started > time_limit:
                if best is None:
                    raise PlannerError(f"exhaustive search hit its {time_limit:g} s limit before finding a plan")
                return best, False, evaluated
    if best is None:
        raise PlannerError("no plan fits the token capacity")  # unreachable: singletons always fit
    assert abs(best.g - g_per_s(best.met, best.total_ms)) < 1e-9
    return best, True, evaluated
