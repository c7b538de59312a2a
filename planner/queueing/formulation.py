"""The global scheduler MILP of QLM, corrected (docs/formulations.md §4.3), in two formulations.

**slots** (exact; the paper's shape with the corrections of §4.3 [R]):

* ``x[g,i,r] = 1`` when group i sits at slot r of virtual queue g (Eq. 6).  Slots are counted
  **from the end of the queue** (slot 0 runs last, slot r has exactly r groups after it) and there
  are ``L`` = number of groups of them, so a queue may take every group and the model is feasible
  with any number of queues (the published LP used N slots without padding: feasible only with
  one queue).  Empty-group padding is an occupancy ``occ[g,r] = Σ_i x[g,i,r] ≤ 1`` with the empty
  slots on top (``occ[g,r] ≥ occ[g,r+1]``): the paper's padding with the padding groups placed
  first, where they cost nothing.
* model switch ``t[g,r] ≥ u[g,r,μ] − u[g,r+1,μ] − [μ = loaded_g]·(1 − occ[g,r+1])`` for every
  model μ with ``u[g,r,μ] = Σ_{i: model i = μ} x[g,i,r]`` (replaces Eq. 7/9, whose published
  encoding forced a switch at every slot).  ``t`` is continuous in [0, 1]; it can be 0 whenever
  the model does not change, and no objective gains from a larger t.
* cumulative waiting incl. swaps (Eq. 10 corrected): ``wt[g,r] = wt[g,r+1] + Σ_i W[g,i]·x[g,i,r+1]
  + S_g·t[g,r] + busy_g·(occ[g,r] − occ[g,r+1])`` — the start of the group in slot r.
* deadline (Eq. 11/12): ``wt[g,r] + Σ_i (C[g,i] − slo_i)·x[g,i,r] ≤ 0`` (empty slots have wt = 0,
  so no big-M) with ``C = 0`` in ``start`` mode and ``C = W + tail`` (completion = start + own
  work + P + D) in ``completion`` mode.  The printed bilinear completion term of Eq. 10 is not
  needed: a group's own completion enters through C.
* objective (Eq. 13): total penalty ``Σ_i (est_i − slo_i)``, written without big-M thanks to the
  positions from the end: ``Σ_i start_i = Σ (W[g,i]·r + busy_g)·x[g,i,r] + Σ S_g·(r+1)·t[g,r]``.
  The soft versions replace the hard deadline by lateness ``late ≥ est − slo``, ``late ≥ 0`` and
  minimise ``Σ late``, ``max late`` or the number of late groups (binary ``v``, big-M).

**blocks** (restricted, for large instances): every queue serves each model in one contiguous
block (order of the blocks chosen by binaries ``o``), and inside a block the groups go in EDF
order (SLO, ties by shortest work, then arrival).  Variables: ``y[i,g]`` (group i on queue g),
block start ``B[g,μ]`` (after its swap), group start ``s[i]`` (big-M rows).  It has G·N instead of
G·N² assignment binaries; its optimum is a feasible plan and an upper bound of the slots optimum
(not a proven optimum), and its LP relaxation is weak.

Both take optional queues (scale-up candidates) with an ``open[g]`` binary, used by the
scale-up MILP (minimise the weighted number of opened instances under hard deadlines).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.queueing.problem import QueueingProblem
from planner.solver import LinearModel, ModelBuilder, VarBlock

BLOCKED = 1e30  # a pair (queue, group) whose model does not fit on the queue's instance type


@dataclass(frozen=True)
class QueueMilp:
    """A built model and how to read the plan back."""

    model: LinearModel
    formulation: str  # "slots" or "blocks"
    purpose: str  # the objective name, or "scale_up"
    blocks: dict[str, VarBlock]
    precedence: tuple[int, ...]  # group order inside model blocks (blocks formulation)

    def sequences(self, problem: QueueingProblem, x: np.ndarray) -> list[list[int]]:
        """Ordered group indices of every queue in the solution vector ``x``."""
        if self.formulation == "slots":
            assign = self.blocks["x"].values(x)  # (G, N, L)
            seqs = []
            for g in range(assign.shape[0]):
                slot_of = {int(np.argmax(assign[g, :, j])): j for j in range(assign.shape[2]) if assign[g, :, j].max() > 0.5}
                seqs.append([i for i, _ in sorted(slot_of.items(), key=lambda kv: -kv[1])])  # slot 0 runs last
            return seqs
        y = self.blocks["y"].values(x)  # (N, G)
        order = self.blocks["block_order"].values(x) > 0.5  # (G, M, M): [μ before ν] for μ < ν
        models = problem.models
        rank = {i: r for r, i in enumerate(self.precedence)}
        seqs = []
        for g in range(y.shape[1]):
            before = lambda mu, nu: order[g, mu, nu] if mu < nu else not order[g, nu, mu]  # noqa: E731
            members = [i for i in range(y.shape[0]) if y[i, g] > 0.5]
            active = {models.index(problem.groups[i].model) for i in members}
            position = {mu: sum(before(nu, mu) for nu in active if nu != mu) for mu in active}
            seqs.append(sorted(members, key=lambda i: (position[models.index(problem.groups[i].model)], rank[i])))
        return seqs


# ---- shared data ------------------------------------------------------------------------------

def queue_constants(problem: QueueingProblem) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(W, C, allowed, slo, big-M per queue) with W/C = BLOCKED where a model does not fit.

    The big-M of queue g bounds ``start + C − slo`` over every group and position:
    ``busy_g + Σ_i W[g,i] + S_g·(N+1) + max_i C[g,i] + max(0, max_i slo_i) + max(0, −min_i slo_i) + 1``; the
    ``−min slo`` term covers a group whose deadline has already passed (negative slack, e.g. a re-solve at
    time ``now`` in `planner.queueing.trigger`), whose late flag must still be able to relax its row."""
    work = problem.queue_work()
    tail = problem.queue_tail()
    allowed = np.isfinite(work) & np.isfinite(tail)
    work = np.where(allowed, work, 0.0)
    completion = np.where(allowed, work + tail, 0.0) if problem.deadline == "completion" else np.zeros_like(work)
    swap = problem.queue_swap()
    big_m = (problem.queue_busy() + work.sum(axis=1) + swap * (problem.num_groups + 1) + completion.max(axis=1, initial=0.0) + problem.slo().max(initial=0.0)
             + max(0.0, -problem.slo().min(initial=0.0)) + 1.0)
    return work, completion, allowed, problem.slo(), big_m


