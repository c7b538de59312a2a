"""`Result`: what every method of every family returns (MIP, heuristic, simulator).

The JSON contract of ``--json`` output is `Result.to_dict`: at least
``status``, ``objective``, ``bound``, ``gap``, ``solve_seconds``, ``solver`` and
the solution, plus the independent validator's verdict.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from planner.core.status import SolveStatus, relative_gap


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
    #: which objective ``objective`` is, when a family scores plans on more than one
    objective_name: str = ""

    def to_dict(self) -> dict[str, Any]:
        out = {
            "feasible": self.feasible,
            "objective": self.objective,
            "violations": [v.to_dict() for v in self.violations],
        }
        if self.objective_name:
            out["objective_name"] = self.objective_name
        return out

    def summary(self, limit: int = 3) -> str:
        if self.feasible:
            return "valid"
        shown = "; ".join(v.message for v in self.violations[:limit])
        more = f" (+{len(self.violations) - limit} more)" if len(self.violations) > limit else ""
        return f"{len(self.violations)} violation(s): {shown}{more}"


@dataclass(frozen=True, kw_only=True)
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
    #: A constant part of the objective, the same for every plan (queueing's penalty carries −Σ SLO).
    #: `gap` is relative to the objective without it: a constant would make any gap look small.
    objective_offset: float = 0.0

    @property
    def gap(self) -> float | None:
        """The one gap (`planner.core.status.relative_gap`) between the objective and the bound, on the
        objective's non-constant part (both minus ``objective_offset``)."""
        if self.objective is None or self.bound is None:
            return None
        return relative_gap(self.objective - self.objective_offset, self.bound - self.objective_offset)

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
            "objective_offset": self.objective_offset,
            "solve_seconds": round(self.solve_seconds, 6),
            "build_seconds": round(self.build_seconds, 6),
            "message": self.message,
            "validation": self.validation.to_dict() if self.validation else None,
            "stats": self.stats,
            "solution": self.solution.to_dict() if self.solution is not None else None,
        }
