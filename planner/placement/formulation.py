r"""Aladdin's placement MIP (docs/formulations.md §1.3), one constraint family per function.

Sets: new requests i ∈ R_new; ongoing requests on K fixed workers (no
migration); U candidate new workers (U = the new workers of the best heuristic,
so its placement is a warm start).  Decision variables:

* ``assign`` x_ij ∈ {0,1}: new request i on worker j (only *eligible* pairs, see below);
* ``open`` y_j ∈ {0,1}: candidate worker j is used;
* ``atgt_class``/``ttft_class`` z ∈ {0,1}: worker j hosts a request of a tighter SLO class
  (only when the workload has several SLO classes);
* ``kv_tokens``/``kv_requests`` S, N ≥ 0: cumulative KV sums per completion breakpoint.

Ongoing requests have x fixed to 1 on their worker; they are substituted as
constants (presolve-equivalent), so their workers' rows carry them on the
right-hand side.

Objective (M0): ``min K + Σ_j y_j`` — the total worker count.

Eligibility (exact preprocessing): x_ij exists for an ongoing worker j only if
request i alone fits next to j's ongoing requests in every family; for the
candidate workers, symmetry breaking (below) removes pairs.

Reading choices (each justified in the function docstring): λ enters M2 as
ℓ_i(λ) = I_i + g_i + λ·max(ô_i − g_i, 0); θ scales the KV capacity; M4 is the
exact form without an indicator; M5 is checked at the completion breakpoints
only, which is exact.

All rows are scaled so that a worker's capacity is 1.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.placement.problem import normalised_size
from planner.placement.problem import PlacementArrays, PlacementProblem
from planner.placement.solution import PlacementSolution
from planner.placement.state import first_new_label, ongoing_loads
from planner.solver.model import INF, LinearModel, ModelBuilder, VarBlock


@dataclass(frozen=True)
class Slots:
    """Workers of the model: K ongoing slots (fixed, used) then U candidate slots."""

    num_ongoing: int
    num_candidates: int
    labels: np.ndarray  # slot → worker label
    pair_request: np.ndarray  # per x column: request index
    pair_slot: np.ndarray  # per x column: slot
    rank: np.ndarray  # per request: canonical rank among new requests (−1 for ongoing)
    symmetric: bool = True  # candidate workers interchangeable (symmetry breaking applied)

    @property
    def num_slots(self) -> int:
        return self.num_ongoing + self.num_candidates

    def is_candidate(self, slot: int) -> bool:
        return slot >= self.num_ongoing

    def columns_of(self, slot: int) -> np.ndarray:
        return self._by_slot[slot]

    def __post_init__(self) -> None:
        order = np.argsort(self.pair_slot, kind="stable")
        bounds = np.searchsorted(self.pair_slot[order], np.arange(self.num_slots + 1))
        object.__setattr__(
            self, "_by_slot", [order[bounds[s] : bounds[s + 1]] for s in range(self.num_slots)]
        )


@dataclass(frozen=True)
class PlacementModel:
    """The built MIP plus the index maps to read a placement in and out of it."""

    model: LinearModel
    slots: Slots
    assign: VarBlock
    open: VarBlock
    indicators: tuple["ClassIndicators", ...]
    kv: "KVChains"

    def warm_start(self, problem: PlacementProblem, solution: PlacementSolution) -> np.ndarray | None:
        """Column values of ``solution`` in this model (None if it does not fit its slots)."""
        return _warm_start_vector(self, problem, solution)

    def extract(self, problem: PlacementProblem, x: np.ndarray, method: str) -> PlacementSolution:
        a = problem.arrays
        s = self.slots
        assignment = np.array(a.ongoing_worker, copy=True)
        chosen = self.assign.values(x) > 0.5
        assignment[s.pair_request[chosen]] = s.labels[s.pair_slot[chosen]]
        # Candidate workers get consecutive labels in order of first use.
        base = first_new_label(a)
        new_labels = sorted({int(w) for w in assignment[a.is_new] if w >= base})
        relabel = {old: base + k for k, old in enumerate(new_labels)}
        assignment = np.array([relabel.get(int(w), int(w)) for w in assignment])
        return PlacementSolution.from_array(a.request_ids, assignment, method, problem.worker.tensor_parallel)


# ---------------------------------------------------------------------------------------------
# Slots, eligibility and symmetry breaking
# ---------------------------------------------------------------------------------------------


def make_slots(problem: PlacementProblem, num_candidates: int, symmetry_breaking: bool = True) -> Slots:
    """Eligible (request, worker) pairs.

    Symmetry breaking between identical candidate workers (exact): rank new
    requests by decreasing normalised size; the request of rank k may only use
    candidate workers 0..k.  Any placement can be relabelled to satisfy it —
    number the used candidate workers by the smallest rank they hold — and the
    relabelling also makes the used workers a prefix (``define_symmetry_breaking``).
    """
    a = problem.arrays
    K = a.num_ongoing_workers
    new = a.new_indices
    size = normalised_size(a)
    order = sorted(new, key=lambda i: (-size[i], i))
    rank = np.full(a.num_requests, -1, dtype=np.int64)
    rank[np.array(order, dtype=np.int64)] = np.arange(len(order))
    req_parts, slot_parts = [], []
    for k, load in enumerate(ongoing_loads(a)):
        fits = new[load.fits_many(new)].astype(np.int64)
        req_parts.append(fits)
        slot_parts.append(np.full(fits.size, k, dtype=np.int64))
    for u in range(num_candidates):
        eligible = new[rank[new] >= u] if symmetry_breaking else new
        req_parts.append(eligible.astype(np.int64))
        slot_parts.append(np.full(eligible.size, K + u, dtype=np.int64))
    pair_request = np.concatenate(req_parts) if req_parts else np.array([], np.int64)
    pair_slot = np.concatenate(slot_parts) if slot_parts else np.array([], np.int64)
    base = first_new_label(a)
    labels = np.concatenate([a.ongoing_labels.astype(np.int64), base + np.arange(num_candidates)])
    return Slots(K, num_candidates, labels, pair_request, pair_slot, rank, symmetry_breaking)


# ---------------------------------------------------------------------------------------------
# Constraint families
# ---------------------------------------------------------------------------------------------


def define_assignment(b: ModelBuilder, a: PlacementArrays, s: Slots, x: VarBlock) -> None:
    """(M1) Every new request is placed exactly once: ``Σ_j x_ij = 1  ∀ i ∈ R_new``.

    Ongoing requests keep their worker (``x_{i,w(i)} = 1``), substituted as constants.
    """
    new = a.new_indices
    row_of = np.full(a.num_requests, -1, dtype=np.int64)
    row_of[new] = np.arange(new.size)
    rows = row_of[s.pair_request]
    b.add_constraints(
        "assignment",
        new.size,
        rows,
        x.start + np.arange(s.pair_request.size),
        np.ones(s.pair_request.size),
        lower=1.0,
        upper=1.0,
        label=lambda r: f"assignment[request={a.request_ids[new[r]]}]",
    )


@dataclass(frozen=True)
class ClassIndicators:
    """Indicator columns z of one family: z_k = 1 iff slot ``slots[k]`` hosts a request of limit ``limits[k]``."""

    block: VarBlock | None
    slots: tuple[int, ...] = ()
    limits: tuple[float, ...] = ()
    linked: tuple[np.ndarray, ...] = ()  # x columns (block-local) that force z_k = 1


def _class_rows(
    b: ModelBuilder,
    family: str,
    indicator_name: str,
    s: Slots,
    x: VarBlock,
    y: VarBlock,
    load: np.ndarray,
    limit: np.ndarray,
    base_time: float,
    ongoing_load: np.ndarray,
    ongoing_limit: np.ndarray,
    applies: np.ndarray,
) -> ClassIndicators:
    """Rows ``Σ_i load_i·x_ij + base ≤ (tightest SLO among requests on j)`` for one family, per worker.

    With a single SLO value on a worker this is one knapsack row.  With several,
    worker j's base limit L_j is the loosest value it can see; every tighter
    value t gets an indicator z_jt ≥ x_ij (for i of limit t) and the row
    ``Σ load·x − (L_j − base)·y_j + (L_j − t)·z_jt ≤ 0`` (candidate workers; for
    ongoing workers y_j ≡ 1 and their own load moves to the right-hand side).
    z_jt = 1 tightens the row to t exactly and z_jt = 0 leaves L_j: no Big-M
    beyond the SLO range itself.  Rows are scaled by 1/(L_j − base).
    """
    plan = []  # (slot, cols, req, L, const, tighter values)
    for slot in range(s.num_slots):
        cols_s = s.columns_of(slot)
        req = s.pair_request[cols_s]
        use = applies[req]
        if not use.any():
            continue
        cols_s, req = cols_s[use], req[use]
        if s.is_candidate(slot):
            L, const = float(limit[req].max()), 0.0
        else:
            L, const = float(min(ongoing_limit[slot], limit[req].max())), float(ongoing_load[slot])
        values = limit[req]
        tighter = [float(t) for t in np.unique(values[values < L * (1 - 1e-12)])]
        plan.append((slot, cols_s, req, L, const, tighter))
    z_slots = [(slot, t) for slot, _, _, _, _, tighter in plan for t in tighter]
    z = b.add_binaries(indicator_name, len(z_slots)) if z_slots else None
    rows, cols, vals, upper, labels, linked = [], [], [], [], [], []
    nrow, zk = 0, 0
    for slot, cols_s, req, L, const, tighter in plan:
        cap = L - base_time
        for t in [L, *tighter]:
            r_cols = [x.start + cols_s]
            r_vals = [load[req] / cap]
            if s.is_candidate(slot):
                r_cols.append([y.start + slot - s.num_ongoing])
                r_vals.append([-1.0])
                ub = -const / cap
            else:
                ub = 1.0 - const / cap
            if t < L:
                r_cols.append([z.start + zk])
                r_vals.append([(L - t) / cap])
                linked.append(cols_s[np.isclose(limit[req], t)])
                zk += 1
            c = np.concatenate([np.asarray(v, dtype=np.int64) for v in r_cols])
            rows.append(np.full(c.size, nrow))
            cols.append(c)
            vals.append(np.concatenate([np.asarray(v, dtype=float) for v in r_vals]))
            upper.append(ub)
            labels.append(f"{family}[worker={s.labels[slot]}, slo={t:g}s]")
            nrow += 1
    if nrow:
        b.add_constraints(
            family, nrow, np.concatenate(rows), np.concatenate(cols), np.concatenate(vals),
            upper=np.array(upper), label=lambda r: labels[r],
        )
    if z is not None:  # links x_ij − z_jt ≤ 0
        link_x = np.concatenate(linked)
        link_z = np.concatenate([np.full(l.size, z.start + k) for k, l in enumerate(linked)])
        n = link_x.size
        b.add_constraints(
            family, n, np.repeat(np.arange(n), 2), np.column_stack([x.start + link_x, link_z]).ravel(),
            np.tile([1.0, -1.0], n), upper=0.0,
            label=lambda r: f"{family}[class indicator link {r}]",
        )
    return ClassIndicators(
        z, tuple(sl for sl, _ in z_slots), tuple(t for _, t in z_slots), tuple(linked)
    )


def define_decode_slo(b: ModelBuilder, a: PlacementArrays, s: Slots, x: VarBlock, y: VarBlock) -> ClassIndicators:
    r"""(M2) Decode iterations meet the ATGT SLO (Eqs. 3–4 with the strictness knob λ).

    ``k3·Σ_i x_ij·ℓ_i(λ) + k2·Σ_i x_ij + c2·y_j ≤ t_atgt·y_j``, ``ℓ_i(λ) = I_i + g_i + λ·max(ô_i − g_i, 0)``.

    λ = 0 checks the first iteration, λ = 1 the last; with Eq. 3 linear in
    context the *mean* iteration time over a request's decode is the time at
    context I + ô/2, so λ = ½ meets ATGT on average for a stationary batch.
    """
    on_load = np.zeros(s.num_slots)
    on_limit = np.full(s.num_slots, INF)
    for k, lab in enumerate(a.ongoing_labels):
        mine = (~a.is_new) & (a.ongoing_worker == lab)
        on_load[k] = a.atgt_load[mine].sum()
        on_limit[k] = a.atgt_limit[mine].min()
    return _class_rows(
        b, "decode_slo", "atgt_class", s, x, y, a.atgt_load, a.atgt_limit, a.decode_base_s,
        on_load, on_limit, np.ones(a.num_requests, dtype=bool),
    )


def define_ttft(b: ModelBuilder, a: PlacementArrays, s: Slots, x: VarBlock, y: VarBlock) -> ClassIndicators:
    r"""(M3) The prefill batch of the heartbeat's new requests meets TTFT (Eq. 2).

    ``k1·Σ_{i∈R_new} x_ij·I_i + c1·y_j ≤ t_ttft·y_j``.  On an ongoing worker
    (y_j ≡ 1) the row reads ``k1·Σ x_ij·I_i ≤ t_ttft − c1``; it charges c1 only
    when some new request lands, because with none the left side is 0.
    """
    return _class_rows(
        b, "ttft", "ttft_class", s, x, y, a.prefill_load, a.ttft_limit, a.prefill_base_s,
        np.zeros(s.num_slots), np.full(s.num_slots, INF), a.is_new,
    )


def define_prefill_preemption(b: ModelBuilder, a: PlacementArrays, s: Slots, x: VarBlock) -> None:
    r"""(M4) New prefills may not break ongoing requests' ATGT.

    A prefill of length t_pre stalls every decode on the worker.  Ongoing
    request i has spent τ_i on g_i tokens and, with M2, at most t_atgt per
    remaining token, so its ATGT stays within the SLO iff
    ``τ_i + t_pre + (ô_i − g_i)·t_atgt ≤ ô_i·t_atgt`` ⇔ ``t_pre ≤ t_atgt·g_i − τ_i``.
    Hence ``k1·Σ_{i∈R_new} x_ij·I_i + c1 ≤ s_j := min_{i on j}(t_atgt,i·g_i − τ_i)``.
    Exact without an indicator: c1 counts only if a new request lands, and
    pairs with ``c1 + k1·I_i > s_j`` are not eligible.
    """
    rows, cols, vals, ub, labels = [], [], [], [], []
    nrow = 0
    for k, lab in enumerate(a.ongoing_labels):
        cols_k = s.columns_of(k)
        if cols_k.size == 0:
            continue
        slack = float(a.preemption_slack[k]) - a.prefill_base_s
        rows.append(np.full(cols_k.size, nrow))
        cols.append(x.start + cols_k)
        vals.append(a.prefill_load[s.pair_request[cols_k]] / max(slack, 1e-12))
        ub.append(1.0)
        labels.append(f"prefill_preemption[worker={lab}]")
        nrow += 1
    if nrow:
        b.add_constraints(
            "prefill_preemption", nrow, np.concatenate(rows), np.concatenate(cols), np.concatenate(vals),
            upper=np.array(ub), label=lambda r: labels[r],
        )


@dataclass(frozen=True)
class KVChains:
    """Layout of the cumulative KV columns: for each worker, its breakpoints and column offset."""

    tokens: VarBlock
    requests: VarBlock
    levels: tuple[tuple[int, int, np.ndarray], ...]  # (slot, offset, breakpoints τ descending)


def define_kv_capacity(b: ModelBuilder, a: PlacementArrays, s: Slots, x: VarBlock, y: VarBlock) -> KVChains:
    r"""(M5) KV cache over all future iterations, at the completion breakpoints only (exact).

    Footprint of request i at future iteration τ: ``v_i[τ] = kv(I_i + g_i + τ − 1)`` for
    ``τ ≤ r_i = ô_i − g_i`` and 0 afterwards.  Requirement:
    ``Σ_i x_ij·v_i[τ] ≤ θ·M_kv·y_j  ∀ j, ∀ τ``.

    *Breakpoint reduction.*  Between two consecutive completion points the set
    of live requests is constant and every v_i grows with τ, so the maximum
    over an interval is reached at its right end τ = r_k for some k: checking
    τ ∈ {r_i} is exact (|R| rows per worker instead of L_max).

    *Cumulative form.*  With breakpoints τ_1 > τ_2 > … of worker j and
    ``S_q = Σ_{r_i ≥ τ_q} w_i·x_ij`` (w_i = I_i + g_i + b_kv/a_kv), ``N_q = Σ_{r_i ≥ τ_q} x_ij``:
    ``S_q = S_{q−1} + Σ_{r_i = τ_q} w_i x_ij``, ``N_q = N_{q−1} + Σ_{r_i = τ_q} x_ij`` and
    ``S_q + (τ_q − 1)·N_q + ongoing_j(τ_q) ≤ θ·M_kv/a_kv · y_j``.
    Each x appears in two chain rows instead of in every breakpoint row:
    O(|R| + |τ|) nonzeros per worker, the same LP relaxation.  A worker uses
    the chain or plain rows, whichever has fewer nonzeros.

    *Redundant breakpoints* (exact presolve, `kv_breakpoints_needed`): a row is
    dropped when even the largest KV the worker can hold at τ *while meeting
    M2* fits — the bound is the fractional knapsack
    ``max Σ_{r_i ≥ τ} (w_i + τ − 1)·x_i  s.t.  Σ_i (k3·ℓ_i + k2)·x_i ≤ t_atgt − c2 − ongoing load, 0 ≤ x ≤ 1``
    plus the ongoing KV at τ.  Candidate workers share one bound over all new requests.
    """
    cap = a.kv_capacity
    plan = []  # (slot, cols_s, req, ongoing idx, needed breakpoints τ descending)
    candidate_taus = None  # candidate u sees a subset of candidate 0's requests: one bound serves all
    for slot in range(s.num_slots):
        cols_s = s.columns_of(slot)
        if cols_s.size == 0:
            continue
        req = s.pair_request[cols_s]
        if s.is_candidate(slot):
            on_idx = np.array([], dtype=np.int64)
            if candidate_taus is None:
                candidate_taus = kv_breakpoints_needed(a, a.new_indices, on_idx)
            taus = candidate_taus[candidate_taus <= a.remaining[req].max()]
        else:
            on_idx = np.flatnonzero((~a.is_new) & (a.ongoing_worker == s.labels[slot]))
            taus = kv_breakpoints_needed(a, req, on_idx)
        if taus.size:
            plan.append((slot, cols_s, req, on_idx, taus))
    # Per worker, chain form or dense rows, whichever has fewer nonzeros.
    # A chain needs every request's own breakpoint as a level: τ extended to all of them.
    chained, chain_taus = [], []
    for slot, cols_s, req, on_idx, taus in plan:
        dense_nnz = int((a.remaining[req][None, :] >= taus[:, None]).sum())
        extended = np.unique(np.concatenate([taus, a.remaining[req][a.remaining[req] >= taus.min()]]))[::-1]
        chain_nnz = 2 * req.size + 7 * extended.size
        chained.append(chain_nnz < dense_nnz)
        chain_taus.append(extended)
    total = int(sum(t.size for t, c in zip(chain_taus, chained) if c))
    S = b.add_variables("kv_tokens", total, lower=0.0)
    N = b.add_variables("kv_requests", total, lower=0.0)
    rows_c, cols_c, vals_c, lb_c, ub_c, labels, levels = [], [], [], [], [], [], []
    nrow, offset = 0, 0
    for (slot, cols_s, req, on_idx, taus), use_chain, extended in zip(plan, chained, chain_taus):
        Q = taus.size
        lab = int(s.labels[slot])
        r_on = a.remaining[on_idx]
        on_kv = ((a.kv_base[on_idx][None, :] + taus[:, None] - 1.0) * (r_on[None, :] >= taus[:, None])).sum(axis=1)
        r_idx = nrow
        if use_chain:
            taus = extended
            on_kv = ((a.kv_base[on_idx][None, :] + taus[:, None] - 1.0) * (r_on[None, :] >= taus[:, None])).sum(axis=1)
            Q = taus.size
            live = a.remaining[req] >= taus.min()
            cols_live, req_live = cols_s[live], req[live]
            level_of = np.searchsorted(-taus, -a.remaining[req_live])  # q with τ_q = r_i
            sq = S.start + offset + np.arange(Q)
            nq = N.start + offset + np.arange(Q)
            # chains: V_q − V_{q−1} − Σ_{r_i = τ_q} coef_i·x_ij = 0
            for chain, var, coef in (
                ("tokens", sq, a.kv_base[req_live] / cap),
                ("requests", nq, np.ones(req_live.size)),
            ):
                r_idx = nrow + np.arange(Q)
                rows_c += [r_idx, r_idx[1:], nrow + level_of]
                cols_c += [var, var[:-1], x.start + cols_live]
                vals_c += [np.ones(Q), -np.ones(Q - 1), -coef]
                lb_c.append(np.zeros(Q))
                ub_c.append(np.zeros(Q))
                labels += [f"kv_capacity[worker={lab}, breakpoint={int(t)}] ({chain} chain)" for t in taus]
                nrow += Q
            # capacity: S_q + ((τ_q − 1)/cap)·N_q − y_j ≤ −ongoing_j(τ_q)/cap   (y_j ≡ 1 on ongoing workers)
            r_idx = nrow + np.arange(Q)
            rows_c += [r_idx, r_idx]
            cols_c += [sq, nq]
            vals_c += [np.ones(Q), (taus - 1.0) / cap]
            levels.append((slot, offset, taus))
            offset += Q
        else:
            # dense: Σ_{r_i ≥ τ} ((w_i + τ − 1)/cap)·x_ij − y_j ≤ −ongoing_j(τ)/cap
            live = a.remaining[req][None, :] >= taus[:, None]
            q_idx, k_idx = np.nonzero(live)
            r_idx = nrow + np.arange(Q)
            rows_c.append(nrow + q_idx)
            cols_c.append(x.start + cols_s[k_idx])
            vals_c.append((a.kv_base[req][k_idx] + taus[q_idx] - 1.0) / cap)
        if s.is_candidate(slot):
            rows_c.append(r_idx)
            cols_c.append(np.full(Q, y.start + slot - s.num_ongoing))
            vals_c.append(-np.ones(Q))
            ub_c.append(-on_kv / cap)
        else:
            ub_c.append(1.0 - on_kv / cap)
        lb_c.append(np.full(Q, -INF))
        labels += [f"kv_capacity[worker={lab}, iteration={int(t)}]" for t in taus]
        nrow += Q
    if nrow:
        b.add_constraints(
            "kv_capacity", nrow, np.concatenate(rows_c), np.concatenate(cols_c), np.concatenate(vals_c),
            lower=np.concatenate(lb_c), upper=np.concatenate(ub_c), label=lambda r: labels[r],
        )
    return KVChains(S, N, tuple(levels))


def kv_breakpoints_needed(a: PlacementArrays, req: np.ndarray, on_idx: np.ndarray) -> np.ndarray:
    """Breakpoints τ (descending) whose KV row is not implied by M2 for a worker with these requests.

    ``req``: new requests eligible for the worker; ``on_idx``: its ongoing requests.
    """
    if req.size == 0:
        return np.array([], dtype=float)
    r_new = a.remaining[req]
    r_on = a.remaining[on_idx]
    taus = np.unique(np.concatenate([r_new, r_on[r_on <= r_new.max()]]))[::-1]
    if on_idx.size:
        limit = min(float(a.atgt_limit[on_idx].min()), float(a.atgt_limit[req].max()))
        budget = limit - a.decode_base_s - float(a.atgt_load[on_idx].sum())
        on_kv = ((a.kv_base[on_idx][None, :] + taus[:, None] - 1.0) * (r_on[None, :] >= taus[:, None])).sum(axis=1)
    else:
        budget = float(a.atgt_limit[req].max()) - a.decode_base_s
        on_kv = np.zeros(taus.size)
    weight = a.atgt_load[req]
    needed = np.zeros(taus.size, dtype=bool)
    for q, tau in enumerate(taus):
        live = r_new >= tau
        value = (a.kv_base[req][live] + tau - 1.0)
        wt = weight[live]
        order = np.argsort(-value / wt, kind="stable")
        cum = np.cumsum(wt[order])
        full = int(np.searchsorted(cum, budget, side="right"))
        best = value[order][:full].sum()
        if full < order.size:
            left = budget - (cum[full - 1] if full else 0.0)
            best += value[order][full] * max(left, 0.0) / wt[order][full]
        needed[q] = best + on_kv[q] > a.kv_capacity * (1 - 1e-9)
    return taus[needed]


def define_worker_used(b: ModelBuilder, s: Slots, x: VarBlock, y: VarBlock) -> None:
    """(M6) A used candidate worker holds at least one request: ``y_j ≤ Σ_i x_ij``."""
    rows, cols, vals = [], [], []
    for u in range(s.num_candidates):
        cols_u = s.columns_of(s.num_ongoing + u)
        rows += [np.full(cols_u.size + 1, u)]
        cols += [np.concatenate([[y.start + u], x.start + cols_u])]
        vals += [np.concatenate([[1.0], -np.ones(cols_u.size)])]
    if s.num_candidates:
        b.add_constraints(
            "worker_used", s.num_candidates, np.concatenate(rows), np.concatenate(cols), np.concatenate(vals),
            upper=0.0, label=lambda r: f"worker_used[candidate={r}]",
        )


def define_open_link(b: ModelBuilder, s: Slots, x: VarBlock, y: VarBlock) -> None:
    """Linking ``x_ij ≤ y_j`` for candidate workers (implied by M2–M5 for integers; tightens the LP)."""
    cand = s.pair_slot >= s.num_ongoing
    cols = np.flatnonzero(cand)
    n = cols.size
    if n == 0:
        return
    b.add_constraints(
        "open_link",
        n,
        np.repeat(np.arange(n), 2),
        np.column_stack([x.start + cols, y.start + s.pair_slot[cols] - s.num_ongoing]).ravel(),
        np.tile([1.0, -1.0], n),
        upper=0.0,
        label=lambda r: f"open_link[{r}]",
    )


def define_symmetry_breaking(b: ModelBuilder, s: Slots, y: VarBlock) -> None:
    """Used candidate workers form a prefix: ``y_j ≥ y_{j+1}`` (see `make_slots`)."""
    U = s.num_candidates
    if U < 2:
        return
    n = U - 1
    b.add_constraints(
        "symmetry_breaking",
        n,
        np.repeat(np.arange(n), 2),
        np.column_stack([y.start + np.arange(n), y.start + np.arange(1, U)]).ravel(),
        np.tile([1.0, -1.0], n),
        lower=0.0,
        label=lambda r: f"symmetry_breaking[{r}]",
    )


def define_worker_count_bounds(
    b: ModelBuilder, s: Slots, y: VarBlock, lower: int | None, upper: int | None
) -> None:
    """``lower ≤ K + Σ_j y_j ≤ upper``: a proven lower bound as a valid cut; the inventory cap."""
    U = s.num_candidates
    if U == 0:
        return
    lo = -INF if lower is None else float(lower - s.num_ongoing)
    hi = INF if upper is None else float(upper - s.num_ongoing)
    if lo == -INF and hi == INF:
        return
    name = "worker_count" if upper is None else "max_workers"
    b.add_constraints(
        name, 1, np.zeros(U, dtype=np.int64), y.columns, np.ones(U), lower=lo, upper=hi,
        label=lambda r: f"{name}[total workers in [{lower}, {upper}]]",
    )


# ---------------------------------------------------------------------------------------------
# The model, in the order of the paper
# ---------------------------------------------------------------------------------------------


def build_model(
    problem: PlacementProblem,
    num_candidates: int,
    *,
    lower_bound: int | None = None,
    open_link: bool = True,
    symmetry_breaking: bool = True,
) -> PlacementModel:
    """Build the placement MIP with ``num_candidates`` candidate new workers.

    ``symmetry_breaking=False`` keeps every candidate worker distinguishable
    (used by the repacking neighbourhoods, which name a worker to empty).
    """
    a = problem.arrays
    s = make_slots(problem, num_candidates, symmetry_breaking)
    b = ModelBuilder(f"placement:{problem.name}", "min")
    x = b.add_binaries("assign", s.pair_request.size)
    y = b.add_binaries("open", num_candidates, cost=1.0)  # (M0) min K + Σ y
    b.offset = float(s.num_ongoing)
    b.objective_is_integral = True
    define_assignment(b, a, s, x)  # (M1)
    indicators = [define_decode_slo(b, a, s, x, y)]  # (M2)
    if a.colocated:
        indicators.append(define_ttft(b, a, s, x, y))  # (M3)
        define_prefill_preemption(b, a, s, x)  # (M4)
    kv = define_kv_capacity(b, a, s, x, y)  # (M5)
    define_worker_used(b, s, x, y)  # (M6)
    if open_link:
        define_open_link(b, s, x, y)
    if symmetry_breaking:
        define_symmetry_breaking(b, s, y)
    define_worker_count_bounds(b, s, y, lower_bound, a.max_workers)
    return PlacementModel(b.build(), s, x, y, tuple(indicators), kv)


# ---------------------------------------------------------------------------------------------
# Warm start
# ---------------------------------------------------------------------------------------------


def _warm_start_vector(pm: PlacementModel, problem: PlacementProblem, solution: PlacementSolution) -> np.ndarray | None:
    """Column values of ``solution``; None if it needs more candidate workers than the model has.

    Its new workers are relabelled by the smallest rank they hold (the
    symmetry-breaking order of `make_slots`); indicators and KV chains take the
    values their defining rows imply, so the start satisfies every row.
    """
    a = problem.arrays
    s = pm.slots
    assignment = solution.as_array()
    slot_of = {int(lab): k for k, lab in enumerate(a.ongoing_labels)}
    first_rank: dict[int, int] = {}
    for i in np.flatnonzero(a.is_new):
        lab = int(assignment[i])
        if lab not in slot_of:
            first_rank[lab] = min(first_rank.get(lab, 1 << 62), int(s.rank[i]))
    if len(first_rank) > s.num_candidates:
        return None
    if s.symmetric:
        for k, lab in enumerate(sorted(first_rank, key=first_rank.__getitem__)):
            slot_of[lab] = s.num_ongoing + k
    else:  # distinguishable workers: label base + u is candidate u
        base = first_new_label(a)
        for lab in first_rank:
            if not 0 <= lab - base < s.num_candidates:
                return None
            slot_of[lab] = s.num_ongoing + lab - base
    # column of each (request, slot) pair: pairs keyed request·slots + slot, looked up by binary search
    keys = s.pair_request.astype(np.int64) * s.num_slots + s.pair_slot
    order = np.argsort(keys, kind="stable")
    new = np.flatnonzero(a.is_new)
    wanted = new.astype(np.int64) * s.num_slots + np.array([slot_of[int(assignment[i])] for i in new], dtype=np.int64)
    sorted_keys = keys[order]
    at = np.searchsorted(sorted_keys, wanted)
    if (at >= sorted_keys.size).any() or not np.array_equal(sorted_keys[at], wanted):
        return None  # a pair the model does not have (not eligible)
    values = np.zeros(pm.model.num_cols)
    xv = np.zeros(pm.assign.size)
    xv[order[at]] = 1.0
    values[pm.assign.start : pm.assign.start + pm.assign.size] = xv
    for lab in first_rank:
        values[pm.open.start + slot_of[lab] - s.num_ongoing] = 1.0
    for ind in pm.indicators:
        if ind.block is not None:
            for k, cols in enumerate(ind.linked):
                values[ind.block.start + k] = float(xv[cols].max(initial=0.0))
    cap = a.kv_capacity
    slot_of_request = np.full(a.num_requests, -1)
    slot_of_request[s.pair_request[xv > 0.5]] = s.pair_slot[xv > 0.5]
    for slot, offset, taus in pm.kv.levels:
        mine = np.flatnonzero(slot_of_request == slot)
        live = a.remaining[mine][None, :] >= taus[:, None]
        values[pm.kv.tokens.start + offset + np.arange(taus.size)] = (live * (a.kv_base[mine] / cap)).sum(axis=1)
        values[pm.kv.requests.start + offset + np.arange(taus.size)] = live.sum(axis=1)
    return values
