"""Compose Vidur per-layer operator profiles into batch-level prefill/decode times.

Vidur (Agrawal et al., MLSys 2024) profiles single operators, not batches;
`read_vidur` composes them into rows of the batch-profile schema
(`planner.costmodels.profiles.PROFILE_COLUMNS`).  Raw data are in
**milliseconds**, the output ``time_s`` is in **seconds**.  [D] = read from
the data, [R] = reconstruction (our assumption or extrapolation).  The rows are
**synthetic**: sums of measured kernels plus an attention term *extrapolated*
from one attention profile; they are not end-to-end measurements.

Per transformer layer, on one GPU of a TP group, for a forward pass over n tokens:

* [D] non-attention = Σ ``time_stats.<op>.median`` of ``compute/<gpu>/<org>/<model>/mlp.csv``
  except ``emb`` × ``num_layers`` (catalog), plus ``emb`` once per pass.
  Repeated (n, TP) measurements → median; linear interpolation in n.  The
  medians are locally non-monotone in n (up to ~15 %) and are kept as they are.
* [D]/[R] per-iteration CPU overhead (default on), from ``legacy/a100_cpu_overheads.csv``
  with the terms Vidur adds to an iteration: schedule + sampler_e2e + prepare_inputs_e2e
  + process_model_outputs (medians) + ray_comm_time (mean).  [R] host part fitted as
  ``h0 + h1·b`` over all rows (it barely depends on the model); Ray communication as
  its mean over the rows with TP > 1 (≈ 6 ms, one process per GPU) or ``r0 + r1·b``
  over the TP1 rows.  Measured on A100 hosts; reused for H100 (host-side work).
* [R] not included: LM head and sampling kernels.  Even with the CPU overhead the rows
  stay below Splitwise's end-to-end measurements at high TP (Llama-2-70B: ≈ 0.97× at
  A100 TP2 without overhead, ≈ 0.66× at TP4 and ≈ 0.46× at TP8 before adding ≈ 8 ms):
  treat them as optimistic where Splitwise has no measurement.
* [R] attention, fitted on ``legacy/a100_attention_n_embd8192_q64_kv8_tp2.csv``
  (A100, 32 q / 4 kv heads per GPU, head_dim 128; time = attn + reshapes) by
  non-negative least squares on relative residuals, 25 % of configurations held out:
  decode ``d0 + d1·S`` (S = Σ cached tokens of the batch; memory bound, d1 ≈ one
  token's K+V, 2048 B, at ~1.56 TB/s = 77 % of 2039 GB/s; held-out MAPE ≈ 11 %,
  worst at small S where launch latency dominates); prefill of c new over k cached
  tokens ``p0 + p1·c² + p2·c·k + p3·c`` (held-out MAPE ≈ 6 %; the linear p3
  term, not in the c²-only form, lowers it from ~9 %).
* [R] other models / TP: only the variable terms scale, intercepts d0, p0
  (~0.015 ms, launch cost) do not.  Decode × per-GPU KV heads/4 × head_dim/128
  (bytes read; KV heads per GPU ≥ 1, replicated when TP > kv heads); prefill ×
  per-GPU query heads/32 × head_dim/128 (FLOPs).
* [R] other GPUs: decode × A100/GPU peak memory bandwidth (2039/3350 for H100),
  prefill × A100/GPU dense fp16 TFLOPS (312/989.4), from the catalog
  (../shared/data/specs/gpu_specs.csv).  Assumes FlashAttention reaches the same
  fraction of peak on both; FlashAttention-2 reaches less on Hopper, so H100
  prefill attention is probably optimistic.
* [R] a prefill batch of b prompts of length l is one varlen attention call per
  layer: ``p0 + b·(variable part at c = l, k = 0)``.
* [D]/[R] TP > 1: 2 all-reduces per layer (attention output, MLP down projection)
  of n·hidden_size fp16 elements, from ``network/<gpu>_dgx/all_reduce.csv`` rows with
  num_workers = devices_per_node = TP; ``size`` counts fp16 elements (README §1b;
  Vidur's predictor reads it as bytes).  [R] Below ~1M elements the per-size
  medians jump between ~0.015 and ~0.066 ms (bimodal noise), so they are
  smoothed by a running median over 5 neighbouring sizes, then made
  non-decreasing in size (isotonic regression), then interpolated linearly.
* [R] memory is not checked: rows exist for configurations whose weights or KV
  cache do not fit (e.g. Llama-2-70B at TP1); the planner's memory model must
  exclude them.

Grid per (model, gpu, TP), as for the Splitwise adapter:

* prefill: b ∈ {1,2,4,8,16}, l ∈ {128,…,4096} with b·l ≤ the largest profiled
  num_tokens (pairs beyond it are not part of the grid):
  ``t = nonattn(b·l) + attn_prefill(b, l) + allreduce(b·l)``;
* decode: b ∈ {1,…,256}, mean context c ∈ {128,…,4096}:
  ``t = nonattn(b) + attn_decode(S = b·c) + allreduce(b)``.

Grid points outside the profiled ranges (decode b > 128 or c outside 32–4032,
the attention profile's limits; all-reduce sizes outside the profile) are not
extrapolated but skipped and counted as dropped, as are all grid points of a
group skipped (model not in the catalog, head counts disagreeing with it, or no
all-reduce rows for its TP; a warning says which).
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from planner.catalog import canonical_gpu_name, canonical_model_name, find_gpu, find_model
from planner.core.io import MAX_TABLE_BYTES, read_input_text
from planner.core.types import LLMSpec
from planner.costmodels.fitting import fit_relative_nonnegative, holdout_mask
from planner.costmodels.profiles import PROFILE_COLUMNS
from planner.errors import InputError

ATTENTION_FILE = "legacy/a100_attention_n_embd8192_q64_kv8_tp2.csv"
REFERENCE_GPU = "A100-80GB-SXM"  # GPU of the legacy attention profile (Vidur "a100", DGX)
REFERENCE_Q_HEADS_PER_GPU = 32
REFERENCE_KV_HEADS_PER_GPU = 4
REFERENCE_HEAD_DIM = 128

PREFILL_BATCH_SIZES = (1, 2, 4, 8, 16)
PROMPT_LENGTHS = (128, 256, 512, 1024, 2048, 4096)
DECODE_BATCH_SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
DECODE_CONTEXTS = (128, 256, 512, 1024, 2048, 4096)
ALLREDUCE_SMOOTHING_WINDOW = 5  # neighbouring profiled sizes in the running median

_ATTN_COLUMNS = ["is_prefill", "batch_size", "prefill_chunk_size", "kv_cache_size",
                 "time_stats.attn_decode.median", "time_stats.attn_prefill.median"]
_MLP_COLUMNS = ["n_head", "n_kv_head", "n_embd", "num_tokens", "num_tensor_parallel_workers", "time_stats.emb.median"]
_AR_COLUMNS = ["num_workers", "devices_per_node", "size", "time_stats.all_reduce.median"]


def _read_csv(path: Path, required: list[str]) -> pd.DataFrame:
    """Read a profiler CSV; a missing file or column is an `InputError` naming the file."""
    text = read_input_text(path, "a profile CSV", MAX_TABLE_BYTES)  # a regular UTF-8 file (planner.core.io)
    try:
        frame = pd.read_csv(io.StringIO(text))
    except (pd.errors.ParserError, pd.errors.EmptyDataError, ValueError) as exc:
        raise InputError(path, "", f"not a valid CSV ({str(exc).splitlines()[0][:200]})") from None
    for col in required:
        if col not in frame.columns:
            raise InputError(path, col, "required column is missing")
    if frame.empty:
        raise InputError(path, "", "no data rows")
    return frame


@dataclass(frozen=True)
class AttentionFit:
    """Attention time (ms) per layer per GPU for the reference shape (A100, 32 q / 4 kv heads, head_dim 128).

    ``decode = (d0, d1)``: ``d0 + d1·S``, S = Σ cached tokens over the batch.
    ``prefill = (p0, p1, p2, p3)``: ``p0 + p1·c² + p2·c·k + p3·c``, c new tokens
    over k cached ones.  Coefficients are fitted on the training rows; the
    MAPEs (%) are on held-out configurations.
    """

    decode: tuple[float, float]
    prefill: tuple[float, float, float, float]
    decode_holdout_mape: float
    prefill_holdout_mape: float
    max_decode_batch: int
    decode_context_range: tuple[int, int]
    prefill_chunk_range: tuple[int, int]

    def decode_ms(self, total_cached_tokens: float, scale: float = 1.0) -> float:
        """One decode call; ``scale`` multiplies the memory-bound term only."""
        d0, d1 = self.decode
        return d0 + scale * d1 * total_cached_tokens

    def prefill_ms(self, batch_size: int, chunk: float, cached: float = 0.0, scale: float = 1.0) -> float:
        """One varlen call over ``batch_size`` equal chunks; ``scale`` multiplies the compute terms only."""
        p0, p1, p2, p3 = self.prefill
        return p0 + scale * batch_size * (p1 * chunk**2 + p2 * chunk * cached + p3 * chunk)


def _attention_design(rows: pd.DataFrame, prefill: bool) -> np.ndarray:
    one = np.ones(len(rows))
    k = rows.kv_cache_size.to_numpy(float)
    if not prefill:
        return np.column_stack([one, rows.batch_size.to_numpy(float) * k])
    c = rows.prefill_chunk_size.to_numpy(float)
    return np.column_stack([one, c * c, c * k, c])


def fit_legacy_attention(path: Path | str, *, seed: int = 0) -> AttentionFit:
    """Fit `AttentionFit` on the legacy Vidur attention CSV (held-out split by `holdout_mask`)."""
    path = Path(path)
    table = _read_csv(path, _ATTN_COLUMNS)
    is_prefill = table.is_prefill.astype(str).str.lower() == "true"
    coefs, mapes = [], []
    for prefill, op, keys in ((False, "attn_decode", "batch_size"), (True, "attn_prefill", "prefill_chunk_size")):
        rows = table[is_prefill == prefill].reset_index(drop=True)
        ops = [f"time_stats.{name}.median" for name in (op, "attn_input_reshape", "attn_output_reshape")]
        y = rows[[c for c in ops if c in rows.columns]].fillna(0.0).sum(axis=1).to_numpy(float)
        if len(rows) < 8 or not np.all(y > 0):
            raise InputError(path, f"time_stats.{op}.median", "needs at least 8 rows, all with positive times")
        X = _attention_design(rows, prefill)
        held = holdout_mask(rows[keys].astype(str) + "-" + rows.kv_cache_size.astype(str), seed)
        beta = fit_relative_nonnegative(X[~held], y[~held])
        coefs.append(tuple(float(v) for v in beta))
        mapes.append(float(np.mean(np.abs(X[held] @ beta - y[held]) / y[held]) * 100.0))
    decode_rows, prefill_rows = table[~is_prefill], table[is_prefill]
    return AttentionFit(
        decode=coefs[0],  # type: ignore[arg-type]
        prefill=coefs[1],  # type: ignore[arg-type]
        decode_holdout_mape=mapes[0],
        prefill_holdout_mape=mapes[1],
        max_decode_batch=int(decode_rows.batch_size.max()),
        decode_context_range=(int(decode_rows.kv_cache_size.min()), int(decode_rows.kv_cache_size.max())),
        prefill_chunk_range=(int(prefill_rows.prefill_chunk_size.min()), int(prefill_rows.prefill_chunk_size.max())),
    )


@dataclass(frozen=True)
class Curve:
    """Piecewise-linear y(x) through sorted profiled points; `covers` says whether x is inside them."""

    x: np.ndarray
    y: np.ndarray

    def __call__(self, x: float) -> float:
        return float(np.interp(x, self.x, self.y))

    def covers(self, x: float) -> bool:
        return bool(self.x[0] <= x <= self.x[-1])


def _median_curve(x: pd.Series, y: pd.Series) -> Curve:
    med = pd.Series(y.to_numpy(float)).groupby(x.to_numpy(float)).median()
    return Curve(med.index.to_numpy(float), med.to_numpy(float))


@dataclass(frozen=True)
class LayerProfile:
    """Non-attention times (ms) of one model on one GPU at one TP degree, by num_tokens."""

    layer_ms: Curve  # one transformer layer, every op except emb
    emb_ms: Curve  # embedding lookup, once per forward pass
    n_head: int
    n_kv_head: int
    n_embd: int

    def forward_ms(self, num_tokens: float, num_layers: int) -> float:
        """Non-attention time of a forward pass over ``num_tokens`` tokens (ms)."""
        return num_layers * self.layer_ms(num_tokens) + self.emb_ms(num_tokens)


def read_mlp_profile(path: Path | str) -> dict[int, LayerProfile]:
    """Read one Vidur ``mlp.csv``: a `LayerProfile` per TP degree."""
    path = Path(path)
    table = _read_csv(path, _MLP_COLUMNS)
    ops = [c for c in table.columns if c.startswith("time_stats.") and c.endswith(".median") and ".emb." not in c]
    if not ops:
        raise InputError(path, "time_stats.<op>.median", "no per-layer operator columns")
    layer = table[ops].sum(axis=1)
    out: dict[int, LayerProfile] = {}
    for tp, idx in table.groupby("num_tensor_parallel_workers").groups.items():
        rows = table.loc[idx]
        out[int(tp)] = LayerProfile(
            layer_ms=_median_curve(rows.num_tokens, layer.loc[idx]),
            emb_ms=_median_curve(rows.num_tokens, rows["time_stats.emb.median"]),
            n_head=int(rows.n_head.iloc[0]),
            n_kv_head=int(rows.n_kv_head.iloc[0]),
            n_embd=int(rows.n_embd.iloc[0]),
        )
    return out


def _isotonic(values: np.ndarray) -> np.ndarray:
    """Least-squares non-decreasing fit (pool adjacent violators, equal weights)."""
    means: list[float] = []
    counts: list[int] = []
    for v in values:
        means.append(float(v))
        counts.append(1)
        while len(means) > 1 and means[-2] > means[-1]:
            n = counts[-2] + counts[-1]
            means[-2:] = [(means[-2] * counts[-2] + means[-1] * counts[-1]) / n]
            counts[-2:] = [n]
    return np.repeat(means, counts)


def read_allreduce(path: Path | str, tensor_parallel: int) -> Curve | None:
    """All-reduce time (ms) vs fp16 elements for ``tensor_parallel`` GPUs in one node (None if not profiled)."""
    path = Path(path)
    table = _read_csv(path, _AR_COLUMNS)
    rows = table[(table.num_workers == tensor_parallel) & (table.devices_per_node == tensor_parallel)]
    if rows.empty:
        return None
    curve = _median_curve(rows["size"], rows["time_stats.all_reduce.median"])
    smoothed = pd.Series(curve.y).rolling(ALLREDUCE_SMOOTHING_WINDOW, center=True, min_periods=1).median()
    return Curve(curve.x, _isotonic(smoothed.to_numpy()))


CPU_OVERHEAD_FILE = "legacy/a100_cpu_overheads.csv"
_HOST_TERMS = ["schedule_median", "sampler_e2e_median", "prepare_inputs_e2e_median", "process_model_outputs_median"]


@dataclass(frozen=True)
class CpuOverhead:
    """Per-iteration CPU overhead (ms) = host(b) + Ray communication(TP), fitted on Vidur's legacy file."""

    host: tuple[float, float]  # h0, h1: host_ms = h0 + h1·b
    ray_tp1: tuple[float, float]  # r0, r1 for TP = 1
    ray_multi: float  # mean Ray communication for TP > 1

    def ms(self, batch_size: float, tensor_parallel: int) -> float:
        host = self.host[0] + self.host[1] * batch_size
        ray = self.ray_multi if tensor_parallel > 1 else self.ray_tp1[0] + self.ray_tp1[1] * batch_size
        return host + ray


