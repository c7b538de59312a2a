"""QLM's online behaviour: re-solve only when the estimator predicts a violation, and a trace replay.

`replay_trace` walks the groups of a problem in arrival order (``arrival_s``), with time 0 as the
trace start and a group's deadline ``slo_s`` counted from time 0 (= arrival + class SLO when the
instance has ``now_s: 0``).  Between arrivals every instance serves its queue non-preemptively
(a group starts once the instance is free, after a swap when the model changes).  At an arrival
the new group joins the least-loaded instance its model fits on (QLM's code puts it on a virtual
queue and leaves the rest to the global scheduler), then the policy acts:

* ``qlm``: predict every waiting group's start with the estimator (the trigger check of QLM's
  code: walk each queue accumulating work plus a swap whenever the model changes); only when a
  violation is predicted, build the current `QueueingProblem` (remaining slack, the busy time of
  the group in service, the loaded models) and re-solve the MILP (its soft version when SLOs
  cannot all be met), adopting its queues;
* ``edf``: keep every queue in EDF order (no solver);
* ``fcfs``: append only.

The report gives SLO attainment per class (requests whose group starts within its SLO), swaps,
drain time, how often the MILP ran and its total time.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

from planner.core.contract import RunOptions
from planner.queueing.problem import QueueingProblem, RequestGroup, VirtualQueue
from planner.queueing.pipeline import QueueingKnobs, solve_queueing

POLICIES = ("qlm", "edf", "fcfs")


@dataclass
class _Instance:
    queue: VirtualQueue
    free_at: float = 0.0
    loaded: str | None = None
    pending: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class ReplayReport:
    policy: str
    slo_attainment: dict[str, float]
    overall_attainment: float
    swaps: int
    drain_s: float
    milp_solves: int
    milp_seconds: float
    start_s: dict[str, float]

    def to_dict(self) -> dict:
        return {"policy": self.policy, "slo_attainment": self.slo_attainment, "overall_attainment": self.overall_attainment,
                "swaps": self.swaps, "drain_s": self.drain_s, "milp_solves": self.milp_solves,
                "milp_seconds": round(self.milp_seconds, 6), "start_s": self.start_s}


class _Replay:
    def __init__(self, problem: QueueingProblem) -> None:
        self.problem = problem
        self.instances = [_Instance(q, 0.0, q.loaded_model) for q in problem.queues if not q.optional]
        self.start: dict[int, float] = {}
        self.swaps = 0

    def work(self, inst: _Instance, i: int) -> float:
        return float(self.problem.work_s[inst.queue.type_index, i])

    def swap(self, inst: _Instance, i: int) -> float:
        return self.problem.types[inst.queue.type_index].swap_time_s if inst.loaded != self.problem.groups[i].model else 0.0

    def advance(self, until: float) -> None:
        """Start every queued group whose instance frees up before ``until``."""
        for inst in self.instances:
            while inst.pending and inst.free_at <= until:
                i = inst.pending.pop(0)
                if inst.loaded != self.problem.groups[i].model:
                    self.swaps += 1
                start = inst.free_at + self.swap(inst, i)
                self.start[i] = start
                inst.free_at = start + self.work(inst, i)
                inst.loaded = self.problem.groups[i].model

    def predicted_starts(self, now: float) -> dict[int, float]:
        out = {}
        for inst in self.instances:
            clock, loaded = max(inst.free_at, now), inst.loaded
            for i in inst.pending:
                if self.problem.groups[i].model != loaded:
                    clock += self.problem.types[inst.queue.type_index].swap_time_s
                    loaded = self.problem.groups[i].model
                out[i] = clock
                clock += self.work(inst, i)
        return out

    def current_problem(self, now: float) -> tuple[QueueingProblem, list[int]]:
        waiting = [i for inst in self.instances for i in inst.pending]
        groups = []
        for i in waiting:
            g = self.problem.groups[i]
            groups.append(RequestGroup(g.name, g.model, g.slo_class, g.slo_s - now, g.num_requests, g.mean_input_tokens,
                                       g.mean_output_tokens, g.std_output_tokens, g.max_output_tokens, g.arrival_s))
        queues = tuple(VirtualQueue(inst.queue.name, inst.queue.type_index, inst.loaded, busy_s=max(0.0, inst.free_at - now))
                       for inst in self.instances)
        sub = QueueingProblem(f"{self.problem.name}@{now:g}", tuple(groups), self.problem.types, queues,
                              self.problem.work_s[:, waiting], self.problem.tail_s[:, waiting], objective="penalty",
                              deadline="start")
        return sub, waiting


def replay_trace(problem: QueueingProblem, policy: str = "qlm", *, solver: str = "highs",
                 time_limit: float | None = 5.0, formulation: str = "auto", threads: int | None = None) -> ReplayReport:
    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r} (expected one of: {', '.join(POLICIES)})")
    state = _Replay(problem)
    solves, solve_seconds = 0, 0.0
    for i in sorted(range(problem.num_groups), key=lambda k: (problem.groups[k].arrival_s, k)):
        now = problem.groups[i].arrival_s
        state.advance(now)
        fits = [inst for inst in state.instances if math.isfinite(problem.work_s[inst.queue.type_index, i])]
        target = min(fits, key=lambda inst: max(inst.free_at, now) + sum(state.work(inst, k) for k in inst.pending))
        target.pending.append(i)
        if policy == "edf":
            for inst in state.instances:
                inst.pending.sort(key=lambda k: (problem.groups[k].slo_s, problem.groups[k].arrival_s, k))
        elif policy == "qlm":
            predicted = state.predicted_starts(now)
            if any(start > problem.groups[k].slo_s + 1e-9 for k, start in predicted.items()):
                sub, waiting = state.current_problem(now)
                t0 = time.perf_counter()
                result = solve_queueing(sub, RunOptions(solver=solver, time_limit=time_limit, threads=threads),
                                        QueueingKnobs(formulation=formulation, recommend_scale_up=False))
                solve_seconds += time.perf_counter() - t0
                solves += 1
                if result.solution is not None:
                    for inst, seq in zip(state.instances, result.solution.queues):
                        inst.pending = [waiting[k] for k in seq]
    state.advance(math.inf)
    on_time: dict[str, list[int]] = {}
    for i, g in enumerate(problem.groups):
        counts = on_time.setdefault(g.slo_class, [0, 0])
        counts[0] += g.num_requests if state.start[i] <= g.slo_s + 1e-9 else 0
        counts[1] += g.num_requests
    total_ok = sum(v[0] for v in on_time.values())
    total = sum(v[1] for v in on_time.values())
    drain = max((inst.free_at for inst in state.instances), default=0.0)
    return ReplayReport(policy, {c: ok / n for c, (ok, n) in sorted(on_time.items())}, total_ok / total if total else 1.0,
                        state.swaps, drain, solves, solve_seconds,
                        {problem.groups[i].name: s for i, s in sorted(state.start.items())})
