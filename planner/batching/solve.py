"""Pipelines returning `Result`: a preset scheduler (`run_scheduler`), the MIP (`solve_batching`)."""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np

from planner.batching.bounds import latency_lower_bound, prefill_cut_bound, ttft_lower_bound
from planner.batching.flow_formulation import applicable as paths_applicable
from planner.batching.flow_formulation import (
    build_flow_model,
    extract_flow_schedule,
    flow_warm_start,
    normalize_schedule,
)
from planner.batching.formulation import (
    batch_count_bound,
    build_model,
    compress_schedule,
    extract_schedule,
    time_unit,
    warm_start_vector,
)
from planner.batching.orderings import best_ordered_schedule
from planner.batching.problem import BatchingProblem
from planner.batching.rollouts import best_rollout_schedule, searches_for
from planner.batching.schedule import Schedule
from planner.batching.scheduler import PRESETS, SchedulerConfig, simulate, summary_metrics
from planner.batching.staggered import best_staggered, single_prefill_batch_impossible
from planner.batching.validator import validate_schedule
from planner.core.result import Result
from planner.errors import InfeasibleError, PlannerError
from planner.solver import SolveOptions, SolveStatus, check_solver_name, diagnose_infeasibility, solve

FAMILY = "batching"
OBJECTIVES = ("latency", "ttft")
FORMULATIONS = ("auto", "paths", "bigm")


def _objective_of(schedule: Schedule, objective: str) -> float:
    return float(schedule.metrics["total_latency" if objective == "latency" else "mean_ttft"])


def lower_bound(problem: BatchingProblem, objective: str = "latency") -> float:
    return latency_lower_bound(problem) if objective == "latency" else ttft_lower_bound(problem)


def run_scheduler(problem: BatchingProblem, scheduler: str | SchedulerConfig, objective: str = "latency",
                  bounds: dict | None = None, **overrides) -> Result:
    """Simulate one policy; the objective is the validator's recomputation.  ``bounds``: a cache of
    the combinatorial lower bound per (limits, objective), shared by presets with the same limits."""
    problem.check_feasible()
    sim = simulate(problem, scheduler, **overrides)
    name = sim.config.name
    C, P, M, R = (sim.schedule.metrics[k] for k in ("C", "P", "M", "R_max"))
    checked = problem.with_limits(C=C, P=P, M=M, R_max=R) if (C, P, M, R) != (
        problem.C, problem.prefill_limit, problem.M, problem.running_limit) else problem
    report = validate_schedule(checked, sim.schedule, objective)
    key = (C, P, M, R, objective)
    if bounds is None or key not in bounds:
        bound = lower_bound(checked, objective)
        if bounds is not None:
            bounds[key] = bound
    bound = bounds[key] if bounds is not None else bound
    return Result(FAMILY, name, "simulator", SolveStatus.FEASIBLE if report.feasible else SolveStatus.ERROR,
                  report.objective, bound, sim.seconds, sim.schedule, validation=report,
                  bound_source="combinatorial lower bound",
                  message="" if report.feasible else "schedule failed validation: " + report.summary(),
                  stats={"batches": sim.schedule.num_batches})


def _finish_metrics(problem: BatchingProblem, schedule: Schedule, report) -> Schedule:
    """Per-request metrics of a schedule from the validator's replay times."""
    secs = np.asarray(report.details["batch_seconds"], float)
    reqs = problem.requests
    n = len(reqs)
    first = np.full(n, np.nan)
    finish = np.full(n, np.nan)
    evictions = np.zeros(n, np.int64)
    clock = 0.0
    produced = np.zeros(n, np.int64)
    kv = np.zeros(n, np.int64)
    Iin = problem.inputs.copy()
    kv_used = np.zeros(schedule.num_batches, np.int64)
    batches, evicted = schedule.batches(), schedule.evictions()
    for j in range(schedule.num_batches):
        for i in evicted[j]:
            if kv[i] >= Iin[i]:
                Iin[i] = kv[i] + 1
            if kv[i] > 0:
                evictions[i] += 1
            kv[i] = 0
        if batches[j]:
            clock = max([clock] + [reqs[i].arrival for i in batches[j]]) + secs[j]
        for i, c in batches[j].items():
            kv[i] += c
            if kv[i] >= Iin[i]:
                produced[i] += 1
                if np.isnan(first[i]):
                    first[i] = clock
                if produced[i] == reqs[i].output_len:
                    finish[i] = clock
        kv_used[j] = kv.sum()
        kv[produced >= problem.outputs] = 0
    arrivals = problem.arrivals
    O = problem.outputs
    per_request = {"ttft": first - arrivals, "tpot": np.where(O > 1, (finish - first) / np.maximum(O - 1, 1), np.nan),
                   "e2e": finish - arrivals, "finish": finish, "evictions": evictions}
    metrics = summary_metrics(problem, per_request, clock, secs, kv_used, int(evictions.sum()))
    return schedule.with_results(metrics, per_request, secs, kv_used)


