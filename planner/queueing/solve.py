"""Solving a queueing problem: baselines, the MILP, the soft version and the scale-up MILP.

`solve_queueing` runs the baselines first.  For the penalty objective (hard SLOs) the default
formulation ``auto`` (or ``certified``) runs the certified pipeline of `planner.queueing.certified`:
local search from the baselines, the swap-aware assignment bound (Hungarian with duals), and — when
the gap on Σ start is above 0.01 % and reduced-cost fixing leaves few enough cells — the exact slots
MILP over the remaining cells; the result carries the plan, a certified bound and its source.  For
the soft objectives, or when the pipeline finds no plan meeting every SLO, it falls back to the
previous path: ``slots`` (exact dense MILP) while it has at most `SLOTS_MAX_BINARIES` assignment
binaries, the model-block MILP above (``slots`` / ``blocks`` can also be forced).  The bound there is
the solver's (slots) or, for the penalty objective, the assignment relaxation of `bounds.py` when that
is higher; a plan meeting it is optimal.  When the hard-deadline objective (penalty) is infeasible —
or no plan meeting every SLO is found in time — it does not just fail: it solves the soft version
(``soft_objective``, default total lateness, warm-started from the best baseline) and the scale-up
MILP (the cheapest set of extra instances of the declared types that makes every SLO hold), and
returns both.  A time limit is one budget for the whole call, counted from its start (baselines
included): the certified pipeline, then the fallback MILP, then the soft MILP (at most `SOFT_SHARE` of
what is left when a scale-up follows) and the scale-up (the rest) share it.  The certified pipeline
and the scale-up's witness search spend it in nominal seconds (`planner.core.work`), so their plans
repeat run to run; the HiGHS MILPs stop on the wall clock, as any MILP time limit does.  A full MILP
whose estimated build time (`planner.queueing.effort.milp_model_seconds`) exceeds half of the time
it would get is not built at all (`milp_out_of_time`; thousands of queues): the best plan known —
the certified pipeline's local search or the best baseline — is reported with that reason.  When
no plan meets every SLO because some group is late even first on every instance
(`hopeless_groups`), the message names it, and says when no new instance could help it either.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import numpy as np

from planner.core.agreement import objective_mismatch, reconcile_status
from planner.core.result import Result
from planner.core.work import WorkClock
from planner.errors import InfeasibleError, PlannerError
from planner.queueing import effort
from planner.queueing.bounds import fallback_lower_bound
from planner.queueing.capacity import capacity_lower_bound, describe_bound, is_at_bound, witness_fleet
from planner.queueing.certified import solve_certified
from planner.queueing.formulation import QueueMilp, build_model, warm_start_vector
from planner.queueing.heuristics import HEURISTICS
from planner.queueing.problem import HARD_OBJECTIVES, OBJECTIVES, QueueAssignment, QueueingProblem
from planner.queueing.validator import TOLERANCE as VALIDATOR_TOLERANCE
from planner.queueing.validator import validate_assignment
from planner.solver import SolveOptions, SolveStatus, check_solver_name, diagnose_infeasibility, solve

FAMILY = "queueing"
#: Above this many slot binaries (queues × groups²) `auto` uses the model-block formulation.
SLOTS_MAX_BINARIES = 20_000
FORMULATIONS = ("auto", "certified", "slots", "blocks")
#: Share of the time left that the soft MILP gets when a scale-up follows (the soft plan is warm-started
#: from the best baseline, so it exists anyway; the scale-up witness search needs the time more).
SOFT_SHARE = 0.25
#: A full MILP is built only if its estimated build time (`planner.queueing.effort.milp_model_seconds`)
#: is at most this share of its time limit, or at most `MILP_BUILD_FLOOR_SECONDS` (small models always run).
MILP_BUILD_SHARE = 0.5
MILP_BUILD_FLOOR_SECONDS = 1.0
#: Share of the scale-up's time limit for the witness search (nominal seconds, `planner.core.work`);
#: the capacity bound before it may use half of the budget (wall clock, HiGHS), the MILP gets the rest.
WITNESS_SHARE = 0.4


#: What a result says when a MILP of the fallback path stopped on its wall-clock time limit.
MILP_WALL_NOTE = ("the MILP stopped on the wall clock (its time limit), not on a nominal budget: this plan may not "
                  "repeat on another run")


def choose_formulation(problem: QueueingProblem, formulation: str) -> str:
    if formulation not in FORMULATIONS:
        raise PlannerError(f"unknown formulation {formulation!r} (expected one of: {', '.join(FORMULATIONS)})")
    if formulation == "certified":
        return "slots" if problem.num_queues * problem.num_groups ** 2 <= SLOTS_MAX_BINARIES else "blocks"
    if formulation != "auto":
        return formulation
    return "slots" if problem.num_queues * problem.num_groups ** 2 <= SLOTS_MAX_BINARIES else "blocks"


def precheck(problem: QueueingProblem) -> None:
    """One-line errors for problems no method can plan."""
    if not any(not q.optional for q in problem.queues):
        raise InfeasibleError(f"{problem.name}: there are zero serving instances")
    usable = sorted({q.type_index for q in problem.queues if not q.optional})
    placeable = np.isfinite(problem.work_s[usable]).any(axis=0)
    if not placeable.all():
        group = problem.groups[int(np.argmin(placeable))]
        raise InfeasibleError(f"group {group.name}: model {group.model} fits on no instance")


def run_heuristic(problem: QueueingProblem, method: str) -> Result[QueueAssignment]:
    """One baseline, validated on the problem's objective."""
    if method not in HEURISTICS:
        raise PlannerError(f"unknown method {method!r} (expected one of: {', '.join(HEURISTICS)}, milp)")
    precheck(problem)
    t0 = time.perf_counter()
    plan = HEURISTICS[method](problem)
    seconds = time.perf_counter() - t0
    report = validate_assignment(problem, plan)
    status = SolveStatus.FEASIBLE if report.feasible else SolveStatus.INFEASIBLE
    message = "" if report.feasible else f"violates hard SLOs: {report.summary()}"
    return Result(FAMILY, method, "heuristic", status, report.objective, None, seconds, plan,
                  message=message, validation=report, stats=_plan_stats(report),
                  objective_offset=objective_offset(problem))


