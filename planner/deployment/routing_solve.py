"""Routing: every router and the exact makespan MILP, validated (`planner.compare` compares them)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from planner.core.agreement import model_value, objective_mismatch, reconcile_status
from planner.core.phases import Phase, run_phases
from planner.core.result import Result, ValidationReport
from planner.core.work import WorkClock
from planner.deployment import effort
from planner.deployment.problem import RoutingProblem
from planner.deployment.routing import ROUTERS, local_search
from planner.deployment.routing_bound import (BOUND_ITERATIONS, GUIDED_SLACKS, MakespanBound, guided_routing,
                                               makespan, makespan_lower_bound)
from planner.deployment.routing_formulation import build_routing_model, symmetric_order
from planner.deployment.runner import run_heuristic
from planner.deployment.solution import RoutingSolution
from planner.deployment.validator import validate_routing
from planner.solver import LinearModel, SolveOptions, SolverOutcome, SolveStatus, VarBlock, relative_gap, solve

FAMILY = "routing"
#: Relative gap at which the makespan MILP stops (R||Cmax closes its last 0.01 % slowly; the gap is reported).
MIP_REL_GAP = 1e-4


def run_router(problem: RoutingProblem, method: str) -> Result[RoutingSolution]:
    """The router ``method`` (`routing.ROUTERS`), validated (`planner.deployment.runner.run_heuristic`: an
    invalid routing is an error with the routing kept)."""
    if method not in ROUTERS:
        raise KeyError(method)
    return run_heuristic(problem, method, ROUTERS[method], validate_routing, family=FAMILY,
                         none_message=f"{method} found no routing")


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


@dataclass
class _Routing:
    """The state of one `solve_routing` call, filled in by its phases (`PHASES`)."""

    problem: RoutingProblem
    solver: str
    threads: int | None
    seed: int
    warm_start: RoutingSolution | None
    mip_rel_gap: float
    clock: WorkClock
    t0: float
    phase_seconds: dict[str, float] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)
    bound: MakespanBound | None = None
    reserve: float = 0.0  # nominal seconds kept for validating the plan
    assign: np.ndarray | None = None  # the best routing of the search
    how: str = ""
    search_info: dict[str, Any] = field(default_factory=dict)  # what the local search did
    heuristic_span: float = np.inf
    model: LinearModel | None = None
    x: VarBlock | None = None
    pairs: tuple[np.ndarray, np.ndarray] | None = None
    build: float = 0.0
    stats: dict[str, Any] = field(default_factory=dict)
    node_limit: int | None = None
    milp_fits: bool = True
    outcome: SolverOutcome | None = None
    wall_cut: bool = False
    from_milp: bool = False
    solution: RoutingSolution | None = None
    report: ValidationReport | None = None

    @property
    def time_limit(self) -> float | None:
        return self.clock.time_limit

    @property
    def shape(self) -> tuple[int, int]:
        R, S = self.problem.processing_times.shape
        return R, S


def _bound_phase(s: _Routing) -> None:
    """The makespan bound (always), its ascent steps within `BOUND_SHARE` of the limit."""
    R, S = s.shape
    steps = BOUND_ITERATIONS
    if s.time_limit is not None:
        per_step = effort.bound_seconds(R * S, 1) - effort.bound_seconds(R * S, 0)
        affordable = int((BOUND_SHARE * s.time_limit - s.clock.spent - effort.bound_seconds(R * S, 0)) / per_step)
        steps = min(steps, max(affordable, 0))
    s.bound = makespan_lower_bound(s.problem, iterations=steps)
    s.clock.charge(effort.bound_seconds(R * S, s.bound.iterations))


def _search_phase(s: _Routing) -> None:
    """The guided routing and the local search (the warm start is polished too); the search may use what
    the MILP could not (decided on nominal sizes only, before the search)."""
    R, _ = s.shape
    s.reserve = effort.validate_seconds(R)
    share = SEARCH_SHARE
    if s.time_limit is not None:
        after_search = (1.0 - SEARCH_SHARE) * s.time_limit - s.reserve
        if effort.milp_nodes_within(after_search, routing_nonzeros(s.problem)) < MIN_MILP_NODES:
            share = 1.0 - s.reserve / s.time_limit
    def polish(assignment: np.ndarray) -> np.ndarray:
        return local_search(s.problem, assignment, clock=s.clock, share=share, info=s.search_info,
                            wall_reserve=WALL_RESERVE_FACTOR * s.reserve)

    s.clock.charge(effort.greedy_seconds(R) * len(GUIDED_SLACKS))
    assert s.bound is not None
    s.assign, _ = guided_routing(s.problem, s.bound, polish)
    s.how = "bound-guided greedy + local search"
    if s.warm_start is not None:
        other = polish(s.warm_start.as_array())
        if makespan(s.problem, other) < makespan(s.problem, s.assign):
            s.assign, s.how = other, f"{s.warm_start.method} + local search"
    s.heuristic_span = makespan(s.problem, s.assign)


def _build_phase(s: _Routing) -> None:
    """The makespan MILP (`routing_formulation.build_routing_model`) and its size."""
    started = time.perf_counter()
    s.model, s.x, s.pairs = build_routing_model(s.problem)
    s.build = time.perf_counter() - started
    assert s.bound is not None
    s.stats = {"variables": s.model.num_cols, "integer_variables": s.model.num_integer,
               "constraints": s.model.num_rows, "nonzeros": s.model.num_nonzeros, "warm_start": s.how,
               "mip_rel_gap": s.mip_rel_gap, "makespan_bound": s.bound.value,
               "makespan_bound_source": s.bound.source, "bound_ascent_steps": s.bound.iterations,
               "heuristic_makespan": s.heuristic_span, "local_search": dict(s.search_info)}


def _milp_budget_phase(s: _Routing) -> None:
    """Whether the MILP's build, root and `MIN_MILP_NODES` nodes fit in the nominal budget left, and its node limit."""
    if s.time_limit is None:
        return
    assert s.model is not None
    nz = s.model.num_nonzeros
    left = (s.clock.left() or 0.0) - s.reserve
    nodes = effort.milp_nodes_within(left, nz)
    s.milp_fits = nodes >= MIN_MILP_NODES and s.clock.allows(s.reserve, wall_reserve=WALL_RESERVE_FACTOR * s.reserve)
    if not s.milp_fits:
        root = effort.milp_build_seconds(nz) + effort.milp_root_seconds(nz)
        s.skipped.append(f"the MILP ({nz:,} nonzeros: about {root:.2g} s to build and solve its root, "
                         f"{max(left, 0.0):.2g} s left)")
    s.node_limit = 1 + nodes


