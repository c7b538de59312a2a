"""Pipelines returning `Result`: a preset scheduler (`run_scheduler`), the MIP (`solve_batching`).

`solve_batching` reports ``optimal`` only with a proof that holds for the plan returned: the solver's
claim, its objective equal to its point's model value, that value equal to the validator's replay
(`planner.core.agreement`), and a batch count J that admits an optimal schedule (`_batches_admitting`).
Its time limit is spent in nominal seconds (`planner.batching.effort`), so a time-limited run repeats.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

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
from planner.core.phases import Phase, run_phases
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
    return Result(family=FAMILY, method=name, solver="simulator", status=SolveStatus.FEASIBLE if report.feasible else SolveStatus.ERROR,
                  objective=report.objective, bound=bound, solve_seconds=sim.seconds, solution=sim.schedule, validation=report,
                  bound_source="combinatorial lower bound",
                  message="" if report.feasible else "schedule failed validation: " + report.summary(),
                  stats={"batches": sim.schedule.num_batches,
                         "phases": {k: round(v, 6) for k, v in sim.phase_seconds.items()}})


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
            clock = max([clock] + [reqs[i].arrival_s for i in batches[j]]) + secs[j]
        for i, c in batches[j].items():
            kv[i] += c
            if kv[i] >= Iin[i]:
                produced[i] += 1
                if np.isnan(first[i]):
                    first[i] = clock
                if produced[i] == reqs[i].output_tokens:
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


#: The searched heuristics (`search_heuristic_results`), by result name.
SEARCHED = ("order search", "preemptive rollouts")


def search_heuristic_results(problem: BatchingProblem, seed: int = 0, time_limit: float | None = None,
                             methods: tuple[str, ...] = SEARCHED) -> dict[str, Result]:
    """The searched heuristics that also feed the MIP's warm start — the best request order of the
    presets (`orderings`) and the best preemptive-priority rollout (`rollouts`, seeded by ``seed``,
    `rollouts.searches_for` ``time_limit`` independent searches) — as validated results (offline
    instances, latency objective; empty otherwise); ``methods``: which of the two (`SEARCHED`).
    Their effort is a count (deterministic)."""
    if problem.online:
        return {}
    out = {}
    found = []
    started = time.perf_counter()
    ordered = best_ordered_schedule(problem) if "order search" in methods else None
    if ordered is not None:
        found.append(("order search", ordered[1], time.perf_counter() - started, ordered[0]))
    started = time.perf_counter()
    searches = searches_for(time_limit)
    rolled = best_rollout_schedule(problem, seed=seed, searches=searches) if "preemptive rollouts" in methods else None
    if rolled is not None:
        detail = f"seed {seed}" + (f", {searches} searches" if searches > 1 else "")
        found.append(("preemptive rollouts", rolled[0], time.perf_counter() - started, detail))
    for name, schedule, seconds, detail in found:
        report = validate_schedule(problem, schedule)
        status = SolveStatus.FEASIBLE if report.feasible else SolveStatus.ERROR
        schedule = _finish_metrics(problem, schedule, report) if report.feasible else schedule
        out[name] = Result(family=FAMILY, method=name, solver="heuristic search", status=status, objective=report.objective, bound=lower_bound(problem), solve_seconds=seconds,
                           solution=schedule, validation=report, stats={"batches": schedule.num_batches, "found": detail})
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
        return Result(family=FAMILY, method=method, solver=solver, status=SolveStatus.NO_SOLUTION, objective=None, bound=bound, solve_seconds=seconds, solution=None,
                      message=message, bound_source=bound_source, stats=stats)
    name, (schedule, _) = min(candidates.items(), key=lambda kv: kv[1][1])
    report = validate_schedule(problem, schedule, objective)
    if not report.feasible:
        return Result(family=FAMILY, method=method, solver=solver, status=SolveStatus.ERROR, objective=None, bound=bound, solve_seconds=seconds, solution=None,
                      message=f"{message}; the {name} schedule failed validation: {report.summary()}",
                      bound_source=bound_source, stats=stats)
    schedule = _finish_metrics(problem, schedule, report)
    bound = min(bound, report.objective)
    status = SolveStatus.OPTIMAL if report.objective <= bound * (1 + 1e-9) else SolveStatus.FEASIBLE
    return Result(family=FAMILY, method=method, solver=solver, status=status, objective=report.objective, bound=bound, solve_seconds=seconds, solution=schedule,
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
    bound `bounds.prefill_cut_bound`, ``stats["prefill_cut_bound"]``).

    **Phases.**  The pipeline is `MIP_PHASES` run by `planner.core.phases.run_phases` over one `_MipState`:
    precheck → presets → order search → rollouts → lazy staggered → ttft prefixes → stop at bound → batch
    count → prefill test → mip budget → build mip → warm start → solve → no plan → validate → assemble
    (a phase whose condition fails is skipped; "stop at bound", "batch count", "mip budget" and "no plan" may
    end the run with their result).  ``stats["phases"]`` holds the wall seconds of each phase run."""
    state = _MipState(problem=problem, objective=objective, solver=solver, time_limit=time_limit, threads=threads,
                      seed=seed, batches=batches, goal_scheduler=goal_scheduler, goal_factor=goal_factor,
                      warm_start=warm_start, cuts=cuts, max_cells=max_cells, formulation=formulation,
                      lazy_heuristic=lazy_heuristic, order_search=order_search, rollout_search=rollout_search,
                      stop_at_bound=stop_at_bound, searched=searched, started=started)
    result = run_phases(MIP_PHASES, state)
    return replace(result, stats={**result.stats, "phases": {k: round(v, 6) for k, v in state.phase_seconds.items()}})


