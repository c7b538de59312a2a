"""Queue management (QLM): RWT estimator, request groups, queue-ordering MILP, baselines.

Public entry: ``solve(problem, method, options) -> Result`` (`planner.queueing.pipeline.solve`, the family's
`planner.core.contract.FamilyHarness.run`): ``method`` is ``milp`` or a baseline of
`planner.queueing.heuristics.HEURISTICS`; ``options`` a `planner.core.contract.RunOptions`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from planner.core.contract import RunOptions
    from planner.core.result import Result


def solve(problem: Any, method: str, options: RunOptions | None = None) -> Result:
    """The family's public entry: ``method`` is ``milp`` or a baseline
    (`planner.queueing.pipeline.solve`; imported on first use, so that importing the package stays light)."""
    from planner.core.contract import RunOptions
    from planner.queueing.pipeline import solve as run

    return run(problem, method, options if options is not None else RunOptions())