def _plan_stats(report) -> dict:
    d = report.details
    return {k: d[k] for k in ("swaps", "late_groups", "busy_s") if k in d}


@dataclass(frozen=True)
class MilpRun:
    status: SolveStatus
    plan: QueueAssignment | None
    objective: float | None
    bound: float | None
    seconds: float
    build_seconds: float
    message: str
    milp: QueueMilp
    stats: dict


def milp_out_of_time(problem: QueueingProblem, formulation: str, time_limit: float | None) -> str:
    """Why the ``formulation`` MILP of ``problem`` is not even built within ``time_limit`` ("" if it is):
    its estimated build time (`planner.queueing.effort.milp_model_seconds`) is above both
    `MILP_BUILD_FLOOR_SECONDS` and `MILP_BUILD_SHARE` of the limit."""
    if time_limit is None:
        return ""
    estimate = effort.milp_model_seconds(problem.num_queues, problem.num_groups, formulation)
    if estimate <= max(MILP_BUILD_FLOOR_SECONDS, MILP_BUILD_SHARE * time_limit):
        return ""
    return (f"the {formulation} MILP ({problem.num_queues} queues × {problem.num_groups} groups) was not built: building "
            f"it would take about {estimate:.3g} s, and {time_limit:.3g} s of the time limit are left")


def solve_milp(problem: QueueingProblem, purpose: str, formulation: str, *, solver: str = "highs",
               time_limit: float | None = None, threads: int | None = None, seed: int = 0,
               verbose: bool = False, warm_plan: QueueAssignment | None = None) -> MilpRun:
    """Build and solve one MILP (warm-started from ``warm_plan`` if given); the plan is not yet validated.

    Under a time limit a model that could not even be built in time (`milp_out_of_time`) is skipped:
    status ``no_solution``, no plan, ``milp`` None, the reason as the message."""
    skipped = milp_out_of_time(problem, formulation, time_limit)
    if skipped:
        return MilpRun(SolveStatus.NO_SOLUTION, None, None, None, 0.0, 0.0, skipped, None,  # type: ignore[arg-type]
                       {"formulation": formulation, "milp_skipped": skipped})
    b0 = time.perf_counter()
    milp = build_model(problem, purpose, formulation)
    start = None
    if warm_plan is not None:
        start = warm_start_vector(problem, milp, [list(q) for q in warm_plan.queues])
    build_seconds = time.perf_counter() - b0
    limit = None if time_limit is None else max(time_limit - build_seconds, 0.01)  # the limit covers the build
    outcome = solve(milp.model, solver, SolveOptions(time_limit=limit, threads=threads, seed=seed, verbose=verbose,
                                                     warm_start=start))
    plan = None
    if outcome.x is not None and outcome.status.has_solution:
        plan = QueueAssignment.of(problem, milp.sequences(problem, outcome.x), f"milp-{formulation}")
    stats = {**milp.model.stats(), "formulation": formulation, "nodes": outcome.node_count,
             "solver_seconds": round(outcome.seconds, 6),
             "warm_start": None if warm_plan is None else warm_plan.method,
             "warm_start_accepted": outcome.warm_start_accepted}
    return MilpRun(outcome.status, plan, outcome.objective, outcome.bound, outcome.seconds, build_seconds,
                   outcome.message, milp, stats)