def heuristic_results(problem: BatchingProblem, objective: str = "latency",
                      deadline: float | None = None, skipped: list | None = None) -> dict[str, Result]:
    """Every preset that can finish the instance (stuck presets are left out).  ``deadline`` (a
    `time.perf_counter` value): once it has passed and some preset has finished, the remaining presets
    are skipped (on instances of millions of tokens one preset takes seconds)."""
    out: dict[str, Result] = {}
    bounds: dict = {}
    for name in PRESETS:
        if deadline is not None and out and time.perf_counter() > deadline:
            if skipped is not None:
                skipped.append(name)
            continue
        try:
            out[name] = run_scheduler(problem, name, objective, bounds=bounds)
        except InfeasibleError:
            continue
    return out


def search_heuristic_results(problem: BatchingProblem, seed: int = 0,
                             time_limit: float | None = None) -> dict[str, Result]:
    """The searched heuristics that also feed the MIP's warm start — the best request order of the
    presets (`orderings`) and the best preemptive-priority rollout (`rollouts`, seeded by ``seed``,
    `rollouts.searches_for` ``time_limit`` independent searches) — as validated results (offline
    instances, latency objective; empty otherwise)."""
    if problem.online:
        return {}
    out = {}
    started = time.perf_counter()
    ordered = best_ordered_schedule(problem)
    found = [] if ordered is None else [("order search", ordered[1], time.perf_counter() - started, ordered[0])]
    started = time.perf_counter()
    searches = searches_for(time_limit)
    rolled = best_rollout_schedule(problem, seed=seed, searches=searches)
    if rolled is not None:
        detail = f"seed {seed}" + (f", {searches} searches" if searches > 1 else "")
        found.append(("preemptive rollouts", rolled[0], time.perf_counter() - started, detail))
    for name, schedule, seconds, detail in found:
        report = validate_schedule(problem, schedule)
        status = SolveStatus.FEASIBLE if report.feasible else SolveStatus.ERROR
        schedule = _finish_metrics(problem, schedule, report) if report.feasible else schedule
        out[name] = Result(FAMILY, name, "heuristic search", status, report.objective, lower_bound(problem), seconds,
                           schedule, validation=report, stats={"batches": schedule.num_batches, "found": detail})
    return out


#: Time limit of the single-prefill-batch test (`staggered.single_prefill_batch_impossible`), seconds.
SINGLE_PREFILL_TEST_SECONDS = 20.0
#: The MIP gets at least this many seconds even when the heuristics used up the time limit.
MIN_MIP_SECONDS = 1.0
#: Largest request × batch grid the MIP is built for (B = 32, J = 68 is 2,176 cells and ~207k rows).
MAX_MIP_CELLS = 6_000


