"""Baselines (FORMULATIONS.md §4.4): FCFS (vLLM's default), EDF, and a grouping-aware greedy.

All three are list schedulers returning a `QueueAssignment`, like the MILP:

* ``fcfs``: groups in arrival order, each appended to the queue where it would start earliest
  (its swap included) — vLLM serves in arrival order on whichever instance frees up first;
* ``edf``: the same with groups sorted by SLO (QLM code's default policy);
* ``greedy``: EDF order, but a group goes to a queue already serving its model (no swap) when its
  SLO still holds there, else to the queue where it starts earliest with its SLO met, else where it
  starts earliest; then each queue is regrouped into model blocks (first-appearance order, EDF
  inside) whenever that lowers the queue's swaps without making a group late.

Only instances that exist are used (never scale-up candidates).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from planner.errors import InfeasibleError
from planner.queueing.problem import QueueAssignment, QueueingProblem


class _Queues:
    """Running state of a list scheduler: clock and loaded model per queue."""

    def __init__(self, problem: QueueingProblem) -> None:
        self.problem = problem
        self.usable = [g for g, q in enumerate(problem.queues) if not q.optional]
        self.clock = [q.busy_s for q in problem.queues]
        self.loaded = [q.loaded_model for q in problem.queues]
        self.sequences: list[list[int]] = [[] for _ in problem.queues]

    def start_if_added(self, g: int, i: int) -> float:
        typ = self.problem.types[self.problem.queues[g].type_index]
        swap = typ.swap_time_s if self.loaded[g] != self.problem.groups[i].model else 0.0
        return self.clock[g] + swap

    def estimate_if_added(self, g: int, i: int) -> float:
        start = self.start_if_added(g, i)
        if self.problem.deadline == "completion":
            t = self.problem.queues[g].type_index
            start += self.problem.work_s[t, i] + self.problem.tail_s[t, i]
        return start

    def fits(self, g: int, i: int) -> bool:
        return math.isfinite(self.problem.work_s[self.problem.queues[g].type_index, i])

    def add(self, g: int, i: int) -> None:
        self.clock[g] = self.start_if_added(g, i) + self.problem.work_s[self.problem.queues[g].type_index, i]
        self.loaded[g] = self.problem.groups[i].model
        self.sequences[g].append(i)


def _candidates(state: _Queues, i: int) -> list[int]:
    found = [g for g in state.usable if state.fits(g, i)]
    if not found:
        raise InfeasibleError(f"group {state.problem.groups[i].name}: model {state.problem.groups[i].model} fits on no instance")
    return found


def _list_schedule(problem: QueueingProblem, order: list[int], method: str) -> QueueAssignment:
    state = _Queues(problem)
    for i in order:
        best = min(_candidates(state, i), key=lambda g: (state.start_if_added(g, i), g))
        state.add(best, i)
    return QueueAssignment.of(problem, state.sequences, method)


def fcfs(problem: QueueingProblem) -> QueueAssignment:
    order = sorted(range(problem.num_groups), key=lambda i: (problem.groups[i].arrival_s, i))
    return _list_schedule(problem, order, "fcfs")


def _edf_order(problem: QueueingProblem) -> list[int]:
    return sorted(range(problem.num_groups), key=lambda i: (problem.groups[i].slo_s, problem.groups[i].arrival_s, i))


def edf(problem: QueueingProblem) -> QueueAssignment:
    return _list_schedule(problem, _edf_order(problem), "edf")


def _queue_estimates(problem: QueueingProblem, g: int, sequence: list[int]) -> tuple[list[float], int]:
    queue = problem.queues[g]
    typ = problem.types[queue.type_index]
    loaded, clock, swaps, out = queue.loaded_model, queue.busy_s, 0, []
    for i in sequence:
        if problem.groups[i].model != loaded:
            clock += typ.swap_time_s
            swaps += 1
            loaded = problem.groups[i].model
        extra = problem.work_s[queue.type_index, i] + problem.tail_s[queue.type_index, i] if problem.deadline == "completion" else 0.0
        out.append(clock + extra)
        clock += problem.work_s[queue.type_index, i]
    return out, swaps


def _late_count(problem: QueueingProblem, g: int, sequence: list[int]) -> int:
    estimates, _ = _queue_estimates(problem, g, sequence)
    return sum(1 for i, e in zip(sequence, estimates) if e > problem.groups[i].slo_s + 1e-9)


def _regroup(problem: QueueingProblem, g: int, sequence: list[int]) -> list[int]:
    """Model blocks in first-appearance order (the loaded model first), EDF inside each block."""
    rank = {i: r for r, i in enumerate(_edf_order(problem))}
    models: list[str] = []
    loaded = problem.queues[g].loaded_model
    if loaded is not None and any(problem.groups[i].model == loaded for i in sequence):
        models.append(loaded)
    for i in sequence:
        if problem.groups[i].model not in models:
            models.append(problem.groups[i].model)
    return [i for m in models for i in sorted((i for i in sequence if problem.groups[i].model == m), key=rank.get)]


def greedy(problem: QueueingProblem) -> QueueAssignment:
    state = _Queues(problem)
    for i in _edf_order(problem):
        options = _candidates(state, i)
        slo = problem.groups[i].slo_s
        same = [g for g in options if state.loaded[g] == problem.groups[i].model and state.estimate_if_added(g, i) <= slo]
        on_time = [g for g in options if state.estimate_if_added(g, i) <= slo]
        pool = same or on_time or options
        best = min(pool, key=lambda g: (state.start_if_added(g, i), g))
        state.add(best, i)
    sequences = []
    for g, seq in enumerate(state.sequences):
        blocks = _regroup(problem, g, seq)
        better = (_queue_estimates(problem, g, blocks)[1] < _queue_estimates(problem, g, seq)[1]
                  and _late_count(problem, g, blocks) <= _late_count(problem, g, seq))
        sequences.append(blocks if better else seq)
    return QueueAssignment.of(problem, sequences, "greedy")


HEURISTICS: dict[str, Callable[[QueueingProblem], QueueAssignment]] = {"fcfs": fcfs, "edf": edf, "greedy": greedy}