def _seconds_left(deadline: float | None, floor: float = 0.01) -> float | None:
    """Seconds until ``deadline`` (a `time.perf_counter` value), at least ``floor``; None without a deadline."""
    return None if deadline is None else max(deadline - time.perf_counter(), floor)


def scale_up(problem: QueueingProblem, formulation: str = "auto", *, solver: str = "highs",
             time_limit: float | None = None, threads: int | None = None, seed: int = 0,
             witness_seconds: float | None = None) -> dict:
    """The cheapest extra instances (per type) that make every SLO hold; ``time_limit`` covers the whole call.

    ``witness_seconds``: the witness search's budget in nominal seconds (default `WITNESS_SHARE` ×
    ``time_limit``).  A caller whose ``time_limit`` is "the wall time left" passes a budget fixed in
    advance, so the witness (and hence the answer) does not depend on how long earlier phases took;
    the witness still stops at the wall-clock deadline of this call (reported as ``wall_cut``).

    First the capacity bound and the witness search of `planner.queueing.capacity` (a proven least
    cost, and the cheapest fleet on which a baseline + descent meets every SLO); if the witness
    costs the bound, it is returned as proven minimal without a MILP.  Otherwise the scale-up MILP
    runs (``time_limit``) and the cheaper valid plan of the two is returned: ``optimal`` when the
    exact slots MILP proves it or its cost meets the capacity bound, else ``feasible`` (an upper
    bound; ``lower_bound_cost`` says how much any fleet needs at least)."""
    candidates = problem.with_candidates().with_objective("penalty")
    if not any(q.optional for q in candidates.queues):
        return {"status": "no_candidates", "extra_instances": {},
                "message": "no scale-up candidates declared (set extra_available on an instance type)"}
    t0 = time.perf_counter()
    deadline = None if time_limit is None else t0 + time_limit
    # the capacity bound may use half of the budget; the witness search and the MILP share the rest
    bound = capacity_lower_bound(problem, solver=solver, time_limit=None if time_limit is None else 0.5 * time_limit,
                                 threads=threads)
    info = {"lower_bound_cost": None if bound is None else bound.cost,
            "current_fleet_infeasible": bool(bound is not None and bound.current_fleet_infeasible),
            "bound_message": describe_bound(bound)}
    if bound is not None and bound.cost is None:
        return {"status": "infeasible", "extra_instances": {}, "formulation": "capacity bound", **info,
                "message": "even with every candidate instance the SLOs cannot all be met (capacity bound)"}
    # nominal seconds (repeatable); its wall-clock guard keeps it within its share of the budget
    witness_clock = _witness_clock(time_limit, witness_seconds, deadline)
    witness = witness_fleet(problem, min_cost=0.0 if bound is None else bound.cost, clock=witness_clock)
    if witness_clock is not None and witness_clock.wall_cut:
        info["wall_cut"] = True
    witness_plan = None
    if witness is not None:
        by_name = dict(zip(witness.plan.queue_names, witness.plan.queues))
        witness_plan = QueueAssignment.of(candidates, [list(by_name.get(q.name, ())) for q in candidates.queues],
                                          "witness (baseline + local search)")
        if is_at_bound(witness.cost, bound):
            return _scale_up_answer(candidates, witness_plan, "optimal", "capacity bound + witness", info,
                                    "proven minimal: the witness fleet costs the capacity bound")
    chosen = choose_formulation(candidates, formulation)
    run = solve_milp(candidates, "scale_up", chosen, solver=solver, time_limit=_seconds_left(deadline), threads=threads,
                     seed=seed)
    milp_plan = run.plan if run.plan is not None and validate_assignment(candidates, run.plan, "scale_up").feasible else None
    plans = [p for p in (milp_plan, witness_plan) if p is not None]
    if not plans:
        if run.status == SolveStatus.INFEASIBLE and chosen == "slots":
            reason = "even with every candidate instance the SLOs cannot all be met"
        elif deadline is not None and time.perf_counter() >= deadline:
            reason = f"no fleet meeting every SLO found within the time limit ({info['bound_message']}; raise --time-limit)"
        else:
            reason = run.message or run.status.value
        return {"status": run.status.value, "extra_instances": {}, "message": reason, "formulation": chosen, **info}
    cost, plan = min(((validate_assignment(candidates, p, "scale_up").objective, p) for p in plans), key=lambda c: c[0])
    proven = (plan is milp_plan and run.status == SolveStatus.OPTIMAL and chosen == "slots") or is_at_bound(cost, bound)
    source = chosen if plan is milp_plan else "witness"
    return _scale_up_answer(candidates, plan, "optimal" if proven else "feasible", source, info,
                            "" if proven else "upper bound: restricted formulation, witness or time limit")


