"""One contract every formulation family implements, so that `planner compare all` and sweeps
can run any family's heuristics and exact solver without knowing the family.

Each family package ``planner/<family>/harness.py`` defines ``HARNESS = FamilyHarness(...)``.
`available_families` imports the modules listed in `FAMILY_MODULES` that exist in this install.

Instance discovery (`family_of`): a YAML instance file belongs to family F when its top-level
``family:`` key is F, or, lacking that key, when it sits in a directory named F (the layout of
``instances/<family>/``).  Other files (CSV sidecars, READMEs, scripts) are not instances.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Literal

from planner.core.result import Result, ValidationReport
from planner.core.status import signed_gap

FAMILY_MODULES: dict[str, str] = {
    "placement": "planner.placement.harness",
    "batching": "planner.batching.harness",
    "priority": "planner.priority.harness",
    "queueing": "planner.queueing.harness",
    "deployment": "planner.deployment.harness",
    "routing": "planner.deployment.routing_harness",
}


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
        (`planner.core.result.Result.objective_offset`); ≥ 0 when the reference is the optimum or a bound."""
        return signed_gap(objective, reference, self.sense, offset)


def available_families() -> dict[str, FamilyHarness]:
    """The families present in this install, by name, in `FAMILY_MODULES` order."""
    found: dict[str, FamilyHarness] = {}
    for name, module in FAMILY_MODULES.items():
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name and module.startswith(exc.name):  # the family is absent, not broken
                continue
            raise
        found[name] = mod.HARNESS
    return found


def family_of(path: Path, families: dict[str, FamilyHarness] | None = None) -> str | None:
    """The family an instance file belongs to, or None (see the module docstring)."""
    from planner.core.io import read_yaml_mapping
    from planner.errors import PlannerError

    families = families if families is not None else available_families()
    if path.suffix.lower() not in (".yaml", ".yml"):
        return None
    try:  # the loaders' reading rules: a regular UTF-8 file under the size cap, aliases bounded
        data = read_yaml_mapping(path)
    except PlannerError:
        return None
    if not isinstance(data, dict):
        return None
    declared = data.get("family")
    if isinstance(declared, str):
        return declared if declared in families else None
    for parent in path.resolve().parents:
        if parent.name in families:
            return parent.name
    return None
