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

import math
import time
from dataclasses import dataclass, field

import numpy as np

from planner.core.agreement import objective_mismatch
from planner.core.contract import RunOptions
from planner.core.phases import Phase, run_phases
from planner.core.result import Result, ValidationReport
from planner.core.work import WorkClock
from planner.queueing import effort
from planner.queueing.bounds import AssignmentBound, relaxation_data, swap_assignment_bound
from planner.queueing.lagrangian import LagrangianBound, deadline_lagrangian_bound, relaxation_sequences
from planner.queueing.lagrangian_fixing import lagrangian_reduced_costs
from planner.queueing.local_search import improve_plan, iterated_local_search
from planner.queueing.problem import QueueAssignment, QueueingProblem
from planner.queueing.reduced_slots import ReducedSlotsMilp, build_reduced_slots
from planner.queueing.validator import validate_assignment
from planner.solver import SolveOptions, SolverOutcome, SolveStatus, solve

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


@dataclass(frozen=True)
class _NoCertificate:
    """The pipeline does not apply (no plan meeting every SLO, or no bound): `solve_certified` returns None."""


@dataclass
class _Cert:
    """The state the certified pipeline's phases share: the incumbent (plan, its validation), the best
    certified lower bound and its source, the message and the stats."""

    problem: QueueingProblem
    starts: list[QueueAssignment]
    options: RunOptions
    verbose: bool
    started: float
    clock: WorkClock
    keep: dict | None
    stats: dict = field(default_factory=lambda: {"formulation": "certified"})
    plan: QueueAssignment | None = None
    report: ValidationReport | None = None
    bound: AssignmentBound | None = None
    lower: float = -math.inf
    bound_source: str = "swap-aware assignment relaxation (Hungarian, certified)"
    message: str = ""
    build_seconds: float = 0.0
    lagrangian: LagrangianBound | None = None
    descent_seconds: float = 0.0
    cheap_descent: bool = False
    cells: np.ndarray | None = None
    cell_cap: int = 0
    phase_seconds: dict[str, float] = field(default_factory=dict)

    @property
    def objective(self) -> float:
        return self.incumbent[1].objective

    @property
    def incumbent(self) -> tuple[QueueAssignment, ValidationReport]:
        if self.plan is None or self.report is None:
            raise RuntimeError("the certified pipeline has no plan yet")
        return self.plan, self.report

    @property
    def assignment(self) -> AssignmentBound:
        if self.bound is None:
            raise RuntimeError("the certified pipeline has no assignment bound yet")
        return self.bound

    def gap_open(self) -> bool:
        return _gap_of_sum_start(self.problem, self.objective, self.lower) > OPTIMALITY_GAP

    def adopt(self, sequences: tuple[tuple[int, ...], ...], name: str) -> None:
        """The Lagrangian heuristic from a relaxation's ``sequences`` (`adopt_repaired_relaxation`)."""
        plan, report = self.incumbent
        self.plan, self.report, self.lower = adopt_repaired_relaxation(
            self.problem, self.assignment.queues, sequences, name, plan, report, self.lower, self.stats, self.clock)


def _local_search(s: _Cert) -> _NoCertificate | None:
    """Step 1: the descent from the starts (`best_local_search`); no plan meeting every SLO ends the pipeline."""
    plan, report, info = best_local_search(s.problem, s.starts, s.clock)
    s.stats.update(info)
    if plan is None:
        return _NoCertificate()
    s.plan, s.report = plan, report
    return None


