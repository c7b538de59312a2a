"""Pipelines returning `Result`: heuristics, SA, exhaustive search, the exact optimum, Alg. 2.

Every plan is wrapped into a `PrioritySchedule` and checked by the independent validator; the
reported objective is the validator's recomputed G (req/s).  Tests assert it equals the
evaluator's G.
"""

from __future__ import annotations

import time

from planner.core.result import Result
from planner.errors import PlannerError
from planner.priority.exact import ExactOutcome, solve_exact
from planner.priority.exhaustive import exhaustive_search
from planner.priority.heuristics import HEURISTICS, Plan, local_search
from planner.priority.milp import solve_milp
from planner.priority.multi import assign_instances, sub_problem
from planner.priority.problem import InstancePlan, PriorityProblem, PrioritySchedule
from planner.priority.sequence_dp import dp_applies, solve_sequence_dp
from planner.priority.validator import validate_schedule
from planner.solver import SolveStatus

FAMILY = "priority"
METHODS = ("exact", "sa", "exhaustive", "fcfs", "spf", "edf")


def to_schedule(problem: PriorityProblem, plans: list[tuple[list[int], Plan]]) -> PrioritySchedule:
    """Map per-instance plans (job indices local to each instance) to one schedule of global indices."""
    return PrioritySchedule(
        plans=tuple(InstancePlan(order=tuple(jobs[i] for i in plan.order), batch_sizes=plan.sizes) for jobs, plan in plans),
        job_names=tuple(j.name for j in problem.jobs),
        met=sum(plan.met for _, plan in plans),
        total_latency_ms=sum(plan.total_ms for _, plan in plans),
    )


def _result(problem: PriorityProblem, method: str, plan: Plan, seconds: float, *, status: SolveStatus = SolveStatus.FEASIBLE,
            bound: float | None = None, bound_source: str = "", message: str = "", stats: dict | None = None,
            solver: str = "") -> Result:
    schedule = to_schedule(problem, [(list(range(problem.size)), plan)])
    report = validate_schedule(problem, schedule)
    return Result(family=FAMILY, method=method, solver=solver or method, status=status, objective=report.objective,
                  bound=bound, solve_seconds=seconds, solution=schedule, message=message, validation=report,
                  bound_source=bound_source, stats=stats or {})


def run_heuristic(problem: PriorityProblem, method: str, seed: int = 0) -> Result:
    if method not in HEURISTICS:
        raise PlannerError(f"unknown priority method {method!r} (known: {', '.join(METHODS)})")
    started = time.perf_counter()
    plan = HEURISTICS[method](problem, seed)
    return _result(problem, method, plan, time.perf_counter() - started)


def run_exhaustive(problem: PriorityProblem, time_limit: float | None = None) -> Result:
    started = time.perf_counter()
    plan, finished, evaluated = exhaustive_search(problem, time_limit)
    seconds = time.perf_counter() - started
    if finished:
        return _result(problem, "exhaustive", plan, seconds, status=SolveStatus.OPTIMAL, bound=plan.g,
                       bound_source="complete enumeration", stats={"plans_evaluated": evaluated})
    return _result(problem, "exhaustive", plan, seconds, message=f"time limit hit after {evaluated} plans",
                   stats={"plans_evaluated": evaluated})


WARM_START = ("spf", "edf", "fcfs")
EXACT_METHODS = ("auto", "bnb", "milp", "hybrid")


def best_heuristic_plan(problem: PriorityProblem, seed: int = 0, deadline: float | None = None) -> Plan:
    """The exact search's incumbent.  For the subset DP (b_max = 1, small N) the best baseline
    (~0.1 ms): Dinkelbach's first DP round replaces any weaker incumbent at once, so polishing
    was measured not to pay.  For the branch-and-bound the best baseline polished by local search
    (adding SA's plan was measured to give the same incumbent on the benchmark instances)."""
    plans = [HEURISTICS[name](problem, seed) for name in WARM_START]
    best = max(plans, key=lambda p: (p.g, -plans.index(p)))
    if dp_applies(problem):
        return best
    return local_search(problem, best, deadline=deadline)


WARM_SHARE = 0.3
"""Share of the time limit the exact search's incumbent (baselines + local search) may take."""

BNB_SHARE = 0.25
"""Share of the time limit the branch-and-bound runs first in the hybrid (it improves the incumbent)."""


def branch_and_bound_name(outcome: ExactOutcome) -> str:
    if outcome.lagrangian is None:
        return "branch-and-bound"
    return "branch-and-bound + Lagrangian bound" + (" + count split" if outcome.count_split else "")


def prove_with_milp(problem: PriorityProblem, incumbent: Plan, time_limit: float) -> tuple[ExactOutcome, str]:
    """The branch-and-bound for BNB_SHARE of the time (incumbent and a first bound), then the
    Dinkelbach MILP from its plan; the reported bound is the smaller of the two (both are valid).
    Returns the outcome and the name of what ran."""
    started = time.perf_counter()
    first = solve_exact(problem, incumbent, time_limit=BNB_SHARE * time_limit)
    if first.proven:
        return first, branch_and_bound_name(first)
    second = solve_milp(problem, first.plan, time_limit=max(time_limit - (time.perf_counter() - started), 0.0))
    plan = second.plan if second.plan.g > first.plan.g else first.plan
    bound = min(first.bound_g, second.bound_g)
    proven = second.proven or bound <= plan.g * (1 + 1e-12)
    outcome = ExactOutcome(plan, proven, plan.g if proven else bound, first.nodes + second.nodes,
                           time.perf_counter() - started,
                           f"branch-and-bound: {first.message or 'stopped'}; MILP: {second.message}")
    return outcome, f"{branch_and_bound_name(first)} + Dinkelbach MILP (HiGHS)"


