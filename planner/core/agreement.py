"""A MIP's optimality claim is only as good as the agreement of three numbers (shared by every family).

For a solve that returns a point x of a `LinearModel`, there are three values of "the objective":

1. the value the **solver reports** (HiGHS ``objective_function_value``, Gurobi ``ObjVal``) — the
   number its optimality proof (incumbent − bound ≤ gap) was checked against;
2. the **model's value at the returned point**, ``cᵀx + offset`` (`model_value`);
3. the **independent validator's recomputation** of the plan extracted from x.

A proof is about (1).  If (1) ≠ (2), the solver proved optimality for a number that is not the value of
the point it returned: the claim is void, whatever the bound.  Measured with highspy 1.16.0 on the
batching path model: a warm start is mapped into HiGHS's presolved space onto a point that violates
an equality row of the reduced model (its reduced objective is one decode arc below the start's),
HiGHS accepts it, the root's dual bound equals that value and the solve stops at node 0 as
"optimal" with primal = dual = the wrong number while returning the warm start itself.  Without the
warm start, or with presolve off, the same model solves to the right optimum.  If (2) ≠ (3), the
model's objective does not price the plan the way the validator does (a modelling error, or slack in
a variable the objective does not push down at a point that is not optimal): again, nothing was
proven about the plan the user gets.

`objective_mismatch` returns the one-line reason when two values differ by more than
`OBJECTIVE_REL_TOL` relative (plus an absolute floor for values near 0), else ``""``.
`reconcile_status` turns a mismatch into the rule: such a result is never reported ``optimal``.
"""

from __future__ import annotations

import math

import numpy as np

from planner.core.status import SolveStatus

#: Two objective values agree when they differ by at most this much relative to the larger one.
OBJECTIVE_REL_TOL = 1e-6


def model_value(model, x: np.ndarray) -> float:
    """``cᵀx + offset`` of a `planner.solver.LinearModel` at ``x`` (the value the point really has)."""
    return float(np.dot(np.asarray(model.cost, float), np.asarray(x, float)) + float(model.offset))


def objective_mismatch(first: float | None, second: float | None, *, first_name: str = "MIP objective",
                       second_name: str = "the validator's recomputation", rel_tol: float = OBJECTIVE_REL_TOL,
                       abs_tol: float = 1e-12, fmt: str = ".9g") -> str:
    """``""`` when the two values agree (``|a − b| ≤ rel_tol·max(|a|, |b|) + abs_tol``), else a message
    naming both; a missing or non-finite value is a mismatch (nothing to agree with)."""
    if first is None or second is None or not (math.isfinite(first) and math.isfinite(second)):
        return f"{first_name} {first} cannot be checked against {second_name} {second}"
    if abs(first - second) <= rel_tol * max(abs(first), abs(second)) + abs_tol:
        return ""
    return f"{first_name} {first:{fmt}} differs from {second_name} {second:{fmt}}"


def reconcile_status(status: SolveStatus, *mismatches: str) -> tuple[SolveStatus, str]:
    """The status to report given the mismatch messages of `objective_mismatch` (empty ones ignored):
    ``optimal`` becomes ``feasible`` when any is non-empty; the joined message says why."""
    reasons = [m for m in mismatches if m]
    if not reasons:
        return status, ""
    text = "; ".join(reasons)
    if status == SolveStatus.OPTIMAL:
        return SolveStatus.FEASIBLE, f"{text}: not reported optimal"
    return status, text
