"""Pipelines returning `Result`: a preset scheduler (`run_scheduler`), the MIP (`solve_batching`).

`solve_batching` reports ``optimal`` only with a proof that holds for the plan returned: the solver's
claim, its objective equal to its point's model value, that value equal to the validator's replay
(`planner.core.agreement`), and a batch count J that admits an optimal schedule (`_batches_admitting`).
Its time limit is spent in nominal seconds (`planner.batching.effort`), so a time-limited run repeats.
"""

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
    latency_beyond,
    build_model,
    compress_schedule,
    extract_schedule,
    time_unit,
    warm_start_vector,
)
from planner.batching import effort
from planner.batching.orderings import SEARCH_PRESETS, best_ordered_schedule
from planner.batching.problem import BatchingProblem
from planner.batching.rollouts import MIN_ROLLOUTS, best_rollout_schedule, default_rollouts, searches_for
from planner.batching.rollouts import applicable as rollouts_applicable
from planner.batching.schedule import Schedule
from planner.batching.scheduler import PRESETS, SchedulerConfig, simulate, summary_metrics
from planner.batching.staggered import best_staggered, single_prefill_batch_impossible, stopped_on_time
from planner.batching.ttft import complete_schedule, first_token_problem, prefix_batch_bound, ttft_prefix
from planner.batching.validator import validate_schedule
from planner.core.agreement import model_value, objective_mismatch, reconcile_status
from planner.core.result import Result
from planner.core.work import WorkClock
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
                      deadline: float | None = None, skipped: list | None = None,
                      clock: WorkClock | None = None, share: float = effort.PRESET_SHARE) -> dict[str, Result]:
    """Every preset that can finish the instance (stuck presets are left out).  The first preset always
    runs; a later one is skipped (and listed in ``skipped``) once ``deadline`` (a `time.perf_counter`
    value) has passed, or when ``clock`` (a `WorkClock`) does not allow another run of the last one's
    nominal cost (`effort.preset_seconds`) within ``share`` of its limit; each run is charged to
    ``clock``.  On instances of millions of tokens one preset takes seconds."""
    out: dict[str, Result] = {}
    bounds: dict = {}
    last = effort.PRESET_FIXED
    for name in PRESETS:
        late = deadline is not None and time.perf_counter() > deadline
        if out and (late or (clock is not None and not clock.allows(last, share=share))):
            if skipped is not None:
                skipped.append(name)
            continue
        try:
            result = run_scheduler(problem, name, objective, bounds=bounds)
        except InfeasibleError:
            if clock is not None:
                clock.charge(effort.PRESET_FIXED)
            continue
        last = effort.preset_seconds(problem.n, result.solution.num_batches)
        if clock is not None:
            clock.charge(last)
        out[name] = result
    return out


def search_heuristic_results(problem: BatchingProblem, seed: int = 0,
                             time_limit: float | None = None) -> dict[str, Result]:
    """The searched heuristics that also feed the MIP's warm start — the best request order of the
    presets (`orderings`) and the best preemptive-priority rollout (`rollouts`, seeded by ``seed``,
    `rollouts.searches_for` ``time_limit`` independent searches) — as validated results (offline
    instances, latency objective; empty otherwise).  Their effort is a count (deterministic)."""
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
#: Node limit of the single-prefill-batch test under a time limit (its nominal cost, `effort.plan_mip_seconds`).
SINGLE_PREFILL_TEST_NODES = 200
#: Largest request × batch grid the MIP is built for (B = 32, J = 68 is 2,176 cells and ~207k rows).
MAX_MIP_CELLS = 6_000
#: Wall seconds kept free at the end of a time-limited call for extracting, validating and reporting the plan.
FINISH_RESERVE_SECONDS = 0.1
#: Nonzeros per request × batch cell of the big-M model with the default cuts, besides its secant rows
#: (for `effort` before the build; measured 105–114 on B = 2…8), and per batch × output token of the path
#: model (measured 6.2–10.3 on B = 2…16, I, O ≤ 64).
BIGM_NONZEROS_PER_CELL = 120
PATHS_NONZEROS_PER_TOKEN_BATCH = 11


