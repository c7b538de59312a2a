"""Exact optimum of G = n / t: branch-and-bound on batch sequences with a rising ratio λ.

(At b_max = 1 and N ≤ 20, `planner.priority.pipeline.prove_optimum` runs the compiled subset DP of
`planner.priority.sequence_dp` instead — ~20× faster at N = 10; this search covers the rest.)

Why this method (and not a MIP).  G is a ratio of an integer count and a sum of latencies whose
waiting part is a running sum of batch maxima; a MIP needs big-M rows for the max-of-batch, the
SLO indicators *and* a parametric (Dinkelbach) outer loop, and its LP relaxation is weak (its
bound stays near N / Σ t_exec).  The structure is easier to exploit directly:

* parametric view: G* > λ iff some plan has n − λ·t > 0.  λ starts at G of the best baseline
  polished by local search (`solve.best_heuristic_plan`) and rises whenever the search completes a better plan, so every
  test below is "can this subtree still reach n − λ·t > 0 at the current λ";
* a plan is a sequence of batches (sets: the order inside a batch does not matter), so the search
  branches on "which set of ≤ b_max remaining jobs (within the token capacity) runs next";
* the state after a prefix is (remaining set R, start W of the next batch, n and t so far), and
  everything later depends only on (R, W).  At b_max > 1 a new node is dropped when an already
  *visited* label (W', n', t') of the same R has W' ≤ W and n' − λ·t' ≥ n − λ·t at the current λ.
  Valid although λ rises: that label's subtree is finished, so every plan in it has G ≤ λ; if a
  completion c made the new node's plan beat λ, then n + n_c − λ(t + t_c) > 0, hence
  n' + n_c − λ(t' + t_c) > 0 (c only gets better from an earlier start), i.e. a plan of the
  finished subtree would beat λ — a contradiction.  At b_max = 1, W is fixed by R (the O(2^N·N)
  DP over subsets) and the label test is λ-free Pareto (n' ≥ n, t' ≤ t), because the interchange
  rule below delegates to subtrees that may not be finished yet (a scalar test there was
  measured to lose optima);
* bound: a node is pruned when n + n_UB(R, W) − λ·(t + t_LB(R, W)) ≤ 0 (no completion beats λ), where

  - ``t_LB`` = |R|·W + Σ_{i∈R} m_i + a lower bound on the waiting inside R: m_i = min_b t_exec,i(b);
    at b_max = 1 the SPT sum (exact); at b_max > 1 the larger of `batched_waiting_bound` and the
    size-sequence bound below (compiled, `compiled.size_sequence_waiting_bound`; it raised the
    root t_LB of the N = 30 benchmark instances, seeds 0–1, from ~65 % to ~93 % of SPF's total
    latency at b_max = 2 and from ~52 % to ~81 % at b_max = 4).  Size-sequence bound: with batches B_1..B_Q in run
    order (sizes b_k, durations D_k ≥ max_{i∈B_k} m_i), waiting = Σ_k b_k·S_k with
    S_k = Σ_{k'<k} D_k'.  The batches before k hold P = Σ_{k'<k} b_k' jobs; sorting their maxima
    descending, the j-th largest is ≥ the (T_j + 1)-th largest m among those P jobs, T_j = jobs in
    the j−1 batches with larger maxima, and T_j is largest when sizes are taken in descending
    order — so S_k ≥ F(P, sizes) = Σ_j m_(P−1−T_j) over the P *shortest* jobs of R with the sizes
    sorted descending (what consecutive grouping of the P shortest jobs, largest batches on the
    longest jobs, achieves).  F depends only on the multiset of earlier sizes, so the minimum of
    Σ_k b_k·F over all size sequences is a shortest path over size multisets (valid for any
    batching; tested against brute force on small blocks);
  - ``n_UB`` = Moore–Hodgson (max on-time jobs on one machine) on a relaxation: at b_max = 1 job i
    has processing t_exec,i(1) and due date slack_i + t_exec,i(1) − W (exact for the count); at
    b_max > 1 job i gets processing m_i / b_max and due date latest_start_i − W + its share plus
    (b_max − 1) shares of batch-mates, valid because a batch lasts at least the mean of its
    jobs' m over b_max slots;
* at b_max ≥ 2 (numba available) a third, joint test: the Lagrangian bound of
  `planner.priority.lagrangian` (a time-indexed DP over (jobs placed, start bucket) with "each job
  once" priced by multipliers μ, tuned by subgradient steps at the root for at most
  LAGRANGIAN_SHARE of the time limit) bounds n − λ₀·t of every completion of a node by
  ``n − λ₀·(t + |R|·W) + to_go[N − |R|, ⌊W/Δ⌋] + Σ_{i∈R} μ_i`` — one table look-up and a sum per
  node.  It sees the trade-off the two separate bounds miss (meeting a long job's SLO costs every
  later job its duration): at the root of the N = 30 benchmark instance (seed 0) it is 0.82 jobs at
  b_max = 2 against 26 − λ·t_LB = 4.5 for n_UB − λ·t_LB, and 1.2 against 30 − λ·t_LB = 9.8 at b_max = 4.  λ₀ is
  the incumbent's G when the search starts; since t > 0 a bound at λ₀ also bounds n − λ·t for the
  later, larger λ, so the test stays valid while λ rises (it only gets more conservative).  If the
  root value is already ≤ 0 the incumbent is optimal without search;
* at b_max = 1, adjacent interchange: the branch "…, i, j" is dropped when "…, j, i" (same set, same
  finishing time) meets at least as many SLOs with no more latency (ties: lower index first);
* at b_max = 1, once n_UB = 0 the rest is pure Σ-latency minimisation and SPT solves it exactly,
  so the node is closed in one step.  (At b_max ≥ 2 a batch-exchange dominance rule — drop "…, B1, B2"
  when swapping one job between B1 and B2 lengthens neither batch, loses no SLO and adds no latency,
  and the sibling starting with the swapped B1 is finished — was built and tested against exhaustive
  search, but measured neutral: < 1 % fewer nodes at N = 12–14 and unchanged N = 30 gaps; not shipped.)

At b_max ≥ 2 two more things make N = 30 provable within a minute:

* **compiled search** (`compiled_driver`, `compiled_search`): the same depth-first search, with the
  same tests in the same order (node counts, plans and proofs equal `visit`'s — tested), compiled;
  children that the Lagrangian node bound prunes are dropped when generated (they are not
  counted as nodes), and at b_max = 4 a leader screen skips most of the 31,930 batches per node
  before they are formed.  The Python search took 229 s and 310 s (b_max = 2, seeds 2 and 1) and did
  not prove seed 0 in 600 s; compiled: 7.6, 9.0 and 40.5 s;
* **restarts at a better λ**: the Lagrangian table is tuned at λ₀ and only prunes what cannot beat λ₀,
  so when the search finds a plan better by `RESTART_GAIN` it stops and starts again with the bound
  re-tuned at the new λ (warm-started from the last multipliers, `RESTART_ITERATIONS` steps).
  Measured (b_max = 4, seed 2, whose warm start is 6 % below the optimum): 50.5 M nodes and 188 s
  without restarts, one restart and 34 k nodes (17–19 s in all) with them; from the optimum itself
  the search needs 21 k nodes.

When the time or node limit stops the search, the reported upper bound on G is the smaller of
(i) λ + max(0, U) / t_LB(root), where U bounds n − λ·t over every unexplored child of the nodes on
the DFS stack (the smaller of the separate bounds and the Lagrangian node bound) (any plan has n − λ·t ≤ U and t ≥ t_LB(root)), (ii) the largest
(n + n_UB) / (t + t_LB) over the same children, and (iii) at b_max ≥ 2, the count-split bound of
`planner.priority.count_bound` computed once when the search stops (λ₀, the root's μ; its time is
reserved when the search starts, and a proof does not pay for it):
max over n of n·λ₀ / (n − V(n)), V(n) ≥ n − λ₀·t for every plan meeting n SLOs.  (iii) replaces the
weak t_LB(root) of (i) by a per-count latency bound; at N = 30 (60 s, quiet core) it cut the reported
gap at b_max = 4 from 5.8 / 8.0 / 3.4 % to 3.7 / 4.1 / 0.8 % (seeds 0 / 1 / 2) and at b_max = 2 only
from 3.8 / 2.6 / 1.0 % to 3.8 / 2.6 / 0.9 %, where the bound is limited by U itself.  Agreement with exhaustive search is tested on
random instances up to N = 7 and b_max = 1..4.
"""

