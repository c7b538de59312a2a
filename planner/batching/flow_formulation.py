"""Strong reformulation of the §3.3 batch-schedule MIP: one time-expanded path per request.

**State network.**  Per request i, after batch j (layer j = 0..J) the request is in one state:

* ``(t, E)`` — t tokens generated (0 ≤ t < O_i), holding no KV (not started, or evicted);
* ``(t, R)`` — t tokens generated (1 ≤ t < O_i), holding its whole KV ``I_i + t − 1``;
* ``done`` — all O_i tokens generated (KV released after the batch of the last token).

Arcs from layer j−1 to layer j are the request's action in batch j (binary ``x_a``):

========  ========================  ==========  ===========================================
kind      move                      tokens c    per-layer cost (ms, without the batch biases)
========  ========================  ==========  ===========================================
decode    (t, R) → (t+1, R/done)    1           a_o + a_d·(I_i+t−1) + s_d
prefill   (t, E) → (t+1, R/done)    I_i + t     a_o·c + a_p·c² + s_p   (t ≥ 1: a refill)
evict     (t, R) → (t, E)           0           0
idle      s → s                     0           0
========  ========================  ==========  ===========================================

A decode-phase eviction after t tokens sets ``Iin ← m + 1 = I_i + t`` (§3.3 (2)), so the refill is
a prefill of I_i + t tokens that produces token t+1; a decode reads the ``I_i + t − 1`` KVs held.
States that cannot be on a path of ≤ J batches are pruned: ``(t, R)`` needs j ≥ t, ``(t≥1, E)``
needs j ≥ t+1, and every state needs ``J − j ≥ O_i − t`` (one token per batch).

**Rows** (``define_*`` below, one named block each; u/up/ud = batch non-empty / has a prefill /
has a decode, all binary):

* ``flow_balance``:   Σ_in x − Σ_out x = [start]−[sink] per node (one unit from (0,E) at layer 0
  to done at layer J);
* ``use_batch``, ``use_prefill``, ``use_decode`` (per request and batch): Σ_{token arcs a of i in
  batch j} x_a ≤ u_j, Σ_{prefill arcs of i} x_a ≤ up_j, Σ_{decode arcs of i} x_a ≤ ud_j;
* ``kind_prefill``, ``kind_decode``, ``kind_any``: up_j ≤ u_j, ud_j ≤ u_j, u_j ≤ up_j + ud_j;
* ``batch_nonempty``: u_j ≤ Σ_{token arcs in batch j} x_a (a used batch runs a token);
* ``empty_batches_last``: u_j ≥ u_{j+1};
* ``batch_C``, ``batch_P``: Σ c·x ≤ C·u_j and Σ_{prefill} c·x ≤ P·up_j;
* ``batch_M``:        Σ_a kv_a·x_a ≤ M·u_j, kv_a = KV held after the batch (``I_i + t'`` −1 for state
  t' tokens, the finishing token's KV counts in its batch, as in the validator);
* ``batch_R``:        Σ_{a: kv_a > 0} x_a ≤ R_max (only when R_max < N);
* ``cut_prefill_batches``: Σ_j up_j ≥ 2 when a single prefill batch is proven impossible
  (`define_prefill_count_cut`);
* ``goal_latency``: the objective ≤ a goal (optional).

Objective: Σ_a cost_a·x_a + Σ_j (b_o u_j + b_p up_j + b_d ud_j), × n_layers/1000 (seconds; in the
model's `time_unit`).  Every cost is exact (the c² of a prefill is a constant of its arc), so the
model is linear without secants or big-M rows, and its LP relaxation is a convex combination of
whole request paths: per-request work (prompt, decodes, refills) is exact in the relaxation.
Hence at any integer point cᵀx *is* the validator's cost of `extract_flow_schedule`'s schedule (the
tests check it against the replay).  A solver-reported objective that differs from cᵀx is the
solver's error, not the model's: highspy 1.16 maps some warm starts into its presolved space onto an
infeasible point one decode arc cheaper and stops at the root with that value as "optimal"
(`planner.core.agreement`); `solve.solve_batching` checks both equalities and re-solves without the
warm start.

**Schedule space and dominance.**  This model has no chunked prefill and no prefill-phase
eviction.  `applicable` admits an instance only when, for it, every §3.3 schedule S has a
chunk-free schedule N(S) that is no more expensive (so the optima coincide):

(a) offline instance, latency objective;
(b) ``Σ_i (I_i + O_i − 1) ≤ P ≤ C`` — a batch never processes more than every request's largest
    prompt, so merging chunks can never break C or P;
(c) ``a_p·n² ≤ 2·s_p`` for n = max_i(I_i + O_i − 1) — merging k ≥ 2 chunks of a prompt of n
    tokens raises a_p·Σc² by at most ``a_p·n²(k−1)/k ≤ (k−1)·s_p``, the kernel cost saved;
(d) ``a_d ≤ a_o``, ``s_d ≤ s_p``, ``b_d ≤ b_p`` — replacing "evict, then refill in the next
    batch" by a decode never costs more (step 3 below).

N(S): (1) chunks processed before a prefill-phase eviction are deleted, with the eviction (less
work, less KV); (2) every other prefill segment is processed whole in the batch of its last chunk
(KV in the earlier batches only falls; cost per (c) and (b), earlier batches lose a prefill
entry, so possibly b_p / s_p, never gain one); (3) batches left without tokens are deleted; an
eviction they held moves to the neighbouring batch where the victim does not run, and if the victim
runs in both (decode, evict, refill), the eviction is dropped and the refill becomes a decode
(same KV afterwards, cost per (d)).  Each step keeps every §3.3 rule, so min over chunk-free
schedules = min over all schedules.  `normalize_schedule` applies N to warm-start schedules.
Tests compare the optimum with the brute-force oracle (which allows chunks and any eviction).

**Limit.**  On instances whose memory is tighter than their prompts (the B = 8 benchmark's seeds 4
and 9: Σ I > M) the LP relaxation shares the KV budget fractionally: it compresses the schedule
without paying the refills or prefill batches an integer schedule needs.  Fixing the batch count N
(u_j = 1 for j ≤ N, 0 after) raises the LP by only about one batch's b_o + b_d per batch removed,
so neither branching on N nor a faster root LP closes the gap; both sides are open there (better
schedules than the 60 s incumbents exist, and the bound is far below them).  The primal side is
served by the preemptive-priority rollouts of `planner.batching.rollouts` (a warm-start candidate of
`solve.solve_batching`).  The measurements behind this paragraph: benchmarks/RESULTS.md, "Batching:
the open gaps".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.batching.problem import BatchingProblem
from planner.batching.schedule import Schedule
from planner.solver import LinearModel, ModelBuilder, VarBlock

DECODE, PREFILL, EVICT, IDLE_E, IDLE_R, IDLE_D = 0, 1, 2, 3, 4, 5
KIND_NAMES = ("decode", "prefill", "evict", "idle (no KV)", "idle (holding KV)", "idle (done)")
INF = float("inf")


def applicable(problem: BatchingProblem, objective: str = "latency") -> tuple[bool, str]:
    """Whether the dominance argument of the module docstring holds: (ok, reason if not)."""
    cm = problem.cost
    if objective != "latency":
        return False, "the path model handles the latency objective only"
    if problem.online:
        return False, "the path model handles offline instances only"
    U = problem.inputs + problem.outputs - 1
    if int(U.sum()) > problem.prefill_limit or problem.prefill_limit > problem.C:
        return False, "Σ(I+O−1) > P: chunked prefill may matter"
    if cm.a_p * float(U.max()) ** 2 > 2 * cm.s_p + 1e-18:
        return False, "a_p·max(I+O−1)² > 2·s_p: chunked prefill may be cheaper"
    if cm.a_d > cm.a_o or cm.s_d > cm.s_p or cm.b_d > cm.b_p:
        return False, "decode cost coefficients exceed the prefill ones"
    return True, ""


@dataclass(frozen=True)
class Arcs:
    """Flat arc table (one entry per arc); ``request``, ``batch`` (1..J), ``kind``, ``t_from``,
    ``tokens``, ``kv`` (KV held after the batch), ``cost`` (per-layer ms), node ids ``tail``/``head``."""

    request: np.ndarray
    batch: np.ndarray
    kind: np.ndarray
    t_from: np.ndarray
    tokens: np.ndarray
    kv: np.ndarray
    cost: np.ndarray
    tail: np.ndarray
    head: np.ndarray
    num_nodes: int
    source: np.ndarray  # node id of (0, E) at layer 0, per request
    sink: np.ndarray  # node id of done at layer J, per request


def build_arcs(problem: BatchingProblem, J: int) -> Arcs:
    """Enumerate the pruned time-expanded network of every request (module docstring)."""
    cm = problem.cost
    cols: dict[str, list] = {k: [] for k in ("request", "batch", "kind", "t_from", "tokens", "kv", "cost", "tail", "head")}
    node_id: dict[tuple, int] = {}
    sources, sinks = [], []

    def node(key) -> int:
        if key not in node_id:
            node_id[key] = len(node_id)
        return node_id[key]

    for i, (I, O) in enumerate(zip(problem.inputs.tolist(), problem.outputs.tolist())):
        if J < O:
            raise ValueError(f"J={J} batches cannot hold request {i}'s {O} tokens")

        def alive(j: int, t: int, phase: str) -> bool:
            if phase == "D":
                return j >= O
            if J - j < O - t:
                return False
            if phase == "R":
                return 1 <= t < O and j >= t
            return t < O and (j >= t + 1 if t >= 1 else True) and (t == 0 or j >= 1)

        def target(t_next: int) -> tuple[int, str]:
            return (t_next, "D") if t_next == O else (t_next, "R")

        def add(j, kind, t, tokens, kv, cost, tail_key, head_key):
            cols["request"].append(i), cols["batch"].append(j), cols["kind"].append(kind), cols["t_from"].append(t)
            cols["tokens"].append(tokens), cols["kv"].append(kv), cols["cost"].append(cost)
            cols["tail"].append(node((i, j - 1) + tail_key)), cols["head"].append(node((i, j) + head_key))

        sources.append(node((i, 0, 0, "E")))
        for j in range(1, J + 1):
            for t in range(0, O):
                if alive(j - 1, t, "E"):  # not started / evicted
                    if alive(j, t, "E"):
                        add(j, IDLE_E, t, 0, 0, 0.0, (t, "E"), (t, "E"))
                    nt, ph = target(t + 1)
                    if alive(j, nt, ph):
                        c = I + t
                        add(j, PREFILL, t, c, I + t, cm.a_o * c + cm.a_p * c * c + cm.s_p, (t, "E"), (nt, ph))
                if t >= 1 and alive(j - 1, t, "R"):  # holding KV I + t − 1
                    if alive(j, t, "R"):
                        add(j, IDLE_R, t, 0, I + t - 1, 0.0, (t, "R"), (t, "R"))
                    if alive(j, t, "E"):
                        add(j, EVICT, t, 0, 0, 0.0, (t, "R"), (t, "E"))
                    nt, ph = target(t + 1)
                    if alive(j, nt, ph):
                        add(j, DECODE, t, 1, I + t, cm.a_o + cm.a_d * (I + t - 1) + cm.s_d, (t, "R"), (nt, ph))
            if alive(j - 1, O, "D") and alive(j, O, "D"):
                add(j, IDLE_D, O, 0, 0, 0.0, (O, "D"), (O, "D"))
        sinks.append(node((i, J, O, "D")))
    arr = {k: np.asarray(v, dtype=float if k == "cost" else np.int64) for k, v in cols.items()}
    return Arcs(**arr, num_nodes=len(node_id), source=np.asarray(sources), sink=np.asarray(sinks))


@dataclass(frozen=True)
class FlowVars:
    x: VarBlock  # one binary per arc
    u: VarBlock  # (J+1,) column 0 unused (fixed 0)
    up: VarBlock
    ud: VarBlock


@dataclass(frozen=True)
class FlowModel:
    model: LinearModel
    vars: FlowVars
    arcs: Arcs
    J: int
    objective: str = "latency"


def define_flow_variables(mb: ModelBuilder, arcs: Arcs, J: int) -> FlowVars:
    """x_a ∈ {0,1} per arc; u_j, up_j, ud_j ∈ {0,1} (j = 0 fixed to 0)."""
    x = mb.add_variables("x", arcs.kind.size, lower=0.0, upper=1.0, integer=True)
    first_zero = np.ones(J + 1)
    first_zero[0] = 0.0
    u, up, ud = (mb.add_variables(k, J + 1, lower=0.0, upper=first_zero, integer=True) for k in ("u", "up", "ud"))
    return FlowVars(x, u, up, ud)


def define_flow_balance(mb: ModelBuilder, arcs: Arcs, v: FlowVars) -> None:
    """Σ_{a into node} x_a − Σ_{a out of node} x_a = −1 at each source, +1 at each sink, 0 elsewhere."""
    n_arcs = arcs.kind.size
    rows = np.concatenate([arcs.head, arcs.tail])
    cols = np.concatenate([v.x.columns, v.x.columns])
    vals = np.concatenate([np.ones(n_arcs), -np.ones(n_arcs)])
    rhs = np.zeros(arcs.num_nodes)
    rhs[arcs.source] = -1.0
    rhs[arcs.sink] = 1.0
    mb.add_constraints("flow_balance", arcs.num_nodes, rows, cols, vals, lower=rhs, upper=rhs,
                       label=lambda r: f"flow_balance[node {r}]")


def _group_rows(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Dense row index per entry for the distinct ``keys`` (and the distinct keys)."""
    uniq, inverse = np.unique(keys, axis=0, return_inverse=True)
    return inverse.ravel(), uniq


