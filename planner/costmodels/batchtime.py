"""One batch-time model per (model, GPU, TP degree), fitted from measured rows, with k-fold held-out error.

Time of one iteration (forward pass) of a batch holding prefill chunks ``(c_i, k_i)`` (c_i new tokens
over k_i already cached ones) and decode requests with contexts ``d_j`` (tokens held, KV read), in
seconds::

    T = o                                               one fixed overhead per iteration
      + [n_p > 0]·(p0 + a_p·max(Σc_i, N0) + q·Σc_i² + r·Σc_i·k_i + s_p·n_p)
                                                        prefill part: token work, quadratic attention,
                                                        chunk × cached context, per prompt
      + [n_d > 0]·(d0 + k2·n_d + k3·Σd_j)               decode part: per request, per KV token read
      + AR(Σc_i + n_d)                                  per-layer all-reduces (measured table)

* ``N0`` (``prefill_floor_tokens``): a pass over fewer tokens costs as much as one over N0 (the weights are
  read once whatever the token count: the roofline's memory-bound floor).  N0 is chosen from the fixed grid
  `FLOOR_CANDIDATES` by training error (inside each cross-validation fold on that fold's training rows);
  0 means no floor.  In a mixed batch the floor applies to the prefill tokens Σc_i.
* ``o = min(p0', d0')`` where p0', d0' are the fitted intercepts of the prefill-only and decode-only
  rows; ``p0 = p0' − o`` and ``d0 = d0' − o`` (one of them is 0).  A batch mixing both phases is the
  sum of the two parts with ONE overhead ``o``.
* ``AR(n)`` is the time of the 2·layers all-reduces of a pass over n tokens (n·hidden fp16 elements
  each), interpolated linearly in a table taken from the measured network profile (kernel-composition
  models only; for end-to-end measurements the all-reduce is inside ``a_p``, ``k2`` and the intercepts,
  and the table is absent).
* Coefficients are fitted per phase by non-negative least squares on relative residuals
  ``Σ((T̂ − T)/T)²`` over measured rows (the known AR part is an offset, not fitted).  A column the data
  cannot identify (no chunked rows → no ``r``; one chunk per prefill row → no ``s_p``) is fixed instead,
  at 0 or at a value the caller gives.  Kernel-composition models of a shape with no measured attention
  are fitted on their measured non-attention rows with ``q = r = k3 = 0``; the attention terms
  extrapolated from the one measured shape are then added (`batchtime_sources`; caveats say so).

Held-out error: k-fold cross-validation, folds of whole groups assigned by a seeded permutation —
scheme ``configuration`` (a group = one measured configuration, its repetitions together; for prefill rows
the prefill configuration (b, c, k), since runs differing only in output length measure the same prefill)
and scheme ``batch_size`` (a group = one number of tokens in the batch: b·c for prefill, b for decode;
extrapolation in size).  A fold whose training rows cannot identify the fitted columns (rank-deficient design) is not
scored and counted in ``unidentifiable_folds``.  The coefficients written are fitted on all rows.
Where the rows hold every term (end-to-end rows; compositions with measured attention), the Aladdin and
bilinear forms are cross-validated on the same configuration folds too (``forms_cv``: fitted directly, and
projected from the batch-time model of each training fold).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, NonNegativeFloat, PositiveFloat, PositiveInt

from planner.costmodels.models import Caveat  # the caveat vocabulary shared by every file kind
from planner.errors import PlannerError

CV_FOLDS = 5
TARGET_MAPE_PCT = 5.0
PREFILL_COEFS = ("prefill_base_s", "prefill_s_per_token", "prefill_s_per_token_sq", "prefill_s_per_token_context",
                 "prefill_s_per_request")
DECODE_COEFS = ("decode_base_s", "decode_s_per_request", "decode_s_per_kv_token")
#: Columns of the measured-row table `fit_batchtime` reads.
ROW_COLUMNS = ("phase", "batch_size", "chunk_tokens", "context_tokens", "time_s", "allreduce_s", "config_id")


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class CrossValidation(_Frozen):
    """k-fold held-out error of one phase under one grouping scheme (percent)."""

    folds: int
    groups: int
    rows: int
    mape: float | None = None
    max_ape: float | None = None
    unidentifiable_folds: int = 0


class FormHeldOut(_Frozen):
    """Held-out MAPE (%) of a simpler form (Aladdin, bilinear) on the same configuration folds: ``direct`` =
    the form fitted to the training rows, ``derived`` = the form projected from the batch-time model fitted
    to the training rows (over the training rows' inputs)."""

    direct: float
    derived: float


class PhaseSummary(_Frozen):
    rows: int
    train_mape: float
    cv: dict[str, CrossValidation]
    forms_cv: dict[str, FormHeldOut] = Field(default_factory=dict)


class BatchTimeFitSummary(_Frozen):
    """How the coefficients were obtained and their error on measured rows."""

    method: str
    source: str
    seed: int
    target_mape_pct: float = TARGET_MAPE_PCT
    phases: dict[str, PhaseSummary]
    scored_terms: str = Field(description="which terms the measured rows hold (what the error covers)")


class AllReduceTable(_Frozen):
    """All-reduce time of one forward pass (2·layers all-reduces) by tokens in the batch; linear in between."""

    tokens: list[PositiveFloat]
    seconds: list[NonNegativeFloat]
    source: str = ""

    def __call__(self, tokens: float | np.ndarray) -> float | np.ndarray:
        return np.interp(tokens, self.tokens, self.seconds)


class Coverage(_Frozen):
    """The measured domain: outside it the model extrapolates."""

    prefill_batch_sizes: list[int]
    decode_batch_sizes: list[int]
    prefill_tokens_per_request: tuple[float, float]
    prefill_context_tokens: tuple[float, float]
    decode_context_tokens: tuple[float, float]


class DerivedFit(_Frozen):
    """Coefficients of another form projected from this model over the measured domain, and their error.

    ``approximation_mape`` is against the measured rows (percent), or — ``error_basis = "batch-time model"``,
    for shapes whose attention is not measured — against the batch-time model itself on a grid of its
    measured inputs × decode contexts 128..4096 (no measured row holds the attention terms there).
    ``current_file_mape`` is the error of the shipped file of that form on the measured rows (None when
    there is none or it cannot be evaluated on them).
    """

    kind: str
    coefficients: dict[str, float]
    error_basis: Literal["measured rows", "batch-time model"] = "measured rows"
    approximation_mape: dict[str, float]
    approximation_max_ape: dict[str, float]
    current_file: str | None = None
    current_file_mape: dict[str, float] | None = None


class BatchTimeModel(_Frozen):
    """Batch time of any mix of prefill chunks and decode requests for one (model, GPU, TP); seconds."""

    kind: Literal["batchtime"] = "batchtime"
    model: str
    gpu: str
    tensor_parallel: PositiveInt
    source_kind: Literal["measured end-to-end", "kernel composition"]
    overhead_s: NonNegativeFloat = Field(description="o: once per iteration")
    prefill_base_s: NonNegativeFloat = Field(0.0, description="p0: extra fixed cost of an iteration with prefill")
    prefill_s_per_token: NonNegativeFloat = Field(description="a_p: per new prompt token")
    prefill_floor_tokens: NonNegativeFloat = Field(0.0, description="N0: token work is a_p·max(Σc_i, N0)")
    prefill_s_per_token_sq: NonNegativeFloat = Field(0.0, description="q: per Σ c_i²")
    prefill_s_per_token_context: NonNegativeFloat = Field(0.0, description="r: per Σ c_i·k_i")
    prefill_s_per_request: NonNegativeFloat = Field(0.0, description="s_p: per prefill chunk in the batch")
    decode_base_s: NonNegativeFloat = Field(0.0, description="d0: extra fixed cost of an iteration with decodes")
    decode_s_per_request: NonNegativeFloat = Field(description="k2: per decode request")
    decode_s_per_kv_token: NonNegativeFloat = Field(description="k3: per KV token read")
    allreduce: AllReduceTable | None = None
    kv_bytes_per_token: PositiveFloat | None = None
    coverage: Coverage | None = None
    caveats: list[Caveat] = Field(default_factory=list)
    derived: dict[str, DerivedFit] = Field(default_factory=dict)
    provenance: str = ""
    fit: BatchTimeFitSummary | None = None

    def _ar(self, tokens: float) -> float:
        return 0.0 if self.allreduce is None or tokens <= 0 else float(self.allreduce(tokens))

    def batch_time(self, prefill_chunks: Sequence[tuple[float, float]] = (),
                   decode_contexts: Sequence[float] = ()) -> float:
        """One iteration: ``prefill_chunks`` = (new tokens c, cached tokens k) each; ``decode_contexts`` = d each."""
        c = np.array([p[0] for p in prefill_chunks], float)
        k = np.array([p[1] for p in prefill_chunks], float)
        d = np.asarray(decode_contexts, float)
        if c.size == 0 and d.size == 0:
            return 0.0
        t = self.overhead_s
        if c.size:
            t += (self.prefill_base_s + self.prefill_s_per_token * max(c.sum(), self.prefill_floor_tokens)
                  + self.prefill_s_per_token_sq * (c * c).sum()
                  + self.prefill_s_per_token_context * (c * k).sum() + self.prefill_s_per_request * c.size)
        if d.size:
            t += self.decode_base_s + self.decode_s_per_request * d.size + self.decode_s_per_kv_token * d.sum()
        return float(t + self._ar(c.sum() + d.size))

    def prefill_time(self, batch_size: float, prompt_tokens: float, context_tokens: float = 0.0) -> float:
        """A prefill iteration of ``batch_size`` equal chunks of ``prompt_tokens`` over ``context_tokens`` cached."""
        return float(self.prefill_time_array(np.array([batch_size]), np.array([prompt_tokens]),
                                             np.array([context_tokens]))[0])

    def prefill_time_array(self, b: np.ndarray, c: np.ndarray, k: np.ndarray) -> np.ndarray:
        b, c, k = (np.asarray(v, float) for v in (b, c, k))
        t = (self.overhead_s + self.prefill_base_s
             + self.prefill_s_per_token * np.maximum(b * c, self.prefill_floor_tokens)
             + self.prefill_s_per_token_sq * b * c * c + self.prefill_s_per_token_context * b * c * k
             + self.prefill_s_per_request * b)
        return t + (0.0 if self.allreduce is None else self.allreduce(b * c))

    def decode_step_time(self, batch_size: float, context_tokens: float) -> float:
        """A decode iteration of ``batch_size`` requests each holding ``context_tokens`` tokens."""
        return float(self.decode_time_array(np.array([batch_size]), np.array([context_tokens]))[0])

    def decode_time_array(self, b: np.ndarray, d: np.ndarray) -> np.ndarray:
        b, d = np.asarray(b, float), np.asarray(d, float)
        t = self.overhead_s + self.decode_base_s + self.decode_s_per_request * b + self.decode_s_per_kv_token * b * d
        return t + (0.0 if self.allreduce is None else self.allreduce(b))

    def predict_rows(self, rows: pd.DataFrame) -> np.ndarray:
        """Times of measured-row-table rows (`ROW_COLUMNS`)."""
        pre = rows.phase.to_numpy() == "prefill"
        b = rows.batch_size.to_numpy(float)
        out = np.empty(len(rows))
        out[pre] = self.prefill_time_array(b[pre], rows.chunk_tokens.to_numpy(float)[pre],
                                           rows.context_tokens.to_numpy(float)[pre])
        out[~pre] = self.decode_time_array(b[~pre], rows.context_tokens.to_numpy(float)[~pre])
        return out


# ---------------------------------------------------------------------------------------------- fitting


#: Candidate floors N0 of the prefill token work (0 = none, then 2^(j/2) tokens from 32 to 16384): a data-independent
#: grid, so that the choice made inside each cross-validation fold sees only that fold's training rows.
FLOOR_CANDIDATES = (0.0, *(float(round(2 ** (j / 2))) for j in range(10, 29)))


def _design(rows: pd.DataFrame, phase: str, floor: float = 0.0) -> np.ndarray:
    b = rows.batch_size.to_numpy(float)
    if phase == "prefill":
        c = rows.chunk_tokens.to_numpy(float)
        k = rows.context_tokens.to_numpy(float)
        return np.column_stack([np.ones_like(b), np.maximum(b * c, floor), b * c * c, b * c * k, b])
    d = rows.context_tokens.to_numpy(float)
    return np.column_stack([np.ones_like(b), b, b * d])


def nonneg_relative_fit(X: np.ndarray, y: np.ndarray, offset: np.ndarray) -> np.ndarray:
    """``argmin_β Σ((Xβ + offset − y)/y)²`` s.t. ``β ≥ 0`` (column-scaled; exact data recovered)."""
    from scipy.optimize import lsq_linear  # noqa: PLC0415

    A = X / y[:, None]
    rhs = (y - offset) / y
    norms = np.linalg.norm(A, axis=0)
    norms[norms == 0] = 1.0
    res = lsq_linear(A / norms, rhs, bounds=(0.0, np.inf), method="bvls", tol=1e-14)
    return res.x / norms


@dataclass(frozen=True)
class PhaseSpec:
    """Which design columns are fitted (True) and the value of the others."""

    free: tuple[bool, ...]
    fixed: tuple[float, ...]


def _fit_phase(X: np.ndarray, y: np.ndarray, offset: np.ndarray, spec: PhaseSpec) -> np.ndarray:
    free = np.array(spec.free)
    fixed = np.array(spec.fixed, float)
    beta = fixed.copy()
    beta[~free] = fixed[~free]
    known = offset + X[:, ~free] @ fixed[~free]
    beta[free] = nonneg_relative_fit(X[:, free], y, known)
    return beta


def _identifiable(X: np.ndarray, y: np.ndarray, spec: PhaseSpec) -> bool:
    A = X[:, np.array(spec.free)] / y[:, None]
    if A.shape[0] < A.shape[1]:
        return False
    A = A / np.where(np.linalg.norm(A, axis=0) == 0, 1.0, np.linalg.norm(A, axis=0))
    return int(np.linalg.matrix_rank(A, tol=1e-9)) == A.shape[1]


def _mape(pred: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    ape = np.abs(pred - y) / y * 100.0
    return float(ape.mean()), float(ape.max())


def fold_of_groups(groups: pd.Series, folds: int, seed: int) -> np.ndarray:
    """Fold number of each row: distinct groups (sorted) permuted by a seeded generator, dealt round-robin."""
    keys = np.array(sorted(set(groups.astype(str))))
    order = np.random.default_rng(seed).permutation(len(keys))
    fold = {keys[i]: n % folds for n, i in enumerate(order)}
    return groups.astype(str).map(fold).to_numpy(int)


def _fit_select(part: pd.DataFrame, phase: str, y: np.ndarray, offset: np.ndarray, spec: PhaseSpec,
                train: np.ndarray, floors: Sequence[float]) -> tuple[np.ndarray, float, np.ndarray] | None:
    """Fit on the ``train`` rows for each candidate floor; keep the smallest training error (ties: lower floor).

    Returns (coefficients, floor, predictions of every row of ``part``), or None when no candidate's
    training design identifies the fitted columns.
    """
    best = None
    for floor in floors if phase == "prefill" else (0.0,):
        X = _design(part, phase, floor)
        if not _identifiable(X[train], y[train], spec):
            continue
        beta = _fit_phase(X[train], y[train], offset[train], spec)
        pred = X @ beta + offset
        sse = float(np.sum(((pred[train] - y[train]) / y[train]) ** 2))
        if best is None or sse < best[0] * (1 - 1e-12):
            best = (sse, beta, floor, pred)
    return None if best is None else best[1:]


def cross_validate(part: pd.DataFrame, phase: str, y: np.ndarray, offset: np.ndarray, spec: PhaseSpec,
                   groups: pd.Series, seed: int, folds: int = CV_FOLDS,
                   floors: Sequence[float] = FLOOR_CANDIDATES) -> CrossValidation:
    """k-fold held-out error with whole groups held out (module docstring); the floor is chosen per fold."""
    n_groups = len(set(groups.astype(str)))
    k = min(folds, n_groups)
    if k < 2:
        return CrossValidation(folds=k, groups=n_groups, rows=0)
    fold = fold_of_groups(groups, k, seed)
    pred = np.full(len(y), np.nan)
    bad = 0
    for f in range(k):
        held = fold == f
        fitted = _fit_select(part, phase, y, offset, spec, ~held, floors)
        if fitted is None:
            bad += 1
            continue
        pred[held] = fitted[2][held]
    scored = ~np.isnan(pred)
    if not scored.any():
        return CrossValidation(folds=k, groups=n_groups, rows=0, unidentifiable_folds=bad)
    mape, worst = _mape(pred[scored], y[scored])
    return CrossValidation(folds=k, groups=n_groups, rows=int(scored.sum()), mape=round(mape, 4),
                           max_ape=round(worst, 4), unidentifiable_folds=bad)


def configuration_groups(rows: pd.DataFrame) -> pd.Series:
    """The ``configuration`` CV scheme: prefill rows by (b, c, k) — runs that differ only in output length
    measured the same prefill —, decode rows by ``config_id`` (repetitions of one run stay together)."""
    pre = rows.phase.to_numpy() == "prefill"
    key = (rows.batch_size.astype(str) + "-" + rows.chunk_tokens.map(lambda v: f"{v:g}") + "-"
           + rows.context_tokens.map(lambda v: f"{v:g}"))
    return pd.Series(np.where(pre, "p-" + key, "d-" + rows.config_id.astype(str)), index=rows.index)


def _form_designs(part: pd.DataFrame, phase: str) -> dict[str, np.ndarray]:
    """Design matrices of the simpler forms: Aladdin Eq. 2 / Eq. 3 and bilinear Eq. 14 / Eq. 15."""
    b = part.batch_size.to_numpy(float)
    one = np.ones_like(b)
    if phase == "prefill":
        c = part.chunk_tokens.to_numpy(float)
        return {"aladdin": np.column_stack([b * c, one]), "bilinear": np.column_stack([b * c, b, c, one])}
    d = part.context_tokens.to_numpy(float)
    return {"aladdin": np.column_stack([b, b * d, one]), "bilinear": np.column_stack([b * d, b, d, one])}


def forms_cross_validation(part: pd.DataFrame, phase: str, y: np.ndarray, offset: np.ndarray, spec: PhaseSpec,
                           groups: pd.Series, seed: int, folds: int = CV_FOLDS,
                           floors: Sequence[float] = FLOOR_CANDIDATES) -> dict[str, FormHeldOut]:
    """Held-out MAPE of the Aladdin and bilinear forms, fitted directly or projected from the batch-time model.

    The folds are those of `cross_validate` (same groups, seed and k); a fold the batch-time model cannot
    identify is left out of both figures.
    """
    n_groups = len(set(groups.astype(str)))
    k = min(folds, n_groups)
    if k < 2:
        return {}
    fold = fold_of_groups(groups, k, seed)
    designs = _form_designs(part, phase)
    pred = {(f, how): np.full(len(y), np.nan) for f in designs for how in ("direct", "derived")}
    for f in range(k):
        held = fold == f
        train = ~held
        fitted = _fit_select(part, phase, y, offset, spec, train, floors)
        if fitted is None:
            continue
        model_times = fitted[2]
        for form, X in designs.items():
            pred[(form, "direct")][held] = X[held] @ nonneg_relative_fit(X[train], y[train], np.zeros(train.sum()))
            proj = nonneg_relative_fit(X[train], model_times[train], np.zeros(train.sum()))
            pred[(form, "derived")][held] = X[held] @ proj
    out = {}
    for form in designs:
        scored = ~np.isnan(pred[(form, "direct")])
        if scored.any():
            out[form] = FormHeldOut(direct=round(_mape(pred[(form, "direct")][scored], y[scored])[0], 4),
                                    derived=round(_mape(pred[(form, "derived")][scored], y[scored])[0], 4))
    return out


def batch_size_groups(rows: pd.DataFrame) -> pd.Series:
    """Tokens in the batch: b·c for prefill rows, b for decode rows (the ``batch_size`` CV scheme)."""
    b = rows.batch_size.to_numpy(float)
    tokens = np.where(rows.phase.to_numpy() == "prefill", b * rows.chunk_tokens.to_numpy(float), b)
    return pd.Series(tokens, index=rows.index).map(lambda v: f"{v:g}")


def check_rows(rows: pd.DataFrame, where: str) -> None:
    """Refuse tables the fit cannot use: missing columns, non-positive times, no rows of a phase."""
    from planner.errors import InputError  # noqa: PLC0415

    for col in ROW_COLUMNS:
        if col not in rows:
            raise InputError(where, col, "required column is missing")
    t = rows.time_s.to_numpy(float)
    bad = ~(np.isfinite(t) & (t > 0))
    if bad.any():
        raise InputError(where, f"row {int(np.flatnonzero(bad)[0]) + 1}, column time_s",
                         f"must be a positive time, got {t[bad][0]!r}")
    for phase in ("prefill", "decode"):
        if not (rows.phase == phase).any():
            raise InputError(where, "phase", f"no {phase} rows: both phases are needed to fit a batch-time model")


def fit_batchtime(
    rows: pd.DataFrame,
    *,
    model: str,
    gpu: str,
    tensor_parallel: int,
    source_kind: str,
    source: str,
    seed: int = 0,
    folds: int = CV_FOLDS,
    fixed_prefill: dict[str, float] | None = None,
    fixed_decode: dict[str, float] | None = None,
    allreduce: AllReduceTable | None = None,
    kv_bytes_per_token: float | None = None,
    caveats: Sequence[Caveat] = (),
    scored_terms: str = "the whole batch time",
    floors: Sequence[float] = FLOOR_CANDIDATES,
    score_forms: bool = False,
) -> BatchTimeModel:
    """Fit `BatchTimeModel` on measured rows (`ROW_COLUMNS`; ``allreduce_s`` is a known offset).

    ``score_forms``: also cross-validate the Aladdin and bilinear forms on the same configuration folds
    (`forms_cross_validation`; for rows that hold every term of the batch time).

    ``fixed_prefill``/``fixed_decode`` map coefficient names (`PREFILL_COEFS`, `DECODE_COEFS`) to values
    that are not fitted.  A prefill column is also fixed at 0 when the rows cannot identify it (every
    context 0 → ``r``; every row at one tokens-per-request value → ``q``; every row one chunk → ``s_p``).
    Raises `PlannerError` when a phase's rows cannot identify its fitted columns (e.g. one batch size).
    """
    check_rows(rows, source)
    rows = rows.reset_index(drop=True)
    fixed_prefill = dict(fixed_prefill or {})
    fixed_decode = dict(fixed_decode or {})
    caveats = list(caveats)
    pre_rows = rows[rows.phase == "prefill"]
    if (pre_rows.context_tokens == 0).all() and "prefill_s_per_token_context" not in fixed_prefill:
        fixed_prefill["prefill_s_per_token_context"] = 0.0
        caveats.append(Caveat(code="no_chunked_prefill_rows",
                              detail="no measured prefill over cached context: the Σc·k term is 0 (not fitted)"))
    if pre_rows.chunk_tokens.nunique() < 2 and "prefill_s_per_token_sq" not in fixed_prefill:
        fixed_prefill["prefill_s_per_token_sq"] = 0.0
    if pre_rows.batch_size.nunique() < 2 and "prefill_s_per_request" not in fixed_prefill:
        fixed_prefill["prefill_s_per_request"] = 0.0  # every prefill row holds one chunk: s_p is the intercept
    betas: dict[str, np.ndarray] = {}
    floor_of: dict[str, float] = {}
    phases: dict[str, PhaseSummary] = {}
    for phase, names, fixed in (("prefill", PREFILL_COEFS, fixed_prefill), ("decode", DECODE_COEFS, fixed_decode)):
        part = rows[rows.phase == phase].reset_index(drop=True)
        y = part.time_s.to_numpy(float)
        offset = part.allreduce_s.to_numpy(float)
        spec = PhaseSpec(tuple(n not in fixed for n in names), tuple(fixed.get(n, 0.0) for n in names))
        fitted = _fit_select(part, phase, y, offset, spec, np.ones(len(part), bool), floors)
        if fitted is None:
            raise PlannerError(f"{source}: the {phase} rows cannot identify the {sum(spec.free)} fitted "
                               f"coefficients ({len(part)} rows, {part.batch_size.nunique()} batch sizes)")
        betas[phase], floor_of[phase], pred = fitted
        train = _mape(pred, y)[0]
        cv = {
            "configuration": cross_validate(part, phase, y, offset, spec, configuration_groups(part), seed, folds,
                                            floors),
            "batch_size": cross_validate(part, phase, y, offset, spec, batch_size_groups(part), seed, folds, floors),
        }
        forms = (forms_cross_validation(part, phase, y, offset, spec, configuration_groups(part), seed, folds, floors)
                 if score_forms else {})
        phases[phase] = PhaseSummary(rows=len(part), train_mape=round(train, 4), cv=cv, forms_cv=forms)
    p, d = betas["prefill"], betas["decode"]
    overhead = min(p[0], d[0])
    worst = {ph: s.cv["configuration"].mape for ph, s in phases.items()}
    above = [f"{ph} {v:.1f} %" for ph, v in worst.items() if v is not None and v > TARGET_MAPE_PCT]
    if above:
        caveats.append(Caveat(code="above_target", detail=f"held-out MAPE (configuration folds) above "
                              f"{TARGET_MAPE_PCT:g} %: {', '.join(above)}"))
    coverage = Coverage(
        prefill_batch_sizes=sorted(int(v) for v in pre_rows.batch_size.unique()),
        decode_batch_sizes=sorted(int(v) for v in rows[rows.phase == "decode"].batch_size.unique()),
        prefill_tokens_per_request=(float(pre_rows.chunk_tokens.min()), float(pre_rows.chunk_tokens.max())),
        prefill_context_tokens=(float(pre_rows.context_tokens.min()), float(pre_rows.context_tokens.max())),
        decode_context_tokens=(float(rows[rows.phase == "decode"].context_tokens.min()),
                               float(rows[rows.phase == "decode"].context_tokens.max())),
    )
    return BatchTimeModel(
        model=model, gpu=gpu, tensor_parallel=tensor_parallel, source_kind=source_kind,  # type: ignore[arg-type]
        overhead_s=float(overhead), prefill_base_s=float(p[0] - overhead), prefill_s_per_token=float(p[1]),
        prefill_floor_tokens=floor_of["prefill"], prefill_s_per_token_sq=float(p[2]),
        prefill_s_per_token_context=float(p[3]), prefill_s_per_request=float(p[4]),
        decode_base_s=float(d[0] - overhead), decode_s_per_request=float(d[1]), decode_s_per_kv_token=float(d[2]),
        allreduce=allreduce, kv_bytes_per_token=kv_bytes_per_token, coverage=coverage, caveats=caveats,
        provenance=f"fitted by `planner fit --kind batchtime` from {source}",
        fit=BatchTimeFitSummary(
            method=f"non-negative least squares on relative residuals, per phase; {folds}-fold cross-validation "
                   f"(groups = configuration / tokens in the batch, seed {seed})",
            source=source, seed=seed, phases=phases, scored_terms=scored_terms),
    )


# ------------------------------------------------------------------------------------------ derivation


def _relative_lstsq(X: np.ndarray, target: np.ndarray) -> np.ndarray:
    return nonneg_relative_fit(X, target, np.zeros_like(target))


#: Decode contexts of the projection grid used when no measured row holds the attention terms.
MODEL_GRID_CONTEXTS = (128.0, 256.0, 512.0, 1024.0, 2048.0, 4096.0)


def model_grid(rows: pd.DataFrame) -> pd.DataFrame:
    """The measured inputs with decode contexts spread over `MODEL_GRID_CONTEXTS` (times filled by the caller)."""
    pre = rows[rows.phase == "prefill"]
    dec_b = sorted(set(rows[rows.phase == "decode"].batch_size))
    dec = pd.DataFrame([(b, d) for b in dec_b for d in MODEL_GRID_CONTEXTS], columns=["batch_size", "context_tokens"])
    dec["phase"], dec["chunk_tokens"] = "decode", 1.0
    grid = pd.concat([pre[["phase", "batch_size", "chunk_tokens", "context_tokens"]], dec], ignore_index=True)
    grid["config_id"] = [f"g{i}" for i in range(len(grid))]
    grid["allreduce_s"] = 0.0
    grid["time_s"] = np.nan
    return grid


def derive_forms(bt: BatchTimeModel, rows: pd.DataFrame, *, layers: int | None = None,
                 current: dict[str, tuple[str, object]] | None = None,
                 against_model: bool = False) -> dict[str, DerivedFit]:
    """Aladdin (Eqs. 2–3), bilinear (Eqs. 14–15) and InferMax (§3.2) coefficients projected from ``bt``.

    Projection: non-negative least squares on relative residuals of the form against ``bt``'s times on
    the measured rows' inputs (the measured domain).  Each result states its error against the measured
    times; ``current`` maps a kind to (file, loaded model) of the shipped file, scored on the same rows.
    ``against_model``: project and score on `model_grid` of the rows against ``bt`` itself (shapes whose
    attention is not measured: their rows hold the non-attention terms only).
    """
    rows = rows.reset_index(drop=True)
    if against_model:
        rows = model_grid(rows)
        rows["time_s"] = bt.predict_rows(rows)
        current = None
    pre = rows[rows.phase == "prefill"].reset_index(drop=True)
    dec = rows[rows.phase == "decode"].reset_index(drop=True)
    tp_pre = bt.predict_rows(pre)
    tp_dec = bt.predict_rows(dec)
    yp, yd = pre.time_s.to_numpy(float), dec.time_s.to_numpy(float)
    bp, cp, kp = (pre[c].to_numpy(float) for c in ("batch_size", "chunk_tokens", "context_tokens"))
    bd, dd = dec.batch_size.to_numpy(float), dec.context_tokens.to_numpy(float)
    out: dict[str, DerivedFit] = {}

    def errors(pred_p: np.ndarray, pred_d: np.ndarray) -> tuple[dict[str, float], dict[str, float]]:
        mp, xp = _mape(pred_p, yp)
        md, xd = _mape(pred_d, yd)
        return {"prefill": round(mp, 4), "decode": round(md, 4)}, {"prefill": round(xp, 4), "decode": round(xd, 4)}

    # Aladdin: t_pre = k1·ΣI + c1 (ΣI = b·c); t_dec = k2·b + k3·Σctx + c2
    Xp = np.column_stack([bp * cp, np.ones_like(bp)])
    Xd = np.column_stack([bd, bd * dd, np.ones_like(bd)])
    ap, ad = _relative_lstsq(Xp, tp_pre), _relative_lstsq(Xd, tp_dec)
    mape, worst = errors(Xp @ ap, Xd @ ad)
    out["aladdin"] = DerivedFit(kind="aladdin", coefficients={
        "prefill_s_per_token": float(ap[0]), "prefill_base_s": float(ap[1]), "decode_s_per_request": float(ad[0]),
        "decode_s_per_context_token": float(ad[1]), "decode_base_s": float(ad[2])},
        approximation_mape=mape, approximation_max_ape=worst)
    # bilinear (ms): α·b·l + β·b + γ·l + δ
    Xp = np.column_stack([bp * cp, bp, cp, np.ones_like(bp)])
    Xd = np.column_stack([bd * dd, bd, dd, np.ones_like(bd)])
    bpc, bdc = _relative_lstsq(Xp, tp_pre * 1e3), _relative_lstsq(Xd, tp_dec * 1e3)
    mape, worst = errors(Xp @ bpc / 1e3, Xd @ bdc / 1e3)
    out["bilinear"] = DerivedFit(kind="bilinear", coefficients={
        **{f"prefill_{n}": float(v) for n, v in zip(("alpha", "beta", "gamma", "delta"), bpc)},
        **{f"decode_{n}": float(v) for n, v in zip(("alpha", "beta", "gamma", "delta"), bdc)}, "time_unit_ms": 1.0},
        approximation_mape=mape, approximation_max_ape=worst)
    if layers:
        # InferMax §3.2, per layer in ms: a_o·N + b_o + a_p·Σc² + b_p + s_p·n_p | a_d·ΣK + b_d + s_d·n_d.
        # Shared terms (a_o, b_o) fitted on both phases at once.
        scale = layers * 1e-3
        zp, zd = np.zeros_like(bp), np.zeros_like(bd)
        X = np.vstack([
            np.column_stack([bp * cp, np.ones_like(bp), bp * cp * cp, np.ones_like(bp), bp, zp, zp, zp]),
            np.column_stack([bd, np.ones_like(bd), zd, zd, zd, bd * dd, np.ones_like(bd), bd]),
        ]) * scale
        target = np.concatenate([tp_pre, tp_dec])
        # b_o is collinear with b_p (b_d) within one phase: fit with b_o = 0, then move the smaller of the
        # two phase constants into b_o (pure batches unchanged; a mixed batch pays one shared constant).
        free = np.array([True, False, True, True, True, True, True, True])
        beta = np.zeros(8)
        beta[free] = _relative_lstsq(X[:, free], target)
        pred = X @ beta
        shared = min(beta[3], beta[6])
        beta[1], beta[3], beta[6] = shared, beta[3] - shared, beta[6] - shared
        mape, worst = errors(pred[: len(bp)], pred[len(bp):])
        out["infermax"] = DerivedFit(kind="infermax", coefficients={
            **dict(zip(("a_o", "b_o", "a_p", "b_p", "s_p", "a_d", "b_d", "s_d"), map(float, beta))),
            "n_layers": float(layers)}, approximation_mape=mape, approximation_max_ape=worst)
    if against_model:
        out = {k: v.model_copy(update={"error_basis": "batch-time model"}) for k, v in out.items()}
    for kind, (path, loaded) in (current or {}).items():
        if kind not in out:
            continue
        cur = _score_current(kind, loaded, pre, dec, yp, yd)
        if cur is not None:
            out[kind] = out[kind].model_copy(update={"current_file": str(path), "current_file_mape": cur})
    return out


def _score_current(kind: str, loaded: object, pre: pd.DataFrame, dec: pd.DataFrame, yp: np.ndarray,
                   yd: np.ndarray) -> dict[str, float] | None:
    bp, cp = pre.batch_size.to_numpy(float), pre.chunk_tokens.to_numpy(float)
    bd, dd = dec.batch_size.to_numpy(float), dec.context_tokens.to_numpy(float)
    if kind == "aladdin":
        pred_p = np.array([loaded.prefill_time(b * c) for b, c in zip(bp, cp)])  # type: ignore[attr-defined]
        pred_d = np.array([loaded.decode_time(b, b * d) for b, d in zip(bd, dd)])  # type: ignore[attr-defined]
    elif kind == "bilinear":
        pred_p = np.array([loaded.prefill_time_s(b, c) for b, c in zip(bp, cp)])  # type: ignore[attr-defined]
        pred_d = np.array([loaded.decode_step_time_s(b, d) for b, d in zip(bd, dd)])  # type: ignore[attr-defined]
    else:
        return None
    if (pre.context_tokens > 0).any():  # chunked rows: these forms have no context term for prefill
        keep = pre.context_tokens.to_numpy(float) == 0
        if not keep.any():
            return None
        pred_p, yp = pred_p[keep], yp[keep]
    return {"prefill": round(_mape(pred_p, yp)[0], 4), "decode": round(_mape(pred_d, yd)[0], 4)}
