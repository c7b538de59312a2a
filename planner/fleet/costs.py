"""The batch-time model of a fleet worker: one linear form both cost-model families map onto.

In seconds, for a batch whose prefill part holds chunks c_r (n_p of them) and whose decode part holds
n_d requests reading KV k_r each::

    t = base + tok·(Σ c_r + n_d)
        + [n_p > 0]·(pb + pt·Σ c_r + pq·Σ c_r² + pn·n_p)
        + [n_d > 0]·(db + dn·n_d + dk·Σ k_r)

An empty batch never runs.  The two sources:

* `LinearBatchCost.from_infermax` (docs/formulations.md §3.2, `planner.batching.costmodel`):
  base = b_o, tok = a_o, pb = b_p, pt = 0, pq = a_p, pn = s_p, db = b_d, dn = s_d, dk = a_d, each
  × the model's ``scale`` (n_layers · 1e-3: per-layer ms → s).  `InferMaxCostModel.batch_seconds`
  is the same sum in another order (equal to rounding).
* `LinearBatchCost.from_aladdin` (docs/formulations.md §1.2, Eqs. 2–3): pb = c1 (prefill_base_s),
  pt = k1, db = c2, dn = k2, dk = k3, the rest 0.  A pure prefill batch takes Eq. 2
  (k1·Σc + c1), a pure decode batch Eq. 3 (k2·b + k3·Σ context + c2), and a hybrid batch (chunked
  prefill) pays both parts: Aladdin's model has no hybrid batches, and this is the reading that
  never makes a hybrid batch cheaper than its two halves run apart minus one bias.
* `BatchTimeCost.from_batchtime` (`planner.costmodels.batchtime.BatchTimeModel`, one batch-time model per
  (model, GPU, TP)): base = o, pb = p0, pt = a_p, pq = q, pn = s_p, db = d0, dn = k2, dk = k3, tok = 0, plus
  three terms the linear form lacks — the prefill token floor N0 (``pt·max(Σc_r, N0)``), the chunk ×
  cached-context term ``pk·Σ c_r·k_r`` (k_r = KV tokens the request held before the chunk) and the
  all-reduce table ``AR(Σc_r + n_d)`` (linear between its points, constant beyond its ends, as
  ``np.interp``).  With N0 = 0, pk = 0 and no table these add exactly 0.0, so a `LinearBatchCost` pays
  its linear form bit for bit.

The kernel evaluates the batch time in one compiled function, `planner.fleet._kernel.batch_seconds`, on
the row `cost_matrix` builds (`kernel_batch_seconds` calls it from Python).  The ``aladdin`` router reads
only the linear coefficients (base, tok, pt, pb, db, dn, dk): under a batch-time model its load
estimates leave out the floor, the Σc², Σc·k, per-prompt and all-reduce terms.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

COEFFICIENTS = ("base", "tok", "pb", "pt", "pq", "pn", "db", "dn", "dk")
#: Columns of a kernel cost row after `COEFFICIENTS`: floor N0, pk, number of all-reduce points n, then the
#: n table tokens and the n table seconds (`planner.fleet._kernel` K_FLOOR, K_PK, K_NAR, K_AR).
EXTRA_COLUMNS = ("floor", "pk", "n_allreduce")


@dataclass(frozen=True)
class LinearBatchCost:
    """Coefficients (seconds) of the module docstring's batch time; ``source`` names where they come from."""

    base: float = 0.0
    tok: float = 0.0
    pb: float = 0.0
    pt: float = 0.0
    pq: float = 0.0
    pn: float = 0.0
    db: float = 0.0
    dn: float = 0.0
    dk: float = 0.0
    source: str = "custom"

    def __post_init__(self) -> None:
        from planner.errors import PlannerError

        for f in fields(self)[:-1]:
            value = getattr(self, f.name)
            if not (isinstance(value, (int, float)) and np.isfinite(value) and value >= 0):
                raise PlannerError(f"batch-time coefficient {f.name} must be a finite number ≥ 0, got {value!r}")
        if not any(getattr(self, name) > 0 for name in COEFFICIENTS):
            raise PlannerError("every batch-time coefficient is 0, so every batch would take 0 s")

    @classmethod
    def from_infermax(cls, model, source: str | None = None) -> "LinearBatchCost":
        """From an `InferMaxCostModel` (per-layer ms coefficients × ``scale``)."""
        s = model.scale
        return cls(base=model.b_o * s, tok=model.a_o * s, pb=model.b_p * s, pt=0.0, pq=model.a_p * s,
                   pn=model.s_p * s, db=model.b_d * s, dn=model.s_d * s, dk=model.a_d * s,
                   source=source or f"InferMax cost model {model.name!r}")

    @classmethod
    def from_aladdin(cls, model, source: str | None = None) -> "LinearBatchCost":
        """From an `AladdinCostModel` (Eqs. 2–3, seconds)."""
        return cls(pb=model.prefill_base_s, pt=model.prefill_s_per_token, db=model.decode_base_s,
                   dn=model.decode_s_per_request, dk=model.decode_s_per_context_token,
                   source=source or f"Aladdin cost model {model.model} on {model.gpu} TP{model.tensor_parallel}")

    def batch_seconds(self, prefill_tokens: float, prefill_sq: float, n_prefill: int, decode_kv: float,
                      n_decode: int) -> float:
        """Seconds of one batch: Σc and Σc² of its prefill chunks, their count, the decodes' KV read and count."""
        if n_prefill == 0 and n_decode == 0:
            return 0.0
        t = self.base + self.tok * (prefill_tokens + n_decode)
        if n_prefill > 0:
            t += self.pb + self.pt * prefill_tokens + self.pq * prefill_sq + self.pn * n_prefill
        if n_decode > 0:
            t += self.db + self.dn * n_decode + self.dk * decode_kv
        return t

    def as_array(self) -> np.ndarray:
        """The kernel's cost row: `COEFFICIENTS`, then `EXTRA_COLUMNS` (all 0: no floor, no Σc·k, no table)."""
        return np.concatenate([np.array([getattr(self, n) for n in COEFFICIENTS], dtype=float), np.zeros(3)])


