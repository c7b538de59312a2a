"""Least-squares fitting of the cost models with held-out error.

Method (the same for every phase and form):

* minimise the sum of squared **relative** residuals ``Σ ((Xβ − y)/y)²`` subject
  to ``β ≥ 0`` (`scipy.optimize.lsq_linear`).  Relative residuals weight the
  small-batch rows, whose absolute times are small, as much as the large ones;
  non-negativity keeps every coefficient physical (a negative k3 would make
  the ATGT constraint reward longer contexts).
* Held-out error: the distinct measured configurations (``config_id``) are
  shuffled with a seeded generator and 25 % of them (at least one) are held
  out.  The coefficients written to the model file are the ones fitted on the
  training rows; ``holdout_mape`` is their mean absolute percentage error on
  the held-out rows, which the fit never saw.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.optimize import lsq_linear

from planner.catalog import find_model
from planner.costmodels.models import (
    AladdinCostModel,
    BilinearCoefficients,
    BilinearCostModel,
    FitSummary,
    PhaseFit,
    ValidRange,
)
from planner.errors import PlannerError

HOLDOUT_FRACTION = 0.25
FIT_METHOD = "non-negative least squares on relative residuals (scipy lsq_linear); 25% of configurations held out"


@dataclass(frozen=True)
class PhaseFitResult:
    coefficients: np.ndarray
    quality: PhaseFit


def holdout_mask(config_ids: pd.Series, seed: int = 0, fraction: float = HOLDOUT_FRACTION) -> np.ndarray:
    """Boolean mask of held-out rows: whole configurations, chosen by a seeded shuffle."""
    configs = np.array(sorted(set(config_ids)))
    if len(configs) < 2:
        return np.zeros(len(config_ids), dtype=bool)
    rng = np.random.default_rng(seed)
    count = max(1, int(round(fraction * len(configs))))
    held = set(rng.permutation(configs)[:count])
    return config_ids.isin(held).to_numpy()


def _mape(pred: np.ndarray, actual: np.ndarray) -> float:
    return float(np.mean(np.abs(pred - actual) / actual) * 100.0)


def fit_relative_nonnegative(X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``argmin_β Σ((Xβ − y)/y)²`` s.t. ``β ≥ 0``."""
    scaled = X / y[:, None]
    # Column scaling keeps the problem well conditioned (features span 1 … 1e5).
    norms = np.linalg.norm(scaled, axis=0)
    norms[norms == 0] = 1.0
    res = lsq_linear(scaled / norms, np.ones_like(y), bounds=(0.0, np.inf), method="bvls", lsmr_tol="auto")
    return res.x / norms


def fit_phase(X: np.ndarray, y: np.ndarray, held: np.ndarray) -> PhaseFitResult:
    train = ~held
    if train.sum() < X.shape[1]:
        raise PlannerError(
            f"only {int(train.sum())} training rows for {X.shape[1]} coefficients; need more profiling rows"
        )
    beta = fit_relative_nonnegative(X[train], y[train])
    pred = X @ beta
    quality = PhaseFit(
        train_rows=int(train.sum()),
        holdout_rows=int(held.sum()),
        train_mape=round(_mape(pred[train], y[train]), 4),
        holdout_mape=round(_mape(pred[held], y[held]), 4) if held.any() else None,
        holdout_max_ape=round(float(np.max(np.abs(pred[held] - y[held]) / y[held]) * 100), 4) if held.any() else None,
    )
    return PhaseFitResult(beta, quality)


def _aladdin_design(rows: pd.DataFrame, phase: str) -> tuple[np.ndarray, np.ndarray]:
    b = rows.batch_size.to_numpy(float)
    tokens = b * rows.tokens_per_request.to_numpy(float)
    one = np.ones_like(b)
    if phase == "prefill":  # t = k1·ΣI + c1
        return np.column_stack([tokens, one]), rows.time_s.to_numpy(float)
    # t = k2·b + k3·Σ context + c2
    return np.column_stack([b, tokens, one]), rows.time_s.to_numpy(float)


