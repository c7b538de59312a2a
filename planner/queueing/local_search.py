"""Local search on a queue plan: the primal side of the certified pipeline.

Starting from a plan (the best baseline), `improve_plan` runs the compiled descent of
`planner.queueing.compiled.local_search` on the existing (non-optional) queues: *relocate* one
group to the best position of any queue (its own included) and *exchange* two groups of different
queues, first improvement, until no move improves the score

    score = Σ_i estimate_i + LATENESS_WEIGHT · Σ_i max(0, estimate_i − slo_i)

(estimates replayed as the validator does: from the busy time, one swap time whenever the model
changes).  On a plan meeting every SLO the score is the penalty objective + Σ slo, so the descent
never makes a feasible plan worse or infeasible; on an infeasible start the lateness term drives it
towards feasibility.  The moves cover model-block changes implicitly (moving a group next to its
model's block removes swaps).  Deterministic: fixed scan order, no randomness.
A move counts only if it gains more than `planner.queueing.compiled.IMPROVEMENT_TOLERANCE` (1e-12) of the summed queue cost:
with estimates near the 10¹² s horizon the costs reach ~10¹⁶ and rounding alone made moves "gain" a
few units, so the first-improvement scan cycled without end.  Under a time limit the descent also
stops when its nominal work reaches what is left of the clock (`descent_budget`), checked inside the
compiled loop before each group it tries to move.
The returned plan is re-scored by the caller with the independent validator.

`iterated_local_search` perturbs the best plan (``KICK_SIZE`` groups moved to random positions of
random queues, numpy ``default_rng(seed)``; every other round, starting with the first, the groups
are drawn among those with the least SLO slack and moved near the head of a queue, where tight SLOs
push them) and descends again, keeping the better plan meeting every
SLO; it stops after ``rounds`` rounds or when, at the pace so far, the next round would end after
``share`` of the time limit of ``clock`` (a `planner.core.work.WorkClock`).  Pace and budget are
*nominal* seconds (`planner.queueing.effort`: counted steps × calibrated constants), not the wall
clock, so a time-limited run is repeatable; the clock's wall-clock guard (set ``clock.wall_cut``)
only stops it on a much slower machine.
"""

from __future__ import annotations

import math

import numpy as np

from planner.core.work import WorkClock
from planner.queueing import effort
from planner.queueing.problem import QueueAssignment, QueueingProblem
from planner.queueing.validator import replay, validate_assignment

MAX_PASSES = 100
#: Groups moved at random by one perturbation of `iterated_local_search`.
KICK_SIZE = 5
#: Descent passes after a perturbation (the plan is near a local optimum already).
KICK_PASSES = 4
#: Every other perturbation (the first included) moves groups drawn from the ``TIGHT_CANDIDATES``
#: groups with the least SLO slack in the best plan to one of the first ``TIGHT_FRONT`` positions.
TIGHT_CANDIDATES = 40
TIGHT_FRONT = 10


def improve_plan(problem: QueueingProblem, plan: QueueAssignment, max_passes: int = MAX_PASSES,
                 exchange: bool = True, clock: WorkClock | None = None, info: dict | None = None,
                 wall_guard: bool = True) -> QueueAssignment:
    """The plan after the relocate / exchange descent (method name ``local-search``); its nominal
    seconds (`planner.queueing.effort.search_seconds`) are charged to ``clock``.

    Under a time limit the descent stops when it has spent what is left of ``clock`` (`descent_budget`;
    ``wall_guard=False``: the nominal budget only, for a descent that must run even when the wall clock
    is nearly spent): the plan so far is returned (every move kept only improves it).  ``info`` (if
    given) receives ``budget_stop`` (True when that happened) and ``passes``."""
    from planner.queueing.compiled import local_search  # lazy: numba's import is slow

    queues, groups = problem.num_queues, problem.num_groups
    work = problem.queue_work()
    tail = problem.queue_tail()
    allowed = np.isfinite(work) & np.isfinite(tail)
    allowed &= np.array([not q.optional for q in problem.queues])[:, None]
    work = np.where(allowed, work, 0.0)
    own = np.where(allowed, work + tail, 0.0) if problem.deadline == "completion" else np.zeros_like(work)
    models = problem.models
    model_of = np.array([models.index(g.model) for g in problem.groups], dtype=np.int64)
    loaded = np.array([models.index(q.loaded_model) if q.loaded_model is not None else -1 for q in problem.queues],
                      dtype=np.int64)
    sequences = np.full((queues, max(groups, 1)), -1, dtype=np.int64)
    lengths = np.zeros(queues, dtype=np.int64)
    for g, seq in enumerate(plan.queues):
        sequences[g, :len(seq)] = seq
        lengths[g] = len(seq)
    counter = np.zeros(3, dtype=np.int64)
    budget, by_wall = descent_budget(clock, groups, wall_guard)
    passes = local_search(sequences, lengths, work, own, problem.slo(), problem.queue_swap(), problem.queue_busy(),
                          loaded, model_of, allowed, max_passes, exchange, counter,
                          -1.0 if budget is None else budget, effort.EVALUATION, effort.SCAN)
    if clock is not None:
        clock.charge(effort.search_seconds(counter, groups))
        if passes < 0 and by_wall:
            clock.wall_cut = True
    if info is not None:
        info.update(budget_stop=bool(passes < 0), passes=abs(int(passes)))
    return QueueAssignment.of(problem, [list(sequences[g, :lengths[g]]) for g in range(queues)], "local-search")