def define_batch_use(mb: ModelBuilder, problem: BatchingProblem, arcs: Arcs, v: FlowVars, J: int) -> None:
    """Per request i and batch j: Σ_{token arcs} x ≤ u_j, Σ_{prefill arcs} x ≤ up_j, Σ_{decode arcs} x ≤ ud_j;
    per batch: up_j ≤ u_j, ud_j ≤ u_j, u_j ≤ up_j + ud_j, u_j ≤ Σ_{token arcs} x (non-empty),
    u_j ≥ u_{j+1} (empty batches last)."""
    for name, mask, ind in (("use_batch", arcs.kind <= PREFILL, v.u), ("use_prefill", arcs.kind == PREFILL, v.up),
                            ("use_decode", arcs.kind == DECODE, v.ud)):
        sel = np.flatnonzero(mask)
        local, keys = _group_rows(np.stack([arcs.request[sel], arcs.batch[sel]], axis=1))
        k = keys.shape[0]
        rows = np.concatenate([local, np.arange(k)])
        cols = np.concatenate([v.x.col(sel), ind.col(keys[:, 1])])
        vals = np.concatenate([np.ones(sel.size), -np.ones(k)])
        mb.add_constraints(name, k, rows, cols, vals, upper=0.0, label=lambda r, name=name: f"{name}[{r}]")
    jj = np.arange(1, J + 1)
    r = np.arange(J)
    lab = lambda name: (lambda q: f"{name}[batch {q + 1}]")  # noqa: E731
    for name, small, big in (("kind_prefill", v.up, v.u), ("kind_decode", v.ud, v.u)):
        mb.add_constraints(name, J, np.concatenate([r, r]), np.concatenate([small.col(jj), big.col(jj)]),
                           np.concatenate([np.ones(J), -np.ones(J)]), upper=0.0, label=lab(name))
    mb.add_constraints("kind_any", J, np.concatenate([r, r, r]), np.concatenate([v.u.col(jj), v.up.col(jj), v.ud.col(jj)]),
                       np.concatenate([np.ones(J), -np.ones(J), -np.ones(J)]), upper=0.0, label=lab("kind_any"))
    sel = np.flatnonzero(arcs.kind <= PREFILL)
    mb.add_constraints("batch_nonempty", J, np.concatenate([r, arcs.batch[sel] - 1]),
                       np.concatenate([v.u.col(jj), v.x.col(sel)]), np.concatenate([np.ones(J), -np.ones(sel.size)]),
                       upper=0.0, label=lab("batch_nonempty"))
    if J > 1:
        r = np.arange(J - 1)
        mb.add_constraints("empty_batches_last", J - 1, np.concatenate([r, r]),
                           np.concatenate([v.u.col(jj[:-1]), v.u.col(jj[1:])]),
                           np.concatenate([np.ones(J - 1), -np.ones(J - 1)]), lower=0.0, label=lab("empty_batches_last"))


