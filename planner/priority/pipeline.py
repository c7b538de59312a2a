"""Pipelines returning `Result`: heuristics, SA, exhaustive search, the exact optimum, Alg. 2.

Every plan is wrapped into a `PrioritySchedule` and checked by the independent validator; the
reported objective is the validator's recomputed G (req/s).  Tests assert it equals the
evaluator's G.
"""

from __future__ import annotations

import time
from dataclasses import replace

from planner.core.contract import RunOptions
from planner.core.result import Result
from planner.core.work import WorkClock
from planner.errors import PlannerError
from planner.priority import effort
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


def _wall_note(stats: dict, message: str) -> str:
    """The note a result carries when the wall clock, not the nominal budget, stopped a phase."""
    if not stats.get("wall_cut"):
        return message
    note = ("the wall clock stopped a phase before its nominal budget (a slower or busier machine than the "
            "calibration of planner.priority.effort, or a HiGHS MILP on its time limit): this run may not repeat exactly")
    return f"{message}; {note}" if message else note


def _clock(time_limit: float | None, started: float | None, jobs: int) -> WorkClock:
    """The call's `WorkClock`; the reading of the instance is charged when the call began before it."""
    clock = WorkClock(time_limit, started if started is not None else time.perf_counter())
    if started is not None:
        clock.charge(effort.load_seconds(jobs))
    return clock


def run_exhaustive(problem: PriorityProblem, time_limit: float | None = None, started: float | None = None) -> Result:
    """Every plan (small N); under ``time_limit`` a nominal budget of plans (`effort.exhaustive_seconds`)."""
    t0 = time.perf_counter()
    clock = _clock(time_limit, started, problem.size)
    plan, finished, evaluated = exhaustive_search(problem, clock=clock)
    seconds = time.perf_counter() - t0
    stats = {"plans_evaluated": evaluated, "nominal_seconds": round(clock.spent, 6), "wall_cut": clock.wall_cut}
    if finished:
        return _result(problem, "exhaustive", plan, seconds, status=SolveStatus.OPTIMAL, bound=plan.g,
                       bound_source="complete enumeration", stats=stats)
    return _result(problem, "exhaustive", plan, seconds, message=_wall_note(stats, f"time limit hit after {evaluated} plans"),
                   stats=stats)


WARM_START = ("spf", "edf", "fcfs")
EXACT_METHODS = ("auto", "bnb", "milp", "hybrid")


def best_heuristic_plan(problem: PriorityProblem, seed: int = 0, deadline: float | None = None,
                        clock: WorkClock | None = None) -> Plan:
    """The exact search's incumbent.  For the subset DP (b_max = 1, small N) the best baseline
    (~0.1 ms): Dinkelbach's first DP round replaces any weaker incumbent at once, so polishing
    was measured not to pay.  For the branch-and-bound the best baseline polished by local search
    (adding SA's plan was measured to give the same incumbent on the benchmark instances), within
    `WARM_SHARE` of ``clock``'s limit in nominal seconds when given."""
    plans = [HEURISTICS[name](problem, seed) for name in WARM_START]
    if clock is not None:
        clock.charge(effort.baselines_seconds(problem.size))
    best = max(plans, key=lambda p: (p.g, -plans.index(p)))
    if dp_applies(problem):
        return best
    return local_search(problem, best, deadline=deadline, clock=clock, share=WARM_SHARE)


WARM_SHARE = 0.3
"""Share of the time limit the exact search's incumbent (baselines + local search) may take."""

BNB_SHARE = 0.25
"""Share of the time limit the branch-and-bound runs first in the hybrid (it improves the incumbent)."""


def branch_and_bound_name(outcome: ExactOutcome) -> str:
    if outcome.lagrangian is None:
        return "branch-and-bound"
    return "branch-and-bound + Lagrangian bound" + (" + count split" if outcome.count_split else "")


def _sub_clock(clock: WorkClock, share: float) -> WorkClock:
    """A `WorkClock` for ``share`` of the nominal time left on ``clock``, starting now (charge its
    ``spent`` back to ``clock`` afterwards)."""
    return WorkClock(None if clock.time_limit is None else share * max(clock.left() or 0.0, 0.0))


#: How the method names of the Dinkelbach MILP call each solver of `planner.solver`.
SOLVER_NAMES = {"highs": "HiGHS", "gurobi": "Gurobi", "cbc": "CBC"}