def _milp_worth(s: _Routing) -> bool:
    """The MILP runs when it fits and the search's routing is not already within ``mip_rel_gap`` of the bound."""
    assert s.bound is not None
    return (s.milp_fits and s.heuristic_span > s.bound.value
            and relative_gap(s.heuristic_span, s.bound.value) > s.mip_rel_gap)


def warm_start_vector(problem: RoutingProblem, model: LinearModel, x: VarBlock, pairs: tuple[np.ndarray, np.ndarray],
                      assignment: np.ndarray) -> np.ndarray:
    """The MILP point of ``assignment``: its x columns and C = its makespan, with identical instances in the
    order the symmetry rows require (`routing_formulation.symmetric_order`), so it satisfies every row."""
    req, inst = pairs
    ordered = symmetric_order(problem, assignment)
    x0 = np.zeros(model.num_cols)
    x0[x.columns[ordered[req] == inst]] = 1.0
    x0[-1] = makespan(problem, ordered)
    return x0


def _milp_phase(s: _Routing) -> None:
    """The MILP warm-started from the search's routing, with the wall time left as its guard."""
    assert s.model is not None and s.x is not None and s.pairs is not None and s.assign is not None
    nz = s.model.num_nonzeros
    x0 = warm_start_vector(s.problem, s.model, s.x, s.pairs, s.assign)
    wall_left = None
    if s.time_limit is not None:
        s.clock.charge(effort.milp_build_seconds(nz))
        wall_left = max(s.clock.guard_share * s.time_limit - s.clock.wall_seconds()
                        - WALL_RESERVE_FACTOR * s.reserve, 0.0)
    s.outcome = solve(s.model, s.solver, SolveOptions(time_limit=wall_left, threads=s.threads, seed=s.seed,
                                                       warm_start=x0, mip_rel_gap=s.mip_rel_gap,
                                                       node_limit=s.node_limit))
    if s.time_limit is not None:
        s.clock.charge(effort.milp_root_seconds(nz) + effort.milp_node_seconds(nz) * (s.outcome.node_count or 0))
        if "time limit" in (s.outcome.message or "").lower():
            s.wall_cut = True
    s.stats.update(nodes=s.outcome.node_count, node_limit=s.node_limit, solver_seconds=round(s.outcome.seconds, 6),
                   warm_start_accepted=s.outcome.warm_start_accepted)


