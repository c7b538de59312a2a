"""Multi-instance mode, Alg. 2 of the paper: memory-based instance assignment, then per-instance
priority mapping (each instance is an independent `PriorityProblem`).

`token_num` is Eq. 20: the token capacity of an instance with ``memory_bytes`` of memory, memory
utility μ (peak use / memory available before inference) and σ bytes per token.

`assign_instances` (InstAssign): requests, in arrival order, go one by one to the instance with
the largest remaining token memory (ties: lowest index); when even that instance cannot hold the
request, every instance's remaining memory is reset to its capacity (a new scheduling
"iteration") and the request goes to instance 0.  The problem's ``token_capacity`` is the
per-instance capacity (required in this mode).
"""

from __future__ import annotations

from planner.errors import PlannerError
from planner.priority.problem import PriorityProblem


def token_num(memory_bytes: float, utility: float, bytes_per_token: float) -> int:
    """Eq. 20: token_num(m) = m·μ/σ (rounded down)."""
    if memory_bytes <= 0 or not 0 < utility <= 1 or bytes_per_token <= 0:
        raise PlannerError("token_num needs memory > 0, 0 < utility ≤ 1 and bytes per token > 0")
    return int(memory_bytes * utility // bytes_per_token)


def assign_instances(problem: PriorityProblem, instances: int) -> list[list[int]]:
    """Job indices per instance (InstAssign of Alg. 2)."""
    if instances < 1:
        raise PlannerError(f"--instances must be at least 1, got {instances}")
    capacity = problem.token_capacity
    if capacity is None:
        if instances == 1:
            return [list(range(problem.size))]
        raise PlannerError(f"{problem.name}: multi-instance mode needs token_capacity (Eq. 20) in the instance file")
    remaining = [capacity] * instances
    groups: list[list[int]] = [[] for _ in range(instances)]
    order = sorted(range(problem.size), key=lambda i: (problem.jobs[i].arrival, i))
    for job in order:
        need = problem.jobs[job].tokens
        target = max(range(instances), key=lambda k: (remaining[k], -k))
        if remaining[target] < need:
            remaining = [capacity] * instances
            target = 0
        groups[target].append(job)
        remaining[target] -= need
    return groups


def sub_problem(problem: PriorityProblem, jobs: list[int]) -> PriorityProblem:
    """The problem restricted to ``jobs`` (one instance)."""
    data = problem.model_dump()
    data["jobs"] = [data["jobs"][i] for i in jobs]
    data["name"] = f"{problem.name}[{len(jobs)} jobs]"
    return PriorityProblem.model_validate(data)
