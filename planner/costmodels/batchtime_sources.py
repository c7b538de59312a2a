"""Measured rows for `planner.costmodels.batchtime`: Splitwise end-to-end rows and Vidur kernel compositions.

Both produce tables in `batchtime.ROW_COLUMNS` (``phase, batch_size, chunk_tokens, context_tokens, time_s,
allreduce_s, config_id``), one per (model, GPU, TP) group.

**Splitwise** (`profiles.read_splitwise`, inconsistent rows dropped there): prefill rows are b prompts of
c tokens over no cached context; decode rows are b requests at the mean context p + T/2 of the measured
iterations (the model is linear in context, so the mean iteration time is the time at the mean context).

**Vidur** — composed ONLY of measured kernel rows, never of fitted ones:

* non-attention: ``layers × (Σ op medians of mlp.csv except emb) + emb`` at the profiled ``num_tokens``
  points only (no interpolation in tokens);
* attention: the legacy profile (A100; 32 query / 4 KV heads per GPU; head_dim 128) at its own measured
  points, only for groups of exactly that shape per GPU (Llama-2-70B, Llama-3-70B, CodeLlama-34B at A100
  TP 2): decode rows (b, k) with ``layers × attn_decode(b, k)`` and chunked prefill rows (c over k cached)
  with ``layers × attn_prefill(c, k)``, where b or c is also a profiled ``num_tokens`` point;
* all-reduce: 2·layers all-reduces of n·hidden fp16 elements from ``network/<gpu>_dgx/all_reduce.csv``
  (Vidur's smoothed, non-decreasing curve of `vidur.read_allreduce`: measured sizes do not fall on n·hidden,
  so this term is interpolated; it is the same known table in the rows and in the model);
* CPU overhead: `vidur.fit_cpu_overhead` (host ``h0 + h1·b`` plus Ray communication; a line through the
  measured rows, added alike to rows and model).

Groups of other shapes have no measured attention: their rows hold the non-attention terms only (prefill
rows at c = n tokens, decode rows at b = n requests), the error covers those terms, and the model's
attention coefficients are taken from the reference fit (`vidur.fit_legacy_attention`) scaled as in
`vidur._compose_group` (caveat ``attention_extrapolated``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from planner.catalog import canonical_gpu_name, canonical_model_name, find_gpu, find_model
from planner.costmodels.batchtime import AllReduceTable, Caveat
from planner.errors import InputError

#: Prefill chunks and decode batch sizes composed from the profiles (profiled points inside these ranges).
PREFILL_TOKEN_RANGE = (64, 4096)
DECODE_BATCH_RANGE = (1, 128)


@dataclass
class GroupRows:
    """Measured rows of one (model, GPU, TP) group and what the batch-time fit needs besides them."""

    model: str
    gpu: str
    tensor_parallel: int
    rows: pd.DataFrame
    source_kind: str
    layers: int | None = None
    kv_bytes_per_token: float | None = None
    allreduce: AllReduceTable | None = None
    fixed_prefill: dict[str, float] = field(default_factory=dict)
    fixed_decode: dict[str, float] = field(default_factory=dict)
    caveats: list[Caveat] = field(default_factory=list)
    #: coefficients added after the fit (extrapolated attention of a shape with no measured attention)
    attention_added: dict[str, float] = field(default_factory=dict)
    scored_terms: str = "the whole batch time (end-to-end measurement)"


def splitwise_groups(profile: pd.DataFrame) -> list[GroupRows]:
    """Splitwise batch-profile rows (`profiles.read_splitwise`) as one `GroupRows` per (model, GPU, TP)."""
    out = []
    for (m, g, tp), r in profile.groupby(["model", "gpu", "tensor_parallel"], sort=True):
        pre = (r.phase == "prefill").to_numpy()
        rows = pd.DataFrame({
            "phase": r.phase.to_numpy(), "batch_size": r.batch_size.to_numpy(int),
            "chunk_tokens": np.where(pre, r.tokens_per_request.to_numpy(float), 1.0),
            "context_tokens": np.where(pre, 0.0, r.tokens_per_request.to_numpy(float)),
            "time_s": r.time_s.to_numpy(float), "allreduce_s": 0.0, "config_id": r.config_id.to_numpy()})
        spec = find_model(str(m))
        out.append(GroupRows(model=str(m), gpu=str(g), tensor_parallel=int(tp), rows=rows,
                             source_kind="measured end-to-end", layers=spec.num_layers if spec else None,
                             kv_bytes_per_token=spec.kv_bytes_per_token if spec else None))
    return out


def _attention_points(path: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Measured attention ms per layer: decode (b, k) and prefill (c, k) medians (+ reshapes)."""
    from planner.costmodels.vidur import _ATTN_COLUMNS, _read_csv  # noqa: PLC0415

    table = _read_csv(path, _ATTN_COLUMNS)
    is_prefill = table.is_prefill.astype(str).str.lower() == "true"
    out = []
    for prefill, op, key in ((False, "attn_decode", "batch_size"), (True, "attn_prefill", "prefill_chunk_size")):
        rows = table[is_prefill == prefill]
        ops = [f"time_stats.{n}.median" for n in (op, "attn_input_reshape", "attn_output_reshape")]
        ms = rows[[c for c in ops if c in rows.columns]].fillna(0.0).sum(axis=1)
        frame = pd.DataFrame({"n": rows[key].to_numpy(int), "k": rows.kv_cache_size.to_numpy(int), "ms": ms.to_numpy()})
        frame = frame[frame.ms > 0].groupby(["n", "k"], as_index=False).ms.median()
        out.append(frame)
    return out[0], out[1]