def edf_precedence(problem: QueueingProblem) -> tuple[int, ...]:
    """The order inside a model block: EDF, ties by shortest work (SPT, best for Σ start), arrival, index."""
    shortest = np.min(np.where(np.isfinite(problem.work_s), problem.work_s, np.inf), axis=0) if problem.types else np.zeros(problem.num_groups)
    return tuple(sorted(range(problem.num_groups),
                        key=lambda i: (problem.groups[i].slo_s, float(shortest[i]), problem.groups[i].arrival_s, i)))


def _identical_queue_pairs(problem: QueueingProblem) -> list[tuple[int, int]]:
    """Consecutive queues that are interchangeable (same type, loaded model, optionality and busy time)."""
    pairs = []
    for g in range(problem.num_queues - 1):
        a, b = problem.queues[g], problem.queues[g + 1]
        if (a.type_index, a.loaded_model, a.optional, a.busy_s) == (b.type_index, b.loaded_model, b.optional, b.busy_s):
            pairs.append((g, g + 1))
    return pairs


# ---- slots formulation --------------------------------------------------------------------------

def define_assignment_slots(mb: ModelBuilder, problem: QueueingProblem, allowed: np.ndarray, slots: int,
                            cost: np.ndarray) -> dict[str, VarBlock]:
    """Eq. 6: each group in exactly one slot; ``occ[g,j] = Σ_i x[g,i,j] ≤ 1``; padding at the end.

    ``cost[g,i,r]`` is the objective coefficient of group i in slot r of queue g (`penalty_costs_slots`).
    """
    G, N, L = problem.num_queues, problem.num_groups, slots
    upper = np.broadcast_to(allowed[:, :, None], (G, N, L)).astype(float)
    x = mb.add_variables("x", (G, N, L), lower=0.0, upper=upper, integer=True, cost=cost)
    occ = mb.add_variables("occ", (G, L), lower=0.0, upper=1.0)
    g, i, j = np.meshgrid(np.arange(G), np.arange(N), np.arange(L), indexing="ij")
    mb.add_constraints("group_once", N, i.ravel(), x.col(g.ravel(), i.ravel(), j.ravel()), np.ones(g.size),
                       lower=1.0, upper=1.0, label=lambda r: f"group_once[group={problem.groups[r].name}]")
    rows = (g * L + j).ravel()
    cols = np.concatenate([x.col(g.ravel(), i.ravel(), j.ravel()), occ.columns])
    mb.add_constraints("slot_occupancy", G * L, np.concatenate([rows, np.arange(G * L)]), cols,
                       np.concatenate([np.ones(g.size), -np.ones(G * L)]), lower=0.0, upper=0.0,
                       label=lambda r: f"slot_occupancy[queue={problem.queues[r // L].name}, slot={r % L}]")
    if L > 1:
        gg, jj = np.meshgrid(np.arange(G), np.arange(L - 1), indexing="ij")
        n = gg.size
        mb.add_constraints("padding_last", n, np.tile(np.arange(n), 2),
                           np.concatenate([occ.col(gg.ravel(), jj.ravel()), occ.col(gg.ravel(), jj.ravel() + 1)]),
                           np.concatenate([np.ones(n), -np.ones(n)]), lower=0.0,
                           label=lambda r: f"padding_last[queue={problem.queues[r // (L - 1)].name}, slot={r % (L - 1)}]")
    return {"x": x, "occ": occ}


