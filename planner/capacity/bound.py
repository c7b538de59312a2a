"""A capacity lower bound valid for every scheduling policy under the Aladdin cost model.

`instance_bound` answers: no policy on fewer than ``workers`` workers of one configuration can serve
THIS finite set of requests so that the criterion holds (attainment α of both SLOs, or P-th
percentile TTFT and TPOT within the SLOs).  `steady_state_bound` is the same accounting per second
of a stationary stream (rate λ, lengths from a `LengthDistribution`), and `max_rate_per_worker` its
inverse: no worker of this configuration sustains a higher rate.  Every result says what it is
relative to ("under cost model <model/GPU/TP, provenance>").

What the bound assumes (the execution model the fleet simulator applies)
-----------------------------------------------------------------------
* A worker runs one batch at a time.  A batch with prefill chunks c_i and decode entries j takes
  ``[prefill]·(c1 + k1·Σc) + [decode]·(c2 + k2·n_dec + k3·Σ_j L_j)``; a hybrid batch pays both parts;
  all coefficients are ≥ 0.  A request's prompt is prefilled in one or more chunks, in order (a chunk
  runs after the previous one ended); its first output token is produced by the batch holding its
  last chunk, every later token j = 2..O by one decode entry, in order.  Recompute after an eviction
  only adds prefill work, so it is left out (the bound stays valid).
* Context of a decode entry: the entry that produces output token j reads at least ``I + j − 2``
  context tokens (the prompt and the j − 2 output tokens whose KV is already stored: the convention
  of the `planner.batching` engine; an engine that counts ``I + j − 1`` only pays more).  While an
  entry runs, its request holds at least that many KV tokens plus ``b_kv / a_kv`` (the cost model's
  per-request KV base); a worker holds at most ``M = kv_tokens_per_worker`` KV tokens.
* TTFT of a request = first-token time − arrival; TPOT = (last-token time − first-token time)/(O − 1)
  (the mean gap; a one-token request has no TPOT and meets it trivially).  An SLO x is met when the
  value is ≤ x·(1 + 1e-9) and an attainment α when the count is ≥ (α − 1e-9)·n, as `planner.fleet`
  judges them; the bound reads every SLO as x·(1 + 2e-9), which only lowers it.
* The percentile criterion: "the P-th percentile of n values ≤ x" is read as the ⌊(n − 1)·p⌋-th order
  statistic (0-based) being ≤ x, which numpy's default (linear) percentile implies, as do the
  nearest-rank and "higher" definitions; so at most ``v = n − ⌊(n − 1)p⌋ − 1`` requests violate TTFT
  and at most ``v_τ`` (same formula over the requests with O ≥ 2) violate TPOT.

Derivation (instance form)
--------------------------
Let S be the set of requests meeting both SLOs.  Request r ∈ S has its first token by
``a_r + f`` and its last by ``d_r = a_r + f + τ·(O_r − 1)``, so all of r's batches lie in
``[a_r, d_r]``.  For any interval [s, e] and the requests of S whose window lies inside it, the
busy time they cause fits into ``W·(e − s)`` (W workers, one batch at a time each).  Summing the
batch times and splitting every batch into its prefill and decode parts (a hybrid pays both):

1. **Prefill tokens**: ``k1·Σ_S I_r``.
2. **Prefill batches** (the c1 term): a batch holding any prefill chunk of r ∈ S starts after a_r
   and ends by a_r + f (r's later chunks, if any, come after it), so its prefill part
   ``c1 + k1·(its prefill tokens)`` is ≤ f, i.e. it holds at most ``(f − c1)/k1`` prefill tokens;
   hence there are ``P ≥ k1·Σ_S I / (f − c1)`` such batches and they cost ``c1·P``.  (A cover count
   of the arrivals by TTFT windows also bounds P; it adds about c1·λ/(1 + λ(f − c1)) per second, a
   few hundredths of a worker at the scenario numbers, and is left out.)
3. **Decode entries**: every entry of r ∈ S costs ``e_j = k2 + k3·L_j`` with ``L_j ≥ I + j − 2``,
   in total ``Σ e`` (fixed by the lengths).
4. **Decode iterations** (the c2 term ``c2·R``, R = iterations holding an entry of S) — two valid
   lower bounds on R, the larger is used:
   * *TPOT budget (Cauchy–Schwarz)*: r's decode iterations run one after another inside its
     decode span, so ``Σ_{i∋r} t_i ≤ τ·(O_r − 1)``; summing over S,
     ``Σ_i b_i·t_i ≤ τ·N`` with b_i the entries of S in iteration i and ``N = Σ_S (O_r − 1)``.
     With ``t_i ≥ c2 + s_i`` (s_i = Σ_{j∈i} e_j) and Σ_i b_i = N: ``Σ_i b_i·s_i ≤ (τ − c2)·N``.
     Cauchy–Schwarz per iteration gives ``b_i·s_i ≥ q_i²`` with ``q_i = Σ_{j∈i} √e_j``, and over
     iterations ``Q² = (Σ_i q_i)² ≤ R·Σ_i q_i²``; hence **R ≥ Q² / ((τ − c2)·N)** with
     ``Q = Σ_S Σ_j √e_j``.  Per token this reads ``T·(E_tok[√(k2 + k3·c)])²/(τ − c2)``
     (docs/formulations.md §7.1), with the budget of a request τ·(O − 1) over its O − 1 decode
     tokens and the context of the j-th token's entry I + j − 2.  The
     bound is the exact optimum of its relaxation (equal q_i, batches of equal context with
     b ∝ 1/√e).  Q is replaced by the lower bound ``Σ_r ∫_{−1/2}^{O_r − 3/2} √(k2 + k3·(I_r + x)) dx``
     (midpoint rule: √ is concave), which only lowers R.
   * *KV*: the entries of one iteration hold ``Σ (L_j + β) ≤ M`` KV tokens, so
     **R ≥ Σ_S Σ_j (L_j + β) / M**.  (For one context length the larger of the two bounds is the
     exact optimum of both constraints together; for mixed contexts a joint bound could be higher.)
5. **Memory (Little's law)**: during an entry its request holds ``L_j + β`` KV tokens for at least
   ``c2 + e_j`` seconds (the fastest iteration holding it), so the KV-seconds satisfy
   ``Σ (L_j + β)(c2 + e_j) ≤ M·W·(e − s)``.  Because ``L_j + β ≤ M`` this term never exceeds the
   time bound with the KV iteration count (1 + 3 + 4 with R ≥ ΣL/M); it is reported as a check.
6. **Prefill within the TTFT windows**: the requests meeting TTFT (a superset of S; under the
   percentile criterion it may hold requests S does not) do their prefill, terms 1 and 2, inside
   ``[a_r, a_r + f]``; the same interval accounting over these shorter windows catches bursts.

So ``W ≥ max over intervals of max(1–4, 5, 6)/(e − s)``, rounded up (1e-9 relative slack against
rounding), and at least 1 (under either criterion at least one request meets TTFT).  The intervals
are all ``[m·Δ, m'·Δ]`` on a grid of step Δ (``grid_s``; by default the smallest power of two, in
seconds, that spans the requests' windows in ≤ 1024 cells); a request counts in an interval when
its window lies inside it.  Only starts and ends at the requests' own grid points are evaluated
(any other interval holds the same requests as a shorter one among them), so the table is at most
(distinct starts) × (distinct ends).

Requests that cannot meet an SLO on any fleet are *forced violators*: TTFT when
``c1 + k1·I > f`` (chunks are sequential and each pays c1) or ``I + β > M``; TPOT when the request
alone in every iteration is too slow, ``Σ_j (c2 + e_j) > τ·(O − 1)``, or its last context
``I + O − 2 + β > M``.  If they exceed what the criterion allows, the result is infeasible (no
number of workers meets it; ``workers`` is None) with the reason.

Sacrificed requests.  The criterion allows ``m`` non-forced requests outside S.  The bound uses the
cheapest S: every additive term subtracts the sum of the m largest per-request values over *all*
requests (at least what removing m requests of the interval can save); in the TPOT iteration term,
Q loses the m largest per-request √-sums and N keeps every request (N only grows with more
requests, so this lowers R).  The minimum over S of a sum is at least the sum of the minima, so
the bound holds whichever requests a policy sacrifices.  They contribute no work: a policy may
serve them after the window or never.  Term 6 does the same with the TTFT violators alone (at most
``n − required`` for attainment, ``v`` for the percentile, less the forced ones).

Steady state (`steady_state_bound`)
-----------------------------------
Over a long window T of a stationary stream the same terms divided by T: per second
``λ·E[k1·I·f/(f − c1) + Σ e] + c2·max(λ·E[q]² / ((τ − c2)·E[O − 1]), λ·E[Σ (L + β)]/M)`` and the
memory term ``λ·E[Σ (L + β)(c2 + e)]/M``; the allowed fraction 1 − α is taken from the top of each
per-request term as above.  With ``serve_all=True`` (the default; every real engine eventually
serves every request, which a stable queue requires) the sacrificed requests' prefill-token and
decode-token work and their KV iteration count still count; only their c1 and TPOT-budget parts go.
The expectations are means over a **seeded sample** (``sample_size`` pairs drawn by
`LengthDistribution.sample`, the generator of the simulated streams, capped at
``max_total_tokens``), not an integral over the bins; the result carries the sample's relative
standard error.  Every term is λ times a constant, so the bound is linear in λ and
`max_rate_per_worker` is ``1/(bound per unit rate)``.

Monotone by construction
------------------------
Every per-request term is non-increasing in f and τ (the c1 factor f/(f − c1), the coefficient
c2/(τ − c2), later deadlines that put a request into fewer intervals, a coarser grid when the span
grows, which keeps a subset of the intervals since the steps are powers of two); forced violators
only leave as an SLO loosens, and each one leaving raises the allowance by one and adds at most
its own weight, which the top-m sums absorb.  A smaller α (percentile) only raises the allowance.
Adding requests at α = 1 (or whenever the allowance is unchanged) only adds non-negative terms to
the intervals, as long as the grid step is unchanged (fixed with ``grid_s``).  With α < 1 the true
minimum itself can fall when a cheap request is added (it lets a policy sacrifice an expensive one
instead), so no valid bound can promise monotonicity under additions there.  The steady-state
bound is λ times a constant.

Nothing here forbids moving a request's KV between workers for free, so the bound also holds for
disaggregated or migrating policies.  It is a finite-window statement: requests whose window
reaches past the busiest interval are left out of it, which costs about (mean TTFT + decode span)/
(window length) against the steady state (≈ 10 % on a 300 s stream at the scenario numbers, less
on longer ones).  When a simulation judges only requests after a warm-up, pass only those requests
(leaving requests out keeps the bound valid).

What it does not cover
----------------------
A richer batch-time model (prefill cost quadratic in the chunk, attention to earlier chunks,
per-request prefill terms, a batching-overhead factor) — with such a model the same accounting
holds with its per-token and per-batch parts; prefill KV residency; swapping to host memory
(KV seconds are only counted during a request's own entries, so swapping does not break the bound);
network or routing delays (they only make serving harder); other cost-model kinds.  The bound is a
statement about the cost model; how close the model is to real hardware is its fit error.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np

from planner.costmodels.models import AladdinCostModel
from planner.errors import PlannerError
from planner.workloads.lengths import LengthDistribution

Criterion = Literal["attainment", "percentile"]

#: Relative slack of the feasibility tests, the SLOs (read as x·(1 + 2·_TOL)) and the rounding, each in the
#: bound-lowering direction.
_TOL = 1e-9
#: Cells per side of the default interval grid; the interval tables hold at most 2 × this squared entries.
MAX_GRID_CELLS = 1024

ASSUMPTIONS = (
    "one batch at a time per worker; batch time [prefill](c1 + k1·Σc) + [decode](c2 + k2·n + k3·ΣL); "
    "token j ≥ 2 of a request is one decode entry reading ≥ I + j − 2 context tokens; a worker holds ≤ M KV "
    "tokens; TPOT = (last − first token time)/(O − 1); requests that miss an SLO are not counted "
    "(except in the steady state with serve_all, where their token work still is); recompute, swapping, "
    "network delays and richer batch-time terms are left out (each only adds work)"
)


@dataclass(frozen=True)
class CapacityBound:
    """A policy-independent lower bound on the workers of one configuration.

    The ``*_workers`` terms are work divided by the binding window's length (instance form) or work
    per second (steady state), i.e. in workers.  ``workers_real`` = max(``time_workers`` (terms
    1–4), ``memory_workers`` (5), ``prefill_ttft_workers`` (6)); the decomposition fields describe
    the binding one: prefill + prefill_batches + decode_tokens + iterations − sacrificed_credit
    (iterations: c2·R with R from ``iterations_from``, "tpot" or "kv").  ``workers`` is the bound
    rounded up, or None when ``feasible`` is False (no number of workers meets the criterion;
    ``reason`` says why).  `to_dict` writes non-finite numbers as None (valid JSON).
    """

    feasible: bool
    workers: int | None
    workers_real: float
    time_workers: float
    memory_workers: float
    prefill_workers: float
    prefill_batches_workers: float
    decode_token_workers: float
    iteration_workers: float
    sacrificed_credit_workers: float
    binding: str
    iterations_from: str
    window_s: tuple[float, float] | None
    requests: int
    requests_required: int
    forced_violators: int
    criterion: str
    reason: str
    assumptions: str
    relative_to: str
    prefill_ttft_workers: float | None = None
    per_unit_rate: float | None = None
    sample_size: int | None = None
    relative_std_error: float | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in asdict(self).items()}
        out["window_s"] = list(self.window_s) if self.window_s is not None else None
        return out

    def summary(self) -> str:
        if not self.feasible:
            return f"no number of workers meets the criterion ({self.reason}) {self.relative_to}"
        return (f"≥ {self.workers} workers ({self.workers_real:.2f}, {self.binding} binds; iterations from "
                f"{self.iterations_from}) {self.relative_to}")


def relative_to(cost: AladdinCostModel) -> str:
    """``under cost model <model/GPU/TP> (<provenance>)``."""
    where = f"{cost.model} / {cost.gpu} / TP {cost.tensor_parallel}"
    return f"under cost model {where}" + (f" ({cost.provenance})" if cost.provenance else "")


def kv_tokens_per_worker(kv_capacity_bytes: float, cost: AladdinCostModel) -> float:
    """M = KV capacity bytes / kv_bytes_per_token (e.g. ``WorkerConfig.kv_capacity_bytes(model)``)."""
    return float(kv_capacity_bytes) / cost.kv_bytes_per_token


# ---------------------------------------------------------------------------------------------
# per-request terms


@dataclass(frozen=True)
class _Terms:
    pre: np.ndarray      # k1·I
    pre_c1: np.ndarray   # c1·k1·I/(f − c1)  (the request's share of the fewest prefill batches)
    dec: np.ndarray      # Σ_j (k2 + k3·L_j)
    q: np.ndarray        # lower bound on Σ_j √(k2 + k3·L_j)
    n: np.ndarray        # O − 1
    kv: np.ndarray       # Σ_j (L_j + β)
    kvsec: np.ndarray    # Σ_j (L_j + β)(c2 + k2 + k3·L_j)
    ok_ttft: np.ndarray
    ok_tpot: np.ndarray


def _terms(inp: np.ndarray, out: np.ndarray, cost: AladdinCostModel, m_kv: float, f: float, tau: float) -> _Terms:
    k1, c1 = cost.prefill_s_per_token, cost.prefill_base_s
    k2, k3, c2 = cost.decode_s_per_request, cost.decode_s_per_context_token, cost.decode_base_s
    beta = cost.kv_bytes_base / cost.kv_bytes_per_token
    i = inp.astype(float)
    n = out.astype(float) - 1.0
    lsum = n * i + n * (n - 1.0) / 2.0                       # Σ_{m=0}^{n−1} (I + m)
    l2sum = n * i * i + i * n * (n - 1.0) + (n - 1.0) * n * (2.0 * n - 1.0) / 6.0
    dec = k2 * n + k3 * lsum
    kv = lsum + n * beta
    kvsec = (c2 + k2) * kv + k3 * (l2sum + beta * lsum)
    if k3 > 0:
        u = k2 + k3 * (i + n - 0.5)
        v = k2 + k3 * (i - 0.5)
        su, sv = np.sqrt(u), np.sqrt(v)
        q = (2.0 / 3.0) * n * (u + su * sv + v) / (su + sv)  # ∫ √(k2 + k3(I + x)) dx over [−½, n − ½]
    else:
        q = n * math.sqrt(k2)
    q = np.where(n > 0, q, 0.0)
    if k1 == 0:
        pre_c1 = np.zeros_like(i)
    elif f > c1:
        pre_c1 = c1 * k1 * i / (f - c1)
    else:
        pre_c1 = np.zeros_like(i)  # every request is a forced TTFT violator then
    slack = 1.0 + _TOL
    ok_ttft = (c1 + k1 * i <= f * slack) & (i + beta <= m_kv * slack)
    ok_tpot = (n <= 0) | ((c2 * n + dec <= tau * n * slack) & (i + n - 1.0 + beta <= m_kv * slack))
    return _Terms(k1 * i, pre_c1, dec, q, n, kv, kvsec, ok_ttft, ok_tpot)


def _top(values: np.ndarray, m: int) -> float:
    """Sum of the m largest values (0 for m ≤ 0)."""
    if m <= 0 or values.size == 0:
        return 0.0
    if m >= values.size:
        return float(values.sum())
    return float(np.sort(values)[::-1][:m].sum())


def _allowance(n: int, n_decoding: int, forced_ttft: int, forced_tpot: int, forced_any: int, alpha: float,
               criterion: str) -> tuple[int, int, int, str]:
    """(free sacrifices of S, free TTFT violators, required count, reason if infeasible)."""
    if criterion == "attainment":
        required = min(n, max(0, math.ceil((alpha - _TOL) * n - _TOL)))  # the simulator's "≥ α − 1e-9"
        total = n - required
        if forced_any > total:
            return 0, 0, required, (f"{forced_any} of {n} requests cannot meet the SLOs on any number of workers "
                                 f"({forced_ttft} TTFT, {forced_tpot} TPOT/KV), more than the {total} "
                                 f"attainment {alpha:g} allows")
        return total - forced_any, total - forced_ttft, required, ""
    v_f = n - (math.floor((n - 1) * alpha) + 1) if n else 0
    v_t = n_decoding - (math.floor((n_decoding - 1) * alpha) + 1) if n_decoding else 0
    required = max(0, n - v_f - v_t)
    if forced_ttft > v_f:
        return 0, 0, required, (f"{forced_ttft} of {n} requests cannot meet TTFT on any number of workers, more "
                             f"than the {v_f} the P{100 * alpha:g} TTFT allows")
    if forced_tpot > v_t:
        return 0, 0, required, (f"{forced_tpot} of {n_decoding} multi-token requests cannot meet TPOT (or exceed "
                             f"the KV capacity) on any number of workers, more than the {v_t} the "
                             f"P{100 * alpha:g} TPOT allows")
    return (v_f - forced_ttft) + (v_t - forced_tpot), v_f - forced_ttft, required, ""


def _check_common(cost: Any, m_kv: float, ttft_s: float, tpot_s: float, alpha: float, criterion: str) -> None:
    if not isinstance(cost, AladdinCostModel):
        raise PlannerError(f"capacity bound: cost model must be an Aladdin cost model, got {type(cost).__name__}")
    for name, value in (("kv_tokens_per_worker", m_kv), ("ttft_s", ttft_s), ("tpot_s", tpot_s)):
        if not (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0):
            raise PlannerError(f"capacity bound: {name} must be a positive finite number, got {value!r}")
    if criterion not in ("attainment", "percentile"):
        raise PlannerError(f"capacity bound: criterion must be 'attainment' or 'percentile', got {criterion!r}")
    if not (isinstance(alpha, (int, float)) and math.isfinite(alpha)):
        raise PlannerError(f"capacity bound: alpha must be a number, got {alpha!r}")
    if criterion == "attainment" and not 0 < alpha <= 1:
        raise PlannerError(f"capacity bound: attainment alpha must be in (0, 1], got {alpha!r}")
    if criterion == "percentile" and not 0 < alpha < 1:
        raise PlannerError(f"capacity bound: percentile (as a fraction, 0.99 = P99) must be in (0, 1), got {alpha!r}")


def _infeasible(reason: str, n: int, required: int, forced: int, criterion: str, cost: AladdinCostModel,
                **extra: Any) -> CapacityBound:
    nan = float("nan")
    return CapacityBound(False, None, math.inf, nan, nan, nan, nan, nan, nan, nan, "infeasible", "", None, n,
                         required, forced, criterion, reason, ASSUMPTIONS, relative_to(cost), **extra)


def _criterion_text(criterion: str, alpha: float) -> str:
    return f"attainment {alpha:g}" if criterion == "attainment" else f"P{100 * alpha:g} TTFT and TPOT"


def _widen(slo: float) -> float:
    """An SLO as the fleet simulator applies it (``≤ slo·(1 + 1e-9)``), widened once more for rounding."""
    return float(slo) * (1.0 + 2 * _TOL)


def _round_up(x: float) -> int:
    return max(0, math.ceil(x - _TOL * max(1.0, abs(x))))


# ---------------------------------------------------------------------------------------------
# instance form


def _grid_step(a_min: float, d_max: float) -> float:
    span = max(d_max - a_min, 0.0)
    if span <= 0:
        return 1.0
    return 2.0 ** math.ceil(math.log2(span / (MAX_GRID_CELLS - 2)))


def instance_bound(
    arrival_s: Any,
    input_tokens: Any,
    output_tokens: Any,
    cost: AladdinCostModel,
    kv_tokens_per_worker: float,
    ttft_s: float,
    tpot_s: float,
    *,
    alpha: float = 1.0,
    criterion: Criterion = "attainment",
    grid_s: float | None = None,
) -> CapacityBound:
    """The fewest workers any policy needs for these requests (see the module docstring).

    ``alpha``: the attainment fraction, or for ``criterion="percentile"`` the percentile as a
    fraction (0.99 = P99 of TTFT and of TPOT).  ``grid_s``: the interval grid step (seconds; default
    the smallest power of two giving ≤ 1024 cells).
    """
    _check_common(cost, kv_tokens_per_worker, ttft_s, tpot_s, alpha, criterion)
    try:
        a = np.asarray(arrival_s, dtype=float).ravel()
        inp = np.asarray(input_tokens, dtype=float).ravel()
        out = np.asarray(output_tokens, dtype=float).ravel()
    except (TypeError, ValueError) as exc:
        raise PlannerError(f"capacity bound: requests must be numbers ({exc})") from None
    if not a.size == inp.size == out.size:
        raise PlannerError(f"capacity bound: arrival_s, input_tokens, output_tokens differ in length "
                           f"({a.size}, {inp.size}, {out.size})")
    if a.size == 0:
        raise PlannerError("capacity bound: no requests")
    if not np.isfinite(a).all():
        raise PlannerError("capacity bound: arrival_s must be finite")
    for name, arr in (("input_tokens", inp), ("output_tokens", out)):
        if not (np.isfinite(arr).all() and (arr >= 1).all() and (arr == np.rint(arr)).all()):
            raise PlannerError(f"capacity bound: {name} must be integers ≥ 1")
    if grid_s is not None and not (math.isfinite(grid_s) and grid_s > 0):
        raise PlannerError(f"capacity bound: grid_s must be a positive number, got {grid_s!r}")
    m_kv, f, tau = float(kv_tokens_per_worker), _widen(ttft_s), _widen(tpot_s)
    c2 = cost.decode_base_s
    n_all = a.size
    t = _terms(inp, out, cost, m_kv, f, tau)
    forced = ~(t.ok_ttft & t.ok_tpot)
    free, free_ttft, required, reason = _allowance(n_all, int((out >= 2).sum()), int((~t.ok_ttft).sum()),
                                                   int((~t.ok_tpot).sum()), int(forced.sum()), alpha, criterion)
    crit = _criterion_text(criterion, alpha)
    if reason:
        return _infeasible(reason, n_all, required, int(forced.sum()), crit, cost)
    deadline = a + f + tau * t.n
    step = float(grid_s) if grid_s is not None else _grid_step(float(a.min()), float(deadline.max()))
    base = math.floor(float(a.min()) / step)

    # (1) requests meeting both SLOs, windows [a, a + f + τ(O − 1)]
    keep = ~forced
    w_pre, w_c1, w_dec = t.pre[keep], t.pre_c1[keep], t.dec[keep]
    w_a = w_pre + w_c1 + w_dec
    w_kvit = c2 * t.kv[keep] / m_kv
    w_mem = t.kvsec[keep] / m_kv
    z_a, z_q = _top(w_a, free), _top(t.q[keep], free)
    z_akv, z_mem = _top(w_a + w_kvit, free), _top(w_mem, free)
    tab, length, starts, ends = _interval_tables(
        a[keep], deadline[keep], step, base,
        {"pre": w_pre, "c1": w_c1, "dec": w_dec, "kvit": w_kvit, "q": t.q[keep], "n": t.n[keep], "mem": w_mem})
    s_a = tab["pre"] + tab["c1"] + tab["dec"]
    if tau > c2:
        q_eff = np.maximum(tab["q"] - z_q, 0.0)
        it_cs = c2 * np.where(tab["n"] > 0, q_eff * q_eff / np.where(tab["n"] > 0, tab["n"], 1.0) / (tau - c2), 0.0)
    else:  # then every kept request has e = 0, so Q = 0 (see _terms' TPOT test)
        it_cs = np.zeros_like(s_a)
    time_cs = np.maximum(s_a - z_a + it_cs, 0.0) / length
    time_kv = np.maximum(s_a + tab["kvit"] - z_akv, 0.0) / length
    mem = np.maximum(tab["mem"] - z_mem, 0.0) / length
    best_cs, best_kv, best_mem = (_argmax(x) for x in (time_cs, time_kv, mem))
    use_cs = bool(time_cs[best_cs] >= time_kv[best_kv]) if time_cs.size else True
    best = best_cs if use_cs else best_kv
    time_w = float(max(time_cs[best_cs], time_kv[best_kv], 0.0)) if time_cs.size else 0.0
    mem_w = float(max(mem[best_mem], 0.0)) if mem.size else 0.0

    # (2) requests meeting TTFT, windows [a, a + f]: their prefill (tokens and batches) alone
    kf = t.ok_ttft
    w_p = t.pre[kf] + t.pre_c1[kf]
    tab_f, length_f, starts_f, ends_f = _interval_tables(a[kf], a[kf] + f, step, base,
                                                         {"pre": t.pre[kf], "c1": t.pre_c1[kf]})
    pre_only = np.maximum(tab_f["pre"] + tab_f["c1"] - _top(w_p, free_ttft), 0.0) / length_f
    best_f = _argmax(pre_only)
    pre_w = float(max(pre_only[best_f], 0.0)) if pre_only.size else 0.0

    real = max(time_w, mem_w, pre_w)
    if pre_w > max(time_w, mem_w):
        binding, ln = "prefill within TTFT windows", float(length_f[best_f])
        window = (float((base + starts_f[best_f[0]]) * step), float((base + ends_f[best_f[1]]) * step))
        terms = dict(prefill_workers=_at(tab_f["pre"], best_f) / ln,
                     prefill_batches_workers=_at(tab_f["c1"], best_f) / ln,
                     decode_token_workers=0.0, iteration_workers=0.0,
                     sacrificed_credit_workers=_top(w_p, free_ttft) / ln)
    elif time_cs.size:
        binding, ln = ("time" if time_w >= mem_w else "memory"), float(length[best])
        window = (float((base + starts[best[0]]) * step), float((base + ends[best[1]]) * step))
        terms = dict(prefill_workers=_at(tab["pre"], best) / ln, prefill_batches_workers=_at(tab["c1"], best) / ln,
                     decode_token_workers=_at(tab["dec"], best) / ln,
                     iteration_workers=_at(it_cs if use_cs else tab["kvit"], best) / ln,
                     sacrificed_credit_workers=(z_a if use_cs else z_akv) / ln)
    else:
        binding, window = "one worker", None
        terms = dict(prefill_workers=0.0, prefill_batches_workers=0.0, decode_token_workers=0.0,
                     iteration_workers=0.0, sacrificed_credit_workers=0.0)
    # At least one request meets TTFT under either criterion, so at least one worker.
    return CapacityBound(
        feasible=True, workers=max(1, _round_up(real)), workers_real=real, time_workers=time_w,
        memory_workers=mem_w, **terms, binding=binding,
        iterations_from="tpot" if use_cs else "kv", window_s=window, requests=n_all, requests_required=required,
        forced_violators=int(forced.sum()), criterion=crit,
        reason=(f"busiest interval [{window[0]:g}, {window[1]:g}] s of a {step:g} s grid" if window else
                "no request must meet both SLOs; one must meet TTFT"),
        assumptions=ASSUMPTIONS, relative_to=relative_to(cost), prefill_ttft_workers=pre_w)


def _at(table: np.ndarray, pos: tuple[int, int]) -> float:
    return float(table[pos])


def _argmax(x: np.ndarray) -> tuple[int, int]:
    if x.size == 0:
        return (0, 0)
    return tuple(int(k) for k in np.unravel_index(int(np.argmax(x)), x.shape))  # type: ignore[return-value]


def _interval_tables(a: np.ndarray, d: np.ndarray, step: float, base: int, weights: dict[str, np.ndarray]
                     ) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray, np.ndarray]:
    """Σ of each weight over the requests whose window [a, d] lies in each grid interval.

    Only interval ends at a request's own grid points matter: moving a start up to the next request's
    start (an end down to the previous request's end) keeps the same requests and shortens the
    interval.  Returns the tables (rows: starts, columns: ends), the lengths (∞ for an empty
    interval, so every ratio there is 0), the starts and the ends (grid indices from ``base``).
    """
    u = np.floor(a / step).astype(np.int64) - base
    v = np.ceil(d / step).astype(np.int64) - base
    starts, ends = np.unique(u), np.unique(v)
    if starts.size * ends.size > 2 * MAX_GRID_CELLS ** 2:
        raise PlannerError(f"capacity bound: a {step:g} s grid gives {starts.size} × {ends.size} intervals "
                           f"(at most {2 * MAX_GRID_CELLS ** 2}); use a larger grid_s")
    gs, ge = starts.size, ends.size
    idx = np.searchsorted(starts, u) * ge + np.searchsorted(ends, v)
    tables = {}
    for name, w in weights.items():
        h = np.bincount(idx, weights=w, minlength=gs * ge).reshape(gs, ge)
        tables[name] = np.cumsum(np.cumsum(h[::-1], axis=0)[::-1], axis=1)  # Σ over start ≥ row, end ≤ col
    length = (ends[None, :] - starts[:, None]).astype(float) * step
    invalid = length <= 0
    length[invalid] = math.inf  # an empty interval: every ratio is 0
    return tables, length, starts, ends


# ---------------------------------------------------------------------------------------------
# steady state


@dataclass(frozen=True)
class _Steady:
    per_unit: dict[str, float]
    feasible: bool
    reason: str
    required: int
    forced: int
    n: int
    rse: float
    iterations_from: str


def _steady_per_unit(dist: LengthDistribution, cost: AladdinCostModel, m_kv: float, f: float, tau: float,
                     alpha: float, criterion: str, serve_all: bool, sample_size: int, seed: int,
                     max_total_tokens: int | None) -> _Steady:
    inp, out = dist.sample(sample_size, np.random.default_rng([seed, 23]), max_total_tokens)
    n = inp.size
    c2 = cost.decode_base_s
    t = _terms(inp.astype(float), out.astype(float), cost, m_kv, f, tau)
    forced = ~(t.ok_ttft & t.ok_tpot)
    free, free_ttft, required, reason = _allowance(n, int((out >= 2).sum()), int((~t.ok_ttft).sum()),
                                                   int((~t.ok_tpot).sum()), int(forced.sum()), alpha, criterion)
    if reason:
        return _Steady({}, False, reason, required, int(forced.sum()), n, math.nan, "")
    keep = ~forced
    beta = cost.kv_bytes_base / cost.kv_bytes_per_token
    servable = inp + np.maximum(out - 2, 0) + beta <= m_kv * (1.0 + _TOL)  # fits the KV cache at all
    w_pre, w_c1, w_dec = t.pre[keep], t.pre_c1[keep], t.dec[keep]
    w_kvit = c2 * t.kv[keep] / m_kv
    w_mem = t.kvsec[keep] / m_kv
    if serve_all:  # the sacrificed requests' token work and KV iterations still count; only c1/TPOT credit
        all_tok = float((t.pre + t.dec)[servable].sum())
        all_kvit = float(c2 * t.kv[servable].sum() / m_kv)
        all_mem = float(t.kvsec[servable].sum() / m_kv)
        base_cs = all_tok + float(w_c1.sum()) - _top(w_c1, free)
        time_kv = all_tok + float(w_c1.sum()) - _top(w_c1, free) + all_kvit
        mem = all_mem
        pre, dec = float(t.pre[servable].sum()), float(t.dec[servable].sum())
        credit_cs = credit_kv = _top(w_c1, free)
        kvit = all_kvit
    else:
        w_a = w_pre + w_c1 + w_dec
        base_cs = float(w_a.sum()) - _top(w_a, free)
        time_kv = float((w_a + w_kvit).sum()) - _top(w_a + w_kvit, free)
        mem = float(w_mem.sum()) - _top(w_mem, free)
        pre, dec = float(w_pre.sum()), float(w_dec.sum())
        credit_cs, credit_kv = _top(w_a, free), _top(w_a + w_kvit, free)
        kvit = float(w_kvit.sum())
    q_eff = max(float(t.q[keep].sum()) - _top(t.q[keep], free), 0.0)
    n_tok = float(t.n[keep].sum())
    r_cs = q_eff * q_eff / n_tok / (tau - c2) if (n_tok > 0 and q_eff > 0 and tau > c2) else 0.0
    time_cs = base_cs + c2 * r_cs
    use_cs = time_cs >= time_kv
    kf = t.ok_ttft  # (2) the requests meeting TTFT: their prefill alone
    if serve_all:
        pre_only = float(t.pre[servable].sum()) + float(t.pre_c1[kf].sum()) - _top(t.pre_c1[kf], free_ttft)
    else:
        pre_only = float((t.pre + t.pre_c1)[kf].sum()) - _top((t.pre + t.pre_c1)[kf], free_ttft)
    per = {  # seconds of work per request of the stream, i.e. workers per unit rate (×λ → workers)
        "time": max(time_cs, time_kv) / n, "memory": mem / n, "prefill": pre / n,
        "prefill_batches": float(w_c1.sum()) / n, "decode_tokens": dec / n,
        "iterations": (c2 * r_cs if use_cs else kvit) / n,
        "credit": (credit_cs if use_cs else credit_kv) / n, "prefill_ttft": pre_only / n,
    }
    per_request = t.pre + t.pre_c1 + t.dec + c2 * t.kv / m_kv
    mean = float(per_request.mean())
    rse = float(per_request.std(ddof=1) / math.sqrt(n) / mean) if n > 1 and mean > 0 else 0.0
    return _Steady(per, True, "", required, int(forced.sum()), n, rse, "tpot" if use_cs else "kv")


def steady_state_bound(
    distribution: LengthDistribution,
    rate: float,
    cost: AladdinCostModel,
    kv_tokens_per_worker: float,
    ttft_s: float,
    tpot_s: float,
    *,
    alpha: float = 1.0,
    criterion: Criterion = "attainment",
    serve_all: bool = True,
    sample_size: int = 200_000,
    seed: int = 0,
    max_total_tokens: int | None = None,
) -> CapacityBound:
    """The §7.1 bound λ·E[…] of a stationary stream at ``rate`` req/s (see the module docstring).

    The expectations are means over ``sample_size`` seeded draws of the distribution (capped at
    ``max_total_tokens``, e.g. the model's context); ``relative_std_error`` is their sampling error.
    """
    _check_common(cost, kv_tokens_per_worker, ttft_s, tpot_s, alpha, criterion)
    if not (isinstance(rate, (int, float)) and not isinstance(rate, bool) and math.isfinite(rate) and rate > 0):
        raise PlannerError(f"capacity bound: rate must be a positive finite number, got {rate!r}")
    if not (isinstance(sample_size, int) and sample_size >= 100):
        raise PlannerError(f"capacity bound: sample_size must be an integer ≥ 100, got {sample_size!r}")
    s = _steady_per_unit(distribution, cost, float(kv_tokens_per_worker), _widen(ttft_s), _widen(tpot_s), alpha,
                         criterion, serve_all, sample_size, seed, max_total_tokens)
    crit = _criterion_text(criterion, alpha) + (" (sacrificed requests still served)" if serve_all else "")
    extra = {"sample_size": s.n}
    if not s.feasible:
        return _infeasible(s.reason, s.n, s.required, s.forced, crit, cost, **extra)
    p = s.per_unit
    unit = max(p["time"], p["memory"], p["prefill_ttft"])
    real = rate * unit
    return CapacityBound(
        feasible=True, workers=max(1, _round_up(real)), workers_real=real, time_workers=rate * p["time"],
        memory_workers=rate * p["memory"], prefill_workers=rate * p["prefill"],
        prefill_batches_workers=rate * p["prefill_batches"], decode_token_workers=rate * p["decode_tokens"],
        iteration_workers=rate * p["iterations"], sacrificed_credit_workers=rate * p["credit"],
        binding=("prefill within TTFT windows" if p["prefill_ttft"] > max(p["time"], p["memory"]) else
                 "time" if p["time"] >= p["memory"] else "memory"), iterations_from=s.iterations_from,
        window_s=None, requests=s.n, requests_required=s.required, forced_violators=s.forced, criterion=crit,
        reason=f"steady state at {rate:g} req/s (expectations over {s.n} seeded samples of {distribution.name})",
        assumptions=ASSUMPTIONS, relative_to=relative_to(cost), prefill_ttft_workers=rate * p["prefill_ttft"],
        per_unit_rate=unit, sample_size=s.n,
        relative_std_error=s.rse)


def max_rate_per_worker(
    distribution: LengthDistribution,
    cost: AladdinCostModel,
    kv_tokens_per_worker: float,
    ttft_s: float,
    tpot_s: float,
    *,
    alpha: float = 1.0,
    criterion: Criterion = "attainment",
    serve_all: bool = True,
    sample_size: int = 200_000,
    seed: int = 0,
    max_total_tokens: int | None = None,
) -> float:
    """An upper bound on the rate (req/s) one worker sustains: 1 / (steady-state workers per unit rate).

    0.0 when no number of workers meets the criterion; ``inf`` when the requests need no work.
    """
    b = steady_state_bound(distribution, 1.0, cost, kv_tokens_per_worker, ttft_s, tpot_s, alpha=alpha,
                           criterion=criterion, serve_all=serve_all, sample_size=sample_size, seed=seed,
                           max_total_tokens=max_total_tokens)
    if not b.feasible:
        return 0.0
    return math.inf if not b.per_unit_rate else 1.0 / b.per_unit_rate
