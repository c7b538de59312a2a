"""The optimal batch-schedule MIP of InferMax (docs/formulations.md §3.3), one `define_*` per family.

This is the paper's big-M model (``solve_batching(..., formulation="bigm")``).  For offline latency
instances where its dominance conditions hold, `solve_batching` uses the stronger per-request path
model of `planner.batching.flow_formulation` instead (no big-M rows, no secants, exact costs);
this model remains the one for online arrivals, the TTFT objective and instances where chunked
prefill may pay.

Index: request i = 0..N−1, batch j = 1..J; column j = 0 of every (N, J+1) block is the initial
state (fixed by bounds: m = 0, Iin = I_i, every indicator 0).  Per request the big-M constant is
``Mi = I_i + O_i`` (= max KV ``U_i = I_i+O_i−1`` plus one), derived from the instance; chunk sizes
are bounded by ``cmax_i = min(P, U_i)``.

Quadratic prefill term — handled **exactly**, not approximated: c is integer, so
``sq ≥ (2k+1)·c − k(k+1)`` for k = 0..cmax_i−1 (the secants of c² between consecutive integers)
gives ``min sq = c²`` at every integer c; the objective pays ``a_p·(Σ_i sq_{i,j} − Σ_i dg_{i,j})``,
which is ``a_p·Σ_{prefill} c²`` because decodes have c = 1 = c² (§3.3 "exact convex rewrite").
KVs read by decodes: ``w ≥ m_{i,j−1} − U_i(1 − dg_{i,j})``, w ≥ 0 (only the lower side is needed
because w is minimised with a positive coefficient).  Batch indicators u (non-empty), up
(has prefill), ud (has decode) are lower-bounded by the per-request indicators.

Optimality is over schedules with at most J batches; the caller picks a J that provably admits an
optimal schedule: for the latency objective `batch_count_bound` of a known schedule's latency (any
schedule at least as fast has at most that many batches), for the TTFT objective the first-token
instance below with `planner.batching.ttft.prefix_batch_bound` batches, and with a latency goal
``batch_count_bound(goal)`` (every schedule meeting the goal has at most that many).
The cost model's Vidur-only terms are not modelled (see `planner.batching.costmodel`).

**Finished requests process nothing** (row ``finished_no_tokens``): a finished request is released
by a cost-free eviction; its KV then was ``m = U_i`` (its t-th token leaves ``I_i + t − 1`` KVs), so
the eviction sets ``Iin = U_i + 1``, one more than any unfinished request can have (an unfinished
request evicted after t < O_i tokens gets ``Iin = I_i + t ≤ U_i``).  Termination (1) only counts
*generated* tokens, and a prefill chunk that never reaches Iin generates none, so (1) alone admits a
released request processing up to U_i more tokens (``m ≤ U_i < Iin``) that count in no token total.
A latency objective pays for them, but the TTFT objective is indifferent to batches after the last
first token, so its optima include such points — schedules the validator rejects ("runs after
finishing").  The row
``c_{i,j} ≤ cmax_i·(U_i + 1 − Iin_{i,j−1})`` forbids exactly that: it is ``c ≤ 0`` after the release
and no restriction (``c ≤ cmax_i``) before it.

**TTFT without a latency goal** is solved on the *first-token instance* (`ttft.first_token_problem`:
every O_i = 1, same limits): the mean TTFT depends only on the batches up to the last first token,
some TTFT-optimal schedule has a prefix that is exactly a schedule of that instance, and any of its
schedules extends to a whole schedule with the same first-token times (`planner.batching.ttft`).  When
every O_i = 1 the first-token batch is the one with g = 1, so the TTFT rows need no cumulative counter G.

Valid inequalities (``cut_*`` row families, `CUT_DEFINITIONS`, `DEFAULT_CUTS`): the big-M links
leave the LP relaxation free to make c, d, dg, w fractional, so its bound was far below the
combinatorial one (B=8 benchmark: 0.199 s vs 0.216 s).  The cuts put the combinatorial facts of
`planner.batching.bounds` into the model — per-request work, least batch / prefill-batch counts,
limits charged to used batches, memory cliques — each valid for every schedule (argued in its
``define_*`` docstring, checked at every preset's schedule in tests/batching/test_batching_cuts.py).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from planner.batching.bounds import (kv_at_tokens, latency_lower_bound, memory_cliques, min_batches,
                                     min_prefill_batches, request_work_bounds)
from planner.batching.problem import BatchingProblem
from planner.batching.schedule import Schedule
from planner.solver import LinearModel, ModelBuilder, VarBlock


@dataclass(frozen=True)
class BatchVars:
    """Column blocks of the model (each (N, J+1) except the per-batch ones)."""

    Iin: VarBlock
    m: VarBlock
    c: VarBlock
    d: VarBlock
    q: VarBlock
    g: VarBlock
    e: VarBlock
    ed: VarBlock
    cz: VarBlock
    mz: VarBlock
    dg: VarBlock
    sq: VarBlock
    w: VarBlock
    u: VarBlock
    up: VarBlock
    ud: VarBlock
    start: VarBlock | None
    end: VarBlock | None
    ttft: VarBlock | None
    G: VarBlock | None


@dataclass(frozen=True)
class BatchModel:
    model: LinearModel
    vars: BatchVars
    J: int
    objective: str


class _Rows:
    """Accumulates one constraint family as COO triplets with row labels."""

    def __init__(self) -> None:
        self.rows: list[np.ndarray] = []
        self.cols: list[np.ndarray] = []
        self.vals: list[np.ndarray] = []
        self.lower: list[np.ndarray] = []
        self.upper: list[np.ndarray] = []
        self.n = 0

    def add(self, terms: list[tuple[np.ndarray, np.ndarray | float]], lower, upper) -> None:
        """Rows ``lower ≤ Σ coef·x[col] ≤ upper``; every ``cols`` array has one entry per row."""
        k = len(np.atleast_1d(terms[0][0]))
        local = np.arange(self.n, self.n + k)
        for cols, coef in terms:
            cols = np.atleast_1d(cols).ravel()
            self.rows.append(local)
            self.cols.append(cols)
            self.vals.append(np.broadcast_to(np.asarray(coef, float), (k,)).ravel().copy())
        self.lower.append(np.broadcast_to(np.asarray(lower, float), (k,)).ravel().copy())
        self.upper.append(np.broadcast_to(np.asarray(upper, float), (k,)).ravel().copy())
        self.n += k

    def commit(self, mb: ModelBuilder, name: str) -> None:
        if not self.n:
            return
        mb.add_constraints(name, self.n, np.concatenate(self.rows), np.concatenate(self.cols),
                           np.concatenate(self.vals), lower=np.concatenate(self.lower),
                           upper=np.concatenate(self.upper), label=lambda r, name=name: f"{name}[{r}]")


INF = float("inf")


def _cells(problem: BatchingProblem, J: int) -> tuple[np.ndarray, np.ndarray]:
    """Request and batch indices of every (i, j ≥ 1) cell, i-major."""
    i, j = np.meshgrid(np.arange(problem.n), np.arange(1, J + 1), indexing="ij")
    return i.ravel(), j.ravel()


def define_variables(mb: ModelBuilder, problem: BatchingProblem, J: int, objective: str, online: bool) -> BatchVars:
    """Every variable of §3.3 with instance-derived bounds; column 0 is the initial state.  The TTFT
    model's first-token counter G is not needed when every O_i = 1 (one generated token per request)."""
    n = problem.n
    I, O = problem.inputs, problem.outputs
    U = I + O - 1
    cmax = np.minimum(problem.prefill_limit, U)
    shape = (n, J + 1)
    first = np.zeros(shape, bool)
    first[:, 0] = True

    def bounds(lo, hi):
        lo = np.broadcast_to(np.asarray(lo, float).reshape(-1, 1) if np.ndim(lo) else lo, shape).copy()
        hi = np.broadcast_to(np.asarray(hi, float).reshape(-1, 1) if np.ndim(hi) else hi, shape).copy()
        return lo, hi

    lo, hi = bounds(I, U + 1)
    hi[:, 0] = I
    Iin = mb.add_variables("Iin", shape, lower=lo, upper=hi, integer=True)
    lo, hi = bounds(0, U)
    hi[:, 0] = 0
    m = mb.add_variables("m", shape, lower=lo, upper=hi, integer=True)
    lo, hi = bounds(0, cmax)
    hi[:, 0] = 0
    c = mb.add_variables("c", shape, lower=lo, upper=hi, integer=True)
    zero_first = np.where(first, 0.0, 1.0)
    binary = lambda name: mb.add_variables(name, shape, lower=0.0, upper=zero_first, integer=True)  # noqa: E731
    d, q, g, e, ed, cz, mz, dg = (binary(k) for k in ("d", "q", "g", "e", "ed", "cz", "mz", "dg"))
    sq = mb.add_variables("sq", shape, lower=0.0, upper=np.where(first, 0.0, (cmax.astype(float) ** 2).reshape(-1, 1)))
    w = mb.add_variables("w", shape, lower=0.0, upper=np.where(first, 0.0, U.astype(float).reshape(-1, 1)))
    u = mb.add_binaries("u", J + 1)
    up = mb.add_binaries("up", J + 1)
    ud = mb.add_binaries("ud", J + 1)
    start = end = ttft = G = None
    if online or objective == "ttft":
        start = mb.add_variables("start", J + 1, lower=0.0)
        end = mb.add_variables("end", J + 1, lower=0.0)
    if objective == "ttft":  # ttft_i ≥ its own prompt's least batch time (`ttft.single_ttft_bounds`)
        from planner.batching.ttft import single_ttft_bounds

        ttft = mb.add_variables("ttft", n, lower=single_ttft_bounds(problem) * time_unit(problem) * (1 - 1e-9))
        if int(O.max()) > 1:
            G = mb.add_variables("G", shape, lower=0.0, upper=O.astype(float).reshape(-1, 1) * np.ones(shape))
    return BatchVars(Iin, m, c, d, q, g, e, ed, cz, mz, dg, sq, w, u, up, ud, start, end, ttft, G)


