"""Routing: every router and the exact makespan MILP, validated; the comparison of the two."""

from __future__ import annotations

import time

import numpy as np

from planner.core.result import Result
from planner.deployment.problem import RoutingProblem
from planner.deployment.routing import ROUTERS, local_search
from planner.deployment.routing_formulation import build_routing_model
from planner.deployment.solution import RoutingSolution
from planner.deployment.validator import validate_routing
from planner.solver import SolveOptions, SolveStatus, solve

FAMILY = "routing"
#: Relative gap at which the makespan MILP stops (R||Cmax closes its last 0.01 % slowly; the gap is reported).
MIP_REL_GAP = 1e-4


def run_router(problem: RoutingProblem, method: str) -> Result[RoutingSolution]:
    if method not in ROUTERS:
        raise KeyError(method)
    start = time.perf_counter()
    solution = ROUTERS[method](problem)
    seconds = time.perf_counter() - start
    report = validate_routing(problem, solution)
    return Result(FAMILY, method, "heuristic", SolveStatus.FEASIBLE if report.feasible else SolveStatus.ERROR,
                  report.objective, None, seconds, solution, validation=report,
                  message="" if report.feasible else f"validator: {report.summary()}")


def solve_routing(problem: RoutingProblem, *, solver: str = "highs", time_limit: float | None = None,
                  threads: int | None = None, seed: int = 0, warm_start: RoutingSolution | None = None,
                  mip_rel_gap: float = MIP_REL_GAP) -> Result[RoutingSolution]:
    """The makespan MILP, warm-started from the mapper's routing (or ``warm_start``).

    ``time_limit`` covers the whole call: the warm start's local search gets at most a third of it and the
    MILP what is left (at least a tenth), so a 5 s limit is not a 30 s wait.
    """
    build_start = time.perf_counter()
    model, x, (req, inst) = build_routing_model(problem)
    build = time.perf_counter() - build_start
    start_sol = warm_start or ROUTERS["mapper"](problem)
    deadline = None if time_limit is None else build_start + time_limit / 3
    assign = local_search(problem, start_sol.as_array(), deadline=deadline)
    if time_limit is not None:
        time_limit = max(time_limit - (time.perf_counter() - build_start), time_limit / 10)
    x0 = np.zeros(model.num_cols)
    chosen = assign[req] == inst
    x0[x.columns[chosen]] = 1.0
    loads = np.zeros(len(problem.instances))
    np.add.at(loads, assign, problem.processing_times[np.arange(len(assign)), assign])
    x0[-1] = loads.max()
    outcome = solve(model, solver, SolveOptions(time_limit=time_limit, threads=threads, seed=seed, warm_start=x0,
                                                 mip_rel_gap=mip_rel_gap))
    stats = {"variables": model.num_cols, "integer_variables": model.num_integer, "constraints": model.num_rows,
             "nonzeros": model.num_nonzeros, "warm_start": f"{start_sol.method} + local search",
             "mip_rel_gap": mip_rel_gap,
             "warm_start_accepted": outcome.warm_start_accepted}
    if not outcome.status.has_solution:
        return Result(FAMILY, "milp", outcome.solver, outcome.status, None, outcome.bound, outcome.seconds, None,
                      build, outcome.message or "no routing found", None, "MILP dual bound", stats)
    values = x.values(outcome.x) > 0.5
    assignment = np.full(len(problem.request_ids), -1, dtype=np.int64)
    assignment[req[values]] = inst[values]
    solution = RoutingSolution.from_array(problem.request_ids, assignment, "milp",
                                          tuple(s.name for s in problem.instances))
    report = validate_routing(problem, solution)
    message = "" if outcome.status == SolveStatus.OPTIMAL else (outcome.message or "time limit: incumbent and bound")
    if not report.feasible:
        message = f"validator: {report.summary()}"
    return Result(FAMILY, "milp", outcome.solver, outcome.status, report.objective, outcome.bound, outcome.seconds,
                  solution, build, message, report, "MILP dual bound", stats)


def compare_routing(problem: RoutingProblem, *, solver: str = "highs", time_limit: float | None = None,
                    threads: int | None = None, seed: int = 0) -> tuple[list[Result], Result]:
    """Every router, then the MILP warm-started from the best router."""
    start = time.perf_counter()
    routers = [run_router(problem, m) for m in ROUTERS]
    if time_limit is not None:  # the limit covers the routers too (at least a tenth is left for the MILP)
        time_limit = max(time_limit - (time.perf_counter() - start), time_limit / 10)
    valid = [r for r in routers if r.objective is not None and r.validation and r.validation.feasible]
    best = min(valid, key=lambda r: r.objective).solution if valid else None
    exact = solve_routing(problem, solver=solver, time_limit=time_limit, threads=threads, seed=seed, warm_start=best)
    return routers, exact
