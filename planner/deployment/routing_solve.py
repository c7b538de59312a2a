"""Routing: every router and the exact makespan MILP, validated; the comparison of the two."""

from __future__ import annotations

import time

import numpy as np

from planner.core.agreement import model_value, objective_mismatch, reconcile_status
from planner.core.result import Result
from planner.core.work import WorkClock
from planner.deployment import effort
from planner.deployment.problem import RoutingProblem
from planner.deployment.routing import ROUTERS, local_search
from planner.deployment.routing_bound import BOUND_ITERATIONS, GUIDED_SLACKS, guided_routing, makespan, makespan_lower_bound
from planner.deployment.routing_formulation import build_routing_model
from planner.deployment.solution import RoutingSolution
from planner.deployment.validator import validate_routing
from planner.solver import SolveOptions, SolveStatus, relative_gap, solve

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


#: Share of the time limit the makespan bound's ascent may take (it is cheap: 200 steps ≈ 0.1 s at 5,000 × 8).
BOUND_SHARE = 0.15
#: Share of the time limit the guided greedy and the local search may reach (the MILP, if it fits, gets the rest).
SEARCH_SHARE = 0.5
#: Fewest branch-and-bound nodes worth starting the MILP for under a time limit.
MIN_MILP_NODES = 10
#: Wall seconds kept for the final validation, as a multiple of its nominal estimate (the wall-clock guard's margin).
WALL_RESERVE_FACTOR = 1.0


def routing_nonzeros(problem: RoutingProblem) -> int:
    """Nonzeros of `routing_formulation.build_routing_model` (two per fitting pair, one per instance; the
    symmetry rows are ignored), known before the model is built."""
    return 2 * int(np.count_nonzero(problem.fits)) + len(problem.instances)


def _join(*parts: str) -> str:
    return "; ".join(p for p in parts if p)