def define_model_switch_slots(mb: ModelBuilder, problem: QueueingProblem, v: dict[str, VarBlock], slots: int,
                              cost: np.ndarray | float = 0.0) -> VarBlock:
    """Corrected Eq. 9 with positions counted from the end (slot r+1 runs just before slot r).

    ``t[g,r] ≥ u[g,r,μ] − u[g,r+1,μ] − [μ = loaded_g]·(1 − occ[g,r+1])`` (before the first group the
    instance holds its loaded model), and ``t[g,L−1] ≥ u[g,L−1,μ] − [μ = loaded_g]``.  With the
    occupied slots at the bottom this makes ``t = 0`` feasible whenever the model does not change.
    """
    G, N, L = problem.num_queues, problem.num_groups, slots
    x, occ = v["x"], v["occ"]
    t = mb.add_variables("t", (G, L), lower=0.0, upper=1.0, cost=cost)
    models = problem.models
    model_of = np.array([models.index(gr.model) for gr in problem.groups])
    rows, cols, vals, lower, labels = [], [], [], [], []
    r = 0
    for g in range(G):
        loaded = problem.queues[g].loaded_model
        for j in range(L):
            for mu in range(len(models)):
                members = np.flatnonzero(model_of == mu)
                if members.size == 0:
                    continue
                is_loaded = models[mu] == loaded
                rows += [r] * (1 + members.size)
                cols += [int(t.col(g, j))] + list(x.col(g, members, j))
                vals += [1.0] + [-1.0] * members.size
                if j + 1 < L:
                    rows += [r] * members.size
                    cols += list(x.col(g, members, j + 1))
                    vals += [1.0] * members.size
                    if is_loaded:
                        rows.append(r); cols.append(int(occ.col(g, j + 1))); vals.append(-1.0)
                lower.append(-1.0 if is_loaded else 0.0)
                labels.append(f"model_switch[queue={problem.queues[g].name}, slot={j}, model={models[mu]}]")
                r += 1
    mb.add_constraints("model_switch", r, np.array(rows), np.array(cols), np.array(vals), lower=np.array(lower),
                       label=lambda k: labels[k])
    return t


def define_cumulative_wait_slots(mb: ModelBuilder, problem: QueueingProblem, v: dict[str, VarBlock], work: np.ndarray,
                                 slots: int) -> VarBlock:
    """Corrected Eq. 10: ``wt[g,r] = wt[g,r+1] + Σ_i W[g,i]·x[g,i,r+1] + S_g·t[g,r] + busy_g·(occ[g,r] − occ[g,r+1])``.

    ``wt[g,r]`` is the start of the group in slot r (swap times included); the busy time of the group
    in service is added once, at the first occupied slot; empty slots (on top, i.e. earliest) have
    ``wt = 0``.
    """
    G, N, L = problem.num_queues, problem.num_groups, slots
    x, t, occ = v["x"], v["t"], v["occ"]
    swap = problem.queue_swap()
    busy = problem.queue_busy()
    wt = mb.add_variables("wt", (G, L), lower=0.0)
    rows, cols, vals = [], [], []
    for g in range(G):
        for j in range(L):
            r = g * L + j
            rows += [r, r, r]
            cols += [int(wt.col(g, j)), int(t.col(g, j)), int(occ.col(g, j))]
            vals += [1.0, -swap[g], -busy[g]]
            if j + 1 < L:
                rows += [r] * (2 + N)
                cols += [int(wt.col(g, j + 1)), int(occ.col(g, j + 1))] + list(x.col(g, np.arange(N), j + 1))
                vals += [-1.0, busy[g]] + list(-work[g])
    mb.add_constraints("cumulative_wait", G * L, np.array(rows), np.array(cols), np.array(vals), lower=0.0, upper=0.0,
                       label=lambda r: f"cumulative_wait[queue={problem.queues[r // L].name}, slot={r % L}]")
    return wt


