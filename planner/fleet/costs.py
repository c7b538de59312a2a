"""The batch-time model of a fleet worker: one linear form both cost-model families map onto.

In seconds, for a batch whose prefill part holds chunks c_r (n_p of them) and whose decode part holds
n_d requests reading KV k_r each::

    t = base + tok·(Σ c_r + n_d)
        + [n_p > 0]·(pb + pt·Σ c_r + pq·Σ c_r² + pn·n_p)
        + [n_d > 0]·(db + dn·n_d + dk·Σ k_r)

An empty batch never runs.  The two sources:

* `LinearBatchCost.from_infermax` (FORMULATIONS.md §3.2, `planner.batching.costmodel`):
  base = b_o, tok = a_o, pb = b_p, pt = 0, pq = a_p, pn = s_p, db = b_d, dn = s_d, dk = a_d, each
  × the model's ``scale`` (n_layers · 1e-3: per-layer ms → s).  `InferMaxCostModel.batch_seconds`
  is the same sum in another order (equal to rounding).
* `LinearBatchCost.from_aladdin` (FORMULATIONS.md §1.2, Eqs. 2–3): pb = c1 (prefill_base_s),
  pt = k1, db = c2, dn = k2, dk = k3, the rest 0.  A pure prefill batch takes Eq. 2
  (k1·Σc + c1), a pure decode batch Eq. 3 (k2·b + k3·Σ context + c2), and a hybrid batch (chunked
  prefill) pays both parts: Aladdin's model has no hybrid batches, and this is the reading that
  never makes a hybrid batch cheaper than its two halves run apart minus one bias.
"""

from __future__ import annotations

from dataclasses import astuple, dataclass, fields

import numpy as np

COEFFICIENTS = ("base", "tok", "pb", "pt", "pq", "pn", "db", "dn", "dk")


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
        """The coefficients in `COEFFICIENTS` order (the kernel's layout)."""
        return np.array(astuple(self)[:-1], dtype=float)
