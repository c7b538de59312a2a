"""Batch-time cost model of InferMax (docs/formulations.md §3.2) and its fit from Vidur profiles.

Per transformer layer, in milliseconds (the batch time is × ``n_layers`` × 1e-3 → seconds)::

    T(B) = a_o·N + b_o                                  non-attention, N = Σ_r c_r tokens
         + [n_p > 0]·(a_p·Σ_{r prefill} c_r² + b_p) + s_p·n_p   prefill attention
         + [n_d > 0]·(a_d·Σ_{r decode} k_r + b_d) + s_d·n_d    decode attention, k_r = KV read

An empty batch costs 0; a hybrid batch pays both attention terms.

Reading [P + C]: this is the paper's model (linear non-attention, prefill attention linear in
Σc², decode attention linear in KVs read, a bias per term) plus the code's per-request kernel
terms ``s_p·n_p``, ``s_d·n_d`` (linear in counts, so exact in the MIP).  Three terms of the
authors' Vidur code are deliberately **not** modelled, and the published sets are used without
them: Vidur's batching-overhead factor ``(1 + 0.1·[n>1])``, the prefill cross term
``2·Σ c·k`` and ``m_p·Σ k`` (prior KV of a chunk).  They are not in the paper's model, and the
bilinear cross term would make the §3.3 MIP non-convex.  Consequence (say it loudly): without
the cross term a later chunk of a prompt does not pay for attending to earlier chunks, so
chunking a prompt lowers Σc²; at the published coefficients this saving is tiny against the
per-batch biases (a_p·64² ≈ 7e-4 ms vs b_o ≈ 0.065 ms per layer).
"""

from __future__ import annotations

import io
import math
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
import yaml
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_serializer, model_validator

from planner.core.io import MAX_TABLE_BYTES, NotBool, read_input_text, read_yaml_mapping, validate_model
from planner.costmodels.models import Caveat, MeasuredRowsError
from planner.errors import InputError

COEFFICIENTS = ("a_o", "b_o", "a_p", "b_p", "s_p", "a_d", "b_d", "s_d")

#: Most layers a model may have (the largest published models have a few hundred).
MAX_LAYERS = 10_000
#: Largest coefficient (ms per layer, per token/token²/KV/request or per batch).  Real sets are below
#: 1 ms (the published 7B/70B sets and the shipped fits: largest b_p ≈ 0.21 ms); with the request and
#: limit caps of `planner.batching.problem` every batch time stays far inside float range.
MAX_COEFFICIENT_MS = 1e6


def _as_float(value: Any) -> Any:
    """``value`` as a float when it is text that parses as one (YAML reads ``1e30`` as text), else as is."""
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    return value


def _finite(value: Any) -> Any:
    """``inf``/``nan`` (also as text) say so, before the range check would call ``inf`` merely too large."""
    number = _as_float(value)
    if isinstance(number, float) and not math.isfinite(number):
        raise ValueError("Input should be a finite number")
    return value


def _layer_count(value: Any) -> Any:
    """A huge number (``1.0e+30``, or the text ``1e30``) is too large, not "unable to parse"."""
    number = _as_float(value)
    if isinstance(number, float) and math.isfinite(number) and number > MAX_LAYERS:
        raise ValueError(f"Input should be less than or equal to {MAX_LAYERS}")
    return value


Layers = Annotated[int, NotBool, BeforeValidator(_layer_count), BeforeValidator(_finite), Field(gt=0, le=MAX_LAYERS)]
Coefficient = Annotated[float, NotBool, BeforeValidator(_finite), Field(ge=0.0, le=MAX_COEFFICIENT_MS)]