def _relaxation_vars(mb: ModelBuilder, shape: tuple[int, ...], purpose: str) -> dict[str, VarBlock]:
    """Soft versions: lateness ``late ≥ 0`` (total/max lateness) or a late flag ``v`` (count)."""
    if purpose in ("total_lateness", "max_lateness"):
        late = mb.add_variables("late", shape, lower=0.0, cost=1.0 if purpose == "total_lateness" else 0.0)
        if purpose == "max_lateness":
            zmax = mb.add_variables("max_late", 1, lower=0.0, cost=1.0)
            n = late.size
            mb.add_constraints("max_lateness", n, np.tile(np.arange(n), 2),
                               np.concatenate([np.full(n, int(zmax.col(0))), late.columns]),
                               np.concatenate([np.ones(n), -np.ones(n)]), lower=0.0)
            return {"late": late, "max_late": zmax}
        return {"late": late}
    if purpose == "late_groups":
        mb.objective_is_integral = True
        return {"late_flag": mb.add_binaries("late_flag", shape, cost=1.0)}
    return {}


def define_deadlines_slots(mb: ModelBuilder, problem: QueueingProblem, v: dict[str, VarBlock], completion: np.ndarray,
                           slo: np.ndarray, big_m: np.ndarray, slots: int) -> None:
    """Eq. 11/12: ``wt[g,r] + Σ_i (C[g,i] − slo_i)·x[g,i,r] − late − M·v ≤ 0`` (late / v: soft versions).

    No big-M on occupancy is needed: empty slots come first in time and have ``wt = 0``.
    """
    G, N, L = problem.num_queues, problem.num_groups, slots
    x, wt = v["x"], v["wt"]
    rows, cols, vals = [], [], []
    for g in range(G):
        for j in range(L):
            r = g * L + j
            rows += [r] * (1 + N)
            cols += [int(wt.col(g, j))] + list(x.col(g, np.arange(N), j))
            vals += [1.0] + list(completion[g] - slo)
            if "late" in v:
                rows.append(r); cols.append(int(v["late"].col(g, j))); vals.append(-1.0)
            elif "late_flag" in v:
                rows.append(r); cols.append(int(v["late_flag"].col(g, j))); vals.append(-big_m[g])
    mb.add_constraints("deadline", G * L, np.array(rows), np.array(cols), np.array(vals), upper=0.0,
                       label=lambda r: f"deadline[queue={problem.queues[r // L].name}, slot={r % L}]")


def penalty_costs_slots(problem: QueueingProblem, work: np.ndarray, completion: np.ndarray, slots: int) -> tuple[np.ndarray, np.ndarray]:
    """Eq. 13 without big-M: with r groups after slot r,
    ``Σ_i start_i = Σ (W[g,i]·r + busy_g)·x[g,i,r] + Σ S_g·(r+1)·t[g,r]``.

    Returns the cost of x (plus the own completion term C in ``completion`` mode) and of t.
    """
    r = np.arange(slots, dtype=float)
    x_cost = work[:, :, None] * r[None, None, :] + completion[:, :, None] + problem.queue_busy()[:, None, None]
    t_cost = problem.queue_swap()[:, None] * (r[None, :] + 1.0)
    return x_cost, t_cost


def _open_variables(mb: ModelBuilder, problem: QueueingProblem, scale_up: bool) -> tuple[list[int], VarBlock | None]:
    optional = [g for g, q in enumerate(problem.queues) if q.optional]
    if not optional:
        return optional, None
    cost = np.array([problem.types[problem.queues[g].type_index].cost_per_instance for g in optional])
    opened = mb.add_variables("open", len(optional), lower=0.0, upper=1.0 if scale_up else 0.0, integer=True,
                              cost=cost if scale_up else 0.0)
    return optional, opened


