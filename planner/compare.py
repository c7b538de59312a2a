"""The one comparison of a family's methods on one instance, with the project's one gap.

`compare` runs every heuristic and the exact method of a family through its harness
(`planner.harness.FamilyHarness.run`, one `RunOptions` for every method: each method gets the whole
``time_limit``, as a point of `planner compare all` does) and scores every method against one reference.

**Reference** (`reference_of`), in this order:

1. ``optimum``: the exact method's objective when it is proven optimal;
2. ``bound``: else the exact method's best bound (the gap is then an upper estimate of the gap to the
   optimum: the optimum lies between the bound and every plan);
3. ``incumbent``: else the best objective of any method whose plan the validator accepted (no exact
   method run, or it stopped with neither a proof nor a bound).

**Gap** of a method (`planner.core.status.signed_gap`):
``gap = |f − r| / max(|f|, |r|)`` on the objective's non-constant part (``f`` and ``r`` minus
`planner.core.result.Result.objective_offset`), positive when ``f`` is worse than ``r`` for the family's
sense and negative when better (a heuristic beating the exact method's incumbent).  It is the
solvers' MIP gap ``|primal − dual| / |primal|`` on every minimisation, lies in [0, 1] for objectives of
one sign and is defined when either is 0.  The exact method's own row follows the same rule: 0 at a
proven optimum, its optimality gap when the reference is its bound.

`planner compare FAMILY` renders a `Comparison`; `planner compare all` (`planner.sweep.compare_all`) runs
the same methods as sweep points and scores them with the same `reference_of` and `signed_gap`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from planner.core.status import SolveStatus, signed_gap
from planner.errors import InfeasibleError

if TYPE_CHECKING:
    import pandas as pd

    from planner.core.result import Result
    from planner.harness import FamilyHarness, RunOptions

#: One line stating the gap, for tables and ``--json`` (``gap_definition``).
GAP_DEFINITION = ("gap = |objective − reference| / max(|objective|, |reference|) without the objective's constant, "
                  "positive when worse; reference = the exact method's proven optimum, else its best bound "
                  "(gap an upper estimate), else the best validated plan")

#: Statuses whose objective is a plan's (`SolveStatus.has_solution`).
_PLAN_STATUSES = (SolveStatus.OPTIMAL.value, SolveStatus.FEASIBLE.value)

ReferenceKind = Literal["optimum", "bound", "incumbent", ""]


@dataclass(frozen=True)
class Scored:
    """What `reference_of` needs of one method's outcome (a `Result` or a row stored by a sweep)."""

    method: str
    kind: Literal["heuristic", "exact"]
    status: str
    objective: float | None
    bound: float | None
    valid: bool | None

    @property
    def has_plan(self) -> bool:
        """A validated (or unvalidated, never rejected) plan with a finite objective."""
        return (self.status in _PLAN_STATUSES and _finite(self.objective) and self.valid is not False)


def _finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


def reference_of(entries: Iterable[Scored], sense: str) -> tuple[float | None, ReferenceKind]:
    """The reference every gap of one instance is measured to, and its kind (module docstring):
    the exact method's proven optimum, else its best bound, else the best plan; (None, "") without any."""
    entries = list(entries)
    exact = next((e for e in entries if e.kind == "exact"), None)
    if exact is not None:
        if exact.status == SolveStatus.OPTIMAL.value and exact.has_plan:
            return float(exact.objective), "optimum"  # type: ignore[arg-type]
        if _finite(exact.bound):
            return float(exact.bound), "bound"  # type: ignore[arg-type]
    plans = [float(e.objective) for e in entries if e.has_plan]  # type: ignore[arg-type]
    if not plans:
        return None, ""
    return (min(plans) if sense == "min" else max(plans)), "incumbent"