def _mip_too_large(problem: BatchingProblem, objective: str, solver: str,
                   candidates: dict[str, tuple[Schedule, float]], batches: int, max_cells: int,
                   seconds: float) -> Result:
    """Best candidate schedule (presets, lazy staggered, order search) + combinatorial bound when the
    MIP grid is too large to build; the schedule is re-checked by the validator."""
    method = "mip" if objective == "latency" else "mip-ttft"
    comb = lower_bound(problem, objective)
    message = (f"MIP not built: {problem.n} requests × J={batches} batches = {problem.n * batches} cells "
               f"> {max_cells}; reporting the best heuristic schedule and the combinatorial lower bound")
    if not candidates:
        return Result(FAMILY, method, solver, SolveStatus.NO_SOLUTION, None, comb, seconds, None,
                      message=message, bound_source="combinatorial lower bound", stats={"J": batches})
    name, (schedule, _) = min(candidates.items(), key=lambda kv: kv[1][1])
    report = validate_schedule(problem, schedule, objective)
    if not report.feasible:
        return Result(FAMILY, method, solver, SolveStatus.ERROR, None, comb, seconds, None,
                      message=f"{message}; the {name} schedule failed validation: {report.summary()}",
                      bound_source="combinatorial lower bound", stats={"J": batches})
    schedule = _finish_metrics(problem, schedule, report)
    status = SolveStatus.OPTIMAL if report.objective <= comb * (1 + 1e-9) else SolveStatus.FEASIBLE
    return Result(FAMILY, method, solver, status, report.objective, comb, seconds, schedule,
                  message=f"{message} ({name})", validation=report,
                  bound_source="combinatorial lower bound", stats={"J": batches, "best_heuristic": name,
                                                                   "warm_start": name, "combinatorial_bound": comb})