@dataclass
class _MipState:
    """What the phases of `solve_batching` (`MIP_PHASES`) share: the call's arguments, the work clock,
    the warm-start candidates ``{name: (schedule, objective)}`` (and their total latencies), the bounds,
    the model and the solver's answer, and the wall seconds of each phase (``phase_seconds``)."""

    problem: BatchingProblem
    objective: str
    solver: str
    time_limit: float | None
    threads: int | None
    seed: int
    batches: int | None
    goal_scheduler: str | None
    goal_factor: float
    warm_start: bool
    cuts: bool | tuple[str, ...]
    max_cells: int
    formulation: str
    lazy_heuristic: bool
    order_search: bool
    rollout_search: bool
    stop_at_bound: bool
    searched: dict[str, Result] | None
    started: float | None
    phase_seconds: dict[str, float] = field(default_factory=dict)
    t0: float = 0.0
    clock: WorkClock | None = None
    skipped: list[str] = field(default_factory=list)
    skipped_presets: list[str] = field(default_factory=list)
    heur: dict[str, Result] = field(default_factory=dict)
    use_paths: bool = False
    candidates: dict[str, tuple[Schedule, float]] = field(default_factory=dict)
    latencies: dict[str, float] = field(default_factory=dict)
    comb: float = 0.0
    typical: int = 0
    offline_latency: bool = False
    share: float = effort.HEURISTIC_SHARE
    guard: float | None = None
    goal: float | None = None
    prefix: bool = False
    needed: int | None = None
    restricted: bool = False
    least_prefill: int = 1
    cut_bound: float | None = None
    comb_or_cut: float = 0.0
    cut_source: str = "combinatorial lower bound"
    modelled: BatchingProblem | None = None
    nonzeros: int = 0
    bm: object = None
    x0: np.ndarray | None = None
    best_name: str | None = None
    build_seconds: float = 0.0
    unit: float = 1.0
    out: object = None
    node_limit: int | None = None
    solver_mismatch: str = ""
    resolved: bool = False
    mip_objective: float | None = None
    mip_value: float | None = None
    model_bound: float | None = None
    bound: float = 0.0
    bound_source: str = ""
    stats: dict = field(default_factory=dict)
    schedule: Schedule | None = None
    report: object = None
    status: SolveStatus | None = None
    messages: list[str] = field(default_factory=list)

    @property
    def limited(self) -> bool:
        return self.time_limit is not None

    @property
    def method(self) -> str:
        return "mip" if self.objective == "latency" else "mip-ttft"

    def budget_stats(self) -> dict:
        return {"nominal_seconds": round(self.clock.spent, 6), "wall_cut": self.clock.wall_cut,
                "repeatable": not self.clock.wall_cut, "skipped": list(self.skipped_presets) + list(self.skipped)}

    def noted(self, message: str) -> str:
        """``message`` plus what the time limit left out, and whether the plan may not repeat."""
        parts = [message] if message else []
        if self.skipped_presets:
            parts.append(f"time limit reached during the presets: {', '.join(self.skipped_presets)} not run")
        if self.skipped:
            parts.append("time limit: skipped " + ", ".join(self.skipped))
        if self.clock.wall_cut:
            parts.append("the wall-clock guard stopped a phase before its nominal budget (a slower or busier machine "
                         "than the calibration of planner.batching.effort): this plan may not repeat run to run")
        return "; ".join(parts)

    def finished(self, result: Result, message: str | None = None) -> Result:
        """``result`` with the time-limit notes on its message (or on ``message``) and the budget stats."""
        return replace(result, message=self.noted(result.message if message is None else message),
                       stats={**result.stats, **self.budget_stats()})

    def incumbent(self) -> float | None:
        return min((value for _, value in self.candidates.values()), default=None)

    def bound_met(self) -> bool:
        best = self.incumbent()
        return best is not None and best <= self.comb * (1 + 1e-9)

    def add_latency_candidate(self, name: str, schedule: Schedule, value: float) -> None:
        self.candidates[name] = (schedule, value)
        self.latencies[name] = value

    def heuristic_left(self) -> float:
        return max(self.share * self.time_limit - self.clock.spent, 0.0)

    def global_bound(self, restricted: bool) -> tuple[float, str]:
        """(bound, source): the MIP's bound holds for schedules of ≤ J batches; unless J admits an optimal
        schedule, beyond J only the latency has a bound (`formulation.latency_beyond`)."""
        mip_bound = self.model_bound
        if restricted:
            mip_bound = min(mip_bound, latency_beyond(self.problem, self.batches)) if (
                mip_bound is not None and self.objective == "latency") else None
        if mip_bound is not None and mip_bound >= self.comb_or_cut:
            if restricted:
                return mip_bound, "MIP bound (J batches) and the batch-count bound beyond J"
            return mip_bound, "MIP bound"
        return self.comb_or_cut, self.cut_source

    def run_mip(self, start: np.ndarray | None):
        """One solve: without a time limit unbounded; with one, a node limit from the nominal seconds left
        (deterministic) and the wall time left as the solver's time limit (a guard)."""
        clock, reserve = self.clock, FINISH_RESERVE_SECONDS
        node_limit = wall = None
        if self.limited:
            node_limit = max(1, effort.node_limit_for(max(clock.left() - reserve, 0.0), self.nonzeros))  # 1: the root
            wall = max(clock.wall_left() - reserve, 0.0)
        out = solve(self.bm.model, self.solver, SolveOptions(time_limit=wall, threads=self.threads, seed=self.seed,
                                                             warm_start=start, node_limit=node_limit,
                                                             mip_rel_gap=1e-7, mip_abs_gap=1e-6))
        if self.limited:
            spent = effort.root_seconds(self.nonzeros) + effort.node_seconds(self.nonzeros) * max(
                (out.node_count or 1) - 1, 0)
            clock.charge(min(spent, max(clock.left(), 0.0)))
            if stopped_on_time(out):
                clock.wall_cut = True
        return out, node_limit


