"""One runner for the non-exact methods of deployment and routing (cost plans, request classes, routers).

`run_heuristic` times one heuristic on a problem and passes its plan to the family's independent
validator.  The rule, the same for every method:

* no plan (the heuristic returns None): status ``no_solution``, the ``none_message`` says why;
* a valid plan: status ``feasible``, the objective is the validator's value of the plan;
* an invalid plan: status ``error``, the plan is kept in ``solution`` (the user can inspect it), the
  validator's report in ``validation``, the objective is the validator's value of the plan, and the
  message names the violations.  `planner.compare` gives such a plan no gap.
"""

from __future__ import annotations

import time
from typing import Any, Callable

from planner.core.result import Result, ValidationReport
from planner.core.status import SolveStatus


def run_heuristic(problem: Any, method: str, heuristic: Callable[[Any], Any | None],
                  validate: Callable[[Any, Any], ValidationReport], *, family: str,
                  none_message: str) -> Result:
    """``heuristic(problem)`` validated by ``validate(problem, plan)``, under the rule of the module docstring."""
    start = time.perf_counter()
    solution = heuristic(problem)
    seconds = time.perf_counter() - start
    if solution is None:
        return Result(family=family, method=method, solver="heuristic", status=SolveStatus.NO_SOLUTION,
                      objective=None, bound=None, solve_seconds=seconds, solution=None, message=none_message)
    report = validate(problem, solution)
    return Result(family=family, method=method, solver="heuristic",
                  status=SolveStatus.FEASIBLE if report.feasible else SolveStatus.ERROR,
                  objective=report.objective, bound=None, solve_seconds=seconds, solution=solution,
                  validation=report,
                  message="" if report.feasible else f"validator rejects the {method} plan: {report.summary()}")