def define_batch_limits(mb: ModelBuilder, problem: BatchingProblem, arcs: Arcs, v: FlowVars, J: int) -> None:
    """(5) per batch j: Σ c·x ≤ C·u_j, Σ_{prefill} c·x ≤ P·up_j, Σ kv·x ≤ M·u_j, Σ_{kv>0} x ≤ R_max."""
    jj = np.arange(1, J + 1)
    lab = lambda name: (lambda q: f"{name}[batch {q + 1}]")  # noqa: E731

    def block(name, sel, coef, indicator, limit):
        rows = np.concatenate([arcs.batch[sel] - 1] + ([np.arange(J)] if indicator is not None else []))
        cols = np.concatenate([v.x.col(sel)] + ([indicator.col(jj)] if indicator is not None else []))
        vals = np.concatenate([coef.astype(float)] + ([np.full(J, -float(limit))] if indicator is not None else []))
        mb.add_constraints(name, J, rows, cols, vals, upper=0.0 if indicator is not None else float(limit),
                           label=lab(name))

    tok = np.flatnonzero(arcs.tokens > 0)
    block("batch_C", tok, arcs.tokens[tok], v.u, problem.C)
    pre = np.flatnonzero(arcs.kind == PREFILL)
    block("batch_P", pre, arcs.tokens[pre], v.up, problem.prefill_limit)
    held = np.flatnonzero(arcs.kv > 0)
    block("batch_M", held, arcs.kv[held], v.u, problem.M)
    if problem.R_max is not None and problem.R_max < problem.n:
        block("batch_R", held, np.ones(held.size), None, problem.R_max)