def define_open_queues_slots(mb: ModelBuilder, problem: QueueingProblem, v: dict[str, VarBlock], scale_up: bool) -> None:
    """Scale-up: an optional queue holds groups only when opened, ``occ[g,0] ≤ open[g]`` (closed otherwise)."""
    optional, opened = _open_variables(mb, problem, scale_up)
    if opened is None:
        return
    v["open"] = opened
    n = len(optional)
    mb.add_constraints("open_queue", n, np.tile(np.arange(n), 2),
                       np.concatenate([v["occ"].col(np.array(optional), np.zeros(n, int)), opened.columns]),
                       np.concatenate([np.ones(n), -np.ones(n)]), upper=0.0,
                       label=lambda r: f"open_queue[queue={problem.queues[optional[r]].name}]")


def define_symmetry_slots(mb: ModelBuilder, problem: QueueingProblem, v: dict[str, VarBlock], work: np.ndarray, slots: int) -> None:
    """Interchangeable queues: the earlier one holds at least as much work (breaks the G! symmetry)."""
    pairs = _identical_queue_pairs(problem)
    if not pairs:
        return
    N, L = problem.num_groups, slots
    gi, jj = np.meshgrid(np.arange(N), np.arange(L), indexing="ij")
    rows, cols, vals = [], [], []
    for r, (a, b) in enumerate(pairs):
        for g, sign in ((a, 1.0), (b, -1.0)):
            rows += [r] * gi.size
            cols += list(v["x"].col(g, gi.ravel(), jj.ravel()))
            vals += list(sign * (work[g][gi.ravel()] + 1e-3))
    mb.add_constraints("symmetry", len(pairs), np.array(rows), np.array(cols), np.array(vals), lower=0.0,
                       label=lambda r: f"symmetry[queues={problem.queues[pairs[r][0]].name},{problem.queues[pairs[r][1]].name}]")


def _purpose_check(purpose: str) -> None:
    if purpose not in ("penalty", "total_lateness", "max_lateness", "late_groups", "scale_up"):
        raise ValueError(f"unknown MILP purpose {purpose!r}")


def build_slots(problem: QueueingProblem, purpose: str, slots: int | None = None) -> QueueMilp:
    """Slots formulation in the order of the paper: Eq. 6, 7/9, 10, 11/12, 13 (positions from the end)."""
    _purpose_check(purpose)
    L = slots or max(problem.num_groups, 1)
    work, completion, allowed, slo, big_m = queue_constants(problem)
    x_cost, t_cost = penalty_costs_slots(problem, work, completion, L)
    penalty = purpose == "penalty"
    mb = ModelBuilder(f"qlm-slots-{purpose}", "min")
    v = define_assignment_slots(mb, problem, allowed, L, x_cost if penalty else np.zeros_like(x_cost))
    v["t"] = define_model_switch_slots(mb, problem, v, L, t_cost if penalty else 0.0)
    v["wt"] = define_cumulative_wait_slots(mb, problem, v, work, L)
    v.update(_relaxation_vars(mb, (problem.num_queues, L), purpose))
    define_deadlines_slots(mb, problem, v, completion, slo, big_m, L)
    if penalty:
        mb.offset = -float(slo.sum())
    define_open_queues_slots(mb, problem, v, scale_up=purpose == "scale_up")
    define_symmetry_slots(mb, problem, v, work, L)
    if purpose == "scale_up":
        mb.objective_is_integral = all(float(t.cost_per_instance).is_integer() for t in problem.types)
    return QueueMilp(mb.build(), "slots", purpose, v, edf_precedence(problem))


# ---- blocks formulation -------------------------------------------------------------------------

def define_assignment_blocks(mb: ModelBuilder, problem: QueueingProblem, allowed: np.ndarray, cost: np.ndarray) -> VarBlock:
    """Each group on exactly one queue: ``Σ_g y[i,g] = 1`` (y fixed to 0 where the model does not fit)."""
    N, G = problem.num_groups, problem.num_queues
    y = mb.add_variables("y", (N, G), lower=0.0, upper=allowed.T.astype(float), integer=True, cost=cost.T)
    i, g = np.meshgrid(np.arange(N), np.arange(G), indexing="ij")
    mb.add_constraints("group_once", N, i.ravel(), y.col(i.ravel(), g.ravel()), np.ones(i.size), lower=1.0, upper=1.0,
                       label=lambda r: f"group_once[group={problem.groups[r].name}]")
    return y