def define_termination(mb, problem, v: BatchVars, J: int) -> None:
    """(1) Σ_j g_{i,j} = O_i."""
    n = problem.n
    rows = np.repeat(np.arange(n), J)
    cols = np.concatenate([v.g.col(i, np.arange(1, J + 1)) for i in range(n)])
    mb.add_constraints("termination", n, rows, cols, np.ones(rows.size), lower=problem.outputs, upper=problem.outputs,
                       label=lambda r: f"termination[{problem.requests[r].request_id}]")


def define_phase_links(mb, problem, v: BatchVars, J: int) -> None:
    """d_{i,j} = 𝕀[m_{i,j−1} ≥ Iin_{i,j−1}] and q_{i,j} = 𝕀[m_{i,j} ≥ Iin_{i,j}] (big-M pairs, Mi = I_i+O_i):
    ``m − Iin ≥ −Mi(1−d)``, ``m − Iin ≤ Mi·d − 1``."""
    i, j = _cells(problem, J)
    Mi = (problem.inputs + problem.outputs)[i].astype(float)
    for name, ind, t in (("link_d", v.d, j - 1), ("link_q", v.q, j)):
        rows = _Rows()
        rows.add([(v.m.col(i, t), 1.0), (v.Iin.col(i, t), -1.0), (ind.col(i, j), -Mi)], -Mi, INF)
        rows.add([(v.m.col(i, t), 1.0), (v.Iin.col(i, t), -1.0), (ind.col(i, j), -Mi)], -INF, -1.0)
        rows.commit(mb, name)


