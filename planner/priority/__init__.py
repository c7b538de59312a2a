"""SLO-aware priority scheduling (Huang et al., SC'25; docs/formulations.md §2): G objective, SA, exhaustive search, exact optimum.

Public entry: `planner.priority.solve.solve` ``(problem, method, options) -> Result`` (the family's
`planner.core.contract.FamilyHarness.run`).
"""
