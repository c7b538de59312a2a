"""Exact optimum by a Dinkelbach loop over MILPs (through `planner.solver`, HiGHS by default), docs/formulations.md §2.

G = n / t is a ratio, so for a trial value λ (the incumbent's G, in req/s with t in seconds) the
parametric problem ``F(λ) = max over plans of n − λ·t`` is solved as one MILP.  ``F(λ) ≤ 0`` proves
that no plan beats λ (then G* = λ); a plan with ``n − λ·t > 0`` has G > λ and becomes the new
incumbent (Dinkelbach).  When the time limit stops a MILP with bound ``F̄ ≥ F(λ)``, every plan has
``n ≤ λ·t + F̄`` so ``G ≤ λ + F̄ / t_min`` with ``t_min`` a lower bound on t: the better of the
shortest execution times plus `batched_waiting_bound` and the dual bound of the t-only MILP (the
same model without SLO indicators, run for the last BOUND_SHARE of the time limit).

The model of one λ and its constraint families are `planner.priority.formulation`.
"""

from __future__ import annotations

import math
import time

import numpy as np

from planner.core.agreement import objective_mismatch
from planner.priority.evaluate import FastTables, evaluate
from planner.priority.exact import ExactOutcome, batched_waiting_bound
from planner.priority.heuristics import Plan
from planner.priority.problem import SUCCESS_TOLERANCE_MS, InstancePlan, PriorityProblem, PrioritySchedule
from planner.priority.validator import validate_schedule
from planner.priority.formulation import MilpLayout, build_parametric_model, decode_plan
from planner.solver import LinearModel, SolveOptions, SolveStatus, solve

PROOF_TOLERANCE = 1e-6
"""F(λ) ≤ this (in jobs) counts as ≤ 0: the proven G* is within PROOF_TOLERANCE / t_min of λ."""

BOUND_SHARE = 0.15
"""Share of the time limit kept for the lower bound on t when the parametric MILPs stop unproven."""

HEURISTIC_EFFORT = 0.0
"""HiGHS primal-heuristic effort in both MILPs.  The incumbent comes from outside (local search and
the branch-and-bound, passed as a MIP start), and at N = 30 the MILP rounds never improved it, while
HiGHS's default effort spent ~60 % of a 40 s round in sub-MIPs at the root (measured on the
N = 30, b_max = 2 benchmark instance, seed 0); off, the same time goes to cuts and nodes (bound)."""


def shortest_total_s(problem: PriorityProblem) -> float:
    """Lower bound on t (seconds): every job's shortest execution time plus the batched waiting bound."""
    mins = sorted(problem.tables.exec_ms.min(axis=1).tolist())
    return (sum(mins) + batched_waiting_bound(mins, problem.b_max)) / 1000.0


def warm_start_vector(problem: PriorityProblem, model: LinearModel, layout: MilpLayout, plan: Plan) -> np.ndarray:
    """The column values of ``plan`` (a MIP start)."""
    exec_s = problem.tables.exec_ms / 1000.0
    slack = problem.tables.slack_ms + SUCCESS_TOLERANCE_MS
    index = {arc: a for a, arc in enumerate(layout.arcs)}
    values = np.zeros(model.num_cols)
    position, wait_ms, start_s = 0, 0.0, 0.0
    for size in plan.sizes:
        a = index[(position, size)]
        for p in range(position, position + size):
            values[layout.start.col(p)] = start_s
        values[layout.used.col(a)] = 1.0
        batch = plan.order[position:position + size]
        for i in batch:
            values[layout.member.col(i, a)] = 1.0
            if wait_ms <= slack[i, size - 1] and model.col_upper[layout.success.col(i, a)] > 0.5:
                values[layout.success.col(i, a)] = 1.0
        longest = max(exec_s[i, size - 1] for i in batch)
        values[layout.duration.col(a)] = longest
        start_s += longest
        wait_ms += max(problem.tables.exec_ms[i, size - 1] for i in batch)
        position += size
    return values


def total_latency_lower_bound_s(problem: PriorityProblem, time_limit: float | None, threads: int = 1,
                                solver: str = "highs") -> float:
    """Lower bound on t (seconds): the better of `shortest_total_s` and the dual bound of the
    t-only MILP (``min t`` over all plans, SLOs ignored) after ``time_limit`` seconds."""
    simple = shortest_total_s(problem)
    if time_limit is not None and time_limit <= 0.05:
        return simple
    model, _ = build_parametric_model(problem, 1.0, count_slos=False)
    outcome = solve(model, solver, SolveOptions(time_limit=time_limit, threads=threads, heuristic_effort=HEURISTIC_EFFORT))
    if outcome.bound is None or not math.isfinite(outcome.bound):
        return simple
    return max(simple, -outcome.bound)


