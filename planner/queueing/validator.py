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
    """The plan's violations, in this order, and its objective (the module docstring's rules).

    A plan with the wrong number of queues, an unknown, missing or repeated group, a group on a queue its
    model does not fit, or an open scale-up candidate is not replayed (objective NaN); otherwise every
    queue is replayed (`replay`), deadlines are checked when they are hard and the objective is recomputed.
    """
    objective = objective or problem.objective
    violations = _check_queue_count(problem, assignment)
    if violations:
        return ValidationReport(False, math.nan, tuple(violations), objective_name=objective)
    seen: dict[int, int] = {}
    for q, sequence in enumerate(assignment.queues):
        violations += _check_fits(problem, q, sequence, seen)
        violations += _check_open_queue(problem, q, sequence, objective)
    violations += _check_group_once(problem, seen)
    if violations:
        return ValidationReport(False, math.nan, tuple(violations), objective_name=objective)
    play = replay(problem, assignment)
    lateness = {i: play["estimate"][i] - g.slo_s for i, g in enumerate(problem.groups)}
    if objective in ("penalty", "scale_up"):  # hard deadlines
        violations += _check_deadlines(problem, play["estimate"], lateness)
    value = _objective_value(problem, assignment, lateness, objective)
    return ValidationReport(not violations, float(value), tuple(violations), _details(problem, play, lateness),
                            objective_name=objective)


def _check_queue_count(problem: QueueingProblem, assignment: QueueAssignment) -> list[Violation]:
    """``queues``: the plan has one sequence per virtual queue of the problem."""
    if len(assignment.queues) == problem.num_queues:
        return []
    return [Violation("queues", "plan", len(assignment.queues), problem.num_queues,
                      f"plan has {len(assignment.queues)} queues, the problem {problem.num_queues}")]


def _check_fits(problem: QueueingProblem, q: int, sequence, seen: dict[int, int]) -> list[Violation]:
    """``fits`` on queue q: every group it holds has a finite work time on the queue's type; an index that
    names no group is a ``group_once`` violation.  Counts each known group into ``seen``."""
    queue = problem.queues[q]
    out: list[Violation] = []
    for i in sequence:
        if not 0 <= i < problem.num_groups:
            out.append(Violation("group_once", queue.name, i, problem.num_groups, f"unknown group index {i}"))
            continue
        seen[i] = seen.get(i, 0) + 1
        if not math.isfinite(problem.work_s[queue.type_index, i]):
            out.append(Violation("fits", f"{problem.groups[i].name} on {queue.name}", 1, 0,
                                 f"{problem.groups[i].model} does not fit on {queue.name}"))
    return out


def _check_open_queue(problem: QueueingProblem, q: int, sequence, objective: str) -> list[Violation]:
    """``open_queue``: a scale-up candidate (optional queue) holds groups only in a ``scale_up`` plan."""
    queue = problem.queues[q]
    if queue.optional and sequence and objective != "scale_up":
        return [Violation("open_queue", queue.name, len(sequence), 0,
                          f"scale-up candidate {queue.name} is used outside a scale-up plan")]
    return []


def _check_group_once(problem: QueueingProblem, seen: dict[int, int]) -> list[Violation]:
    """``group_once``: every group is planned exactly once (over all queues)."""
    return [Violation("group_once", group.name, seen.get(i, 0), 1,
                      f"group {group.name} is planned {seen.get(i, 0)} times")
            for i, group in enumerate(problem.groups) if seen.get(i, 0) != 1]


def _check_deadlines(problem: QueueingProblem, estimate: dict[int, float],
                     lateness: dict[int, float]) -> list[Violation]:
    """``deadline``: every group's estimate is within its SLO, up to ``TOLERANCE·max(1 s, |SLO|)``."""
    out: list[Violation] = []
    for i, late in lateness.items():
        group = problem.groups[i]
        if late > TOLERANCE * max(1.0, abs(group.slo_s)):
            out.append(Violation("deadline", group.name, estimate[i], group.slo_s,
                                 f"group {group.name} estimated at {estimate[i]:.3f} s > SLO {group.slo_s:.3f} s"))
    return out


def _objective_value(problem: QueueingProblem, assignment: QueueAssignment, lateness: dict[int, float],
                     objective: str) -> float:
    """The objective named ``objective`` (the module docstring's list) from the groups' lateness."""
    if objective == "penalty":
        return sum(lateness.values())
    if objective == "total_lateness":
        return sum(max(0.0, x) for x in lateness.values())
    if objective == "max_lateness":
        return max([max(0.0, x) for x in lateness.values()], default=0.0)
    if objective == "late_groups":
        return float(sum(1 for x in lateness.values() if x > TOLERANCE))
    if objective == "scale_up":
        return float(sum(problem.types[q.type_index].cost_per_instance
                         for q, seq in zip(problem.queues, assignment.queues) if q.optional and seq))
    raise ValueError(f"unknown objective {objective!r}")


def _details(problem: QueueingProblem, play: dict, lateness: dict[int, float]) -> dict:
    """Start and estimate per group (by name), total swaps, late groups and the latest queue end."""
    return {
        "start_s": {problem.groups[i].name: play["start"][i] for i in sorted(play["start"])},
        "estimate_s": {problem.groups[i].name: play["estimate"][i] for i in sorted(play["estimate"])},
        "swaps": sum(play["swaps"]),
        "late_groups": sum(1 for x in lateness.values() if x > TOLERANCE),
        "busy_s": max(play["busy"], default=0.0),
    }


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
