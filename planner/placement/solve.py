"""Solving placement: heuristics, the MIP, and the comparison of the two.

`solve_placement` runs, in order: prechecks (a request no worker can serve is
reported by name), the combinatorial lower bound, the constraint-aware
heuristics (the best one is the MIP's warm start and fixes the number of
candidate workers), the MIP, and the independent validator.  Solver trouble
never loses what is known: a time limit returns the incumbent and the best
bound, an infeasible model names the conflicting constraint families.

A time limit covers the whole call and is spent in nominal seconds
(`planner.placement.effort`): phases that do not fit are skipped — the same
ones on every run — and listed in the result (``stats["skipped"]``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence

from planner.core.agreement import objective_mismatch, reconcile_status
from planner.core.result import Result
from planner.core.work import WorkClock
from planner.errors import InfeasibleError
from planner.placement import effort
from planner.placement.bounds import LowerBound, lower_bound, precheck
from planner.placement.formulation import build_model
from planner.placement.heuristics import CONSTRAINT_AWARE, HEURISTICS, Budget, SearchStopped
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
    problem: PlacementProblem, method: str, *, seed: int = 0, bound: LowerBound | None = None,
    work: dict | None = None, budget: Budget | None = None,
) -> Result[PlacementSolution]:
    """One heuristic, validated, with the combinatorial lower bound beside it.

    ``work`` (optional, constraint-aware heuristics) receives their work counts (`effort.greedy_seconds`);
    ``budget`` (optional, load balancers) bounds their pool-size search (`heuristics._smallest_pool`):
    a stopped search is a ``no_solution`` result saying which sizes it tried.
    """
    if method not in HEURISTICS:
        raise KeyError(method)
    fn = HEURISTICS[method]
    start = time.perf_counter()
    try:
        solution = fn(problem, work) if method in CONSTRAINT_AWARE else fn(problem, seed=seed, budget=budget)
    except InfeasibleError as exc:
        return _infeasible_result(method, "heuristic", str(exc), time.perf_counter() - start)
    except SearchStopped as exc:
        lb = bound or lower_bound(problem.arrays)
        return Result(FAMILY, method, "heuristic", SolveStatus.NO_SOLUTION, None, float(lb.value),
                      time.perf_counter() - start, None, message=str(exc), bound_source=lb.source)
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


#: Share of the time limit the second greedy heuristic must end within (the first always runs: it is the plan).
HEURISTIC_SHARE = 0.5
#: Smallest repacking budget worth starting (nominal seconds): a few rounds.
MIN_REPACK_SECONDS = 0.1


def mip_candidates(num_new: int, ongoing_workers: int, max_workers: int | None, incumbent_workers: int | None) -> int:
    """Candidate new workers of the MIP: enough for an optimal plan, and no more.

    Exact: an optimal plan uses at most ``incumbent_workers`` workers (a feasible plan's count), at
    most ``max_workers`` (the cap), and at most one new worker per new request — a used candidate
    holds at least one new request (M6), and ongoing requests never move.  The symmetry breaking of
    `formulation.make_slots` relabels any plan so that its new workers are the first candidates.  So
    a huge ``max_workers`` (10⁶) builds no more candidates than there are new requests.
    """
    bounds = [num_new]
    if incumbent_workers is not None:
        bounds.append(incumbent_workers - ongoing_workers)
    if max_workers is not None:
        bounds.append(max_workers - ongoing_workers)
    return max(min(bounds), 0)


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
    started: float | None = None,
    clock: WorkClock | None = None,
    heuristics: Sequence[Result[PlacementSolution]] = (),
) -> Result[PlacementSolution]:
    """Solve the placement MIP to proven optimality (or to the time limit).

    Between the heuristics and the MIP, on large models (more than
    ``REPACK_MIN_PAIRS`` request–worker pairs, where the MIP's root LP alone is
    slow), the repacking LNS (`improve.repack`) tries to reach the lower bound
    for up to ``repack_seconds`` (default: half the time limit, at most 30 s, or
    all the time left when the MIP will not run); its plan is the MIP's warm
    start.  Small models go straight to the MIP.

    ``time_limit`` covers the whole call — the heuristics, the repacking, the
    MIP's build and solve, the validation — and is spent in nominal seconds
    (`planner.placement.effort`, a `WorkClock`), so the phases that run are the
    same on every run: the first greedy heuristic always runs (it is the plan
    returned if nothing else fits), the second runs if it ends within
    `HEURISTIC_SHARE` of the limit, and the MIP is built only if its estimated
    build and hand-over to the solver take at most half the time left, so that
    it has at least as long again to solve.  What was skipped is listed in
    ``stats["skipped"]`` and the message.  The wall clock is a guard (the MIP's
    time limit never passes it; ``stats["wall_cut"]`` says when it decided).
    ``started``: the `time.perf_counter` time the caller's call began, when it
    read the instance first (the CLI): the wall guard counts from it and the
    reading is charged its nominal cost.  ``clock``: a caller's `WorkClock`, already
    charged with what the call did before (`compare_placement`); its limit replaces ``time_limit``.
    ``heuristics``: results of constraint-aware heuristics the caller already ran (and charged):
    they are not run again.
    """
    t0 = time.perf_counter()
    if clock is None:
        clock = WorkClock(time_limit, started if started is not None else t0)
        if started is not None:
            clock.charge(effort.load_seconds(problem.num_requests))
    time_limit = clock.time_limit
    arrays = problem.arrays
    problems = precheck(arrays)
    if problems:
        more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
        return _infeasible_result("mip", solver, problems[0] + more, time.perf_counter() - t0)
    say = phase or (lambda text: None)
    say("lower bound and heuristics")
    lb = lower_bound(arrays)
    clock.charge(effort.setup_seconds(arrays.num_requests))
    K = arrays.num_ongoing_workers
    num_new = len(arrays.new_indices)
    cap = arrays.max_workers
    skipped: list[str] = []
    incumbent: Result[PlacementSolution] | None = None
    reserve = 0.0  # nominal seconds kept for validating the final plan
    last_cost = 0.0
    given = {r.method: r for r in heuristics}
    for k, name in enumerate(CONSTRAINT_AWARE):
        if name in given:
            res = given[name]
            if res.solution is not None:
                reserve = max(reserve, effort.validate_seconds(arrays, res.solution.as_array()))
        else:
            if k > 0 and not clock.allows(last_cost + reserve, share=HEURISTIC_SHARE):
                skipped.append(f"{name} (about {last_cost:.2g} s)")
                continue
            work: dict = {}
            res = run_heuristic(problem, name, seed=seed, bound=lb, work=work)
            check = effort.validate_seconds(arrays, res.solution.as_array()) if res.solution is not None else 0.0
            last_cost = effort.greedy_seconds(num_new, work) + check
            reserve = max(reserve, check)
            clock.charge(last_cost)
        if res.solution is not None and res.validation and res.validation.feasible:
            if incumbent is None or res.objective < incumbent.objective:  # type: ignore[operator]
                incumbent = res

    def mip_plan() -> tuple[int, int, float, float]:
        """(candidates, pairs bound, nominal build seconds, nominal hand-over seconds) of the MIP now."""
        u = mip_candidates(num_new, K, cap, int(incumbent.objective) if incumbent else None)  # type: ignore[arg-type]
        pairs = effort.mip_pairs_upper(num_new, K, u)
        return u, pairs, effort.mip_build_seconds(pairs, K + u, num_new), effort.mip_handover_seconds(pairs)

    def mip_fits(build: float, handover: float) -> bool:
        left = clock.left()
        return left is None or (2 * (build + handover) <= left - reserve and clock.allows(build + handover + reserve))

    candidates, pairs_bound, build_est, handover_est = mip_plan()
    pairs = len(arrays.new_indices) * (
        K + (int(incumbent.objective) - K if incumbent else len(arrays.new_indices))  # type: ignore[arg-type]
    )
    repack_info: dict = {}
    if incumbent is not None and incumbent.objective > lb.value and pairs > REPACK_MIN_PAIRS:  # type: ignore[operator]
        will_solve = mip_fits(build_est, handover_est) and not (cap is not None and lb.value > cap)
        budget = repack_seconds
        if budget is None:
            budget = 30.0 if time_limit is None else min(30.0, 0.5 * time_limit)
            if time_limit is not None and not will_solve:
                budget = float(time_limit)  # the MIP will not run: the repacking is the only improvement left
        left = clock.left()
        if left is not None:
            keep = reserve + (2 * (build_est + handover_est) if will_solve else 0.0)
            budget = min(budget, left - keep)
        if budget >= MIN_REPACK_SECONDS:
            say(f"repacking (LNS): {int(incumbent.objective)} workers, bound {lb.value}")  # type: ignore[arg-type]
            deadline = None if time_limit is None else clock.started + clock.guard_share * time_limit  # inf: no guard
            improved = repack(
                problem, incumbent.solution, target_workers=lb.value, time_budget=budget,  # type: ignore[arg-type]
                solver=solver if solver == "highs" else "highs", seed=seed, deadline=deadline, info=repack_info,
            )
            clock.charge(repack_info.get("nominal_seconds", 0.0))
            report = validate_placement(problem, improved)
            clock.charge(effort.validate_seconds(arrays, improved.as_array()))
            if report.feasible and improved.workers_used < incumbent.objective:  # type: ignore[operator]
                incumbent = Result(
                    FAMILY, improved.method, "heuristic", SolveStatus.FEASIBLE, float(improved.workers_used),
                    float(lb.value), time.perf_counter() - t0, improved, validation=report, bound_source=lb.source,
                )
            candidates, pairs_bound, build_est, handover_est = mip_plan()
        elif repack_seconds is None or repack_seconds > 0:  # an explicit 0 is no skip
            skipped.append(f"the repacking LNS ({max(budget, 0.0):.2g} s left for it)")
    if cap is not None and lb.value > cap:
        msg = (
            f"no placement fits in max_workers={cap}: at least {lb.value} workers are needed "
            f"({lb.source})"
        )
        return Result(
            FAMILY, "mip", solver, SolveStatus.INFEASIBLE, None, float(lb.value), time.perf_counter() - t0,
            None, message=msg, bound_source=lb.source,
        )
    heuristic_seconds = time.perf_counter() - t0
    stats: dict = {
        "candidate_workers": candidates,
        "ongoing_workers": K,
        "heuristic_seconds": round(heuristic_seconds, 6),
        "lower_bound": lb.value,
        "lower_bound_source": lb.source,
    }
    if repack_info:
        stats["repack_rounds"] = repack_info.get("rounds")
    if not mip_fits(build_est, handover_est):
        left = clock.left() or 0.0
        skipped.append(
            f"the MIP (up to {pairs_bound:,} request-worker pairs: about {build_est + handover_est:.2g} s to build "
            f"and hand to the solver, {max(left - reserve, 0.0):.2g} s left)"
        )
        return _without_mip(problem, solver, incumbent, lb, skipped, stats, clock, t0, repack_info)

    say("building the MIP")
    b0 = time.perf_counter()
    pm = build_model(problem, candidates, lower_bound=lb.value, open_link=open_link)
    build_seconds = time.perf_counter() - b0
    start = None
    if warm_start and incumbent is not None:
        start = pm.warm_start(problem, incumbent.solution)  # type: ignore[arg-type]
    real_pairs = int(pm.slots.pair_request.size)
    clock.charge(effort.mip_build_seconds(real_pairs, K + candidates, num_new))
    remaining = None
    if time_limit is not None:
        # The solver stops on the wall clock whatever is done here: it gets the wall time left, less its
        # hand-over and the final validation (nominal estimates).
        remaining = max(time_limit - clock.wall_seconds() - effort.mip_handover_seconds(real_pairs) - reserve, 0.0)
    say(f"MIP ({solver})")
    outcome = solve(
        pm.model,
        solver,
        SolveOptions(time_limit=remaining, threads=threads, seed=seed, warm_start=start, progress=progress, verbose=verbose),
    )
    stats = {
        **pm.model.stats(),
        **stats,
        "warm_start": None if start is None else incumbent.method,  # type: ignore[union-attr]
        "warm_start_accepted": outcome.warm_start_accepted,
        "nodes": outcome.node_count,
        "solver_seconds": round(outcome.seconds, 6),
    }
    _budget_stats(stats, skipped, clock, repack_info)
    seconds = time.perf_counter() - t0
    budget_note = _skipped_note(skipped)

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
            incumbent.objective if incumbent else None, float(lb.value), seconds, sol, build_seconds,
            _join(message, budget_note), incumbent.validation if incumbent else None, lb.source, stats,
        )
    if outcome.status == SolveStatus.INFEASIBLE:
        message = "the placement MIP is infeasible" + (
            f" with at most max_workers={cap} workers" if cap is not None else ""
        )
        if diagnose:
            message += "; " + diagnose_infeasibility(pm.model, solver).summary()
        return Result(FAMILY, "mip", solver, SolveStatus.INFEASIBLE, None, None, seconds, None,
                      build_seconds, _join(message, budget_note), None, "", stats)

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
                      build_seconds, _join(outcome.message or "no solution found within the time limit", budget_note),
                      None, bound_source, stats)
    report = validate_placement(problem, solution)
    objective = float(solution.workers_used)
    # a MIP plan whose objective is not the validator's proves nothing: neither its status nor its dual bound count
    mismatch = objective_mismatch(outcome.objective, objective, first_name="MIP objective",
                                  second_name="the validator's") if outcome.x is not None else ""
    if mismatch:
        bound_value, bound_source = float(lb.value), lb.source
    status = outcome.status if outcome.status.has_solution else SolveStatus.FEASIBLE
    if objective <= bound_value:
        status = SolveStatus.OPTIMAL
    status, mismatch = reconcile_status(status, mismatch)
    if status == SolveStatus.OPTIMAL:
        bound_value = objective
    message = outcome.message
    if not report.feasible:
        message = _join(message, f"validator rejects the plan: {report.summary()}")
    message = _join(message, mismatch)
    return Result(FAMILY, "mip", solver, status, objective, bound_value, time.perf_counter() - t0, solution,
                  build_seconds, _join(message, budget_note), report, bound_source, stats)


def _join(*parts: str) -> str:
    return "; ".join(p for p in parts if p)


def _skipped_note(skipped: list[str]) -> str:
    return ("time limit: skipped " + ", ".join(skipped)) if skipped else ""


def _budget_stats(stats: dict, skipped: list[str], clock: WorkClock, repack_info: dict) -> None:
    """What the time limit decided: the phases skipped, the nominal seconds spent, a wall-clock cut."""
    stats["skipped"] = list(skipped)
    stats["nominal_seconds"] = round(clock.spent, 6)
    stats["wall_cut"] = bool(clock.wall_cut or repack_info.get("wall_cut"))


def _without_mip(
    problem: PlacementProblem, solver: str, incumbent: Result[PlacementSolution] | None, lb: LowerBound,
    skipped: list[str], stats: dict, clock: WorkClock, t0: float, repack_info: dict,
) -> Result[PlacementSolution]:
    """The result when the time limit leaves no room for the MIP: the best heuristic plan and the lower bound."""
    _budget_stats(stats, skipped, clock, repack_info)
    note = _skipped_note(skipped)
    seconds = time.perf_counter() - t0
    if incumbent is None:
        return Result(FAMILY, "mip", solver, SolveStatus.NO_SOLUTION, None, float(lb.value), seconds, None, 0.0,
                      _join(note, "no heuristic plan meets every constraint"), None, lb.source, stats)
    proven = incumbent.objective <= lb.value  # type: ignore[operator]
    what = (f"the {incumbent.method} plan meets the lower bound ({lb.source}), so it is optimal" if proven  # type: ignore[union-attr]
            else f"the {incumbent.method} plan and the lower bound are reported")  # type: ignore[union-attr]
    return Result(
        FAMILY, "mip", solver, SolveStatus.OPTIMAL if proven else SolveStatus.FEASIBLE, incumbent.objective,
        incumbent.objective if proven else float(lb.value), seconds, incumbent.solution, 0.0,
        _join(note, what), incumbent.validation, lb.source, stats,
    )


#: Share of the time limit `compare_placement`'s load balancers may spend searching their pool sizes.
COMPARE_HEURISTIC_SHARE = 0.5


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
    started: float | None = None,
) -> tuple[list[Result[PlacementSolution]], Result[PlacementSolution]]:
    """Every heuristic and the MIP on one instance: (heuristic results, MIP result).

    ``time_limit`` covers the whole call, in nominal seconds (`solve_placement`): the load balancers
    search their pool sizes until `COMPARE_HEURISTIC_SHARE` of it is spent (a stopped search is
    reported as ``no_solution`` with the sizes it tried), and the MIP pipeline gets the rest.
    """
    t0 = time.perf_counter()
    clock = WorkClock(time_limit, started if started is not None else t0)
    if started is not None:
        clock.charge(effort.load_seconds(problem.num_requests))
    arrays = problem.arrays
    if precheck(arrays):
        mip = solve_placement(problem, solver=solver, threads=threads, seed=seed, clock=clock)
        return [], mip
    lb = lower_bound(arrays)
    clock.charge(effort.setup_seconds(arrays.num_requests))
    num_new = len(arrays.new_indices)
    names = methods or tuple(HEURISTICS)
    balancers = [name for name in names if name not in CONSTRAINT_AWARE]
    heuristics = []
    for name in names:
        work: dict = {}
        budget = None
        if name in balancers:  # the k-th load balancer may search until k/n of the share is spent
            share = COMPARE_HEURISTIC_SHARE * (balancers.index(name) + 1) / len(balancers)
            budget = (lambda seconds, share=share: clock.allows(seconds, share=share), clock.charge)
        res = run_heuristic(problem, name, seed=seed, bound=lb, work=work, budget=budget)
        if name in CONSTRAINT_AWARE:
            clock.charge(effort.greedy_seconds(num_new, work))
        if res.solution is not None:
            clock.charge(effort.validate_seconds(arrays, res.solution.as_array()))
        heuristics.append(res)
    mip = solve_placement(
        problem, solver=solver, threads=threads, seed=seed, progress=progress, phase=phase, clock=clock,
        heuristics=[r for r in heuristics if r.method in CONSTRAINT_AWARE],
    )
    return heuristics, mip
