"""TP degrees of a cluster (the heterogeneous-cluster paper's configuration search, docs/formulations.md §5.3)
in the family harness: family ``deployment-tp``.

Problem: a `ClusterProblem` (a ``family: deployment-tp`` file: one model, machine groups).  Plan: one TP
degree per machine group (`TPPlan`, plan kind ``tp_degrees``; the enumeration's ranked table, ``tp_ranked``,
is read as its best row).  Objective: the cluster's tokens/s under the instance's estimator, to maximise
— ``Σ_groups count · tokens/s of one machine at the group's degree``, recomputed by the independent
validator `planner.deployment.validator.validate_tp_plan`.

Methods:

* ``enumeration`` (exact): every combination of feasible per-group degrees
  (`planner.deployment.enumeration`); its best row is optimal under the estimator, so it is its own
  bound.
* ``uniform-t1``, ``uniform-t2``, ``uniform-t4``, ``uniform-t8`` (the paper's baselines): every machine
  group at the same degree t, a group whose degree the file fixes keeping its own.  Where t does not
  divide a machine's GPUs or the model does not fit at t, the baseline has no plan (``no_solution``,
  the validator's reason in the message).
"""

from __future__ import annotations

import time
from pathlib import Path

from planner.core.contract import FamilyHarness, RunOptions
from planner.core.result import Result
from planner.core.status import SolveStatus
from planner.deployment.harness import plan_from_dict, validate
from planner.deployment.problem import ClusterProblem
from planner.errors import InputError, PlannerError

#: The uniform baselines: every group at one degree.
UNIFORM_DEGREES = (1, 2, 4, 8)
HEURISTICS = tuple(f"uniform-t{t}" for t in UNIFORM_DEGREES)


def load_cluster(path: Path) -> ClusterProblem:
    """A TP-enumeration cluster file; a cost plan or request classes is one line naming the family to use."""
    from planner.deployment.instance import load_deployment_instance

    problem = load_deployment_instance(path)
    if not isinstance(problem, ClusterProblem):
        raise InputError(path, "machines", "not a TP-enumeration cluster (needs machines); a cost plan or request "
                                           "classes is family deployment")
    return problem


def uniform_degrees(problem: ClusterProblem, degree: int) -> tuple[int, ...]:
    """Every machine group at ``degree``, except a group whose file fixes its degree."""
    return tuple(g.tensor_parallel if g.tensor_parallel is not None else degree for g in problem.machines)


def run_uniform(problem: ClusterProblem, degree: int) -> Result:
    """The ``uniform-t<degree>`` baseline, scored by the independent validator."""
    from planner.deployment.solution import TPPlan

    start = time.perf_counter()
    method = f"uniform-t{degree}"
    plan = TPPlan(tuple(g.name for g in problem.machines), uniform_degrees(problem, degree), method)
    report = validate(problem, plan)
    seconds = time.perf_counter() - start
    if not report.feasible:
        return Result(family="deployment-tp", method=method, solver="heuristic", status=SolveStatus.NO_SOLUTION,
                      objective=None, bound=None, solution=None, solve_seconds=seconds,
                      message=f"no plan at TP {degree} on every group without a fixed degree: {report.summary()}")
    return Result(family="deployment-tp", method=method, solver="heuristic", status=SolveStatus.FEASIBLE,
                  objective=report.objective, bound=None, solve_seconds=seconds, solution=plan, validation=report)


def solve(problem: ClusterProblem, method: str = "enumeration", options: RunOptions | None = None) -> Result:
    """Run ``method`` (the module docstring) on ``problem``.  ``options`` is accepted for the common contract;
    enumeration and the baselines use no solver, time limit or seed."""
    if not isinstance(problem, ClusterProblem):
        raise PlannerError(f"deployment-tp solves a TP-enumeration cluster, not a {type(problem).__name__}")
    if method == "enumeration":
        from planner.deployment.enumeration import enumeration_result

        return enumeration_result(problem)
    if method in HEURISTICS:
        return run_uniform(problem, int(method.removeprefix("uniform-t")))
    raise PlannerError(f"unknown deployment-tp method {method!r} (use enumeration or {', '.join(HEURISTICS)})")


HARNESS = FamilyHarness(
    name="deployment-tp",
    description="TP degree per machine group maximising a cluster's tokens/s for one model (heterogeneous-cluster paper)",
    sense="max",
    objective_name="tokens/s",
    load=load_cluster,
    heuristics=HEURISTICS,
    exact_method="enumeration",
    run=solve,
    plan_from_dict=plan_from_dict,
    validate=validate,
)