def _witness_clock(time_limit: float | None, witness_seconds: float | None, deadline: float | None) -> WorkClock | None:
    """The witness search's `WorkClock`: ``witness_seconds`` nominal seconds (default `WITNESS_SHARE` ×
    ``time_limit``), its wall-clock guard capped at the call's ``deadline``."""
    budget = witness_seconds if witness_seconds is not None else (
        None if time_limit is None else WITNESS_SHARE * time_limit)
    if budget is None:
        return None
    clock = WorkClock(budget)
    if deadline is not None and budget > 0:
        wall_left = max(deadline - clock.started, 0.0)
        clock.guard_share = min(clock.guard_share, wall_left / budget)
    return clock


def _scale_up_answer(candidates: QueueingProblem, plan: QueueAssignment, status: str, source: str, info: dict,
                     message: str) -> dict:
    report = validate_assignment(candidates, plan, "scale_up")
    extra: dict[str, int] = {}
    for q, seq in zip(candidates.queues, plan.queues):
        if q.optional and seq:
            name = candidates.types[q.type_index].name
            extra[name] = extra.get(name, 0) + 1
    return {"status": status, "extra_instances": extra, "cost": report.objective, "valid": report.feasible,
            "formulation": source, "plan": plan.to_dict(), "message": message, **info}


def objective_offset(problem: QueueingProblem) -> float:
    """The constant part of the problem's objective: −Σ SLO for ``penalty`` (Σ_i (estimate_i − slo_i)),
    0 otherwise.  Results carry it (`Result.objective_offset`), so their ``gap`` is the gap on Σ
    estimate, the part a plan changes, and not a gap diluted by the constant."""
    return -float(problem.slo().sum()) if problem.objective == "penalty" else 0.0


def solve_queueing(problem: QueueingProblem, *, solver: str = "highs", formulation: str = "auto",
                   time_limit: float | None = None, threads: int | None = None, seed: int = 0,
                   soft_objective: str = "total_lateness", recommend_scale_up: bool = True,
                   verbose: bool = False, started: float | None = None) -> Result[QueueAssignment]:
    """The MILP on the problem's objective, with the soft version and scale-up when SLOs cannot be met.

    The result's ``gap`` excludes the objective's constant (`objective_offset`).  ``started``: the
    `time.perf_counter` time the caller's call began, when it read the instance first (the CLI): the
    time limit counts from it and the reading is charged its nominal cost (`effort.load_seconds`)."""
    result = _solve_queueing(problem, solver=solver, formulation=formulation, time_limit=time_limit, threads=threads,
                             seed=seed, soft_objective=soft_objective, recommend_scale_up=recommend_scale_up,
                             verbose=verbose, started=started)
    return replace(result, objective_offset=objective_offset(problem))


