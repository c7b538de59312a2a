"""The certified pipeline for the penalty objective (hard SLOs): plan + proven lower bound, fast.

The core problem is R | family setups, deadlines | Σ S_j (unrelated queues, per-queue work W[g,i],
model-swap setups, SLO deadlines, minimise Σ estimated start).  The dense slots MILP cannot even find
a plan beyond ~50 groups; the model-block MILP is a restriction with a weak relaxation.  Instead:

1. **Primal**: the relocate / exchange descent of `planner.queueing.local_search` from the best
   baseline (and from the other baselines while time allows) → incumbent UB, the best plan meeting
   every SLO (validated by the independent validator).
2. **Bound**: the swap-aware assignment relaxation (`planner.queueing.bounds.swap_assignment_bound`:
   R||ΣC_j as a bipartite assignment group ↔ (queue, position from the end), plus one swap time for
   each group of a model other than the loaded one, minus cells late even at the head of a queue),
   solved by a compiled Hungarian method that also returns LP duals.  LB ≤ every feasible plan.
3. If ``(UB − LB) / Σ start ≤ OPTIMALITY_GAP`` the plan is optimal (within 0.01 %, certified).
   Otherwise the **deadline Lagrangian** (`planner.queueing.lagrangian.deadline_lagrangian_bound`:
   the SLOs dualised with integer multipliers, the weighted sum of starts bounded by splitting the
   weighted groups into unit pieces, again an assignment) may raise LB; it runs at most
   `LAGRANGIAN_ROUNDS` rounds, ending by `LAGRANGIAN_SHARE` of the time limit.
4. If the gap is still open, **reduced-cost fixing** with the swap-aware bound's value LB₀ and duals:
   a cell (queue, group, position) with reduced cost > UB − LB₀ is in no plan better than UB; if at
   most `MAX_REDUCED_CELLS` cells remain, the exact slots MILP over those cells
   (`planner.queueing.reduced_slots`) is solved, warm-started from UB, within the time left; if more remain (the bound is too weak for fixing to bite), the time left goes to an iterated
   local search (`planner.queueing.local_search.iterated_local_search`) for a better UB.  Every plan
   with penalty ≤ UB is in the reduced MILP, so its optimum is the global optimum and its dual bound,
   capped at UB, is a global lower bound.
5. The reported bound is the best of the three certified bounds; the gap is measured on Σ start.

Returns None when the pipeline does not apply (no plan meeting every SLO was found, or no bound can
be computed); the caller then runs the previous path (soft version and scale-up MILP).
"""

from __future__ import annotations

import time

import numpy as np

from planner.core.result import Result
from planner.queueing.bounds import swap_assignment_bound
from planner.queueing.lagrangian import deadline_lagrangian_bound
from planner.queueing.local_search import improve_plan, iterated_local_search
from planner.queueing.problem import QueueAssignment, QueueingProblem
from planner.queueing.reduced_slots import build_reduced_slots
from planner.queueing.validator import validate_assignment
from planner.solver import SolveOptions, SolveStatus, solve

#: Relative gap on Σ estimated start at which a plan counts as proven optimal.
OPTIMALITY_GAP = 1e-4
#: Further local-search starts run only if they are expected to end within this share of the time limit.
MULTI_START_SHARE = 0.4
#: Iterated local search (when the reduced MILP is too large): at most this many rounds, ending by
#: this share of the time limit.
ILS_ROUNDS = 40
ILS_SHARE = 0.85
#: Deadline Lagrangian: at most this many multiplier rounds, ending by this share of the time limit.
LAGRANGIAN_ROUNDS = 20
LAGRANGIAN_SHARE = 0.6
#: Seconds of the time limit kept back from the reduced MILP (reading the plan back, validation).
MILP_MARGIN_SECONDS = 0.15
#: Largest number of cells (binaries) left after reduced-cost fixing for which the MILP is tried.
MAX_REDUCED_CELLS = 60_000


