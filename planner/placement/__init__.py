"""Request placement (Aladdin, docs/formulations.md §1): the fewest workers for one heartbeat under
TTFT/ATGT/KV limits — heuristics, the placement MIP, the lower bound, the independent validator.

Public entry: ``solve(problem, method, options) -> Result`` (`planner.placement.pipeline.solve`, the
family's `planner.core.contract.FamilyHarness.run`): ``method`` is ``mip`` or a heuristic name of
`planner.placement.heuristics.HEURISTICS`; ``options`` a `planner.core.contract.RunOptions`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from planner.core.contract import RunOptions
    from planner.core.result import Result


def solve(problem: Any, method: str, options: RunOptions | None = None) -> Result:
    """The family's public entry: ``method`` is ``mip`` or a heuristic
    (`planner.placement.pipeline.solve`; imported on first use, so that importing the package stays light)."""
    from planner.core.contract import RunOptions
    from planner.placement.pipeline import solve as run

    return run(problem, method, options if options is not None else RunOptions())
