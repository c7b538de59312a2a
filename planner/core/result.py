"""`Result`: what every method of every family returns (MIP, heuristic, simulator).

The JSON contract of ``--json`` output is `Result.to_dict`: at least
``status``, ``objective``, ``bound``, ``gap``, ``solve_seconds``, ``solver`` and
the solution, plus the independent validator's verdict.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from planner.solver.outcome import SolveStatus, relative_gap


class SolutionLike(Protocol):
    def to_dict(self) -> dict[str, Any]: ...


S = TypeVar("S", bound=SolutionLike)


@dataclass(frozen=True)
class Violation:
    """One violated constraint found by a validator."""

    constraint: str  # family name, e.g. "kv_capacity"
    where: str  # e.g. "worker 3, iteration 120"
    value: float
    limit: float
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "constraint": self.constraint,
            "where": self.where,
            "value": self.value,
            "limit": self.limit,
            "message": self.message,
        }


@dataclass(frozen=True)
class ValidationReport:
    """An independent validator's verdict: feasibility, violations and the recomputed objective."""

    feasible: bool
    objective: float
    violations: tuple[Violation, ...] = ()
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "feasible": self.feasible,
            "objective": self.objective,
            "violations": [v.to_dict() for v in self.violations],
        }

    def summary(self, limit: int = 3) -> str:
        if self.feasible:
            return "valid"
        shown = "; ".join(v.message for v in self.violations[:limit])
        more = f" (+{len(self.violations) - limit} more)" if len(self.violations) > limit else ""
        return f"{len(self.violations)} violation(s): {shown}{more}"


@dataclass(frozen=True)
class Result(Generic[S]):
    """Status, objective, best bound, gap, wall time and the solution of one method on one instance."""

    family: str
    method: str
    solver: str
    status: SolveStatus
    objective: float | None
    bound: float | None
    solve_seconds: float
    solution: S | None
    build_seconds: float = 0.0
    message: str = ""
    validation: ValidationReport | None = None
    bound_source: str = ""
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def gap(self) -> float | None:
        return relative_gap(self.objective, self.bound)

    @property
    def proven_optimal(self) -> bool:
        return self.status == SolveStatus.OPTIMAL

    def to_dict(self) -> dict[str, Any]:
        return {
            "family": self.family,
            "method": self.method,
            "solver": self.solver,
            "status": self.status.value,
            "objective": self.objective,
            "bound": self.bound,
            "bound_source": self.bound_source,
            "gap": self.gap,
            "solve_seconds": round(self.solve_seconds, 6),
            "build_seconds": round(self.build_seconds, 6),
            "message": self.message,
            "validation": self.validation.to_dict() if self.validation else None,
            "stats": self.stats,
            "solution": self.solution.to_dict() if self.solution is not None else None,
        }