@dataclass
class _VidurTables:
    """The measured Vidur tables shared by every group: the reference attention fit and points, the CPU
    overhead line (None when left out) and the all-reduce curves read so far ({(GPU folder, TP): curve})."""

    root: Path
    ref_fit: Any
    att_dec: pd.DataFrame
    att_pre: pd.DataFrame
    overhead: Any
    allreduce_curves: dict[tuple[str, int], Any] = field(default_factory=dict)

    def allreduce(self, gpu_dir: str, tp: int) -> Any:
        """The all-reduce curve of ``tp`` GPUs in one node of ``gpu_dir`` (`vidur.read_allreduce`; read once)."""
        from planner.costmodels import vidur as V  # noqa: PLC0415

        key = (gpu_dir, tp)
        if key not in self.allreduce_curves:
            self.allreduce_curves[key] = V.read_allreduce(self.root / "network" / f"{gpu_dir}_dgx" / "all_reduce.csv",
                                                          tp)
        return self.allreduce_curves[key]

    def cpu_ms(self, b: np.ndarray, tp: int) -> np.ndarray:
        """CPU overhead (ms) per iteration of each batch size in ``b`` at ``tp`` (zeros without the line)."""
        return np.array([self.overhead.ms(v, tp) for v in b]) if self.overhead is not None else np.zeros(len(b))


def vidur_groups(root: Path | str, *, cpu_overhead: bool = True,
                 only: set[tuple[str, str, int]] | None = None) -> tuple[list[GroupRows], list[str]]:
    """Compose measured Vidur rows per (model, GPU, TP) (module docstring); returns (groups, skipped reasons).

    ``only``: compose just these (catalog model name, catalog GPU name, TP) groups.
    """
    from planner.costmodels import vidur as V  # noqa: PLC0415

    root = Path(root)
    if not root.is_dir():
        raise InputError(root, "", "Vidur profiling directory not found")
    mlp_files = sorted((root / "compute").glob("*/*/*/mlp.csv"))
    if not mlp_files:
        raise InputError(root / "compute", "", "no <gpu>/<org>/<model>/mlp.csv files found")
    ref_fit = V.fit_legacy_attention(root / V.ATTENTION_FILE)
    att_dec, att_pre = _attention_points(root / V.ATTENTION_FILE)
    overhead = V.fit_cpu_overhead(root / V.CPU_OVERHEAD_FILE) if cpu_overhead else None
    tables = _VidurTables(root, ref_fit, att_dec, att_pre, overhead)
    groups: list[GroupRows] = []
    skipped: list[str] = []
    for mlp_path in mlp_files:
        gpu_dir, org, model_dir = mlp_path.parts[-4:-1]
        hf_id = f"{org}/{model_dir}"
        gpu_name = canonical_gpu_name(gpu_dir) or gpu_dir
        spec = find_model(hf_id)
        if only is not None and not any((spec and spec.name, gpu_name) == (m, g) for m, g, _ in only):
            continue
        for tp, layers in sorted(V.read_mlp_profile(mlp_path).items()):
            if only is not None and (spec.name, gpu_name, int(tp)) not in only:
                continue
            label = f"{canonical_model_name(hf_id) or hf_id} on {gpu_name} tp{tp}"
            composed = _compose_vidur_group(tables, gpu_dir, gpu_name, spec, tp, layers)
            if isinstance(composed, str):
                skipped.append(f"{label}: {composed}")
            else:
                groups.append(composed)
    return groups, skipped


