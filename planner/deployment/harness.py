"""The cost plan (min $/h under an inventory) in the family-independent compare harness (`planner.harness`).

A mixed fleet for request classes (`planner.deployment.classes`) runs under the same method names:
``greedy`` (each class on its cheapest configuration), ``single-type`` (one configuration per model)
and ``milp``.

TP-enumeration clusters (``family: deployment-tp``, maximum tokens/s) are their own family
(`planner.deployment.tp_harness`); ``load`` here refuses them naming it.  Their plans (``tp_degrees``)
are read and validated by `plan_from_dict` and `validate` below, which both harnesses use, so a plan of
one problem kind given for another is one line naming both.

Plans: each problem kind has its plan kind, told apart by the mapping's ``kind`` key (absent: the
problem's): a cost plan (`CostPlanSolution`, ``cost_plan``), a mixed fleet for request classes
(`ClassPlanSolution`, ``class_plan``), a cluster's TP degrees (`TPPlan`, ``tp_degrees``, or the
enumeration's ranked table ``tp_ranked``, read as its best row).
"""

from __future__ import annotations

from pathlib import Path

from planner.core import plan_fields as pf
from planner.core.io import shown
from planner.core.result import Result, ValidationReport
from planner.deployment.cost_solve import HEURISTICS, run_cost_heuristic, solve_cost_plan
from planner.deployment.problem import ClusterProblem, CostPlanProblem
from planner.deployment.solution import CostPlanSolution, TPPlan
from planner.deployment.validator import validate_cost_plan, validate_tp_plan
from planner.errors import InputError, PlannerError
from planner.core.contract import FamilyHarness, RunOptions


def _run(problem, method: str, options: RunOptions) -> Result:
    from planner.deployment.classes import ClassPlanProblem, run_class_heuristic, solve_class_plan

    if isinstance(problem, ClassPlanProblem):  # request classes: the same method names
        if method == "milp":
            return solve_class_plan(problem, solver=options.solver, time_limit=options.time_limit,
                                    threads=options.threads, seed=options.seed)
        return run_class_heuristic(problem, method)
    if method == "milp":
        return solve_cost_plan(problem, solver=options.solver, time_limit=options.time_limit,
                               threads=options.threads, seed=options.seed)
    return run_cost_heuristic(problem, method)


#: The plan kinds each problem kind takes (``kind`` of the plan's mapping; the first is the default).
PLAN_KINDS = {"CostPlanProblem": ("cost_plan",), "ClassPlanProblem": ("class_plan",),
              "ClusterProblem": ("tp_degrees", "tp_ranked")}
_PROBLEM_WORDS = {"CostPlanProblem": "a cost-plan instance (inventory, demands)",
                  "ClassPlanProblem": "a request-class instance (gpus, models)",
                  "ClusterProblem": "a TP-enumeration cluster (machines)"}


def plan_from_dict(problem, data):
    """The plan in ``data`` for ``problem``, of the kind its ``kind`` key names (`PLAN_KINDS`); a kind
    another problem kind takes is one `InputError` line naming both."""
    from planner.deployment.classes import ClassPlanProblem, ClassPlanSolution

    kind_of = type(problem).__name__
    if kind_of not in PLAN_KINDS:
        raise PlannerError(f"no deployment plans for a {kind_of}")
    data = pf.mapping(data, "")
    kind = data.get("kind", PLAN_KINDS[kind_of][0])
    if kind not in PLAN_KINDS[kind_of]:
        owner = next((name for name, kinds in PLAN_KINDS.items() if kind in kinds), None)
        if owner is None:
            every = [k for kinds in PLAN_KINDS.values() for k in kinds]
            pf.refuse("kind", f"expected one of: {', '.join(every)}, got {shown(kind)}")
        pf.refuse("kind", f"a {kind} plan is for {_PROBLEM_WORDS[owner]}; the instance is "
                          f"{_PROBLEM_WORDS[kind_of]} (its plans: {', '.join(PLAN_KINDS[kind_of])})")
    if isinstance(problem, ClassPlanProblem):
        return ClassPlanSolution.from_dict(problem, data)
    if isinstance(problem, ClusterProblem):
        return TPPlan.from_dict(problem, data)
    return CostPlanSolution.from_dict(problem, data)


def validate(problem, plan) -> ValidationReport:
    """The independent validator of the plan's kind: `validate_cost_plan`, `validate_class_plan` or
    `validate_tp_plan` (an `EnumerationSolution` is validated on its best row)."""
    from planner.deployment.classes import ClassPlanProblem, ClassPlanSolution
    from planner.deployment.classes_validator import validate_class_plan
    from planner.deployment.enumeration import EnumerationSolution

    if isinstance(problem, CostPlanProblem) and isinstance(plan, CostPlanSolution):
        return validate_cost_plan(problem, plan)
    if isinstance(problem, ClassPlanProblem) and isinstance(plan, ClassPlanSolution):
        return validate_class_plan(problem, plan)
    if isinstance(problem, ClusterProblem) and isinstance(plan, TPPlan):
        return validate_tp_plan(problem, plan.degrees)
    if isinstance(problem, ClusterProblem) and isinstance(plan, EnumerationSolution):
        return validate_tp_plan(problem, plan.best[0])
    what = _PROBLEM_WORDS.get(type(problem).__name__, type(problem).__name__)
    raise PlannerError(f"a {type(plan).__name__} is not a plan of {what}")


def _load(path: Path):
    """A cost plan, or a mixed fleet for request classes (keys ``gpus``, ``models``)."""
    from planner.deployment.classes import ClassPlanProblem
    from planner.deployment.instance import load_deployment_instance

    problem = load_deployment_instance(path)
    if isinstance(problem, (ClassPlanProblem, CostPlanProblem)):
        return problem
    raise InputError(path, "machines", "a TP-enumeration cluster (machines) is family deployment-tp, not deployment")


HARNESS = FamilyHarness(
    name="deployment",
    description="Heterogeneous-cluster deployment: cost-minimal (GPU type, TP degree) mix serving each model's load within SLO",
    sense="min",
    objective_name="$/h",
    load=_load,
    heuristics=tuple(HEURISTICS),
    exact_method="milp",
    run=_run,
    plan_from_dict=plan_from_dict,
    validate=validate,
)