def define_input_growth(mb, problem, v: BatchVars, J: int) -> None:
    """(2) Iin_{i,j} = m_{i,j−1} + 1 if e_{i,j} = d_{i,j} = 1, else Iin_{i,j−1}; with ed = e ∧ d:
    ``Iin_j − Iin_{j−1} ∈ [0, Mi·ed]`` and ``|Iin_j − m_{j−1} − 1| ≤ Mi(1 − ed)`` (6)."""
    i, j = _cells(problem, J)
    Mi = (problem.inputs + problem.outputs)[i].astype(float)
    rows = _Rows()
    rows.add([(v.ed.col(i, j), 1.0), (v.e.col(i, j), -1.0)], -INF, 0.0)
    rows.add([(v.ed.col(i, j), 1.0), (v.d.col(i, j), -1.0)], -INF, 0.0)
    rows.add([(v.ed.col(i, j), 1.0), (v.e.col(i, j), -1.0), (v.d.col(i, j), -1.0)], -1.0, INF)
    rows.commit(mb, "link_ed")
    rows = _Rows()
    rows.add([(v.Iin.col(i, j), 1.0), (v.Iin.col(i, j - 1), -1.0)], 0.0, INF)
    rows.add([(v.Iin.col(i, j), 1.0), (v.Iin.col(i, j - 1), -1.0), (v.ed.col(i, j), -Mi)], -INF, 0.0)
    rows.add([(v.Iin.col(i, j), 1.0), (v.m.col(i, j - 1), -1.0), (v.ed.col(i, j), Mi)], -INF, 1.0 + Mi)
    rows.add([(v.Iin.col(i, j), 1.0), (v.m.col(i, j - 1), -1.0), (v.ed.col(i, j), -Mi)], 1.0 - Mi, INF)
    rows.commit(mb, "input_growth")


def define_memory_update(mb, problem, v: BatchVars, J: int) -> None:
    """(3) m_j = 0 if e_j; m_j = m_{j−1} + c_j otherwise; m_j ≤ Iin_{j−1} if e_j = d_j = 0."""
    i, j = _cells(problem, J)
    Mi = (problem.inputs + problem.outputs)[i].astype(float)
    rows = _Rows()
    rows.add([(v.m.col(i, j), 1.0), (v.e.col(i, j), Mi)], -INF, Mi)
    rows.add([(v.m.col(i, j), 1.0), (v.m.col(i, j - 1), -1.0), (v.c.col(i, j), -1.0)], -INF, 0.0)
    rows.add([(v.m.col(i, j), 1.0), (v.m.col(i, j - 1), -1.0), (v.c.col(i, j), -1.0), (v.e.col(i, j), Mi)], 0.0, INF)
    rows.commit(mb, "memory_update")
    rows = _Rows()
    rows.add([(v.m.col(i, j), 1.0), (v.Iin.col(i, j - 1), -1.0), (v.e.col(i, j), -Mi), (v.d.col(i, j), -Mi)], -INF, 0.0)
    rows.commit(mb, "prefill_no_overrun")


def define_token_rules(mb, problem, v: BatchVars, J: int) -> None:
    """(4) c_j = 0 if e_j; c_j ≤ 1 if d_j; c_j = 0 once released after the last token
    (``finished_no_tokens``, module docstring).  Links cz = 𝕀[c>0], mz = 𝕀[m>0], g = cz ∧ q, dg = d ∧ g."""
    i, j = _cells(problem, J)
    U = (problem.inputs + problem.outputs - 1)[i].astype(float)
    cmax = np.minimum(problem.prefill_limit, U)
    rows = _Rows()
    rows.add([(v.c.col(i, j), 1.0), (v.e.col(i, j), cmax)], -INF, cmax)
    rows.commit(mb, "evict_no_tokens")
    rows = _Rows()
    rows.add([(v.c.col(i, j), 1.0), (v.d.col(i, j), cmax - 1.0)], -INF, cmax)
    rows.commit(mb, "decode_one_token")
    rows = _Rows()  # module docstring, "Finished requests process nothing"
    rows.add([(v.c.col(i, j), 1.0), (v.Iin.col(i, j - 1), cmax)], -INF, cmax * (U + 1.0))
    rows.commit(mb, "finished_no_tokens")
    rows = _Rows()
    rows.add([(v.c.col(i, j), 1.0), (v.cz.col(i, j), -1.0)], 0.0, INF)
    rows.add([(v.c.col(i, j), 1.0), (v.cz.col(i, j), -cmax)], -INF, 0.0)
    rows.commit(mb, "link_cz")
    rows = _Rows()
    rows.add([(v.m.col(i, j), 1.0), (v.mz.col(i, j), -1.0)], 0.0, INF)
    rows.add([(v.m.col(i, j), 1.0), (v.mz.col(i, j), -U)], -INF, 0.0)
    rows.commit(mb, "link_mz")
    for name, out, a, b in (("link_g", v.g, v.cz, v.q), ("link_dg", v.dg, v.d, v.g)):
        rows = _Rows()
        rows.add([(out.col(i, j), 1.0), (a.col(i, j), -1.0)], -INF, 0.0)
        rows.add([(out.col(i, j), 1.0), (b.col(i, j), -1.0)], -INF, 0.0)
        rows.add([(out.col(i, j), 1.0), (a.col(i, j), -1.0), (b.col(i, j), -1.0)], -1.0, INF)
        rows.commit(mb, name)