@dataclass(frozen=True)
class BatchTimeCost(LinearBatchCost):
    """A `LinearBatchCost` plus the batch-time model's floor ``floor`` (N0, tokens), chunk × cached-context
    coefficient ``pk`` (s per Σ c_r·k_r) and all-reduce table (``allreduce_tokens`` → ``allreduce_seconds``)."""

    floor: float = 0.0
    pk: float = 0.0
    allreduce_tokens: tuple[float, ...] = ()
    allreduce_seconds: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        from planner.errors import PlannerError

        for name in (*COEFFICIENTS, "floor", "pk"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and np.isfinite(value) and value >= 0):
                raise PlannerError(f"batch-time coefficient {name} must be a finite number ≥ 0, got {value!r}")
        xs, ys = np.asarray(self.allreduce_tokens, float), np.asarray(self.allreduce_seconds, float)
        if xs.shape != ys.shape or xs.ndim != 1:
            raise PlannerError(f"all-reduce table: {xs.size} token points but {ys.size} times")
        if xs.size and not (np.all(np.isfinite(xs)) and np.all(np.isfinite(ys)) and np.all(ys >= 0)
                            and np.all(np.diff(xs) > 0)):
            raise PlannerError("all-reduce table: tokens must increase strictly and times be finite and ≥ 0")
        if not (any(getattr(self, name) > 0 for name in COEFFICIENTS) or (ys.size and ys.max() > 0)):
            raise PlannerError("every batch-time coefficient is 0, so every batch would take 0 s")

    @classmethod
    def from_batchtime(cls, model, source: str | None = None) -> "BatchTimeCost":
        """From a `BatchTimeModel` (module docstring)."""
        ar = model.allreduce
        return cls(base=model.overhead_s, tok=0.0, pb=model.prefill_base_s, pt=model.prefill_s_per_token,
                   pq=model.prefill_s_per_token_sq, pn=model.prefill_s_per_request, db=model.decode_base_s,
                   dn=model.decode_s_per_request, dk=model.decode_s_per_kv_token, floor=model.prefill_floor_tokens,
                   pk=model.prefill_s_per_token_context,
                   allreduce_tokens=tuple(ar.tokens) if ar is not None else (),
                   allreduce_seconds=tuple(ar.seconds) if ar is not None else (),
                   source=source or f"batch-time model {model.model} on {model.gpu} TP{model.tensor_parallel}")

    def batch_seconds(self, prefill_tokens: float, prefill_sq: float, n_prefill: int, decode_kv: float,
                      n_decode: int, prefill_context: float = 0.0) -> float:
        """Seconds of one batch; ``prefill_context`` = Σ c_r·k_r of its prefill chunks (the others as in
        `LinearBatchCost.batch_seconds`)."""
        if n_prefill == 0 and n_decode == 0:
            return 0.0
        t = self.base + self.tok * (prefill_tokens + n_decode)
        if n_prefill > 0:
            t += (self.pb + self.pt * max(prefill_tokens, self.floor) + self.pq * prefill_sq + self.pn * n_prefill
                  + self.pk * prefill_context)
        if n_decode > 0:
            t += self.db + self.dn * n_decode + self.dk * decode_kv
        if self.allreduce_tokens:
            t += float(np.interp(prefill_tokens + n_decode, self.allreduce_tokens, self.allreduce_seconds))
        return t

    def as_array(self) -> np.ndarray:
        row = super().as_array()
        n = len(self.allreduce_tokens)
        row[-3:] = (self.floor, self.pk, n)
        table = (np.asarray(self.allreduce_tokens, float), np.asarray(self.allreduce_seconds, float))
        return np.concatenate([row, *table])


def cost_matrix(costs) -> np.ndarray:
    """The kernel's K: one `as_array` row per worker, zero-padded to the longest (all-reduce tables differ)."""
    rows = [c.as_array() for c in costs]
    K = np.zeros((len(rows), max(r.size for r in rows)))
    for w, r in enumerate(rows):
        K[w, : r.size] = r
    return K


def kernel_batch_seconds(cost: LinearBatchCost, prefill_chunks=(), decode_contexts=()) -> float:
    """One batch's seconds computed by the fleet kernel's own function (`planner.fleet._kernel.batch_seconds`):
    ``prefill_chunks`` = (new tokens c, KV tokens held before the chunk k) each, ``decode_contexts`` = KV
    tokens each decode request holds (whole numbers, as in the kernel)."""
    from planner.fleet._kernel import batch_seconds  # lazy: numba

    c = np.array([p[0] for p in prefill_chunks], dtype=np.int64)
    k = np.array([p[1] for p in prefill_chunks], dtype=np.int64)
    d = np.asarray(decode_contexts, dtype=np.int64)
    p_sq = p_ck = 0.0
    for cq, kq in zip(c.tolist(), k.tolist()):  # the kernel's order of summation
        p_sq += float(cq) * float(cq)
        p_ck += float(cq) * float(kq)
    return float(batch_seconds(cost_matrix([cost]), 0, int(c.sum()), p_sq, p_ck, int(c.size), int(d.size),
                               int(d.sum())))