def _solve_queueing(problem: QueueingProblem, *, solver: str, formulation: str, time_limit: float | None,
                    threads: int | None, seed: int, soft_objective: str, recommend_scale_up: bool,
                    verbose: bool, started: float | None = None) -> Result[QueueAssignment]:
    check_solver_name(solver)
    precheck(problem)
    if soft_objective not in OBJECTIVES or soft_objective in HARD_OBJECTIVES:
        raise PlannerError(f"soft objective must be one of total_lateness, max_lateness, late_groups, got {soft_objective!r}")
    t0 = time.perf_counter()
    began = started if started is not None else t0  # the time limit counts from here
    baselines = [run_heuristic(problem, name) for name in HEURISTICS]
    valid = [r for r in baselines if r.validation and r.validation.feasible]
    best_baseline = min(valid, key=lambda r: r.objective) if valid else None
    chosen = choose_formulation(problem, formulation)
    kept: dict = {}  # the certified pipeline's local-search plan when it found no bound
    if formulation in ("auto", "certified") and problem.objective == "penalty":
        lateness = {r.method: validate_assignment(problem, r.solution, "total_lateness").objective for r in baselines}
        starts = [r.solution for r in sorted(baselines, key=lambda r: (not (r.validation and r.validation.feasible),
                                                                        r.objective if r.validation and r.validation.feasible
                                                                        else lateness[r.method]))]
        clock = WorkClock(time_limit, began)
        if started is not None:
            clock.charge(effort.load_seconds(problem.num_groups))
        clock.charge(effort.COMPILED_LOAD + effort.baseline_seconds(problem.num_queues, problem.num_groups))
        certified = solve_certified(problem, starts, solver=solver, time_limit=time_limit, threads=threads, seed=seed,
                                    verbose=verbose, started=began, clock=clock, keep=kept)
        if certified is not None:
            certified.stats["baseline_best"] = best_baseline.method if best_baseline else None
            return certified
    remaining = None if time_limit is None else max(time_limit - (time.perf_counter() - began), 0.01)
    # Warm start: the best baseline meeting the hard SLOs, else (soft objectives) the best baseline at all.
    warm = best_baseline if best_baseline is not None or problem.hard_deadlines else min(baselines, key=lambda r: r.objective)
    run = solve_milp(problem, problem.objective, chosen, solver=solver, time_limit=remaining, threads=threads,
                     seed=seed, verbose=verbose, warm_plan=warm.solution if warm is not None else None)
    stats = dict(run.stats)
    stats["baseline_best"] = best_baseline.method if best_baseline else None
    if time_limit is not None and run.milp is not None and "time limit" in (run.message or "").lower():
        stats["wall_cut"] = True  # HiGHS stopped on its (wall-clock) time limit
        run = replace(run, message=_join(run.message, MILP_WALL_NOTE))

    # A baseline meeting every SLO outranks an "infeasible" from the MILP (the model-block MILP is a
    # restriction; from the exact slots MILP it would be a numerical failure): it is reported below.
    if problem.hard_deadlines and best_baseline is None and not kept and run.status in (SolveStatus.INFEASIBLE,
                                                                                        SolveStatus.NO_SOLUTION):
        return _infeasible(problem, run, chosen, solver, soft_objective, recommend_scale_up, time_limit, threads, seed, began,
                           [b.solution for b in baselines if b.solution is not None])
    if run.status == SolveStatus.ERROR or run.plan is None:
        message = run.message or "no solution within the time limit"
        if run.status == SolveStatus.INFEASIBLE:
            message = ("the model-block MILP (a restriction) finds no plan meeting every SLO" if chosen != "slots"
                       else "the MILP reports no plan meeting every SLO, although a baseline meets them all")
        fallback = None  # (plan, validation, objective, what it is)
        if best_baseline is not None:
            fallback = (best_baseline.solution, best_baseline.validation, best_baseline.objective,
                        f"the best baseline plan ({best_baseline.method})")
        if kept and (fallback is None or kept["report"].objective < fallback[2] - 1e-9):
            fallback = (kept["plan"], kept["report"], kept["report"].objective, f"the {kept['plan_from']} plan")
            stats["plan_from"] = kept["plan_from"]
            if kept.get("local_search_budget_stop"):
                stats["local_search_budget_stop"] = True
                message += "; the local search stopped on the time limit (its nominal budget)"
        if fallback is not None:
            plan, report, objective, what = fallback
            message += f"; {what} is reported instead"
            relaxed = fallback_lower_bound(problem)
            if relaxed is not None and problem.objective == "penalty":
                total_start = objective + float(problem.slo().sum())
                stats["gap_of_sum_start"] = max(objective - relaxed[0], 0.0) / max(abs(total_start), 1e-9)
            stats.update(_plan_stats(report))
            return Result(FAMILY, "milp", solver, SolveStatus.ERROR if run.status == SolveStatus.ERROR else SolveStatus.FEASIBLE,
                          objective, relaxed[0] if relaxed else None, time.perf_counter() - t0, plan,
                          run.build_seconds, message, report, relaxed[1] if relaxed else "", stats)
        status = SolveStatus.ERROR if run.status == SolveStatus.ERROR else SolveStatus.NO_SOLUTION
        return Result(FAMILY, "milp", solver, status, None, None, time.perf_counter() - t0, None,
                      run.build_seconds, message, None, "", stats)

    report = validate_assignment(problem, run.plan)
    objective, plan, message = report.objective, run.plan, run.message
    exact = chosen == "slots"
    status = run.status if exact else SolveStatus.FEASIBLE
    bound, bound_source = None, ""
    if exact and run.bound is not None:
        bound = objective if status == SolveStatus.OPTIMAL else run.bound
        bound_source = f"{solver} dual bound"
    if status != SolveStatus.OPTIMAL:
        relaxed = fallback_lower_bound(problem)
        if relaxed is not None and (bound is None or relaxed[0] > bound):
            bound, bound_source = relaxed
    if not exact:
        message = _join(message, "model-block formulation (blocks in one run per model, EDF inside): "
                                 "a feasible plan, not a proven optimum")
    if best_baseline is not None and (not report.feasible or best_baseline.objective < objective - 1e-9):
        message = _join(message, f"the {best_baseline.method} baseline is better ({best_baseline.objective:g} vs "
                                 f"{objective:g}) and is reported")
        plan, report, objective = best_baseline.solution, best_baseline.validation, best_baseline.objective
        status = SolveStatus.FEASIBLE
    if not report.feasible:
        message = _join(message, f"validator rejects the plan: {report.summary()}")
    if bound is not None and report.feasible and objective <= bound + 1e-9 * max(1.0, abs(objective)):
        status, bound = SolveStatus.OPTIMAL, objective  # the plan meets a valid lower bound
    if plan is run.plan:  # the MILP's plan: its optimality claim needs its objective to be the validator's
        mismatch = objective_mismatch(run.objective, objective, first_name="MILP objective",
                                      second_name="the validator's")
        if mismatch:
            status, note = reconcile_status(status, mismatch)
            message = _join(message, note)
            if bound_source == f"{solver} dual bound":  # a bound of the mispriced model proves nothing either
                relaxed = fallback_lower_bound(problem)
                bound, bound_source = relaxed if relaxed is not None else (None, "")
    if bound is not None and problem.objective == "penalty":
        # the penalty carries the constant −Σ slo; the gap relative to Σ start is the informative one
        total_start = objective + float(problem.slo().sum())
        stats["gap_of_sum_start"] = (objective - bound) / max(abs(total_start), 1e-9)
    stats.update(_plan_stats(report))
    return Result(FAMILY, "milp", solver, status, objective, bound, time.perf_counter() - t0, plan,
                  run.build_seconds, message, report, bound_source, stats)