def define_batch_limits(mb, problem, v: BatchVars, J: int) -> None:
    """(5) per batch: Σc ≤ C, Σ(c − dg) ≤ P, Σm ≤ M, Σmz ≤ R_max."""
    n = problem.n
    jj = np.arange(1, J + 1)
    rows = np.tile(np.arange(J), n)
    cells = lambda blk: np.concatenate([blk.col(i, jj) for i in range(n)])  # noqa: E731
    lab = lambda name: (lambda r: f"{name}[batch {r + 1}]")  # noqa: E731
    ones = np.ones(rows.size)
    mb.add_constraints("batch_C", J, rows, cells(v.c), ones, upper=problem.C, label=lab("batch_C"))
    mb.add_constraints("batch_P", J, np.concatenate([rows, rows]), np.concatenate([cells(v.c), cells(v.dg)]),
                       np.concatenate([ones, -ones]), upper=problem.prefill_limit, label=lab("batch_P"))
    mb.add_constraints("batch_M", J, rows, cells(v.m), ones, upper=problem.M, label=lab("batch_M"))
    if problem.R_max is not None and problem.R_max < n:
        mb.add_constraints("batch_R", J, rows, cells(v.mz), ones, upper=problem.R_max, label=lab("batch_R"))


def define_cost_terms(mb, problem, v: BatchVars, J: int) -> None:
    """sq ≥ secants of c² (exact at integers), w ≥ KVs read by a decode, u/up/ud batch indicators."""
    n = problem.n
    U = problem.inputs + problem.outputs - 1
    cmax = np.minimum(problem.prefill_limit, U)
    rows = _Rows()
    jj = np.arange(1, J + 1)
    for i in range(n):
        if problem.cost.a_p == 0:
            break
        k = np.arange(int(cmax[i]))
        for j in jj:
            rows.add([(np.full(k.size, v.sq.col(i, j)), 1.0), (np.full(k.size, v.c.col(i, j)), -(2 * k + 1.0))],
                     -(k * (k + 1.0)), INF)
    rows.commit(mb, "prefill_square")
    i, j = _cells(problem, J)
    Ui = U[i].astype(float)
    rows = _Rows()
    rows.add([(v.w.col(i, j), 1.0), (v.m.col(i, j - 1), -1.0), (v.dg.col(i, j), -Ui)], -Ui, INF)
    rows.commit(mb, "kv_read")
    rows = _Rows()
    rows.add([(v.u.col(j), 1.0), (v.cz.col(i, j), -1.0)], 0.0, INF)
    rows.add([(v.up.col(j), 1.0), (v.cz.col(i, j), -1.0), (v.dg.col(i, j), 1.0)], 0.0, INF)
    rows.add([(v.ud.col(j), 1.0), (v.dg.col(i, j), -1.0)], 0.0, INF)
    rows.commit(mb, "batch_indicators")
    # A batch in use processes at least one token: u_j ≤ Σ_i cz_ij.  Without it a token-free batch
    # before the last one (forced to u = 1 by the ordering below) could hold evictions only, letting
    # a request be evicted and refilled in consecutive batches; it cost b_o in the MIP, 0 in the
    # validator's replay and is not a batch in the brute-force oracle (every batch runs a token), so
    # the three disagreed on instances where refilling beats decoding.  This is the oracle's reading.
    rows = _Rows()
    rows.add([(v.u.col(jj), 1.0)] + [(v.cz.col(i, jj), -1.0) for i in range(n)], -INF, 0.0)
    rows.commit(mb, "batch_nonempty")
    if J > 1:  # symmetry breaking: empty batches last (an empty batch can always be deleted)
        jj = np.arange(1, J)
        rows = _Rows()
        rows.add([(v.u.col(jj), 1.0), (v.u.col(jj + 1), -1.0)], 0.0, INF)
        rows.commit(mb, "empty_batches_last")


# ---- valid inequalities (not needed for correctness; they only tighten the LP relaxation) ------
# Each is satisfied by the column vector of every schedule (`warm_start_vector`), which is the
# "canonical" MIP point of the schedule: no empty batch in the middle, finished requests released
# by a cost-free eviction in the next batch.  tests/batching/test_batching_cuts.py checks exactly that.


def define_request_work_cuts(mb, problem, v: BatchVars, J: int) -> None:
    """Per request i, its own share of the objective is at least the combinatorial bound L_i::

        Σ_j [a_o c_ij + a_p (sq_ij − dg_ij) + s_p (cz_ij − dg_ij) + a_d w_ij + s_d dg_ij] ≥ L_i

    L_i = `bounds.request_work_bounds` (a_o for I_i+O_i−1 tokens, the prompt's prefill attention,
    per token t ≥ 2 the cheaper of a decode reading I_i+t−2 KVs and a refill of I_i+t−1 tokens).
    Valid because every schedule pays request i at least that (see `planner.batching.bounds`);
    the LP relaxation misses it because the big-M links let c, w, d be fractional."""
    cm = problem.cost
    unit = cm.scale * time_unit(problem)
    L = request_work_bounds(problem) * unit
    jj = np.arange(1, J + 1)
    rows = _Rows()
    for i in range(problem.n):
        cols = np.concatenate([v.c.col(i, jj), v.sq.col(i, jj), v.dg.col(i, jj), v.cz.col(i, jj), v.w.col(i, jj)])
        vals = np.concatenate([np.full(J, cm.a_o), np.full(J, cm.a_p), np.full(J, -cm.a_p - cm.s_p + cm.s_d),
                               np.full(J, cm.s_p), np.full(J, cm.a_d)]) * unit
        keep = vals != 0
        rows.add([(np.array([c]), val) for c, val in zip(cols[keep], vals[keep])], L[i] * (1 - 1e-9), INF)
    rows.commit(mb, "cut_request_work")


