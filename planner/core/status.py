"""The status vocabulary and the one relative gap every result uses (solver outcomes, heuristics,
simulators): defined in core so that core never imports the solver layer."""

from __future__ import annotations

from enum import Enum

import numpy as np


class SolveStatus(str, Enum):
    """Outcome of a solve (MIP, LP or heuristic)."""

    OPTIMAL = "optimal"  # proven optimal (within the solver's gap tolerance)
    FEASIBLE = "feasible"  # a solution, optimality not proven (time limit, heuristic)
    INFEASIBLE = "infeasible"  # proven: no solution exists
    NO_SOLUTION = "no_solution"  # stopped (time limit) before any solution was found
    UNBOUNDED = "unbounded"
    ERROR = "error"  # the solver could not run (license, size limit, internal error)

    @property
    def has_solution(self) -> bool:
        return self in (SolveStatus.OPTIMAL, SolveStatus.FEASIBLE)


def relative_gap(objective: float | None, reference: float | None) -> float | None:
    """The project's one gap: ``|objective − reference| / max(|objective|, |reference|)``.

    ``reference`` is a solver's best bound (a `Result`'s own gap) or another method's objective (a
    comparison: the proven optimum, else the best bound).  Relative to the larger of the two, it lies in
    [0, 1] for objectives of one sign, is defined when either is 0, and equals HiGHS's and Gurobi's MIP
    gap ``|primal − dual| / |primal|`` whenever the objective is the larger value, i.e. on every
    minimisation; on a maximisation it is relative to the bound (never more than the solvers' figure).
    None when either value is missing or not finite.
    """
    if objective is None or reference is None or not np.isfinite(reference) or not np.isfinite(objective):
        return None
    return abs(objective - reference) / max(abs(objective), abs(reference), 1e-10)


def signed_gap(objective: float | None, reference: float | None, sense: str, offset: float = 0.0) -> float | None:
    """`relative_gap` of ``objective`` to ``reference`` on the objective's non-constant part (both minus
    ``offset``), positive when ``objective`` is worse for ``sense`` ("min" or "max"), negative when better."""
    gap = relative_gap(None if objective is None else objective - offset, None if reference is None else reference - offset)
    if gap is None:
        return None
    better = objective < reference if sense == "min" else objective > reference
    return -gap if better else gap  # an equal objective: 0.0, never −0.0