def _precheck(s: _MipState) -> None:
    """Arguments and feasibility; the work clock starts (charged the caller's set-up when ``started`` is given)."""
    if s.objective not in OBJECTIVES:
        raise PlannerError(f"unknown objective {s.objective!r} (expected latency or ttft)")
    if s.formulation not in FORMULATIONS:
        raise PlannerError(f"unknown formulation {s.formulation!r} (expected {', '.join(FORMULATIONS)})")
    s.solver = check_solver_name(s.solver)
    s.problem.check_feasible()
    s.t0 = time.perf_counter()
    s.clock = WorkClock(s.time_limit, s.started if s.started is not None else s.t0)
    if s.started is not None:  # the caller's imports and the instance's loading
        s.clock.charge(effort.CALL_SETUP)


def _presets(s: _MipState) -> None:
    """Every preset within `effort.PRESET_SHARE` of what the set-up left; their plans are the first candidates."""
    problem, clock, time_limit = s.problem, s.clock, s.time_limit
    preset_share = (clock.spent + effort.PRESET_SHARE * (time_limit - clock.spent)) / time_limit if s.limited else 1.0
    s.heur = heuristic_results(problem, s.objective, skipped=s.skipped, clock=clock, share=preset_share)
    s.skipped_presets = list(s.skipped)
    s.skipped.clear()
    valid = {k: r for k, r in s.heur.items() if r.validation and r.validation.feasible}
    use_paths, why_not = paths_applicable(problem, s.objective)
    if s.formulation == "paths" and not use_paths:
        raise PlannerError(f"the paths formulation does not apply to this instance: {why_not}")
    s.use_paths = use_paths and s.formulation != "bigm"
    s.candidates = {name: (r.solution, float(r.objective)) for name, r in valid.items()}
    s.latencies = {name: float(r.solution.metrics["total_latency"]) for name, r in valid.items()}
    s.comb = lower_bound(problem, s.objective)
    # request-batches of the best preset schedule: the unit of the heuristics' nominal costs
    s.typical = problem.n * (min(r.solution.num_batches for r in valid.values()) if valid else
                             max(int(problem.outputs.max()), 1))
    s.offline_latency = s.objective == "latency" and not problem.online and s.goal_scheduler is None
    if s.searched is not None and s.offline_latency:  # already run by the caller (compare): not run twice
        for name, r in s.searched.items():
            if r.validation is not None and r.validation.feasible:
                s.add_latency_candidate(name, r.solution, float(r.objective))
        s.order_search = s.rollout_search = False
    # Nominal budget of the searched heuristics: `effort.HEURISTIC_SHARE` of the limit, or nearly all of it
    # when even the MIP of the best preset's batch count could not be built and presolved in the limit.
    if s.limited and s.candidates and s.offline_latency:
        guess = _mip_nonzeros_estimate(problem, batch_count_bound(problem, s.incumbent()), s.use_paths)
        if effort.build_seconds(guess) + effort.root_seconds(guess) > time_limit - clock.spent:
            s.share = effort.HEURISTIC_SHARE_WITHOUT_MIP
    s.guard = None if not s.limited else clock.started + clock.guard_share * time_limit  # wall-clock guard


