"""What a backend returns, and the options every backend understands."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum

import numpy as np

from planner.core.status import SolveStatus, relative_gap  # noqa: F401 (re-exported: the solver layer's outcome vocabulary)


@dataclass(frozen=True)
class ProgressEvent:
    """Incumbent and bound during a MIP solve (objective units of the model)."""

    seconds: float
    incumbent: float | None
    bound: float | None


@dataclass(frozen=True)
class SolveOptions:
    time_limit: float | None = None
    threads: int | None = None
    mip_rel_gap: float = 1e-6
    mip_abs_gap: float | None = None  # None: derived from objective integrality
    seed: int = 0
    warm_start: np.ndarray | None = None
    progress: Callable[[ProgressEvent], None] | None = None
    verbose: bool = False
    node_limit: int | None = None
    #: None keeps the solver's default; False switches presolve off (HiGHS ``presolve``, Gurobi ``Presolve``).
    presolve: bool | None = None
    #: Share of the search spent in primal heuristics, 0..1 (HiGHS ``mip_heuristic_effort``, default 0.05;
    #: Gurobi ``Heuristics``, default 0.05); None keeps the solver's default.
    heuristic_effort: float | None = None

    def __post_init__(self) -> None:
        if self.heuristic_effort is not None and not 0.0 <= self.heuristic_effort <= 1.0:
            raise ValueError(f"heuristic_effort must be in [0, 1], got {self.heuristic_effort}")


@dataclass(frozen=True)
class SolverOutcome:
    """Raw result of one backend call, before a family turns it into a Solution."""

    status: SolveStatus
    solver: str
    objective: float | None
    bound: float | None
    x: np.ndarray | None
    seconds: float
    message: str = ""
    node_count: int | None = None
    warm_start_accepted: bool | None = None
    extra: dict = field(default_factory=dict)

    @property
    def gap(self) -> float | None:
        return relative_gap(self.objective, self.bound)
