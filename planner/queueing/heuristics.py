"""Baselines (docs/formulations.md §4.4): FCFS (vLLM's default), EDF, and a grouping-aware greedy.

All three are list schedulers returning a `QueueAssignment`, like the MILP:

* ``fcfs``: groups in arrival order, each appended to the queue where it would start earliest
  (its swap included) — vLLM serves in arrival order on whichever instance frees up first;
* ``edf``: the same with groups sorted by SLO (QLM code's default policy);
* ``greedy``: EDF order, but a group goes to a queue already serving its model (no swap) when its
  SLO still holds there, else to the queue where it starts earliest with its SLO met, else where it
  starts earliest; then each queue is regrouped into model blocks (first-appearance order, EDF
  inside) whenever that lowers the queue's swaps without making a group late.

Only instances that exist are used (never scale-up candidates).  Each step looks at every queue at
once (numpy over the queues; ties go to the lowest queue index, as a scan in queue order would), so a
baseline costs O(groups × queues) array operations, not Python steps: 4,096 queues × 240 groups took
~4 s per baseline as a Python scan.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from planner.errors import InfeasibleError
from planner.queueing.problem import QueueAssignment, QueueingProblem


class _Queues:
    """Running state of a list scheduler: clock and loaded model per queue (arrays over the queues)."""

    def __init__(self, problem: QueueingProblem) -> None:
        self.problem = problem
        models = problem.models
        self.model_of = np.array([models.index(g.model) for g in problem.groups], dtype=np.int64)
        self.loaded = np.array([-1 if q.loaded_model is None else models.index(q.loaded_model) for q in problem.queues],
                               dtype=np.int64)
        self.clock = np.array([q.busy_s for q in problem.queues], dtype=float)
        self.swap = problem.queue_swap()
        self.work = problem.queue_work()  # (queues, groups)
        self.tail = problem.queue_tail()
        usable = np.array([not q.optional for q in problem.queues], dtype=bool)
        self.fits = usable[:, None] & np.isfinite(self.work)
        self.sequences: list[list[int]] = [[] for _ in problem.queues]

    def candidates(self, i: int) -> np.ndarray:
        """Mask of the existing queues group i fits on (one-line error when there is none)."""
        found = self.fits[:, i]
        if not found.any():
            group = self.problem.groups[i]
            raise InfeasibleError(f"group {group.name}: model {group.model} fits on no instance")
        return found

    def start_if_added(self, i: int) -> np.ndarray:
        return self.clock + np.where(self.loaded != self.model_of[i], self.swap, 0.0)

    def estimate_if_added(self, i: int, start: np.ndarray) -> np.ndarray:
        if self.problem.deadline == "completion":
            return start + (self.work[:, i] + self.tail[:, i])
        return start

    def add(self, g: int, i: int, start: float) -> None:
        self.clock[g] = start + self.work[g, i]
        self.loaded[g] = self.model_of[i]
        self.sequences[g].append(i)


def _earliest(start: np.ndarray, pool: np.ndarray) -> int:
    """The queue of ``pool`` where the group starts earliest (lowest index on ties)."""
    return int(np.argmin(np.where(pool, start, np.inf)))


def _list_schedule(problem: QueueingProblem, order: list[int], method: str) -> QueueAssignment:
    state = _Queues(problem)
    for i in order:
        pool = state.candidates(i)
        start = state.start_if_added(i)
        best = _earliest(start, pool)
        state.add(best, i, float(start[best]))
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


def _regroup(problem: QueueingProblem, g: int, sequence: list[int], rank: dict[int, int]) -> list[int]:
    """Model blocks in first-appearance order (the loaded model first), EDF inside each block
    (``rank`` = position in `_edf_order`)."""
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
    order = _edf_order(problem)
    for i in order:
        options = state.candidates(i)
        slo = problem.groups[i].slo_s
        start = state.start_if_added(i)
        in_time = options & (state.estimate_if_added(i, start) <= slo)
        same = in_time & (state.loaded == state.model_of[i])
        pool = same if same.any() else in_time if in_time.any() else options
        best = _earliest(start, pool)
        state.add(best, i, float(start[best]))
    rank = {i: r for r, i in enumerate(order)}
    sequences = []
    for g, seq in enumerate(state.sequences):
        if len(seq) < 2:
            sequences.append(seq)
            continue
        blocks = _regroup(problem, g, seq, rank)
        better = (_queue_estimates(problem, g, blocks)[1] < _queue_estimates(problem, g, seq)[1]
                  and _late_count(problem, g, blocks) <= _late_count(problem, g, seq))
        sequences.append(blocks if better else seq)
    return QueueAssignment.of(problem, sequences, "greedy")


HEURISTICS: dict[str, Callable[[QueueingProblem], QueueAssignment]] = {"fcfs": fcfs, "edf": edf, "greedy": greedy}