def define_prefill_count_cut(mb: ModelBuilder, v: FlowVars, J: int, least: int) -> None:
    """``Σ_j up_j ≥ least`` (row ``cut_prefill_batches``).  Valid with least = 2 when no schedule of ≤ J
    batches has a single prefill batch, which `solve` establishes exactly: with one prefill batch every
    request is prefilled in it (each first token needs a prefill; batches before it would run no token,
    so it is batch 1) and nobody is evicted (a refill is a prefill), so the schedule starts together
    and its lazy twin (same finish batches, decodes as late as possible) holds pointwise less KV;
    `staggered.lazy_plan(problem, J, together=True)` proven infeasible (C, P, R_max relaxed) rules all
    of them out."""
    if least <= 1:
        return
    jj = np.arange(1, J + 1)
    mb.add_constraints("cut_prefill_batches", 1, np.zeros(J, np.int64), v.up.col(jj), np.ones(J), lower=float(least),
                       label=lambda r: "cut_prefill_batches")


def objective_vector(problem: BatchingProblem, fm_vars: FlowVars, arcs: Arcs, num_cols: int, unit: float) -> np.ndarray:
    """Model time units: (Σ_a cost_a x_a + Σ_j b_o u_j + b_p up_j + b_d ud_j)·scale·unit."""
    cm = problem.cost
    s = cm.scale * unit
    cost = np.zeros(num_cols)
    cost[fm_vars.x.columns] = arcs.cost * s
    cost[fm_vars.u.columns[1:]] = cm.b_o * s
    cost[fm_vars.up.columns[1:]] = cm.b_p * s
    cost[fm_vars.ud.columns[1:]] = cm.b_d * s
    return cost