def define_block_activity(mb: ModelBuilder, problem: QueueingProblem, y: VarBlock, model_of: np.ndarray,
                          num_models: int) -> VarBlock:
    """``a[g,μ] ≥ y[i,g]`` for every group i of model μ: the block of μ on g is used."""
    N, G = problem.num_groups, problem.num_queues
    a = mb.add_variables("active", (G, num_models), lower=0.0, upper=1.0)
    i, g = np.meshgrid(np.arange(N), np.arange(G), indexing="ij")
    i, g = i.ravel(), g.ravel()
    n = i.size
    mb.add_constraints("block_active", n, np.tile(np.arange(n), 2),
                       np.concatenate([a.col(g, model_of[i]), y.col(i, g)]),
                       np.concatenate([np.ones(n), -np.ones(n)]), lower=0.0)
    return a


def define_block_sequence(mb: ModelBuilder, problem: QueueingProblem, v: dict[str, VarBlock], work: np.ndarray,
                          model_of: np.ndarray, num_models: int, big_m: np.ndarray) -> None:
    """Block starts (after the block's swap) and the order of the blocks on each queue.

    * ``B[g,μ] ≥ (busy_g + S0[g,μ])·a[g,μ]`` with ``S0 = 0`` for the loaded model, ``S_g`` otherwise;
    * ``B[g,ν] ≥ B[g,μ] + Σ_{k∈μ} W[g,k]·y[k,g] + S_g·a[g,ν] − M_g·(1 − [μ before ν])``,
      ``[μ before ν] = o[g,μ,ν]`` for μ < ν and ``1 − o[g,ν,μ]`` for μ > ν.
    """
    G, N = problem.num_queues, problem.num_groups
    y, a = v["y"], v["active"]
    models = problem.models
    swap = problem.queue_swap()
    start = mb.add_variables("block_start", (G, num_models), lower=0.0)
    order = mb.add_variables("block_order", (G, num_models, num_models), lower=0.0,
                             upper=np.triu(np.ones((num_models, num_models)), 1)[None].repeat(G, 0), integer=True)
    v["block_start"], v["block_order"] = start, order
    rows, cols, vals, lower = [], [], [], []
    r = 0
    for g in range(G):
        loaded = problem.queues[g].loaded_model
        for mu in range(num_models):
            first_swap = (0.0 if models[mu] == loaded else swap[g]) + problem.queues[g].busy_s
            rows += [r, r]; cols += [int(start.col(g, mu)), int(a.col(g, mu))]; vals += [1.0, -first_swap]
            lower.append(0.0); r += 1
    mb.add_constraints("block_first_swap", r, np.array(rows), np.array(cols), np.array(vals), lower=np.array(lower))
    rows, cols, vals, lower = [], [], [], []
    r = 0
    for g in range(G):
        for mu in range(num_models):
            members = np.flatnonzero((model_of == mu) & (work[g] >= 0))
            for nu in range(num_models):
                if mu == nu:
                    continue
                rows += [r] * (3 + members.size + 1)
                cols += [int(start.col(g, nu)), int(start.col(g, mu)), int(a.col(g, nu))] + list(y.col(members, g))
                vals += [1.0, -1.0, -swap[g]] + list(-work[g, members])
                if mu < nu:
                    cols.append(int(order.col(g, mu, nu))); vals.append(-big_m[g]); lower.append(-big_m[g])
                else:
                    cols.append(int(order.col(g, nu, mu))); vals.append(big_m[g]); lower.append(0.0)
                r += 1
    mb.add_constraints("block_sequence", r, np.array(rows), np.array(cols), np.array(vals), lower=np.array(lower))