def descent_budget(clock: WorkClock | None, groups: int, wall_guard: bool = True) -> tuple[float | None, bool]:
    """(budget, set by the wall clock) of one descent: the nominal seconds left on ``clock`` for its move
    evaluations and scans (its set-up, `planner.queueing.effort.SEARCH_SETUP_PER_GROUP` per group,
    deducted), or — on a machine slower than the calibration, when less is left of the wall clock's
    guard (``guard_share`` of the time limit) — the wall seconds left.  (None, False) without a limit."""
    if clock is None or clock.time_limit is None:
        return None, False
    budget = max(clock.left() - effort.SEARCH_SETUP_PER_GROUP * groups, 0.0)
    if wall_guard and math.isfinite(clock.guard_share):
        wall = max(clock.guard_share * clock.time_limit - clock.wall_seconds(), 0.0)
        if wall < budget:
            return wall, True
    return budget, False


def iterated_local_search(problem: QueueingProblem, plan: QueueAssignment, *, rounds: int, seed: int = 0,
                          clock: WorkClock | None = None, share: float = 1.0) -> tuple[QueueAssignment, int]:
    """Perturb-and-descend rounds from ``plan`` (which must meet every SLO); (best plan, rounds run).
    With ``clock``, a round starts only if, at the nominal pace so far, it ends within ``share`` of
    the clock's time limit (every round's work is charged to it)."""
    rng = np.random.default_rng(seed)
    best, best_value = plan, validate_assignment(problem, plan).objective
    usable = [g for g, q in enumerate(problem.queues) if not q.optional]
    done = 0
    began = clock.spent if clock is not None else 0.0
    for round_index in range(rounds):
        if clock is not None:
            pace = (clock.spent - began) / done if done else 0.0
            if not clock.allows(pace, share):
                break  # the next round would end after the budget
        done += 1
        sequences = [list(seq) for seq in best.queues]
        tight = round_index % 2 == 0
        if tight:  # the groups closest to their SLO, moved near the head of a random queue
            if clock is not None:
                clock.charge(effort.replay_seconds(problem.num_groups))
            estimate = replay(problem, best)["estimate"]
            slack = np.array([problem.groups[i].slo_s - estimate[i] for i in range(problem.num_groups)])
            candidates = np.argsort(slack, kind="stable")[:TIGHT_CANDIDATES]
            movers = [int(i) for i in rng.choice(candidates, size=min(KICK_SIZE, len(candidates)), replace=False)]
        for k in range(KICK_SIZE if not tight else len(movers)):
            if tight:
                group = movers[k]
                for seq in sequences:
                    if group in seq:
                        seq.remove(group)
                        break
            else:
                source = [g for g in usable if sequences[g]]
                a = source[int(rng.integers(len(source)))]
                group = sequences[a].pop(int(rng.integers(len(sequences[a]))))
            fits = [g for g in usable if np.isfinite(problem.work_s[problem.queues[g].type_index, group])]
            b = fits[int(rng.integers(len(fits)))]
            last = min(len(sequences[b]), TIGHT_FRONT) if tight else len(sequences[b])
            sequences[b].insert(int(rng.integers(last + 1)), group)
        candidate = improve_plan(problem, QueueAssignment.of(problem, sequences, "kick"), max_passes=KICK_PASSES,
                                 clock=clock)
        report = validate_assignment(problem, candidate)
        if clock is not None:
            clock.charge(effort.replay_seconds(problem.num_groups))
        if report.feasible and report.objective < best_value - 1e-9:
            best, best_value = candidate, report.objective
    return QueueAssignment.of(problem, [list(seq) for seq in best.queues], "iterated-local-search"), done