from __future__ import annotations

import heapq
import itertools
import math
import time
from dataclasses import dataclass, field

import numpy as np

from planner.core.work import WorkClock
from planner.priority import effort
from planner.priority.heuristics import Plan
from planner.priority.lagrangian import LagrangianBound, lagrangian_bound, relaxation_data, subgradient_bound
from planner.priority.problem import SUCCESS_TOLERANCE_MS, PriorityProblem

IMPROVED = "improved incumbent"
WALL_STOP = "wall-clock guard"
"""`_Stop` reason of a search stopped by the wall clock before its nominal budget (the run may not repeat)."""
"""`_Stop` reason (and outcome message) of a search stopped for a restart at a better λ."""
RESTART_GAIN = 0.001
"""At b_max ≥ 2 the search restarts, with the Lagrangian bound re-tuned at the new λ (warm-started
from the last multipliers), whenever its best plan beats the bound's λ by this factor: the bound at
λ₀ only prunes what cannot beat λ₀, and measured at N = 30, b_max = 4 (seed 2) the search from a
6 % weaker warm start took 50 M nodes where the same search from the optimum took 21 k.  None: never."""
RESTART_ITERATIONS = 100
"""Subgradient steps of a re-tuned bound (it starts from the previous multipliers)."""
USE_COMPILED_SEARCH = True
"""At b_max ≥ 2 run the search compiled (`compiled_search.branch_and_bound`); False runs `visit`
(the same search in Python; tests compare the two)."""
VALUE_TOLERANCE = 1e-9  # an improvement of n − λ·t must exceed this (relative to N) to count
MAX_MEMO_LABELS = 3_000_000
OPEN_CHILDREN_BOUNDED = 500


@dataclass(frozen=True)
class ExactOutcome:
    plan: Plan
    proven: bool
    bound_g: float  # upper bound on G (req/s)
    nodes: int
    seconds: float
    message: str = ""
    lagrangian: float | None = None  # the root Lagrangian bound on n − λ·t when the search used it
    count_split: bool = False  # the reported bound is the count-split bound (`count_bound`)
    wall_cut: bool = False  # the wall clock stopped a phase before its nominal budget (may not repeat)


