"""SLO-aware priority scheduling (Huang et al., SC'25; docs/formulations.md §2): G objective, SA, exhaustive search, exact optimum.

Public entry: ``solve(problem, method, options) -> Result`` (`planner.priority.pipeline.solve`, the family's
`planner.core.contract.FamilyHarness.run`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from planner.core.contract import RunOptions
    from planner.core.result import Result


def solve(problem: Any, method: str, options: RunOptions | None = None) -> Result:
    """The family's public entry: ``method`` is ``exact``, ``exhaustive`` or a heuristic
    (`planner.priority.pipeline.solve`; imported on first use, so that importing the package stays light)."""
    from planner.core.contract import RunOptions
    from planner.priority.pipeline import solve as run

    return run(problem, method, options if options is not None else RunOptions())