#: Groups named one by one in the "cannot meet its SLO even first" note; the rest are counted.
HOPELESS_SHOWN = 5


@dataclass(frozen=True)
class HopelessGroup:
    """A group whose estimate exceeds its SLO even at the head of every existing instance."""

    index: int
    best_head_s: float  # its least estimate at the head of an existing instance
    new_instance_helps: bool  # it would meet its SLO first on a new (idle, empty) instance of some declared type


def _late(estimate: float, slo: float) -> bool:
    """The validator's deadline test (`planner.queueing.validator.TOLERANCE`, relative above 1 s)."""
    return estimate - slo > VALIDATOR_TOLERANCE * max(1.0, abs(slo))


def hopeless_groups(problem: QueueingProblem) -> list[HopelessGroup]:
    """Groups that cannot meet their SLO even served first on any existing instance: their estimate at
    the head of every queue (its busy time, a swap unless the group's model is loaded, plus work and
    tail in completion mode) exceeds their SLO slack.  No plan meets every SLO while one exists;
    ``new_instance_helps`` says whether a new instance (idle, no model loaded) of any declared type —
    with scale-up candidates or not — would let it."""
    out: list[HopelessGroup] = []
    usable = np.array([not q.optional for q in problem.queues], dtype=bool)
    if not usable.any():
        return out
    completion = problem.deadline == "completion"
    work, tail = problem.queue_work()[usable], problem.queue_tail()[usable]
    busy, swap = problem.queue_busy()[usable], problem.queue_swap()[usable]
    models = problem.models
    loaded = np.array([-1 if q.loaded_model is None else models.index(q.loaded_model)
                       for q, use in zip(problem.queues, usable) if use])
    for i, group in enumerate(problem.groups):
        fits = np.isfinite(work[:, i])
        if not fits.any():
            continue
        own = work[:, i] + tail[:, i] if completion else 0.0
        switch = loaded != models.index(group.model)
        best_head = float(np.min(np.where(fits, busy + np.where(switch, swap, 0.0) + own, np.inf)))
        if not _late(best_head, group.slo_s):
            continue
        helps = any(np.isfinite(problem.work_s[t, i]) and not _late(
            typ.swap_time_s + (problem.work_s[t, i] + problem.tail_s[t, i] if completion else 0.0), group.slo_s)
            for t, typ in enumerate(problem.types))
        out.append(HopelessGroup(i, best_head, helps))
    return out