def _plan_phase(s: _Routing) -> None:
    """The plan: the MILP's when it is complete and no worse than the search's, else the search's; validated."""
    R, _ = s.shape
    assert s.assign is not None and s.pairs is not None and s.x is not None
    plan = s.assign
    if s.outcome is not None and s.outcome.status.has_solution and s.outcome.x is not None:
        req, inst = s.pairs
        values = s.x.values(s.outcome.x) > 0.5
        milp_assign = np.full(R, -1, dtype=np.int64)
        milp_assign[req[values]] = inst[values]
        if (milp_assign >= 0).all() and makespan(s.problem, milp_assign) <= s.heuristic_span:
            plan, s.from_milp = milp_assign, True
    s.solution = RoutingSolution.from_array(s.problem.request_ids, plan, "milp" if s.from_milp else "heuristic",
                                            tuple(inst.name for inst in s.problem.instances))
    s.report = validate_routing(s.problem, s.solution)
    s.clock.charge(s.reserve)


def _answer_phase(s: _Routing) -> Result[RoutingSolution]:
    """The status (`_status`), the notes on the time limit and the wall clock, and the result."""
    assert s.report is not None and s.bound is not None
    status, value, source, messages = _status(s)
    if status == SolveStatus.FEASIBLE and s.time_limit is not None and not messages:
        messages.append("time limit: best routing and bound")
    if s.skipped:
        messages.append("time limit: skipped " + ", ".join(s.skipped))
    s.stats["skipped"] = s.skipped
    s.stats["nominal_seconds"] = round(s.clock.spent, 6)
    s.stats["wall_cut"] = bool(s.wall_cut or s.clock.wall_cut)
    if s.stats["wall_cut"]:
        messages.append("the wall clock stopped a phase before its nominal budget (a slower or busier machine than "
                        "the calibration of planner.deployment.effort): this run may not repeat exactly")
    return Result(family=FAMILY, method="milp", solver=s.outcome.solver if s.outcome is not None else "heuristic",
                  status=status, objective=s.report.objective, bound=value, solve_seconds=time.perf_counter() - s.t0,
                  solution=s.solution, build_seconds=s.build, message=_join(*messages), validation=s.report,
                  bound_source=source, stats=s.stats)


