"""Queue management (QLM): RWT estimator, request groups, queue-ordering MILP, baselines.

Public entry: `planner.queueing.solve.solve` ``(problem, method, options) -> Result`` (the family's
`planner.core.contract.FamilyHarness.run`): ``method`` is ``milp`` or a baseline of
`planner.queueing.heuristics.HEURISTICS`; ``options`` a `planner.core.contract.RunOptions`.
"""
