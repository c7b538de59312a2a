"""What the cost-plan and class-plan pipelines share (`cost_solve.solve_cost_plan`, `classes.solve_class_plan`).

Both are min-$/h MILPs run as phases (`planner.core.phases`) over a state derived from `PlanState`:
a bound (the best proven lower bound and what gave it), an incumbent (the cheapest plan the independent
validator accepts), then the MILP's outcome, taken by `take_milp_outcome`, and the answer of
`final_answer`.  The rules, the same for both:

* a candidate plan is the incumbent when the validator accepts it and it is cheaper by more than 1e-12
  $/h (`best_valid`; the first of equal plans stays);
* the MILP's dual bound replaces the bound when larger; the MILP's plan replaces the incumbent when the
  validator accepts it and it is no dearer (1e-9 $/h); its status is the solver's unless its objective
  disagrees with the model's value at its point or the validator's (`planner.core.agreement`), and then
  the dual bound of the mispriced model is dropped;
* a plan not from the MILP within ``rel_gap`` of the bound is optimal; a feasible plan's message names it
  and the bound's source.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable

import numpy as np

from planner.core.agreement import model_value, objective_mismatch, reconcile_status
from planner.core.result import Result, ValidationReport
from planner.solver import LinearModel, SolverOutcome, SolveStatus, relative_gap

#: (validator's $/h, plan, validator's report)
Incumbent = tuple[float, Any, ValidationReport]


@dataclass
class PlanState:
    """The shared part of a plan pipeline's state."""

    t0: float = 0.0
    phase_seconds: dict[str, float] = field(default_factory=dict)
    stats: dict[str, Any] = field(default_factory=dict)
    build: float = 0.0  # wall seconds of building the MILP
    bound: float = 0.0
    bound_source: str = ""
    best: Incumbent | None = None
    outcome: SolverOutcome | None = None
    messages: list[str] = field(default_factory=list)
    status: SolveStatus = SolveStatus.FEASIBLE
    from_milp: bool = False

    def raise_bound(self, value: float | None, source: str) -> None:
        """The bound becomes ``value`` when that is larger."""
        if value is not None and value > self.bound:
            self.bound, self.bound_source = float(value), source

    def needs_milp(self, rel_gap: float) -> bool:
        """No incumbent, or one farther than ``rel_gap`` from the bound."""
        return self.best is None or relative_gap(self.best[0], self.bound) > rel_gap


def best_valid(problem: Any, candidates: Iterable[Any], validate: Callable[[Any, Any], ValidationReport],
               best: Incumbent | None = None) -> Incumbent | None:
    """The cheapest of ``candidates`` (None entries skipped) the validator accepts, or ``best`` when none is cheaper."""
    for sol in candidates:
        if sol is None:
            continue
        report = validate(problem, sol)
        if report.feasible and (best is None or report.objective < best[0] - 1e-12):
            best = (report.objective, sol, report)
    return best


def take_milp_outcome(s: PlanState, problem: Any, model: LinearModel, plan_of: Callable[[np.ndarray], Any],
                      validate: Callable[[Any, Any], ValidationReport]) -> None:
    """Take the MILP's outcome ``s.outcome`` into ``s`` (module docstring); ``plan_of(x)`` is the plan at point x."""
    outcome = s.outcome
    assert outcome is not None
    s.stats.update(nodes=outcome.node_count, solver_seconds=round(outcome.seconds, 6),
                   warm_start_accepted=outcome.warm_start_accepted)
    before = (s.bound, s.bound_source)
    s.raise_bound(outcome.bound, "MILP dual bound")
    if outcome.status == SolveStatus.ERROR:
        s.messages.append(outcome.message or "the solver could not run")
    if not (outcome.status.has_solution and outcome.x is not None):
        return
    sol = plan_of(outcome.x)
    report = validate(problem, sol)
    if not report.feasible:
        s.messages.append(f"validator rejects the MILP plan: {report.summary()}")
    elif s.best is None or report.objective <= s.best[0] + 1e-9:
        s.best, s.from_milp = (report.objective, sol, report), True
        s.status, disagreement = reconcile_status(
            outcome.status,
            objective_mismatch(outcome.objective, model_value(model, outcome.x), first_name="MILP $/h",
                               second_name="the model's value at its point"),
            objective_mismatch(outcome.objective, report.objective, first_name="MILP $/h",
                               second_name="the validator's"))
        if disagreement:
            s.messages.append(disagreement)
            s.bound, s.bound_source = before  # the mispriced model's dual bound proves nothing


def final_answer(s: PlanState, family: str, notes: list[str], rel_gap: float) -> Result:
    """The result of a plan pipeline: the incumbent with the bound, or no plan (an error when the solver failed)."""
    outcome = s.outcome
    solver = outcome.solver if outcome is not None else "heuristic"
    if s.best is None:
        failed = outcome is not None and outcome.status == SolveStatus.ERROR
        return Result(family=family, method="milp", solver=solver,
                      status=SolveStatus.ERROR if failed else SolveStatus.NO_SOLUTION, objective=None, bound=s.bound,
                      solve_seconds=time.perf_counter() - s.t0, solution=None, build_seconds=s.build,
                      message=_join(*s.messages, "no plan found within the limits", *notes), validation=None,
                      bound_source=s.bound_source, stats=s.stats)
    objective, solution, report = s.best
    if not s.from_milp and relative_gap(objective, s.bound) <= rel_gap:
        s.status = SolveStatus.OPTIMAL  # a plan without the MILP meets the bound
    if s.status == SolveStatus.FEASIBLE and not s.messages:
        s.messages.append(f"the {solution.method} plan and the bound ({s.bound_source})"
                          + (": the MILP stopped at its node budget" if outcome is not None else ""))
    return Result(family=family, method="milp", solver=solver, status=s.status, objective=objective, bound=s.bound,
                  solve_seconds=time.perf_counter() - s.t0, solution=solution, build_seconds=s.build,
                  message=_join(*s.messages, *notes), validation=report, bound_source=s.bound_source,
                  stats=s.stats)


def with_phases(result: Result, s: PlanState) -> Result:
    """``result`` with ``stats["phases"]``: the wall seconds of each phase run."""
    return replace(result, stats={**result.stats, "phases": {k: round(v, 6) for k, v in s.phase_seconds.items()}})


def _join(*parts: str) -> str:
    return "; ".join(p for p in parts if p)