@dataclass(frozen=True)
class ComparisonRow:
    """One method's outcome and its gap to the comparison's reference (`reference_of`)."""

    method: str
    kind: Literal["heuristic", "exact"]
    status: str
    objective: float | None
    bound: float | None
    gap: float | None
    gap_reference: ReferenceKind
    valid: bool | None
    seconds: float
    message: str
    #: the method's `Result` (family-specific columns read its solution and stats; `run_method`)
    result: Result | None = field(default=None, compare=False, repr=False)

    def to_dict(self, with_result: bool = False) -> dict[str, Any]:
        out = {"method": self.method, "kind": self.kind, "status": self.status, "objective": self.objective,
               "bound": self.bound, "gap": self.gap, "gap_reference": self.gap_reference, "valid": self.valid,
               "seconds": self.seconds, "message": self.message}
        if with_result:
            out["result"] = None if self.result is None else self.result.to_dict()
        return out


@dataclass(frozen=True)
class Comparison:
    """Every method of one family on one instance, scored against one reference (module docstring)."""

    family: str
    sense: Literal["min", "max"]
    objective_name: str
    exact_method: str
    rows: tuple[ComparisonRow, ...]
    reference: float | None
    gap_reference: ReferenceKind
    #: the objective's constant part (`Result.objective_offset`, the same for every plan), left out of gaps
    objective_offset: float = 0.0

    @property
    def exact(self) -> ComparisonRow | None:
        """The exact method's row (None when it was not run)."""
        return next((r for r in self.rows if r.kind == "exact"), None)

    @property
    def optimum(self) -> float | None:
        """The exact method's objective when proven optimal."""
        return self.reference if self.gap_reference == "optimum" else None

    def row(self, method: str) -> ComparisonRow:
        return next(r for r in self.rows if r.method == method)

    def reference_text(self, unit: str = "") -> str:
        """What the gaps are relative to, for a table title: ``gap to the MIP optimum 12 workers``."""
        if not self.gap_reference:
            return "no gap: no method found a valid plan"
        value = f"{self.reference:.6g}{unit}"
        exact = self.exact_method.upper() if self.exact_method in ("mip", "milp") else self.exact_method
        text = {"optimum": f"gap to the {exact} optimum {value}",
                "bound": f"gap to the {exact} bound {value}, an upper estimate of the gap to the optimum",
                "incumbent": f"gap to the best plan {value}"}[self.gap_reference]
        if self.objective_offset:
            text += f", both without the objective's constant {self.objective_offset:.6g}{unit}"
        return text

    def to_dict(self, with_results: bool = True) -> dict[str, Any]:
        """JSON-ready: the reference and, per method, the `ComparisonRow` fields (with ``result``, the
        method's `Result.to_dict`, when ``with_results``)."""
        return {"family": self.family, "sense": self.sense, "objective_name": self.objective_name,
                "exact_method": self.exact_method, "reference": self.reference, "gap_reference": self.gap_reference,
                "optimum": self.optimum, "objective_offset": self.objective_offset, "gap_definition": GAP_DEFINITION,
                "methods": [r.to_dict(with_results) for r in self.rows]}

    def to_frame(self) -> pd.DataFrame:
        """One row per method: the `ComparisonRow` fields but ``result``."""
        import pandas as pd

        return pd.DataFrame([r.to_dict() for r in self.rows],
                            columns=["method", "kind", "status", "objective", "bound", "gap", "gap_reference", "valid",
                                     "seconds", "message"])


@dataclass(frozen=True)
class MethodEvent:
    """Progress of `compare`: ``result`` is None when ``method`` starts, its `Result` when it has finished."""

    method: str
    index: int  # 0-based position in the run order
    total: int
    result: Result | None = None


def _harness(family: str | FamilyHarness) -> FamilyHarness:
    from planner.errors import PlannerError
    from planner.harness import available_families

    if not isinstance(family, str):
        return family
    families = available_families()
    if family not in families:
        raise PlannerError(f"unknown family {family!r} (available: {', '.join(families)})")
    return families[family]


