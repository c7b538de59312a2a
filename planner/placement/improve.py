"""Repacking LNS: a matheuristic that removes workers from a feasible placement.

Bin packing with many small items is easy to bound (volume) but hard to pack
tightly: first-fit and best-fit often end one worker above the bound, and a
MIP over all N × W pairs spends its time on the root LP.  The neighbourhood
search below closes that gap with *small* exact solves of the same
formulation:

1. target = the opened (non-ongoing) worker with the least load;
2. neighbourhood = the target plus the k − 1 workers with the most slack
   (ties and later rounds randomised with a seeded generator);
3. sub-MIP on the requests of those k workers, same constraint families, all
   k workers open and distinguishable, objective = the target's load
   (Σ normalised size of the requests left on it), warm-started with the
   current arrangement, stopped by a node limit and a 1 % gap (improvement,
   not optimality, is what the search needs; a node limit keeps it deterministic);
4. accept if the target's load fell; when it reaches zero the worker is gone.

It stops at the lower bound (then the plan is proven optimal), after
``max_rounds`` rounds or ``max_stall`` rounds without progress, or when the time
budget is spent.  The budget is spent in *nominal* seconds (`planner.core.work.WorkClock`):
each round is charged `effort.repack_round_seconds` of its sub-MIP's size and node
count, both deterministic, and a round starts only if one as costly as the last still
fits, so the rounds run — and the plan — are the same on every run for a seed and budget.  The wall clock is a guard only (the budget's share
`WALL_GUARD_SHARE`, or the caller's ``deadline``); when it stops the search, or a
sub-MIP stops on its time limit, ``info["wall_cut"]`` says so.  Every accepted state
is a feasible placement of the whole problem, because the constraints of a worker
involve only its own requests.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from planner.core.work import WorkClock
from planner.placement import effort
from planner.placement.formulation import PlacementModel, build_model
from planner.placement.problem import PlacementArrays, PlacementProblem, normalised_size
from planner.placement.solution import PlacementSolution
from planner.placement.state import first_new_label
from planner.solver import LinearModel, SolveOptions, solve


def _sub_problem(problem: PlacementProblem, members: np.ndarray, ongoing_ids: set[str]) -> PlacementProblem:
    reqs = tuple(problem.requests[int(i)] for i in members)
    ongoing = {rid: st for rid, st in problem.ongoing.items() if rid in ongoing_ids}
    return PlacementProblem(
        name=f"{problem.name}:repack",
        model=problem.model,
        worker=problem.worker,
        cost=problem.cost,
        slos=problem.slos,
        requests=reqs,
        ongoing=ongoing,
        options=problem.options.model_copy(update={"max_workers": None}),
    )


@dataclass
class _Round:
    """One repacking round's sub-MIP: the ``members`` (request indices) of the target and its neighbours,
    the sub-problem's model with the target's load as objective, its warm start, and the labels of the
    new workers (candidate u ↔ ``new_workers[u]``, the target first) from candidate label ``base`` on."""

    members: np.ndarray
    pm: PlacementModel
    model: LinearModel
    start: np.ndarray | None
    new_workers: list[int]
    base: int


def _pick(assignment: np.ndarray, size: np.ndarray, ongoing_labels: set[int], rng: np.random.Generator,
          stall: int, round_no: int, neighbourhood: int) -> tuple[int, list[int], float] | None:
    """The target (least-loaded opened worker; a random one among the 3 lightest after stalls), the
    neighbours with the most slack (randomised), and the target's load; None when no worker is movable."""
    labels = np.unique(assignment)
    load = {int(l): float(size[assignment == l].sum()) for l in labels}
    movable = [int(l) for l in labels if int(l) not in ongoing_labels]
    if not movable:
        return None
    light = sorted(movable, key=lambda l: (load[l], l))
    target = light[0] if stall == 0 else light[int(rng.integers(min(3, len(light))))]
    others = [int(l) for l in labels if int(l) != target]
    slack = np.array([1.0 - load[l] for l in others]) + rng.uniform(0, 0.05 * (1 + round_no % 5), len(others))
    k = min(neighbourhood + (stall // 10), len(others) + 1)
    chosen = [others[j] for j in np.argsort(-slack)[: k - 1]]
    return target, chosen, load[target]


def _round_model(problem: PlacementProblem, assignment: np.ndarray, size: np.ndarray, ongoing_labels: set[int],
                 target: int, chosen: list[int]) -> _Round:
    """The sub-MIP on the requests of ``target`` and ``chosen``: same constraint families, every worker
    open and distinguishable, objective = the target's load, warm-started with the current arrangement."""
    a = problem.arrays
    new_workers = [target] + [l for l in chosen if l not in ongoing_labels]
    old_workers = [l for l in chosen if l in ongoing_labels]
    members = np.flatnonzero(np.isin(assignment, [target, *chosen]))
    sub = _sub_problem(problem, members, {a.request_ids[i] for i in members if not a.is_new[i]})
    sub_a = sub.arrays
    base = first_new_label(sub_a)
    # current arrangement in the sub-problem's labels: candidate u ↔ new_workers[u]
    relabel = {lab: base + u for u, lab in enumerate(new_workers)}
    relabel.update({lab: lab for lab in old_workers})
    current = PlacementSolution.from_array(
        sub_a.request_ids, np.array([relabel[int(assignment[i])] for i in members]), "current"
    )
    pm = build_model(sub, len(new_workers), symmetry_breaking=False)
    model = pm.model
    cost = np.zeros(model.num_cols)
    target_cols = np.flatnonzero(pm.slots.pair_slot == pm.slots.num_ongoing)  # candidate 0 = target
    cost[pm.assign.start + target_cols] = size[members][pm.slots.pair_request[target_cols]]
    col_lower = model.col_lower.copy()
    col_lower[pm.open.start + 1 : pm.open.start + pm.open.size] = 1.0  # the neighbours stay open
    model = replace(model, cost=cost, col_lower=col_lower, offset=0.0, objective_is_integral=False)
    start = pm.warm_start(sub, current)
    if start is not None:
        start[pm.open.start + 1 : pm.open.start + pm.open.size] = 1.0
    return _Round(members, pm, model, start, new_workers, base)


def _accept(assignment: np.ndarray, r: _Round, x: np.ndarray) -> None:
    """Write the sub-MIP's arrangement back into ``assignment`` (in the whole problem's labels)."""
    chosen_x = r.pm.assign.values(x) > 0.5
    slots = r.pm.slots
    inverse = {r.base + u: lab for u, lab in enumerate(r.new_workers)}
    for col in np.flatnonzero(chosen_x):
        sub_req = int(slots.pair_request[col])
        label = int(slots.labels[slots.pair_slot[col]])
        assignment[r.members[sub_req]] = inverse.get(label, label)


def _compacted(a: PlacementArrays, assignment: np.ndarray) -> np.ndarray:
    """Labels of the opened workers renumbered in order of first use."""
    base = first_new_label(a)
    used = sorted({int(w) for w in assignment[a.is_new] if int(w) >= base})
    relabel = {old: base + k for k, old in enumerate(used)}
    return np.array([relabel.get(int(w), int(w)) for w in assignment])


def repack(
    problem: PlacementProblem,
    solution: PlacementSolution,
    *,
    target_workers: int,
    time_budget: float = 10.0,
    neighbourhood: int = 6,
    sub_time_limit: float = 10.0,
    sub_node_limit: int = 50,
    max_stall: int = 40,
    max_rounds: int = 150,
    solver: str = "highs",
    seed: int = 0,
    deadline: float | None = None,
    info: dict | None = None,
) -> PlacementSolution:
    """Improve ``solution`` by emptying workers; stop at ``target_workers`` (a lower bound).

    ``time_budget``: nominal seconds of rounds (`effort.repack_round_seconds`); ``deadline``: the
    `time.perf_counter` time of the wall-clock guard (default: `WALL_GUARD_SHARE` of the budget from
    now; ``math.inf``: no guard, fully repeatable).  ``solver``: the sub-MIPs' solver (the run's).
    ``info`` (optional) receives ``rounds``, ``nominal_seconds`` and ``wall_cut``.
    """
    a = problem.arrays
    rng = np.random.default_rng(seed)
    size = normalised_size(a)
    assignment = solution.as_array().copy()
    ongoing_labels = set(int(w) for w in a.ongoing_labels)
    clock = WorkClock(max(float(time_budget), 0.0))
    if deadline is not None and clock.time_limit:  # the caller's guard replaces the budget's own
        clock.guard_share = max(deadline - clock.started, 0.0) / clock.time_limit
    wall_cut = False
    stall = 0
    round_no = 0
    last = 0.0  # nominal seconds of the last round: the next one must fit in the budget too
    while clock.time_limit and clock.allows(last) and stall < max_stall and round_no < max_rounds:
        if np.unique(assignment).size <= target_workers:
            break
        picked = _pick(assignment, size, ongoing_labels, rng, stall, round_no, neighbourhood)
        if picked is None:
            break
        target, chosen, before = picked
        r = _round_model(problem, assignment, size, ongoing_labels, target, chosen)
        # Sub-MIPs stop on a node limit (deterministic) and a 1 % gap: any improvement is progress.  Their
        # time limit is the wall-clock guard's time left (a guard: hitting it is reported as a wall cut).
        guard_left = clock.guard_share * clock.time_limit - clock.wall_seconds()
        remaining = min(sub_time_limit, max(guard_left, 0.05))
        out = solve(r.model, solver, SolveOptions(time_limit=remaining, node_limit=sub_node_limit, seed=seed,
                                                   warm_start=r.start, mip_rel_gap=0.01))
        last = effort.repack_round_seconds(r.model.num_nonzeros, out.node_count or 0)
        clock.charge(last)
        if "time limit" in out.message.lower():
            wall_cut = True
        round_no += 1
        if out.x is None or out.objective is None or out.objective >= before - 1e-9:
            stall += 1
            continue
        _accept(assignment, r, out.x)
        stall = 0
    if info is not None:
        info.update(rounds=round_no, nominal_seconds=round(clock.spent, 6), wall_cut=wall_cut or clock.wall_cut)
    return PlacementSolution.from_array(a.request_ids, _compacted(a, assignment), f"{solution.method}+repack",
                                        solution.gpus_per_worker)
