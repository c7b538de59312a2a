"""Solving a queueing problem: baselines, the MILP, the soft version and the scale-up MILP.

`solve(problem, method, options)` is the family's entry (`planner.core.contract.FamilyHarness.run`).
`solve_queueing` runs the named phases of `PHASES` (`planner.core.phases`) over one state (`_Run`):
``check``, ``baselines``, ``certified``, ``milp``, then ``infeasible`` / ``fallback`` / ``validate``
for the MILP's outcome.  It runs the baselines first.  For the penalty objective (hard SLOs) the default
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
from dataclasses import dataclass, field, replace

import numpy as np

from planner.core.agreement import objective_mismatch, reconcile_status
from planner.core.contract import RunOptions
from planner.core.phases import Phase, run_phases
from planner.core.result import Result, ValidationReport
from planner.core.work import WorkClock
from planner.errors import InfeasibleError, PlannerError
from planner.queueing import effort
from planner.queueing.bounds import fallback_lower_bound
from planner.queueing.capacity import CapacityBound, capacity_lower_bound, describe_bound, is_at_bound, witness_fleet
from planner.queueing.certified import solve_certified
from planner.queueing.formulation import QueueMilp, build_model, warm_start_vector
from planner.queueing.heuristics import HEURISTICS
from planner.queueing.problem import HARD_OBJECTIVES, OBJECTIVES, QueueAssignment, QueueingProblem
from planner.queueing.validator import TOLERANCE as VALIDATOR_TOLERANCE
from planner.queueing.validator import validate_assignment
from planner.solver import SolveOptions, SolveStatus, check_solver_name, diagnose_infeasibility
from planner.solver import solve as solve_model

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
    return Result(family=FAMILY, method=method, solver="heuristic", status=status, objective=report.objective, bound=None, solve_seconds=seconds, solution=plan,
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
    milp: QueueMilp | None  # None: the model was not built (`milp_out_of_time`)
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
        return MilpRun(SolveStatus.NO_SOLUTION, None, None, None, 0.0, 0.0, skipped, None,
                       {"formulation": formulation, "milp_skipped": skipped})
    b0 = time.perf_counter()
    milp = build_model(problem, purpose, formulation)
    start = None
    if warm_plan is not None:
        start = warm_start_vector(problem, milp, [list(q) for q in warm_plan.queues])
    build_seconds = time.perf_counter() - b0
    limit = None if time_limit is None else max(time_limit - build_seconds, 0.01)  # the limit covers the build
    outcome = solve_model(milp.model, solver, SolveOptions(time_limit=limit, threads=threads, seed=seed, verbose=verbose,
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
    witness_plan = _witness_plan(problem, candidates, bound, _witness_clock(time_limit, witness_seconds, deadline), info)
    if witness_plan is not None and is_at_bound(witness_plan[0], bound):
        return _scale_up_answer(candidates, witness_plan[1], "optimal", "capacity bound + witness", info,
                                "proven minimal: the witness fleet costs the capacity bound")
    chosen = choose_formulation(candidates, formulation)
    run = solve_milp(candidates, "scale_up", chosen, solver=solver, time_limit=_seconds_left(deadline), threads=threads,
                     seed=seed)
    return _scale_up_choice(candidates, chosen, run, None if witness_plan is None else witness_plan[1], bound, info,
                            deadline)


def _witness_plan(problem: QueueingProblem, candidates: QueueingProblem, bound: CapacityBound | None,
                  clock: WorkClock | None, info: dict) -> tuple[float, QueueAssignment] | None:
    """The witness search (`planner.queueing.capacity.witness_fleet`) on ``clock``: its cost and its plan
    as a plan of ``candidates``; None when it finds no fleet."""
    witness = witness_fleet(problem, min_cost=0.0 if bound is None or bound.cost is None else bound.cost, clock=clock)
    if clock is not None and clock.wall_cut:
        info["wall_cut"] = True
    if witness is None:
        return None
    by_name = dict(zip(witness.plan.queue_names, witness.plan.queues))
    plan = QueueAssignment.of(candidates, [list(by_name.get(q.name, ())) for q in candidates.queues],
                              "witness (baseline + local search)")
    return witness.cost, plan


def _scale_up_choice(candidates: QueueingProblem, chosen: str, run: MilpRun, witness_plan: QueueAssignment | None,
                     bound: CapacityBound | None, info: dict, deadline: float | None) -> dict:
    """The cheaper valid plan of the scale-up MILP's and the witness's; optimal when the exact slots MILP
    proves it or its cost meets the capacity bound; the reason when neither has a plan."""
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
            "formulation": source, "plan": replace(plan, objective="scale_up").to_dict(),  # scored on its cost
            "message": message, **info}


def objective_offset(problem: QueueingProblem) -> float:
    """The constant part of the problem's objective: −Σ SLO for ``penalty`` (Σ_i (estimate_i − slo_i)),
    0 otherwise.  Results carry it (`Result.objective_offset`), so their ``gap`` is the gap on Σ
    estimate, the part a plan changes, and not a gap diluted by the constant."""
    return -float(problem.slo().sum()) if problem.objective == "penalty" else 0.0


@dataclass(frozen=True)
class QueueingKnobs:
    """What only queueing's MILP pipeline (`solve_queueing`) takes besides `RunOptions`.

    ``formulation``: one of `FORMULATIONS` (``auto``: the certified pipeline for the penalty objective,
    else the slots MILP up to `SLOTS_MAX_BINARIES` binaries, the model-block MILP above).
    ``soft_objective``: the objective of the soft version solved when the hard SLOs cannot be met.
    ``recommend_scale_up``: run the scale-up (`scale_up`) then.  ``verbose``: the solver's log.
    ``started``: the `time.perf_counter` time the caller's call began, when it read the instance first
    (the CLI): the time limit counts from it and the reading is charged its nominal cost
    (`effort.load_seconds`)."""

    formulation: str = "auto"
    soft_objective: str = "total_lateness"
    recommend_scale_up: bool = True
    verbose: bool = False
    started: float | None = None


@dataclass
class _Run:
    """The state `solve_queueing`'s phases share."""

    problem: QueueingProblem
    options: RunOptions
    knobs: QueueingKnobs
    t0: float
    baselines: list[Result[QueueAssignment]] = field(default_factory=list)
    best_baseline: Result[QueueAssignment] | None = None
    chosen: str = ""
    kept: dict = field(default_factory=dict)  # the certified pipeline's local-search plan when it found no bound
    run: MilpRun | None = None
    stats: dict = field(default_factory=dict)
    phase_seconds: dict[str, float] = field(default_factory=dict)

    @property
    def began(self) -> float:
        """When the time limit started counting."""
        return self.knobs.started if self.knobs.started is not None else self.t0

    @property
    def solver(self) -> str:
        return self.options.solver

    @property
    def milp(self) -> MilpRun:
        if self.run is None:
            raise RuntimeError("the queueing MILP has not run")
        return self.run


