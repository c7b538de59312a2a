"""Lower bounds on the worker count that need no MIP, and prechecks that name the culprit.

Every bound here is a proof that *no* placement can use fewer workers; the
largest one is reported beside each heuristic ("best-fit used 12 workers; no
placement can use fewer than 11").  Let W be the total worker count, K the
number of workers with ongoing requests, ``cap`` a worker's capacity in one
dimension and ``res_j`` what ongoing worker j has left in it:

* **ATGT volume.**  Every worker j satisfies ``Σ_{i on j} (k3·ℓ_i + k2) ≤
  t_j − c2`` (M2), with ``t_j ≤ t_max``.  New requests fill the ongoing
  workers' residuals first, the rest needs new workers:
  ``W ≥ K + ⌈(Σ_new load − Σ_j res_j)⁺ / (t_max − c2)⌉``.
* **KV volume at every breakpoint τ** (M5 summed over workers):
  ``W ≥ K + ⌈(Σ_new v_i[τ] − Σ_j res_j[τ])⁺ / cap⌉`` for each τ.
* **Prefill volume** (colocated: M3 and M4): an ongoing worker absorbs at most
  ``min(s_j, T_max) − c1`` prefill seconds, a new one ``T_max − c1``.
* **Martello–Toth L2** (no ongoing requests) on the ATGT and prefill sizes and
  on the KV sizes at the 16 breakpoints of largest KV volume: items larger
  than half a worker cannot share one.
* ``W ≥ K`` and, if there is any new request, ``W ≥ 1``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from planner.placement.problem import PlacementArrays
from planner.placement.state import ongoing_loads

_EPS = 1e-9
#: Bounds treat capacities as (1 + TOL)·capacity: the validator accepts plans within this
#: relative tolerance, so a bound must never exclude them (an exact fit must stay a fit).
TOL = 1e-7


@dataclass(frozen=True)
class LowerBound:
    value: int
    source: str
    components: dict[str, int] = field(default_factory=dict)


def _ceil(x: float) -> int:
    """⌈x⌉ for a ratio ``load / capacity``, with the capacity inflated by `TOL`."""
    return int(math.ceil(x / (1.0 + TOL) - 1e-12)) if x > 0 else 0


def precheck(arrays: PlacementArrays) -> list[str]:
    """Reasons the heartbeat has no feasible placement at all (empty when it may have one)."""
    a = arrays
    problems: list[str] = []
    for load in ongoing_loads(a):
        if a.decode_base_s + load.atgt_load > load.atgt_limit * (1 + TOL):
            problems.append(
                f"worker {load.label}: its ongoing requests alone need a decode iteration of "
                f"{a.decode_base_s + load.atgt_load:.4f} s > ATGT SLO {load.atgt_limit:.4f} s (atgt); "
                "requests cannot migrate"
            )
        peak = load.kv.max()
        if peak > a.kv_capacity * (1 + TOL):
            problems.append(
                f"worker {load.label}: its ongoing requests alone need {peak:,.0f} KV tokens > capacity "
                f"{a.kv_capacity:,.0f} (kv_capacity); requests cannot migrate"
            )
    for i in a.new_indices:
        rid = a.request_ids[i]
        if a.decode_base_s + a.atgt_load[i] > a.atgt_limit[i] * (1 + TOL):
            problems.append(
                f"request {rid}: alone on a worker its decode iteration takes "
                f"{a.decode_base_s + a.atgt_load[i]:.4f} s > ATGT SLO {a.atgt_limit[i]:.4f} s (atgt)"
            )
        if a.colocated and a.prefill_base_s + a.prefill_load[i] > a.ttft_limit[i] * (1 + TOL):
            problems.append(
                f"request {rid}: its prefill alone takes {a.prefill_base_s + a.prefill_load[i]:.3f} s "
                f"> TTFT SLO {a.ttft_limit[i]:.3f} s (ttft)"
            )
        peak = a.kv_base[i] + a.remaining[i] - 1
        if peak > a.kv_capacity * (1 + TOL):
            problems.append(
                f"request {rid}: needs {peak:,.0f} KV tokens at its last iteration > a worker's KV capacity "
                f"{a.kv_capacity:,.0f} (kv_capacity)"
            )
    return problems


def kv_breakpoint_matrix(arrays: PlacementArrays, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(breakpoints τ, KV tokens-equivalent of each request in ``idx`` at each τ) — shape (|τ|, |idx|)."""
    taus = np.unique(arrays.remaining[idx]) if idx.size else np.array([1.0])
    rem = arrays.remaining[idx]
    sizes = (arrays.kv_base[idx][None, :] + taus[:, None] - 1.0) * (rem[None, :] >= taus[:, None])
    return taus, sizes


