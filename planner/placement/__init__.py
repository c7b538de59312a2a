"""Request placement (Aladdin, docs/formulations.md §1): the fewest workers for one heartbeat under
TTFT/ATGT/KV limits — heuristics, the placement MIP, the lower bound, the independent validator.

Public entry: `planner.placement.solve.solve` ``(problem, method, options) -> Result`` (the
family's `planner.core.contract.FamilyHarness.run`): ``method`` is ``mip`` or a heuristic name of
`planner.placement.heuristics.HEURISTICS`; ``options`` a `planner.core.contract.RunOptions`.
"""
