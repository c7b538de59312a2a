"""Tiny queueing problems shared by the queueing tests: hand-made (`make_problem`), random (`random_tiny`,
`busy_tiny`) and the brute-force optimum (`brute_force`)."""

from __future__ import annotations

import itertools

import numpy as np

from planner.queueing.problem import InstanceType, QueueAssignment, QueueingProblem, RequestGroup, VirtualQueue
from planner.queueing.validator import validate_assignment


def make_problem(models, slos, work, *, queues=1, swap=10.0, loaded=None, extra=0, objective="penalty",
                 tail=None, deadline="start"):
    groups = tuple(RequestGroup(f"g{i}", m, "c", float(s), 1, 10.0, 10.0, 0.0, 10.0, arrival_s=float(i))
                   for i, (m, s) in enumerate(zip(models, slos)))
    types = (InstanceType("t", "A100", 1, swap, queues, extra),)
    qs = tuple(VirtualQueue(f"q{k}", 0, loaded) for k in range(queues))
    w = np.array([work], float)
    c = np.zeros_like(w) if tail is None else np.array([tail], float)
    return QueueingProblem("hand", groups, types, qs, w, c, objective=objective, deadline=deadline)


def random_tiny(seed: int, groups: int = 4, queues: int = 2, objective: str = "total_lateness") -> QueueingProblem:
    rng = np.random.default_rng(seed)
    models = ["A", "B"]
    gs = tuple(RequestGroup(f"g{i}", models[int(rng.integers(2))], "c", float(rng.uniform(2, 30)), 1, 1, 1, 0, 1,
                            arrival_s=float(i)) for i in range(groups))
    types = (InstanceType("fast", "x", 1, 4.0, 1), InstanceType("slow", "x", 1, 6.0, queues - 1))
    qs = (VirtualQueue("fast-1", 0, "A"),) + tuple(VirtualQueue(f"slow-{k}", 1, None) for k in range(queues - 1))
    work = rng.uniform(1, 10, size=(1, groups))
    work = np.vstack([work, 1.5 * work])  # the slow type has 2/3 of the throughput
    tail = rng.uniform(0, 3, size=(2, groups))
    return QueueingProblem(f"tiny{seed}", gs, types, qs, work, tail, objective=objective,
                           deadline="completion" if seed % 2 else "start")


def brute_force(problem: QueueingProblem) -> float:
    """Every permutation of the groups cut into the queues (in order): the best validator objective."""
    n, g = problem.num_groups, problem.num_queues
    best = float("inf")
    for perm in itertools.permutations(range(n)):
        for cuts in itertools.combinations_with_replacement(range(n + 1), g - 1):
            bounds = (0, *cuts, n)
            seqs = [list(perm[bounds[k]:bounds[k + 1]]) for k in range(g)]
            rep = validate_assignment(problem, QueueAssignment.of(problem, seqs, "brute"))
            if rep.feasible:
                best = min(best, rep.objective)
    return best


def busy_tiny(seed: int, groups: int = 5) -> QueueingProblem:
    """Three queues (two interchangeable), one busy, one with no model loaded; tight and loose SLOs."""
    rng = np.random.default_rng(seed)
    extra = 10.0 if seed % 2 else 0.0  # completion mode: the SLO also covers the group's own work and tail
    gs = tuple(RequestGroup(f"g{i}", ["A", "B"][int(rng.integers(2))], "c", float(rng.uniform(3, 25) + extra), 1, 1, 1, 0, 1,
                            arrival_s=float(i)) for i in range(groups))
    types = (InstanceType("fast", "x", 1, 3.0, 2), InstanceType("slow", "x", 1, 5.0, 1))
    qs = (VirtualQueue("fast-1", 0, "A"), VirtualQueue("fast-2", 0, "A"), VirtualQueue("slow-1", 1, None, busy_s=2.0))
    work = rng.uniform(0.5, 6, size=(1, groups))
    work = np.vstack([work, 1.7 * work])
    tail = rng.uniform(0, 2, size=(2, groups))
    return QueueingProblem(f"busy{seed}", gs, types, qs, work, tail, objective="penalty",
                           deadline="completion" if seed % 2 else "start")