def solve_routing(problem: RoutingProblem, *, solver: str = "highs", time_limit: float | None = None,
                  threads: int | None = None, seed: int = 0, warm_start: RoutingSolution | None = None,
                  mip_rel_gap: float = MIP_REL_GAP, started: float | None = None,
                  clock: WorkClock | None = None) -> Result[RoutingSolution]:
    """The makespan bound, a bound-guided routing polished by local search, then the makespan MILP.

    Phases: `routing_bound.makespan_lower_bound` (always: the result always carries a valid bound,
    see its proof), `routing_bound.guided_routing` with `routing.local_search` (and ``warm_start``
    polished too, when given), then the MILP warm-started from the best routing, and the independent
    validator.  The reported bound is the larger of the makespan bound and the MILP's dual bound; a
    routing within ``mip_rel_gap`` of it is optimal (the MILP's own criterion).

    ``time_limit`` covers the whole call and is spent in nominal seconds (`planner.deployment.effort`,
    a `WorkClock`): the bound's ascent gets at most `BOUND_SHARE` of it, the local search runs until
    `SEARCH_SHARE` is spent, and the MILP runs only if its build and root (estimated from its size)
    and at least `MIN_MILP_NODES` nodes fit in what is left, with a node limit from the nominal
    budget — so the same input, seed and limit give the same routing.  The wall clock is a guard: the
    MILP's time limit is the wall time left; when the guard stops a phase, ``stats.wall_cut`` is true
    and the message says the run may not repeat.  ``started``: the `time.perf_counter` time the
    caller's call began, when it read the instance first (the CLI): the guard counts from it and the
    reading is charged its nominal cost.  ``clock``: a caller's `WorkClock` (`compare_routing`).
    """
    t0 = time.perf_counter()
    R, S = problem.processing_times.shape
    if clock is None:
        clock = WorkClock(time_limit, started if started is not None else t0)
        if started is not None:
            clock.charge(effort.routing_load_seconds(R, S))
    time_limit = clock.time_limit
    skipped: list[str] = []
    # 1. the bound (always), its ascent steps within BOUND_SHARE of the limit
    steps = BOUND_ITERATIONS
    if time_limit is not None:
        per_step = effort.bound_seconds(R * S, 1) - effort.bound_seconds(R * S, 0)
        affordable = int((BOUND_SHARE * time_limit - clock.spent - effort.bound_seconds(R * S, 0)) / per_step)
        steps = min(steps, max(affordable, 0))
    bound = makespan_lower_bound(problem, iterations=steps)
    clock.charge(effort.bound_seconds(R * S, bound.iterations))
    # 2. the guided routing and the local search (the warm start is polished too); the search may use
    # what the MILP could not (decided on nominal sizes only, before the search)
    reserve = effort.validate_seconds(R)  # nominal seconds kept for validating the plan
    nz_model = routing_nonzeros(problem)
    share = SEARCH_SHARE
    if time_limit is not None:
        after_search = (1.0 - SEARCH_SHARE) * time_limit - reserve
        if effort.milp_nodes_within(after_search, nz_model) < MIN_MILP_NODES:
            share = 1.0 - reserve / time_limit
    search_info: dict = {}

    def polish(assignment: np.ndarray) -> np.ndarray:
        return local_search(problem, assignment, clock=clock, share=share, info=search_info,
                            wall_reserve=WALL_RESERVE_FACTOR * reserve)

    clock.charge(effort.greedy_seconds(R) * len(GUIDED_SLACKS))
    assign, _ = guided_routing(problem, bound, polish)
    how = "bound-guided greedy + local search"
    if warm_start is not None:
        other = polish(warm_start.as_array())
        if makespan(problem, other) < makespan(problem, assign):
            assign, how = other, f"{warm_start.method} + local search"
    heuristic_span = makespan(problem, assign)
    build_start = time.perf_counter()
    model, x, (req, inst) = build_routing_model(problem)
    build = time.perf_counter() - build_start
    nz = model.num_nonzeros
    stats = {"variables": model.num_cols, "integer_variables": model.num_integer, "constraints": model.num_rows,
             "nonzeros": nz, "warm_start": how, "mip_rel_gap": mip_rel_gap,
             "makespan_bound": bound.value, "makespan_bound_source": bound.source,
             "bound_ascent_steps": bound.iterations, "heuristic_makespan": heuristic_span,
             "local_search": dict(search_info)}
    # 3. the MILP, when its build, root and a few nodes fit in the nominal budget left
    node_limit = None
    milp_fits = True
    if time_limit is not None:
        left = (clock.left() or 0.0) - reserve
        nodes = effort.milp_nodes_within(left, nz)
        milp_fits = nodes >= MIN_MILP_NODES and clock.allows(reserve, wall_reserve=WALL_RESERVE_FACTOR * reserve)
        if not milp_fits:
            skipped.append(f"the MILP ({nz:,} nonzeros: about {effort.milp_build_seconds(nz) + effort.milp_root_seconds(nz):.2g} s "
                           f"to build and solve its root, {max(left, 0.0):.2g} s left)")
        node_limit = 1 + nodes
    outcome = None
    wall_cut = clock.wall_cut
    if milp_fits and heuristic_span > bound.value and relative_gap(heuristic_span, bound.value) > mip_rel_gap:
        x0 = np.zeros(model.num_cols)
        x0[x.columns[assign[req] == inst]] = 1.0
        x0[-1] = heuristic_span
        wall_left = None
        if time_limit is not None:
            clock.charge(effort.milp_build_seconds(nz))
            wall_left = max(clock.guard_share * time_limit - clock.wall_seconds() - WALL_RESERVE_FACTOR * reserve, 0.0)
        outcome = solve(model, solver, SolveOptions(time_limit=wall_left, threads=threads, seed=seed, warm_start=x0,
                                                     mip_rel_gap=mip_rel_gap, node_limit=node_limit))
        if time_limit is not None:
            clock.charge(effort.milp_root_seconds(nz) + effort.milp_node_seconds(nz) * (outcome.node_count or 0))
            if "time limit" in (outcome.message or "").lower():
                wall_cut = True
        stats.update(nodes=outcome.node_count, node_limit=node_limit, solver_seconds=round(outcome.seconds, 6),
                     warm_start_accepted=outcome.warm_start_accepted)
    # 4. the plan: the MILP's when it is better, else the heuristic's; validated
    method_solver = outcome.solver if outcome is not None else "heuristic"
    plan, from_milp = assign, False
    if outcome is not None and outcome.status.has_solution and outcome.x is not None:
        values = x.values(outcome.x) > 0.5
        milp_assign = np.full(R, -1, dtype=np.int64)
        milp_assign[req[values]] = inst[values]
        if (milp_assign >= 0).all() and makespan(problem, milp_assign) <= heuristic_span:
            plan, from_milp = milp_assign, True
    solution = RoutingSolution.from_array(problem.request_ids, plan, "milp" if from_milp else "heuristic",
                                          tuple(s.name for s in problem.instances))
    report = validate_routing(problem, solution)
    clock.charge(reserve)
    value, source = bound.value, bound.source
    if outcome is not None and outcome.bound is not None and outcome.bound > value:
        value, source = float(outcome.bound), "MILP dual bound"
    messages: list[str] = []
    status = SolveStatus.FEASIBLE
    if outcome is not None and outcome.status == SolveStatus.ERROR:
        status = SolveStatus.ERROR
        messages.append(_join(outcome.message or "the solver could not run",
                              "the bound-guided routing and the makespan bound are reported"))
    if report.feasible and relative_gap(report.objective, value) <= mip_rel_gap:
        status = SolveStatus.OPTIMAL  # within the MILP's own optimality gap of a valid bound
    if from_milp and outcome is not None:  # the MILP's optimality claim needs its objective to be the plan's
        status, disagreement = reconcile_status(
            status, objective_mismatch(outcome.objective, model_value(model, outcome.x), first_name="MILP makespan",
                                       second_name="the model's value at its point"),
            objective_mismatch(outcome.objective, report.objective, first_name="MILP makespan",
                               second_name="the validator's"))
        if disagreement:
            messages.append(disagreement)
            value, source = bound.value, bound.source  # the mispriced model's dual bound proves nothing
    if not report.feasible:
        status = SolveStatus.ERROR
        messages.append(f"validator: {report.summary()}")
    if status == SolveStatus.FEASIBLE and time_limit is not None and not messages:
        messages.append("time limit: best routing and bound")
    if skipped:
        messages.append("time limit: skipped " + ", ".join(skipped))
    stats["skipped"] = skipped
    stats["nominal_seconds"] = round(clock.spent, 6)
    stats["wall_cut"] = bool(wall_cut or clock.wall_cut)
    if stats["wall_cut"]:
        messages.append("the wall clock stopped a phase before its nominal budget (a slower or busier machine than "
                        "the calibration of planner.deployment.effort): this run may not repeat exactly")
    return Result(FAMILY, "milp", method_solver, status, report.objective, value, time.perf_counter() - t0, solution,
                  build, _join(*messages), report, source, stats)


def compare_routing(problem: RoutingProblem, *, solver: str = "highs", time_limit: float | None = None,
                    threads: int | None = None, seed: int = 0,
                    started: float | None = None) -> tuple[list[Result], Result]:
    """Every router, then `solve_routing` with the best router's routing as one more start.

    ``time_limit`` covers the whole call in nominal seconds: the routers always run (they are what
    is compared) and are charged their nominal cost (`effort.router_seconds`); `solve_routing` spends
    what is left on the same `WorkClock`.  ``started`` as in `solve_routing`."""
    t0 = time.perf_counter()
    R, S = problem.processing_times.shape
    clock = WorkClock(time_limit, started if started is not None else t0)
    if started is not None:
        clock.charge(effort.routing_load_seconds(R, S))
    routers = []
    for method in ROUTERS:
        routers.append(run_router(problem, method))
        clock.charge(effort.router_seconds(method, R, S) + effort.validate_seconds(R))
    valid = [r for r in routers if r.objective is not None and r.validation and r.validation.feasible]
    best = min(valid, key=lambda r: r.objective).solution if valid else None
    exact = solve_routing(problem, solver=solver, threads=threads, seed=seed, warm_start=best, clock=clock)
    return routers, exact
