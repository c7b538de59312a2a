"""Cost-model types: Aladdin's linear models and the bilinear 4-coefficient form.

Both are frozen pydantic models stored as YAML under ``models/`` with field
names that carry their units, a one-line ``provenance`` and, when fitted, a
``fit`` summary with held-out error.  Shipped files also carry ``measured_rows`` (the file's own
error against the measured rows of its configuration, and the k-fold cross-validated error of its
form; `planner.costmodels.measured_error`) and ``caveats`` (machine-readable limits, `Caveat`; the
same codes as the batch-time files).  Files without them (older or user-fitted) load unchanged.

Aladdin (docs/formulations.md §1.2), one set per (model, GPU type, TP degree g):

* Eq. 1  KV bytes of a request:  ``kv(n) = a_kv·n + b_kv`` for n context tokens
* Eq. 2  prefill batch time:     ``t_pre = k1·Σ_i I_i + c1``  (independent of batch size)
* Eq. 3  decode iteration time:  ``t_dec = k2·b + k3·Σ_i (I_i + g_i) + c2``

Bilinear (docs/formulations.md §2.3 Eqs. 14–16, §5.2 Eqs. 3–4):

* ``t_p(b, l)   = α_p·b·l + β_p·b + γ_p·l + δ_p``       prefill of b requests of l tokens
* ``τ_d(b, l_a) = α_d·b·l_a + β_d·b + γ_d·l_a + δ_d``   one decode step at context l_a
* ``t_d(b, l_i, l_o) = Σ_{k=1}^{l_o} τ_d(b, l_i + k)``
  ``= l_o·[(α_d·b + γ_d)·l_i + β_d·b + δ_d] + (α_d·b + γ_d)·l_o(l_o+1)/2``
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, NonNegativeFloat, PositiveFloat, PositiveInt

from planner.core.io import NotBool

_TIME_SCALE = {"s": 1.0, "ms": 1e-3}


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class PhaseFit(_Frozen):
    """Fit quality of one phase (prefill, decode or kv)."""

    train_rows: int
    holdout_rows: int
    train_mape: float
    holdout_mape: float | None = None
    holdout_max_ape: float | None = None


class FitSummary(_Frozen):
    """How the coefficients were obtained: least squares, with error on rows not used for fitting."""

    method: str
    source: str
    phases: dict[str, PhaseFit]
    dropped_rows: int = 0
    note: str = ""


#: Caveat codes shared by every cost-model file (batch-time, Aladdin, bilinear, hetero).
CaveatCode = Literal[
    "attention_extrapolated",  # attention measured for one shape only; this shape's terms are scaled from it
    "attention_not_scored",  # the measured rows of this shape hold no attention: the error covers the rest only
    "no_chunked_prefill_rows",  # no measured prefill over cached context
    "above_target",  # an error figure against measured rows is above the 5 % target
    "allreduce_interpolated",  # all-reduce sizes interpolated in the measured network profile
    "cpu_overhead_fitted",  # CPU overhead is a line through measured host rows
    "derived_from_other_gpu",  # coefficients of another GPU scaled by constants (no data for this GPU)
    "derived_from_other_model",  # coefficients of another model scaled by architecture ratios (no profile)
    "no_measured_rows",  # no measured rows of this configuration: no error against measurements is stated
    "published_coefficients",  # coefficients copied from a paper, not fitted here
]


class Caveat(_Frozen):
    """A machine-readable limit of the model: ``code`` (stable identifier) and a one-line ``detail``."""

    code: CaveatCode
    detail: str


class MeasuredPhaseError(_Frozen):
    """Error of one phase against the measured rows (percent).

    ``mape``/``max_ape``: this file's own coefficients on every row of the phase.  ``cv_mape``: the
    k-fold cross-validated MAPE of this file's FORM (least squares of the form on the training folds,
    scored on the held-out fold; folds = those of the batch-time file of the configuration).
    """

    rows: int
    mape: float
    max_ape: float
    cv_mape: float | None = None


class MeasuredRowsError(_Frozen):
    """This file's error against the measured rows of its (model, GPU, TP) configuration.

    ``basis``: ``measured rows`` (rows that hold the whole batch time: end-to-end measurements or
    compositions of measured kernel rows), ``batch-time model`` (the shape's measured rows hold no
    attention: the file is scored against the batch-time model of the configuration — measured
    non-attention fit + extrapolated attention — on its measured inputs × decode contexts 128..4096) or
    ``none`` (no measured rows for this configuration; ``phases`` is empty).
    """

    basis: Literal["measured rows", "batch-time model", "none"]
    rows_source: str | None = None
    scored_terms: str | None = None
    folds: PositiveInt | None = None
    seed: int | None = None
    phases: dict[str, MeasuredPhaseError] = Field(default_factory=dict)
    note: str = ""


class ValidRange(_Frozen):
    """Range of the profiling data the fit saw; outside it the model extrapolates."""

    max_batch_size: PositiveInt | None = None
    max_tokens_per_request: PositiveInt | None = None


class AladdinCostModel(_Frozen):
    """Aladdin's linear performance model for one (model, GPU type, TP degree); times in seconds."""

    kind: Literal["aladdin"] = "aladdin"
    model: str
    gpu: str
    tensor_parallel: PositiveInt
    prefill_s_per_token: NonNegativeFloat = Field(description="k1 (Eq. 2)")
    prefill_base_s: NonNegativeFloat = Field(description="c1 (Eq. 2)")
    decode_s_per_request: NonNegativeFloat = Field(description="k2 (Eq. 3)")
    decode_s_per_context_token: NonNegativeFloat = Field(description="k3 (Eq. 3)")
    decode_base_s: NonNegativeFloat = Field(description="c2 (Eq. 3)")
    kv_bytes_per_token: PositiveFloat = Field(description="a_kv (Eq. 1)")
    kv_bytes_base: NonNegativeFloat = Field(0.0, description="b_kv (Eq. 1)")
    valid_range: ValidRange | None = None
    provenance: str = ""
    fit: FitSummary | None = None
    measured_rows: MeasuredRowsError | None = None
    caveats: list[Caveat] | None = None

    def prefill_time(self, total_input_tokens: float) -> float:
        """Eq. 2: time of one prefill batch holding ``total_input_tokens`` prompt tokens."""
        return self.prefill_s_per_token * total_input_tokens + self.prefill_base_s

    def decode_time(self, batch_size: float, total_context_tokens: float) -> float:
        """Eq. 3: one decode iteration of ``batch_size`` requests with this total context."""
        return (
            self.decode_s_per_request * batch_size
            + self.decode_s_per_context_token * total_context_tokens
            + self.decode_base_s
        )

    def kv_bytes(self, context_tokens: float) -> float:
        """Eq. 1: KV bytes of one request holding ``context_tokens`` tokens."""
        return self.kv_bytes_per_token * context_tokens + self.kv_bytes_base


