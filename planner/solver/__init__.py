"""Solver layer: one `LinearModel`, solved by HiGHS (default), Gurobi or CBC.

``solve(model, solver="highs", options)`` returns a `SolverOutcome` with status,
objective, best bound, gap, wall time and the column values.  A time limit
returns the incumbent and the bound; an infeasible model can be diagnosed by
constraint family with `diagnose_infeasibility`.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.errors import PlannerError
from planner.solver.features import FEATURES, SolverFeatures
from planner.solver.model import INF, LinearModel, ModelBuilder, RowBlock, VarBlock
from planner.solver.outcome import ProgressEvent, SolveOptions, SolverOutcome, SolveStatus, relative_gap

SOLVERS = ("highs", "gurobi", "cbc")

__all__ = [
    "FEATURES",
    "INF",
    "SOLVERS",
    "Diagnosis",
    "LinearModel",
    "ModelBuilder",
    "ProgressEvent",
    "RowBlock",
    "SolveOptions",
    "SolveStatus",
    "SolverFeatures",
    "SolverOutcome",
    "VarBlock",
    "diagnose_infeasibility",
    "relative_gap",
    "solve",
]


def check_solver_name(solver: str) -> str:
    name = solver.lower()
    if name not in SOLVERS:
        raise PlannerError(f"unknown solver {solver!r} (expected one of: {', '.join(SOLVERS)})")
    return name


def solve(model: LinearModel, solver: str = "highs", options: SolveOptions | None = None) -> SolverOutcome:
    """Solve ``model`` with the named backend."""
    options = options or SolveOptions()
    name = check_solver_name(solver)
    if name == "highs":
        from planner.solver.highs_backend import solve_highs

        return solve_highs(model, options)
    if name == "cbc":
        from planner.solver.cbc_backend import solve_cbc

        return solve_cbc(model, options)
    from planner.solver.gurobi_backend import solve_gurobi

    return solve_gurobi(model, options)


@dataclass(frozen=True)
class Diagnosis:
    """Which constraint families conflict.

    ``families`` is an irreducible set of families: the model is infeasible
    with all of them and feasible as soon as any one is removed (deletion
    filter over families).  ``rows`` names individual rows of a solver IIS
    when the solver could compute one.
    """

    families: tuple[str, ...]
    rows: tuple[str, ...] = ()
    method: str = ""

    def summary(self) -> str:
        text = "conflicting constraint families: " + (", ".join(self.families) if self.families else "unknown")
        if self.rows:
            shown = ", ".join(self.rows[:5])
            more = f" (+{len(self.rows) - 5} more)" if len(self.rows) > 5 else ""
            text += f"; IIS rows: {shown}{more}"
        return text


def _is_infeasible(model: LinearModel, solver: str, time_limit: float) -> bool | None:
    out = solve(model.as_feasibility(), solver, SolveOptions(time_limit=time_limit))
    if out.status == SolveStatus.INFEASIBLE:
        return True
    if out.status.has_solution:
        return False
    return None  # undecided within the time limit


def diagnose_infeasibility(
    model: LinearModel, solver: str = "highs", time_limit_per_test: float = 10.0
) -> Diagnosis:
    """Find the constraint families (and, where the solver can, the rows) behind an infeasibility."""
    name = check_solver_name(solver)
    families = list(model.families)
    keep = list(families)
    for fam in families:
        trial = [f for f in keep if f != fam]
        reduced = model.without_families([f for f in families if f not in trial])
        verdict = _is_infeasible(reduced, name, time_limit_per_test)
        if verdict:  # still infeasible without `fam`: it is not needed for the conflict
            keep = trial
    rows: list[int] | None = None
    method = "deletion filter over constraint families"
    if name == "gurobi" and FEATURES["gurobi"].iis_mip:
        from planner.solver.gurobi_backend import gurobi_iis_rows

        rows = gurobi_iis_rows(model)
        if rows:
            method += " + Gurobi IIS"
    if rows is None:
        from planner.solver.highs_backend import lp_relaxation_iis_rows

        rows = lp_relaxation_iis_rows(model)
        if rows:
            method += " + HiGHS IIS of the LP relaxation"
    described = tuple(model.describe_row(r) for r in rows) if rows else ()
    return Diagnosis(tuple(keep), described, method)

