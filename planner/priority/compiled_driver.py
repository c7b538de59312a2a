"""Driver of the compiled branch-and-bound (`compiled_search.branch_and_bound`) for `exact._ParametricSearch`.

`run_sequential` runs the search in chunks of nodes: between chunks it charges the chunk's nominal
seconds (`planner.priority.effort.compiled_search_seconds` of the nodes the kernel counted) to the
search's clock and checks the nominal budget, the node limit, the restart threshold
and the wall-clock guard; it visits exactly the nodes `visit` visits (tested).  Chunk sizes depend
on those counts only (never on the wall clock), so a search stopped by its nominal budget stops at
the same node on every run.  At a stop it leaves the open part of the tree (the stack) in
``search.frames`` for `open_bounds`.

Measured and not adopted: a two-thread version (one root child per worker at a time, the kernel
releasing the GIL, the best plan shared between chunks, a dominance memo per worker).  Each worker
loses the other's memo labels, so at N = 30 it visited about twice the nodes (b_max = 2, seed 0:
26.1 M vs 12.2 M) and ended no faster (43.7 s vs 40.5 s; b_max = 4, seed 0: not proven in 60 s vs
proven in 57 s); a shared memo would need locking on every node.
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING

import numpy as np

from planner.priority.heuristics import Plan

if TYPE_CHECKING:
    from planner.priority.exact import _ParametricSearch

#: Nodes of the first chunk; later chunks aim at CHUNK_SECONDS nominal seconds each (at the nominal
#: cost per node so far), and at most what is left of the nominal budget.
FIRST_CHUNK_NODES = 2_000
CHUNK_SECONDS = 0.05


class _Worker:
    """One search state of the kernel (stack, children arena, memo, latency cache, best plan)."""

    def __init__(self, search: _ParametricSearch) -> None:
        from numba import types
        from numba.typed import Dict

        from planner.priority import compiled_search as kernel
        from planner.priority.exact import MAX_MEMO_LABELS

        self.search, self.kernel = search, kernel
        jobs, b_max = search.jobs, search.b_max
        width = sum(kernel._batch_count(r, b_max) for r in range(1, jobs + 1))
        self.state = np.zeros(6, dtype=np.int64)
        self.lam_state = np.array([search.lam, 0.0, 0.0])
        self.frame_mask, self.frame_met = np.zeros(jobs + 1, dtype=np.int64), np.zeros(jobs + 1, dtype=np.int64)
        self.frame_wait, self.frame_total = np.zeros(jobs + 1), np.zeros(jobs + 1)
        self.frame_start, self.frame_end, self.frame_next = (np.zeros(jobs + 1, dtype=np.int64) for _ in range(3))
        self.keys, self.longest, self.new_wait, self.new_total = (np.empty(width) for _ in range(4))
        self.members = np.full((width, b_max), -1, dtype=np.int64)
        self.new_met = np.empty(width, dtype=np.int64)
        self.bounded = np.zeros(width, dtype=np.bool_)
        self.labels = MAX_MEMO_LABELS
        self.lab_wait, self.lab_total = np.empty(self.labels), np.empty(self.labels)
        self.lab_met, self.lab_next = np.empty(self.labels, dtype=np.int64), np.empty(self.labels, dtype=np.int64)
        self.memo = Dict.empty(types.int64, types.int64)
        self.latency_cache = Dict.empty(types.int64, types.float64)
        self.best_order, self.best_sizes = np.zeros(jobs, dtype=np.int64), np.zeros(jobs, dtype=np.int64)
        self.chunk = FIRST_CHUNK_NODES

    @property
    def nodes(self) -> int:
        return int(self.state[self.kernel.STATE_NODES])

    def call(self, budget: int) -> int:
        """Run the kernel until its subtree is done (`SEARCH_DONE`) or ``budget`` nodes are counted."""
        s = self.search
        relaxation = s.relaxation
        use_bound = relaxation is not None
        return self.kernel.branch_and_bound(
            self.state, self.lam_state, self.frame_mask, self.frame_wait, self.frame_met, self.frame_total,
            self.frame_start, self.frame_end, self.frame_next, self.keys, self.longest, self.members, self.new_wait,
            self.new_met, self.new_total, self.bounded, self.memo, self.lab_wait, self.lab_met, self.lab_total,
            self.lab_next, self.latency_cache, self.labels, s.exec_array, s.slack_array, s.token_array,
            math.inf if s.capacity is None else float(s.capacity), s.b_max, use_bound,
            relaxation.lam if use_bound else 0.0, relaxation.step if use_bound else 1.0, s.to_go_array,
            s.multiplier_array, s.tolerance, np.array(s.min_exec), np.array(s.by_min_exec, dtype=np.int64),
            s.latest_start_array, s.due_array, s.proc_array, s.by_due_array, self.best_order, self.best_sizes, budget)

    def nominal_seconds(self) -> float:
        from planner.priority import effort

        return effort.compiled_search_seconds(self.nodes, self.search.jobs, self.search.b_max)

    def next_budget(self, budget_nodes: int | None, nominal_left: float | None) -> int:
        """The node count at which the next chunk pauses: `CHUNK_SECONDS` (or ``nominal_left``, if less)
        at the nominal cost per node so far, at least 1,000 nodes more, capped at ``budget_nodes``."""
        if self.nodes:
            per_node = max(self.nominal_seconds() / self.nodes, 1e-12)
            target = CHUNK_SECONDS if nominal_left is None else min(CHUNK_SECONDS, max(nominal_left, 0.0))
            self.chunk = int(min(max(target / per_node, 1_000), 5_000_000))
        budget = self.nodes + self.chunk
        return budget if budget_nodes is None else min(budget, budget_nodes)

    def take_plan(self) -> Plan | None:
        """The best plan this worker found since the last call (then forgets that it found one)."""
        k = self.kernel
        if not self.state[k.STATE_FOUND]:
            return None
        self.state[k.STATE_FOUND] = 0
        batches = int(self.state[k.STATE_BATCHES])
        return Plan(tuple(self.best_order.tolist()), tuple(self.best_sizes[:batches].tolist()),
                    int(self.lam_state[1]), float(self.lam_state[2]))

    def children(self, start: int, end: int) -> list[tuple]:
        return [(float(self.keys[k]), float(self.longest[k]), tuple(j for j in self.members[k].tolist() if j >= 0),
                 float(self.new_wait[k]), int(self.new_met[k]), float(self.new_total[k]), bool(self.bounded[k]))
                for k in range(start, end)]

    def frames(self) -> list:
        from planner.priority.exact import _Frame

        out = []
        for d in range(int(self.state[self.kernel.STATE_DEPTH])):
            start, end = int(self.frame_start[d]), int(self.frame_end[d])
            out.append(_Frame(int(self.frame_mask[d]), float(self.frame_wait[d]), int(self.frame_met[d]),
                              float(self.frame_total[d]), self.children(start, end), int(self.frame_next[d]) - start))
        return out


def _limit_reason(search: _ParametricSearch, nodes: int) -> str | None:
    from planner.priority.exact import IMPROVED, WALL_STOP

    if search.lam > search.restart_above:
        return IMPROVED
    if search.clock is not None and search.work_limit is not None and search.clock.spent >= search.work_limit:
        return "time limit"
    if search.deadline is not None and time.perf_counter() > search.deadline:
        search.wall_cut = True
        return WALL_STOP
    if search.node_limit is not None and nodes > search.node_limit:
        return "node limit"
    return None


def _harvest(search: _ParametricSearch, worker: _Worker) -> None:
    plan = worker.take_plan()
    if plan is not None and worker.lam_state[0] > search.lam:
        search.best, search.lam = plan, float(worker.lam_state[0])


def run_sequential(search: _ParametricSearch) -> None:
    """The search on one thread (raises `exact._Stop` at a limit or for a restart)."""
    from planner.priority.exact import _Stop

    worker = _Worker(search)
    charged = 0.0
    while True:
        limit = None if search.node_limit is None else search.node_limit + 1
        nominal_left = None
        if search.clock is not None and search.work_limit is not None:
            nominal_left = search.work_limit - search.clock.spent
        status = worker.call(worker.next_budget(limit, nominal_left))
        search.nodes = worker.nodes
        if search.clock is not None:
            spent = worker.nominal_seconds()
            search.clock.charge(spent - charged)
            charged = spent
        _harvest(search, worker)
        if status == worker.kernel.SEARCH_DONE:
            return
        reason = _limit_reason(search, search.nodes)
        if reason is not None:
            search.frames = worker.frames()
            raise _Stop(reason)