def define_group_start_blocks(mb: ModelBuilder, problem: QueueingProblem, v: dict[str, VarBlock], work: np.ndarray,
                              allowed: np.ndarray, model_of: np.ndarray, precedence: tuple[int, ...],
                              big_m: np.ndarray, start_cost: float) -> VarBlock:
    """EDF inside a block: ``s_i ≥ B[g,μ_i] + Σ_{k ≺ i, μ_k = μ_i} W[g,k]·y[k,g] − M_g·(1 − y[i,g])``."""
    N, G = problem.num_groups, problem.num_queues
    y, start = v["y"], v["block_start"]
    s = mb.add_variables("s", N, lower=0.0, cost=start_cost)
    rank = np.empty(N, int)
    rank[list(precedence)] = np.arange(N)
    rows, cols, vals, lower, labels = [], [], [], [], []
    r = 0
    for g in range(G):
        for i in range(N):
            if not allowed[g, i]:
                continue
            before = np.flatnonzero((model_of == model_of[i]) & (rank < rank[i]) & allowed[g])
            rows += [r] * (3 + before.size)
            cols += [int(s.col(i)), int(start.col(g, model_of[i])), int(y.col(i, g))] + list(y.col(before, g))
            vals += [1.0, -1.0, -big_m[g]] + list(-work[g, before])
            lower.append(-big_m[g])
            labels.append(f"group_start[group={problem.groups[i].name}, queue={problem.queues[g].name}]")
            r += 1
    mb.add_constraints("group_start", r, np.array(rows), np.array(cols), np.array(vals), lower=np.array(lower),
                       label=lambda k: labels[k])
    return s


def define_deadlines_blocks(mb: ModelBuilder, problem: QueueingProblem, v: dict[str, VarBlock], completion: np.ndarray,
                            slo: np.ndarray, big_m: np.ndarray) -> None:
    """Eq. 11/12 per group: ``s_i + Σ_g C[g,i]·y[i,g] − late_i − M·v_i ≤ slo_i``."""
    N, G = problem.num_groups, problem.num_queues
    rows, cols, vals = [], [], []
    for i in range(N):
        rows += [i] * (1 + G)
        cols += [int(v["s"].col(i))] + list(v["y"].col(i, np.arange(G)))
        vals += [1.0] + list(completion[:, i])
        if "late" in v:
            rows.append(i); cols.append(int(v["late"].col(i))); vals.append(-1.0)
        elif "late_flag" in v:
            rows.append(i); cols.append(int(v["late_flag"].col(i))); vals.append(-float(big_m.max()))
    mb.add_constraints("deadline", N, np.array(rows), np.array(cols), np.array(vals), upper=slo,
                       label=lambda r: f"deadline[group={problem.groups[r].name}]")


def define_open_queues_blocks(mb: ModelBuilder, problem: QueueingProblem, v: dict[str, VarBlock], scale_up: bool) -> None:
    """Scale-up: ``y[i,g] ≤ open[g]`` on optional queues (closed unless this is the scale-up MILP)."""
    optional, opened = _open_variables(mb, problem, scale_up)
    if opened is None:
        return
    v["open"] = opened
    N = problem.num_groups
    rows, cols, vals = [], [], []
    r = 0
    for k, g in enumerate(optional):
        for i in range(N):
            rows += [r, r]; cols += [int(v["y"].col(i, g)), int(opened.col(k))]; vals += [1.0, -1.0]
            r += 1
    mb.add_constraints("open_queue", r, np.array(rows), np.array(cols), np.array(vals), upper=0.0)


def define_symmetry_blocks(mb: ModelBuilder, problem: QueueingProblem, v: dict[str, VarBlock], work: np.ndarray) -> None:
    """Interchangeable queues: the earlier one holds at least as much work."""
    pairs = _identical_queue_pairs(problem)
    if not pairs:
        return
    N = problem.num_groups
    rows, cols, vals = [], [], []
    for r, (a, b) in enumerate(pairs):
        rows += [r] * (2 * N)
        cols += list(v["y"].col(np.arange(N), a)) + list(v["y"].col(np.arange(N), b))
        vals += list(work[a] + 1e-3) + list(-(work[b] + 1e-3))
    mb.add_constraints("symmetry", len(pairs), np.array(rows), np.array(cols), np.array(vals), lower=0.0)


def build_blocks(problem: QueueingProblem, purpose: str) -> QueueMilp:
    """Blocks formulation (module docstring): assignment, blocks, group starts, deadlines, objective."""
    _purpose_check(purpose)
    work, completion, allowed, slo, big_m = queue_constants(problem)
    models = problem.models
    model_of = np.array([models.index(g.model) for g in problem.groups], dtype=int)
    precedence = edf_precedence(problem)
    mb = ModelBuilder(f"qlm-blocks-{purpose}", "min")
    v: dict[str, VarBlock] = {}
    v["y"] = define_assignment_blocks(mb, problem, allowed, completion if purpose == "penalty" else np.zeros_like(work))
    v["active"] = define_block_activity(mb, problem, v["y"], model_of, len(models))
    define_block_sequence(mb, problem, v, work, model_of, len(models), big_m)
    v["s"] = define_group_start_blocks(mb, problem, v, work, allowed, model_of, precedence, big_m,
                                       1.0 if purpose == "penalty" else 0.0)
    v.update(_relaxation_vars(mb, (problem.num_groups,), purpose))
    define_deadlines_blocks(mb, problem, v, completion, slo, big_m)
    if purpose == "penalty":
        mb.offset = -float(slo.sum())
    define_open_queues_blocks(mb, problem, v, scale_up=purpose == "scale_up")
    define_symmetry_blocks(mb, problem, v, work)
    if purpose == "scale_up":
        mb.objective_is_integral = all(float(t.cost_per_instance).is_integer() for t in problem.types)
    return QueueMilp(mb.build(), "blocks", purpose, v, precedence)