def _check(s: _Run) -> None:
    """Bad input raises one line: the solver name, a problem no method can plan, the soft objective."""
    check_solver_name(s.solver)
    precheck(s.problem)
    soft = s.knobs.soft_objective
    if soft not in OBJECTIVES or soft in HARD_OBJECTIVES:
        raise PlannerError(f"soft objective must be one of total_lateness, max_lateness, late_groups, got {soft!r}")


def _baselines(s: _Run) -> None:
    """Every baseline, validated; the best one meeting every SLO; the MILP formulation."""
    s.baselines = [run_heuristic(s.problem, name) for name in HEURISTICS]
    valid = [r for r in s.baselines if r.validation and r.validation.feasible]
    s.best_baseline = min(valid, key=_objective) if valid else None
    s.chosen = choose_formulation(s.problem, s.knobs.formulation)


def _objective(res: Result[QueueAssignment]) -> float:
    """A validated baseline's objective."""
    if res.objective is None:
        raise ValueError(f"{res.method} has no objective")
    return res.objective


def _certified_applies(s: _Run) -> bool:
    return s.knobs.formulation in ("auto", "certified") and s.problem.objective == "penalty"


def _certified(s: _Run) -> Result[QueueAssignment] | None:
    """The certified pipeline (`planner.queueing.certified`) from the baselines, feasible ones first."""
    problem = s.problem

    def order(r: Result[QueueAssignment]) -> tuple[bool, float]:
        feasible = bool(r.validation and r.validation.feasible)
        if feasible:
            return False, _objective(r)
        assert r.solution is not None
        return True, validate_assignment(problem, r.solution, "total_lateness").objective

    starts = [r.solution for r in sorted(s.baselines, key=order) if r.solution is not None]
    clock = WorkClock(s.options.time_limit, s.began)
    if s.knobs.started is not None:
        clock.charge(effort.load_seconds(problem.num_groups))
    clock.charge(effort.COMPILED_LOAD + effort.baseline_seconds(problem.num_queues, problem.num_groups))
    certified = solve_certified(problem, starts, solver=s.solver, time_limit=s.options.time_limit,
                                threads=s.options.threads, seed=s.options.seed, verbose=s.knobs.verbose,
                                started=s.began, clock=clock, keep=s.kept)
    if certified is not None:
        certified.stats["baseline_best"] = s.best_baseline.method if s.best_baseline else None
    return certified