#: A coefficient: ≥ 0, and YAML ``true``/``false`` is refused rather than read as 1/0.
_Coefficient = Annotated[NonNegativeFloat, NotBool]


class BilinearCoefficients(_Frozen):
    """``α·b·l + β·b + γ·l + δ`` (in the model's ``time_unit``)."""

    alpha: _Coefficient
    beta: _Coefficient
    gamma: _Coefficient
    delta: _Coefficient

    def evaluate(self, batch_size: float, length: float) -> float:
        return self.alpha * batch_size * length + self.beta * batch_size + self.gamma * length + self.delta


class BilinearCostModel(_Frozen):
    """The bilinear latency model of Cheng et al. used by the Huawei papers."""

    kind: Literal["bilinear"] = "bilinear"
    model: str
    gpu: str
    tensor_parallel: PositiveInt
    time_unit: Literal["s", "ms"] = "ms"
    prefill: BilinearCoefficients
    decode: BilinearCoefficients
    valid_range: ValidRange | None = None
    provenance: str = ""
    fit: FitSummary | None = None
    measured_rows: MeasuredRowsError | None = None
    caveats: list[Caveat] | None = None

    @property
    def seconds_per_unit(self) -> float:
        return _TIME_SCALE[self.time_unit]

    def prefill_time_s(self, batch_size: float, input_tokens: float) -> float:
        """Eq. 14 in seconds."""
        return self.prefill.evaluate(batch_size, input_tokens) * self.seconds_per_unit

    def decode_step_time_s(self, batch_size: float, context_tokens: float) -> float:
        """Eq. 15 in seconds: one decode step at accumulated length ``context_tokens``."""
        return self.decode.evaluate(batch_size, context_tokens) * self.seconds_per_unit

    def decode_time_s(self, batch_size: float, input_tokens: float, output_tokens: float) -> float:
        """Eq. 16 in seconds, closed form of ``Σ_{k=1}^{l_o} τ_d(b, l_i + k)``."""
        c = self.decode
        slope = c.alpha * batch_size + c.gamma
        per_step = slope * input_tokens + c.beta * batch_size + c.delta
        total = output_tokens * per_step + slope * output_tokens * (output_tokens + 1) / 2.0
        return total * self.seconds_per_unit


