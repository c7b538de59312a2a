"""The contract every formulation family implements, so that `planner compare`, `planner validate`, sweeps and
`compare all` run any family's heuristics, exact solver and validator without knowing the family.

Each family package ``planner/<family>/harness.py`` defines ``HARNESS = FamilyHarness(...)``; its public
``solve(problem, method, options)`` is ``HARNESS.run``.  The registry is `planner.harness`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Literal

from planner.core.result import Result, ValidationReport
from planner.core.status import signed_gap


@dataclass(frozen=True)
class RunOptions:
    """Options every family's `run` understands (families ignore what does not apply)."""

    solver: str = "highs"
    time_limit: float | None = None
    threads: int | None = None
    seed: int = 0


@dataclass(frozen=True)
class FamilyHarness:
    """How to load, solve and compare instances of one family.

    * ``load(path)`` returns the frozen problem, raising `planner.errors.InputError` on bad input.
    * ``heuristics`` are the method names of every non-exact method (heuristics, simulators,
      baselines); ``exact_method`` names the exact solver (MIP / exact search).
    * ``run(problem, method, options)`` returns a `Result` whose objective was recomputed by the
      family's independent validator (``result.validation``), the bound where one is known.
    * ``sense`` says whether smaller (``min``) or larger (``max``) objectives are better.
    * ``objective_name`` labels the objective in tables ("workers", "total latency (s)", "G", ...).
    """

    name: str
    description: str
    sense: Literal["min", "max"]
    objective_name: str
    load: Callable[[Path], Any]
    heuristics: tuple[str, ...]
    exact_method: str
    run: Callable[[Any, str, RunOptions], Result]
    #: The Solution contract: ``plan_from_dict(problem, data)`` reads a plan back from the JSON mapping its
    #: solution's ``to_dict`` wrote (or an operator wrote by hand), raising a one-line `InputError` on a
    #: malformed plan; ``validate(problem, solution)`` is the family's independent validator.
    plan_from_dict: Callable[[Any, dict], Any] | None = None
    validate: Callable[[Any, Any], ValidationReport] | None = None

    def gap_to(self, objective: float | None, reference: float | None, offset: float = 0.0) -> float | None:
        """The one gap (`planner.core.status.signed_gap`): how much worse ``objective`` is than ``reference``,
        relative to the larger of the two without the objective's constant ``offset``
        (`planner.core.result.Result.objective_offset`); ≥ 0 when the reference is the optimum or a bound.
        `planner.compare` picks the reference (`planner.compare.reference_of`) and applies this gap."""
        return signed_gap(objective, reference, self.sense, offset)