def batched_waiting_bound(mins: list[float], b_max: int) -> float:
    """Lower bound on Σ waiting inside a block of jobs cut into batches of ≤ b_max jobs.

    ``mins`` = each job's shortest possible execution time, ascending (r jobs).  With Q batches,
    the k-th shortest batch lasts at least ``max(m_(k), m_(r − (Q−k−1)·b_max − 1))`` (batches
    longer than it hold at most (Q−k−1)·b_max jobs, so every job beyond that rank has m ≤ its
    duration) and the batch run k-th delays at least ``max(r − (k+1)·b_max, Q − k − 1)`` later
    jobs; pairing shortest durations with the largest delays (rearrangement) gives the bound
    for Q, and the minimum over Q = ⌈r/b_max⌉..r is valid for any batching.  Q grows until
    Σ_k m_(k)·(Q−k−1), a lower bound of every larger Q's value that grows with Q, exceeds the best.
    """
    r = len(mins)
    if r <= 1:
        return 0.0
    best = math.inf
    for q in range(-(-r // b_max), r + 1):
        floor_q = 0.0
        value = 0.0
        for k in range(q):
            rank = r - (q - k - 1) * b_max - 1
            m_k = mins[k]
            duration = mins[rank] if rank >= 0 and mins[rank] > m_k else m_k
            behind = r - (k + 1) * b_max
            behind = max(behind, q - k - 1)
            value += duration * behind
            floor_q += m_k * (q - k - 1)
        best = min(best, value)
        if floor_q >= best:
            break
    return best


class _Stop(Exception):
    pass


@dataclass
class _Frame:
    """One DFS node on the stack: its state, its children and how many were explored."""

    mask: int
    wait: float
    met: int
    total: float
    children: list[tuple] = field(default_factory=list)
    explored: int = 0


class _ParametricSearch:
    """max over plans of n − λ·t (t in ms) by depth-first branch-and-bound with dominance."""

    def __init__(self, problem: PriorityProblem, lam: float, deadline: float | None, node_limit: int | None,
                 latency_cache: dict[int, float], relaxation: LagrangianBound | None = None,
                 clock: WorkClock | None = None, work_limit: float | None = None, compiled: bool = True):
        tab = problem.tables
        #: nominal seconds (`planner.priority.effort`) are charged to ``clock``; the search stops once its
        #: ``spent`` reaches ``work_limit`` (deterministic); ``deadline`` is the wall-clock guard only
        self.clock = clock
        self.work_limit = work_limit
        self.wall_cut = False
        self.relaxation = relaxation
        self.restart_above = math.inf  # stop with "improved" once λ exceeds this (set by `search_once`)
        self.multipliers = relaxation.multipliers.tolist() if relaxation is not None else None
        self.jobs = problem.size
        self.b_max = problem.b_max
        self.capacity = problem.token_capacity
        self.lam = lam
        self.execs = tab.exec_ms.tolist()
        self.slack = (tab.slack_ms + SUCCESS_TOLERANCE_MS).tolist()
        self.tokens = tab.tokens.tolist()
        self.min_exec = tab.exec_ms.min(axis=1).tolist()
        self.latest_start = (tab.slack_ms.max(axis=1) + SUCCESS_TOLERANCE_MS).tolist()
        self.by_min_exec = sorted(range(self.jobs), key=lambda i: self.min_exec[i])
        if self.b_max == 1:  # processing t_exec(1), due date (W-relative) slack + t_exec(1)
            self.proc = [row[0] for row in self.execs]
            self.due = [self.slack[i][0] + self.proc[i] for i in range(self.jobs)]
        else:  # processing m_i / b_max, due date latest start + own share (+ batch-mates, per node)
            self.proc = [m / self.b_max for m in self.min_exec]
            self.due = [self.latest_start[i] + self.proc[i] for i in range(self.jobs)]
        self.by_due = sorted(range(self.jobs), key=lambda i: (self.due[i], self.proc[i]))
        self.deadline = deadline
        self.node_limit = node_limit
        self.nodes = 0
        self.tolerance = VALUE_TOLERANCE * max(1, self.jobs)
        self.best: Plan | None = None
        self.memo: dict[int, list[tuple[float, int, float]]] = {}
        self.memo_size = 0
        self.latency_cache = latency_cache
        self.path: list[tuple[int, ...]] = []
        self.compiled_moore_hodgson = None
        self.compiled_size_sequence = None
        if self.jobs <= 62 and compiled:
            try:  # lazy: numba's import is slow
                from planner.priority.compiled import max_on_time, size_sequence_waiting_bound
            except ImportError:
                max_on_time = None
            if max_on_time is not None:
                self.compiled_size_sequence = size_sequence_waiting_bound
                self.compiled_moore_hodgson = max_on_time
                self.latest_start_array = np.array(self.latest_start)
                self.due_array = np.array(self.due)
                self.proc_array = np.array(self.proc)
                self.by_due_array = np.array(self.by_due, dtype=np.int64)
                self.scratch = np.empty(self.jobs)
        self.frames: list[_Frame] = []
        #: nodes a stop left unexpanded (their children would not be listed before the deadline):
        #: (mask, remaining, wait, met, total), bounded by their own node bound in `open_bounds`
        self.unexpanded: list[tuple[int, list[int], float, int, float]] = []
        self.seconds_per_child = SECONDS_PER_CHILD
        self.compiled_expand = None
        self.compiled_waiting = None
        if self.b_max >= 2 and compiled:
            try:  # lazy: numba's import is slow
                from planner.priority.compiled_search import batched_waiting_bound as waiting_kernel
                from planner.priority.compiled_search import expand_batches
            except ImportError:
                expand_batches = None
            if expand_batches is not None:
                self.compiled_expand = expand_batches
                self.compiled_waiting = waiting_kernel
                self.exec_array = np.ascontiguousarray(tab.exec_ms, dtype=np.float64)
                self.slack_array = np.ascontiguousarray(tab.slack_ms + SUCCESS_TOLERANCE_MS, dtype=np.float64)
                self.token_array = np.ascontiguousarray(tab.tokens, dtype=np.int64)
                if relaxation is not None:
                    self.to_go_array = np.ascontiguousarray(relaxation.to_go, dtype=np.float64)
                    self.multiplier_array = np.ascontiguousarray(relaxation.multipliers, dtype=np.float64)
                else:
                    self.to_go_array = np.zeros((1, 1))
                    self.multiplier_array = np.zeros(self.jobs)

    # ---- bounds -------------------------------------------------------------------------
    def max_more_met(self, remaining: list[int], wait: float, remaining_mask: int | None = None) -> int:
        """n_UB: Moore–Hodgson on the relaxation described in the module docstring.  The due-date
        order does not depend on W, so jobs are visited in an order sorted once (``by_due``).
        Runs compiled (`compiled.max_on_time`, same arithmetic, ~half of the search's time in
        Python) when numba is available and N ≤ 62 (the set is passed as a 64-bit mask)."""
        if self.compiled_moore_hodgson is not None:
            if remaining_mask is None:
                remaining_mask = 0
                for i in remaining:
                    remaining_mask |= 1 << i
            return self.compiled_moore_hodgson(remaining_mask, wait, self.latest_start_array, self.due_array, self.proc_array,
                                               self.by_due_array, self.b_max - 1, self.scratch)
        mask = 0
        for i in remaining:
            if self.latest_start[i] >= wait:
                mask |= 1 << i
        if not mask:
            return 0
        if self.b_max == 1:
            items = [(self.due[i] - wait, self.proc[i]) for i in self.by_due if mask >> i & 1]
        else:
            mates = (self.b_max - 1) * max(self.proc[i] for i in remaining if mask >> i & 1)
            items = [(self.due[i] - wait + mates, self.proc[i]) for i in self.by_due if mask >> i & 1]
        heap: list[float] = []
        busy = 0.0
        for due, proc in items:
            heapq.heappush(heap, -proc)
            busy += proc
            if busy > due + 1e-9:
                busy += heapq.heappop(heap)  # drop the longest job scheduled so far
        return len(heap)

    def min_more_latency(self, mask: int, count: int, wait: float) -> float:
        """t_LB of the remaining jobs (see the module docstring); the W-free part is cached per set."""
        cached = self.latency_cache.get(mask)
        if cached is None:
            mins = [self.min_exec[i] for i in self.by_min_exec if mask >> i & 1]
            if self.b_max == 1:  # SPT: the k-th shortest job delays the count - k - 1 after it
                cached = sum(mins) + sum(m * (count - k - 1) for k, m in enumerate(mins))
            else:
                if self.compiled_waiting is not None:
                    waiting = self.compiled_waiting(np.array(mins), self.b_max)
                else:
                    waiting = batched_waiting_bound(mins, self.b_max)
                if self.compiled_size_sequence is not None:
                    waiting = max(waiting, self.compiled_size_sequence(np.array(mins), self.b_max))
                cached = sum(mins) + waiting
            if len(self.latency_cache) < MAX_MEMO_LABELS:
                self.latency_cache[mask] = cached
        return count * wait + cached

    def cache_child_latency(self, mask: int, count: int) -> None:
        """b_max = 1: the W-free part of t_LB of every child set R \\ {j} in O(|R|) in total.
        P(R) = Σ_k m_(k)·(|R| − k); removing the job at sorted position k drops its own term and
        one m from every job before it: P(R \\ j) = P(R) − m_j·(|R| − k) − Σ_{k' < k} m_(k')."""
        parent = self.latency_cache.get(mask)
        if parent is None or len(self.latency_cache) >= MAX_MEMO_LABELS:
            return
        before = 0.0
        k = 0
        for i in self.by_min_exec:
            if mask >> i & 1:
                m = self.min_exec[i]
                self.latency_cache[mask & ~(1 << i)] = parent - m * (count - k) - before
                before += m
                k += 1

    def value_bound(self, mask: int, remaining: list[int], wait: float, met: int, total: float) -> tuple[int, float]:
        """(n + n_UB, t + t_LB) of the subtree below a node."""
        latency = self.min_more_latency(mask, len(remaining), wait)
        return met + self.max_more_met(remaining, wait, mask), total + latency

    # ---- search -------------------------------------------------------------------------
    def dominated(self, mask: int, wait: float, met: int, total: float) -> bool:
        """b_max > 1: a visited label of the same set starting no later with n' − λ·t' ≥ n − λ·t at
        the current λ.  b_max = 1 (W is fixed by the set): a visited label with n' ≥ n and t' ≤ t
        (λ-free, because the interchange rule may delegate to subtrees not yet explored)."""
        labels = self.memo.get(mask)
        if labels is not None:
            if self.b_max == 1:
                for _, m2, t2 in labels:
                    if m2 >= met and t2 <= total:
                        return True
            else:
                lam = self.lam
                value = met - lam * total
                for w2, m2, t2 in labels:
                    if w2 <= wait and m2 - lam * t2 >= value:
                        return True
        if self.memo_size < MAX_MEMO_LABELS:
            if labels is None:
                self.memo[mask] = [(wait, met, total)]
            else:
                labels.append((wait, met, total))
            self.memo_size += 1
        return False

    def record(self, order_tail: list[int], sizes_tail: list[int], met: int, total: float) -> None:
        if met - self.lam * total > self.tolerance:  # G > λ: new incumbent, λ rises
            order = [j for batch in self.path for j in batch] + order_tail
            sizes = [len(batch) for batch in self.path] + sizes_tail
            self.best = Plan(tuple(order), tuple(sizes), met, total)
            self.lam = met / total

    def swap_is_better(self, prev: int, job: int, wait: float) -> bool:
        """b_max = 1: running ``job`` before ``prev`` (the last job placed) reaches the same set and
        finishing time with at least as many SLOs met and no more latency (ties: lower index
        first), so the branch "prev, job" is dropped.  λ-free, hence valid while λ rises."""
        e_prev, e_job = self.execs[prev][0], self.execs[job][0]
        start = wait - e_prev
        met_here = (start <= self.slack[prev][0]) + (wait <= self.slack[job][0])
        met_swap = (start <= self.slack[job][0]) + (start + e_job <= self.slack[prev][0])
        saved = e_prev - e_job  # latency of (prev, job) − latency of (job, prev): (2e_prev + e_job) − (2e_job + e_prev)
        if met_swap != met_here:
            return met_swap > met_here and saved >= -1e-9
        if abs(saved) > 1e-9:
            return saved > 0
        return job < prev

    def children(self, remaining: list[int], wait: float, met: int, total: float) -> list[tuple]:
        out = []
        prev = self.path[-1][0] if self.b_max == 1 and self.path else None
        lam = self.lam
        if self.b_max == 1:  # the loop below specialised to single jobs (the hot path at b_max = 1)
            execs, slack, swap_is_better = self.execs, self.slack, self.swap_is_better
            for job in remaining:
                if prev is not None and swap_is_better(prev, job, wait):
                    continue
                e = execs[job][0]
                gained = 1 if wait <= slack[job][0] else 0
                added = wait + e
                out.append((lam * added - gained, e, (job,), wait + e, met + gained, total + added))
            out.sort(key=lambda c: (c[0], c[1]))
            return out
        if self.compiled_expand is not None:
            return self.compiled_children(remaining, wait, met, total)
        for size in range(1, min(self.b_max, len(remaining)) + 1):
            col = size - 1
            for batch in itertools.combinations(remaining, size):
                if prev is not None and self.swap_is_better(prev, batch[0], wait):
                    continue  # "…, job, prev" is at least as good whatever follows
                if self.capacity is not None and sum(self.tokens[i] for i in batch) > self.capacity:
                    continue
                execs = [self.execs[i][col] for i in batch]
                gained = sum(1 for i in batch if wait <= self.slack[i][col])
                longest = max(execs)
                added = size * wait + sum(execs)
                out.append((lam * added - gained, longest, batch, wait + longest, met + gained, total + added))
        out.sort(key=lambda c: (c[0], c[1]))
        return out

    def compiled_children(self, remaining: list[int], wait: float, met: int, total: float) -> list[tuple]:
        """`children` at b_max ≥ 2 by the compiled kernel (`compiled_search.expand_batches`): the same
        children in the same order, minus those the Lagrangian node bound prunes (each such child's
        visit would end at that same test, which does not change during the search); the kept ones
        carry a 7th entry True when that test already passed (their visit skips it)."""
        relaxation = self.relaxation
        use_bound = relaxation is not None
        keys, longest, members, new_wait, new_met, new_total, bounded = self.compiled_expand(
            np.array(remaining, dtype=np.int64), wait, met, total, self.lam, self.exec_array, self.slack_array,
            self.token_array, math.inf if self.capacity is None else float(self.capacity), self.b_max, use_bound,
            relaxation.lam if use_bound else 0.0, relaxation.step if use_bound else 1.0, self.to_go_array,
            self.multiplier_array, self.jobs, self.tolerance)
        sizes = (members >= 0).sum(axis=1).tolist()  # rows come sorted as ``children`` sorts them
        return [(key, long, tuple(row[:size]), w, m, t, b) for key, long, row, size, w, m, t, b in zip(
            keys.tolist(), longest.tolist(), members.tolist(), sizes, new_wait.tolist(), new_met.tolist(),
            new_total.tolist(), bounded.tolist())]

    def run(self) -> None:
        """The whole search from the root (raises `_Stop` at the time or node limit): compiled at
        b_max ≥ 2 when numba is available, else `visit`."""
        if (USE_COMPILED_SEARCH and self.b_max >= 2 and self.compiled_expand is not None
                and self.compiled_moore_hodgson is not None):
            self.run_compiled()
        else:
            self.count_node()
            self.visit((1 << self.jobs) - 1, list(range(self.jobs)), 0.0, 0, 0.0)

    def count_node(self) -> None:
        """Count a node about to be visited; raise `_Stop` at the limits (checked every 64 nodes:
        at b_max = 4 one node can take ~50 ms in Python, its children)."""
        self.nodes += 1
        if self.nodes & 63 == 0:
            if self.lam > self.restart_above:
                raise _Stop(IMPROVED)
            if self.clock is not None:
                self.clock.charge(effort.python_search_seconds(64))
                if self.work_limit is not None and self.clock.spent >= self.work_limit:
                    raise _Stop("time limit")
            if self.deadline is not None and time.perf_counter() > self.deadline:
                self.wall_cut = True
                raise _Stop(WALL_STOP)
            if self.node_limit is not None and self.nodes > self.node_limit:
                raise _Stop("node limit")

    def run_compiled(self) -> None:
        """`visit`'s search run by the compiled kernel (`compiled_driver.run_sequential`): the same nodes,
        incumbents and proofs as `visit`."""
        from planner.priority.compiled_driver import run_sequential

        run_sequential(self)

    def visit(self, mask: int, remaining: list[int], wait: float, met: int, total: float,
              bounded: bool = False) -> None:
        """One node (counted by the caller with `count_node`, before it is marked explored: a stop
        there leaves it among the unexplored children that `open_bounds` bounds)."""
        if not remaining:
            self.record([], [], met, total)
            return
        if not bounded and self.relaxation is not None and self.lagrangian_value(remaining, wait, met, total) <= self.tolerance:
            return
        more_latency = self.min_more_latency(mask, len(remaining), wait)
        more_met = self.max_more_met(remaining, wait, mask)
        if met + more_met - self.lam * (total + more_latency) <= self.tolerance:
            return
        if self.b_max == 1 and more_met == 0:  # the rest is Σ-latency only: SPT is optimal and meets t_LB
            tail = sorted(remaining, key=lambda i: self.execs[i][0])
            self.record(tail, [1] * len(tail), met, total + more_latency)
            return
        if self.dominated(mask, wait, met, total):
            return
        if self.b_max >= 2 and self.deadline is not None:
            # listing every batch of ≤ b_max of the remaining jobs (C(100, 4) ≈ 3.9 M at N = 100, ~15 s) must
            # not overrun the time limit: stop before it, leaving this node unexpanded (bounded as a whole)
            count = sum(math.comb(len(remaining), size) for size in range(1, min(self.b_max, len(remaining)) + 1))
            if time.perf_counter() + count * self.seconds_per_child > self.deadline:
                self.unexpanded.append((mask, remaining, wait, met, total))
                self.wall_cut = True
                raise _Stop(WALL_STOP)
            listed = time.perf_counter()
            children = self.children(remaining, wait, met, total)
            if count >= 10_000:  # learn this machine's speed from the large listings
                self.seconds_per_child = max(self.seconds_per_child, (time.perf_counter() - listed) / count)
        else:
            children = self.children(remaining, wait, met, total)
        frame = _Frame(mask=mask, wait=wait, met=met, total=total, children=children)
        if self.b_max == 1:
            self.cache_child_latency(mask, len(remaining))
        self.frames.append(frame)
        for child in frame.children:
            batch, new_wait, new_met, new_total = child[2:6]
            self.count_node()
            frame.explored += 1
            new_mask = mask
            for i in batch:
                new_mask &= ~(1 << i)
            self.path.append(batch)
            self.visit(new_mask, [i for i in remaining if new_mask >> i & 1], new_wait, new_met, new_total,
                       len(child) > 6 and child[6])
            self.path.pop()
        self.frames.pop()

    def lagrangian_value(self, remaining: list[int], wait: float, met: int, total: float) -> float:
        """`LagrangianBound.node_bound` of a node: bounds n − λ₀·t, hence n − λ·t for the current λ ≥ λ₀."""
        assert self.relaxation is not None and self.multipliers is not None
        multipliers = self.multipliers
        return self.relaxation.node_bound(self.jobs - len(remaining), wait, met, total,
                                          sum(multipliers[i] for i in remaining))

    def open_bounds(self) -> tuple[float, float]:
        """(U, R) after a stop: U ≥ n − λ·t and R ≥ n / t (per ms) for every plan not yet explored.
        A frame with more than `OPEN_CHILDREN_BOUNDED` unexplored children is bounded by its own node
        bound (valid for all its completions, hence for every child; weaker but O(1)): at b_max = 4
        a frame can hold ~30,000 children and bounding each one overran the time limit by ~10 s."""
        value_ub = 0.0
        ratio_ub = 0.0

        def include(mask: int, remaining: list[int], wait: float, met: int, total: float) -> None:
            """Raise (U, R) to the bounds of every completion of the node (mask, wait, met, total)."""
            nonlocal value_ub, ratio_ub
            met_ub, total_lb = self.value_bound(mask, remaining, wait, met, total)
            node_ub = met_ub - self.lam * total_lb
            if self.relaxation is not None:
                node_ub = min(node_ub, self.lagrangian_value(remaining, wait, met, total))
            value_ub = max(value_ub, node_ub)
            if total_lb > 0:
                ratio_ub = max(ratio_ub, met_ub / total_lb)

        for mask, remaining, wait, met, total in self.unexpanded:  # every completion of the node
            include(mask, remaining, wait, met, total)
        for frame in self.frames:
            unexplored = frame.children[frame.explored:]
            if len(unexplored) > OPEN_CHILDREN_BOUNDED:
                remaining = [i for i in range(self.jobs) if frame.mask >> i & 1]
                include(frame.mask, remaining, frame.wait, frame.met, frame.total)
                continue
            for child in unexplored:
                batch, wait, met, total = child[2:6]
                mask = frame.mask
                for i in batch:
                    mask &= ~(1 << i)
                include(mask, [i for i in range(self.jobs) if mask >> i & 1], wait, met, total)
        return value_ub, ratio_ub


SECONDS_PER_CHILD = 2e-6
"""First guess of the time to list one child batch at b_max ≥ 2 (measured ~3.6 µs per child in Python's
`visit` at N = 100, b_max = 4); raised to the slowest large listing seen during the search."""

LAGRANGIAN_SHARE = 0.3
"""At b_max ≥ 2, the share of the time limit the Lagrangian bound's subgradient steps may take.  They
usually stop earlier (no better L(μ) for a while, or LAGRANGIAN_ITERATIONS): at N = 30 a step takes
~25 ms at b_max = 2 and ~50 ms at b_max = 4 on a quiet core, and the bound had stalled after
~200–300 steps on the benchmark instances; the branch-and-bound after it hardly lowers the bound
further (it finds better plans), so the share only caps slow (loaded) machines."""
LAGRANGIAN_ITERATIONS = 300


def _steps_within(problem: PriorityProblem, iterations: int, clock: WorkClock | None,
                  work_end: float | None) -> tuple[int, float]:
    """(subgradient steps, nominal seconds per step) that fit in `LAGRANGIAN_SHARE` of the nominal
    time left before ``work_end`` on ``clock`` (at least one step); ``iterations`` without a limit."""
    from planner.priority.lagrangian import relaxation_data

    buckets = relaxation_data(problem)[3]
    per_step = effort.step_seconds(problem.size, buckets, problem.b_max)
    if clock is None or work_end is None:
        return iterations, per_step
    left = max(work_end - clock.spent, 0.0)
    return max(1, min(iterations, int(LAGRANGIAN_SHARE * left / per_step))), per_step


def _wall_seconds_left(clock: WorkClock | None, deadline: float | None) -> float | None:
    return None if clock is None or deadline is None else max(deadline - time.perf_counter(), 0.0)


def root_relaxation(problem: PriorityProblem, lam: float, time_limit: float | None = None,
                    clock: WorkClock | None = None, work_end: float | None = None,
                    deadline: float | None = None) -> LagrangianBound | None:
    """The Lagrangian bound at λ (b_max ≥ 2 with numba available; None otherwise).  With ``clock``
    its steps are the ones that fit in `LAGRANGIAN_SHARE` of the nominal time left before
    ``work_end`` (charged; ``deadline`` = the wall-clock guard); else ``time_limit`` caps its wall time."""
    if problem.b_max < 2:
        return None
    try:
        steps, per_step = _steps_within(problem, LAGRANGIAN_ITERATIONS, clock, work_end)
        wall = _wall_seconds_left(clock, deadline)
        started = time.perf_counter()
        bound = lagrangian_bound(problem, lam, iterations=steps, target=VALUE_TOLERANCE * max(1, problem.size),
                                 time_limit=wall if clock is not None else
                                 (None if time_limit is None else LAGRANGIAN_SHARE * time_limit))
    except ImportError:
        return None
    if clock is not None:
        clock.charge(per_step * bound.iterations)
        if wall is not None and time.perf_counter() - started > wall:
            clock.wall_cut = True
    return bound


def retuned_relaxation(problem: PriorityProblem, lam: float, previous: LagrangianBound,
                       time_limit: float | None = None, clock: WorkClock | None = None,
                       work_end: float | None = None, deadline: float | None = None) -> LagrangianBound:
    """The Lagrangian bound at a better λ, from the multipliers of ``previous`` (RESTART_ITERATIONS
    steps at most, and LAGRANGIAN_SHARE of the time left: nominal with ``clock``, as `root_relaxation`)."""
    exec_ms, slack, step, buckets = relaxation_data(problem)
    steps, per_step = _steps_within(problem, RESTART_ITERATIONS, clock, work_end)
    wall = _wall_seconds_left(clock, deadline)
    started = time.perf_counter()
    bound = subgradient_bound(exec_ms, slack, lam, step, buckets, steps,
                              target=VALUE_TOLERANCE * max(1, problem.size),
                              time_limit=wall if clock is not None else
                              (None if time_limit is None else LAGRANGIAN_SHARE * time_limit),
                              multipliers=previous.multipliers)
    if clock is not None:
        clock.charge(per_step * bound.iterations)
        if wall is not None and time.perf_counter() - started > wall:
            clock.wall_cut = True
    return bound


PLAIN_NODE_BUDGET = 20_000
"""At b_max ≥ 2 the search first runs without the Lagrangian bound for this many nodes: small
instances finish within it (N ≤ 10 in a few thousand nodes) and would pay more for the bound's
~300 DP passes than for the whole search; larger ones then restart from the better incumbent with
the bound.  0 computes the bound at once (the tests use it to exercise the bound on small instances)."""


COUNT_PASS_RESERVE = 3.0
"""Time reserved for the count-split pass, in (N + 1) × the time of one subgradient step of the root
relaxation (measured at N = 30: the pass takes about 60–100 steps' time)."""
MAX_COUNT_TABLE = 4_000_000
"""The count-split bound's DP table has (N + 1)²·buckets entries; it is skipped above this (N ≳ 44)."""


def count_split_bound(problem: PriorityProblem, relaxation: LagrangianBound) -> float:
    """Upper bound on G (per ms) from `planner.priority.count_bound` at the root relaxation's λ and μ
    (one DP pass over every SLO count; +inf when skipped or when numba is missing)."""
    buckets = relaxation.to_go.shape[1]
    if (problem.size + 1) ** 2 * buckets > MAX_COUNT_TABLE:
        return math.inf
    try:
        from planner.priority.count_bound import count_values, ratio_bound
        from planner.priority.lagrangian import relaxation_data
    except ImportError:
        return math.inf
    exec_ms, slack, step, buckets = relaxation_data(problem)
    values = count_values(exec_ms, slack, relaxation.lam, step, buckets, relaxation.multipliers)
    return ratio_bound(values, relaxation.lam)


def search_once(problem: PriorityProblem, incumbent: Plan, deadline: float | None, node_limit: int | None,
                relaxation: LagrangianBound | None, restart_gain: float | None = None,
                clock: WorkClock | None = None, work_limit: float | None = None) -> ExactOutcome:
    """One branch-and-bound from ``incumbent`` (λ = its G) with the given Lagrangian bound, if any.
    With ``restart_gain`` it stops (message `IMPROVED`, no bound) as soon as its best plan beats the
    relaxation's λ by that factor, so the caller can re-tune the bound at the better λ.  ``clock`` /
    ``work_limit``: its nominal seconds are charged and it stops when the clock reaches ``work_limit``;
    ``deadline`` is the wall-clock guard (a stop there sets ``wall_cut``)."""
    started = time.perf_counter()
    lam = incumbent.met / incumbent.total_ms if incumbent.total_ms > 0 else 0.0
    no_time = clock is not None and work_limit is not None and clock.spent >= work_limit
    # without nominal time left only the root is bounded, in Python (numba's import alone takes a second)
    search = _ParametricSearch(problem, lam, deadline, node_limit, {}, relaxation, clock, work_limit,
                               compiled=not no_time)
    if restart_gain is not None and relaxation is not None:
        search.restart_above = relaxation.lam * (1 + restart_gain)
    full = (1 << problem.size) - 1
    if relaxation is not None and relaxation.value <= search.tolerance:  # no plan beats the incumbent
        return ExactOutcome(incumbent, True, incumbent.g, 0, time.perf_counter() - started,
                            "proven by the Lagrangian bound")
    try:
        if no_time:  # no nominal time left: the root is bounded as a whole (and the kernels are not loaded)
            search.unexpanded.append((full, list(range(problem.size)), 0.0, 0, 0.0))
            raise _Stop("time limit")
        search.run()
    except _Stop as stop:
        best = search.best or incumbent
        if stop.args[0] == IMPROVED:
            return ExactOutcome(best, False, math.inf, search.nodes, time.perf_counter() - started, IMPROVED,
                                wall_cut=search.wall_cut)
        value_ub, ratio_ub = search.open_bounds()
        root_latency = search.min_more_latency(full, problem.size, 0.0)
        dinkelbach = search.lam + max(value_ub, 0.0) / root_latency
        bound = 1000.0 * max(min(dinkelbach, ratio_ub), search.lam)
        return ExactOutcome(best, False, bound, search.nodes, time.perf_counter() - started,
                            f"stopped by the {stop.args[0]} after {search.nodes} nodes", wall_cut=search.wall_cut)
    best = search.best or incumbent
    return ExactOutcome(best, True, best.g, search.nodes, time.perf_counter() - started, wall_cut=search.wall_cut)


def solve_exact(problem: PriorityProblem, incumbent: Plan, time_limit: float | None = None,
                node_limit: int | None = None, clock: WorkClock | None = None) -> ExactOutcome:
    """Prove ``incumbent`` optimal or find the optimum (see the module docstring).  At b_max ≥ 2 a
    first search of at most PLAIN_NODE_BUDGET nodes without the Lagrangian bound; if it does not
    finish, the bound is computed at the G of its best plan and the search restarts from that plan.

    A time limit (``time_limit``, or the limit of a caller's ``clock``, whose start is the call's) is
    spent in nominal seconds (`planner.priority.effort`): the searches stop when the clock reaches
    the limit less the time kept for the final bounds (`effort.finish_seconds`, and the count-split
    pass when it is planned), the Lagrangian bound takes the steps that fit in `LAGRANGIAN_SHARE` of
    what is left — so the same instance and limit give the same plan and bound.  The wall clock only
    guards (``guard_share`` of the limit): when it stops a phase first, ``wall_cut`` is set."""
    started = time.perf_counter()
    if clock is None and time_limit is not None:
        clock = WorkClock(time_limit, started)
    run = _exact_run(problem, incumbent, node_limit, clock)
    if problem.b_max >= 2 and PLAIN_NODE_BUDGET > 0:
        first = _plain_search(run)
        if first is not None:
            return ExactOutcome(first.plan, first.proven, first.bound_g, first.nodes,
                                time.perf_counter() - started, first.message, wall_cut=run.wall_cut)
    lam = run.incumbent.met / run.incumbent.total_ms if run.incumbent.total_ms > 0 else 0.0
    relaxation = root_relaxation(problem, lam, clock=clock, work_end=run.work_end, deadline=run.deadline)
    count_pass = _plan_count_pass(run, relaxation)
    outcome, relaxation = _search_with_restarts(run, relaxation, count_pass)
    bound_g, count_split = _reported_bound(run, outcome, relaxation, count_pass)
    message = outcome.message.replace(f"after {outcome.nodes} nodes", f"after {run.nodes + outcome.nodes} nodes")
    return ExactOutcome(outcome.plan, outcome.proven, bound_g, run.nodes + outcome.nodes,
                        time.perf_counter() - started, message,
                        lagrangian=None if relaxation is None else relaxation.value, count_split=count_split,
                        wall_cut=run.wall_cut or (clock is not None and clock.wall_cut))


@dataclass
class _ExactRun:
    """One `solve_exact` call's state between its steps: the incumbent, the nodes searched so far and the
    node limit left, the nominal time at which the searches stop (``work_end``: the limit less
    `effort.finish_seconds`, None without a limit) and the wall-clock guard (``deadline``, a
    `time.perf_counter` value, None without a guard)."""

    problem: PriorityProblem
    incumbent: Plan
    node_limit: int | None
    clock: WorkClock | None
    work_end: float | None
    deadline: float | None
    nodes: int = 0
    wall_cut: bool = False


def _exact_run(problem: PriorityProblem, incumbent: Plan, node_limit: int | None,
               clock: WorkClock | None) -> _ExactRun:
    """The state at the start of `solve_exact`: the searches end ``effort.finish_seconds`` before the
    clock's limit (nominal), the wall guard at ``guard_share`` of the limit less the same time."""
    limit = None if clock is None else clock.time_limit
    finish = effort.finish_seconds(problem.size)
    work_end = None if limit is None else limit - finish
    deadline = None if limit is None or not math.isfinite(clock.guard_share) else \
        clock.started + clock.guard_share * limit - finish
    return _ExactRun(problem, incumbent, node_limit, clock, work_end, deadline)


def _plain_search(run: _ExactRun) -> ExactOutcome | None:
    """The first search, without the Lagrangian bound, of at most PLAIN_NODE_BUDGET nodes: its outcome
    when it is final (proven, out of nominal time or wall-cut, or the node limit is within the budget);
    else None, with its best plan as the incumbent and its nodes counted in ``run``."""
    clock, work_end, node_limit = run.clock, run.work_end, run.node_limit
    budget = PLAIN_NODE_BUDGET if node_limit is None else min(node_limit, PLAIN_NODE_BUDGET)
    first = search_once(run.problem, run.incumbent, run.deadline, budget, None, clock=clock, work_limit=work_end)
    run.wall_cut = first.wall_cut
    out_of_time = work_end is not None and (clock.spent >= work_end or first.wall_cut)
    if first.proven or out_of_time or (node_limit is not None and node_limit <= PLAIN_NODE_BUDGET):
        return first
    run.incumbent, run.nodes = first.plan, first.nodes
    if node_limit is not None:
        run.node_limit = node_limit - first.nodes
    return None


@dataclass(frozen=True)
class _CountPass:
    """Whether the count-split pass runs if the search stops (``planned``), the nominal seconds reserved
    for it, and the nominal end and wall deadline of the searches once that time is kept."""

    planned: bool
    reserve: float
    search_end: float | None
    search_deadline: float | None


def _plan_count_pass(run: _ExactRun, relaxation: LagrangianBound | None) -> _CountPass:
    """The count-split pass (reported bound only) is planned when the root relaxation does not already
    prove the incumbent; under a time limit its time (`effort.count_pass_seconds`) is reserved up front,
    and it is dropped when that reserve exceeds a quarter of the nominal time left."""
    planned = relaxation is not None and relaxation.value > VALUE_TOLERANCE * max(1, run.problem.size)
    search_end = run.work_end
    reserve = 0.0
    if planned and run.work_end is not None:
        reserve = effort.count_pass_seconds(run.problem.size, relaxation_data(run.problem)[3], run.problem.b_max)
        planned = run.work_end - run.clock.spent > 4 * reserve  # else it would eat most of the time left
        if planned:
            search_end = run.work_end - reserve
    search_deadline = run.deadline if not planned or run.deadline is None else run.deadline - reserve
    return _CountPass(planned, reserve, search_end, search_deadline)


def _search_with_restarts(run: _ExactRun, relaxation: LagrangianBound | None,
                          count_pass: _CountPass) -> tuple[ExactOutcome, LagrangianBound | None]:
    """Search with the Lagrangian bound; whenever a search stops because its best plan beats the bound's
    λ by RESTART_GAIN, re-tune the bound at that plan's G and search again from it.  Returns the last
    search's outcome and the bound it used (its nodes are not yet counted in ``run``)."""
    problem, clock = run.problem, run.clock
    while True:
        outcome = search_once(problem, run.incumbent, count_pass.search_deadline, run.node_limit, relaxation,
                              RESTART_GAIN, clock=clock, work_limit=count_pass.search_end)
        run.wall_cut = run.wall_cut or outcome.wall_cut
        if outcome.message != IMPROVED:
            return outcome, relaxation
        run.nodes += outcome.nodes
        if run.node_limit is not None:
            run.node_limit = max(run.node_limit - outcome.nodes, 0)
        run.incumbent = outcome.plan
        relaxation = retuned_relaxation(problem, run.incumbent.met / run.incumbent.total_ms, relaxation,
                                        clock=clock, work_end=count_pass.search_end,
                                        deadline=count_pass.search_deadline)


def _reported_bound(run: _ExactRun, outcome: ExactOutcome, relaxation: LagrangianBound | None,
                    count_pass: _CountPass) -> tuple[float, bool]:
    """(bound on G, whether it is the count-split bound): the search's bound, or the count-split bound
    (`count_split_bound`, at least the plan's G) when the search stopped unproven, the pass was planned
    and it is tighter; the pass's reserved time is charged to the clock."""
    bound_g, count_split = outcome.bound_g, False
    if count_pass.planned and not outcome.proven:
        if run.clock is not None:
            run.clock.charge(count_pass.reserve)
        count_g = 1000.0 * count_split_bound(run.problem, relaxation)
        if count_g < bound_g:
            bound_g, count_split = max(count_g, outcome.plan.g), True
    return bound_g, count_split