def martello_toth_l2(sizes: np.ndarray, cap: float) -> int:
    """Martello–Toth L2 bound for 1-D bin packing of ``sizes`` into bins of ``cap`` (O(n log n)).

    For every threshold α ∈ {0} ∪ {s_i ≤ cap/2}: items above cap − α (J1) and
    items in (cap/2, cap − α] (J2) each need their own bin; items in
    [α, cap/2] (J3) can only use the room J2 leaves.  Sizes are normalised by
    the capacity and every comparison allows the relative tolerance `TOL`.
    """
    if cap <= 0:
        return 0
    s = np.sort(np.asarray(sizes, dtype=float)[np.asarray(sizes) > _EPS] / cap)
    if s.size == 0:
        return 0
    prefix = np.concatenate([[0.0], np.cumsum(s)])
    alphas = np.unique(np.concatenate([[0.0], s[s <= 0.5 + TOL]]))
    n = s.size
    hi = np.searchsorted(s, 1.0 - alphas + TOL, side="right")  # items ≤ 1 − α
    mid = int(np.searchsorted(s, 0.5 + TOL, side="right"))  # items ≤ 1/2
    lo = np.searchsorted(s, alphas - TOL, side="left")  # items < α
    j1 = n - hi
    j2 = np.maximum(hi - mid, 0)
    sum_j2 = prefix[np.maximum(hi, mid)] - prefix[mid]
    sum_j3 = prefix[mid] - prefix[np.minimum(lo, mid)]
    room = j2 * (1.0 + TOL) - sum_j2
    extra = np.array([_ceil(v) for v in (sum_j3 - room)])
    best = j1 + j2 + np.maximum(extra, 0)
    return int(max(best.max(), _ceil(prefix[-1])))


#: L2 on KV is evaluated at this many breakpoints with the largest KV volume.
KV_L2_BREAKPOINTS = 16


def lower_bound(arrays: PlacementArrays) -> LowerBound:
    a = arrays
    new = a.new_indices
    K = a.num_ongoing_workers
    comps: dict[str, int] = {"ongoing workers": K}
    if new.size == 0:
        return LowerBound(K, "ongoing workers", comps)
    comps["at least one worker"] = max(K, 1)
    loads = ongoing_loads(a)

    # ATGT volume (M2).
    t_max = float(a.atgt_limit.max())
    atgt_cap = t_max - a.decode_base_s
    residual = sum(max(0.0, min(l.atgt_limit, t_max) - a.decode_base_s - l.atgt_load) for l in loads)
    comps["ATGT volume"] = K + _ceil((a.atgt_load[new].sum() - residual) / atgt_cap)

    # KV volume at every breakpoint (M5).
    all_idx = np.arange(a.num_requests)
    taus, sizes_new = kv_breakpoint_matrix(a, new)
    on_idx = all_idx[~a.is_new]
    if on_idx.size:
        on_kv = np.stack([_kv_at(a, l.requests, taus) for l in loads], axis=1)  # (|τ|, K)
        res = np.maximum(a.kv_capacity - on_kv, 0.0).sum(axis=1)
    else:
        res = np.zeros_like(taus)
    need = (sizes_new.sum(axis=1) - res) / a.kv_capacity
    q = int(np.argmax(need))
    comps[f"KV volume at iteration {int(taus[q])}"] = K + _ceil(float(need[q]))

    # Prefill volume (M3, M4) in colocated mode.
    if a.colocated:
        t_ttft = float(a.ttft_limit[new].max())
        per_new = t_ttft - a.prefill_base_s
        absorb = 0.0
        for k, l in enumerate(loads):
            absorb += max(0.0, min(a.preemption_slack[k], t_ttft) - a.prefill_base_s)
        if per_new > 0:
            comps["prefill (TTFT) volume"] = K + _ceil((a.prefill_load[new].sum() - absorb) / per_new)

    # Martello–Toth L2 when nothing is ongoing.
    if K == 0:
        comps["L2 on ATGT sizes"] = martello_toth_l2(a.atgt_load[new], atgt_cap)
        l2_kv = 0
        top = np.argsort(sizes_new.sum(axis=1))[::-1][:KV_L2_BREAKPOINTS]
        for row in sizes_new[top]:
            l2_kv = max(l2_kv, martello_toth_l2(row, a.kv_capacity))
        comps["L2 on KV sizes"] = l2_kv
        if a.colocated:
            t_ttft = float(a.ttft_limit[new].max())
            comps["L2 on prefill sizes"] = martello_toth_l2(a.prefill_load[new], t_ttft - a.prefill_base_s)

    source = max(comps, key=lambda k: comps[k])
    return LowerBound(int(comps[source]), source, comps)


def _kv_at(a: PlacementArrays, idx: list[int], taus: np.ndarray) -> np.ndarray:
    idx = np.asarray(idx, dtype=np.int64)
    if idx.size == 0:
        return np.zeros_like(taus)
    rem = a.remaining[idx]
    return ((a.kv_base[idx][None, :] + taus[:, None] - 1.0) * (rem[None, :] >= taus[:, None])).sum(axis=1)