def describe_hopeless(problem: QueueingProblem, hopeless: list[HopelessGroup], scale_up_note: bool = True) -> str:
    """One clause naming the groups of `hopeless_groups` (their SLO slack and best head estimate) and,
    with ``scale_up_note``, which of them adding instances cannot help; "" when there are none."""
    if not hopeless:
        return ""
    def one(h: HopelessGroup) -> str:
        g = problem.groups[h.index]
        slack = (f"{g.slo_s:.4g} s of SLO slack left" if g.slo_s >= 0 else
                 f"its SLO deadline passed {-g.slo_s:.4g} s ago")
        return (f"group {g.name!r} (SLO class {g.slo_class}, {slack}) cannot meet its SLO even first on any "
                f"instance (its estimate there is at least {h.best_head_s:.4g} s)")
    parts = [one(h) for h in hopeless[:HOPELESS_SHOWN]]
    if len(hopeless) > HOPELESS_SHOWN:
        parts.append(f"{len(hopeless) - HOPELESS_SHOWN} more groups likewise")
    cannot = [problem.groups[h.index].name for h in hopeless if not h.new_instance_helps] if scale_up_note else []
    if cannot and len(cannot) == len(hopeless):
        parts.append("adding instances cannot help " + ("it" if len(hopeless) == 1 else "them")
                     + " (not even first on a new instance)")
    elif cannot:
        shown = ", ".join(repr(n) for n in cannot[:HOPELESS_SHOWN]) + (
            f" and {len(cannot) - HOPELESS_SHOWN} more" if len(cannot) > HOPELESS_SHOWN else "")
        parts.append(f"adding instances cannot help {shown} (not even first on a new instance)")
    return "; ".join(parts)


def _infeasibility_head(proven_by_milp: bool, exact: bool, by_capacity: bool, by_head: bool = False) -> str:
    if (proven_by_milp and exact) or by_head:
        return "the SLOs cannot all be met"
    if by_capacity:
        return "the SLOs cannot all be met (capacity bound)"
    if proven_by_milp:
        return "the model-block MILP finds no plan meeting every SLO (the exact slots MILP might)"
    return "no plan meeting every SLO was found within the time limit (infeasibility not proven)"