def _assignment_bound(s: _Cert) -> _NoCertificate | None:
    """Step 2: the swap-aware assignment bound; without one the plan goes to ``keep`` and the pipeline ends."""
    t0 = time.perf_counter()
    s.bound = swap_assignment_bound(s.problem, clock=s.clock)
    s.stats["bound_seconds"] = round(time.perf_counter() - t0, 4)
    plan, _ = s.incumbent
    if s.bound is None:
        if s.keep is not None:
            s.keep.update(plan=plan, report=s.report, plan_from=s.stats.get("plan_from", plan.method),
                          local_search_budget_stop=s.stats.get("local_search_budget_stop", False))
        return _NoCertificate()
    s.lower = min(s.bound.value, s.objective)
    s.stats["assignment_bound"] = s.bound.value
    s.descent_seconds = s.stats.pop("descent_nominal_seconds")
    time_limit = s.clock.time_limit
    s.cheap_descent = time_limit is None or 2.0 * s.descent_seconds <= RELAXATION_DESCENT_SHARE * time_limit
    return None


def _assignment_heuristic_applies(s: _Cert) -> bool:
    return s.gap_open() and s.cheap_descent and s.clock.allows(2.0 * s.descent_seconds, RELAXATION_START_SHARE)


def _assignment_heuristic(s: _Cert) -> None:
    """Step 3: the assignment relaxation's plan, repaired by the descent."""
    bound = s.assignment
    sequences = relaxation_sequences(len(bound.queues), np.arange(s.problem.num_groups),
                                     np.array([q for q, _ in bound.assignment]), np.array([r for _, r in bound.assignment]))
    s.adopt(sequences, "assignment relaxation")


def _lagrangian(s: _Cert) -> None:
    """Step 3: the deadline Lagrangian may raise the bound; its relaxation's plan is repaired the same way."""
    t0 = time.perf_counter()
    lagrangian = deadline_lagrangian_bound(s.problem, s.objective, rounds=LAGRANGIAN_ROUNDS, clock=s.clock,
                                           share=LAGRANGIAN_SHARE)
    s.stats["lagrangian_seconds"] = round(time.perf_counter() - t0, 4)
    s.lagrangian = lagrangian
    if lagrangian is None:
        return
    s.stats.update({"lagrangian_bound": lagrangian.value, "lagrangian_rounds": lagrangian.rounds})
    if min(lagrangian.value, s.objective) > s.lower + 1e-9:
        s.lower = min(lagrangian.value, s.objective)
        s.bound_source = "deadline Lagrangian (split-group assignment, certified)"
    if lagrangian.sequences and s.gap_open() and s.cheap_descent and \
            s.clock.allows(2.0 * s.descent_seconds, ILS_SHARE):
        s.adopt(lagrangian.sequences, "Lagrangian relaxation")


def _fixing(s: _Cert) -> None:
    """Step 4: reduced-cost fixing with the assignment bound's duals (and the Lagrangian's, when it is higher)."""
    bound, lagrangian = s.assignment, s.lagrangian
    lagrangian_fixing = None
    keep = kept_mask(s.problem, bound, s.objective)
    s.stats["cells_after_assignment_fixing"] = int(keep.sum())
    s.cell_cap = reduced_cell_cap(s.clock)
    if lagrangian is not None and lagrangian.value > bound.value + 1e-9 and lagrangian.multipliers.any() and \
            keep.sum() <= LAGRANGIAN_FIXING_REACH * s.cell_cap:
        t0 = time.perf_counter()
        lagrangian_fixing = lagrangian_reduced_costs(relaxation_data(s.problem), lagrangian.multipliers,
                                                     s.problem.num_groups, clock=s.clock)
        s.stats["lagrangian_fixing_seconds"] = round(time.perf_counter() - t0, 4)
    s.cells = kept_cells(s.problem, bound, s.objective, lagrangian_fixing, keep)
    s.stats["cells_after_fixing"] = len(s.cells)


def _too_many_cells(s: _Cert) -> bool:
    return s.cells is not None and len(s.cells) > s.cell_cap


def _few_cells(s: _Cert) -> bool:
    return s.cells is not None and len(s.cells) <= s.cell_cap