def prove_with_milp(problem: PriorityProblem, incumbent: Plan, time_limit: float | None = None,
                    clock: WorkClock | None = None, solver: str = "highs", threads: int = 1) -> tuple[ExactOutcome, str]:
    """The branch-and-bound for BNB_SHARE of the time (incumbent and a first bound), then the
    Dinkelbach MILP from its plan; the reported bound is the smaller of the two (both are valid).
    Returns the outcome and the name of what ran.  With ``clock`` the branch-and-bound's share is
    nominal; the MILP stops on the wall clock (HiGHS), so an unproven result may not repeat."""
    started = time.perf_counter()
    if clock is not None:
        sub = _sub_clock(clock, BNB_SHARE)
        first = solve_exact(problem, incumbent, clock=sub)
        clock.charge(sub.spent)
        milp_limit = clock.wall_left()
    else:
        first = solve_exact(problem, incumbent, time_limit=BNB_SHARE * time_limit)
        milp_limit = max(time_limit - (time.perf_counter() - started), 0.0)
    if first.proven:
        return first, branch_and_bound_name(first)
    second = solve_milp(problem, first.plan, time_limit=milp_limit, solver=solver, threads=threads)
    plan = second.plan if second.plan.g > first.plan.g else first.plan
    bound = min(first.bound_g, second.bound_g)
    proven = second.proven or bound <= plan.g * (1 + 1e-12)
    outcome = ExactOutcome(plan, proven, plan.g if proven else bound, first.nodes + second.nodes,
                           time.perf_counter() - started,
                           f"branch-and-bound: {first.message or 'stopped'}; MILP: {second.message}",
                           wall_cut=first.wall_cut or (not second.proven and milp_limit is not None))
    return outcome, f"{branch_and_bound_name(first)} + Dinkelbach MILP ({SOLVER_NAMES.get(solver, solver)})"


def prove_optimum(problem: PriorityProblem, incumbent: Plan, time_limit: float | None = None,
                  node_limit: int | None = None, method: str = "auto",
                  clock: WorkClock | None = None, solver: str = "highs", threads: int = 1) -> tuple[ExactOutcome, str]:
    """(outcome, method name): the subset DP where it applies (b_max = 1, N ≤ MAX_DP_JOBS, no node
    limit), otherwise the branch-and-bound (at b_max ≥ 2 with the Lagrangian bound of
    `planner.priority.lagrangian`).  ``method`` = "bnb", "milp" or "hybrid" (branch-and-bound, then
    the Dinkelbach MILP; needs a time limit) forces one of those; auto never runs the MILP, because at
    N = 30, b_max ≥ 2 the branch-and-bound with the Lagrangian bound ends with smaller gaps than the hybrid
    (benchmarks/priority_scaling.py, "Exact optimum at N = 30").  ``solver`` and ``threads`` solve the MILPs.  ``clock``: the call's `WorkClock`
    (its limit replaces ``time_limit``; the DP and the branch-and-bound spend it in nominal seconds)."""
    if method not in EXACT_METHODS:
        raise PlannerError(f"unknown exact method {method!r} (known: {', '.join(EXACT_METHODS)})")
    if clock is not None:
        time_limit = clock.time_limit
    if method == "milp":
        limit = clock.wall_left() if clock is not None else time_limit
        outcome = solve_milp(problem, incumbent, time_limit=limit, solver=solver, threads=threads)
        return replace(outcome, wall_cut=not outcome.proven and limit is not None), \
            f"Dinkelbach MILP ({SOLVER_NAMES.get(solver, solver)})"
    if method == "hybrid":
        if time_limit is None:
            raise PlannerError("the hybrid exact method needs a time limit (--time-limit)")
        return prove_with_milp(problem, incumbent, time_limit, clock=clock, solver=solver, threads=threads)
    if method == "auto" and node_limit is None and dp_applies(problem):
        try:
            return solve_sequence_dp(problem, incumbent, time_limit=time_limit, clock=clock), "subset DP (Dinkelbach)"
        except ImportError:  # numba missing: the branch-and-bound below is exact as well
            pass
    if clock is not None:
        outcome = solve_exact(problem, incumbent, node_limit=node_limit, clock=clock)
    else:
        outcome = solve_exact(problem, incumbent, time_limit=time_limit, node_limit=node_limit)
    return outcome, branch_and_bound_name(outcome)


