"""Independent validator of a queue assignment (shares no code with the formulation).

It replays every virtual queue in order from the queue's busy time (the group in service): a
group starts when everything before it on the queue has been served (sum of the earlier groups' work) plus every model swap so far (one swap
time S whenever a group's model differs from the model loaded before it, starting from the
instance's loaded model).  Its estimate is the start (``start`` mode) or
``start + work + tail`` (``completion`` mode).  It checks that every group appears exactly
once, only on instances its model fits, that closed scale-up candidates hold nothing, that hard
deadlines hold, and recomputes the objective:

* ``penalty``: ``Σ_i (estimate_i − slo_i)`` (QLM Eq. 13), all deadlines hard;
* ``total_lateness``: ``Σ_i max(0, estimate_i − slo_i)``; ``max_lateness``: the maximum of that;
* ``late_groups``: the number of groups whose estimate exceeds their SLO;
* ``scale_up``: the summed cost of the scale-up instances that hold a group (deadlines hard).
"""

from __future__ import annotations

import math

from planner.core.result import ValidationReport, Violation
from planner.queueing.problem import QueueAssignment, QueueingProblem

TOLERANCE = 1e-6


def replay(problem: QueueingProblem, assignment: QueueAssignment) -> dict:
    """Start and estimate per group, swaps and busy time per queue."""
    start: dict[int, float] = {}
    estimate: dict[int, float] = {}
    swaps, busy = [], []
    for q, sequence in enumerate(assignment.queues):
        queue = problem.queues[q]
        typ = problem.types[queue.type_index]
        loaded, clock, count = queue.loaded_model, queue.busy_s, 0
        for i in sequence:
            group = problem.groups[i]
            if group.model != loaded:
                clock += typ.swap_time_s
                count += 1
                loaded = group.model
            start[i] = clock
            work = float(problem.work_s[queue.type_index, i])
            tail = float(problem.tail_s[queue.type_index, i])
            estimate[i] = clock + (work + tail if problem.deadline == "completion" else 0.0)
            clock += work
        swaps.append(count)
        busy.append(clock)
    return {"start": start, "estimate": estimate, "swaps": swaps, "busy": busy}


def validate_assignment(problem: QueueingProblem, assignment: QueueAssignment, objective: str | None = None) -> ValidationReport:
    objective = objective or problem.objective
    violations: list[Violation] = []
    if len(assignment.queues) != problem.num_queues:
        violations.append(Violation("queues", "plan", len(assignment.queues), problem.num_queues,
                                    f"plan has {len(assignment.queues)} queues, the problem {problem.num_queues}"))
        return ValidationReport(False, math.nan, tuple(violations), objective_name=objective)
    seen: dict[int, int] = {}
    for q, sequence in enumerate(assignment.queues):
        queue = problem.queues[q]
        for i in sequence:
            if not 0 <= i < problem.num_groups:
                violations.append(Violation("group_once", queue.name, i, problem.num_groups, f"unknown group index {i}"))
                continue
            seen[i] = seen.get(i, 0) + 1
            if not math.isfinite(problem.work_s[queue.type_index, i]):
                violations.append(Violation("fits", f"{problem.groups[i].name} on {queue.name}", 1, 0,
                                            f"{problem.groups[i].model} does not fit on {queue.name}"))
        if queue.optional and sequence and objective != "scale_up":
            violations.append(Violation("open_queue", queue.name, len(sequence), 0,
                                        f"scale-up candidate {queue.name} is used outside a scale-up plan"))
    for i, group in enumerate(problem.groups):
        if seen.get(i, 0) != 1:
            violations.append(Violation("group_once", group.name, seen.get(i, 0), 1,
                                        f"group {group.name} is planned {seen.get(i, 0)} times"))
    if violations:
        return ValidationReport(False, math.nan, tuple(violations), objective_name=objective)
    play = replay(problem, assignment)
    lateness = {i: play["estimate"][i] - g.slo_s for i, g in enumerate(problem.groups)}
    hard = objective in ("penalty", "scale_up")
    if hard:
        for i, late in lateness.items():
            if late > TOLERANCE * max(1.0, abs(problem.groups[i].slo_s)):
                violations.append(Violation("deadline", problem.groups[i].name, play["estimate"][i], problem.groups[i].slo_s,
                                            f"group {problem.groups[i].name} estimated at {play['estimate'][i]:.3f} s "
                                            f"> SLO {problem.groups[i].slo_s:.3f} s"))
    if objective == "penalty":
        value = sum(lateness.values())
    elif objective == "total_lateness":
        value = sum(max(0.0, x) for x in lateness.values())
    elif objective == "max_lateness":
        value = max([max(0.0, x) for x in lateness.values()], default=0.0)
    elif objective == "late_groups":
        value = float(sum(1 for x in lateness.values() if x > TOLERANCE))
    elif objective == "scale_up":
        value = float(sum(problem.types[q.type_index].cost_per_instance
                          for q, seq in zip(problem.queues, assignment.queues) if q.optional and seq))
    else:
        raise ValueError(f"unknown objective {objective!r}")
    details = {
        "start_s": {problem.groups[i].name: play["start"][i] for i in sorted(play["start"])},
        "estimate_s": {problem.groups[i].name: play["estimate"][i] for i in sorted(play["estimate"])},
        "swaps": sum(play["swaps"]),
        "late_groups": sum(1 for x in lateness.values() if x > TOLERANCE),
        "busy_s": max(play["busy"], default=0.0),
    }
    return ValidationReport(not violations, float(value), tuple(violations), details, objective_name=objective)


def validate_plan(problem: QueueingProblem, plan: QueueAssignment) -> ValidationReport:
    """`validate_assignment` on what the plan is scored on: its own ``objective`` and ``deadline`` when it
    names them (a soft plan, a plan made with ``--objective``/``--deadline``), else the problem's; a
    ``scale_up`` plan is replayed on the problem with its scale-up candidates (`QueueingProblem.with_candidates`)."""
    objective = plan.objective or problem.objective
    deadline = plan.deadline or problem.deadline
    target = problem.with_candidates() if objective == "scale_up" else problem
    if deadline != target.deadline:
        target = target.with_objective(deadline=deadline)
    return validate_assignment(target, plan, objective)