def solve_milp(problem: PriorityProblem, incumbent: Plan, time_limit: float | None = None,
               threads: int = 1, solver: str = "highs") -> ExactOutcome:
    """Dinkelbach over MILPs from ``incumbent``; proven when a MILP shows F(λ) ≤ PROOF_TOLERANCE.

    Under a time limit the MILPs get the first ``1 − BOUND_SHARE`` of it; if they stop unproven,
    the rest goes to the t-only MILP whose bound turns F̄ into a bound on G."""
    started = time.perf_counter()
    fast = FastTables(problem.tables)
    best = incumbent
    main_limit = None if time_limit is None else (1.0 - BOUND_SHARE) * time_limit
    rounds = 0
    nodes = 0
    bound_f = math.inf
    ratio = best.g
    status = "not started"
    disagreement = ""
    while True:
        ratio = best.met / (best.total_ms / 1000.0)
        remaining = None if main_limit is None else main_limit - (time.perf_counter() - started)
        if remaining is not None and remaining <= 0:
            bound_f, status = math.inf, "time limit"
            break
        model, layout = build_parametric_model(problem, ratio)
        options = SolveOptions(time_limit=remaining, threads=threads, mip_rel_gap=0.0, mip_abs_gap=PROOF_TOLERANCE,
                               warm_start=warm_start_vector(problem, model, layout, best),
                               heuristic_effort=HEURISTIC_EFFORT)
        outcome = solve(model, solver, options)
        rounds += 1
        nodes += outcome.node_count or 0
        finished = outcome.status == SolveStatus.OPTIMAL
        if outcome.x is not None:
            order, sizes = decode_plan(problem, layout, outcome.x)
            met, total = evaluate(fast, order, sizes)
            # a round that claims optimality must price its plan as the validator does (a stopped
            # round's incumbent may carry slack durations; it claims nothing)
            mismatch = validator_mismatch(problem, order, sizes, ratio, outcome.objective) if finished else ""
            if mismatch:  # the MILP priced its plan unlike the validator: its optimality proves nothing
                finished, disagreement = False, mismatch
                if met * best.total_ms > best.met * total * (1 + 1e-12):
                    best = Plan(tuple(order), tuple(sizes), met, total)
                bound_f, status = math.inf, "objective mismatch"
                break
            if met * best.total_ms > best.met * total * (1 + 1e-12):
                best = Plan(tuple(order), tuple(sizes), met, total)
                if finished:
                    continue  # Dinkelbach step; a stopped round keeps its bound at this λ below
        bound_f = outcome.bound if outcome.bound is not None and math.isfinite(outcome.bound) else math.inf
        status = outcome.status.value
        if finished and bound_f <= PROOF_TOLERANCE:
            return ExactOutcome(best, True, best.g, nodes, time.perf_counter() - started,
                                f"proven in {rounds} MILP rounds")
        break
    left = None if time_limit is None else time_limit - (time.perf_counter() - started)
    t_min_s = (total_latency_lower_bound_s(problem, left, threads, solver) if math.isfinite(bound_f)
               else shortest_total_s(problem))
    bound_g = problem.size / t_min_s
    if math.isfinite(bound_f):  # F̄ bounds n − ratio·t of every plan, with ratio the λ of the last round
        bound_g = min(bound_g, ratio + max(bound_f, 0.0) / t_min_s)
    bound_g = max(bound_g, best.g)
    if disagreement:
        return ExactOutcome(best, False, bound_g, nodes, time.perf_counter() - started,
                            f"{disagreement}: not reported optimal; G ≤ {bound_g:.6g} (t ≥ {t_min_s:.4g} s)")
    return ExactOutcome(best, False, bound_g, nodes, time.perf_counter() - started,
                        f"MILP stopped ({status}) after {rounds} rounds: n − λ·t ≤ {bound_f:.4g} at λ = {ratio:.6g}, "
                        f"t ≥ {t_min_s:.4g} s")


def validator_mismatch(problem: PriorityProblem, order: list[int], sizes: list[int], ratio: float,
                       milp_value: float | None) -> str:
    """"" when the MILP's objective ``n − λ·t`` (t in s, λ = ``ratio``) at its plan equals the independent
    validator's recomputation of that plan within 1e-6 relative (and 1e-6·N absolute, the objective
    being a difference of two numbers near N); else the line naming both values."""
    schedule = PrioritySchedule(plans=(InstancePlan(order=tuple(order), batch_sizes=tuple(sizes)),),
                                job_names=tuple(j.name for j in problem.jobs), met=0, total_latency_ms=0.0)
    report = validate_schedule(problem, schedule)
    recomputed = report.details["slo_met"] - ratio * report.details["total_latency_ms"] / 1000.0
    return objective_mismatch(milp_value, recomputed, first_name="MILP objective n − λ·t",
                              second_name="the validator's", abs_tol=1e-6 * max(1, problem.size))