def _status(s: _Routing) -> tuple[SolveStatus, float, str, list[str]]:
    """(status, bound, its source, messages).  The bound is the larger of the makespan bound and the MILP's
    dual bound; a valid routing within ``mip_rel_gap`` of it is optimal, unless the MILP's objective
    disagrees with its plan (then its dual bound proves nothing); an invalid routing is an error."""
    assert s.report is not None and s.bound is not None and s.model is not None
    outcome, report = s.outcome, s.report
    value, source = s.bound.value, s.bound.source
    if outcome is not None and outcome.bound is not None and outcome.bound > value:
        value, source = float(outcome.bound), "MILP dual bound"
    messages: list[str] = []
    status = SolveStatus.FEASIBLE
    if outcome is not None and outcome.status == SolveStatus.ERROR:
        status = SolveStatus.ERROR
        messages.append(_join(outcome.message or "the solver could not run",
                              "the bound-guided routing and the makespan bound are reported"))
    if report.feasible and relative_gap(report.objective, value) <= s.mip_rel_gap:
        status = SolveStatus.OPTIMAL  # within the MILP's own optimality gap of a valid bound
    if s.from_milp and outcome is not None:  # the MILP's optimality claim needs its objective to be the plan's
        status, disagreement = reconcile_status(
            status, objective_mismatch(outcome.objective, model_value(s.model, outcome.x), first_name="MILP makespan",
                                       second_name="the model's value at its point"),
            objective_mismatch(outcome.objective, report.objective, first_name="MILP makespan",
                               second_name="the validator's"))
        if disagreement:
            messages.append(disagreement)
            value, source = s.bound.value, s.bound.source
    if not report.feasible:
        status = SolveStatus.ERROR
        messages.append(f"validator: {report.summary()}")
    return status, value, source, messages


#: The pipeline of `solve_routing`, in order (`planner.core.phases`); ``stats["phases"]`` holds their wall seconds.
PHASES: tuple[Phase[_Routing, Result[RoutingSolution]], ...] = (
    Phase("bound", _bound_phase),
    Phase("search", _search_phase),
    Phase("build", _build_phase),
    Phase("milp_budget", _milp_budget_phase),
    Phase("milp", _milp_phase, when=_milp_worth),
    Phase("plan", _plan_phase),
    Phase("answer", _answer_phase),
)


def solve_routing(problem: RoutingProblem, *, solver: str = "highs", time_limit: float | None = None,
                  threads: int | None = None, seed: int = 0, warm_start: RoutingSolution | None = None,
                  mip_rel_gap: float = MIP_REL_GAP, started: float | None = None,
                  clock: WorkClock | None = None) -> Result[RoutingSolution]:
    """The makespan bound, a bound-guided routing polished by local search, then the makespan MILP: the
    phases of `PHASES`.

    ``bound`` (`routing_bound.makespan_lower_bound`, always: the result always carries a valid bound, see
    its proof), ``search`` (`routing_bound.guided_routing` with `routing.local_search`, and ``warm_start``
    polished too, when given), ``build``, ``milp_budget``, ``milp`` (warm-started from the best routing,
    put in the order of the symmetry rows: `warm_start_vector`), ``plan`` (the independent validator) and
    ``answer``.  The reported bound is the larger of the makespan bound and the MILP's dual bound; a
    routing within ``mip_rel_gap`` of it is optimal (the MILP's own criterion).

    ``time_limit`` covers the whole call and is spent in nominal seconds (`planner.deployment.effort`,
    a `WorkClock`): the bound's ascent gets at most `BOUND_SHARE` of it, the local search runs until
    `SEARCH_SHARE` is spent, and the MILP runs only if its build and root (estimated from its size)
    and at least `MIN_MILP_NODES` nodes fit in what is left, with a node limit from the nominal
    budget — so the same input, seed and limit give the same routing.  The wall clock is a guard: the
    MILP's time limit is the wall time left; when the guard stops a phase, ``stats.wall_cut`` is true
    and the message says the run may not repeat.  ``started``: the `time.perf_counter` time the
    caller's call began, when it read the instance first (the CLI): the guard counts from it and the
    reading is charged its nominal cost.  ``clock``: a caller's `WorkClock` (its time limit replaces
    ``time_limit``).  ``stats["phases"]``: wall seconds per phase run.
    """
    t0 = time.perf_counter()
    if clock is None:
        clock = WorkClock(time_limit, started if started is not None else t0)
        if started is not None:
            R, S = problem.processing_times.shape
            clock.charge(effort.routing_load_seconds(R, S))
    state = _Routing(problem=problem, solver=solver, threads=threads, seed=seed, warm_start=warm_start,
                     mip_rel_gap=mip_rel_gap, clock=clock, t0=t0)
    result = run_phases(PHASES, state)
    phases = {name: round(seconds, 6) for name, seconds in state.phase_seconds.items()}
    return replace(result, stats={**result.stats, "phases": phases})
