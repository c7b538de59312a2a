"""Aladdin, bilinear and InferMax cost-model files DERIVED from a batch-time model (docs/costmodels.md).

A batch-time file (`planner.costmodels.batchtime.BatchTimeModel`, one per (model, GPU, TP)) carries in its
``derived`` section the coefficients of each simpler form projected from it over its measured domain
(`planner.costmodels.batchtime.derive_forms`: non-negative least squares on relative residuals against the
batch-time model's times at the measured rows' inputs) and their error against the measured rows.
`derived_cost_model` turns one of them into a model of that form that placement, capacity, queueing,
priority and deployment read like a fitted file (InferMax, the batching family's form:
`planner.batching.costmodel.InferMaxCostModel.from_batchtime`, with the same annotations):

* coefficients: the projection, unchanged;
* ``kv_bytes_per_token`` (Aladdin): the batch-time file's;
* ``valid_range``: the batch-time file's measured domain (largest measured batch size; longest prompt);
* ``measured_rows``: the projection's own error against the batch-time file's measured rows (basis as the
  projection states it: ``measured rows``, or ``batch-time model`` for shapes whose attention is not
  measured), per phase with the k-fold cross-validated figure of the derived form (``cv_mape``);
* ``caveats``: the batch-time file's caveats about its data (they hold for anything derived from it), and
  ``above_target`` when a figure above is over 5 %;
* ``provenance``: "derived from <file>", which `planner models` lists as source *derived*.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.costmodels.models import (AladdinCostModel, BilinearCoefficients, BilinearCostModel, Caveat,
                                       MeasuredPhaseError, MeasuredRowsError, ValidRange)
from planner.errors import PlannerError

if TYPE_CHECKING:
    from planner.costmodels.batchtime import BatchTimeModel

#: The forms a batch-time file can be turned into here (InferMax: `planner.batching.costmodel`).
DERIVABLE = ("aladdin", "bilinear")
TARGET_PCT = 5.0


def derived_cost_model(bt: BatchTimeModel, kind: str, source_file: str) -> AladdinCostModel | BilinearCostModel:
    """The ``kind`` model derived from ``bt`` (read from ``source_file``), as the module docstring states; a
    `PlannerError` line when ``kind`` is not derivable or ``bt`` lacks what the form needs."""
    if kind not in DERIVABLE:
        raise PlannerError(f"--kind must be one of {', '.join(DERIVABLE)}, got {kind!r}")
    c = derived_coefficients(bt, kind, source_file)
    common = {"model": bt.model, "gpu": bt.gpu, "tensor_parallel": bt.tensor_parallel,
              "valid_range": _valid_range(bt), **derived_annotations(bt, kind, source_file)}
    if kind == "aladdin":
        if bt.kv_bytes_per_token is None:
            raise PlannerError(f"{source_file}: has no kv_bytes_per_token, which an Aladdin model needs (Eq. 1)")
        return AladdinCostModel(**common, kv_bytes_per_token=bt.kv_bytes_per_token,
                                **{k: c[k] for k in ("prefill_s_per_token", "prefill_base_s", "decode_s_per_request",
                                                     "decode_s_per_context_token", "decode_base_s")})
    phase = {p: BilinearCoefficients(**{n: c[f"{p}_{n}"] for n in ("alpha", "beta", "gamma", "delta")})
             for p in ("prefill", "decode")}
    return BilinearCostModel(**common, time_unit="ms", prefill=phase["prefill"], decode=phase["decode"])


def derived_coefficients(bt: BatchTimeModel, kind: str, source_file: str) -> dict[str, float]:
    """The ``kind`` coefficients of ``bt``'s ``derived`` section; one line when it has none."""
    fit = bt.derived.get(kind)
    if fit is None:
        raise PlannerError(f"{source_file}: has no derived {kind} coefficients (refit it with "
                           f"`planner fit --kind batchtime`)")
    return dict(fit.coefficients)


def derived_annotations(bt: BatchTimeModel, kind: str, source_file: str) -> dict:
    """``measured_rows``, ``caveats`` and ``provenance`` of the ``kind`` file derived from ``bt`` (module
    docstring), as keyword arguments of the model class."""
    return {"measured_rows": _measured_rows(bt, kind, source_file), "caveats": _caveats(bt, kind),
            "provenance": (f"derived from {source_file}: the {kind} form projected from that batch-time model over "
                           f"its measured rows (non-negative least squares on relative residuals), not fitted to "
                           f"the rows directly")}


def _valid_range(bt: BatchTimeModel) -> ValidRange | None:
    cov = bt.coverage
    if cov is None:
        return None
    sizes = [*cov.prefill_batch_sizes, *cov.decode_batch_sizes]
    longest = int(cov.prefill_tokens_per_request[1])
    return ValidRange(max_batch_size=max(sizes) if sizes else None, max_tokens_per_request=longest or None)


def _measured_rows(bt: BatchTimeModel, kind: str, source_file: str) -> MeasuredRowsError:
    fit, summary = bt.derived[kind], bt.fit
    phases = {}
    for ph, mape in fit.approximation_mape.items():
        held = summary.phases.get(ph) if summary is not None else None
        forms = held.forms_cv.get(kind) if held is not None else None
        phases[ph] = MeasuredPhaseError(rows=held.rows if held is not None else 0, mape=mape,
                                        max_ape=fit.approximation_max_ape[ph],
                                        cv_mape=forms.derived if forms is not None else None)
    note = (f"error of the projection against the measured rows of {source_file}"
            if fit.error_basis == "measured rows" else
            f"error of the projection against the batch-time model of {source_file} on a grid of its measured "
            f"inputs × decode contexts 128..4096 (those rows hold no attention); rows: the measured rows the "
            f"grid is built from")
    return MeasuredRowsError(basis=fit.error_basis, rows_source=summary.source if summary is not None else None,
                             scored_terms=summary.scored_terms if summary is not None else None,
                             seed=summary.seed if summary is not None else None, phases=phases, note=note)


def _caveats(bt: BatchTimeModel, kind: str) -> list[Caveat]:
    fit = bt.derived[kind]
    kept = [c for c in bt.caveats if c.code != "above_target"]  # the data caveats; the error is this file's own
    over = [f"{ph} {v:.1f} %" for ph, v in fit.approximation_mape.items() if v > TARGET_PCT]
    if over:
        against = "the measured rows" if fit.error_basis == "measured rows" else "the batch-time model"
        kept.append(Caveat(code="above_target", detail=f"error against {against} above 5 %: {', '.join(over)}"))
    return kept