def _milp(s: _Run) -> None:
    """The full MILP within the time left, warm-started from the best baseline meeting the hard SLOs
    (soft objectives: the best baseline at all)."""
    time_limit = s.options.time_limit
    remaining = None if time_limit is None else max(time_limit - (time.perf_counter() - s.began), 0.01)
    warm = s.best_baseline
    if warm is None and not s.problem.hard_deadlines:
        warm = min(s.baselines, key=_objective)
    run = solve_milp(s.problem, s.problem.objective, s.chosen, solver=s.solver, time_limit=remaining,
                     threads=s.options.threads, seed=s.options.seed, verbose=s.knobs.verbose,
                     warm_plan=warm.solution if warm is not None else None)
    s.stats = dict(run.stats)
    s.stats["baseline_best"] = s.best_baseline.method if s.best_baseline else None
    if time_limit is not None and run.milp is not None and "time limit" in (run.message or "").lower():
        s.stats["wall_cut"] = True  # HiGHS stopped on its (wall-clock) time limit
        run = replace(run, message=_join(run.message, MILP_WALL_NOTE))
    s.run = run


def _no_slo_plan(s: _Run) -> bool:
    """Hard SLOs and no plan meeting them: no baseline, no local-search plan, the MILP infeasible or empty.
    (A baseline meeting every SLO outranks an "infeasible" from the MILP — the model-block MILP is a
    restriction; from the exact slots MILP it would be a numerical failure: `_fallback` reports it.)"""
    return (s.problem.hard_deadlines and s.best_baseline is None and not s.kept
            and s.milp.status in (SolveStatus.INFEASIBLE, SolveStatus.NO_SOLUTION))


def _no_milp_plan(s: _Run) -> bool:
    return s.milp.status == SolveStatus.ERROR or s.milp.plan is None


def _fallback(s: _Run) -> Result[QueueAssignment]:
    """The MILP gave no plan (error, time limit, a restriction's "infeasible"): the best plan known —
    the best baseline or the certified pipeline's local-search plan — with the relaxation bound."""
    run, problem, stats = s.milp, s.problem, s.stats
    message = run.message or "no solution within the time limit"
    if run.status == SolveStatus.INFEASIBLE:
        message = ("the model-block MILP (a restriction) finds no plan meeting every SLO" if s.chosen != "slots"
                   else "the MILP reports no plan meeting every SLO, although a baseline meets them all")
    fallback = None  # (plan, validation, objective, what it is)
    best = s.best_baseline
    if best is not None and best.validation is not None:
        fallback = (best.solution, best.validation, _objective(best), f"the best baseline plan ({best.method})")
    kept = s.kept
    if kept and (fallback is None or kept["report"].objective < fallback[2] - 1e-9):
        fallback = (kept["plan"], kept["report"], kept["report"].objective, f"the {kept['plan_from']} plan")
        stats["plan_from"] = kept["plan_from"]
        if kept.get("local_search_budget_stop"):
            stats["local_search_budget_stop"] = True
            message += "; the local search stopped on the time limit (its nominal budget)"
    seconds = time.perf_counter() - s.t0
    if fallback is None:
        status = SolveStatus.ERROR if run.status == SolveStatus.ERROR else SolveStatus.NO_SOLUTION
        return Result(family=FAMILY, method="milp", solver=s.solver, status=status, objective=None, bound=None, solve_seconds=seconds, solution=None,
                      build_seconds=run.build_seconds, message=message, validation=None, bound_source="", stats=stats)
    plan, report, objective, what = fallback
    message += f"; {what} is reported instead"
    relaxed = fallback_lower_bound(problem)
    if relaxed is not None and problem.objective == "penalty":
        total_start = objective + float(problem.slo().sum())
        stats["gap_of_sum_start"] = max(objective - relaxed[0], 0.0) / max(abs(total_start), 1e-9)
    stats.update(_plan_stats(report))
    return Result(family=FAMILY, method="milp", solver=s.solver, status=SolveStatus.ERROR if run.status == SolveStatus.ERROR else SolveStatus.FEASIBLE,
                  objective=objective, bound=relaxed[0] if relaxed else None, solve_seconds=time.perf_counter() - s.t0, solution=plan,
                  build_seconds=run.build_seconds, message=message, validation=report, bound_source=relaxed[1] if relaxed else "", stats=stats)