def _wall_allows(clock: WorkClock, seconds: float) -> bool:
    """The wall-clock guard for a step that cannot stop early (a kernel load): the wall time plus
    ``seconds`` stays under the guard share of the limit; when it does not, `WorkClock.wall_cut` is set."""
    if clock.time_limit is None or clock.wall_seconds() + seconds < clock.guard_share * clock.time_limit:
        return True
    clock.wall_cut = True
    return False


def _mip_nonzeros_estimate(problem: BatchingProblem, J: int, use_paths: bool) -> int:
    """Nonzeros of the MIP before it is built (for the nominal budget); the big-M model's secant rows
    add 2·cmax_i per cell (`formulation.define_cost_terms`)."""
    if use_paths:
        return int(PATHS_NONZEROS_PER_TOKEN_BATCH * J * int(problem.outputs.sum()))
    cmax = np.minimum(problem.prefill_limit, problem.inputs + problem.outputs - 1)
    return int(BIGM_NONZEROS_PER_CELL * problem.n * J + 2 * J * int(cmax.sum()))


def _candidate_result(problem: BatchingProblem, objective: str, solver: str,
                      candidates: dict[str, tuple[Schedule, float]], bound: float, bound_source: str,
                      message: str, stats: dict, seconds: float) -> Result:
    """The best candidate schedule (re-checked by the validator) with ``bound``, when the MIP gives no plan:
    optimal only if it meets the bound."""
    method = "mip" if objective == "latency" else "mip-ttft"
    if not candidates:
        return Result(FAMILY, method, solver, SolveStatus.NO_SOLUTION, None, bound, seconds, None,
                      message=message, bound_source=bound_source, stats=stats)
    name, (schedule, _) = min(candidates.items(), key=lambda kv: kv[1][1])
    report = validate_schedule(problem, schedule, objective)
    if not report.feasible:
        return Result(FAMILY, method, solver, SolveStatus.ERROR, None, bound, seconds, None,
                      message=f"{message}; the {name} schedule failed validation: {report.summary()}",
                      bound_source=bound_source, stats=stats)
    schedule = _finish_metrics(problem, schedule, report)
    bound = min(bound, report.objective)
    status = SolveStatus.OPTIMAL if report.objective <= bound * (1 + 1e-9) else SolveStatus.FEASIBLE
    return Result(FAMILY, method, solver, status, report.objective, bound, seconds, schedule,
                  message=f"{message} ({name})" if message else name, validation=report,
                  bound_source=bound_source, stats={**stats, "best_heuristic": name, "warm_start": name})


def _mip_too_large(problem: BatchingProblem, objective: str, solver: str,
                   candidates: dict[str, tuple[Schedule, float]], batches: int, max_cells: int,
                   seconds: float) -> Result:
    """Best candidate schedule (presets, lazy staggered, order search) + combinatorial bound when the
    MIP grid is too large to build; the schedule is re-checked by the validator."""
    comb = lower_bound(problem, objective)
    message = (f"MIP not built: {problem.n} requests × J={batches} batches = {problem.n * batches} cells "
               f"> {max_cells}; reporting the best heuristic schedule and the combinatorial lower bound")
    return _candidate_result(problem, objective, solver, candidates, comb, "combinatorial lower bound", message,
                             {"J": batches, "combinatorial_bound": comb}, seconds)


def _batches_admitting(problem: BatchingProblem, objective: str, goal: float | None, value: float | None) -> int | None:
    """A batch count J of the model `solve_batching` builds such that every schedule better than one of
    objective ``value`` (and meeting the goal) has an image in a model of J batches — so if the model's
    optimum is ``value``, it is the global optimum; None when nothing bounds it.

    * Latency: a schedule of latency ≤ L has at most `formulation.batch_count_bound` (L) batches, with
      L = ``value`` (or the goal, if lower).
    * TTFT with a latency goal: every schedule meeting the goal has at most ``batch_count_bound(goal)``.
    * TTFT without a goal (the first-token instance): the normal-form prefix of a schedule of mean
      TTFT ≤ ``value`` has at most `ttft.prefix_batch_bound` batches."""
    if objective == "ttft" and goal is None:
        return None if value is None else prefix_batch_bound(problem, value)
    if objective == "ttft":
        return batch_count_bound(problem, goal)
    reference = [v for v in (value, goal) if v is not None]
    return batch_count_bound(problem, min(reference)) if reference else None


