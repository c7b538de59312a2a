"""Solving placement: heuristics, the MIP, and the comparison of the two.

`solve_placement` runs, in order: prechecks (a request no worker can serve is
reported by name), the combinatorial lower bound, the constraint-aware
heuristics (the best one is the MIP's warm start and fixes the number of
candidate workers), the MIP, and the independent validator.  Solver trouble
never loses what is known: a time limit returns the incumbent and the best
bound, an infeasible model names the conflicting constraint families.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from planner.core.result import Result
from planner.errors import InfeasibleError
from planner.placement.bounds import LowerBound, lower_bound, precheck
from planner.placement.formulation import build_model
from planner.placement.heuristics import CONSTRAINT_AWARE, HEURISTICS
from planner.placement.improve import repack
from planner.placement.problem import PlacementProblem
from planner.placement.solution import PlacementSolution
from planner.placement.validator import validate_placement
from planner.solver import ProgressEvent, SolveOptions, SolveStatus, diagnose_infeasibility, solve

FAMILY = "placement"
#: Request–worker pairs above which the repacking LNS runs before the MIP.
REPACK_MIN_PAIRS = 20_000


def _infeasible_result(method: str, solver: str, message: str, seconds: float) -> Result[PlacementSolution]:
    return Result(FAMILY, method, solver, SolveStatus.INFEASIBLE, None, None, seconds, None, message=message)


def run_heuristic(
    problem: PlacementProblem, method: str, *, seed: int = 0, bound: LowerBound | None = None
) -> Result[PlacementSolution]:
    """One heuristic, validated, with the combinatorial lower bound beside it."""
    if method not in HEURISTICS:
        raise KeyError(method)
    fn = HEURISTICS[method]
    start = time.perf_counter()
    try:
        solution = fn(problem) if method in CONSTRAINT_AWARE else fn(problem, seed=seed)
    except InfeasibleError as exc:
        return _infeasible_result(method, "heuristic", str(exc), time.perf_counter() - start)
    seconds = time.perf_counter() - start
    lb = bound or lower_bound(problem.arrays)
    report = validate_placement(problem, solution)
    objective = float(solution.workers_used)
    status = SolveStatus.OPTIMAL if report.feasible and objective <= lb.value else SolveStatus.FEASIBLE
    message = "" if report.feasible else f"validator: {report.summary()}"
    return Result(
        FAMILY, method, "heuristic", status, objective, float(lb.value), seconds, solution,
        message=message, validation=report, bound_source=lb.source,
    )


def solve_placement(
    problem: PlacementProblem,
    *,
    solver: str = "highs",
    time_limit: float | None = None,
    threads: int | None = None,
    seed: int = 0,
    verbose: bool = False,
    progress: Callable[[ProgressEvent], None] | None = None,
    warm_start: bool = True,
    open_link: bool = True,
    diagnose: bool = True,
    repack_seconds: float | None = None,
    phase: Callable[[str], None] | None = None,
) -> Result[PlacementSolution]:
    """Solve the placement MIP to proven optimality (or to the time limit).

    Between the heuristics and the MIP, on large models (more than
    ``REPACK_MIN_PAIRS`` request–worker pairs, where the MIP's root LP alone is
    slow), the repacking LNS (`improve.repack`) tries to reach the lower bound
    for up to ``repack_seconds`` (default: half the time limit, at most 30 s);
    its plan is the MIP's warm start.  Small models go straight to the MIP.
    """
    t0 = time.perf_counter()
    arrays = problem.arrays
    problems = precheck(arrays)
    if problems:
        more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
        return _infeasible_result("mip", solver, problems[0] + more, time.perf_counter() - t0)
    say = phase or (lambda text: None)
    say("lower bound and heuristics")
    lb = lower_bound(arrays)
    K = arrays.num_ongoing_workers
    incumbent: Result[PlacementSolution] | None = None
    for name in CONSTRAINT_AWARE:
        res = run_heuristic(problem, name, seed=seed, bound=lb)
        if res.solution is not None and res.validation and res.validation.feasible:
            if incumbent is None or res.objective < incumbent.objective:  # type: ignore[operator]
                incumbent = res
    pairs = len(arrays.new_indices) * (
        K + (int(incumbent.objective) - K if incumbent else len(arrays.new_indices))  # type: ignore[arg-type]
    )
    if incumbent is not None and incumbent.objective > lb.value and pairs > REPACK_MIN_PAIRS:  # type: ignore[operator]
        budget = repack_seconds
        if budget is None:
            budget = 30.0 if time_limit is None else min(30.0, 0.5 * time_limit)
        if budget > 0:
            say(f"repacking (LNS): {int(incumbent.objective)} workers, bound {lb.value}")  # type: ignore[arg-type]
            improved = repack(
                problem, incumbent.solution, target_workers=lb.value, time_budget=budget,  # type: ignore[arg-type]
                solver=solver if solver == "highs" else "highs", seed=seed,
            )
            report = validate_placement(problem, improved)
            if report.feasible and improved.workers_used < incumbent.objective:  # type: ignore[operator]
                incumbent = Result(
                    FAMILY, improved.method, "heuristic", SolveStatus.FEASIBLE, float(improved.workers_used),
                    float(lb.value), time.perf_counter() - t0, improved, validation=report, bound_source=lb.source,
                )
    cap = arrays.max_workers
    if cap is not None:
        candidates = max(cap - K, 0)
        if lb.value > cap:
            msg = (
                f"no placement fits in max_workers={cap}: at least {lb.value} workers are needed "
                f"({lb.source})"
            )
            return Result(
                FAMILY, "mip", solver, SolveStatus.INFEASIBLE, None, float(lb.value), time.perf_counter() - t0,
                None, message=msg, bound_source=lb.source,
            )
    else:
        candidates = int(incumbent.objective) - K if incumbent else len(arrays.new_indices)
    heuristic_seconds = time.perf_counter() - t0

    say("building the MIP")
    b0 = time.perf_counter()
    pm = build_model(problem, candidates, lower_bound=lb.value, open_link=open_link)
    build_seconds = time.perf_counter() - b0
    start = None
    if warm_start and incumbent is not None:
        start = pm.warm_start(problem, incumbent.solution)  # type: ignore[arg-type]
    remaining = None if time_limit is None else max(time_limit - (time.perf_counter() - t0), 0.0)
    say(f"MIP ({solver})")
    outcome = solve(
        pm.model,
        solver,
        SolveOptions(time_limit=remaining, threads=threads, seed=seed, warm_start=start, progress=progress, verbose=verbose),
    )
    stats = {
        **pm.model.stats(),
        "candidate_workers": candidates,
        "ongoing_workers": K,
        "heuristic_seconds": round(heuristic_seconds, 6),
        "warm_start": None if start is None else incumbent.method,  # type: ignore[union-attr]
        "warm_start_accepted": outcome.warm_start_accepted,
        "lower_bound": lb.value,
        "lower_bound_source": lb.source,
        "nodes": outcome.node_count,
        "solver_seconds": round(outcome.seconds, 6),
    }
    seconds = time.perf_counter() - t0

    if outcome.status == SolveStatus.ERROR:
        # e.g. the Gurobi license: say so, but keep what the heuristics know.  A heuristic plan
        # that meets the lower bound is optimal whatever the solver could do.
        sol = incumbent.solution if incumbent else None
        proven = incumbent is not None and incumbent.objective <= lb.value  # type: ignore[operator]
        message = outcome.message + (
            f"; the {incumbent.method} plan meets the lower bound ({lb.source}), so it is optimal" if proven else  # type: ignore[union-attr]
            "; the best heuristic plan and the lower bound are reported instead" if incumbent else ""
        )
        return Result(
            FAMILY, "mip", solver, SolveStatus.OPTIMAL if proven else SolveStatus.ERROR,
            incumbent.objective if incumbent else None, float(lb.value), seconds, sol, build_seconds, message,
            incumbent.validation if incumbent else None, lb.source, stats,
        )
    if outcome.status == SolveStatus.INFEASIBLE:
        message = "the placement MIP is infeasible" + (
            f" with at most max_workers={cap} workers" if cap is not None else ""
        )
        if diagnose:
            message += "; " + diagnose_infeasibility(pm.model, solver).summary()
        return Result(FAMILY, "mip", solver, SolveStatus.INFEASIBLE, None, None, seconds, None,
                      build_seconds, message, None, "", stats)

    solution = None
    if outcome.x is not None:
        solution = pm.extract(problem, outcome.x, "mip")
    elif incumbent is not None:  # stopped before the solver reported a solution: keep the warm start
        solution = incumbent.solution
    bound_value = float(lb.value)
    bound_source = lb.source
    if outcome.bound is not None and math.ceil(outcome.bound - 1e-6) >= bound_value:
        bound_value, bound_source = float(math.ceil(outcome.bound - 1e-6)), f"{solver} dual bound"
    if solution is None:
        return Result(FAMILY, "mip", solver, SolveStatus.NO_SOLUTION, None, bound_value, seconds, None,
                      build_seconds, outcome.message or "no solution found within the time limit", None,
                      bound_source, stats)
    report = validate_placement(problem, solution)
    objective = float(solution.workers_used)
    status = outcome.status if outcome.status.has_solution else SolveStatus.FEASIBLE
    if objective <= bound_value:
        status = SolveStatus.OPTIMAL
    if status == SolveStatus.OPTIMAL:
        bound_value = objective
    message = outcome.message
    if not report.feasible:
        message = (message + "; " if message else "") + f"validator rejects the plan: {report.summary()}"
    if outcome.objective is not None and abs(outcome.objective - objective) > 1e-6:
        message = (message + "; " if message else "") + (
            f"MIP objective {outcome.objective:g} differs from the validator's {objective:g}"
        )
    return Result(FAMILY, "mip", solver, status, objective, bound_value, seconds, solution, build_seconds,
                  message, report, bound_source, stats)


def compare_placement(
    problem: PlacementProblem,
    *,
    solver: str = "highs",
    time_limit: float | None = None,
    threads: int | None = None,
    seed: int = 0,
    methods: tuple[str, ...] | None = None,
    progress: Callable[[ProgressEvent], None] | None = None,
    phase: Callable[[str], None] | None = None,
) -> tuple[list[Result[PlacementSolution]], Result[PlacementSolution]]:
    """Every heuristic and the MIP on one instance: (heuristic results, MIP result)."""
    arrays = problem.arrays
    if precheck(arrays):
        mip = solve_placement(problem, solver=solver, time_limit=time_limit, threads=threads, seed=seed)
        return [], mip
    lb = lower_bound(arrays)
    names = methods or tuple(HEURISTICS)
    heuristics = [run_heuristic(problem, name, seed=seed, bound=lb) for name in names]
    mip = solve_placement(
        problem, solver=solver, time_limit=time_limit, threads=threads, seed=seed, progress=progress, phase=phase
    )
    return heuristics, mip