def define_token_total_cuts(mb, problem, v: BatchVars, J: int) -> None:
    """Per request: ``Σ_j c_ij ≥ I_i + O_i − 1`` (the prompt once, then one token per decode or a
    whole refill instead) and ``Σ_j (g_ij − dg_ij) ≥ 1`` (the first token completes a prefill)."""
    jj = np.arange(1, J + 1)
    U = problem.inputs + problem.outputs - 1
    rows = _Rows()
    for i in range(problem.n):
        rows.add([(np.array([c]), 1.0) for c in v.c.col(i, jj)], float(U[i]), INF)
    rows.commit(mb, "cut_token_total")
    rows = _Rows()
    for i in range(problem.n):
        rows.add([(np.array([c]), 1.0) for c in v.g.col(i, jj)] + [(np.array([c]), -1.0) for c in v.dg.col(i, jj)],
                 1.0, INF)
    rows.commit(mb, "cut_first_token_prefill")


def define_kv_at_token_cuts(mb, problem, v: BatchVars, J: int) -> None:
    """KV held where a token is produced: the t-th token of request i leaves exactly I_i+t−1 KVs
    (a decode-phase eviction sets Iin ← m+1, so refills end where the KV was), hence::

        m_ij ≥ I_i · g_ij                         (disaggregated; g = 1 ⇒ m ≥ Iin ≥ I_i)
        Σ_j m_ij ≥ K_i = O_i I_i + O_i(O_i−1)/2     (the O_i token batches are distinct)"""
    i, j = _cells(problem, J)
    rows = _Rows()
    rows.add([(v.m.col(i, j), 1.0), (v.g.col(i, j), -problem.inputs[i].astype(float))], 0.0, INF)
    rows.commit(mb, "cut_kv_at_token")
    K = kv_at_tokens(problem)
    jj = np.arange(1, J + 1)
    rows = _Rows()
    for r in range(problem.n):
        rows.add([(np.array([c]), 1.0) for c in v.m.col(r, jj)], float(K[r]), INF)
    rows.commit(mb, "cut_kv_time")


def define_active_batch_cuts(mb, problem, v: BatchVars, J: int) -> None:
    """Limits charged to non-empty batches, and the least batch counts::

        Σ_i m_ij ≤ M·u_j,   Σ_i c_ij ≤ C·u_j,   Σ_i (c_ij − dg_ij) ≤ P·up_j          (j = 1..J)
        Σ_i I_i (g_ij − dg_ij) ≤ M·up_j      (tokens completing a prefill leave ≥ I_i KVs each)
        Σ_j u_j ≥ N_min,    Σ_j up_j ≥ P_min               (`bounds.min_batches`, `min_prefill_batches`)

    An empty batch processes nothing, and — in the canonical point of a schedule — holds no KV:
    empty batches are last (``empty_batches_last``), every request is finished by then, and the
    cost-free eviction of finished requests empties the KV.  Any MIP point holding KV in an empty
    batch has a canonical twin of the same cost, so the optimum is unchanged.  Together with
    ``Σ_j m_ij ≥ K_i`` the first row gives the LP ``Σ_j u_j ≥ Σ_i K_i / M``."""
    n = problem.n
    jj = np.arange(1, J + 1)
    rows = _Rows()
    for blk, limit in ((v.m, problem.M), (v.c, problem.C)):
        rows.add([(v.u.col(jj), -float(limit))] + [(blk.col(i, jj), 1.0) for i in range(n)], -INF, 0.0)
    rows.add([(v.up.col(jj), -float(problem.prefill_limit))] + [(v.c.col(i, jj), 1.0) for i in range(n)]
             + [(v.dg.col(i, jj), -1.0) for i in range(n)], -INF, 0.0)
    I = problem.inputs.astype(float)
    rows.add([(v.up.col(jj), -float(problem.M))] + [(v.g.col(i, jj), I[i]) for i in range(n)]
             + [(v.dg.col(i, jj), -I[i]) for i in range(n)], -INF, 0.0)
    rows.commit(mb, "cut_active_batch")
    rows = _Rows()
    rows.add([(np.array([c]), 1.0) for c in v.u.col(jj)], float(min_batches(problem)), INF)
    rows.add([(np.array([c]), 1.0) for c in v.up.col(jj)], float(min_prefill_batches(problem)), INF)
    rows.commit(mb, "cut_batch_count")


def define_batch_kind_cuts(mb, problem, v: BatchVars, J: int) -> None:
    """``up_j + ud_j ≥ u_j``: a batch that processes a token holds a prefill chunk or a decode, so it
    pays b_p or b_d (the LP otherwise keeps both indicators near 0 through fractional dg)."""
    jj = np.arange(1, J + 1)
    rows = _Rows()
    rows.add([(v.up.col(jj), 1.0), (v.ud.col(jj), 1.0), (v.u.col(jj), -1.0)], 0.0, INF)
    rows.commit(mb, "cut_batch_kind")


def define_memory_clique_cuts(mb, problem, v: BatchVars, J: int) -> None:
    """Requests that can never produce tokens in the same batch.  For a request i0 let
    S = {i0} ∪ {i : I_i > max(M − I_{i0}, M/2)}; every token of i ∈ S∖{i0} leaves more than
    ``max(M − I_{i0}, M/2)`` KVs, so it cannot share a batch with a token of i0 (which leaves
    ≥ I_{i0}) nor with another such token (two KVs above M/2 exceed M)::

        Σ_{i ∈ S} g_ij ≤ u_j        (j = 1..J, one row per distinct S)"""
    jj = np.arange(1, J + 1)
    rows = _Rows()
    seen: set[tuple[int, ...]] = set()
    for i0, others in memory_cliques(problem):
        S = tuple(sorted((i0, *others)))
        if S in seen:
            continue
        seen.add(S)
        rows.add([(v.u.col(jj), -1.0)] + [(v.g.col(i, jj), 1.0) for i in S], -INF, 0.0)
    rows.commit(mb, "cut_memory_clique")