def _vidur_refusal(spec: Any, gpu: Any, layers: Any) -> str | None:
    """Why a profiled (model, GPU) cannot be composed from the catalog (None when it can)."""
    if spec is None:
        return "model not in the catalog"
    if (spec.num_attention_heads, spec.num_kv_heads, spec.hidden_size) != (layers.n_head, layers.n_kv_head,
                                                                          layers.n_embd):
        return f"n_head/n_kv_head/n_embd disagree with the catalog entry {spec.name}"
    if gpu is None or gpu.memory_bandwidth_gb_s is None or gpu.fp16_tflops is None:
        return "GPU has no catalog bandwidth/TFLOPS"
    return None


def _compose_vidur_group(tables: _VidurTables, gpu_dir: str, gpu_name: str, spec: Any, tp: int,
                         layers: Any) -> GroupRows | str:
    """The `GroupRows` of one profiled (model, GPU, TP), or the reason it is skipped: non-attention and
    all-reduce terms at the profiled token counts, plus measured attention for the reference shape
    (`_measured_attention_rows`) or extrapolated attention coefficients for any other shape
    (`_extrapolated_attention_rows`)."""
    from planner.costmodels import vidur as V  # noqa: PLC0415

    gpu = find_gpu(gpu_name)
    refusal = _vidur_refusal(spec, gpu, layers)
    if refusal is not None:
        return refusal
    ar = None
    if tp > 1:
        ar = tables.allreduce(gpu_dir, tp)
        if ar is None:
            return f"no all-reduce rows for {tp} GPUs in one node"
    n, point, table = _nonattention_points(spec, layers, ar, gpu_dir)
    q_per_gpu, kv_per_gpu = spec.num_attention_heads / tp, max(spec.num_kv_heads / tp, 1.0)
    measured_shape = (gpu_name == V.REFERENCE_GPU and q_per_gpu == V.REFERENCE_Q_HEADS_PER_GPU
                      and kv_per_gpu == V.REFERENCE_KV_HEADS_PER_GPU and spec.head_dim == V.REFERENCE_HEAD_DIM)
    caveats = []
    if ar is not None:
        caveats.append(Caveat(code="allreduce_interpolated", detail="all-reduce sizes n·hidden are "
                              "interpolated in the measured network profile"))
    if tables.overhead is not None:
        caveats.append(Caveat(code="cpu_overhead_fitted", detail="CPU overhead is a line through Vidur's "
                              "measured A100-host rows (legacy/a100_cpu_overheads.csv), in rows and model "
                              "alike"))
    fixed_p: dict[str, float] = {}
    fixed_d: dict[str, float] = {}
    attention_added: dict[str, float] = {}
    if measured_shape:
        rows, scored = _measured_attention_rows(tables, spec.num_layers, point, tp)
    else:
        rows, scored = _extrapolated_attention_rows(tables, n, point, tp)
        fixed_p = {"prefill_s_per_token_sq": 0.0, "prefill_s_per_token_context": 0.0}
        fixed_d = {"decode_s_per_kv_token": 0.0}
        attention_added = _extrapolated_attention(tables.ref_fit, spec, gpu, q_per_gpu, kv_per_gpu, caveats)
    if rows.empty:
        return "no profiled points in the composed ranges"
    return GroupRows(model=spec.name, gpu=gpu_name, tensor_parallel=int(tp), rows=rows,
                     source_kind="kernel composition", layers=spec.num_layers,
                     kv_bytes_per_token=spec.kv_bytes_per_token, allreduce=table, fixed_prefill=fixed_p,
                     fixed_decode=fixed_d, caveats=caveats, scored_terms=scored, attention_added=attention_added)


