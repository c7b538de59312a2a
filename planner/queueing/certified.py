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
   Otherwise the relaxation's own solution is read as a plan (`planner.queueing.lagrangian.relaxation_sequences`:
   groups by decreasing position from the end; it may break SLOs or miss swaps) and repaired by the
   same descent — the *Lagrangian heuristic*, kept if it meets every SLO and beats UB (on 2-queue
   instances the descents from the baselines stall far above it).  Then the **deadline Lagrangian** (`planner.queueing.lagrangian.deadline_lagrangian_bound`:
   the SLOs dualised with integer multipliers, the weighted sum of starts bounded by splitting the
   weighted groups into unit pieces, again an assignment) may raise LB; it runs at most
   `LAGRANGIAN_ROUNDS` rounds, ending by `LAGRANGIAN_SHARE` of the time limit; the plan of its
   relaxation at the best multipliers is repaired the same way.
4. If the gap is still open, **reduced-cost fixing** with the swap-aware bound's value LB₀ and duals:
   a cell (queue, group, position) with reduced cost > UB − LB₀ is in no plan better than UB (and,
   when the Lagrangian beat LB₀, also with its duals at the best multipliers,
   `planner.queueing.lagrangian_fixing`: a group's pieces sit back to back on one queue); if at
   most `reduced_cell_cap` cells remain (`MAX_REDUCED_CELLS`, and `REDUCED_CELLS_PER_SECOND` per
   second left under a time limit), the exact slots MILP over those cells
   (`planner.queueing.reduced_slots`) is solved, warm-started from UB, within the time left; if more remain (the bound is too weak for fixing to bite), the time left goes to an iterated
   local search (`planner.queueing.local_search.iterated_local_search`) for a better UB.  Every plan
   with penalty ≤ UB is in the reduced MILP, so its optimum is the global optimum and its dual bound,
   capped at UB, is a global lower bound.
5. The reported bound is the best of the three certified bounds; the gap is measured on Σ start.

**Repeatable under a time limit.**  Every share and budget above is counted in *nominal seconds*
(`planner.core.work.WorkClock`, charged from work counts by `planner.queueing.effort`: move
evaluations, Hungarian steps, matrix cells), not on the wall clock, so the same problem, seed and
time limit give the same plan and bound on every run (before, two 5 s runs of 200 × 2 ended 66 and
96 local-search rounds in and returned different plans).  The wall clock only guards: a phase is
also refused past 95 % of the limit in wall time (a much slower machine than the calibration; then
``stats["wall_cut"]`` is set and the message says the run may not repeat), and the reduced
slots MILP, the one HiGHS solve, gets the least of the nominal and the wall time left — a MILP
stopped by its time limit is the one remaining source of run-to-run differences.
``stats["work_spent"]`` = the nominal seconds charged (the MILP's own time is not).

Returns None when the pipeline does not apply (no plan meeting every SLO was found, or no bound can
be computed); the caller then runs the previous path (soft version and scale-up MILP).
"""

from __future__ import annotations

import time

import numpy as np

from planner.core.agreement import objective_mismatch
from planner.core.result import Result
from planner.core.work import WorkClock
from planner.queueing import effort
from planner.queueing.bounds import relaxation_data, swap_assignment_bound
from planner.queueing.lagrangian import deadline_lagrangian_bound, relaxation_sequences
from planner.queueing.lagrangian_fixing import lagrangian_reduced_costs
from planner.queueing.local_search import improve_plan, iterated_local_search
from planner.queueing.problem import QueueAssignment, QueueingProblem
from planner.queueing.reduced_slots import build_reduced_slots
from planner.queueing.validator import validate_assignment
from planner.solver import SolveOptions, SolveStatus, solve

#: Relative gap on Σ estimated start at which a plan counts as proven optimal.
OPTIMALITY_GAP = 1e-4
#: Further local-search starts run only if they are expected to end within this share of the time limit.
MULTI_START_SHARE = 0.4
#: Iterated local search (when the reduced MILP is too large): at most this many rounds without a
#: time limit, ending by ``ILS_SHARE`` of the time limit otherwise.
ILS_ROUNDS = 40
#: ... and, under a time limit (which then ends it), at most this many rounds: on small instances 40
#: rounds took a fifth of the 5 s and the rounds after still improved the plan.
ILS_ROUNDS_TIMED = 1_000
ILS_SHARE = 0.85
#: The local search from a relaxation's plan (the Lagrangian heuristic) runs only if, at twice the
#: pace of the first descent, it ends within this share of the time limit (`ILS_SHARE` after the Lagrangian).
RELAXATION_START_SHARE = 0.5
#: ... and only if twice the first descent takes at most this share of the time limit (on 400 × 8 a
#: descent takes ~0.5 s and the time is worth more to the Lagrangian bound).
RELAXATION_DESCENT_SHARE = 0.1
#: Lagrangian reduced-cost fixing (one more assignment solve) runs only when the swap-aware bound's
#: fixing leaves at most this multiple of `reduced_cell_cap` cells (it removed up to two thirds of the
#: cells in measurements, so beyond that the reduced MILP stays out of reach).
LAGRANGIAN_FIXING_REACH = 3.0
#: Deadline Lagrangian: at most this many multiplier rounds, ending by this share of the time limit.
LAGRANGIAN_ROUNDS = 20
LAGRANGIAN_SHARE = 0.6
#: HiGHS primal-heuristic effort in the reduced MILP.  It is warm-started from the local search, whose
#: plan was already optimal on every instance measured, so the default 0.05 mostly buys sub-MIPs:
#: 0 took trace-n60 from 33 s to 21 s and random 25 × 2 seeds 1 / 2 from 9.1 / 9.9 s to 5.6 / 7.9 s
#: (same plans and proofs; no change on 50 × 4 and 100 × 4).
REDUCED_MILP_HEURISTIC_EFFORT = 0.0
#: Seconds of the time limit kept back from the reduced MILP (reading the plan back, validation).
MILP_MARGIN_SECONDS = 0.15
#: Largest number of cells (binaries) left after reduced-cost fixing for which the MILP is tried.
MAX_REDUCED_CELLS = 60_000
#: ... and at most this many per second of the time left (with a time limit): measured on the random
#: instances, HiGHS closed 1,312 cells in 1.2 s but not 2,400–30,000 cells in 3–5 s (often not even
#: its root), where the iterated local search still improves the plan.
REDUCED_CELLS_PER_SECOND = 1_000


def reduced_cell_cap(clock: WorkClock) -> int:
    """Largest number of cells left by reduced-cost fixing for which the reduced slots MILP is tried
    (from the nominal seconds left on ``clock``)."""
    remaining = clock.left()
    if remaining is None:
        return MAX_REDUCED_CELLS
    return int(min(MAX_REDUCED_CELLS, REDUCED_CELLS_PER_SECOND * remaining))


def _gap_of_sum_start(problem: QueueingProblem, objective: float, bound: float) -> float:
    total_start = objective + float(problem.slo().sum())
    return max(objective - bound, 0.0) / max(abs(total_start), 1e-9)


def kept_mask(problem: QueueingProblem, bound, upper: float) -> np.ndarray:
    """(usable queue, group, slot) cells whose reduced cost ≤ UB − LB (all other cells are in no better plan)."""
    slack = upper - bound.value
    tolerance = 1e-7 * max(1.0, abs(upper) + abs(bound.value))
    return bound.reduced_costs(problem.num_groups) <= slack + tolerance


def kept_cells(problem: QueueingProblem, bound, upper: float, lagrangian: tuple[float, np.ndarray] | None = None,
               keep: np.ndarray | None = None) -> np.ndarray:
    """(queue, group, slot) cells kept by `kept_mask` (or by ``keep``, its value when already computed).

    ``lagrangian`` = (value(μ), least reduced cost per cell) of
    `planner.queueing.lagrangian_fixing.lagrangian_reduced_costs`: a cell must pass that test too."""
    keep = kept_mask(problem, bound, upper) if keep is None else keep.copy()
    if lagrangian is not None:
        value, lagrangian_reduced = lagrangian
        keep &= lagrangian_reduced <= upper - value + 1e-7 * max(1.0, abs(upper) + abs(value))
    local, group, slot = np.nonzero(keep)
    queue = np.array(bound.queues, dtype=np.int64)[local]
    return np.column_stack([queue, group, slot]).astype(np.int64)


def best_local_search(problem: QueueingProblem, starts: list[QueueAssignment],
                      clock: WorkClock) -> tuple[QueueAssignment | None, object, dict]:
    """The descent from each start in turn; the best plan meeting every SLO.

    The first start always runs; a further one only if, at the nominal pace of the first descent (× 3,
    a descent from a worse start takes longer), it would end within `MULTI_START_SHARE` of the time
    limit — so on large instances the time goes to one descent and the bound, not to restarts.
    ``info["descent_nominal_seconds"]`` = the nominal seconds per start."""
    best, best_report, info = None, None, {"local_search_starts": []}
    t0 = time.perf_counter()
    began = clock.spent
    first_seconds = 0.0
    for k, start in enumerate(starts):
        if k and not clock.allows(3.0 * first_seconds, MULTI_START_SHARE):
            break
        descent: dict = {}
        # the first descent always runs (on its nominal budget: a plan meeting every SLO must exist)
        improved = improve_plan(problem, start, clock=clock, info=descent, wall_guard=k > 0)
        if descent.get("budget_stop"):
            info["local_search_budget_stop"] = True
        for plan in (improved, start):
            clock.charge(effort.replay_seconds(problem.num_groups))
            report = validate_assignment(problem, plan)
            if report.feasible and (best is None or report.objective < best_report.objective - 1e-9):
                best, best_report = plan, report
                info["plan_from"] = f"local-search from {start.method}" if plan is not start else start.method
        info["local_search_starts"].append(start.method)
        if k == 0:
            first_seconds = clock.spent - began
    info["local_search_seconds"] = round(time.perf_counter() - t0, 4)
    info["descent_nominal_seconds"] = (clock.spent - began) / max(len(info["local_search_starts"]), 1)
    return best, best_report, info


def relaxation_plan(problem: QueueingProblem, queues: tuple[int, ...],
                    sequences: tuple[tuple[int, ...], ...], method: str) -> QueueAssignment:
    """A relaxation's plan (sequences per usable queue, in the order of ``queues``) as a full plan."""
    full: list[list[int]] = [[] for _ in problem.queues]
    for local, queue in enumerate(queues):
        full[queue] = list(sequences[local])
    return QueueAssignment.of(problem, full, method)


def repair_relaxation_plan(problem: QueueingProblem, start: QueueAssignment, objective: float,
                           clock: WorkClock | None = None):
    """The Lagrangian heuristic: the local search from a relaxation's plan; (plan, report) if it meets
    every SLO and beats ``objective``, else None."""
    plan = improve_plan(problem, start, clock=clock)
    if clock is not None:
        clock.charge(effort.replay_seconds(problem.num_groups))
    report = validate_assignment(problem, plan)
    if report.feasible and report.objective < objective - 1e-9:
        return plan, report
    return None


def adopt_repaired_relaxation(problem: QueueingProblem, queues: tuple[int, ...], sequences: tuple[tuple[int, ...], ...],
                              name: str, plan: QueueAssignment, report, lower: float, stats: dict,
                              clock: WorkClock | None = None):
    """The Lagrangian heuristic step shared by both relaxations: repair the relaxation's plan
    (``sequences`` per usable queue, `relaxation_plan`) by local search; if it meets every SLO and
    beats the incumbent ``plan`` (penalty ``report.objective``), it becomes the incumbent (the bound
    ``lower`` is capped at its penalty, ``stats["plan_from"]`` records it).  Returns (plan, report, lower)."""
    repaired = repair_relaxation_plan(problem, relaxation_plan(problem, queues, sequences, name), report.objective, clock)
    if repaired is None:
        return plan, report, lower
    plan, report = repaired
    stats["plan_from"] = f"local-search from the {name}'s plan"
    return plan, report, min(lower, report.objective)


def solve_certified(problem: QueueingProblem, starts: list[QueueAssignment], *, solver: str = "highs",
                    time_limit: float | None = None, threads: int | None = None, seed: int = 0,
                    verbose: bool = False, started: float | None = None,
                    clock: WorkClock | None = None, keep: dict | None = None) -> Result[QueueAssignment] | None:
    """Local search from ``starts`` (best first), the assignment bound, then (if needed) the reduced slots MILP.

    Every phase decides on ``clock`` (nominal seconds, `planner.core.work`; a new one for
    ``time_limit`` counted from ``started`` when not given), so a time-limited run is repeatable.
    When it returns None although the local search met every SLO (no bound could be computed), that
    plan and its validation go to ``keep`` (``plan``, ``report``, ``plan_from``), for the caller's fallback."""
    started = time.perf_counter() if started is None else started
    clock = WorkClock(time_limit, started) if clock is None else clock
    time_limit = clock.time_limit
    stats: dict = {"formulation": "certified"}
    plan, report, info = best_local_search(problem, starts, clock)
    stats.update(info)
    if plan is None:
        return None
    t0 = time.perf_counter()
    bound = swap_assignment_bound(problem, clock=clock)
    stats["bound_seconds"] = round(time.perf_counter() - t0, 4)
    if bound is None:
        if keep is not None:
            keep.update(plan=plan, report=report, plan_from=stats.get("plan_from", plan.method),
                        local_search_budget_stop=stats.get("local_search_budget_stop", False))
        return None
    objective = report.objective
    lower, bound_source = min(bound.value, objective), "swap-aware assignment relaxation (Hungarian, certified)"
    message = ""
    build_seconds = 0.0
    stats["assignment_bound"] = bound.value
    lagrangian = None
    descent_seconds = stats.pop("descent_nominal_seconds")
    cheap_descent = time_limit is None or 2.0 * descent_seconds <= RELAXATION_DESCENT_SHARE * time_limit
    if _gap_of_sum_start(problem, objective, lower) > OPTIMALITY_GAP and cheap_descent and \
            clock.allows(2.0 * descent_seconds, RELAXATION_START_SHARE):
        sequences = relaxation_sequences(len(bound.queues), np.arange(problem.num_groups),
                                         np.array([q for q, _ in bound.assignment]), np.array([r for _, r in bound.assignment]))
        plan, report, lower = adopt_repaired_relaxation(problem, bound.queues, sequences, "assignment relaxation",
                                                        plan, report, lower, stats, clock)
        objective = report.objective
    if _gap_of_sum_start(problem, objective, lower) > OPTIMALITY_GAP:
        t0 = time.perf_counter()
        lagrangian = deadline_lagrangian_bound(problem, objective, rounds=LAGRANGIAN_ROUNDS, clock=clock,
                                               share=LAGRANGIAN_SHARE)
        stats["lagrangian_seconds"] = round(time.perf_counter() - t0, 4)
        if lagrangian is not None:
            stats.update({"lagrangian_bound": lagrangian.value, "lagrangian_rounds": lagrangian.rounds})
            if min(lagrangian.value, objective) > lower + 1e-9:
                lower = min(lagrangian.value, objective)
                bound_source = "deadline Lagrangian (split-group assignment, certified)"
            if lagrangian.sequences and _gap_of_sum_start(problem, objective, lower) > OPTIMALITY_GAP and cheap_descent and \
                    clock.allows(2.0 * descent_seconds, ILS_SHARE):
                plan, report, lower = adopt_repaired_relaxation(problem, bound.queues, lagrangian.sequences,
                                                                "Lagrangian relaxation", plan, report, lower, stats, clock)
                objective = report.objective
    if _gap_of_sum_start(problem, objective, lower) > OPTIMALITY_GAP:
        lagrangian_fixing = None
        keep = kept_mask(problem, bound, objective)
        stats["cells_after_assignment_fixing"] = int(keep.sum())
        cell_cap = reduced_cell_cap(clock)
        if lagrangian is not None and lagrangian.value > bound.value + 1e-9 and lagrangian.multipliers.any() and \
                keep.sum() <= LAGRANGIAN_FIXING_REACH * cell_cap:
            t0 = time.perf_counter()
            lagrangian_fixing = lagrangian_reduced_costs(relaxation_data(problem), lagrangian.multipliers,
                                                         problem.num_groups, clock=clock)
            stats["lagrangian_fixing_seconds"] = round(time.perf_counter() - t0, 4)
        cells = kept_cells(problem, bound, objective, lagrangian_fixing, keep)
        stats["cells_after_fixing"] = len(cells)
        remaining = clock.left()
        if len(cells) > cell_cap:
            message = (f"reduced-cost fixing leaves {len(cells)} cells (> {cell_cap}): exact MILP skipped; "
                       f"bound = {bound_source}")
            t0 = time.perf_counter()
            improved, rounds = iterated_local_search(
                problem, plan, rounds=ILS_ROUNDS if time_limit is None else ILS_ROUNDS_TIMED, seed=seed, clock=clock,
                share=ILS_SHARE)
            clock.charge(effort.replay_seconds(problem.num_groups))
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
            clock.charge(effort.milp_build_seconds(len(cells)))
            # HiGHS stops on the wall clock: the least of the nominal and the wall-clock time left
            left = None if remaining is None else min(clock.left(), clock.wall_left())
            limit = None if left is None else max(left - MILP_MARGIN_SECONDS, 0.05)
            total_start = objective + float(problem.slo().sum())
            outcome = solve(milp.model, solver, SolveOptions(
                time_limit=limit, threads=threads, seed=seed, verbose=verbose, warm_start=warm, mip_rel_gap=1e-9,
                heuristic_effort=REDUCED_MILP_HEURISTIC_EFFORT,
                mip_abs_gap=0.5 * OPTIMALITY_GAP * max(total_start, 1e-6)))
            stats.update({"reduced_milp_status": outcome.status.value, "reduced_milp_seconds": round(outcome.seconds, 4),
                          "reduced_milp_nodes": outcome.node_count, **{f"reduced_{k}": n for k, n in milp.model.stats().items()}})
            mismatch = ""
            if outcome.x is not None and outcome.status.has_solution:
                candidate = QueueAssignment.of(problem, milp.sequences(problem, outcome.x), "milp-slots-reduced")
                candidate_report = validate_assignment(problem, candidate)
                # the MILP's bound is only as good as its objective: it must price its plan as the validator does
                mismatch = objective_mismatch(outcome.objective, candidate_report.objective,
                                              first_name="reduced slots MILP objective", second_name="the validator's")
                if candidate_report.feasible and candidate_report.objective < objective - 1e-9:
                    plan, report, objective = candidate, candidate_report, candidate_report.objective
                    stats["plan_from"] = "milp-slots-reduced (warm-started from the local search)"
            milp_bound = None
            if mismatch:
                message = f"{mismatch}: its bound is not used"
            elif outcome.status == SolveStatus.INFEASIBLE:
                milp_bound = objective  # no plan better than the incumbent uses the kept cells
            elif outcome.bound is not None:
                milp_bound = outcome.bound  # HiGHS's dual bound over the kept cells
            elif outcome.status == SolveStatus.OPTIMAL and outcome.objective is not None:
                milp_bound = outcome.objective
            if milp_bound is not None and min(milp_bound, objective) > lower:
                lower, bound_source = min(milp_bound, objective), "slots MILP after reduced-cost fixing (certified)"
            if outcome.status not in (SolveStatus.OPTIMAL, SolveStatus.INFEASIBLE) and not mismatch:
                message = f"reduced slots MILP: {outcome.message or outcome.status.value}"
    gap = _gap_of_sum_start(problem, objective, lower)
    stats["gap_of_sum_start"] = gap
    stats.update({"work_spent": round(clock.spent, 4), "wall_cut": clock.wall_cut})
    if stats.get("local_search_budget_stop"):
        message = (message + "; " if message else "") + \
            "the local search stopped on the time limit (its nominal budget) before reaching a local optimum"
    if clock.wall_cut:
        message = (message + "; " if message else "") + \
            ("the wall-clock guard stopped a phase before its nominal budget (a slower machine than the "
             "calibration of planner.queueing.effort): this run may not repeat exactly")
    status = SolveStatus.OPTIMAL if gap <= OPTIMALITY_GAP else SolveStatus.FEASIBLE
    if status == SolveStatus.FEASIBLE:
        message = (message + "; " if message else "") + f"gap on Σ start {100 * gap:.3f} % (not proven optimal)"
    stats["bound_source"] = bound_source
    stats["plan_method"] = plan.method
    stats.update({k: report.details[k] for k in ("swaps", "late_groups", "busy_s") if k in report.details})
    return Result("queueing", "milp", solver, status, objective, lower, time.perf_counter() - started, plan,
                  build_seconds, message, report, bound_source, stats)