def run_method(harness: FamilyHarness, problem: Any, method: str, options: RunOptions) -> Result:
    """``harness.run`` with a method that cannot finish the instance (`InfeasibleError`, e.g. a batching
    preset stuck on a request larger than its token budget) as an ``infeasible`` result saying why."""
    return _run(harness, problem, method, options)[0]


def _run(harness: FamilyHarness, problem: Any, method: str, options: RunOptions
         ) -> tuple[Result, InfeasibleError | None]:
    from planner.core.result import Result

    start = time.perf_counter()
    try:
        return harness.run(problem, method, options), None
    except InfeasibleError as exc:
        solver = method if method == harness.exact_method else "heuristic"
        return Result(family=harness.name, method=method, solver=solver, status=SolveStatus.INFEASIBLE, objective=None, bound=None, solve_seconds=time.perf_counter() - start,
                      solution=None, message=str(exc)), exc


def score(harness_sense: str, results: Sequence[tuple[str, Literal["heuristic", "exact"], Result]]
          ) -> tuple[tuple[ComparisonRow, ...], float | None, ReferenceKind]:
    """Rows of (method, kind, result) with their gaps to the one reference (`reference_of`)."""
    scored = [Scored(m, k, r.status.value, r.objective, r.bound,
                     None if r.validation is None else bool(r.validation.feasible)) for m, k, r in results]
    reference, kind = reference_of(scored, harness_sense)
    rows = []
    for (method, k, r), s in zip(results, scored):
        gap = signed_gap(r.objective, reference, harness_sense, r.objective_offset) if s.has_plan else None
        message = r.message
        if s.valid is False and "validator" not in message:
            message = (message + "; " if message else "") + f"validator: {r.validation.summary()}"  # type: ignore[union-attr]
        rows.append(ComparisonRow(method, k, r.status.value, r.objective, r.bound, gap, kind if gap is not None else "",
                                  s.valid, r.solve_seconds, message, r))
    return tuple(rows), reference, kind


def compare(
    problem: Any,
    family: str | FamilyHarness,
    methods: Sequence[str] | None = None,
    options: RunOptions | None = None,
    progress: Callable[[MethodEvent], None] | None = None,
) -> Comparison:
    """Run ``methods`` (default: every heuristic of the family's harness, then its exact method) on
    ``problem`` and score each against the one reference (module docstring).

    ``family``: a harness name (`planner.harness.available_families`) or a `FamilyHarness` (a command
    may pass one whose ``run`` fixes family-specific options, e.g. queueing's formulation).
    ``progress`` is called when each method starts and when it finishes (`MethodEvent`).  A method that
    cannot finish the instance is an ``infeasible`` row (`run_method`); when every method fails so, the
    first `InfeasibleError` is raised (the instance itself has no plan).
    """
    from planner.errors import PlannerError
    from planner.harness import RunOptions

    harness = _harness(family)
    options = options or RunOptions()
    names = tuple(methods) if methods is not None else (*harness.heuristics, harness.exact_method)
    known = (*harness.heuristics, harness.exact_method)
    unknown = [m for m in names if m not in known]
    if unknown:
        raise PlannerError(f"unknown {harness.name} method {unknown[0]!r} (use one of {', '.join(known)})")
    results: list[tuple[str, Literal["heuristic", "exact"], Result]] = []
    errors: list[InfeasibleError] = []
    for index, method in enumerate(names):
        if progress is not None:
            progress(MethodEvent(method, index, len(names)))
        result, error = _run(harness, problem, method, options)
        if error is not None:
            errors.append(error)
        kind: Literal["heuristic", "exact"] = "exact" if method == harness.exact_method else "heuristic"
        results.append((method, kind, result))
        if progress is not None:
            progress(MethodEvent(method, index, len(names), result))
    if errors and len(errors) == len(results):
        raise errors[0]
    rows, reference, kind = score(harness.sense, results)
    offset = next((r.objective_offset for _, _, r in results if r.objective_offset), 0.0)
    return Comparison(harness.name, harness.sense, harness.objective_name, harness.exact_method, rows, reference, kind,
                      offset)