def build_flow_model(problem: BatchingProblem, J: int, goal_latency: float | None = None,
                     least_prefill_batches: int = 1) -> FlowModel:
    """Assemble the path model for at most J batches (offline latency; see `applicable`);
    ``least_prefill_batches`` > 1 adds `define_prefill_count_cut` (the caller proves it valid)."""
    from planner.batching.formulation import time_unit

    arcs = build_arcs(problem, J)
    mb = ModelBuilder(f"batching-paths-{problem.name}", "min")
    v = define_flow_variables(mb, arcs, J)
    define_flow_balance(mb, arcs, v)
    define_batch_use(mb, problem, arcs, v, J)
    define_batch_limits(mb, problem, arcs, v, J)
    define_prefill_count_cut(mb, v, J, least_prefill_batches)
    unit = time_unit(problem)
    cost = objective_vector(problem, v, arcs, v.ud.start + v.ud.size, unit)  # ud is the last column block
    if goal_latency is not None:
        nz = np.flatnonzero(cost)
        mb.add_constraints("goal_latency", 1, np.zeros(nz.size, np.int64), nz, cost[nz],
                           upper=goal_latency * unit, label=lambda r: "goal_latency")
    model = mb.build()
    from dataclasses import replace

    return FlowModel(replace(model, cost=cost), v, arcs, J)


