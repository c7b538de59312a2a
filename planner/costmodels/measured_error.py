"""Each Aladdin / bilinear / hetero file's error against the measured rows of its configuration, and its caveats.

Rows: the measured-row tables of `batchtime_sources` — Splitwise end-to-end rows where Splitwise measures
the (model, GPU, TP) configuration, else the Vidur composition of measured kernel rows (the rows the
batch-time file of the configuration is fitted on; the same precedence as `models/fit_models.sh`).

For a file of form F (Aladdin Eqs. 2–3; bilinear Eqs. 14–15; hetero = bilinear under p1..p8; InferMax §3.2,
``planner.batching.costmodel.InferMaxCostModel``: a prefill row is b chunks of c tokens, N = b·c, Σc² = b·c²,
n_p = b; a decode row N = n_d = b, Σ KV = b·d):

* ``mape`` / ``max_ape`` per phase: the file's OWN coefficients on every measured row of the phase —
  prefill rows ``t̂ = F_pre(b, c)`` (b prompts of c new tokens; Aladdin: Σ I = b·c; the forms have no
  cached-context term, so a chunk over cached tokens is predicted as a prompt of c tokens), decode rows
  ``t̂ = F_dec(b, d)`` (b requests holding d tokens each; Aladdin: Σ context = b·d).  Splitwise files were
  fitted on 75 % of these same rows, so for them this is mostly in-sample.
* ``cv_mape``: k-fold cross-validation of the FORM — its non-negative relative least-squares fit on the
  training folds, scored on the held-out fold — with the folds of the batch-time file (`batchtime.
  configuration_groups`, `batchtime.fold_of_groups`, same seed and k), so it is the ``forms_cv.direct``
  figure of that file when every fold is scored.  The InferMax form is refitted per phase (prefill columns
  N, 1, Σc², n_p; decode n_d, 1, Σ KV), so a_o and b_o are not shared between the phases there.
* Shapes whose measured rows hold no attention (``attention_not_scored``): the rows cannot score a
  whole batch time, so the file is scored against the configuration's batch-time model (measured
  non-attention fit + extrapolated attention) on `batchtime.model_grid` of its measured inputs; basis
  ``batch-time model``, no ``cv_mape``.
* No rows for the configuration (V100, Llama-2-13B, published sets): basis ``none``; the files written
  by a derivation script get their caveats there (`models/derive_llama2_13b.py`,
  `models/hetero/derive_v100.py`), others get ``no_measured_rows``.

Caveats written: those of the rows (`GroupRows.caveats`: attention extrapolated / not scored, all-reduce
interpolated, CPU overhead fitted) and ``above_target`` when this file's own MAPE or its form's CV MAPE
exceeds `batchtime.TARGET_MAPE_PCT`.  Coefficients are never changed.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from planner.costmodels.batchtime import (
    CV_FOLDS,
    TARGET_MAPE_PCT,
    BatchTimeModel,
    configuration_groups,
    fold_of_groups,
    model_grid,
    nonneg_relative_fit,
)
from planner.costmodels.batchtime_sources import GroupRows
from planner.costmodels.models import (
    AladdinCostModel,
    BilinearCostModel,
    Caveat,
    HeteroCostModel,
    MeasuredPhaseError,
    MeasuredRowsError,
)

AnyForm = AladdinCostModel | BilinearCostModel | HeteroCostModel  # or an InferMaxCostModel (kind "infermax")


def _configuration(model: AnyForm) -> str:
    """``<model> on <GPU> TP <g>`` (InferMax files name no configuration: their ``name``)."""
    if hasattr(model, "tensor_parallel"):
        return f"{model.model} on {model.gpu} TP {model.tensor_parallel}"
    return repr(getattr(model, "name", "?"))


def form_of(model: AnyForm) -> str:
    """``aladdin``, ``infermax`` or ``bilinear`` (hetero files are the bilinear form under the names p1..p8)."""
    if isinstance(model, AladdinCostModel):
        return "aladdin"
    return "infermax" if getattr(model, "kind", "") == "infermax" else "bilinear"


def predict(model: AnyForm, rows: pd.DataFrame) -> np.ndarray:
    """Seconds this file predicts for each measured row (module docstring)."""
    pre = rows.phase.to_numpy() == "prefill"
    b = rows.batch_size.to_numpy(float)
    c = rows.chunk_tokens.to_numpy(float)
    d = rows.context_tokens.to_numpy(float)
    if isinstance(model, AladdinCostModel):
        tp = model.prefill_s_per_token * b * c + model.prefill_base_s
        td = model.decode_s_per_request * b + model.decode_s_per_context_token * b * d + model.decode_base_s
    elif form_of(model) == "infermax":
        zero = np.zeros_like(b)
        tp = model.batch_seconds_array(b * c, b * c * c, b, zero, zero)
        td = model.batch_seconds_array(b, zero, zero, b * d, b)
    else:
        bl = model.as_bilinear() if isinstance(model, HeteroCostModel) else model
        tp = bl.prefill.evaluate(b, c) * bl.seconds_per_unit
        td = bl.decode.evaluate(b, d) * bl.seconds_per_unit
    return np.where(pre, tp, td)


def _design(form: str, part: pd.DataFrame, phase: str) -> np.ndarray:
    b = part.batch_size.to_numpy(float)
    one = np.ones_like(b)
    if phase == "prefill":
        c = part.chunk_tokens.to_numpy(float)
        if form == "infermax":
            return np.column_stack([b * c, one, b * c * c, b])
        return np.column_stack([b * c, one]) if form == "aladdin" else np.column_stack([b * c, b, c, one])
    d = part.context_tokens.to_numpy(float)
    if form == "infermax":
        return np.column_stack([b, one, b * d])
    return np.column_stack([b, b * d, one]) if form == "aladdin" else np.column_stack([b * d, b, d, one])


def form_cv_mape(form: str, part: pd.DataFrame, phase: str, *, seed: int = 0, folds: int = CV_FOLDS) -> float | None:
    """k-fold held-out MAPE (%) of ``form`` fitted on the training folds of ``part`` (one phase's rows)."""
    groups = configuration_groups(part)
    k = min(folds, len(set(groups)))
    if k < 2:
        return None
    fold = fold_of_groups(groups, k, seed)
    X, y = _design(form, part, phase), part.time_s.to_numpy(float)
    pred = np.full(len(y), np.nan)
    for f in range(k):
        held = fold == f
        pred[held] = X[held] @ nonneg_relative_fit(X[~held], y[~held], np.zeros(int((~held).sum())))
    return round(float(np.mean(np.abs(pred - y) / y) * 100.0), 4)


def _phase_errors(model: AnyForm, rows: pd.DataFrame, *, cv: bool, seed: int, folds: int) -> dict[str, MeasuredPhaseError]:
    out = {}
    for phase in ("prefill", "decode"):
        part = rows[rows.phase == phase].reset_index(drop=True)
        if part.empty:
            continue
        y = part.time_s.to_numpy(float)
        ape = np.abs(predict(model, part) - y) / y * 100.0
        out[phase] = MeasuredPhaseError(
            rows=len(part), mape=round(float(ape.mean()), 4), max_ape=round(float(ape.max()), 4),
            cv_mape=form_cv_mape(form_of(model), part, phase, seed=seed, folds=folds) if cv else None)
    return out


def measured_rows_error(model: AnyForm, group: GroupRows | None, rows_source: str, *,
                        batchtime: BatchTimeModel | None = None, seed: int = 0,
                        folds: int = CV_FOLDS) -> tuple[MeasuredRowsError, list[Caveat]]:
    """(``measured_rows`` section, caveats) of ``model`` against ``group``'s measured rows (module docstring).

    ``batchtime``: the configuration's batch-time model, needed when the group's rows hold no attention.
    """
    if group is None:
        return (MeasuredRowsError(basis="none", note="no measured rows of this (model, GPU, TP) in the profiles"),
                [Caveat(code="no_measured_rows", detail=(
                    f"no measured rows of {_configuration(model)}: "
                    "this file's error against measurements is unknown"))])
    caveats = [c for c in group.caveats if c.code != "no_chunked_prefill_rows"]
    if group.attention_added:
        if batchtime is None:
            return (MeasuredRowsError(basis="none", rows_source=rows_source, note=(
                "the measured rows hold no attention and no batch-time model of this configuration was given")),
                caveats)
        grid = model_grid(group.rows)
        grid["time_s"] = batchtime.predict_rows(grid)
        section = MeasuredRowsError(
            basis="batch-time model", rows_source=rows_source, scored_terms=(
                "whole batch time of the batch-time model (measured non-attention terms fitted, attention "
                "extrapolated) on the measured inputs, decode contexts 128..4096"),
            phases=_phase_errors(model, grid, cv=False, seed=seed, folds=folds),
            note="the measured rows of this shape hold no attention: no error against measured whole batch times")
    else:
        section = MeasuredRowsError(
            basis="measured rows", rows_source=rows_source, scored_terms=group.scored_terms, folds=folds, seed=seed,
            phases=_phase_errors(model, group.rows, cv=True, seed=seed, folds=folds),
            note=("mape/max_ape: this file's coefficients on every measured row (for files fitted on these rows, "
                  "mostly in-sample); cv_mape: the form refitted per fold, configuration folds as in the batch-time "
                  "file; prefill chunks over cached tokens are predicted as prompts of their new tokens"))
    above = []
    for phase, e in section.phases.items():
        worst = max(e.mape, e.cv_mape or 0.0)
        if worst > TARGET_MAPE_PCT:
            cv = "" if e.cv_mape is None else f", form cross-validated {e.cv_mape:.1f} %"
            above.append(f"{phase} {e.mape:.1f} %{cv}")
    if above:
        caveats.append(Caveat(code="above_target", detail=(
            f"error against the {section.basis} above {TARGET_MAPE_PCT:g} %: {'; '.join(above)}")))
    return section, caveats


def annotate(model: AnyForm, group: GroupRows | None, rows_source: str, *, batchtime: BatchTimeModel | None = None,
             seed: int = 0, folds: int = CV_FOLDS) -> AnyForm:
    """``model`` with its ``measured_rows`` and ``caveats`` (re)computed; every coefficient unchanged."""
    section, caveats = measured_rows_error(model, group, rows_source, batchtime=batchtime, seed=seed, folds=folds)
    if "published" in model.provenance.lower() and "not fitted" in model.provenance.lower():
        caveats = [Caveat(code="published_coefficients", detail="coefficients copied from the paper named in "
                          "provenance, not fitted here"), *caveats]
    return model.model_copy(update={"measured_rows": section, "caveats": caveats})


def derived_annotation(source: AnyForm, source_file: str, code: str, detail: str
                       ) -> tuple[MeasuredRowsError, list[Caveat]]:
    """(``measured_rows``, caveats) of a file DERIVED from ``source`` (read from ``source_file``) with no
    measured rows of its own: basis ``none``, the derivation caveat ``code`` (``derived_from_other_gpu`` or
    ``derived_from_other_model``) with ``detail``, ``no_measured_rows``, and the source's caveats about its
    data (attention, all-reduce, CPU overhead), prefixed with the source file; the source's own
    measured-rows figures are quoted in the note (they are not this file's error)."""
    src = source.measured_rows
    quoted = ""
    if src is not None and src.phases:
        figures = ", ".join(f"{ph} {e.mape:.1f} %" for ph, e in src.phases.items())
        quoted = f"; the source's own error against the {src.basis}: {figures} (not this file's error)"
    section = MeasuredRowsError(basis="none", note=f"derived from {source_file}, no measured rows of this "
                                                   f"configuration{quoted}")
    inherited = [Caveat(code=c.code, detail=f"{source_file}: {c.detail}") for c in (source.caveats or [])
                 if c.code not in ("above_target", "no_measured_rows", "published_coefficients")]
    return section, [
        Caveat(code=code, detail=detail),  # type: ignore[arg-type]
        Caveat(code="no_measured_rows", detail=("no measured rows of this (model, GPU, TP): this file's error "
                                                "against measurements is unknown")),
        *inherited,
    ]


def group_key(model: str, gpu: str, tensor_parallel: int) -> tuple[str, str, int]:
    return (model.lower(), gpu.lower(), int(tensor_parallel))


def load_groups(data_dir: Path | str, *, only: set[tuple[str, str, int]] | None = None
                ) -> dict[tuple[str, str, int], tuple[GroupRows, str]]:
    """Measured rows per configuration key (`group_key`) with a label of their source: Splitwise rows where
    Splitwise measures the configuration, else the Vidur composition.  ``only``: catalog (model, GPU, TP)."""
    import warnings  # noqa: PLC0415

    from planner.costmodels.batchtime_sources import splitwise_groups, vidur_groups  # noqa: PLC0415
    from planner.costmodels.profiles import read_splitwise  # noqa: PLC0415

    data_dir = Path(data_dir)
    out: dict[tuple[str, str, int], tuple[GroupRows, str]] = {}
    splitwise = data_dir / "profiling/splitwise_sim/perf_model.csv"
    profile, _ = read_splitwise(splitwise)
    for g in splitwise_groups(profile):
        if only is None or (g.model, g.gpu, g.tensor_parallel) in only:
            out[group_key(g.model, g.gpu, g.tensor_parallel)] = (
                g, f"{splitwise.name} (Splitwise end-to-end measurements) [model={g.model}, gpu={g.gpu}, "
                   f"tp={g.tensor_parallel}]")
    wanted = None if only is None else {k for k in only if group_key(*k) not in out}
    if wanted is None or wanted:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            groups, _ = vidur_groups(data_dir / "profiling/vidur", only=wanted)
        for g in groups:
            key = group_key(g.model, g.gpu, g.tensor_parallel)
            if key not in out:
                out[key] = (g, f"profiling/vidur (composition of measured kernel rows) [model={g.model}, "
                               f"gpu={g.gpu}, tp={g.tensor_parallel}]")
    return out