def _gap_of_sum_start(problem: QueueingProblem, objective: float, bound: float) -> float:
    total_start = objective + float(problem.slo().sum())
    return max(objective - bound, 0.0) / max(abs(total_start), 1e-9)


def kept_cells(problem: QueueingProblem, bound, upper: float) -> np.ndarray:
    """(queue, group, slot) cells whose reduced cost ≤ UB − LB (all other cells are in no better plan)."""
    slack = upper - bound.value
    tolerance = 1e-7 * max(1.0, abs(upper) + abs(bound.value))
    reduced = bound.reduced_costs(problem.num_groups)  # (usable queues, groups, slots)
    keep = reduced <= slack + tolerance
    local, group, slot = np.nonzero(keep)
    queue = np.array(bound.queues, dtype=np.int64)[local]
    return np.column_stack([queue, group, slot]).astype(np.int64)


def best_local_search(problem: QueueingProblem, starts: list[QueueAssignment], time_limit: float | None,
                      started: float) -> tuple[QueueAssignment | None, object, dict]:
    """The descent from each start in turn; the best plan meeting every SLO.

    The first start always runs; a further one only if, at the pace of the first descent (× 3, a
    descent from a worse start takes longer), it would end within `MULTI_START_SHARE` of the time
    limit — so on large instances the time goes to one descent and the bound, not to restarts."""
    best, best_report, info = None, None, {"local_search_starts": []}
    t0 = time.perf_counter()
    first_seconds = 0.0
    for k, start in enumerate(starts):
        if k and time_limit is not None and (
                time.perf_counter() - started + 3.0 * first_seconds > MULTI_START_SHARE * time_limit):
            break
        for plan in (improve_plan(problem, start), start):
            report = validate_assignment(problem, plan)
            if report.feasible and (best is None or report.objective < best_report.objective - 1e-9):
                best, best_report = plan, report
                info["plan_from"] = f"local-search from {start.method}" if plan is not start else start.method
        info["local_search_starts"].append(start.method)
        if k == 0:
            first_seconds = time.perf_counter() - t0
    info["local_search_seconds"] = round(time.perf_counter() - t0, 4)
    return best, best_report, info