def extract_flow_schedule(problem: BatchingProblem, fm: FlowModel, x: np.ndarray) -> Schedule:
    """Schedule of a solution: decode arcs process 1 token, prefill arcs I_i + t, evict arcs evict."""
    a = fm.arcs
    on = np.flatnonzero(fm.vars.x.values(x) > 0.5)
    batches: list[dict[int, int]] = [{} for _ in range(fm.J)]
    evictions: list[list[int]] = [[] for _ in range(fm.J)]
    for k in on.tolist():
        j = int(a.batch[k]) - 1
        if a.kind[k] in (DECODE, PREFILL):
            batches[j][int(a.request[k])] = int(a.tokens[k])
        elif a.kind[k] == EVICT:
            evictions[j].append(int(a.request[k]))
    last = max((j for j in range(fm.J) if batches[j] or evictions[j]), default=-1)
    return Schedule.from_batches(batches[:last + 1], [sorted(e) for e in evictions[:last + 1]],
                                 tuple(r.request_id for r in problem.requests))


def flow_warm_start(problem: BatchingProblem, fm: FlowModel, schedule: Schedule) -> np.ndarray | None:
    """Column vector of a chunk-free schedule (`normalize_schedule`), or None if it does not map."""
    a = fm.arcs
    if schedule.num_batches > fm.J:
        return None
    index = {(int(r), int(j), int(k), int(t)): q for q, (r, j, k, t) in
             enumerate(zip(a.request, a.batch, a.kind, a.t_from))}
    batches, evictions = schedule.batches(), schedule.evictions()
    x = np.zeros(fm.model.num_cols)
    u = np.zeros((3, fm.J + 1))
    I, O = problem.inputs, problem.outputs
    for i in range(problem.n):
        t, resident = 0, False
        for j in range(1, fm.J + 1):
            b = batches[j - 1] if j - 1 < schedule.num_batches else {}
            ev = evictions[j - 1] if j - 1 < schedule.num_batches else []
            if t == O[i]:
                kind = IDLE_D
            elif i in ev:
                if not resident:
                    return None
                kind, resident = EVICT, False
            elif i in b:
                if resident and b[i] == 1:
                    kind = DECODE
                elif not resident and b[i] == I[i] + t:
                    kind, resident = PREFILL, True
                else:
                    return None
            else:
                kind = IDLE_R if resident else IDLE_E
            q = index.get((i, j, kind, t))
            if q is None:
                return None
            x[fm.vars.x.col(q)] = 1.0
            if kind in (DECODE, PREFILL):
                t += 1
                u[0, j] = 1.0
                u[1 if kind == PREFILL else 2, j] = 1.0
        if t != O[i]:
            return None
    for blk, row in zip((fm.vars.u, fm.vars.up, fm.vars.ud), u):
        x[blk.columns] = row
    return x


def normalize_schedule(problem: BatchingProblem, schedule: Schedule) -> Schedule | None:
    """N(S) of the module docstring: chunk-free twin of a valid schedule (None if a step fails)."""
    from planner.batching.formulation import compress_schedule

    n = problem.n
    batches = [dict(b) for b in schedule.batches()]
    evictions = [list(e) for e in schedule.evictions()]
    Iin = problem.inputs.astype(np.int64).copy()
    m = np.zeros(n, np.int64)
    pending: list[list[int]] = [[] for _ in range(n)]  # batches holding the open segment's chunks
    for j in range(schedule.num_batches):
        for i in list(evictions[j]):
            if m[i] == 0:
                evictions[j].remove(i)
                continue
            if m[i] < Iin[i]:  # prefill-phase eviction: delete the wasted chunks and the eviction
                for k in pending[i]:
                    batches[k].pop(i, None)
                evictions[j].remove(i)
            else:
                Iin[i] = m[i] + 1
            pending[i] = []
            m[i] = 0
        for i, c in list(batches[j].items()):
            if m[i] >= Iin[i]:
                m[i] += c
                continue
            pending[i].append(j)
            m[i] += c
            if m[i] >= Iin[i]:  # segment completes here: process it whole
                for k in pending[i][:-1]:
                    batches[k].pop(i, None)
                batches[j][i] = int(Iin[i])
                pending[i] = []
    try:
        return compress_schedule(Schedule.from_batches(batches, evictions, schedule.request_ids))
    except ValueError:
        return None