CUT_DEFINITIONS = {
    "request_work": define_request_work_cuts,  # cut_request_work
    "token_total": define_token_total_cuts,  # cut_token_total, cut_first_token_prefill
    "kv_at_token": define_kv_at_token_cuts,  # cut_kv_at_token, cut_kv_time
    "active_batch": define_active_batch_cuts,  # cut_active_batch, cut_batch_count
    "batch_kind": define_batch_kind_cuts,  # cut_batch_kind
    "memory_clique": define_memory_clique_cuts,  # cut_memory_clique
}
# Measured on benchmarks/batching_scaling.py B=8 (LP relaxation without the secant rows, HiGHS, shared
# 2 cores): these four give the root LP the whole combinatorial bound (0.21580 s vs 0.19917 s without
# cuts) in 1.9 s; with token_total too 3.7 s; with every group 77 s, for the same value.  So
# token_total and kv_at_token (n·J more rows) stay available, and tested, but off.
DEFAULT_CUTS = ("request_work", "active_batch", "batch_kind", "memory_clique")
CUT_FAMILIES = ("cut_request_work", "cut_token_total", "cut_first_token_prefill", "cut_kv_at_token", "cut_kv_time",
                "cut_active_batch", "cut_batch_count", "cut_batch_kind", "cut_memory_clique")


def define_valid_inequalities(mb, problem, v: BatchVars, J: int, groups=tuple(CUT_DEFINITIONS)) -> None:
    """The cut groups named in ``groups`` (keys of `CUT_DEFINITIONS`; rows named ``cut_*``)."""
    for name in groups:
        CUT_DEFINITIONS[name](mb, problem, v, J)


def time_unit(problem: BatchingProblem) -> float:
    """Model time units per second.  Times in seconds have coefficients down to ~5e-9 (a_p·scale),
    below HiGHS's tolerances (they would be treated as 0), so every time quantity of the model —
    objective, start/end, arrivals, TTFT, goal — is expressed in units where the smallest positive
    cost coefficient is 1."""
    cm = problem.cost
    coefs = [v for v in (cm.a_o, cm.b_o, cm.a_p, cm.b_p, cm.s_p, cm.a_d, cm.b_d, cm.s_d) if v > 0]
    return 1.0 / (cm.scale * min(coefs)) if coefs else 1.0


def batch_time_terms(problem: BatchingProblem, v: BatchVars, j: int) -> tuple[np.ndarray, np.ndarray]:
    """Columns and coefficients of T_j (model time units, `time_unit`) = scale·(a_o Σc + b_o u
    + a_p(Σsq − Σdg) + b_p up + s_p Σ(cz − dg) + a_d Σw + b_d ud + s_d Σdg)."""
    cm = problem.cost
    s = cm.scale * time_unit(problem)
    n = problem.n
    ii = np.arange(n)
    cols = [v.c.col(ii, j), v.sq.col(ii, j), v.dg.col(ii, j), v.cz.col(ii, j), v.w.col(ii, j),
            np.array([v.u.col(j), v.up.col(j), v.ud.col(j)])]
    vals = [np.full(n, cm.a_o), np.full(n, cm.a_p), np.full(n, -cm.a_p - cm.s_p + cm.s_d), np.full(n, cm.s_p),
            np.full(n, cm.a_d), np.array([cm.b_o, cm.b_p, cm.b_d])]
    return np.concatenate(cols), s * np.concatenate(vals)


def batch_count_bound(problem: BatchingProblem, incumbent_latency: float) -> int:
    """Most non-empty batches N a schedule with latency ≤ ``incumbent_latency`` can have.

    latency ≥ work + b_o·N + b_p·#prefill-batches + b_d·#decode-batches, where work = Σ_i of the
    per-request bounds (`bounds.request_work_bounds`, no bias), #prefill ≥ P_min and
    #prefill + #decode ≥ N (every non-empty batch has a prefill or a decode).  Hence
    ``latency ≥ work + (b_o + min(b_p, b_d))·N + max(0, b_p − b_d)·P_min`` and N is at most
    ``(incumbent − work − max(0, b_p − b_d)·P_min) / (b_o + min(b_p, b_d))``.
    (The former bound charged s_p/s_d per batch on top of the work terms that already hold them.)"""
    cm = problem.cost
    per_batch = cm.scale * (cm.b_o + min(cm.b_p, cm.b_d))
    if per_batch <= 0:
        return 10 ** 9
    work = latency_lower_bound(problem, include_biases=False)
    fixed = cm.scale * max(0.0, cm.b_p - cm.b_d) * min_prefill_batches(problem)
    return int(np.floor((incumbent_latency - work - fixed) / per_batch + 1e-9))


def latency_beyond(problem: BatchingProblem, J: int) -> float:
    """Least latency of any schedule with more than J non-empty batches: by the inequality of
    `batch_count_bound`, ``work + max(0, b_p − b_d)·P_min + (b_o + min(b_p, b_d))·(J + 1)`` (seconds).
    So the bound of a model of J batches, B_J, gives the global bound ``min(B_J, latency_beyond(J))``."""
    cm = problem.cost
    per_batch = cm.scale * (cm.b_o + min(cm.b_p, cm.b_d))
    work = latency_lower_bound(problem, include_biases=False)
    fixed = cm.scale * max(0.0, cm.b_p - cm.b_d) * min_prefill_batches(problem)
    return float(work + fixed + per_batch * (J + 1))


def max_batch_seconds(problem: BatchingProblem) -> float:
    """An upper bound on any batch's time: a batch processes at most min(C, Σ_i cmax_i) tokens, at most
    min(P, Σ_i cmax_i) of them prefill (Σc² ≤ (Σc)²) and reads at most min(M, Σ_i U_i) KVs."""
    cm = problem.cost
    n = problem.n
    U = problem.inputs + problem.outputs - 1
    most = int(np.minimum(problem.prefill_limit, U).sum())
    tokens = min(problem.C, most)
    P = min(problem.prefill_limit, most)
    return cm.scale * (cm.a_o * tokens + cm.b_o + cm.a_p * P * P + cm.b_p + cm.s_p * n
                       + cm.a_d * min(problem.M, int(U.sum())) + cm.b_d + cm.s_d * n)


