"""Complete enumeration of priority plans for tiny instances (shared by the bound tests)."""

from __future__ import annotations

import itertools

from planner.priority.evaluate import FastTables, evaluate


def batch_sizes(jobs: int, b_max: int):
    """Every sequence of batch sizes in 1..b_max summing to ``jobs``."""
    if jobs == 0:
        yield ()
        return
    for size in range(1, min(b_max, jobs) + 1):
        for rest in batch_sizes(jobs - size, b_max):
            yield (size,) + rest


def all_plans(problem):
    """(n, t_ms) of every (order, batch sizes) plan of ``problem``."""
    tables = FastTables(problem.tables)
    jobs = problem.size
    return [evaluate(tables, list(order), list(sizes))
            for order in itertools.permutations(range(jobs)) for sizes in batch_sizes(jobs, problem.b_max)]