class InferMaxCostModel(BaseModel):
    """The §3.2 batch-time model; coefficients per layer in ms (see the module docstring).

    Coefficients are finite, not booleans, between 0 and `MAX_COEFFICIENT_MS`, and not all 0 (every
    batch would take 0 s); ``n_layers`` is a whole number from 1 to `MAX_LAYERS`.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["infermax"] = "infermax"
    name: str = "custom"
    n_layers: Layers = 32
    a_o: Coefficient
    b_o: Coefficient
    a_p: Coefficient
    b_p: Coefficient
    s_p: Coefficient = 0.0
    a_d: Coefficient
    b_d: Coefficient
    s_d: Coefficient = 0.0
    provenance: str = ""
    fit_report: dict[str, float] = Field(default_factory=dict)
    #: this file's error against the measured rows of its configuration, and its caveats
    #: (`planner.costmodels.measured_error`, written by models/annotate_measured.py)
    measured_rows: MeasuredRowsError | None = None
    caveats: list[Caveat] = Field(default_factory=list)

    @model_serializer(mode="wrap")
    def _omit_empty_annotations(self, handler):  # noqa: ANN001, ANN202
        """Dumps (instance files, `with_limits`) leave out an absent ``measured_rows`` and empty ``caveats``."""
        data = handler(self)
        if isinstance(data, dict):
            if data.get("measured_rows") is None:
                data.pop("measured_rows", None)
            if not data.get("caveats"):
                data.pop("caveats", None)
        return data

    @model_validator(mode="after")
    def _not_all_zero(self) -> InferMaxCostModel:
        if all(getattr(self, name) == 0 for name in COEFFICIENTS):
            raise ValueError("every coefficient is 0, so every batch would take 0 s")
        return self

    @property
    def scale(self) -> float:
        """Seconds per (per-layer ms)."""
        return self.n_layers * 1e-3

    def batch_seconds(
        self,
        tokens: float,
        prefill_sq: float,
        n_prefill: int,
        decode_kv: float,
        n_decode: int,
    ) -> float:
        """Time of one batch (s): ``tokens`` = Σc, ``prefill_sq`` = Σ prefill c², ``decode_kv`` = KVs read."""
        if n_prefill == 0 and n_decode == 0:
            return 0.0
        ms = self.a_o * tokens + self.b_o
        if n_prefill > 0:
            ms += self.a_p * prefill_sq + self.b_p + self.s_p * n_prefill
        if n_decode > 0:
            ms += self.a_d * decode_kv + self.b_d + self.s_d * n_decode
        return ms * self.scale

    def batch_seconds_array(self, tokens, prefill_sq, n_prefill, decode_kv, n_decode) -> np.ndarray:
        """`batch_seconds` over arrays (one entry per batch)."""
        tokens, prefill_sq, decode_kv = (np.asarray(v, float) for v in (tokens, prefill_sq, decode_kv))
        n_prefill, n_decode = np.asarray(n_prefill), np.asarray(n_decode)
        has_p, has_d = n_prefill > 0, n_decode > 0
        ms = (self.a_o * tokens + self.b_o
              + has_p * (self.a_p * prefill_sq + self.b_p) + self.s_p * n_prefill
              + has_d * (self.a_d * decode_kv + self.b_d) + self.s_d * n_decode)
        return np.where(has_p | has_d, ms * self.scale, 0.0)


def infermax_from_batchtime(bt: Any, source_file: str) -> InferMaxCostModel:
    """The InferMax model derived from the batch-time model ``bt`` (`planner.costmodels.batchtime.BatchTimeModel`,
    read from ``source_file``): its ``derived.infermax`` coefficients (per layer, ms) with the projection's
    error and the batch-time file's caveats (`planner.costmodels.derived.derived_annotations`)."""
    from planner.costmodels.derived import derived_annotations, derived_coefficients  # noqa: PLC0415

    c = derived_coefficients(bt, "infermax", source_file)
    layers = c.pop("n_layers")
    name = f"{bt.model}-{bt.gpu}-tp{bt.tensor_parallel}-derived".lower()
    return InferMaxCostModel(name=name, n_layers=int(layers), **c, **derived_annotations(bt, "infermax", source_file))


def load_infermax_model(path: Path | str) -> InferMaxCostModel:
    data = read_yaml_mapping(path)
    if data.get("kind", "infermax") != "infermax":
        raise InputError(path, "kind", f"expected an infermax cost model, got kind {data.get('kind')!r}")
    return validate_model(InferMaxCostModel, data, path)


def save_infermax_model(model: InferMaxCostModel, path: Path | str) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(model.model_dump(mode="json"), sort_keys=False, width=200))
    return path


# Published sets of docs/formulations.md §3.2 (authors' code, Vidur predictor, per layer, ms).
# m_p and the 1.1 batching overhead of that table are not part of this model (module docstring).
PUBLISHED: dict[str, InferMaxCostModel] = {
    "7b": InferMaxCostModel(
        name="infermax-7b", n_layers=32, a_p=1.6773e-7, b_p=0.0926, a_d=8.513e-6, b_d=0.01921,
        a_o=0.00191, b_o=0.06486, s_p=0.001534, s_d=0.00074,
        provenance="FORMULATIONS.md §3.2 '7B' set (InferMax authors' Vidur predictor, Llama-2-7B on A100); "
        "m_p=9.224e-6 and the 0.1 batching-overhead fraction dropped",
    ),
    "70b": InferMaxCostModel(
        name="infermax-70b", n_layers=80, a_p=4.309e-8, b_p=0.2112, a_d=1.222e-6, b_d=0.081,
        a_o=0.002, b_o=0.159, s_p=9.03e-4, s_d=3.92e-4,
        provenance="FORMULATIONS.md §3.2 '70B' set (Llama-3-70B, TP4, A100); "
        "m_p=3.805e-7 and the 0.1 batching-overhead fraction dropped",
    ),
}


def default_cost_model() -> InferMaxCostModel:
    return PUBLISHED["7b"]