def build_model(problem: QueueingProblem, purpose: str, formulation: str = "slots") -> QueueMilp:
    """The QLM MILP for ``purpose`` (an objective name or ``scale_up``) in one formulation."""
    if formulation == "slots":
        return build_slots(problem, purpose)
    if formulation == "blocks":
        return build_blocks(problem, purpose)
    raise ValueError(f"unknown formulation {formulation!r} (expected slots or blocks)")


# ---- warm start -----------------------------------------------------------------------------------

def _blockify(problem: QueueingProblem, g: int, sequence: list[int], precedence: tuple[int, ...]) -> list[int]:
    """The sequence as model blocks (first-appearance order, loaded model first) in precedence order."""
    rank = {i: r for r, i in enumerate(precedence)}
    models: list[str] = []
    loaded = problem.queues[g].loaded_model
    if any(problem.groups[i].model == loaded for i in sequence):
        models.append(loaded)  # type: ignore[arg-type]
    for i in sequence:
        if problem.groups[i].model not in models:
            models.append(problem.groups[i].model)
    return [i for m in models for i in sorted((i for i in sequence if problem.groups[i].model == m), key=rank.get)]


def warm_start_vector(problem: QueueingProblem, milp: QueueMilp, sequences: list[list[int]]) -> np.ndarray:
    """A full solution vector of ``milp`` for the plan ``sequences`` (blocks: the plan regrouped into blocks).

    The solver checks it; a plan that breaks a hard deadline is simply not accepted.
    """
    v = milp.blocks
    x = np.zeros(milp.model.num_cols)
    work, completion, _, slo, _ = queue_constants(problem)
    swap = problem.queue_swap()
    models = problem.models
    if milp.formulation == "blocks":
        sequences = [_blockify(problem, g, seq, milp.precedence) for g, seq in enumerate(sequences)]
    late_max = 0.0
    for g, seq in enumerate(sequences):
        clock, loaded = problem.queues[g].busy_s, problem.queues[g].loaded_model
        n = len(seq)
        block_seen: list[int] = []
        for pos, i in enumerate(seq):
            mu = models.index(problem.groups[i].model)
            switched = problem.groups[i].model != loaded
            if switched:
                clock += swap[g]
                loaded = problem.groups[i].model
            late = max(0.0, clock + completion[g, i] - slo[i])
            late_max = max(late_max, late)
            if milp.formulation == "slots":
                r = n - 1 - pos
                x[v["x"].col(g, i, r)] = 1.0
                x[v["occ"].col(g, r)] = 1.0
                x[v["t"].col(g, r)] = float(switched)
                x[v["wt"].col(g, r)] = clock
                where = (g, r)
            else:
                x[v["y"].col(i, g)] = 1.0
                x[v["active"].col(g, mu)] = 1.0
                if mu not in block_seen:
                    block_seen.append(mu)
                    x[v["block_start"].col(g, mu)] = clock
                x[v["s"].col(i)] = clock
                where = (i,)
            if "late" in v:
                x[v["late"].col(*where)] = late
            if "late_flag" in v:
                x[v["late_flag"].col(*where)] = float(late > 1e-9)
            clock += work[g, i]
        if milp.formulation == "blocks":
            order = block_seen + [mu for mu in range(len(models)) if mu not in block_seen]
            for mu in range(len(models)):
                if mu not in block_seen:
                    x[v["block_start"].col(g, mu)] = clock
            for a in range(len(models)):
                for b in range(a + 1, len(models)):
                    x[v["block_order"].col(g, a, b)] = float(order.index(a) < order.index(b))
    if "max_late" in v:
        x[v["max_late"].col(0)] = late_max
    return x