def _sufficient_batches(problem: BatchingProblem, objective: str, goal: float | None,
                        candidates: dict[str, tuple[Schedule, float]], latencies: dict[str, float]) -> int | None:
    """`_batches_admitting` of the best known schedule (for the latency objective with a goal: the best
    one meeting the goal), raised to the batch count of the best candidate's own model image, so that
    its warm start fits."""
    if objective == "latency":
        meeting = [v for v in latencies.values() if goal is None or v <= goal * (1 + 1e-12)]
        J = _batches_admitting(problem, objective, goal, min(meeting) if meeting else None)
    else:
        J = _batches_admitting(problem, objective, goal,
                               min(v for _, v in candidates.values()) if candidates else None)
    if J is None or not candidates:
        return J
    name, (schedule, _) = min(candidates.items(), key=lambda kv: kv[1][1])
    if objective == "ttft" and goal is None:
        return max(J, ttft_prefix(problem, schedule).num_batches)
    return max(J, min(compress_schedule(sched).num_batches for sched, _ in candidates.values()))


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
    started: float | None = None,
) -> Result:
    """The §3.3 MIP: J that provably admits an optimal schedule (`_sufficient_batches`; or ``batches``:
    the model's J — for the TTFT objective without a goal, of the first-token instance — and when it is
    smaller than a provably sufficient J the result is optimal only among schedules of ≤ J batches,
    reported ``feasible``),
    warm start from the best heuristic, optional goal constraint ``latency ≤ goal_factor ×
    latency(goal_scheduler)``; ``cuts`` picks the valid inequalities (`formulation.build_model`).
    Instances with more than ``max_cells`` request × batch cells (about 100 rows each) are not built: the
    best heuristic schedule and the combinatorial lower bound are returned instead, with a message
    saying so.  The TTFT objective without a goal is solved on the first-token instance
    (`ttft.first_token_problem`, every O_i = 1: its schedules are the TTFT-relevant prefixes), and a
    completion (`ttft.complete_schedule`) that changes no first-token time finishes the schedule.

    ``formulation``: ``paths`` = the per-request path model (`flow_formulation`, offline latency only,
    when its dominance conditions hold), ``bigm`` = the §3.3 model of `formulation`, ``auto`` = paths
    where applicable, else bigm.  ``lazy_heuristic`` adds the lazy staggered schedule of `staggered`
    to the warm-start candidates (offline latency), ``order_search`` the best request order of the
    presets (`orderings.best_ordered_schedule`, offline latency; it runs first, and its latency caps
    the lazy search's batch count), ``rollout_search`` the best randomised preemptive-priority rollout
    (`rollouts.best_rollout_schedule`, offline latency, a count of rollouts seeded by ``seed``;
    one independent search per started minute of ``time_limit``, at most 8: `rollouts.searches_for`);
    ``searched`` = those two already run (`search_heuristic_results`), taken as candidates instead.
    ``stop_at_bound``: when a candidate already meets the combinatorial lower bound it is optimal and
    the MIP is not run (``stats["proof"]`` says which bound proved optimality).

    **Soundness.**  The result is ``optimal`` only if the solver proved it, the solver's objective equals
    the model's value at the returned point and that value equals the validator's replay of the plan
    (`planner.core.agreement`, relative 1e-6), and J admits an optimal schedule (a caller's smaller
    ``batches`` makes the claim relative to J: then ``feasible``, with the combinatorial bound).  When a
    warm-started solve returns an objective that is not its point's value (HiGHS 1.16 presolve with a
    MIP start, `planner.core.agreement`), the MIP is solved again without the warm start if the budget
    allows.  A MIP plan worse than the best heuristic plan is replaced by it.

    **Time limit.**  ``time_limit`` bounds the whole call in *nominal seconds* (`planner.batching.effort`,
    a `planner.core.work.WorkClock` started at ``started`` — the caller's start, charged
    `effort.CALL_SETUP` for its imports and loading — or now): presets within `effort.PRESET_SHARE`
    of it, the order search, rollouts and lazy plans within `effort.HEURISTIC_SHARE`, sized by counts;
    the MIP is built only if its build and root fit what is left, and then gets a node limit from the
    nominal seconds left (`effort.node_limit_for`), with the wall time left as the solver's time limit
    (a guard).  The same input, seed and time limit then run the same steps and give the same plan;
    when the wall-clock guard decided anything, ``stats["repeatable"]`` is False and the message says
    why.  Every result carries a bound (MIP bound, combinatorial bound, or the single-prefill-batch cut
    bound `bounds.prefill_cut_bound`, ``stats["prefill_cut_bound"]``)."""
    if objective not in OBJECTIVES:
        raise PlannerError(f"unknown objective {objective!r} (expected latency or ttft)")
    if formulation not in FORMULATIONS:
        raise PlannerError(f"unknown formulation {formulation!r} (expected {', '.join(FORMULATIONS)})")
    solver = check_solver_name(solver)
    problem.check_feasible()
    t0 = time.perf_counter()
    clock = WorkClock(time_limit, started if started is not None else t0)
    if started is not None:  # the caller's imports and the instance's loading
        clock.charge(effort.CALL_SETUP)
    limited = time_limit is not None
    method = "mip" if objective == "latency" else "mip-ttft"
    skipped: list[str] = []
    # the presets get `effort.PRESET_SHARE` of what the call's set-up left
    preset_share = (clock.spent + effort.PRESET_SHARE * (time_limit - clock.spent)) / time_limit if limited else 1.0
    heur = heuristic_results(problem, objective, skipped=skipped, clock=clock, share=preset_share)
    skipped_presets = list(skipped)
    skipped.clear()

    def budget_stats() -> dict:
        return {"nominal_seconds": round(clock.spent, 6), "wall_cut": clock.wall_cut,
                "repeatable": not clock.wall_cut, "skipped": list(skipped_presets) + list(skipped)}

    def noted(message: str) -> str:
        """``message`` plus what the time limit left out, and whether the plan may not repeat."""
        parts = [message] if message else []
        if skipped_presets:
            parts.append(f"time limit reached during the presets: {', '.join(skipped_presets)} not run")
        if skipped:
            parts.append("time limit: skipped " + ", ".join(skipped))
        if clock.wall_cut:
            parts.append("the wall-clock guard stopped a phase before its nominal budget (a slower or busier machine "
                         "than the calibration of planner.batching.effort): this plan may not repeat run to run")
        return "; ".join(parts)

    valid = {k: r for k, r in heur.items() if r.validation and r.validation.feasible}
    use_paths, why_not = paths_applicable(problem, objective)
    if formulation == "paths" and not use_paths:
        raise PlannerError(f"the paths formulation does not apply to this instance: {why_not}")
    use_paths = use_paths and formulation != "bigm"
    candidates = {name: (r.solution, float(r.objective)) for name, r in valid.items()}
    latencies = {name: float(r.solution.metrics["total_latency"]) for name, r in valid.items()}
    comb = lower_bound(problem, objective)
    # request-batches of the best preset schedule: the unit of the heuristics' nominal costs
    typical = problem.n * (min(r.solution.num_batches for r in valid.values()) if valid else
                           max(int(problem.outputs.max()), 1))

    def bound_met() -> bool:
        return bool(candidates) and min(value for _, value in candidates.values()) <= comb * (1 + 1e-9)

    def add_latency_candidate(name: str, schedule: Schedule, value: float) -> None:
        candidates[name] = (schedule, value)
        latencies[name] = value

    offline_latency = objective == "latency" and not problem.online and goal_scheduler is None
    if searched is not None and offline_latency:  # already run by the caller (compare): not run twice
        for name, r in searched.items():
            if r.validation is not None and r.validation.feasible:
                add_latency_candidate(name, r.solution, float(r.objective))
        order_search = rollout_search = False
    # Nominal budget of the searched heuristics: `effort.HEURISTIC_SHARE` of the limit, or nearly all of it
    # when even the MIP of the best preset's batch count could not be built and presolved in the limit.
    share = effort.HEURISTIC_SHARE
    if limited and candidates and offline_latency:
        J_guess = batch_count_bound(problem, min(value for _, value in candidates.values()))
        guess = _mip_nonzeros_estimate(problem, J_guess, use_paths)
        if effort.build_seconds(guess) + effort.root_seconds(guess) > time_limit - clock.spent:
            share = effort.HEURISTIC_SHARE_WITHOUT_MIP
    guard = None if not limited else clock.started + clock.guard_share * time_limit  # wall-clock guard

    def heuristic_left() -> float:
        return max(share * time_limit - clock.spent, 0.0)

    if order_search and offline_latency and not bound_met():
        evaluations = None
        per = effort.simulation_seconds(problem.n, typical // max(problem.n, 1))
        if limited:
            evaluations = int(heuristic_left() / 3 // per)  # a third of the heuristics' budget at most
        if evaluations is None or (evaluations >= 4 * len(SEARCH_PRESETS) and clock.allows(per * evaluations)):
            info: dict = {}
            ordered = best_ordered_schedule(problem, max_evaluations=evaluations, info=info, deadline=guard)
            clock.charge(per * info.get("evaluations", 0))
            clock.wall_cut |= bool(info.get("wall_cut"))
            if ordered is not None:
                add_latency_candidate(ordered[0], ordered[1], ordered[2])
        else:
            skipped.append("the request-order search")
    if rollout_search and offline_latency and not bound_met() and rollouts_applicable(problem):
        count = default_rollouts(problem)
        searches = searches_for(time_limit)
        per = effort.rollout_seconds(problem.n, typical // max(problem.n, 1))
        if limited:  # two thirds of what is left, after loading the compiled kernel
            count = min(count, int((heuristic_left() * 2 / 3 - effort.ROLLOUT_SETUP) // (per * searches)))
        fits = not limited or (count >= MIN_ROLLOUTS and clock.allows(effort.ROLLOUT_SETUP + per * count * searches,
                                                                       share=share)
                               and _wall_allows(clock, effort.ROLLOUT_SETUP))
        if fits:
            info = {}
            rolled = best_rollout_schedule(problem, rollouts=count, seed=seed, searches=searches, deadline=guard,
                                           info=info)
            clock.charge(effort.ROLLOUT_SETUP + per * count * searches if limited else 0.0)
            clock.wall_cut |= bool(info.get("wall_cut"))
            if rolled is not None:
                add_latency_candidate("preemptive rollouts", *rolled)
        else:
            skipped.append("the preemptive rollouts")
    if lazy_heuristic and offline_latency and not bound_met():
        # lazy plans with more batches than the incumbent allows cannot beat it
        cap = batch_count_bound(problem, min(value for _, value in candidates.values())) if candidates else None
        lazy = best_staggered(problem, threads=threads, max_batches=cap, clock=clock, share=share)
        if lazy is not None:
            add_latency_candidate("lazy-staggered", *lazy)
    if objective == "ttft" and goal_scheduler is None:
        # every preset schedule's first-token normal form (`ttft.ttft_prefix`), finished by
        # `ttft.complete_schedule`: never a later first token, often an earlier one
        for name, (schedule, value) in list(candidates.items()):
            if limited and not clock.allows(effort.preset_seconds(problem.n, schedule.num_batches), share=share):
                break
            clock.charge(effort.preset_seconds(problem.n, schedule.num_batches))
            normal = complete_schedule(problem, ttft_prefix(problem, schedule))
            report = validate_schedule(problem, normal, objective)
            if report.feasible and report.objective < value * (1 - 1e-12):
                candidates[f"{name}, first tokens first"] = (normal, float(report.objective))
                latencies[f"{name}, first tokens first"] = float(report.details["total_latency"])
    if stop_at_bound and candidates and goal_scheduler is None:
        name, (schedule, value) = min(candidates.items(), key=lambda kv: kv[1][1])
        if value <= comb * (1 + 1e-9):
            report = validate_schedule(problem, schedule, objective)
            schedule = _finish_metrics(problem, schedule, report)
            seconds = time.perf_counter() - t0
            return Result(FAMILY, method, solver, SolveStatus.OPTIMAL, report.objective, comb, 0.0, schedule,
                          build_seconds=seconds, validation=report, bound_source="combinatorial lower bound",
                          message=noted(f"the {name} schedule meets the combinatorial lower bound: optimal, "
                                        "MIP not needed"),
                          stats={"J": None, "columns": None, "rows": None, "nodes": None, "warm_start": name,
                                 "combinatorial_bound": comb, "proof": "combinatorial lower bound",
                                 "formulation": "none", "mip_objective": None, **budget_stats()})
    goal = None
    if goal_scheduler is not None:
        base = heur.get(goal_scheduler) or run_scheduler(problem, goal_scheduler, "latency")
        goal = goal_factor * float(base.solution.metrics["total_latency"])
    prefix = objective == "ttft" and goal is None
    needed = _sufficient_batches(problem, objective, goal, candidates, latencies)
    if batches is None:
        if needed is None:
            raise PlannerError("no preset scheduler finishes this instance; give the batch count with --batches")
        batches = needed
    restricted = needed is None or batches < needed  # the optimum may need more batches than the model has
    if problem.n * batches > max_cells:
        result = _mip_too_large(problem, objective, solver, candidates, batches, max_cells, time.perf_counter() - t0)
        return replace(result, message=noted(result.message), stats={**result.stats, **budget_stats()})
    least_prefill = 1
    cut_bound = None  # global bound from the single-prefill-batch test (`bounds.prefill_cut_bound`)
    if use_paths and batches < int(problem.outputs.max()):  # no path fits: the big-M model reports it
        use_paths = False
    if use_paths:
        info = {}
        nodes = SINGLE_PREFILL_TEST_NODES if limited else None
        cost = effort.plan_mip_seconds(problem.n * batches * batches, SINGLE_PREFILL_TEST_NODES)
        impossible = False
        if not limited or clock.allows(cost, share=effort.HEURISTIC_SHARE):
            seconds = SINGLE_PREFILL_TEST_SECONDS
            if limited:
                seconds = min(seconds, clock.wall_left())
            impossible = single_prefill_batch_impossible(problem, batches, threads=threads, time_limit=seconds,
                                                         node_limit=nodes, info=info)
            clock.charge(cost if limited else 0.0)
            if info.get("stopped_on_time"):
                clock.wall_cut = True
        else:
            skipped.append("the single-prefill-batch test")
        least_prefill = 2 if impossible else 1
        incumbent = min((value for _, value in candidates.values()), default=None)
        if impossible and incumbent is not None and batches >= batch_count_bound(problem, incumbent):
            cut_bound = prefill_cut_bound(problem, incumbent, least_prefill)
    comb_or_cut = max(comb, cut_bound) if cut_bound is not None else comb
    cut_source = "combinatorial lower bound" if comb_or_cut <= comb else \
        "combinatorial lower bound with the single-prefill-batch cut"
    # the MIP is built only if its build and root fit the nominal time left (and, as a guard, the wall time left)
    # TTFT without a goal: the model of the first-token instance (`ttft`), whose schedules are prefixes
    modelled = first_token_problem(problem) if prefix else problem
    nonzeros = _mip_nonzeros_estimate(modelled, batches, use_paths)
    reserve = FINISH_RESERVE_SECONDS
    need = effort.build_seconds(nonzeros) + effort.root_seconds(nonzeros) + reserve
    if limited and (not clock.allows(need) or clock.wall_left() < need):
        if clock.allows(need):  # the nominal budget had room: the wall clock decided
            clock.wall_cut = True
        skipped.append(f"the MIP (about {nonzeros:,} nonzeros: {effort.build_seconds(nonzeros):.2g} s to build and "
                       f"{effort.root_seconds(nonzeros):.2g} s for its presolve and root, {clock.left():.2g} s left)")
        stats = {"J": batches, "formulation": "paths" if use_paths else "bigm", "combinatorial_bound": comb,
                 "prefill_cut_bound": cut_bound, "proof": None, "mip_objective": None, **budget_stats()}
        result = _candidate_result(problem, objective, solver, candidates, comb_or_cut, cut_source, "",
                                   stats, time.perf_counter() - t0)
        return replace(result, message=noted(result.message if result.solution is None else
                                             f"best heuristic schedule: {result.message}"),
                       stats={**result.stats, **budget_stats()})
    if use_paths:
        bm = build_flow_model(problem, batches, goal, least_prefill)
    else:
        bm = build_model(modelled, batches, objective, goal, cuts=cuts)
    nonzeros = int(bm.model.matrix.nnz)
    clock.charge(effort.build_seconds(nonzeros))
    x0 = None
    best_name = None
    if warm_start and candidates:
        ranked = sorted(candidates.items(), key=lambda kv: kv[1][1])
        for name, (sched, _) in ranked:
            if goal is not None and latencies.get(name, validate_schedule(problem, sched).objective) > goal + 1e-12:
                continue
            if use_paths:
                sched = normalize_schedule(problem, sched)
                x0 = None if sched is None else flow_warm_start(problem, bm, sched)
            else:
                x0 = warm_start_vector(modelled, bm, ttft_prefix(modelled, sched) if prefix else sched)
            if x0 is not None and bm.model.max_violation(x0) <= 1e-6:
                best_name = name
                break
            x0 = None
    build_seconds = time.perf_counter() - t0
    unit = time_unit(problem)  # the same for the first-token instance (same costs)

    def run_mip(start: np.ndarray | None):
        """One solve: without a time limit unbounded; with one, a node limit from the nominal seconds left
        (deterministic) and the wall time left as the solver's time limit (a guard)."""
        node_limit = wall = None
        if limited:
            node_limit = max(1, effort.node_limit_for(max(clock.left() - reserve, 0.0), nonzeros))  # 1: the root
            wall = max(clock.wall_left() - reserve, 0.0)
        out = solve(bm.model, solver, SolveOptions(time_limit=wall, threads=threads, seed=seed, warm_start=start,
                                                   node_limit=node_limit, mip_rel_gap=1e-7, mip_abs_gap=1e-6))
        if limited:
            spent = effort.root_seconds(nonzeros) + effort.node_seconds(nonzeros) * max((out.node_count or 1) - 1, 0)
            clock.charge(min(spent, max(clock.left(), 0.0)))
            if stopped_on_time(out):
                clock.wall_cut = True
        return out, node_limit

    out, node_limit = run_mip(x0)
    solver_mismatch = ""
    resolved = False
    if out.x is not None and out.objective is not None:
        solver_mismatch = objective_mismatch(out.objective / unit, model_value(bm.model, out.x) / unit,
                                             first_name="solver-reported objective",
                                             second_name="the model's value at the returned point")
        retry_cost = effort.root_seconds(nonzeros)
        if solver_mismatch and x0 is not None and (not limited or clock.allows(retry_cost + reserve)):
            again, node_limit = run_mip(None)
            if again.x is not None and again.objective is not None and not objective_mismatch(
                    again.objective / unit, model_value(bm.model, again.x) / unit):
                out, resolved = again, True
                solver_mismatch = ""
    mip_objective = out.objective / unit if out.objective is not None else None
    mip_value = model_value(bm.model, out.x) / unit if out.x is not None else None
    model_bound = out.bound / unit if out.bound is not None and np.isfinite(out.bound) else None

    def global_bound(restricted: bool) -> tuple[float, str]:
        """(bound, source): the MIP's bound holds for schedules of ≤ J batches; unless J admits an optimal
        schedule, beyond J only the latency has a bound (`formulation.latency_beyond`)."""
        mip_bound = model_bound
        if restricted:
            mip_bound = min(mip_bound, latency_beyond(problem, batches)) if (
                mip_bound is not None and objective == "latency") else None
        if mip_bound is not None and mip_bound >= comb_or_cut:
            if restricted:
                return mip_bound, "MIP bound (J batches) and the batch-count bound beyond J"
            return mip_bound, "MIP bound"
        return comb_or_cut, cut_source

    bound, bound_source = global_bound(restricted)
    stats = {"J": batches, "columns": bm.model.num_cols, "rows": bm.model.num_rows,
             "integer_columns": bm.model.num_integer, "warm_start": best_name, "nodes": out.node_count,
             "node_limit": node_limit, "combinatorial_bound": comb, "formulation": "paths" if use_paths else "bigm",
             "least_prefill_batches": least_prefill, "prefill_cut_bound": cut_bound, "first_token_model": prefix,
             "J_sufficient": needed, "resolved_without_warm_start": resolved,
             "proof": "MIP" if out.status == SolveStatus.OPTIMAL else None,
             "mip_objective": mip_objective, "mip_point_value": mip_value}
    if not out.status.has_solution:
        message = out.message
        if out.status == SolveStatus.INFEASIBLE:
            diag = diagnose_infeasibility(bm.model, solver, time_limit_per_test=5.0)
            what = "no schedule meets the latency goal" if goal is not None and not restricted else \
                f"no schedule within J={batches} batches"
            message = f"{what} ({diag.summary()})"
            return Result(FAMILY, method, solver, out.status, None, bound, out.seconds, None,
                          build_seconds=build_seconds, message=noted(message), bound_source=bound_source,
                          stats={**stats, **budget_stats()})
        result = _candidate_result(problem, objective, solver, candidates, bound, bound_source,
                                   f"the MIP found no schedule ({message or out.status.value}); "
                                   "best heuristic schedule",
                                   stats, out.seconds)
        return replace(result, build_seconds=build_seconds, message=noted(result.message),
                       stats={**result.stats, **budget_stats()})
    schedule = extract_flow_schedule(problem, bm, out.x) if use_paths else extract_schedule(modelled, bm, out.x)
    if prefix:  # a schedule of the first-token instance: evict after first tokens, then finish every request
        schedule = complete_schedule(problem, ttft_prefix(problem, schedule))
    report = validate_schedule(problem, schedule, objective)
    status = out.status
    messages = [out.message] if out.message else []
    if not report.feasible:
        status = SolveStatus.ERROR
        messages.append("MIP schedule failed validation: " + report.summary())
    else:
        replay_mismatch = objective_mismatch(mip_value, report.objective)
        status, why = reconcile_status(status, solver_mismatch, replay_mismatch)
        messages.append(why)
        if restricted and status == SolveStatus.OPTIMAL:
            # the model's optimum is global if every better schedule fits J batches (`_batches_admitting`)
            admitting = _batches_admitting(problem, objective, goal, report.objective)
            restricted = admitting is None or batches < admitting
            stats["J_sufficient"] = admitting
            bound, bound_source = global_bound(restricted)
        if restricted and status == SolveStatus.OPTIMAL:
            status = SolveStatus.FEASIBLE
            messages.append(f"optimal among schedules of at most J={batches} batches only (an optimal schedule may "
                            f"need {needed if needed is not None else 'more'})")
        best_candidate = min(candidates.items(), key=lambda kv: kv[1][1]) if candidates else None
        if best_candidate is not None and best_candidate[1][1] < report.objective * (1 - 1e-12):
            name, (cand, _) = best_candidate
            cand_report = validate_schedule(problem, cand, objective)
            if cand_report.feasible:
                messages.append(f"the MIP's schedule ({report.objective:.9g}) is worse than the {name} schedule, "
                                "which is reported")
                schedule, report = cand, cand_report
                status = SolveStatus.FEASIBLE
    if report.feasible:
        schedule = _finish_metrics(problem, schedule, report)
        if bound > report.objective * (1 + 1e-9):
            messages.append(f"bound {bound:.9g} above the validated objective {report.objective:.9g}: withdrawn, "
                            f"{cut_source} reported")
            bound, bound_source = min(comb_or_cut, report.objective), cut_source
            if status == SolveStatus.OPTIMAL:
                status = SolveStatus.FEASIBLE
        if report.objective <= comb_or_cut * (1 + 1e-9) and status != SolveStatus.ERROR:
            status, stats["proof"] = SolveStatus.OPTIMAL, cut_source
        if status == SolveStatus.OPTIMAL:
            bound = min(bound, report.objective)
        else:
            stats["proof"] = None
    return Result(FAMILY, method, solver, status, report.objective if report.feasible else None, bound, out.seconds,
                  schedule, build_seconds=build_seconds, message=noted("; ".join(m for m in messages if m)),
                  validation=report, bound_source=bound_source, stats={**stats, **budget_stats()})