def solve_batching(
    problem: BatchingProblem,
    *,
    objective: str = "latency",
    solver: str = "highs",
    time_limit: float | None = 60.0,
    threads: int | None = None,
    seed: int = 0,
    batches: int | None = None,
    goal_scheduler: str | None = None,
    goal_factor: float = 0.9,
    warm_start: bool = True,
    cuts: bool | tuple[str, ...] = True,
    max_cells: int = MAX_MIP_CELLS,
    formulation: str = "auto",
    lazy_heuristic: bool = True,
    order_search: bool = True,
    rollout_search: bool = True,
    stop_at_bound: bool = True,
    searched: dict[str, Result] | None = None,
) -> Result:
    """The §3.3 MIP: J from the heuristics (or ``batches``), warm start from the best heuristic,
    optional goal constraint ``latency ≤ goal_factor × latency(goal_scheduler)``; ``cuts`` picks the
    valid inequalities (`formulation.build_model`).  Instances with more than ``max_cells``
    request × batch cells (about 100 rows each) are not built: the best heuristic schedule (presets,
    order search, lazy staggered) and the combinatorial lower bound are returned instead, with a
    message saying so.

    ``formulation``: ``paths`` = the per-request path model (`flow_formulation`, offline latency only,
    when its dominance conditions hold), ``bigm`` = the §3.3 model of `formulation`, ``auto`` = paths
    where applicable, else bigm.  ``lazy_heuristic`` adds the lazy staggered schedule of `staggered`
    to the warm-start candidates (offline latency), ``order_search`` the best request order of the
    presets (`orderings.best_ordered_schedule`, offline latency; it runs first, and its latency caps
    the lazy search's batch count), ``rollout_search`` the best randomised preemptive-priority rollout
    (`rollouts.best_rollout_schedule`, offline latency, a fixed count of rollouts seeded by ``seed``;
    one independent search per started minute of ``time_limit``, at most 8: `rollouts.searches_for`);
    ``searched`` = those two already run (`search_heuristic_results`), taken as candidates instead.
    ``stop_at_bound``: when a candidate already meets the combinatorial lower bound it is optimal and the MIP is not run (``stats["proof"]``
    says which bound proved optimality).  ``time_limit`` bounds the whole call: the lazy search and
    the single-prefill test get what is left of it, and the MIP the rest (at least
    `MIN_MIP_SECONDS`).  When the single-prefill-batch test proves that no schedule of ≤ J batches has
    one prefill batch, the reported bound also uses `bounds.prefill_cut_bound` (``stats["prefill_cut_bound"]``)."""
    if objective not in OBJECTIVES:
        raise PlannerError(f"unknown objective {objective!r} (expected latency or ttft)")
    if formulation not in FORMULATIONS:
        raise PlannerError(f"unknown formulation {formulation!r} (expected {', '.join(FORMULATIONS)})")
    solver = check_solver_name(solver)
    problem.check_feasible()
    t0 = time.perf_counter()
    deadline = None if time_limit is None else t0 + time_limit

    def seconds_left(cap: float) -> float:
        return cap if deadline is None else max(min(cap, deadline - time.perf_counter()), 0.0)

    skipped_presets: list[str] = []
    heur = heuristic_results(problem, objective, deadline, skipped_presets)

    def noted(message: str) -> str:
        """``message`` plus the presets the time limit left out, if any."""
        if not skipped_presets:
            return message
        extra = f"time limit reached during the presets: {', '.join(skipped_presets)} not run"
        return f"{message}; {extra}" if message else extra

    def time_left() -> bool:
        return deadline is None or time.perf_counter() < deadline

    valid = {k: r for k, r in heur.items() if r.validation and r.validation.feasible}
    use_paths, why_not = paths_applicable(problem, objective)
    if formulation == "paths" and not use_paths:
        raise PlannerError(f"the paths formulation does not apply to this instance: {why_not}")
    use_paths = use_paths and formulation != "bigm"
    candidates = {name: (r.solution, float(r.objective)) for name, r in valid.items()}
    comb = lower_bound(problem, objective)

    def bound_met() -> bool:
        return bool(candidates) and min(value for _, value in candidates.values()) <= comb * (1 + 1e-9)

    offline_latency = objective == "latency" and not problem.online and goal_scheduler is None
    if searched is not None and offline_latency:  # already run by the caller (compare): not run twice
        candidates.update({name: (r.solution, float(r.objective)) for name, r in searched.items()
                           if r.validation is not None and r.validation.feasible})
        order_search = rollout_search = False
    if order_search and offline_latency and not bound_met() and time_left():
        ordered = best_ordered_schedule(problem)
        if ordered is not None:
            candidates[ordered[0]] = (ordered[1], ordered[2])
    if rollout_search and offline_latency and not bound_met() and time_left():
        rolled = best_rollout_schedule(problem, seed=seed, searches=searches_for(time_limit))
        if rolled is not None:
            candidates["preemptive rollouts"] = rolled
    if lazy_heuristic and offline_latency and not bound_met():
        # lazy plans with more batches than the incumbent allows cannot beat it
        cap = batch_count_bound(problem, min(value for _, value in candidates.values())) if candidates else None
        lazy = best_staggered(problem, threads=threads, max_batches=cap, deadline=deadline)
        if lazy is not None:
            candidates["lazy-staggered"] = lazy
    if stop_at_bound and candidates and goal_scheduler is None:
        name, (schedule, value) = min(candidates.items(), key=lambda kv: kv[1][1])
        if value <= comb * (1 + 1e-9):
            report = validate_schedule(problem, schedule, objective)
            schedule = _finish_metrics(problem, schedule, report)
            method = "mip" if objective == "latency" else "mip-ttft"
            seconds = time.perf_counter() - t0
            return Result(FAMILY, method, solver, SolveStatus.OPTIMAL, report.objective, comb, 0.0, schedule,
                          build_seconds=seconds, validation=report, bound_source="combinatorial lower bound",
                          message=f"the {name} schedule meets the combinatorial lower bound: optimal, MIP not needed",
                          stats={"J": None, "columns": None, "rows": None, "nodes": None, "warm_start": name,
                                 "combinatorial_bound": comb, "proof": "combinatorial lower bound",
                                 "formulation": "none", "mip_objective": None})
    if batches is None:
        if not candidates:
            raise PlannerError("no preset scheduler finishes this instance; give the batch count with --batches")
        best_latency = min(value for _, value in candidates.values()) if objective == "latency" else \
            min(float(r.solution.metrics["total_latency"]) for r in valid.values())
        # Any schedule at least as good as the best heuristic has busy time ≤ its latency, so at most
        # this many non-empty batches (online too: the total of the batch times ≤ the end of the last).
        batches = batch_count_bound(problem, best_latency)
        batches = max(batches, min(compress_schedule(sched).num_batches for sched, _ in candidates.values()))
    if problem.n * batches > max_cells:
        result = _mip_too_large(problem, objective, solver, candidates, batches, max_cells, time.perf_counter() - t0)
        return replace(result, message=noted(result.message))
    goal = None
    if goal_scheduler is not None:
        base = heur.get(goal_scheduler) or run_scheduler(problem, goal_scheduler, "latency")
        goal = goal_factor * float(base.solution.metrics["total_latency"])
    least_prefill = 1
    cut_bound = None  # global bound from the single-prefill-batch test (`bounds.prefill_cut_bound`)
    if use_paths and batches < int(problem.outputs.max()):  # no path fits: the big-M model reports it
        use_paths = False
    if use_paths:
        impossible = single_prefill_batch_impossible(problem, batches, threads=threads,
                                                     time_limit=seconds_left(SINGLE_PREFILL_TEST_SECONDS))
        least_prefill = 2 if impossible else 1
        incumbent = min((value for _, value in candidates.values()), default=None)
        if impossible and incumbent is not None and batches >= batch_count_bound(problem, incumbent):
            cut_bound = prefill_cut_bound(problem, incumbent, least_prefill)
        bm = build_flow_model(problem, batches, goal, least_prefill)
    else:
        bm = build_model(problem, batches, objective, goal, cuts=cuts)
    x0 = None
    best_name = None
    if warm_start and candidates:
        ranked = sorted(candidates.items(), key=lambda kv: kv[1][1])
        for name, (sched, _) in ranked:
            if goal is not None and validate_schedule(problem, sched).objective > goal + 1e-12:
                continue
            if use_paths:
                sched = normalize_schedule(problem, sched)
                x0 = None if sched is None else flow_warm_start(problem, bm, sched)
            else:
                x0 = warm_start_vector(problem, bm, sched)
            if x0 is not None and bm.model.max_violation(x0) <= 1e-6:
                best_name = name
                break
            x0 = None
    build_seconds = time.perf_counter() - t0
    mip_limit = None if deadline is None else max(deadline - time.perf_counter(), MIN_MIP_SECONDS)
    out = solve(bm.model, solver, SolveOptions(time_limit=mip_limit, threads=threads, seed=seed, warm_start=x0,
                                                  mip_rel_gap=1e-7, mip_abs_gap=1e-6))
    unit = time_unit(problem)
    mip_objective = out.objective / unit if out.objective is not None else None
    mip_bound = out.bound / unit if out.bound is not None and np.isfinite(out.bound) else None
    comb_or_cut = max(comb, cut_bound) if cut_bound is not None else comb
    bound = max(mip_bound, comb_or_cut) if mip_bound is not None else comb_or_cut
    stats = {"J": batches, "columns": bm.model.num_cols, "rows": bm.model.num_rows,
             "integer_columns": bm.model.num_integer, "warm_start": best_name, "nodes": out.node_count,
             "combinatorial_bound": comb, "formulation": "paths" if use_paths else "bigm",
             "least_prefill_batches": least_prefill, "prefill_cut_bound": cut_bound,
             "proof": "MIP" if out.status == SolveStatus.OPTIMAL else None}
    method = "mip" if objective == "latency" else "mip-ttft"
    if not out.status.has_solution:
        message = out.message
        if out.status == SolveStatus.INFEASIBLE:
            diag = diagnose_infeasibility(bm.model, solver, time_limit_per_test=5.0)
            message = f"no schedule within J={batches} batches ({diag.summary()})"
        return Result(FAMILY, method, solver, out.status, None, bound, out.seconds, None, build_seconds=build_seconds,
                      message=noted(message), bound_source="MIP bound", stats=stats)
    schedule = extract_flow_schedule(problem, bm, out.x) if use_paths else extract_schedule(problem, bm, out.x)
    report = validate_schedule(problem, schedule, objective)
    schedule = _finish_metrics(problem, schedule, report)
    status = out.status
    message = out.message
    if not report.feasible:
        status = SolveStatus.ERROR
        message = "MIP schedule failed validation: " + report.summary()
    elif abs(report.objective - mip_objective) > 1e-6 * abs(report.objective):
        message = (f"MIP objective {mip_objective:.9g} differs from the replayed cost {report.objective:.9g}")
    bound = min(bound, report.objective) if status == SolveStatus.OPTIMAL else bound
    return Result(FAMILY, method, solver, status, report.objective, bound, out.seconds, schedule,
                  build_seconds=build_seconds, message=noted(message), validation=report,
                  bound_source=("MIP bound" if mip_bound is not None and mip_bound >= comb_or_cut else
                                "combinatorial lower bound" if comb_or_cut <= comb else
                                "combinatorial lower bound with the single-prefill-batch cut"),
                  stats={**stats, "mip_objective": mip_objective})