def _iterated_local_search(s: _Cert) -> None:
    """Step 4, too many cells left for the MILP: the time left goes to an iterated local search."""
    s.message = (f"reduced-cost fixing leaves {len(s.cells) if s.cells is not None else 0} cells (> {s.cell_cap}): "
                 f"exact MILP skipped; bound = {s.bound_source}")
    t0 = time.perf_counter()
    plan, _ = s.incumbent
    improved, rounds = iterated_local_search(
        s.problem, plan, rounds=ILS_ROUNDS if s.clock.time_limit is None else ILS_ROUNDS_TIMED, seed=s.options.seed,
        clock=s.clock, share=ILS_SHARE)
    s.clock.charge(effort.replay_seconds(s.problem.num_groups))
    improved_report = validate_assignment(s.problem, improved)
    s.stats.update({"ils_rounds": rounds, "ils_seconds": round(time.perf_counter() - t0, 4)})
    if improved_report.feasible and improved_report.objective < s.objective - 1e-9:
        s.plan, s.report = improved, improved_report
        s.stats["plan_from"] = f"iterated local search ({rounds} rounds) after {s.stats['plan_from']}"


def _reduced_milp(s: _Cert) -> None:
    """Step 4, few cells left: the exact slots MILP over them, warm-started from the plan; its dual bound,
    capped at the plan's penalty, is a global bound (its objective must be the validator's)."""
    remaining = s.clock.left()
    if remaining is not None and remaining <= 0.05:
        s.message = f"no time left for the reduced slots MILP; bound = {s.bound_source}"
        return
    assert s.cells is not None  # `_few_cells`
    problem, clock = s.problem, s.clock
    plan, _ = s.incumbent
    t0 = time.perf_counter()
    milp = build_reduced_slots(problem, s.cells)
    warm = milp.warm_start(problem, [list(q) for q in plan.queues])
    s.build_seconds = time.perf_counter() - t0
    clock.charge(effort.milp_build_seconds(len(s.cells)))
    # HiGHS stops on the wall clock: the least of the nominal and the wall-clock time left
    nominal_left, wall_left = clock.left(), clock.wall_left()
    left = None if nominal_left is None or wall_left is None else min(nominal_left, wall_left)
    limit = None if left is None else max(left - MILP_MARGIN_SECONDS, 0.05)
    total_start = s.objective + float(problem.slo().sum())
    outcome = solve(milp.model, s.options.solver, SolveOptions(
        time_limit=limit, threads=s.options.threads, seed=s.options.seed, verbose=s.verbose, warm_start=warm,
        mip_rel_gap=1e-9, heuristic_effort=REDUCED_MILP_HEURISTIC_EFFORT,
        mip_abs_gap=0.5 * OPTIMALITY_GAP * max(total_start, 1e-6)))
    s.stats.update({"reduced_milp_status": outcome.status.value, "reduced_milp_seconds": round(outcome.seconds, 4),
                    "reduced_milp_nodes": outcome.node_count, **{f"reduced_{k}": n for k, n in milp.model.stats().items()}})
    _read_reduced_outcome(s, milp, outcome)


def _read_reduced_outcome(s: _Cert, milp: ReducedSlotsMilp, outcome: SolverOutcome) -> None:
    """The reduced MILP's plan replaces a worse incumbent; its bound (dual bound, or the incumbent's
    penalty when no better plan uses the kept cells) raises the certified bound unless its objective
    is not the validator's."""
    problem = s.problem
    mismatch = ""
    if outcome.x is not None and outcome.status.has_solution:
        candidate = QueueAssignment.of(problem, milp.sequences(problem, outcome.x), "milp-slots-reduced")
        candidate_report = validate_assignment(problem, candidate)
        # the MILP's bound is only as good as its objective: it must price its plan as the validator does
        mismatch = objective_mismatch(outcome.objective, candidate_report.objective,
                                      first_name="reduced slots MILP objective", second_name="the validator's")
        if candidate_report.feasible and candidate_report.objective < s.objective - 1e-9:
            s.plan, s.report = candidate, candidate_report
            s.stats["plan_from"] = "milp-slots-reduced (warm-started from the local search)"
    milp_bound = None
    if mismatch:
        s.message = f"{mismatch}: its bound is not used"
    elif outcome.status == SolveStatus.INFEASIBLE:
        milp_bound = s.objective  # no plan better than the incumbent uses the kept cells
    elif outcome.bound is not None:
        milp_bound = outcome.bound  # HiGHS's dual bound over the kept cells
    elif outcome.status == SolveStatus.OPTIMAL and outcome.objective is not None:
        milp_bound = outcome.objective
    if milp_bound is not None and min(milp_bound, s.objective) > s.lower:
        s.lower, s.bound_source = min(milp_bound, s.objective), "slots MILP after reduced-cost fixing (certified)"
    if outcome.status not in (SolveStatus.OPTIMAL, SolveStatus.INFEASIBLE) and not mismatch:
        s.message = f"reduced slots MILP: {outcome.message or outcome.status.value}"