def _nonattention_points(spec: Any, layers: Any, ar: Any, gpu_dir: str) -> tuple[np.ndarray, dict, Any]:
    """(profiled token counts n, {n: (non-attention ms, all-reduce ms)}, the all-reduce table or None).

    Non-attention ms = layers × (one layer's op medians) + emb at each profiled n; with an all-reduce curve
    only the n whose n·hidden lies inside its measured sizes are kept, and all-reduce ms = 2·layers ×
    the curve at n·hidden."""
    L = spec.num_layers
    n = layers.layer_ms.x
    nonattn = L * layers.layer_ms.y + layers.emb_ms.y
    if ar is not None:
        inside = (n * spec.hidden_size >= ar.x[0]) & (n * spec.hidden_size <= ar.x[-1])
        n, nonattn = n[inside], nonattn[inside]
        ar_ms = 2 * L * np.interp(n * spec.hidden_size, ar.x, ar.y)
    else:
        ar_ms = np.zeros_like(n)
    table = None
    if ar is not None:
        table = AllReduceTable(
            tokens=[float(v) for v in n], seconds=[float(v) for v in ar_ms / 1e3],
            source=f"network/{gpu_dir}_dgx/all_reduce.csv (2·{L} all-reduces of n·{spec.hidden_size} "
                   "fp16 elements, smoothed as in planner/costmodels/vidur.py)")
    return n, dict(zip(n, zip(nonattn, ar_ms))), table


def _measured_attention_rows(tables: _VidurTables, L: int, point: dict, tp: int) -> tuple[pd.DataFrame, str]:
    """Rows of the reference shape with measured attention: decode rows (b, k) and single-chunk prefill
    rows (c over k cached) at the attention profile's points whose b or c is a profiled token count
    inside `DECODE_BATCH_RANGE` / `PREFILL_TOKEN_RANGE`; time = non-attention + all-reduce + layers ×
    attention + CPU overhead.  Returns (rows, the terms the rows score)."""
    lo, hi = PREFILL_TOKEN_RANGE
    dlo, dhi = DECODE_BATCH_RANGE
    att_dec, att_pre = tables.att_dec, tables.att_pre
    dec = att_dec[att_dec.n.isin(list(point)) & att_dec.n.between(dlo, dhi)]
    pre = att_pre[att_pre.n.isin(list(point)) & att_pre.n.between(lo, hi)]
    b = dec.n.to_numpy(float)
    c = pre.n.to_numpy(float)
    dec_ms = np.array([point[v][0] + point[v][1] for v in b]) + L * dec.ms.to_numpy() + tables.cpu_ms(b, tp)
    pre_ms = (np.array([point[v][0] + point[v][1] for v in c]) + L * pre.ms.to_numpy()
              + tables.cpu_ms(np.ones_like(c), tp))
    rows = pd.DataFrame({
        "phase": ["prefill"] * len(pre) + ["decode"] * len(dec),
        "batch_size": np.concatenate([np.ones(len(pre), int), b.astype(int)]),
        "chunk_tokens": np.concatenate([c, np.ones(len(dec))]),
        "context_tokens": np.concatenate([pre.k.to_numpy(float), dec.k.to_numpy(float)]),
        "time_s": np.concatenate([pre_ms, dec_ms]) / 1e3,
        "allreduce_s": np.concatenate([[point[v][1] / 1e3 for v in c], [point[v][1] / 1e3 for v in b]]),
        "config_id": [f"p-{int(x)}-{int(k)}" for x, k in zip(c, pre.k)]
        + [f"d-{int(x)}-{int(k)}" for x, k in zip(b, dec.k)],
    })
    return rows, ("MLP + attention (measured) + all-reduce + CPU overhead; prefill rows are single chunks "
                  "over 0..4032 cached tokens")