def prove_optimum(problem: PriorityProblem, incumbent: Plan, time_limit: float | None = None,
                  node_limit: int | None = None, method: str = "auto") -> tuple[ExactOutcome, str]:
    """(outcome, method name): the subset DP where it applies (b_max = 1, N ≤ MAX_DP_JOBS, no node
    limit), otherwise the branch-and-bound (at b_max ≥ 2 with the Lagrangian bound of
    `planner.priority.lagrangian`).  ``method`` = "bnb", "milp" or "hybrid" (branch-and-bound, then
    the Dinkelbach MILP; needs a time limit) forces one of those.  Until the Lagrangian bound, auto ran
    the hybrid at N ≥ 25, b_max ≥ 2; with it the branch-and-bound alone ends with smaller gaps there
    (benchmarks/priority_scaling.py, "Exact optimum at N = 30")."""
    if method not in EXACT_METHODS:
        raise PlannerError(f"unknown exact method {method!r} (known: {', '.join(EXACT_METHODS)})")
    if method == "milp":
        return solve_milp(problem, incumbent, time_limit=time_limit), "Dinkelbach MILP (HiGHS)"
    if method == "hybrid":
        if time_limit is None:
            raise PlannerError("the hybrid exact method needs a time limit (--time-limit)")
        return prove_with_milp(problem, incumbent, time_limit)
    if method == "auto" and node_limit is None and dp_applies(problem):
        try:
            return solve_sequence_dp(problem, incumbent, time_limit=time_limit), "subset DP (Dinkelbach)"
        except ImportError:  # numba missing: the branch-and-bound below is exact as well
            pass
    outcome = solve_exact(problem, incumbent, time_limit=time_limit, node_limit=node_limit)
    return outcome, branch_and_bound_name(outcome)


def run_exact(problem: PriorityProblem, time_limit: float | None = None, seed: int = 0,
              node_limit: int | None = None, exact_method: str = "auto") -> Result:
    started = time.perf_counter()
    # the polish may take up to WARM_SHARE of the time limit (a local-search pass at N = 100 takes seconds)
    incumbent = best_heuristic_plan(problem, seed, None if time_limit is None else started + WARM_SHARE * time_limit)
    warm = time.perf_counter() - started
    remaining = None if time_limit is None else max(time_limit - warm, 0.0)
    outcome, solver = prove_optimum(problem, incumbent, time_limit=remaining, node_limit=node_limit, method=exact_method)
    seconds = time.perf_counter() - started
    stats = {"nodes": outcome.nodes, "incumbent_g": incumbent.g, "incumbent_seconds": warm}
    if outcome.proven:
        return _result(problem, "exact", outcome.plan, seconds, status=SolveStatus.OPTIMAL, bound=outcome.plan.g,
                       bound_source=f"{solver} (proven)", stats=stats, solver=solver)
    return _result(problem, "exact", outcome.plan, seconds, bound=outcome.bound_g,
                   bound_source=f"{solver} (open)", message=outcome.message, stats=stats, solver=solver)


def run_method(problem: PriorityProblem, method: str, *, time_limit: float | None = None, seed: int = 0,
               exact_method: str = "auto") -> Result:
    if method == "exact":
        return run_exact(problem, time_limit=time_limit, seed=seed, exact_method=exact_method)
    if method == "exhaustive":
        return run_exhaustive(problem, time_limit=time_limit)
    return run_heuristic(problem, method, seed=seed)


def run_multi_instance(problem: PriorityProblem, instances: int, method: str = "sa", *, seed: int = 0,
                       time_limit: float | None = None) -> Result:
    """Alg. 2: memory-based assignment (Eq. 20) then per-instance priority mapping with ``method``."""
    if method not in ("sa", "exact", "fcfs", "spf", "edf"):
        raise PlannerError(f"--instances works with sa, exact, fcfs, spf or edf, not {method!r}")
    started = time.perf_counter()
    groups = assign_instances(problem, instances)
    per_instance: list[tuple[list[int], Plan]] = []
    for jobs in groups:
        if not jobs:
            continue
        sub = sub_problem(problem, jobs)
        if method == "exact":
            plan = prove_optimum(sub, best_heuristic_plan(sub, seed), time_limit=time_limit)[0].plan
        else:
            plan = HEURISTICS[method](sub, seed)
        per_instance.append((jobs, plan))
    seconds = time.perf_counter() - started
    schedule = to_schedule(problem, per_instance)
    report = validate_schedule(problem, schedule)
    note = (f"{instances} instances, memory-based assignment (Eq. 20), {method} per instance; "
            "exact is per instance given the assignment, not jointly optimal")
    return Result(family=FAMILY, method=f"multi-{method}", solver=method,
                  status=SolveStatus.FEASIBLE,
                  objective=report.objective, bound=None, solve_seconds=seconds, solution=schedule, message=note,
                  validation=report, stats={"jobs_per_instance": [len(g) for g in groups]})