def _certificate(s: _Cert) -> Result[QueueAssignment]:
    """Step 5: the plan, the best certified bound and its source; optimal when the gap on Σ start is closed."""
    plan, report = s.incumbent
    clock, stats = s.clock, s.stats
    message = s.message
    gap = _gap_of_sum_start(s.problem, s.objective, s.lower)
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
    stats["bound_source"] = s.bound_source
    stats["plan_method"] = plan.method
    stats.update({k: report.details[k] for k in ("swaps", "late_groups", "busy_s") if k in report.details})
    stats["certified_phases"] = {name: round(seconds, 6) for name, seconds in s.phase_seconds.items()}
    return Result(family="queueing", method="milp", solver=s.options.solver, status=status, objective=s.objective, bound=s.lower,
                  solve_seconds=time.perf_counter() - s.started, solution=plan, build_seconds=s.build_seconds, message=message,
                  validation=report, bound_source=s.bound_source, stats=stats)


#: The certified pipeline, in order (`planner.core.phases`); the result's ``stats["certified_phases"]``
#: holds their wall seconds (the last one's not yet counted).
PHASES: tuple[Phase[_Cert, Result[QueueAssignment] | _NoCertificate], ...] = (
    Phase("local_search", _local_search),
    Phase("assignment_bound", _assignment_bound),
    Phase("assignment_heuristic", _assignment_heuristic, when=_assignment_heuristic_applies),
    Phase("lagrangian", _lagrangian, when=_Cert.gap_open),
    Phase("fixing", _fixing, when=_Cert.gap_open),
    Phase("iterated_local_search", _iterated_local_search, when=_too_many_cells),
    Phase("reduced_milp", _reduced_milp, when=_few_cells),
    Phase("certificate", _certificate),
)


def solve_certified(problem: QueueingProblem, starts: list[QueueAssignment], *, solver: str = "highs",
                    time_limit: float | None = None, threads: int | None = None, seed: int = 0,
                    verbose: bool = False, started: float | None = None,
                    clock: WorkClock | None = None, keep: dict | None = None) -> Result[QueueAssignment] | None:
    """Local search from ``starts`` (best first), the assignment bound, then (if needed) the reduced slots MILP:
    the phases of `PHASES`.

    Every phase decides on ``clock`` (nominal seconds, `planner.core.work`; a new one for
    ``time_limit`` counted from ``started`` when not given), so a time-limited run is repeatable.
    When it returns None although the local search met every SLO (no bound could be computed), that
    plan and its validation go to ``keep`` (``plan``, ``report``, ``plan_from``), for the caller's fallback."""
    started = time.perf_counter() if started is None else started
    clock = WorkClock(time_limit, started) if clock is None else clock
    state = _Cert(problem=problem, starts=starts, options=RunOptions(solver=solver, time_limit=clock.time_limit,
                                                                     threads=threads, seed=seed),
                  verbose=verbose, started=started, clock=clock, keep=keep)
    out = run_phases(PHASES, state)
    return None if isinstance(out, _NoCertificate) else out