def _milp_bound(s: _Run, objective: float, status: SolveStatus) -> tuple[float | None, str]:
    """The bound beside the MILP's plan: the exact MILP's dual bound, or the relaxation of `bounds.py`
    when that is higher (or the formulation is a restriction)."""
    run = s.milp
    exact = s.chosen == "slots"
    bound, bound_source = None, ""
    if exact and run.bound is not None:
        bound = objective if status == SolveStatus.OPTIMAL else run.bound
        bound_source = f"{s.solver} dual bound"
    if status != SolveStatus.OPTIMAL:
        relaxed = fallback_lower_bound(s.problem)
        if relaxed is not None and (bound is None or relaxed[0] > bound):
            bound, bound_source = relaxed
    return bound, bound_source


def _validated(s: _Run) -> Result[QueueAssignment]:
    """The MILP's plan, validated; a better baseline replaces it; optimal when it meets a valid bound; a MILP
    objective that is not the validator's proves nothing (neither its status nor its dual bound)."""
    run, problem, stats = s.milp, s.problem, s.stats
    assert run.plan is not None  # `_no_milp_plan` returned otherwise
    report = validate_assignment(problem, run.plan)
    objective, plan, message = report.objective, run.plan, run.message
    exact = s.chosen == "slots"
    status = run.status if exact else SolveStatus.FEASIBLE
    bound, bound_source = _milp_bound(s, objective, status)
    if not exact:
        message = _join(message, "model-block formulation (blocks in one run per model, EDF inside): "
                                 "a feasible plan, not a proven optimum")
    best = s.best_baseline
    if best is not None and best.validation is not None and (not report.feasible or _objective(best) < objective - 1e-9):
        message = _join(message, f"the {best.method} baseline is better ({_objective(best):g} vs "
                                 f"{objective:g}) and is reported")
        plan, report, objective = best.solution, best.validation, _objective(best)
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
            if bound_source == f"{s.solver} dual bound":  # a bound of the mispriced model proves nothing either
                relaxed = fallback_lower_bound(problem)
                bound, bound_source = relaxed if relaxed is not None else (None, "")
    if bound is not None and problem.objective == "penalty":
        # the penalty carries the constant −Σ slo; the gap relative to Σ start is the informative one
        total_start = objective + float(problem.slo().sum())
        stats["gap_of_sum_start"] = (objective - bound) / max(abs(total_start), 1e-9)
    stats.update(_plan_stats(report))
    return Result(family=FAMILY, method="milp", solver=s.solver, status=status, objective=objective, bound=bound, solve_seconds=time.perf_counter() - s.t0, solution=plan,
                  build_seconds=run.build_seconds, message=message, validation=report, bound_source=bound_source, stats=stats)


#: The pipeline of `solve_queueing`, in order (`planner.core.phases`); ``stats["phases"]`` holds their wall seconds.
PHASES: tuple[Phase[_Run, Result[QueueAssignment]], ...] = (
    Phase("check", _check),
    Phase("baselines", _baselines),
    Phase("certified", _certified, when=_certified_applies),
    Phase("milp", _milp),
    Phase("infeasible", lambda s: _infeasible(s), when=_no_slo_plan),
    Phase("fallback", _fallback, when=_no_milp_plan),
    Phase("validate", _validated),
)


def solve_queueing(problem: QueueingProblem, options: RunOptions = RunOptions(),
                   knobs: QueueingKnobs = QueueingKnobs()) -> Result[QueueAssignment]:
    """The MILP on the problem's objective, with the soft version and scale-up when SLOs cannot be met:
    the phases of `PHASES` (``stats["phases"]``: wall seconds per phase run).

    The result's ``gap`` excludes the objective's constant (`objective_offset`)."""
    state = _Run(problem=problem, options=options, knobs=knobs, t0=time.perf_counter())
    result = run_phases(PHASES, state)
    phases = {name: round(seconds, 6) for name, seconds in state.phase_seconds.items()}
    return replace(result, objective_offset=objective_offset(problem), stats={**result.stats, "phases": phases})