def solve_certified(problem: QueueingProblem, starts: list[QueueAssignment], *, solver: str = "highs",
                    time_limit: float | None = None, threads: int | None = None, seed: int = 0,
                    verbose: bool = False, started: float | None = None) -> Result[QueueAssignment] | None:
    """Local search from ``starts`` (best first), the assignment bound, then (if needed) the reduced slots MILP."""
    started = time.perf_counter() if started is None else started
    stats: dict = {"formulation": "certified"}
    plan, report, info = best_local_search(problem, starts, time_limit, started)
    stats.update(info)
    if plan is None:
        return None
    t0 = time.perf_counter()
    bound = swap_assignment_bound(problem)
    stats["bound_seconds"] = round(time.perf_counter() - t0, 4)
    if bound is None:
        return None
    objective = report.objective
    lower, bound_source = min(bound.value, objective), "swap-aware assignment relaxation (Hungarian, certified)"
    message = ""
    build_seconds = 0.0
    stats["assignment_bound"] = bound.value
    if _gap_of_sum_start(problem, objective, lower) > OPTIMALITY_GAP:
        t0 = time.perf_counter()
        deadline = None if time_limit is None else started + LAGRANGIAN_SHARE * time_limit
        lagrangian = deadline_lagrangian_bound(problem, objective, rounds=LAGRANGIAN_ROUNDS, deadline=deadline)
        stats["lagrangian_seconds"] = round(time.perf_counter() - t0, 4)
        if lagrangian is not None:
            stats.update({"lagrangian_bound": lagrangian.value, "lagrangian_rounds": lagrangian.rounds})
            if min(lagrangian.value, objective) > lower + 1e-9:
                lower = min(lagrangian.value, objective)
                bound_source = "deadline Lagrangian (split-group assignment, certified)"
    if _gap_of_sum_start(problem, objective, lower) > OPTIMALITY_GAP:
        cells = kept_cells(problem, bound, objective)
        stats["cells_after_fixing"] = len(cells)
        remaining = None if time_limit is None else time_limit - (time.perf_counter() - started)
        if len(cells) > MAX_REDUCED_CELLS:
            message = (f"reduced-cost fixing leaves {len(cells)} cells (> {MAX_REDUCED_CELLS}): exact MILP skipped; "
                       f"bound = {bound_source}")
            t0 = time.perf_counter()
            deadline = None if time_limit is None else started + ILS_SHARE * time_limit
            improved, rounds = iterated_local_search(problem, plan, rounds=ILS_ROUNDS, seed=seed, deadline=deadline)
            improved_report = validate_assignment(problem, improved)
            stats.update({"ils_rounds": rounds, "ils_seconds": round(time.perf_counter() - t0, 4)})
            if improved_report.feasible and improved_report.objective < objective - 1e-9:
                plan, report, objective = improved, improved_report, improved_report.objective
                stats["plan_from"] = f"iterated local search ({rounds} rounds) after {stats['plan_from']}"
        elif remaining is not None and remaining <= 0.05:
            message = f"no time left for the reduced slots MILP; bound = {bound_source}"
        else:
            t0 = time.perf_counter()
            milp = build_reduced_slots(problem, cells)
            warm = milp.warm_start(problem, [list(q) for q in plan.queues])
            build_seconds = time.perf_counter() - t0
            limit = None if remaining is None else max(remaining - build_seconds - MILP_MARGIN_SECONDS, 0.05)
            total_start = objective + float(problem.slo().sum())
            outcome = solve(milp.model, solver, SolveOptions(
                time_limit=limit, threads=threads, seed=seed, verbose=verbose, warm_start=warm, mip_rel_gap=1e-9,
                mip_abs_gap=0.5 * OPTIMALITY_GAP * max(total_start, 1e-6)))
            stats.update({"reduced_milp_status": outcome.status.value, "reduced_milp_seconds": round(outcome.seconds, 4),
                          "reduced_milp_nodes": outcome.node_count, **{f"reduced_{k}": n for k, n in milp.model.stats().items()}})
            if outcome.x is not None and outcome.status.has_solution:
                candidate = QueueAssignment.of(problem, milp.sequences(problem, outcome.x), "milp-slots-reduced")
                candidate_report = validate_assignment(problem, candidate)
                if candidate_report.feasible and candidate_report.objective < objective - 1e-9:
                    plan, report, objective = candidate, candidate_report, candidate_report.objective
                    stats["plan_from"] = "milp-slots-reduced (warm-started from the local search)"
            milp_bound = None
            if outcome.status == SolveStatus.INFEASIBLE:
                milp_bound = objective  # no plan better than the incumbent uses the kept cells
            elif outcome.bound is not None:
                milp_bound = outcome.bound  # HiGHS's dual bound over the kept cells
            elif outcome.status == SolveStatus.OPTIMAL and outcome.objective is not None:
                milp_bound = outcome.objective
            if milp_bound is not None and min(milp_bound, objective) > lower:
                lower, bound_source = min(milp_bound, objective), "slots MILP after reduced-cost fixing (certified)"
            if outcome.status not in (SolveStatus.OPTIMAL, SolveStatus.INFEASIBLE):
                message = f"reduced slots MILP: {outcome.message or outcome.status.value}"
    gap = _gap_of_sum_start(problem, objective, lower)
    stats["gap_of_sum_start"] = gap
    status = SolveStatus.OPTIMAL if gap <= OPTIMALITY_GAP else SolveStatus.FEASIBLE
    if status == SolveStatus.FEASIBLE:
        message = (message + "; " if message else "") + f"gap on Σ start {100 * gap:.3f} % (not proven optimal)"
    stats["bound_source"] = bound_source
    stats["plan_method"] = plan.method
    stats.update({k: report.details[k] for k in ("swaps", "late_groups", "busy_s") if k in report.details})
    return Result("queueing", "milp", solver, status, objective, lower, time.perf_counter() - started, plan,
                  build_seconds, message, report, bound_source, stats)