def define_timing(mb, problem, v: BatchVars, J: int) -> None:
    """Online / TTFT timing: start_j ≥ end_{j−1}, start_j ≥ T_i·cz_{i,j} (arrival), end_j = start_j + T_j."""
    if v.start is None:
        return
    arr = problem.arrivals * time_unit(problem)
    rows = _Rows()
    for j in range(1, J + 1):
        cols, vals = batch_time_terms(problem, v, j)
        rows.add([(np.array([v.end.col(j)]), 1.0), (np.array([v.start.col(j)]), -1.0)] +
                 [(np.array([c]), -val) for c, val in zip(cols, vals)], 0.0, 0.0)
    rows.commit(mb, "batch_end")
    rows = _Rows()
    jj = np.arange(1, J + 1)
    rows.add([(v.start.col(jj), 1.0), (v.end.col(jj - 1), -1.0)], 0.0, INF)
    rows.commit(mb, "batch_order")
    i, j = _cells(problem, J)
    if np.any(arr > 0):
        rows = _Rows()
        rows.add([(v.start.col(j), 1.0), (v.cz.col(i, j), -arr[i])], 0.0, INF)
        rows.commit(mb, "arrival")


def define_ttft(mb, problem, v: BatchVars, J: int) -> None:
    """ttft_i ≥ end_j − T_i − H_{ij}·(1 − g_{i,j} + G_{i,j−1}) (first-token batch), G_{i,j} = Σ_{j'≤j} g;
    when every O_i = 1 (no G: g_{i,j} = 1 in the first-token batch only) ttft_i ≥ end_j − T_i − H_{ij}·(1 − g_{i,j}).
    ``H_{ij} = max_k T_k + j·`max_batch_seconds` − T_i`` bounds end_j − T_i: a batch starts at the end of
    the previous one or at an arrival, so end_j ≤ max arrival + j × the largest batch time."""
    i, j = _cells(problem, J)
    unit = time_unit(problem)
    arr = problem.arrivals[i] * unit
    horizon = (float(problem.arrivals.max()) + j * max_batch_seconds(problem)) * unit - arr
    if v.G is None:
        rows = _Rows()
        rows.add([(v.ttft.col(i), 1.0), (v.end.col(j), -1.0), (v.g.col(i, j), -horizon)], -arr - horizon, INF)
        rows.commit(mb, "ttft")
        return
    rows = _Rows()
    rows.add([(v.G.col(i, j), 1.0), (v.G.col(i, j - 1), -1.0), (v.g.col(i, j), -1.0)], 0.0, 0.0)
    rows.commit(mb, "first_token_count")
    rows = _Rows()
    rows.add([(v.ttft.col(i), 1.0), (v.end.col(j), -1.0), (v.g.col(i, j), -horizon), (v.G.col(i, j - 1), horizon)],
             -arr - horizon, INF)
    rows.commit(mb, "ttft")


def define_objective(mb, problem, v: BatchVars, J: int, objective: str,
                     goal_latency: float | None) -> tuple[np.ndarray, np.ndarray]:
    """min total latency (Σ_j T_j offline, end_J online) or mean TTFT; optional goal ``latency ≤ goal`` (s)."""
    lat_cols, lat_vals = [], []
    if v.end is not None:
        lat_cols, lat_vals = [np.array([v.end.col(J)])], [np.array([1.0])]
    else:
        for j in range(1, J + 1):
            cols, vals = batch_time_terms(problem, v, j)
            lat_cols.append(cols), lat_vals.append(vals)
    lat_c, lat_v = np.concatenate(lat_cols), np.concatenate(lat_vals)
    if goal_latency is not None:
        mb.add_constraints("goal_latency", 1, np.zeros(lat_c.size, np.int64), lat_c, lat_v,
                           upper=goal_latency * time_unit(problem),
                           label=lambda r: "goal_latency")
    return lat_c, lat_v


def build_model(problem: BatchingProblem, J: int, objective: str = "latency",
                goal_latency: float | None = None, cuts: bool | tuple[str, ...] = True) -> BatchModel:
    """Assemble the §3.3 MIP in the paper's order.  ``cuts``: True = the `DEFAULT_CUTS` groups of valid
    inequalities, False = none, or a tuple of `CUT_DEFINITIONS` keys."""
    if objective not in ("latency", "ttft"):
        raise ValueError(f"objective must be latency or ttft, got {objective!r}")
    online = problem.online
    mb = ModelBuilder(f"batching-{problem.name}", "min")
    v = define_variables(mb, problem, J, objective, online)
    define_termination(mb, problem, v, J)  # (1)
    define_input_growth(mb, problem, v, J)  # (2) + (6)
    define_memory_update(mb, problem, v, J)  # (3)
    define_token_rules(mb, problem, v, J)  # (4) + links
    define_batch_limits(mb, problem, v, J)  # (5)
    define_phase_links(mb, problem, v, J)  # d, q
    define_cost_terms(mb, problem, v, J)  # objective terms
    groups = DEFAULT_CUTS if cuts is True else (() if cuts is False else tuple(cuts))
    define_valid_inequalities(mb, problem, v, J, groups)
    define_timing(mb, problem, v, J)
    if objective == "ttft":
        define_ttft(mb, problem, v, J)
    lat_cols, lat_vals = define_objective(mb, problem, v, J, objective, goal_latency)
    model = mb.build()
    cost = np.zeros(model.num_cols)
    if objective == "latency":
        np.add.at(cost, lat_cols, lat_vals)
    else:
        cost[v.ttft.columns] = 1.0 / problem.n
    return BatchModel(replace(model, cost=cost), v, J, objective)