def solve(problem: QueueingProblem, method: str, options: RunOptions = RunOptions()) -> Result[QueueAssignment]:
    """One method on ``problem``: ``milp`` (`solve_queueing`, formulation ``auto``) or a baseline (`run_heuristic`)."""
    if method == "milp":
        return solve_queueing(problem, options)
    return run_heuristic(problem, method)


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


def _infeasible(s: _Run) -> Result[QueueAssignment]:
    """Hard SLOs infeasible (or no plan within the time limit): the soft plan (warm-started from the
    best baseline on the soft objective) and the scale-up (`scale_up`).  The time limit is the budget of the
    whole `solve_queueing` call: the soft MILP gets `SOFT_SHARE` of what is left when a scale-up
    follows (all of it otherwise), the scale-up the rest.
    The SLOs count as provably unmeetable when the exact slots MILP says so, when the capacity
    bound of the scale-up shows that the current fleet cannot meet them, or when a group is late even
    first on every instance (`hopeless_groups`: the message names it, and when not even a new
    instance of any type would serve it in time, the scale-up search is skipped and says so)."""
    run, problem = s.milp, s.problem
    out = _Infeasibility(stats=dict(run.stats), proven=run.status == SolveStatus.INFEASIBLE, exact=s.chosen == "slots")
    out.hopeless = hopeless_groups(problem)
    _hopeless_notes(s, out)
    plan, report = _soft_plan(s, out)
    if s.knobs.recommend_scale_up:
        found = _scale_up_notes(s, out)
        if found is not None:
            return found
    if out.witness_cut:
        out.parts.append("the wall clock stopped the scale-up's witness search before its nominal budget (a slower or "
                         "busier machine than the calibration of planner.queueing.effort): this run may not repeat exactly")
    message = "; ".join([_infeasibility_head(out.proven, out.exact, out.by_capacity, bool(out.hopeless)), *out.parts])
    # The model-block MILP is a restriction: its infeasibility proves nothing about the problem; a
    # group late even at the head of every queue (`hopeless_groups`) proves it.
    status = (SolveStatus.INFEASIBLE if (out.proven and out.exact) or out.by_capacity or out.hopeless
              else SolveStatus.NO_SOLUTION)
    return Result(family=FAMILY, method="milp", solver=s.solver, status=status, objective=None, bound=None, solve_seconds=time.perf_counter() - s.began, solution=plan,
                  build_seconds=run.build_seconds, message=message, validation=report, bound_source="", stats=out.stats)


@dataclass
class _Infeasibility:
    """What `_infeasible` gathers: the stats, the message clauses, and what proves the SLOs unmeetable."""

    stats: dict
    proven: bool  # the MILP says infeasible
    exact: bool  # ... and it is the exact slots MILP
    parts: list[str] = field(default_factory=list)
    hopeless: list[HopelessGroup] = field(default_factory=list)
    by_capacity: bool = False
    witness_cut: bool = False


def _hopeless_notes(s: _Run, out: _Infeasibility) -> None:
    """The hopeless groups, a skipped MILP's reason, and the conflicting rows of a small exact MILP."""
    run, problem = s.milp, s.problem
    if out.hopeless:
        out.stats["hopeless_groups"] = [
            {"group": problem.groups[h.index].name, "slo_slack_s": problem.groups[h.index].slo_s,
             "best_head_estimate_s": h.best_head_s, "new_instance_helps": h.new_instance_helps} for h in out.hopeless]
        out.parts.append(describe_hopeless(problem, out.hopeless, scale_up_note=not s.knobs.recommend_scale_up))
    if run.stats.get("milp_skipped"):
        out.parts.append(run.stats["milp_skipped"])
    if out.proven and out.exact and problem.num_groups <= 12 and run.milp is not None:
        out.parts.append(diagnose_infeasibility(run.milp.model, s.solver, time_limit_per_test=5.0).summary())


def _deadline(s: _Run) -> float | None:
    """The `time.perf_counter` time the call's time limit ends (counted from ``knobs.started``)."""
    return None if s.options.time_limit is None else s.began + s.options.time_limit