def _bilinear_design(rows: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    b = rows.batch_size.to_numpy(float)
    length = rows.tokens_per_request.to_numpy(float)
    return np.column_stack([b * length, b, length, np.ones_like(b)]), rows.time_s.to_numpy(float)


def _split_phases(profile: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    prefill = profile[profile.phase == "prefill"].reset_index(drop=True)
    decode = profile[profile.phase == "decode"].reset_index(drop=True)
    if prefill.empty or decode.empty:
        raise PlannerError("profile needs both prefill and decode rows to fit a cost model")
    return prefill, decode


def _valid_range(profile: pd.DataFrame) -> ValidRange:
    return ValidRange(
        max_batch_size=int(profile.batch_size.max()),
        max_tokens_per_request=int(np.ceil(profile.tokens_per_request.max())),
    )


def _single_group(profile: pd.DataFrame) -> tuple[str, str, int]:
    groups = profile.groupby(["model", "gpu", "tensor_parallel"]).size()
    if len(groups) != 1:
        raise PlannerError(f"fit one (model, gpu, tensor_parallel) group at a time, got {len(groups)}")
    model_name, gpu_name, tp = groups.index[0]
    return str(model_name), str(gpu_name), int(tp)


def _summary(source: str, pre: PhaseFitResult, dec: PhaseFitResult, dropped_rows: int, note: str = "") -> FitSummary:
    return FitSummary(
        method=FIT_METHOD,
        source=source,
        phases={"prefill": pre.quality, "decode": dec.quality},
        dropped_rows=dropped_rows,
        note=note,
    )


def fit_aladdin(
    profile: pd.DataFrame,
    *,
    source: str,
    seed: int = 0,
    kv_bytes_per_token: float | None = None,
    dropped_rows: int = 0,
) -> AladdinCostModel:
    """Fit Eqs. 2–3 for the single (model, gpu, tp) group in ``profile``.

    Eq. 1 (KV) is not fitted from timing profiles: ``a_kv`` is the exact
    bytes per token of the architecture (2·layers·kv_heads·head_dim·bytes)
    and ``b_kv = 0``; ../shared/data holds no KV-usage measurements.
    """
    model_name, gpu_name, tp = _single_group(profile)
    prefill, decode = _split_phases(profile)
    pre = fit_phase(*_aladdin_design(prefill, "prefill"), holdout_mask(prefill.config_id, seed))
    dec = fit_phase(*_aladdin_design(decode, "decode"), holdout_mask(decode.config_id, seed))
    note = ""
    if kv_bytes_per_token is None:
        spec = find_model(str(model_name))
        if spec is None:
            raise PlannerError(
                f"model {model_name!r} is not in the catalog; pass its KV bytes per token to fit the KV model"
            )
        kv_bytes_per_token = spec.kv_bytes_per_token
        note = f"KV model from architecture: a_kv = 2·layers·kv_heads·head_dim·2 B = {kv_bytes_per_token:.0f} B/token, b_kv = 0"
    return AladdinCostModel(
        model=model_name,
        gpu=gpu_name,
        tensor_parallel=tp,
        prefill_s_per_token=float(pre.coefficients[0]),
        prefill_base_s=float(pre.coefficients[1]),
        decode_s_per_request=float(dec.coefficients[0]),
        decode_s_per_context_token=float(dec.coefficients[1]),
        decode_base_s=float(dec.coefficients[2]),
        kv_bytes_per_token=float(kv_bytes_per_token),
        kv_bytes_base=0.0,
        valid_range=_valid_range(profile),
        provenance=f"fitted by `planner fit` from {source}",
        fit=_summary(source, pre, dec, dropped_rows, note),
    )


def fit_bilinear(
    profile: pd.DataFrame, *, source: str, seed: int = 0, time_unit: str = "ms", dropped_rows: int = 0
) -> BilinearCostModel:
    """Fit Eqs. 14–15 (prefill per batch, decode per step) for one (model, gpu, tp) group."""
    model_name, gpu_name, tp = _single_group(profile)
    prefill, decode = _split_phases(profile)
    scale = 1000.0 if time_unit == "ms" else 1.0
    X, y = _bilinear_design(prefill)
    pre = fit_phase(X, y * scale, holdout_mask(prefill.config_id, seed))
    X, y = _bilinear_design(decode)
    dec = fit_phase(X, y * scale, holdout_mask(decode.config_id, seed))
    return BilinearCostModel(
        model=model_name,
        gpu=gpu_name,
        tensor_parallel=tp,
        time_unit=time_unit,  # type: ignore[arg-type]
        prefill=BilinearCoefficients(**dict(zip(("alpha", "beta", "gamma", "delta"), map(float, pre.coefficients)))),
        decode=BilinearCoefficients(**dict(zip(("alpha", "beta", "gamma", "delta"), map(float, dec.coefficients)))),
        valid_range=_valid_range(profile),
        provenance=f"fitted by `planner fit` from {source}",
        fit=_summary(source, pre, dec, dropped_rows),
    )


def fit_hetero(
    profile: pd.DataFrame, *, source: str, seed: int = 0, time_unit: str = "ms", dropped_rows: int = 0
):
    """Fit the p1..p8 model (docs/formulations.md §5.2 Eqs. 3–4) for one (model, gpu, tp) group.

    Eq. 3 is the bilinear prefill form and Eq. 4 the sum of bilinear decode steps, so the least-squares
    problem is exactly `fit_bilinear`'s; the coefficients are stored under the paper's names p1..p8.
    """
    from planner.costmodels.models import HeteroCostModel

    bil = fit_bilinear(profile, source=source, seed=seed, time_unit=time_unit, dropped_rows=dropped_rows)
    pre, dec = bil.prefill, bil.decode
    return HeteroCostModel(
        model=bil.model, gpu=bil.gpu, tensor_parallel=bil.tensor_parallel, time_unit=bil.time_unit,
        p1=pre.alpha, p2=pre.beta, p3=pre.gamma, p4=pre.delta,
        p5=dec.alpha, p6=dec.beta, p7=dec.gamma, p8=dec.delta,
        valid_range=bil.valid_range, provenance=bil.provenance, fit=bil.fit,
    )


def fit_groups(
    profile: pd.DataFrame, kind: str, *, source: str, seed: int = 0, dropped_rows: int = 0
) -> tuple[list[AladdinCostModel | BilinearCostModel], list[str]]:
    """Fit one model per (model, gpu, tensor_parallel) group: (fitted models, reasons for skipped groups)."""
    if kind not in ("aladdin", "bilinear", "hetero"):
        raise PlannerError(f"unknown cost-model kind {kind!r} (expected aladdin, bilinear or hetero)")
    fitted: list[AladdinCostModel | BilinearCostModel] = []
    skipped: list[str] = []
    for (model_name, gpu_name, tp), rows in profile.groupby(["model", "gpu", "tensor_parallel"], sort=True):
        group_source = f"{source} [model={model_name}, gpu={gpu_name}, tp={tp}]"
        try:
            if kind == "aladdin":
                fitted.append(fit_aladdin(rows, source=group_source, seed=seed, dropped_rows=dropped_rows))
            elif kind == "hetero":
                fitted.append(fit_hetero(rows, source=group_source, seed=seed, dropped_rows=dropped_rows))
            else:
                fitted.append(fit_bilinear(rows, source=group_source, seed=seed, dropped_rows=dropped_rows))
        except PlannerError as exc:
            skipped.append(f"{kind} {model_name} on {gpu_name} tp{tp}: skipped ({exc})")
    return fitted, skipped