def run_exact(problem: PriorityProblem, time_limit: float | None = None, seed: int = 0,
              node_limit: int | None = None, exact_method: str = "auto", started: float | None = None,
              clock: WorkClock | None = None, solver: str = "highs", threads: int = 1) -> Result:
    """The warm start, then `prove_optimum` (``solver`` with ``threads`` solves its MILPs, when it runs any).
    ``time_limit`` covers the whole call and is spent in nominal seconds (`planner.priority.effort`, a
    `WorkClock`): the compiled kernels' load, the baselines and the local search (up to `WARM_SHARE`),
    the search and its final bounds — so the same instance, seed and limit give the same plan and bound.
    The wall clock only guards; when it decides, ``stats.wall_cut`` is true and the message says the run
    may not repeat.  ``started``: when the caller's call began, if it read the instance first (the CLI);
    ``clock``: a caller's clock."""
    t0 = time.perf_counter()
    if clock is None:
        clock = _clock(time_limit, started, problem.size)
    incumbent = best_heuristic_plan(problem, seed, clock=clock)
    warm = time.perf_counter() - t0
    clock.charge(effort.KERNEL_LOAD)  # the search's compiled kernels, loaded after the warm start
    outcome, solver = prove_optimum(problem, incumbent, node_limit=node_limit, method=exact_method, clock=clock,
                                    solver=solver, threads=threads)
    seconds = time.perf_counter() - t0
    stats = {"nodes": outcome.nodes, "incumbent_g": incumbent.g, "incumbent_seconds": warm,
             "nominal_seconds": round(clock.spent, 6), "wall_cut": bool(outcome.wall_cut or clock.wall_cut)}
    if outcome.proven:
        return _result(problem, "exact", outcome.plan, seconds, status=SolveStatus.OPTIMAL, bound=outcome.plan.g,
                       bound_source=f"{solver} (proven)", stats=stats, solver=solver,
                       message=_wall_note(stats, ""))
    return _result(problem, "exact", outcome.plan, seconds, bound=outcome.bound_g,
                   bound_source=f"{solver} (open)", message=_wall_note(stats, outcome.message), stats=stats,
                   solver=solver)


def run_method(problem: PriorityProblem, method: str, *, time_limit: float | None = None, seed: int = 0,
               exact_method: str = "auto", started: float | None = None, solver: str = "highs",
               threads: int | None = None) -> Result:
    """``method`` on ``problem``: ``exact`` (`run_exact`; ``solver``/``threads`` for its MILPs, one thread by
    default), ``exhaustive``, or a heuristic of `HEURISTICS`."""
    if method == "exact":
        return run_exact(problem, time_limit=time_limit, seed=seed, exact_method=exact_method, started=started,
                         solver=solver, threads=threads or 1)
    if method == "exhaustive":
        return run_exhaustive(problem, time_limit=time_limit, started=started)
    return run_heuristic(problem, method, seed=seed)


def solve(problem: PriorityProblem, method: str, options: RunOptions = RunOptions()) -> Result:
    """The family's public entry (`planner.core.contract.FamilyHarness.run`): ``method`` is ``exact``,
    ``exhaustive`` or a heuristic of `HEURISTICS`; ``options`` gives the solver and threads of the exact
    search's MILPs, the time limit (nominal seconds, `run_exact`) and the seed."""
    return run_method(problem, method, time_limit=options.time_limit, seed=options.seed, solver=options.solver,
                      threads=options.threads)


def run_multi_instance(problem: PriorityProblem, instances: int, method: str = "sa", *, seed: int = 0,
                       time_limit: float | None = None, started: float | None = None) -> Result:
    """Alg. 2: memory-based assignment (Eq. 20) then per-instance priority mapping with ``method``.
    ``time_limit`` covers the whole call: with ``exact``, each instance's search gets an equal share
    of the nominal time left (`run_exact`)."""
    if method not in ("sa", "exact", "fcfs", "spf", "edf"):
        raise PlannerError(f"--instances works with sa, exact, fcfs, spf or edf, not {method!r}")
    t0 = time.perf_counter()
    clock = _clock(time_limit, started, problem.size)
    groups = assign_instances(problem, instances)
    per_instance: list[tuple[list[int], Plan]] = []
    wall_cut = False
    busy = [jobs for jobs in groups if jobs]
    for k, jobs in enumerate(busy):
        sub = sub_problem(problem, jobs)
        if method == "exact":  # each instance gets an equal share of the nominal time left
            own = _sub_clock(clock, 1.0 / (len(busy) - k))
            own.charge(effort.KERNEL_LOAD if k == 0 else 0.0)
            outcome = prove_optimum(sub, best_heuristic_plan(sub, seed, clock=own), clock=own)[0]
            clock.charge(own.spent)
            wall_cut = wall_cut or outcome.wall_cut or own.wall_cut
            plan = outcome.plan
        else:
            plan = HEURISTICS[method](sub, seed)
        per_instance.append((jobs, plan))
    seconds = time.perf_counter() - t0
    schedule = to_schedule(problem, per_instance)
    report = validate_schedule(problem, schedule)
    note = (f"{instances} instances, memory-based assignment (Eq. 20), {method} per instance; "
            "exact is per instance given the assignment, not jointly optimal")
    stats = {"jobs_per_instance": [len(g) for g in groups], "nominal_seconds": round(clock.spent, 6),
             "wall_cut": bool(wall_cut or clock.wall_cut)}
    return Result(family=FAMILY, method=f"multi-{method}", solver=method,
                  status=SolveStatus.FEASIBLE,
                  objective=report.objective, bound=None, solve_seconds=seconds, solution=schedule,
                  message=_wall_note(stats, note), validation=report, stats=stats)