def _soft_plan(s: _Run, out: _Infeasibility) -> tuple[QueueAssignment | None, ValidationReport | None]:
    """The soft version's MILP (warm-started from the best baseline on the soft objective), scored on it."""
    soft_objective = s.knobs.soft_objective
    soft = s.problem.with_objective(soft_objective)
    plans = [b.solution for b in s.baselines if b.solution is not None]
    warm = min(plans, key=lambda plan: validate_assignment(soft, plan).objective, default=None)
    left = _seconds_left(_deadline(s))
    soft_run = solve_milp(soft, soft_objective, s.chosen, solver=s.solver, seed=s.options.seed, warm_plan=warm,
                          threads=s.options.threads,
                          time_limit=left if left is None or not s.knobs.recommend_scale_up else SOFT_SHARE * left)
    if soft_run.plan is None and warm is not None:  # the solver stopped before reading any plan: keep the baseline
        soft_run = MilpRun(SolveStatus.FEASIBLE, warm, None, None, soft_run.seconds, soft_run.build_seconds,
                           soft_run.message, soft_run.milp, soft_run.stats)
    if soft_run.plan is None:
        return None, None
    plan = replace(soft_run.plan, objective=soft.objective, deadline=soft.deadline)  # scored on the soft one
    report = validate_assignment(soft, plan)
    out.stats["soft"] = {"objective": soft_objective, "value": report.objective, "status": soft_run.status.value,
                         "late_groups": report.details.get("late_groups"), "swaps": report.details.get("swaps")}
    out.parts.append(f"soft version ({soft_objective}) = {report.objective:g}")
    return plan, report


def _scale_up_notes(s: _Run, out: _Infeasibility) -> Result[QueueAssignment] | None:
    """The scale-up's answer, as stats and a message clause; the result itself when its witness meets
    every SLO on the current fleet (the MILP did not: that plan is the answer)."""
    problem = s.problem
    unhelped = [problem.groups[h.index].name for h in out.hopeless if not h.new_instance_helps]
    if unhelped:  # no fleet can meet every SLO: no need to search one
        names = ", ".join(repr(n) for n in unhelped[:HOPELESS_SHOWN]) + (
            f" and {len(unhelped) - HOPELESS_SHOWN} more" if len(unhelped) > HOPELESS_SHOWN else "")
        several = len(unhelped) > 1
        out.stats["scale_up"] = {"status": "infeasible", "extra_instances": {}, "formulation": "head-of-queue check",
                                 "current_fleet_infeasible": True,
                                 "message": f"adding instances cannot help: {'groups' if several else 'group'} "
                                            f"{names} cannot meet {'their SLOs' if several else 'its SLO'} even "
                                            f"first on a new instance of any type"}
        out.parts.append(f"scale-up: {out.stats['scale_up']['message']}")
        return None
    time_limit = s.options.time_limit
    # the witness budget is fixed by the call's time limit, not by the wall time the MILPs left over
    witness_seconds = None if time_limit is None else WITNESS_SHARE * (1.0 - SOFT_SHARE) * time_limit
    rec = scale_up(problem, s.chosen, solver=s.solver, time_limit=_seconds_left(_deadline(s)), threads=s.options.threads,
                   seed=s.options.seed, witness_seconds=witness_seconds)
    out.stats["scale_up"] = rec
    out.witness_cut = bool(rec.get("wall_cut"))
    if out.witness_cut:
        out.stats["wall_cut"] = True
    out.by_capacity = bool(rec.get("current_fleet_infeasible"))
    if rec["extra_instances"]:
        out.parts.append("scale-up: " + ", ".join(f"+{n} {t}" for t, n in rec["extra_instances"].items())
                         + (" (proven minimal)" if rec["status"] == "optimal" else " (suffices; minimality not proven)"))
        return None
    if not rec.get("valid"):
        out.parts.append(f"scale-up: {rec['message']}")
        return None
    found = _plan_on_current_fleet(problem, rec["plan"])
    if found is None:
        out.parts.append("scale-up: none needed — a plan meeting every SLO exists on the current fleet "
                         f"({rec['formulation']}; see stats.scale_up.plan)")
        return None
    found_report = validate_assignment(problem, found)
    message = "; ".join([_infeasibility_head(out.proven, out.exact, False),
                         ("a baseline + local-search plan (the scale-up witness) meets every SLO on the "
                          "current fleet and is reported (not proven optimal)")])
    return Result(family=FAMILY, method="milp", solver=s.solver, status=SolveStatus.FEASIBLE, objective=found_report.objective, bound=None,
                  solve_seconds=time.perf_counter() - s.began, solution=found, build_seconds=s.milp.build_seconds, message=message,
                  validation=found_report, bound_source="", stats=out.stats)


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