def fit_cpu_overhead(path: Path | str) -> CpuOverhead:
    path = Path(path)
    table = _read_csv(path, ["batch_size", "tensor_parallel_degree", "ray_comm_time_mean", *_HOST_TERMS])

    def line(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
        slope, intercept = np.polyfit(x, y, 1)
        return float(max(intercept, 0.0)), float(max(slope, 0.0))

    b = table.batch_size.to_numpy(float)
    host = line(b, table[_HOST_TERMS].sum(axis=1).to_numpy(float))
    single = table.tensor_parallel_degree == 1
    multi = ~single
    if not single.any() or not multi.any():
        raise InputError(path, "tensor_parallel_degree", "needs rows with TP = 1 and with TP > 1")
    ray_tp1 = line(b[single.to_numpy()], table.ray_comm_time_mean[single].to_numpy(float))
    return CpuOverhead(host, ray_tp1, float(table.ray_comm_time_mean[multi].mean()))


def _compose_group(
    spec: LLMSpec, gpu_name: str, tp: int, layers: LayerProfile, attention: AttentionFit, allreduce: Curve | None,
    overhead: CpuOverhead | None = None,
) -> tuple[list[dict], int]:
    """Rows of one (model, gpu, TP) group and the number of grid points dropped as out of range."""
    gpu, ref = find_gpu(gpu_name), find_gpu(REFERENCE_GPU)
    head = spec.head_dim / REFERENCE_HEAD_DIM
    decode_scale = (max(spec.num_kv_heads / tp, 1.0) / REFERENCE_KV_HEADS_PER_GPU * head
                    * ref.memory_bandwidth_gb_s / gpu.memory_bandwidth_gb_s)
    prefill_scale = (spec.num_attention_heads / tp / REFERENCE_Q_HEADS_PER_GPU * head
                     * ref.fp16_tflops / gpu.fp16_tflops)
    L = spec.num_layers

    def comm_ms(tokens: int) -> float | None:
        if allreduce is None:
            return 0.0
        size = tokens * spec.hidden_size
        return 2 * L * allreduce(size) if allreduce.covers(size) else None

    rows: list[dict] = []
    dropped = 0

    def add(phase: str, b: int, length: int, ms: float) -> None:
        if overhead is not None:
            ms += overhead.ms(b, tp)
        rows.append({"model": spec.name, "gpu": gpu_name, "tensor_parallel": tp, "phase": phase, "batch_size": b,
                     "tokens_per_request": float(length), "time_s": ms / 1000.0, "config_id": f"{phase}-{b}-{length}"})

    lo_chunk, hi_chunk = attention.prefill_chunk_range
    for b in PREFILL_BATCH_SIZES:
        for length in PROMPT_LENGTHS:
            tokens = b * length
            if not layers.layer_ms.covers(tokens):
                continue  # not part of the grid
            comm = comm_ms(tokens)
            if comm is None or not lo_chunk <= length <= hi_chunk:
                dropped += 1
                continue
            add("prefill", b, length,
                layers.forward_ms(tokens, L) + L * attention.prefill_ms(b, length, scale=prefill_scale) + comm)
    lo_ctx, hi_ctx = attention.decode_context_range
    for b in DECODE_BATCH_SIZES:
        for ctx in DECODE_CONTEXTS:
            comm = comm_ms(b)
            in_range = b <= attention.max_decode_batch and lo_ctx <= ctx <= hi_ctx and layers.layer_ms.covers(b)
            if comm is None or not in_range:
                dropped += 1
                continue
            add("decode", b, ctx, layers.forward_ms(b, L) + L * attention.decode_ms(b * ctx, scale=decode_scale) + comm)
    return rows, dropped


def _grid_size(layers: LayerProfile) -> int:
    prefill = sum(layers.layer_ms.covers(b * length) for b in PREFILL_BATCH_SIZES for length in PROMPT_LENGTHS)
    return prefill + len(DECODE_BATCH_SIZES) * len(DECODE_CONTEXTS)


def _name_filter(names: Iterable[str] | None, canonical: Callable[[str], str | None]) -> set[str] | None:
    return None if names is None else {(canonical(str(n)) or str(n)).lower() for n in names}


def read_vidur(
    root: Path | str,
    *,
    gpus: Iterable[str] | None = None,
    models: Iterable[str] | None = None,
    tensor_parallel: Iterable[int] | None = None,
    cpu_overhead: bool = True,
) -> tuple[pd.DataFrame, int]:
    """Compose the Vidur profiles under ``root`` into batch-profile rows (``time_s`` in seconds).

    ``root`` holds ``compute/``, ``legacy/`` and ``network/``.  ``gpus`` and
    ``models`` (catalog names, aliases or HF ids) and ``tensor_parallel``
    restrict the (model, gpu, TP) groups composed; ``cpu_overhead`` adds the
    per-iteration CPU overhead (module docstring).  Returns (rows in
    `PROFILE_COLUMNS`, number of grid points dropped; see the module docstring).
    Missing files raise `InputError` naming the file.
    """
    root = Path(root)
    if not root.is_dir():
        raise InputError(root, "", "Vidur profiling directory not found")
    mlp_files = sorted((root / "compute").glob("*/*/*/mlp.csv"))
    if not mlp_files:
        raise InputError(root / "compute", "", "no <gpu>/<org>/<model>/mlp.csv files found")
    attention = fit_legacy_attention(root / ATTENTION_FILE)
    overhead = fit_cpu_overhead(root / CPU_OVERHEAD_FILE) if cpu_overhead else None
    gpu_filter = _name_filter(gpus, canonical_gpu_name)
    model_filter = _name_filter(models, canonical_model_name)
    tp_filter = None if tensor_parallel is None else {int(t) for t in tensor_parallel}

    rows: list[dict] = []
    dropped = 0
    allreduce_cache: dict[tuple[str, int], Curve | None] = {}
    for mlp_path in mlp_files:
        gpu_dir, org, model_dir = mlp_path.parts[-4:-1]
        hf_id = f"{org}/{model_dir}"
        gpu_name = canonical_gpu_name(gpu_dir) or gpu_dir
        if gpu_filter is not None and gpu_name.lower() not in gpu_filter:
            continue
        if model_filter is not None and (canonical_model_name(hf_id) or hf_id).lower() not in model_filter:
            continue
        for tp, layers in sorted(read_mlp_profile(mlp_path).items()):
            if tp_filter is not None and tp not in tp_filter:
                continue
            spec, gpu = find_model(hf_id), find_gpu(gpu_name)
            problem = None
            if spec is None:
                problem = f"model {hf_id!r} is not in the catalog"
            elif (spec.num_attention_heads, spec.num_kv_heads, spec.hidden_size) != (
                layers.n_head, layers.n_kv_head, layers.n_embd
            ):
                problem = f"n_head/n_kv_head/n_embd disagree with the catalog entry {spec.name}"
            elif gpu is None or gpu.memory_bandwidth_gb_s is None or gpu.fp16_tflops is None:
                problem = f"GPU {gpu_dir!r} has no catalog bandwidth/TFLOPS to scale attention"
            allreduce = None
            if problem is None and tp > 1:
                ar_path = root / "network" / f"{gpu_dir}_dgx" / "all_reduce.csv"
                if (gpu_dir, tp) not in allreduce_cache:
                    allreduce_cache[(gpu_dir, tp)] = read_allreduce(ar_path, tp)
                allreduce = allreduce_cache[(gpu_dir, tp)]
                if allreduce is None:
                    problem = f"{ar_path} has no all-reduce rows with num_workers = devices_per_node = {tp}"
            if problem is not None:
                warnings.warn(f"{mlp_path}: TP{tp} skipped: {problem}", UserWarning, stacklevel=2)
                dropped += _grid_size(layers)
                continue
            group_rows, group_dropped = _compose_group(spec, gpu_name, tp, layers, attention, allreduce, overhead)
            rows.extend(group_rows)
            dropped += group_dropped
    return pd.DataFrame(rows, columns=PROFILE_COLUMNS), dropped