class HeteroCostModel(_Frozen):
    """The p1..p8 static-batching model of the heterogeneous-cluster paper (docs/formulations.md §5.2).

    * Eq. 3  ``T_prefill(b, I) = p1·b·I + p2·b + p3·I + p4``  (b requests padded to the longest input I)
    * Eq. 4  ``T_decode(b, I, O) = Σ_{k=1}^{O} [p5·b·(I+k) + p6·b + p7·(I+k) + p8]``

    Fitted per (GPU type, TP degree) by `planner fit --kind hetero`: the same least-squares fit as the
    bilinear form (p1..p4 = prefill α, β, γ, δ; p5..p8 = decode α, β, γ, δ), stored under the paper's names.
    """

    kind: Literal["hetero"] = "hetero"
    model: str
    gpu: str
    tensor_parallel: PositiveInt
    time_unit: Literal["s", "ms"] = "ms"
    p1: NonNegativeFloat
    p2: NonNegativeFloat
    p3: NonNegativeFloat
    p4: NonNegativeFloat
    p5: NonNegativeFloat
    p6: NonNegativeFloat
    p7: NonNegativeFloat
    p8: NonNegativeFloat
    valid_range: ValidRange | None = None
    provenance: str = ""
    fit: FitSummary | None = None
    measured_rows: MeasuredRowsError | None = None
    caveats: list[Caveat] | None = None

    @property
    def seconds_per_unit(self) -> float:
        return _TIME_SCALE[self.time_unit]

    def as_bilinear(self) -> BilinearCostModel:
        """The same model under the bilinear names (p1..p4 = prefill α, β, γ, δ; p5..p8 = decode α, β, γ, δ).

        Eq. 3 is Eq. 14 and Eq. 4 is Eq. 16 of the SA paper, so the evaluation is shared with
        `BilinearCostModel` instead of being written twice.
        """
        return BilinearCostModel(
            model=self.model, gpu=self.gpu, tensor_parallel=self.tensor_parallel, time_unit=self.time_unit,
            prefill=BilinearCoefficients(alpha=self.p1, beta=self.p2, gamma=self.p3, delta=self.p4),
            decode=BilinearCoefficients(alpha=self.p5, beta=self.p6, gamma=self.p7, delta=self.p8),
            valid_range=self.valid_range, provenance=self.provenance, fit=self.fit,
            measured_rows=self.measured_rows, caveats=self.caveats)

    def prefill_time_s(self, batch_size: float, input_tokens: float) -> float:
        """Eq. 3 in seconds: ``p1·b·I + p2·b + p3·I + p4``."""
        return self.as_bilinear().prefill_time_s(batch_size, input_tokens)

    def decode_time_s(self, batch_size: float, input_tokens: float, output_tokens: float) -> float:
        """Eq. 4 in seconds, closed form: ``(p5·b + p7)·(O·I + O(O+1)/2) + (p6·b + p8)·O``."""
        return self.as_bilinear().decode_time_s(batch_size, input_tokens, output_tokens)


CostModel = Annotated[AladdinCostModel | BilinearCostModel | HeteroCostModel, Field(discriminator="kind")]


def cost_model_caveats(model: object) -> list[str]:
    """The caveats a cost model's file states, as ``"code: detail"`` lines (empty when it states none).

    Works for every file kind with a ``caveats`` list (Aladdin, bilinear, hetero, batch-time); outputs
    built on the model print these beside their numbers.
    """
    return [f"{c.code}: {c.detail}" for c in (getattr(model, "caveats", None) or [])]

