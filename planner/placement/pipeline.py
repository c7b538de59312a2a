"""Solving placement: the heuristics and the MIP pipeline.

`solve(problem, method, options)` is the family's entry (`planner.core.contract.FamilyHarness.run`).
`solve_placement` runs the MIP pipeline, a list of named phases (`PHASES`, `planner.core.phases`) over
one state (`_Run`): prechecks (a request no worker can serve is reported by name), the combinatorial
lower bound and the constraint-aware heuristics (the best one is the MIP's warm start and fixes the
number of candidate workers), the repacking LNS on large models, the MIP, and the independent
validator.  Solver trouble never loses what is known: a time limit returns the incumbent and the best
bound, an infeasible model names the conflicting constraint families.

A time limit covers the whole call and is spent in nominal seconds
(`planner.placement.effort`): phases that do not fit are skipped — the same
ones on every run — and listed in the result (``stats["skipped"]``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from planner.core.agreement import objective_mismatch, reconcile_status
from planner.core.contract import RunOptions
from planner.core.phases import Phase, run_phases
from planner.core.result import Result
from planner.core.work import WorkClock
from planner.errors import InfeasibleError
from planner.placement import effort
from planner.placement.bounds import LowerBound, lower_bound, precheck
from planner.placement.formulation import PlacementModel, build_model
from planner.placement.heuristics import CONSTRAINT_AWARE, HEURISTICS, Budget, SearchStopped
from planner.placement.improve import repack
from planner.placement.problem import PlacementArrays, PlacementProblem
from planner.placement.solution import PlacementSolution
from planner.placement.validator import validate_placement
from planner.solver import ProgressEvent, SolveOptions, SolverOutcome, SolveStatus, diagnose_infeasibility
from planner.solver import solve as solve_model

FAMILY = "placement"
#: Request–worker pairs above which the repacking LNS runs before the MIP.
REPACK_MIN_PAIRS = 20_000


def _infeasible_result(method: str, solver: str, message: str, seconds: float) -> Result[PlacementSolution]:
    return Result(family=FAMILY, method=method, solver=solver, status=SolveStatus.INFEASIBLE, objective=None, bound=None, solve_seconds=seconds, solution=None, message=message)


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
        return Result(family=FAMILY, method=method, solver="heuristic", status=SolveStatus.NO_SOLUTION, objective=None, bound=float(lb.value),
                      solve_seconds=time.perf_counter() - start, solution=None, message=str(exc), bound_source=lb.source)
    seconds = time.perf_counter() - start
    lb = bound or lower_bound(problem.arrays)
    report = validate_placement(problem, solution)
    objective = float(solution.workers_used)
    status = SolveStatus.OPTIMAL if report.feasible and objective <= lb.value else SolveStatus.FEASIBLE
    message = "" if report.feasible else f"validator: {report.summary()}"
    return Result(
        family=FAMILY, method=method, solver="heuristic", status=status, objective=objective, bound=float(lb.value), solve_seconds=seconds, solution=solution,
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


@dataclass(frozen=True)
class PlacementKnobs:
    """What only placement's MIP pipeline (`solve_placement`) takes besides `RunOptions`.

    ``verbose`` / ``progress``: the MIP solver's log and progress callback.  ``warm_start``: start the
    MIP from the best heuristic plan.  ``open_link``: the optional link rows of
    `formulation.define_open_link`.  ``diagnose``: name the conflicting constraint families of an
    infeasible MIP.  ``repack_seconds``: the repacking LNS budget (None: the default rule of
    `solve_placement`; 0: no repacking, and no "skipped" note).  ``phase``: called with a short text as
    each step starts (the CLI's status line).  ``started``: the `time.perf_counter` time the caller's
    call began, when it read the instance first (the CLI): the wall guard counts from it and the reading
    is charged its nominal cost.  ``clock``: a caller's `WorkClock`, already charged with what the call
    did before; its limit replaces ``RunOptions.time_limit``.
    """

    verbose: bool = False
    progress: Callable[[ProgressEvent], None] | None = None
    warm_start: bool = True
    open_link: bool = True
    diagnose: bool = True
    repack_seconds: float | None = None
    phase: Callable[[str], None] | None = None
    started: float | None = None
    clock: WorkClock | None = None


@dataclass(frozen=True)
class _MipSize:
    """The MIP as it would be built now: candidate workers, a bound on its request–worker pairs, and
    its nominal build and hand-over seconds (`effort.mip_build_seconds`, `effort.mip_handover_seconds`)."""

    candidates: int
    pairs_bound: int
    build: float
    handover: float

    @property
    def seconds(self) -> float:
        return self.build + self.handover


@dataclass
class _Run:
    """The state `solve_placement`'s phases share."""

    problem: PlacementProblem
    options: RunOptions
    knobs: PlacementKnobs
    clock: WorkClock
    t0: float
    lb: LowerBound = field(default_factory=lambda: LowerBound(0, ""))
    incumbent: Result[PlacementSolution] | None = None
    reserve: float = 0.0  # nominal seconds kept for validating the final plan
    skipped: list[str] = field(default_factory=list)
    repack_info: dict = field(default_factory=dict)
    size: _MipSize = _MipSize(0, 0, 0.0, 0.0)
    stats: dict = field(default_factory=dict)
    model: PlacementModel | None = None
    start: np.ndarray | None = None
    build_seconds: float = 0.0
    phase_seconds: dict[str, float] = field(default_factory=dict)

    @property
    def arrays(self) -> PlacementArrays:
        return self.problem.arrays

    @property
    def solver(self) -> str:
        return self.options.solver

    @property
    def cap(self) -> int | None:
        return self.arrays.max_workers

    @property
    def ongoing(self) -> int:
        return self.arrays.num_ongoing_workers

    @property
    def num_new(self) -> int:
        return len(self.arrays.new_indices)

    @property
    def incumbent_workers(self) -> int | None:
        return None if self.incumbent is None else int(_objective(self.incumbent))

    def say(self, text: str) -> None:
        if self.knobs.phase is not None:
            self.knobs.phase(text)

    def over_cap(self) -> bool:
        return self.cap is not None and self.lb.value > self.cap

    def mip_size(self) -> _MipSize:
        """The MIP's size now (`mip_candidates` of the incumbent)."""
        u = mip_candidates(self.num_new, self.ongoing, self.cap, self.incumbent_workers)
        pairs = effort.mip_pairs_upper(self.num_new, self.ongoing, u)
        return _MipSize(u, pairs, effort.mip_build_seconds(pairs, self.ongoing + u, self.num_new),
                        effort.mip_handover_seconds(pairs))

    def mip_fits(self) -> bool:
        """The MIP's build and hand-over take at most half the time left (it gets as long again to solve)."""
        left = self.clock.left()
        cost = self.size.seconds
        return left is None or (2 * cost <= left - self.reserve and self.clock.allows(cost + self.reserve))

    def offer(self, res: Result[PlacementSolution]) -> None:
        """Keep ``res`` as the incumbent if it is a validated plan better than the incumbent."""
        if res.solution is not None and res.validation and res.validation.feasible:
            if self.incumbent is None or _objective(res) < _objective(self.incumbent):
                self.incumbent = res


def _objective(res: Result[PlacementSolution]) -> float:
    """The objective of a result that has a plan (its workers used)."""
    if res.objective is None:
        raise ValueError(f"{res.method} has no plan")
    return res.objective


def _precheck(s: _Run) -> Result[PlacementSolution] | None:
    """A request no worker can serve: infeasible, named (`bounds.precheck`)."""
    problems = precheck(s.arrays)
    if not problems:
        return None
    more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
    return _infeasible_result("mip", s.solver, problems[0] + more, time.perf_counter() - s.t0)


def _heuristics(s: _Run) -> None:
    """The lower bound and the constraint-aware heuristics: the first always runs, the second if it
    ends within `HEURISTIC_SHARE` of the limit; the best validated plan is the incumbent."""
    s.say("lower bound and heuristics")
    s.lb = lower_bound(s.arrays)
    s.clock.charge(effort.setup_seconds(s.arrays.num_requests))
    last_cost = 0.0
    for k, name in enumerate(CONSTRAINT_AWARE):
        if k > 0 and not s.clock.allows(last_cost + s.reserve, share=HEURISTIC_SHARE):
            s.skipped.append(f"{name} (about {last_cost:.2g} s)")
            continue
        work: dict = {}
        res = run_heuristic(s.problem, name, seed=s.options.seed, bound=s.lb, work=work)
        check = effort.validate_seconds(s.arrays, res.solution.as_array()) if res.solution is not None else 0.0
        last_cost = effort.greedy_seconds(s.num_new, work) + check
        s.reserve = max(s.reserve, check)
        s.clock.charge(last_cost)
        s.offer(res)
    s.size = s.mip_size()


def _repack_worth(s: _Run) -> bool:
    """Repack a large model (more than `REPACK_MIN_PAIRS` pairs) whose incumbent is above the bound."""
    if s.incumbent is None or _objective(s.incumbent) <= s.lb.value:
        return False
    workers = s.incumbent_workers
    pairs = s.num_new * (s.ongoing + (workers - s.ongoing if workers is not None else s.num_new))
    return pairs > REPACK_MIN_PAIRS


def _repack_budget(s: _Run) -> float:
    """Nominal seconds for the repacking: ``repack_seconds``, by default half the limit, at most 30 s, or
    all of it when the MIP will not run; never more than the time left after the MIP's share."""
    time_limit = s.clock.time_limit
    will_solve = s.mip_fits() and not s.over_cap()
    budget = s.knobs.repack_seconds
    if budget is None:
        budget = 30.0 if time_limit is None else min(30.0, 0.5 * time_limit)
        if time_limit is not None and not will_solve:
            budget = float(time_limit)  # the MIP will not run: the repacking is the only improvement left
    left = s.clock.left()
    if left is not None:
        keep = s.reserve + (2 * s.size.seconds if will_solve else 0.0)
        budget = min(budget, left - keep)
    return budget


def _repack(s: _Run) -> None:
    """The repacking LNS (`improve.repack`) with the run's solver; its plan replaces a worse incumbent."""
    incumbent = s.incumbent
    if incumbent is None or incumbent.solution is None:
        return
    budget = _repack_budget(s)
    if budget < MIN_REPACK_SECONDS:
        if s.knobs.repack_seconds is None or s.knobs.repack_seconds > 0:  # an explicit 0 is no skip
            s.skipped.append(f"the repacking LNS ({max(budget, 0.0):.2g} s left for it)")
        return
    s.say(f"repacking (LNS): {s.incumbent_workers} workers, bound {s.lb.value}")
    time_limit = s.clock.time_limit
    deadline = None if time_limit is None else s.clock.started + s.clock.guard_share * time_limit  # inf: no guard
    improved = repack(s.problem, incumbent.solution, target_workers=s.lb.value, time_budget=budget,
                      solver=s.solver, seed=s.options.seed, deadline=deadline, info=s.repack_info)
    s.clock.charge(s.repack_info.get("nominal_seconds", 0.0))
    report = validate_placement(s.problem, improved)
    s.clock.charge(effort.validate_seconds(s.arrays, improved.as_array()))
    if report.feasible and improved.workers_used < _objective(incumbent):
        s.incumbent = Result(
            family=FAMILY, method=improved.method, solver="heuristic", status=SolveStatus.FEASIBLE,
            objective=float(improved.workers_used), bound=float(s.lb.value), solve_seconds=time.perf_counter() - s.t0,
            solution=improved, validation=report, bound_source=s.lb.source,
        )
    s.size = s.mip_size()


def _max_workers(s: _Run) -> Result[PlacementSolution] | None:
    """The lower bound above ``max_workers``: infeasible, with the bound that proves it."""
    if not s.over_cap():
        return None
    msg = f"no placement fits in max_workers={s.cap}: at least {s.lb.value} workers are needed ({s.lb.source})"
    return Result(
        family=FAMILY, method="mip", solver=s.solver, status=SolveStatus.INFEASIBLE, objective=None, bound=float(s.lb.value),
        solve_seconds=time.perf_counter() - s.t0, solution=None, message=msg, bound_source=s.lb.source,
    )


def _mip_budget(s: _Run) -> Result[PlacementSolution] | None:
    """The MIP is built only if it fits the time left (`_Run.mip_fits`); else the best heuristic plan."""
    s.stats = {
        "candidate_workers": s.size.candidates,
        "ongoing_workers": s.ongoing,
        "heuristic_seconds": round(time.perf_counter() - s.t0, 6),
        "lower_bound": s.lb.value,
        "lower_bound_source": s.lb.source,
    }
    if s.repack_info:
        s.stats["repack_rounds"] = s.repack_info.get("rounds")
    if s.mip_fits():
        return None
    left = s.clock.left() or 0.0
    s.skipped.append(
        f"the MIP (up to {s.size.pairs_bound:,} request-worker pairs: about {s.size.seconds:.2g} s to build "
        f"and hand to the solver, {max(left - s.reserve, 0.0):.2g} s left)"
    )
    return _without_mip(s)


def _build(s: _Run) -> None:
    """Build the MIP over the candidate workers, warm-started from the incumbent."""
    s.say("building the MIP")
    b0 = time.perf_counter()
    pm = build_model(s.problem, s.size.candidates, lower_bound=s.lb.value, open_link=s.knobs.open_link)
    s.build_seconds = time.perf_counter() - b0
    if s.knobs.warm_start and s.incumbent is not None and s.incumbent.solution is not None:
        s.start = pm.warm_start(s.problem, s.incumbent.solution)
    s.model = pm
    s.clock.charge(effort.mip_build_seconds(int(pm.slots.pair_request.size), s.ongoing + s.size.candidates, s.num_new))


def _solve_mip(s: _Run) -> Result[PlacementSolution] | None:
    """Solve the MIP within the wall time left, then read its outcome (`_mip_result`)."""
    pm = _built(s)
    time_limit = s.clock.time_limit
    remaining = None
    if time_limit is not None:
        # The solver stops on the wall clock whatever is done here: it gets the wall time left, less its
        # hand-over and the final validation (nominal estimates).
        handover = effort.mip_handover_seconds(int(pm.slots.pair_request.size))
        remaining = max(time_limit - s.clock.wall_seconds() - handover - s.reserve, 0.0)
    s.say(f"MIP ({s.solver})")
    outcome = solve_model(pm.model, s.solver, SolveOptions(
        time_limit=remaining, threads=s.options.threads, seed=s.options.seed, warm_start=s.start,
        progress=s.knobs.progress, verbose=s.knobs.verbose,
    ))
    s.stats = {
        **pm.model.stats(),
        **s.stats,
        "warm_start": None if s.start is None or s.incumbent is None else s.incumbent.method,
        "warm_start_accepted": outcome.warm_start_accepted,
        "nodes": outcome.node_count,
        "solver_seconds": round(outcome.seconds, 6),
    }
    _budget_stats(s)
    return _mip_result(s, outcome)


def _built(s: _Run) -> PlacementModel:
    if s.model is None:
        raise RuntimeError("the placement MIP was not built")
    return s.model


def _mip_result(s: _Run, outcome: SolverOutcome) -> Result[PlacementSolution]:
    """The result of the MIP's outcome: a solver error, an infeasible model, no plan, or a validated plan."""
    seconds = time.perf_counter() - s.t0
    if outcome.status == SolveStatus.ERROR:
        return _solver_error(s, outcome, seconds)
    if outcome.status == SolveStatus.INFEASIBLE:
        return _infeasible_mip(s, seconds)
    solution = None
    if outcome.x is not None:
        solution = _built(s).extract(s.problem, outcome.x, "mip")
    elif s.incumbent is not None:  # stopped before the solver reported a solution: keep the warm start
        solution = s.incumbent.solution
    bound_value, bound_source = float(s.lb.value), s.lb.source
    if outcome.bound is not None and math.ceil(outcome.bound - 1e-6) >= bound_value:
        bound_value, bound_source = float(math.ceil(outcome.bound - 1e-6)), f"{s.solver} dual bound"
    if solution is None:
        return Result(family=FAMILY, method="mip", solver=s.solver, status=SolveStatus.NO_SOLUTION, objective=None, bound=bound_value,
                      solve_seconds=seconds, solution=None, build_seconds=s.build_seconds,
                      message=_join(outcome.message or "no solution found within the time limit", _skipped_note(s.skipped)),
                      validation=None, bound_source=bound_source, stats=s.stats)
    return _validated(s, outcome, solution, bound_value, bound_source)


def _solver_error(s: _Run, outcome: SolverOutcome, seconds: float) -> Result[PlacementSolution]:
    """A solver error (e.g. the Gurobi licence): say so, but keep what the heuristics know.  A heuristic
    plan that meets the lower bound is optimal whatever the solver could do."""
    inc = s.incumbent
    proven = inc is not None and _objective(inc) <= s.lb.value
    message = outcome.message
    if inc is not None:
        message += (f"; the {inc.method} plan meets the lower bound ({s.lb.source}), so it is optimal" if proven else
                    "; the best heuristic plan and the lower bound are reported instead")
    return Result(
        family=FAMILY, method="mip", solver=s.solver, status=SolveStatus.OPTIMAL if proven else SolveStatus.ERROR,
        objective=inc.objective if inc else None, bound=float(s.lb.value), solve_seconds=seconds,
        solution=inc.solution if inc else None, build_seconds=s.build_seconds,
        message=_join(message, _skipped_note(s.skipped)), validation=inc.validation if inc else None,
        bound_source=s.lb.source, stats=s.stats,
    )


def _infeasible_mip(s: _Run, seconds: float) -> Result[PlacementSolution]:
    """An infeasible MIP, with the conflicting constraint families when ``diagnose`` is on."""
    message = "the placement MIP is infeasible" + (f" with at most max_workers={s.cap} workers" if s.cap is not None else "")
    if s.knobs.diagnose:
        message += "; " + diagnose_infeasibility(_built(s).model, s.solver).summary()
    return Result(family=FAMILY, method="mip", solver=s.solver, status=SolveStatus.INFEASIBLE, objective=None, bound=None,
                  solve_seconds=seconds, solution=None, build_seconds=s.build_seconds,
                  message=_join(message, _skipped_note(s.skipped)), validation=None, bound_source="", stats=s.stats)


def _validated(s: _Run, outcome: SolverOutcome, solution: PlacementSolution, bound_value: float,
               bound_source: str) -> Result[PlacementSolution]:
    """The plan, validated: optimal when it meets the bound; a MIP objective that is not the validator's
    proves nothing (neither its status nor its dual bound count)."""
    report = validate_placement(s.problem, solution)
    objective = float(solution.workers_used)
    mismatch = objective_mismatch(outcome.objective, objective, first_name="MIP objective",
                                  second_name="the validator's") if outcome.x is not None else ""
    if mismatch:
        bound_value, bound_source = float(s.lb.value), s.lb.source
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
    return Result(family=FAMILY, method="mip", solver=s.solver, status=status, objective=objective, bound=bound_value,
                  solve_seconds=time.perf_counter() - s.t0, solution=solution, build_seconds=s.build_seconds,
                  message=_join(message, _skipped_note(s.skipped)), validation=report, bound_source=bound_source,
                  stats=s.stats)


#: The MIP pipeline, in order (`planner.core.phases`); ``stats["phases"]`` holds their wall seconds.
PHASES: tuple[Phase[_Run, Result[PlacementSolution]], ...] = (
    Phase("precheck", _precheck),
    Phase("heuristics", _heuristics),
    Phase("repack", _repack, when=_repack_worth),
    Phase("max_workers", _max_workers),
    Phase("mip_budget", _mip_budget),
    Phase("build", _build),
    Phase("solve", _solve_mip),
)


def solve_placement(problem: PlacementProblem, options: RunOptions = RunOptions(),
                    knobs: PlacementKnobs = PlacementKnobs()) -> Result[PlacementSolution]:
    """Solve the placement MIP to proven optimality (or to the time limit): the phases of `PHASES`.

    ``precheck`` (a request no worker can serve is infeasible, named), ``heuristics`` (the lower bound
    and the constraint-aware heuristics; the best plan is the incumbent), ``repack`` (on large models —
    more than ``REPACK_MIN_PAIRS`` request–worker pairs, where the MIP's root LP alone is slow — the
    repacking LNS `improve.repack` tries to reach the lower bound for up to ``knobs.repack_seconds``,
    default half the time limit, at most 30 s, or all the time left when the MIP will not run; it uses
    the run's solver), ``max_workers`` (a lower bound above the cap is infeasible), ``mip_budget``,
    ``build`` (warm-started from the incumbent) and ``solve`` (the MIP, then the independent validator).

    ``options.time_limit`` covers the whole call — the heuristics, the repacking, the MIP's build and
    solve, the validation — and is spent in nominal seconds (`planner.placement.effort`, a `WorkClock`),
    so the phases that run are the same on every run: the first greedy heuristic always runs (it is the
    plan returned if nothing else fits), the second runs if it ends within `HEURISTIC_SHARE` of the
    limit, and the MIP is built only if its estimated build and hand-over to the solver take at most
    half the time left, so that it has at least as long again to solve.  What was skipped is listed in
    ``stats["skipped"]`` and the message.  The wall clock is a guard (the MIP's time limit never passes
    it; ``stats["wall_cut"]`` says when it decided).  ``stats["phases"]``: wall seconds per phase run.
    """
    t0 = time.perf_counter()
    clock = knobs.clock
    if clock is None:
        clock = WorkClock(options.time_limit, knobs.started if knobs.started is not None else t0)
        if knobs.started is not None:
            clock.charge(effort.load_seconds(problem.num_requests))
    state = _Run(problem=problem, options=options, knobs=knobs, clock=clock, t0=t0)
    result = run_phases(PHASES, state)
    phases = {name: round(seconds, 6) for name, seconds in state.phase_seconds.items()}
    return replace(result, stats={**result.stats, "phases": phases})


def solve(problem: PlacementProblem, method: str, options: RunOptions = RunOptions()) -> Result[PlacementSolution]:
    """One method on ``problem``: ``mip`` (`solve_placement`) or a heuristic (`run_heuristic`).

    A load balancer's pool-size search (minutes on large instances) stops within ``options.time_limit``,
    in nominal seconds (`planner.placement.effort`), as a ``no_solution`` result naming the sizes it tried.
    """
    if method == "mip":
        return solve_placement(problem, options)
    clock = WorkClock(options.time_limit)
    budget = None if options.time_limit is None else (clock.allows, clock.charge)
    return run_heuristic(problem, method, seed=options.seed, budget=budget)


def _join(*parts: str) -> str:
    return "; ".join(p for p in parts if p)


def _skipped_note(skipped: list[str]) -> str:
    return ("time limit: skipped " + ", ".join(skipped)) if skipped else ""


def _budget_stats(s: _Run) -> None:
    """What the time limit decided: the phases skipped, the nominal seconds spent, a wall-clock cut."""
    s.stats["skipped"] = list(s.skipped)
    s.stats["nominal_seconds"] = round(s.clock.spent, 6)
    s.stats["wall_cut"] = bool(s.clock.wall_cut or s.repack_info.get("wall_cut"))


def _without_mip(s: _Run) -> Result[PlacementSolution]:
    """The result when the time limit leaves no room for the MIP: the best heuristic plan and the lower bound."""
    _budget_stats(s)
    note = _skipped_note(s.skipped)
    seconds = time.perf_counter() - s.t0
    inc, lb = s.incumbent, s.lb
    if inc is None:
        return Result(family=FAMILY, method="mip", solver=s.solver, status=SolveStatus.NO_SOLUTION, objective=None, bound=float(lb.value),
                      solve_seconds=seconds, solution=None, build_seconds=0.0,
                      message=_join(note, "no heuristic plan meets every constraint"), validation=None, bound_source=lb.source, stats=s.stats)
    proven = _objective(inc) <= lb.value
    what = (f"the {inc.method} plan meets the lower bound ({lb.source}), so it is optimal" if proven
            else f"the {inc.method} plan and the lower bound are reported")
    return Result(
        family=FAMILY, method="mip", solver=s.solver, status=SolveStatus.OPTIMAL if proven else SolveStatus.FEASIBLE, objective=inc.objective,
        bound=inc.objective if proven else float(lb.value), solve_seconds=seconds, solution=inc.solution, build_seconds=0.0,
        message=_join(note, what), validation=inc.validation, bound_source=lb.source, stats=s.stats,
    )
