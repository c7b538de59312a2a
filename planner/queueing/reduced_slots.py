"""The exact slots MILP restricted to the cells that survive reduced-cost fixing (certified pipeline).

Same model as the **slots** formulation of `planner.queueing.formulation` (positions counted from the
end; read its docstring for the derivation), but built sparsely over a given set of *cells*
``(queue g, group i, slot r)`` instead of the dense ``G × N × L`` cube, with ``L_g`` slots on queue g
(one more than the deepest kept cell).  The cells come from `planner.queueing.bounds.AssignmentBound`:
a cell whose reduced cost exceeds ``UB − LB`` is in no plan better than the incumbent, so the
restricted MILP contains every plan with penalty ≤ UB and its optimum (or its dual bound, capped at
UB) is the optimum (a lower bound) of the full problem.  Only the penalty objective (hard SLOs) on
the existing queues is built here.

Rows (each its own ``define_*``):

* ``group_once``: ``Σ_{(g,r)} x[g,i,r] = 1``;
* ``slot_occupancy``: ``occ[g,r] = Σ_i x[g,i,r] ≤ 1``; ``padding_order``: ``occ[g,r] ≥ occ[g,r+1]``;
* ``model_switch``: ``t[g,r] ≥ u[g,r,μ] − u[g,r+1,μ] − [μ = loaded_g]·(1 − occ[g,r+1])``;
* ``cumulative_wait``: ``wt[g,r] = wt[g,r+1] + Σ_i W[g,i]·x[g,i,r+1] + S_g·t[g,r] + busy_g·(occ[g,r] − occ[g,r+1])``;
* ``deadline``: ``wt[g,r] + Σ_i (C[g,i] − slo_i)·x[g,i,r] ≤ 0``;
* ``swap_count`` (valid cut): ``Σ_r (r+1)·t[g,r] ≥ Σ_{i: model_i ≠ loaded_g} Σ_r x[g,i,r]`` — every
  group of another model has a swap at its slot or above (earlier), and a swap at slot r delays the
  r+1 groups in slots 0..r;
* ``symmetry``: interchangeable queues (same type, loaded model) — the earlier holds at least as much work;
* objective ``Σ (W[g,i]·r + busy_g + C[g,i])·x + Σ S_g·(r+1)·t − Σ slo`` (Eq. 13).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.queueing.formulation import _identical_queue_pairs, queue_constants
from planner.queueing.problem import QueueingProblem
from planner.solver import LinearModel, ModelBuilder, VarBlock


@dataclass(frozen=True)
class ReducedSlotsMilp:
    model: LinearModel
    cells: np.ndarray  # (K, 3): queue, group, slot
    slot_index: dict[tuple[int, int], int]  # (queue, slot) → slot variable index
    blocks: dict[str, VarBlock]

    def sequences(self, problem: QueueingProblem, x: np.ndarray) -> list[list[int]]:
        chosen = self.cells[self.blocks["x"].values(x) > 0.5]
        seqs: list[list[int]] = [[] for _ in problem.queues]
        for g in range(problem.num_queues):
            here = chosen[chosen[:, 0] == g]
            seqs[g] = [int(i) for i in here[np.argsort(-here[:, 2], kind="stable"), 1]]
        return seqs

    def symmetric_order(self, problem: QueueingProblem, sequences: list[list[int]]) -> list[list[int]]:
        """The same plan with interchangeable queues relabelled to satisfy the ``symmetry`` rows.

        The plan's objective does not change, so it still uses only kept cells (reduced-cost fixing
        keeps every plan with penalty ≤ UB)."""
        work, _, _, _, _ = queue_constants(problem)
        sequences = [list(seq) for seq in sequences]
        pairs = _identical_queue_pairs(problem)
        runs: list[list[int]] = []
        for a, b in pairs:
            if runs and runs[-1][-1] == a:
                runs[-1].append(b)
            else:
                runs.append([a, b])
        for run in runs:
            contents = sorted((sequences[g] for g in run), key=lambda seq: -sum(work[run[0], i] + 1e-3 for i in seq))
            for g, seq in zip(run, contents):
                sequences[g] = seq
        return sequences

    def warm_start(self, problem: QueueingProblem, sequences: list[list[int]]) -> np.ndarray | None:
        """The solution vector of a plan (queues relabelled by `symmetric_order`), or None when the
        plan uses a removed cell."""
        sequences = self.symmetric_order(problem, sequences)
        lookup = {(int(g), int(i), int(r)): k for k, (g, i, r) in enumerate(self.cells)}
        work = queue_constants(problem)[0]
        swap = problem.queue_swap()
        v = self.blocks
        x = np.zeros(self.model.num_cols)
        for g, seq in enumerate(sequences):
            clock, loaded = problem.queues[g].busy_s, problem.queues[g].loaded_model
            for pos, i in enumerate(seq):
                r = len(seq) - 1 - pos
                cell = lookup.get((g, i, r))
                slot = self.slot_index.get((g, r))
                if cell is None or slot is None:
                    return None
                switched = problem.groups[i].model != loaded
                if switched:
                    clock += swap[g]
                    loaded = problem.groups[i].model
                x[v["x"].col(cell)] = 1.0
                x[v["occ"].col(slot)] = 1.0
                x[v["t"].col(slot)] = float(switched)
                x[v["wt"].col(slot)] = clock
                clock += work[g, i]
        return x


def define_assignment(mb: ModelBuilder, problem: QueueingProblem, cells: np.ndarray, cost: np.ndarray) -> VarBlock:
    """Eq. 6, ``group_once``: every group in exactly one kept cell."""
    x = mb.add_variables("x", len(cells), lower=0.0, upper=1.0, integer=True, cost=cost)
    mb.add_constraints("group_once", problem.num_groups, cells[:, 1], x.columns, np.ones(len(cells)), lower=1.0, upper=1.0,
                       label=lambda r: f"group_once[group={problem.groups[r].name}]")
    return x


def define_occupancy(mb: ModelBuilder, x: VarBlock, cell_slot: np.ndarray, slots: list[tuple[int, int]],
                     slot_index: dict[tuple[int, int], int]) -> VarBlock:
    """Eq. 6 with padding: ``occ[g,r] = Σ_i x[g,i,r] ≤ 1`` and the padding order ``occ[g,r] ≥ occ[g,r+1]``."""
    n = len(slots)
    occ = mb.add_variables("occ", n, lower=0.0, upper=1.0)
    mb.add_constraints("slot_occupancy", n, np.concatenate([np.arange(n), cell_slot]),
                       np.concatenate([occ.columns, x.columns]), np.concatenate([np.ones(n), -np.ones(len(cell_slot))]),
                       lower=0.0, upper=0.0)
    above = [(s, slot_index[(g, r + 1)]) for s, (g, r) in enumerate(slots) if (g, r + 1) in slot_index]
    if above:
        low, high = np.array(above).T
        m = len(above)
        mb.add_constraints("padding_order", m, np.tile(np.arange(m), 2), np.concatenate([occ.col(low), occ.col(high)]),
                           np.concatenate([np.ones(m), -np.ones(m)]), lower=0.0)
    return occ


def define_model_switch(mb: ModelBuilder, problem: QueueingProblem, v: dict[str, VarBlock], cells: np.ndarray,
                        cell_slot: np.ndarray, slots: list[tuple[int, int]], slot_index: dict[tuple[int, int], int],
                        model_of: np.ndarray) -> VarBlock:
    """Corrected Eqs. 7/9: ``t[g,r] ≥ u[g,r,μ] − u[g,r+1,μ] − [μ = loaded_g]·(1 − occ[g,r+1])`` for every model μ kept at (g,r)."""
    models = problem.models
    swap = problem.queue_swap()
    t = mb.add_variables("t", len(slots), lower=0.0, upper=1.0,
                         cost=np.array([swap[g] * (r + 1) for g, r in slots]))
    by_slot_model: dict[tuple[int, int], list[int]] = {}
    for k, s in enumerate(cell_slot):
        by_slot_model.setdefault((int(s), int(model_of[cells[k, 1]])), []).append(k)
    rows, cols, vals, lower = [], [], [], []
    for r, ((s, mu), members) in enumerate(sorted(by_slot_model.items())):
        g, slot = slots[s]
        is_loaded = models[mu] == problem.queues[g].loaded_model
        rows += [r] * (1 + len(members)); cols += [int(t.col(s))] + list(v["x"].col(np.array(members))); vals += [1.0] + [-1.0] * len(members)
        upper_slot = slot_index.get((g, slot + 1))
        if upper_slot is not None:
            above = by_slot_model.get((upper_slot, mu), [])
            rows += [r] * len(above); cols += list(v["x"].col(np.array(above, dtype=int))); vals += [1.0] * len(above)
            if is_loaded:
                rows.append(r); cols.append(int(v["occ"].col(upper_slot))); vals.append(-1.0)
        lower.append(-1.0 if is_loaded else 0.0)
    mb.add_constraints("model_switch", len(lower), np.array(rows, dtype=int), np.array(cols, dtype=int), np.array(vals),
                       lower=np.array(lower))
    return t


def define_cumulative_wait(mb: ModelBuilder, problem: QueueingProblem, v: dict[str, VarBlock], cells: np.ndarray,
                           cell_slot: np.ndarray, slots: list[tuple[int, int]], slot_index: dict[tuple[int, int], int],
                           work: np.ndarray) -> VarBlock:
    """Corrected Eq. 10: ``wt[g,r] = wt[g,r+1] + Σ_i W[g,i]·x[g,i,r+1] + S_g·t[g,r] + busy_g·(occ[g,r] − occ[g,r+1])``."""
    swap, busy = problem.queue_swap(), problem.queue_busy()
    n = len(slots)
    wt = mb.add_variables("wt", n, lower=0.0)
    g_of = np.array([g for g, _ in slots])
    rows = [np.arange(n)] * 3
    cols = [wt.columns, v["t"].columns, v["occ"].columns]
    vals = [np.ones(n), -swap[g_of], -busy[g_of]]
    above = np.array([slot_index.get((g, r + 1), -1) for g, r in slots])
    has = np.flatnonzero(above >= 0)
    rows += [has, has]
    cols += [wt.col(above[has]), v["occ"].col(above[has])]
    vals += [-np.ones(has.size), busy[g_of[has]]]
    below = {int(s_above): s for s, s_above in enumerate(above) if s_above >= 0}  # slot above → the slot it feeds
    feeds = np.array([below.get(int(s), -1) for s in cell_slot])
    used = np.flatnonzero(feeds >= 0)
    rows.append(feeds[used]); cols.append(v["x"].col(used)); vals.append(-work[cells[used, 0], cells[used, 1]])
    mb.add_constraints("cumulative_wait", n, np.concatenate(rows), np.concatenate(cols), np.concatenate(vals),
                       lower=0.0, upper=0.0)
    return wt


def define_deadlines(mb: ModelBuilder, v: dict[str, VarBlock], cells: np.ndarray, cell_slot: np.ndarray,
                     num_slots: int, completion: np.ndarray, slo: np.ndarray) -> None:
    """Eqs. 11–12: ``wt[g,r] + Σ_i (C[g,i] − slo_i)·x[g,i,r] ≤ 0`` (empty slots have wt = 0)."""
    mb.add_constraints("deadline", num_slots, np.concatenate([np.arange(num_slots), cell_slot]),
                       np.concatenate([v["wt"].columns, v["x"].columns]),
                       np.concatenate([np.ones(num_slots), completion[cells[:, 0], cells[:, 1]] - slo[cells[:, 1]]]), upper=0.0)


def define_swap_count(mb: ModelBuilder, problem: QueueingProblem, v: dict[str, VarBlock], cells: np.ndarray,
                      slots: list[tuple[int, int]], model_of: np.ndarray) -> None:
    """``Σ_r (r+1)·t[g,r] − Σ_{i: model_i ≠ loaded_g} x[g,i,r] ≥ 0`` per queue (valid cut)."""
    models = problem.models
    queues = sorted({g for g, _ in slots})
    row_of = {g: k for k, g in enumerate(queues)}
    loaded = np.array([models.index(q.loaded_model) if q.loaded_model in models else -1 for q in problem.queues])
    foreign = np.flatnonzero(model_of[cells[:, 1]] != loaded[cells[:, 0]])
    rows = [np.array([row_of[g] for g, _ in slots]), np.array([row_of[g] for g in cells[foreign, 0]], dtype=int)]
    cols = [v["t"].columns, v["x"].col(foreign)]
    vals = [np.array([r + 1.0 for _, r in slots]), -np.ones(foreign.size)]
    mb.add_constraints("swap_count", len(queues), np.concatenate(rows), np.concatenate(cols), np.concatenate(vals),
                       lower=0.0, label=lambda k: f"swap_count[queue={problem.queues[queues[k]].name}]")


def define_symmetry(mb: ModelBuilder, problem: QueueingProblem, v: dict[str, VarBlock], cells: np.ndarray,
                    work: np.ndarray) -> None:
    """Interchangeable queues a, b: ``Σ (W+ε)·x on a − Σ (W+ε)·x on b ≥ 0``."""
    pairs = _identical_queue_pairs(problem)
    if not pairs:
        return
    rows, cols, vals = [], [], []
    for r, (a, b) in enumerate(pairs):
        for g, sign in ((a, 1.0), (b, -1.0)):
            on = np.flatnonzero(cells[:, 0] == g)
            rows.append(np.full(on.size, r)); cols.append(v["x"].col(on)); vals.append(sign * (work[g, cells[on, 1]] + 1e-3))
    mb.add_constraints("symmetry", len(pairs), np.concatenate(rows), np.concatenate(cols), np.concatenate(vals), lower=0.0)


def build_reduced_slots(problem: QueueingProblem, cells: np.ndarray) -> ReducedSlotsMilp:
    """The penalty slots MILP over ``cells`` (K × 3 array of queue, group, slot)."""
    cells = np.asarray(cells, dtype=np.int64).reshape(-1, 3)
    work, completion, _, slo, _ = queue_constants(problem)
    models = problem.models
    model_of = np.array([models.index(g.model) for g in problem.groups])
    depth = {}
    for g, _, r in cells:
        depth[int(g)] = max(depth.get(int(g), 0), int(r) + 1)
    slots = [(g, r) for g in sorted(depth) for r in range(depth[g])]
    slot_index = {s: k for k, s in enumerate(slots)}
    cell_slot = np.array([slot_index[(int(g), int(r))] for g, _, r in cells], dtype=np.int64)
    busy = problem.queue_busy()
    cost = work[cells[:, 0], cells[:, 1]] * cells[:, 2] + busy[cells[:, 0]] + completion[cells[:, 0], cells[:, 1]]
    mb = ModelBuilder("qlm-slots-reduced-penalty", "min")
    v: dict[str, VarBlock] = {"x": define_assignment(mb, problem, cells, cost)}
    v["occ"] = define_occupancy(mb, v["x"], cell_slot, slots, slot_index)
    v["t"] = define_model_switch(mb, problem, v, cells, cell_slot, slots, slot_index, model_of)
    v["wt"] = define_cumulative_wait(mb, problem, v, cells, cell_slot, slots, slot_index, work)
    define_deadlines(mb, v, cells, cell_slot, len(slots), completion, slo)
    define_swap_count(mb, problem, v, cells, slots, model_of)
    define_symmetry(mb, problem, v, cells, work)
    mb.offset = -float(slo.sum())
    return ReducedSlotsMilp(mb.build(), cells, slot_index, v)