def _order_search(s: _MipState) -> None:
    """The best request order of the presets (`orderings`), a third of the heuristics' budget at most."""
    problem, clock = s.problem, s.clock
    evaluations = None
    per = effort.simulation_seconds(problem.n, s.typical // max(problem.n, 1))
    if s.limited:
        evaluations = int(s.heuristic_left() / 3 // per)
    if evaluations is None or (evaluations >= 4 * len(SEARCH_PRESETS) and clock.allows(per * evaluations)):
        info: dict = {}
        ordered = best_ordered_schedule(problem, max_evaluations=evaluations, info=info, deadline=s.guard)
        clock.charge(per * info.get("evaluations", 0))
        clock.wall_cut |= bool(info.get("wall_cut"))
        if ordered is not None:
            s.add_latency_candidate(ordered[0], ordered[1], ordered[2])
    else:
        s.skipped.append("the request-order search")


def _rollouts(s: _MipState) -> None:
    """The best seeded preemptive-priority rollout (`rollouts`): two thirds of the heuristics' budget left."""
    problem, clock, limited = s.problem, s.clock, s.limited
    count = default_rollouts(problem)
    searches = searches_for(s.time_limit)
    per = effort.rollout_seconds(problem.n, s.typical // max(problem.n, 1))
    if limited:  # two thirds of what is left, after loading the compiled kernel
        count = min(count, int((s.heuristic_left() * 2 / 3 - effort.ROLLOUT_SETUP) // (per * searches)))
    fits = not limited or (count >= MIN_ROLLOUTS and clock.allows(effort.ROLLOUT_SETUP + per * count * searches,
                                                                   share=s.share)
                           and _wall_allows(clock, effort.ROLLOUT_SETUP))
    if not fits:
        s.skipped.append("the preemptive rollouts")
        return
    info: dict = {}
    rolled = best_rollout_schedule(problem, rollouts=count, seed=s.seed, searches=searches, deadline=s.guard,
                                   info=info)
    clock.charge(effort.ROLLOUT_SETUP + per * count * searches if limited else 0.0)
    clock.wall_cut |= bool(info.get("wall_cut"))
    if rolled is not None:
        s.add_latency_candidate("preemptive rollouts", *rolled)


def _lazy_staggered(s: _MipState) -> None:
    """The lazy staggered plans (`staggered`); plans with more batches than the incumbent allows cannot beat it."""
    best = s.incumbent()
    cap = batch_count_bound(s.problem, best) if best is not None else None
    lazy = best_staggered(s.problem, threads=s.threads, max_batches=cap, clock=s.clock, share=s.share,
                          solver=s.solver)
    if lazy is not None:
        s.add_latency_candidate("lazy-staggered", *lazy)


def _ttft_prefixes(s: _MipState) -> None:
    """Every candidate's first-token normal form (`ttft.ttft_prefix`), finished by `ttft.complete_schedule`:
    never a later first token, often an earlier one."""
    problem, clock = s.problem, s.clock
    for name, (schedule, value) in list(s.candidates.items()):
        if s.limited and not clock.allows(effort.preset_seconds(problem.n, schedule.num_batches), share=s.share):
            break
        clock.charge(effort.preset_seconds(problem.n, schedule.num_batches))
        normal = complete_schedule(problem, ttft_prefix(problem, schedule))
        report = validate_schedule(problem, normal, s.objective)
        if report.feasible and report.objective < value * (1 - 1e-12):
            s.candidates[f"{name}, first tokens first"] = (normal, float(report.objective))
            s.latencies[f"{name}, first tokens first"] = float(report.details["total_latency"])


def _stop_at_bound(s: _MipState) -> Result | None:
    """A candidate meeting the combinatorial lower bound is optimal: the MIP is not needed."""
    name, (schedule, value) = min(s.candidates.items(), key=lambda kv: kv[1][1])
    if value > s.comb * (1 + 1e-9):
        return None
    report = validate_schedule(s.problem, schedule, s.objective)
    schedule = _finish_metrics(s.problem, schedule, report)
    seconds = time.perf_counter() - s.t0
    return Result(family=FAMILY, method=s.method, solver=s.solver, status=SolveStatus.OPTIMAL,
                  objective=report.objective, bound=s.comb, solve_seconds=0.0, solution=schedule,
                  build_seconds=seconds, validation=report, bound_source="combinatorial lower bound",
                  message=s.noted(f"the {name} schedule meets the combinatorial lower bound: optimal, MIP not needed"),
                  stats={"J": None, "columns": None, "rows": None, "nodes": None, "warm_start": name,
                         "combinatorial_bound": s.comb, "proof": "combinatorial lower bound",
                         "formulation": "none", "mip_objective": None, **s.budget_stats()})


def _batch_count(s: _MipState) -> Result | None:
    """The goal, the model's batch count J (`_sufficient_batches` unless given) and the too-large test."""
    problem = s.problem
    if s.goal_scheduler is not None:
        base = s.heur.get(s.goal_scheduler) or run_scheduler(problem, s.goal_scheduler, "latency")
        s.goal = s.goal_factor * float(base.solution.metrics["total_latency"])
    s.prefix = s.objective == "ttft" and s.goal is None
    s.needed = _sufficient_batches(problem, s.objective, s.goal, s.candidates, s.latencies)
    if s.batches is None:
        if s.needed is None:
            raise PlannerError("no preset scheduler finishes this instance; give the batch count with --batches")
        s.batches = s.needed
    s.restricted = s.needed is None or s.batches < s.needed  # the optimum may need more batches than the model has
    if problem.n * s.batches > s.max_cells:
        return s.finished(_mip_too_large(problem, s.objective, s.solver, s.candidates, s.batches, s.max_cells,
                                         time.perf_counter() - s.t0))
    if s.use_paths and s.batches < int(problem.outputs.max()):  # no path fits: the big-M model reports it
        s.use_paths = False
    return None


def _prefill_test(s: _MipState) -> None:
    """The single-prefill-batch test (`staggered.single_prefill_batch_impossible`) and its cut bound."""
    problem, clock, limited, batches = s.problem, s.clock, s.limited, s.batches
    info: dict = {}
    nodes = SINGLE_PREFILL_TEST_NODES if limited else None
    cost = effort.plan_mip_seconds(problem.n * batches * batches, SINGLE_PREFILL_TEST_NODES)
    impossible = False
    if not limited or clock.allows(cost, share=effort.HEURISTIC_SHARE):
        seconds = SINGLE_PREFILL_TEST_SECONDS
        if limited:
            seconds = min(seconds, clock.wall_left())
        impossible = single_prefill_batch_impossible(problem, batches, threads=s.threads, time_limit=seconds,
                                                     node_limit=nodes, info=info, solver=s.solver)
        clock.charge(cost if limited else 0.0)
        if info.get("stopped_on_time"):
            clock.wall_cut = True
    else:
        s.skipped.append("the single-prefill-batch test")
    s.least_prefill = 2 if impossible else 1
    incumbent = s.incumbent()
    if impossible and incumbent is not None and batches >= batch_count_bound(problem, incumbent):
        s.cut_bound = prefill_cut_bound(problem, incumbent, s.least_prefill)


def _mip_budget(s: _MipState) -> Result | None:
    """The MIP is built only if its build and root fit the nominal time left (and, as a guard, the wall time
    left); otherwise the best candidate is reported with the combinatorial (or cut) bound."""
    s.comb_or_cut = max(s.comb, s.cut_bound) if s.cut_bound is not None else s.comb
    s.cut_source = "combinatorial lower bound" if s.comb_or_cut <= s.comb else \
        "combinatorial lower bound with the single-prefill-batch cut"
    # TTFT without a goal: the model of the first-token instance (`ttft`), whose schedules are prefixes
    s.modelled = first_token_problem(s.problem) if s.prefix else s.problem
    s.nonzeros = nonzeros = _mip_nonzeros_estimate(s.modelled, s.batches, s.use_paths)
    clock = s.clock
    need = effort.build_seconds(nonzeros) + effort.root_seconds(nonzeros) + FINISH_RESERVE_SECONDS
    if not s.limited or (clock.allows(need) and clock.wall_left() >= need):
        return None
    if clock.allows(need):  # the nominal budget had room: the wall clock decided
        clock.wall_cut = True
    s.skipped.append(f"the MIP (about {nonzeros:,} nonzeros: {effort.build_seconds(nonzeros):.2g} s to build and "
                     f"{effort.root_seconds(nonzeros):.2g} s for its presolve and root, {clock.left():.2g} s left)")
    stats = {"J": s.batches, "formulation": "paths" if s.use_paths else "bigm", "combinatorial_bound": s.comb,
             "prefill_cut_bound": s.cut_bound, "proof": None, "mip_objective": None, **s.budget_stats()}
    result = _candidate_result(s.problem, s.objective, s.solver, s.candidates, s.comb_or_cut, s.cut_source, "",
                               stats, time.perf_counter() - s.t0)
    return s.finished(result, result.message if result.solution is None else
                      f"best heuristic schedule: {result.message}")


def _build_mip(s: _MipState) -> None:
    """The path model (`flow_formulation`) or the big-M model (`formulation`); its build is charged."""
    if s.use_paths:
        s.bm = build_flow_model(s.problem, s.batches, s.goal, s.least_prefill)
    else:
        s.bm = build_model(s.modelled, s.batches, s.objective, s.goal, cuts=s.cuts)
    s.nonzeros = int(s.bm.model.matrix.nnz)
    s.clock.charge(effort.build_seconds(s.nonzeros))


def _warm_start(s: _MipState) -> None:
    """The best candidate (meeting the goal) whose image in the model is a feasible point."""
    problem, bm = s.problem, s.bm
    for name, (sched, _) in sorted(s.candidates.items(), key=lambda kv: kv[1][1]):
        if s.goal is not None and s.latencies.get(name, validate_schedule(problem, sched).objective) > s.goal + 1e-12:
            continue
        if s.use_paths:
            sched = normalize_schedule(problem, sched)
            x0 = None if sched is None else flow_warm_start(problem, bm, sched)
        else:
            x0 = warm_start_vector(s.modelled, bm, ttft_prefix(s.modelled, sched) if s.prefix else sched)
        if x0 is not None and bm.model.max_violation(x0) <= 1e-6:
            s.x0, s.best_name = x0, name
            return


def _solve_mip(s: _MipState) -> None:
    """Solve; a warm-started answer whose objective is not its point's value is solved again without the start."""
    s.build_seconds = time.perf_counter() - s.t0
    s.unit = unit = time_unit(s.problem)  # the same for the first-token instance (same costs)
    out, s.node_limit = s.run_mip(s.x0)
    if out.x is not None and out.objective is not None:
        s.solver_mismatch = objective_mismatch(out.objective / unit, model_value(s.bm.model, out.x) / unit,
                                               first_name="solver-reported objective",
                                               second_name="the model's value at the returned point")
        retry_cost = effort.root_seconds(s.nonzeros)
        if s.solver_mismatch and s.x0 is not None and (
                not s.limited or s.clock.allows(retry_cost + FINISH_RESERVE_SECONDS)):
            again, s.node_limit = s.run_mip(None)
            if again.x is not None and again.objective is not None and not objective_mismatch(
                    again.objective / unit, model_value(s.bm.model, again.x) / unit):
                out, s.resolved = again, True
                s.solver_mismatch = ""
    s.out = out
    s.mip_objective = out.objective / unit if out.objective is not None else None
    s.mip_value = model_value(s.bm.model, out.x) / unit if out.x is not None else None
    s.model_bound = out.bound / unit if out.bound is not None and np.isfinite(out.bound) else None
    s.bound, s.bound_source = s.global_bound(s.restricted)
    s.stats = {"J": s.batches, "columns": s.bm.model.num_cols, "rows": s.bm.model.num_rows,
               "integer_columns": s.bm.model.num_integer, "warm_start": s.best_name, "nodes": out.node_count,
               "node_limit": s.node_limit, "combinatorial_bound": s.comb,
               "formulation": "paths" if s.use_paths else "bigm",
               "least_prefill_batches": s.least_prefill, "prefill_cut_bound": s.cut_bound,
               "first_token_model": s.prefix, "J_sufficient": s.needed, "resolved_without_warm_start": s.resolved,
               "proof": "MIP" if out.status == SolveStatus.OPTIMAL else None,
               "mip_objective": s.mip_objective, "mip_point_value": s.mip_value}


def _no_mip_plan(s: _MipState) -> Result:
    """The MIP gave no plan: infeasible (diagnosed), or the best candidate with the bound."""
    out = s.out
    message = out.message
    if out.status == SolveStatus.INFEASIBLE:
        diag = diagnose_infeasibility(s.bm.model, s.solver, time_limit_per_test=5.0)
        what = "no schedule meets the latency goal" if s.goal is not None and not s.restricted else \
            f"no schedule within J={s.batches} batches"
        return Result(family=FAMILY, method=s.method, solver=s.solver, status=out.status, objective=None,
                      bound=s.bound, solve_seconds=out.seconds, solution=None, build_seconds=s.build_seconds,
                      message=s.noted(f"{what} ({diag.summary()})"), bound_source=s.bound_source,
                      stats={**s.stats, **s.budget_stats()})
    result = _candidate_result(s.problem, s.objective, s.solver, s.candidates, s.bound, s.bound_source,
                               f"the MIP found no schedule ({message or out.status.value}); best heuristic schedule",
                               s.stats, out.seconds)
    return s.finished(replace(result, build_seconds=s.build_seconds))


def _validate_plan(s: _MipState) -> None:
    """Extract the plan (completed on the first-token instance), replay it in the validator and reconcile the
    status (`planner.core.agreement`); a better candidate replaces a worse MIP plan."""
    problem, objective, out = s.problem, s.objective, s.out
    schedule = extract_flow_schedule(problem, s.bm, out.x) if s.use_paths else extract_schedule(s.modelled, s.bm,
                                                                                                 out.x)
    if s.prefix:  # a schedule of the first-token instance: evict after first tokens, then finish every request
        schedule = complete_schedule(problem, ttft_prefix(problem, schedule))
    s.schedule, s.report = schedule, validate_schedule(problem, schedule, objective)
    s.status = out.status
    s.messages = [out.message] if out.message else []
    if not s.report.feasible:
        s.status = SolveStatus.ERROR
        s.messages.append("MIP schedule failed validation: " + s.report.summary())
        return
    replay_mismatch = objective_mismatch(s.mip_value, s.report.objective)
    s.status, why = reconcile_status(s.status, s.solver_mismatch, replay_mismatch)
    s.messages.append(why)
    if s.restricted and s.status == SolveStatus.OPTIMAL:
        # the model's optimum is global if every better schedule fits J batches (`_batches_admitting`)
        admitting = _batches_admitting(problem, objective, s.goal, s.report.objective)
        s.restricted = admitting is None or s.batches < admitting
        s.stats["J_sufficient"] = admitting
        s.bound, s.bound_source = s.global_bound(s.restricted)
    if s.restricted and s.status == SolveStatus.OPTIMAL:
        s.status = SolveStatus.FEASIBLE
        s.messages.append(f"optimal among schedules of at most J={s.batches} batches only (an optimal schedule may "
                          f"need {s.needed if s.needed is not None else 'more'})")
    best_candidate = min(s.candidates.items(), key=lambda kv: kv[1][1]) if s.candidates else None
    if best_candidate is not None and best_candidate[1][1] < s.report.objective * (1 - 1e-12):
        name, (cand, _) = best_candidate
        cand_report = validate_schedule(problem, cand, objective)
        if cand_report.feasible:
            s.messages.append(f"the MIP's schedule ({s.report.objective:.9g}) is worse than the {name} schedule, "
                              "which is reported")
            s.schedule, s.report = cand, cand_report
            s.status = SolveStatus.FEASIBLE


def _assemble(s: _MipState) -> Result:
    """Per-request metrics, the bound (withdrawn when above the validated objective) and the proof."""
    report, status, bound, bound_source = s.report, s.status, s.bound, s.bound_source
    schedule = s.schedule
    if report.feasible:
        schedule = _finish_metrics(s.problem, schedule, report)
        if bound > report.objective * (1 + 1e-9):
            s.messages.append(f"bound {bound:.9g} above the validated objective {report.objective:.9g}: withdrawn, "
                              f"{s.cut_source} reported")
            bound, bound_source = min(s.comb_or_cut, report.objective), s.cut_source
            if status == SolveStatus.OPTIMAL:
                status = SolveStatus.FEASIBLE
        if report.objective <= s.comb_or_cut * (1 + 1e-9) and status != SolveStatus.ERROR:
            status, s.stats["proof"] = SolveStatus.OPTIMAL, s.cut_source
        if status == SolveStatus.OPTIMAL:
            bound = min(bound, report.objective)
        else:
            s.stats["proof"] = None
    return Result(family=FAMILY, method=s.method, solver=s.solver, status=status,
                  objective=report.objective if report.feasible else None, bound=bound, solve_seconds=s.out.seconds,
                  solution=schedule, build_seconds=s.build_seconds,
                  message=s.noted("; ".join(m for m in s.messages if m)), validation=report,
                  bound_source=bound_source, stats={**s.stats, **s.budget_stats()})


#: The phases of `solve_batching`, in order (wall seconds of each in ``Result.stats["phases"]``).
MIP_PHASES: tuple[Phase, ...] = (
    Phase("precheck", _precheck),
    Phase("presets", _presets),
    Phase("order search", _order_search, lambda s: s.order_search and s.offline_latency and not s.bound_met()),
    Phase("rollouts", _rollouts, lambda s: s.rollout_search and s.offline_latency and not s.bound_met()
          and rollouts_applicable(s.problem)),
    Phase("lazy staggered", _lazy_staggered, lambda s: s.lazy_heuristic and s.offline_latency and not s.bound_met()),
    Phase("ttft prefixes", _ttft_prefixes, lambda s: s.objective == "ttft" and s.goal_scheduler is None),
    Phase("stop at bound", _stop_at_bound, lambda s: s.stop_at_bound and bool(s.candidates)
          and s.goal_scheduler is None),
    Phase("batch count", _batch_count),
    Phase("prefill test", _prefill_test, lambda s: s.use_paths),
    Phase("mip budget", _mip_budget),
    Phase("build mip", _build_mip),
    Phase("warm start", _warm_start, lambda s: s.warm_start and bool(s.candidates)),
    Phase("solve", _solve_mip),
    Phase("no plan", _no_mip_plan, lambda s: not s.out.status.has_solution),
    Phase("validate", _validate_plan),
    Phase("assemble", _assemble),
)
