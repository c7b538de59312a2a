"""Frozen, validated data of one queue-ordering problem (QLM, docs/formulations.md §4).

A `QueueingProblem` is what every method (MILP, baselines, validator, evaluator) reads:

* request groups (§4.2) with their model, SLO class, remaining SLO slack and size;
* instance types (GPU, TP degree, swap time, how many exist, how many more could be added);
* virtual queues, one per serving instance (§4.3: "one VQ per instance"), each of one type and
  with the model currently loaded (or none);
* the estimator's numbers per (instance type, group): ``work_s`` = the group's contribution to
  the waiting time of everything queued behind it (Eq. 2, ``Σ O / Θ``) and ``tail_s`` = what
  the group's own completion adds on top of its start (prefill P + last decode D, Eq. 1/4), so
  ``completion = start + work + tail``.  ``inf`` marks a model that does not fit on the type.

Times are seconds relative to "now" (the moment the scheduler runs).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np

from planner.core import plan_fields as pf
from planner.core.io import shown
from planner.errors import PlannerError

OBJECTIVES = ("penalty", "total_lateness", "max_lateness", "late_groups")
HARD_OBJECTIVES = ("penalty",)
#: The ``kind`` a queueing plan's mapping carries (`QueueAssignment.to_dict`).
PLAN_KIND = "queue_plan"
DeadlineMode = Literal["start", "completion"]


@dataclass(frozen=True)
class RequestGroup:
    """A request group: requests of one model and SLO class served FCFS as a unit."""

    name: str
    model: str
    slo_class: str
    slo_s: float  # remaining time until the SLO (deadline relative to now)
    num_requests: int
    mean_input_tokens: float
    mean_output_tokens: float
    std_output_tokens: float
    max_output_tokens: float
    arrival_s: float = 0.0  # FCFS order key

    @property
    def output_tokens(self) -> float:
        return self.num_requests * self.mean_output_tokens


@dataclass(frozen=True)
class InstanceType:
    """A kind of serving instance: ``tensor_parallel`` GPUs of one type running one model at a time."""

    name: str
    gpu: str
    tensor_parallel: int
    swap_time_s: float  # model load time S
    count: int  # instances that exist now
    extra_available: int = 0  # how many more could be added (scale-up)
    cost_per_instance: float = 1.0  # weight in the scale-up objective


@dataclass(frozen=True)
class VirtualQueue:
    """One virtual queue = one serving instance."""

    name: str
    type_index: int
    loaded_model: str | None = None
    optional: bool = False  # a scale-up candidate: used only if the solver opens it
    busy_s: float = 0.0  # remaining time of the group in service (not re-plannable); 0 when idle


@dataclass(frozen=True)
class QueueingProblem:
    name: str
    groups: tuple[RequestGroup, ...]
    types: tuple[InstanceType, ...]
    queues: tuple[VirtualQueue, ...]
    work_s: np.ndarray  # (types, groups)
    tail_s: np.ndarray  # (types, groups)
    objective: str = "penalty"
    deadline: DeadlineMode = "start"
    description: str = ""

    def __post_init__(self) -> None:
        n, t = len(self.groups), len(self.types)
        if self.objective not in OBJECTIVES:
            raise PlannerError(f"unknown objective {self.objective!r} (expected one of: {', '.join(OBJECTIVES)})")
        if self.deadline not in ("start", "completion"):
            raise PlannerError(f"unknown deadline mode {self.deadline!r} (expected start or completion)")
        for arr_name in ("work_s", "tail_s"):
            arr = np.array(getattr(self, arr_name), dtype=float)
            if arr.shape != (t, n):
                raise ValueError(f"{arr_name} must have shape (types, groups) = {(t, n)}, got {arr.shape}")
            arr.setflags(write=False)
            object.__setattr__(self, arr_name, arr)
        names = [g.name for g in self.groups]
        if len(set(names)) != len(names):
            raise PlannerError("request group names must be unique")
        for q in self.queues:
            if not 0 <= q.type_index < t:
                raise ValueError(f"queue {q.name}: type index {q.type_index} out of range")

    # ---- derived views -----------------------------------------------------------------------
    @property
    def num_groups(self) -> int:
        return len(self.groups)

    @property
    def num_queues(self) -> int:
        return len(self.queues)

    @property
    def models(self) -> tuple[str, ...]:
        seen: list[str] = []
        for g in self.groups:
            if g.model not in seen:
                seen.append(g.model)
        for q in self.queues:
            if q.loaded_model is not None and q.loaded_model not in seen:
                seen.append(q.loaded_model)
        return tuple(seen)

    def queue_work(self) -> np.ndarray:
        """W per (queue, group): the type row of each queue."""
        return self.work_s[[q.type_index for q in self.queues]]

    def queue_tail(self) -> np.ndarray:
        return self.tail_s[[q.type_index for q in self.queues]]

    def queue_busy(self) -> np.ndarray:
        return np.array([q.busy_s for q in self.queues], dtype=float)

    def queue_swap(self) -> np.ndarray:
        return np.array([self.types[q.type_index].swap_time_s for q in self.queues], dtype=float)

    def slo(self) -> np.ndarray:
        return np.array([g.slo_s for g in self.groups], dtype=float)

    @property
    def hard_deadlines(self) -> bool:
        return self.objective in HARD_OBJECTIVES

    def with_objective(self, objective: str | None = None, deadline: str | None = None) -> "QueueingProblem":
        return self._replace(objective=objective or self.objective, deadline=deadline or self.deadline)

    def with_candidates(self) -> "QueueingProblem":
        """The same problem plus every scale-up candidate instance as an optional, empty queue."""
        extra = []
        for k, typ in enumerate(self.types):
            for c in range(typ.extra_available):
                extra.append(VirtualQueue(f"{typ.name}+{c + 1}", k, None, optional=True))
        return self._replace(queues=self.queues + tuple(extra))

    def _replace(self, **changes) -> "QueueingProblem":
        data = {f: getattr(self, f) for f in self.__dataclass_fields__}
        data.update(changes)
        return QueueingProblem(**data)


@dataclass(frozen=True)
class QueueAssignment:
    """The plan every method returns: the ordered groups (by index) of every virtual queue.

    ``objective`` and ``deadline`` are what the plan is scored on
    (`planner.queueing.validator.validate_plan`): the problem's when the plan was made for it (`of`), the soft objective for the soft plan of an
    instance whose SLOs cannot all be met, ``scale_up`` for a plan that opens scale-up candidate
    instances; empty: the problem's."""

    queues: tuple[tuple[int, ...], ...]
    method: str
    queue_names: tuple[str, ...] = ()
    group_names: tuple[str, ...] = ()
    objective: str = ""
    deadline: str = ""

    @staticmethod
    def of(problem: QueueingProblem, sequences: list[list[int]], method: str) -> "QueueAssignment":
        return QueueAssignment(
            tuple(tuple(int(i) for i in seq) for seq in sequences), method,
            tuple(q.name for q in problem.queues), tuple(g.name for g in problem.groups),
            problem.objective, problem.deadline,
        )

    def to_dict(self) -> dict:
        names = self.group_names
        out: dict = {"kind": PLAN_KIND, "method": self.method}
        if self.objective:
            out["objective"] = self.objective
        if self.deadline:
            out["deadline"] = self.deadline
        out["queues"] = {
            (self.queue_names[q] if q < len(self.queue_names) else str(q)): [
                names[i] if i < len(names) else i for i in seq
            ]
            for q, seq in enumerate(self.queues)
        }
        return out

    @classmethod
    def from_dict(cls, problem: QueueingProblem, data: Any) -> "QueueAssignment":
        """The plan in ``data`` (the mapping `to_dict` writes, or one written by hand)::

            {"kind": "queue_plan", "method": "current", "objective": "penalty", "deadline": "start",
             "queues": {"a100x4-1": ["chat", "batch"], "a100x4-2": ["summaries"]}}

        ``queues`` maps an instance's queue name (``<instance type>-<k>``, k = 1..count; a scale-up
        candidate is ``<instance type>+<k>``) to the names of its groups in serving order; a queue left out
        is empty.  ``kind``, ``method``, ``objective`` (one of the instance objectives, or ``scale_up``:
        candidates may then be opened) and ``deadline`` (start | completion) are optional (default: the
        instance's).  A group listed twice or never is read as written: the validator reports it.
        Anything else unreadable is one `InputError` line naming the field (`planner.core.plan_fields`)."""
        data = pf.mapping(data, "", allowed=("kind", "method", "objective", "deadline", "queues"),
                          required=("queues",))
        pf.kind(data, (PLAN_KIND,), PLAN_KIND)
        method = pf.name(data.get("method", "plan"), "method")
        objective = data.get("objective", problem.objective)
        if objective not in (*OBJECTIVES, "scale_up"):
            pf.refuse("objective", f"expected one of: {', '.join(OBJECTIVES)}, scale_up; got {shown(objective)}")
        deadline = data.get("deadline", problem.deadline)
        if deadline not in ("start", "completion"):
            pf.refuse("deadline", f"expected start or completion, got {shown(deadline)}")
        target = problem.with_candidates() if objective == "scale_up" else problem
        queue_index = {q.name: k for k, q in enumerate(target.queues)}
        group_index = {g.name: i for i, g in enumerate(problem.groups)}
        sequences: list[list[int]] = [[] for _ in target.queues]
        for name, listed in pf.mapping(data["queues"], "queues").items():
            field = pf.join("queues", name if len(name) <= 60 else name[:60] + "…")
            if name not in queue_index:
                if any(q.optional and q.name == name for q in problem.with_candidates().queues):
                    pf.refuse(field, "a scale-up candidate instance: only a plan with objective scale_up may use it")
                shown_names = ", ".join(repr(q.name) for q in target.queues[:8])
                more = f" and {len(target.queues) - 8} more" if len(target.queues) > 8 else ""
                pf.refuse(field, f"unknown queue (the instance's queues: {shown_names}{more})")
            sequences[queue_index[name]] = [pf.lookup(item, group_index, pf.join(field, k), "group")
                                            for k, item in enumerate(pf.items(listed, field))]
        plan = cls.of(target, sequences, method)
        return replace(plan, objective=objective, deadline=deadline)