def _extrapolated_attention_rows(tables: _VidurTables, n: np.ndarray, point: dict,
                                 tp: int) -> tuple[pd.DataFrame, str]:
    """Rows of a shape with no measured attention: prefill rows at c = n tokens and decode rows at
    b = n requests (profiled n inside `PREFILL_TOKEN_RANGE` / `DECODE_BATCH_RANGE`), no cached context;
    time = non-attention + all-reduce + CPU overhead.  Returns (rows, the terms the rows score)."""
    lo, hi = PREFILL_TOKEN_RANGE
    dlo, dhi = DECODE_BATCH_RANGE
    b = n[(n >= dlo) & (n <= dhi)]
    c = n[(n >= lo) & (n <= hi)]
    rows = pd.DataFrame({
        "phase": ["prefill"] * len(c) + ["decode"] * len(b),
        "batch_size": np.concatenate([np.ones(len(c), int), b.astype(int)]),
        "chunk_tokens": np.concatenate([c, np.ones(len(b))]),
        "context_tokens": 0.0,
        "time_s": np.concatenate([[point[v][0] + point[v][1] for v in c] + tables.cpu_ms(np.ones_like(c), tp),
                                  [point[v][0] + point[v][1] for v in b] + tables.cpu_ms(b, tp)]) / 1e3,
        "allreduce_s": np.concatenate([[point[v][1] / 1e3 for v in c], [point[v][1] / 1e3 for v in b]]),
        "config_id": [f"p-{int(x)}" for x in c] + [f"d-{int(x)}" for x in b],
    })
    return rows, "MLP + all-reduce + CPU overhead (no measured attention for this shape)"


def _extrapolated_attention(ref_fit: Any, spec: Any, gpu: Any, q_per_gpu: float, kv_per_gpu: float,
                            caveats: list[Caveat]) -> dict[str, float]:
    """The attention coefficients (s) added after the fit of a shape with no measured attention: the
    reference fit scaled to this shape and GPU as in `vidur._compose_group` — decode by KV heads per GPU ×
    head_dim × reference / this GPU's memory bandwidth, prefill by query heads per GPU × head_dim ×
    reference / this GPU's fp16 TFLOPS — times the layers.  Appends the ``attention_extrapolated`` and
    ``attention_not_scored`` caveats to ``caveats``."""
    from planner.costmodels import vidur as V  # noqa: PLC0415

    ref_gpu = find_gpu(V.REFERENCE_GPU)
    L = spec.num_layers
    head = spec.head_dim / V.REFERENCE_HEAD_DIM
    dscale = (kv_per_gpu / V.REFERENCE_KV_HEADS_PER_GPU * head
              * ref_gpu.memory_bandwidth_gb_s / gpu.memory_bandwidth_gb_s)
    pscale = q_per_gpu / V.REFERENCE_Q_HEADS_PER_GPU * head * ref_gpu.fp16_tflops / gpu.fp16_tflops
    d0, d1 = ref_fit.decode
    p0, p1, p2, p3 = ref_fit.prefill
    caveats.append(Caveat(code="attention_extrapolated", detail=(
        "attention is measured for one shape only (A100, 32 q / 4 KV heads per GPU, head_dim 128); "
        f"this model's attention terms are that fit scaled by {pscale:.3g} (prefill FLOPs) and "
        f"{dscale:.3g} (decode bytes)")))
    caveats.append(Caveat(code="attention_not_scored", detail=(
        "held-out error covers the measured non-attention terms (MLP, all-reduce, CPU overhead) only")))
    return {"prefill_s_per_token_sq": L * pscale * p1 / 1e3,
            "prefill_s_per_token_context": L * pscale * p2 / 1e3,
            "decode_s_per_kv_token": L * dscale * d1 / 1e3,
            "prefill_base_s": L * p0 / 1e3, "prefill_s_per_token": L * pscale * p3 / 1e3,
            "decode_base_s": L * d0 / 1e3}


def fit_group(g: GroupRows, *, source: str, seed: int = 0):
    """Fit the batch-time model of one group; extrapolated attention terms are added to the fitted ones."""
    from planner.costmodels.batchtime import fit_batchtime  # noqa: PLC0415

    bt = fit_batchtime(g.rows, model=g.model, gpu=g.gpu, tensor_parallel=g.tensor_parallel,
                       source_kind=g.source_kind, source=source, seed=seed, fixed_prefill=g.fixed_prefill,
                       fixed_decode=g.fixed_decode, allreduce=g.allreduce, kv_bytes_per_token=g.kv_bytes_per_token,
                       caveats=[c for c in g.caveats], scored_terms=g.scored_terms,
                       score_forms=not g.attention_added)
    if g.attention_added:
        # the fit covers the measured non-attention terms; the extrapolated attention terms are added on top
        bt = bt.model_copy(update={k: getattr(bt, k) + v for k, v in g.attention_added.items()})
    return bt
