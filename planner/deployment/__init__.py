"""Deployment on heterogeneous clusters (docs/formulations.md §5, arXiv 2504.15303v1).

* `memory`: Eq. 1–2 (KV bytes per instance, candidate TP degrees).
* `throughput`: Alg. 1 static-batching estimate from the p1..p8 model, and a continuous-batching
  SLO-aware estimate from the Aladdin cost models.
* `enumeration`: TP choices across a cluster, ranked, with the best configuration.
* `cost_formulation` / `cost_solve`: cost-minimal (GPU type, TP) mix under an inventory (MILP),
  and the maximum servable load.
* `classes` / `classes_instance` / `classes_validator`: mixed fleet for request classes (size buckets or
  SLO classes; Mélange's model with continuous routing), one or several models sharing a GPU inventory.
* `routing` / `routing_formulation` / `routing_solve`: Alg. 2 mapper, RR/WRR/SI/MB, and the exact
  makespan MILP (R||Cmax with KV limits).
* `validator`: independent checks of cost plans and routings (no code shared with the MILPs).
* `runner`: the one runner of every heuristic and router (an invalid plan is an error, the plan kept).

Public entries (the families' `planner.core.contract.FamilyHarness.run`):

* ``solve(problem, method, options) -> Result``: a cost plan (`problem.CostPlanProblem`) or a mixed
  fleet for request classes (`classes.ClassPlanProblem`); ``method`` is ``milp`` or a heuristic of
  `cost_solve.HEURISTICS` (the same names for request classes); ``options`` a
  `planner.core.contract.RunOptions`.
* ``route(problem, method, options) -> Result``: a routing of a request batch (`problem.RoutingProblem`);
  ``method`` is ``milp`` or a router of `routing.ROUTERS`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from planner.core.contract import RunOptions
    from planner.core.result import Result

__all__ = ["route", "solve"]


def solve(problem: Any, method: str, options: RunOptions | None = None) -> Result:
    """A cost plan or a mixed fleet for request classes (`planner.deployment.harness.HARNESS`'s ``run``;
    imported on first use, so that importing the package stays light)."""
    from planner.core.contract import RunOptions
    from planner.deployment.harness import HARNESS

    return HARNESS.run(problem, method, options if options is not None else RunOptions())


def route(problem: Any, method: str, options: RunOptions | None = None) -> Result:
    """A routing of one request batch (`planner.deployment.routing_harness.HARNESS`'s ``run``)."""
    from planner.core.contract import RunOptions
    from planner.deployment.routing_harness import HARNESS

    return HARNESS.run(problem, method, options if options is not None else RunOptions())