# ----------------------------------------------------------------------------------------------
def extract_schedule(problem: BatchingProblem, bm: BatchModel, x: np.ndarray) -> Schedule:
    """The schedule of a MIP solution (trailing empty batches dropped)."""
    v = bm.vars
    c = np.rint(v.c.values(x)).astype(np.int64)[:, 1:]
    e = np.rint(v.e.values(x)).astype(np.int64)[:, 1:]
    m = np.rint(v.m.values(x)).astype(np.int64)
    g = np.rint(v.g.values(x)).astype(np.int64)[:, 1:]
    produced = np.cumsum(g, axis=1)
    batches, evictions = [], []
    for j in range(bm.J):
        batches.append({int(i): int(c[i, j]) for i in np.flatnonzero(c[:, j])})
        before = produced[:, j - 1] if j > 0 else np.zeros(problem.n, np.int64)
        evictions.append([int(i) for i in np.flatnonzero((e[:, j] == 1) & (m[:, j] > 0) & (before < problem.outputs))])
    last = max((j for j in range(bm.J) if batches[j] or evictions[j]), default=-1)
    return Schedule.from_batches(batches[:last + 1], evictions[:last + 1], tuple(r.request_id for r in problem.requests))


def compress_schedule(schedule: Schedule) -> Schedule:
    """Drop batches without tokens, keeping the schedule valid and its cost.

    An eviction held by a dropped batch moves to the next batch with tokens when the victim does not
    run there, else to the previous one when the victim does not run there (the victim holds the same
    KV either way and processes nothing in between).  If the victim runs in both neighbours (evict and
    refill between two consecutive batches) no token-batch can carry the eviction: ``ValueError``."""
    batches, evictions = schedule.batches(), schedule.evictions()
    out_b: list[dict[int, int]] = []
    out_e: list[list[int]] = []
    pending: list[int] = []
    for b, e in zip(batches, evictions):
        if not b:
            pending += e
            continue
        here = set(e)
        for i in pending:
            if i not in b:
                here.add(i)
            elif out_b and i not in out_b[-1]:
                out_e[-1] = sorted(set(out_e[-1]) | {i})
            else:
                raise ValueError(f"request {i} is evicted and refilled between two consecutive token batches")
        out_b.append(b)
        out_e.append(sorted(here))
        pending = []
    if pending and out_b:  # evictions after the last token batch: only finished requests can be left
        for i in pending:
            if i not in out_b[-1]:
                out_e[-1] = sorted(set(out_e[-1]) | {i})
    return Schedule.from_batches(out_b, out_e, schedule.request_ids)


def warm_start_vector(problem: BatchingProblem, bm: BatchModel, schedule: Schedule) -> np.ndarray | None:
    """Column values of ``schedule`` in this model (None if it has more than J batches).

    Replays under the §3.3 semantics; a finished request is released by a cost-free eviction
    in the next batch."""
    schedule = compress_schedule(schedule)
    if schedule.num_batches > bm.J:
        return None
    v = bm.vars
    n, J = problem.n, bm.J
    I, O = problem.inputs, problem.outputs
    cols = {k: np.zeros((n, J + 1)) for k in ("Iin", "m", "c", "d", "q", "g", "e", "ed", "cz", "mz", "dg", "sq", "w")}
    u = np.zeros((3, J + 1))
    Iin, m, gen = I.astype(np.int64).copy(), np.zeros(n, np.int64), np.zeros(n, np.int64)
    cols["Iin"][:, 0] = I
    batches, evictions = schedule.batches(), schedule.evictions()
    released = np.zeros(n, bool)
    for j in range(1, J + 1):
        entries = batches[j - 1] if j - 1 < schedule.num_batches else {}
        ev = set(evictions[j - 1]) if j - 1 < schedule.num_batches else set()
        ev |= {i for i in range(n) if gen[i] >= O[i] and not released[i]}
        d = (m >= Iin).astype(int)
        for i in range(n):
            cols["d"][i, j] = d[i]
            if i in ev:
                cols["e"][i, j] = 1
                cols["ed"][i, j] = d[i]
                if d[i]:
                    Iin[i] = m[i] + 1
                m[i] = 0
                if gen[i] >= O[i]:
                    released[i] = True
            c = entries.get(i, 0)
            kv_before = m[i]
            m[i] += c
            q = int(m[i] >= Iin[i])
            g = int(c > 0 and q)
            gen[i] += g
            cols["c"][i, j], cols["cz"][i, j], cols["q"][i, j], cols["g"][i, j] = c, int(c > 0), q, g
            cols["dg"][i, j] = d[i] * g
            cols["sq"][i, j] = c * c
            cols["w"][i, j] = kv_before if d[i] * g else 0
            cols["Iin"][i, j], cols["m"][i, j], cols["mz"][i, j] = Iin[i], m[i], int(m[i] > 0)
        u[0, j] = float(cols["cz"][:, j].max())
        u[1, j] = float((cols["cz"][:, j] - cols["dg"][:, j]).max())
        u[2, j] = float(cols["dg"][:, j].max())
    x = np.zeros(bm.model.num_cols)
    for k, arr in cols.items():
        x[getattr(v, k).columns] = arr.ravel()
    for k, row in zip(("u", "up", "ud"), u):
        x[getattr(v, k).columns] = row
    if v.start is not None:
        end = 0.0
        for j in range(1, J + 1):
            cc, vv = batch_time_terms(problem, v, j)
            T = float(x[cc] @ vv)
            arr = problem.arrivals[cols["cz"][:, j] > 0] * time_unit(problem)
            start = max(end, float(arr.max()) if arr.size else 0.0)
            end = start + T
            x[v.start.col(j)], x[v.end.col(j)] = start, end
    if v.G is not None:
        x[v.G.columns] = np.cumsum(cols["g"], axis=1).ravel()
    if v.ttft is not None:
        ends = x[v.end.columns]
        first = np.argmax(cols["g"] > 0, axis=1)
        x[v.ttft.columns] = ends[first] - problem.arrivals * time_unit(problem)
    return x