def fit_from_vidur(
    mlp_csv: Path | str,
    attention_csv: Path | str,
    *,
    n_layers: int,
    n_heads: int,
    n_kv_heads: int,
    head_dim: int,
    tensor_parallel: int = 1,
    name: str = "fitted",
    seed: int = 0,
) -> InferMaxCostModel:
    """Fit the §3.2 coefficients from a Vidur ``mlp.csv`` and the legacy attention profile.

    * non-attention: per-layer Σ of every ``time_stats.<op>.median`` except ``emb`` (+ emb / n_layers)
      at the given TP, ``a_o·N + b_o``;
    * decode attention (attn_decode + reshapes, rows ``is_prefill`` false): ``a_d·b·k + b_d + s_d·b``;
    * prefill attention (rows ``is_prefill`` true with ``kv_cache_size`` 0): ``a_p·c² + b_p``
      (``s_p`` is not identifiable from single-request rows and is 0).

    The attention profile has 4 KV heads and 32 query heads per GPU, head_dim 128 (8192 embd, TP2);
    decode is scaled by per-GPU KV heads/4 × head_dim/128 and prefill by query heads/32 × head_dim/128,
    as `planner.costmodels.vidur` does.  Non-negative least squares on relative residuals; 25 % of the
    configurations held out (`holdout_mask`); held-out MAPEs go to ``fit_report``.
    """
    import pandas as pd

    from planner.costmodels.fitting import fit_relative_nonnegative, holdout_mask

    def read(path: Path | str) -> pd.DataFrame:
        path = Path(path)
        text = read_input_text(path, "a profile CSV", MAX_TABLE_BYTES)  # a regular UTF-8 file (planner.core.io)
        try:
            return pd.read_csv(io.StringIO(text))
        except (pd.errors.ParserError, pd.errors.EmptyDataError, ValueError) as exc:
            raise InputError(path, "", f"not a valid CSV ({str(exc).splitlines()[0][:200]})") from None

    mlp = read(mlp_csv)
    for col in ("num_tokens", "num_tensor_parallel_workers", "time_stats.emb.median"):
        if col not in mlp.columns:
            raise InputError(mlp_csv, col, "required column is missing")
    mlp = mlp[mlp.num_tensor_parallel_workers == tensor_parallel]
    if mlp.empty:
        raise InputError(mlp_csv, "num_tensor_parallel_workers", f"no rows for TP {tensor_parallel}")
    ops = [c for c in mlp.columns if c.startswith("time_stats.") and c.endswith(".median") and ".emb." not in c]
    y_o = (mlp[ops].sum(axis=1) + mlp["time_stats.emb.median"] / n_layers).to_numpy(float)
    n_tok = mlp.num_tokens.to_numpy(float)
    X_o = np.column_stack([n_tok, np.ones_like(n_tok)])
    report: dict[str, float] = {}

    def fit(X: np.ndarray, y: np.ndarray, configs: pd.Series, label: str) -> np.ndarray:
        held = holdout_mask(configs.astype(str).reset_index(drop=True), seed)
        beta = fit_relative_nonnegative(X[~held], y[~held])
        report[f"{label}_train_mape_pct"] = float(np.mean(np.abs(X[~held] @ beta - y[~held]) / y[~held]) * 100)
        report[f"{label}_holdout_mape_pct"] = float(np.mean(np.abs(X[held] @ beta - y[held]) / y[held]) * 100)
        return beta

    a_o, b_o = fit(X_o, y_o, mlp.num_tokens, "nonattention")

    att = read(attention_csv)
    is_prefill = att.is_prefill.astype(str).str.lower() == "true"
    cols = lambda op: [c for c in (f"time_stats.{op}.median", "time_stats.attn_input_reshape.median",  # noqa: E731
                                   "time_stats.attn_output_reshape.median") if c in att.columns]
    dec = att[~is_prefill].reset_index(drop=True)
    y_d = dec[cols("attn_decode")].fillna(0.0).sum(axis=1).to_numpy(float)
    b = dec.batch_size.to_numpy(float)
    X_d = np.column_stack([b * dec.kv_cache_size.to_numpy(float), np.ones_like(b), b])
    a_d, b_d, s_d = fit(X_d, y_d, dec.batch_size.astype(str) + "-" + dec.kv_cache_size.astype(str), "decode_attention")
    pre = att[is_prefill & (att.kv_cache_size == 0)].reset_index(drop=True)
    y_p = pre[cols("attn_prefill")].fillna(0.0).sum(axis=1).to_numpy(float)
    c = pre.prefill_chunk_size.to_numpy(float)
    a_p, b_p = fit(np.column_stack([c * c, np.ones_like(c)]), y_p, pre.prefill_chunk_size, "prefill_attention")

    kv_per_gpu = max(1, n_kv_heads // tensor_parallel)
    q_per_gpu = max(1, n_heads // tensor_parallel)
    a_d *= kv_per_gpu / 4 * head_dim / 128
    s_d *= 1.0
    a_p *= q_per_gpu / 32 * head_dim / 128
    return InferMaxCostModel(
        name=name, n_layers=n_layers, a_o=float(a_o), b_o=float(b_o), a_p=float(a_p), b_p=float(b_p), s_p=0.0,
        a_d=float(a_d), b_d=float(b_d), s_d=float(s_d), fit_report={k: round(v, 3) for k, v in report.items()},
        provenance=f"fitted by planner.batching.costmodel.fit_from_vidur from {Path(mlp_csv).name} (TP{tensor_parallel}) "
        f"and {Path(attention_csv).name} (attention scaled to {kv_per_gpu} KV / {q_per_gpu} q heads per GPU, "
        f"head_dim {head_dim}); non-negative relative least squares, 25% of configurations held out (seed {seed})",
    )