def _infeasible(problem, run, chosen, solver, soft_objective, recommend_scale_up, time_limit, threads, seed, t0,
                baseline_plans):
    """Hard SLOs infeasible (or no plan within the time limit): the soft plan (warm-started from the
    best baseline on the soft objective) and the scale-up (`scale_up`).  ``time_limit`` is the budget of the
    whole `solve_queueing` call (started at ``t0``): the soft MILP gets `SOFT_SHARE` of what is left when a scale-up
    follows (all of it otherwise), the scale-up the rest.
    The SLOs count as provably unmeetable when the exact slots MILP says so, when the capacity
    bound of the scale-up shows that the current fleet cannot meet them, or when a group is late even
    first on every instance (`hopeless_groups`: the message names it, and when not even a new
    instance of any type would serve it in time, the scale-up search is skipped and says so)."""
    stats = dict(run.stats)
    exact = chosen == "slots"
    proven = run.status == SolveStatus.INFEASIBLE
    parts = []
    hopeless = hopeless_groups(problem)
    if hopeless:
        stats["hopeless_groups"] = [{"group": problem.groups[h.index].name, "slo_slack_s": problem.groups[h.index].slo_s,
                                     "best_head_estimate_s": h.best_head_s, "new_instance_helps": h.new_instance_helps}
                                    for h in hopeless]
        parts.append(describe_hopeless(problem, hopeless, scale_up_note=not recommend_scale_up))
    if run.stats.get("milp_skipped"):
        parts.append(run.stats["milp_skipped"])
    if proven and exact and problem.num_groups <= 12:
        parts.append(diagnose_infeasibility(run.milp.model, solver, time_limit_per_test=5.0).summary())
    soft = problem.with_objective(soft_objective)
    warm = min(baseline_plans, key=lambda plan: validate_assignment(soft, plan).objective, default=None)
    deadline = None if time_limit is None else t0 + time_limit
    left = _seconds_left(deadline)
    soft_run = solve_milp(soft, soft_objective, chosen, solver=solver, seed=seed, warm_plan=warm, threads=threads,
                          time_limit=left if left is None or not recommend_scale_up else SOFT_SHARE * left)
    if soft_run.plan is None and warm is not None:  # the solver stopped before reading any plan: keep the baseline
        soft_run = MilpRun(SolveStatus.FEASIBLE, warm, None, None, soft_run.seconds, soft_run.build_seconds,
                           soft_run.message, soft_run.milp, soft_run.stats)
    plan, report = None, None
    if soft_run.plan is not None:
        plan = soft_run.plan
        report = validate_assignment(soft, plan)
        stats["soft"] = {"objective": soft_objective, "value": report.objective, "status": soft_run.status.value,
                         "late_groups": report.details.get("late_groups"), "swaps": report.details.get("swaps")}
        parts.append(f"soft version ({soft_objective}) = {report.objective:g}")
    by_capacity = witness_cut = False
    unhelped = [problem.groups[h.index].name for h in hopeless if not h.new_instance_helps]
    if recommend_scale_up and unhelped:  # no fleet can meet every SLO: no need to search one
        names = ", ".join(repr(n) for n in unhelped[:HOPELESS_SHOWN]) + (
            f" and {len(unhelped) - HOPELESS_SHOWN} more" if len(unhelped) > HOPELESS_SHOWN else "")
        stats["scale_up"] = {"status": "infeasible", "extra_instances": {}, "formulation": "head-of-queue check",
                             "current_fleet_infeasible": True,
                             "message": f"adding instances cannot help: {'groups' if len(unhelped) > 1 else 'group'} "
                                        f"{names} cannot meet {'their SLOs' if len(unhelped) > 1 else 'its SLO'} even "
                                        f"first on a new instance of any type"}
        parts.append(f"scale-up: {stats['scale_up']['message']}")
    elif recommend_scale_up:
        # the witness budget is fixed by the call's time limit, not by the wall time the MILPs left over
        witness_seconds = None if time_limit is None else WITNESS_SHARE * (1.0 - SOFT_SHARE) * time_limit
        rec = scale_up(problem, chosen, solver=solver, time_limit=_seconds_left(deadline), threads=threads, seed=seed,
                       witness_seconds=witness_seconds)
        stats["scale_up"] = rec
        witness_cut = bool(rec.get("wall_cut"))
        if witness_cut:
            stats["wall_cut"] = True
        by_capacity = bool(rec.get("current_fleet_infeasible"))
        if rec["extra_instances"]:
            parts.append("scale-up: " + ", ".join(f"+{n} {t}" for t, n in rec["extra_instances"].items())
                         + (" (proven minimal)" if rec["status"] == "optimal" else " (suffices; minimality not proven)"))
        elif rec.get("valid"):
            found = _plan_on_current_fleet(problem, rec["plan"])
            if found is not None:  # the witness search met every SLO where the MILP did not: that is the answer
                found_report = validate_assignment(problem, found)
                message = "; ".join([_infeasibility_head(proven, exact, False),
                                     ("a baseline + local-search plan (the scale-up witness) meets every SLO on the "
                                      "current fleet and is reported (not proven optimal)")])
                return Result(FAMILY, "milp", solver, SolveStatus.FEASIBLE, found_report.objective, None,
                              time.perf_counter() - t0, found, run.build_seconds, message, found_report, "", stats)
            parts.append("scale-up: none needed — a plan meeting every SLO exists on the current fleet "
                         f"({rec['formulation']}; see stats.scale_up.plan)")
        else:
            parts.append(f"scale-up: {rec['message']}")
    if witness_cut:
        parts.append("the wall clock stopped the scale-up's witness search before its nominal budget (a slower or "
                     "busier machine than the calibration of planner.queueing.effort): this run may not repeat exactly")
    message = "; ".join([_infeasibility_head(proven, exact, by_capacity, bool(hopeless)), *parts])
    # The model-block MILP is a restriction: its infeasibility proves nothing about the problem; a
    # group late even at the head of every queue (`hopeless_groups`) proves it.
    status = SolveStatus.INFEASIBLE if (proven and exact) or by_capacity or hopeless else SolveStatus.NO_SOLUTION
    return Result(FAMILY, "milp", solver, status, None, None, time.perf_counter() - t0, plan,
                  run.build_seconds, message, report, "", stats)


def _plan_on_current_fleet(problem: QueueingProblem, plan: dict) -> QueueAssignment | None:
    """The scale-up's plan (``to_dict`` form, queues and groups by name) as a plan of ``problem`` when it
    uses no added instance and the validator accepts it with every SLO met; else None."""
    by_name = plan.get("queues", {})
    known = {q.name for q in problem.queues}
    if any(seq and name not in known for name, seq in by_name.items()):
        return None
    index = {g.name: i for i, g in enumerate(problem.groups)}
    found = QueueAssignment.of(problem, [[index[n] for n in by_name.get(q.name, ())] for q in problem.queues],
                               plan.get("method", "witness"))
    report = validate_assignment(problem, found)
    return found if report.feasible else None


def _join(a: str, b: str) -> str:
    return f"{a}; {b}" if a else b


def compare_queueing(problem: QueueingProblem, **kwargs) -> tuple[list[Result[QueueAssignment]], Result[QueueAssignment]]:
    """Every baseline and the MILP on the problem's objective."""
    precheck(problem)
    return [run_heuristic(problem, name) for name in HEURISTICS], solve_queueing(problem, **kwargs)
