"""Tests of `planner.costmodels.vidur`: composing Vidur operator profiles into batch times.

Tests marked ``shared_data`` read ../shared/data/profiling/vidur (read-only,
never copied) and are skipped when it is absent.  The synthetic tests build a
tiny Vidur-shaped tree in ``tmp_path`` with exactly known times.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from planner.catalog import find_model
from planner.costmodels.fitting import fit_groups
from planner.costmodels.profiles import PROFILE_COLUMNS
from planner.costmodels.vidur import (
    ATTENTION_FILE,
    fit_legacy_attention,
    read_allreduce,
    read_mlp_profile,
    read_vidur,
    CPU_OVERHEAD_FILE,
    fit_cpu_overhead,
)
from planner.errors import InputError

VIDUR = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "profiling" / "vidur"
needs_data = pytest.mark.shared_data


@pytest.fixture(scope="module")
def vidur_root() -> Path:
    if not VIDUR.is_dir():
        pytest.skip("../shared/data/profiling/vidur is absent")
    return VIDUR


@pytest.fixture(scope="module")
def composed(vidur_root: Path) -> tuple[pd.DataFrame, int]:
    return read_vidur(vidur_root)


def _models(result):
    """`fit_groups` returns the fitted list, or (fitted, skipped) in newer versions."""
    return result[0] if isinstance(result, tuple) else result


# --------------------------------------------------------------------------- real data


@needs_data
def test_rows_follow_schema_and_grid(composed):
    rows, dropped = composed
    assert list(rows.columns) == PROFILE_COLUMNS
    assert set(rows.phase) == {"prefill", "decode"}
    assert "Llama-2-7B" in set(rows.model) and {"A100-80GB-SXM", "H100-80GB-SXM"} <= set(rows.gpu)
    assert (rows.time_s > 0).all()
    # Phi-2 is profiled at TP1 only; Llama-3 has no H100 profile.
    assert set(rows[rows.model == "Phi-2"].tensor_parallel) == {1}
    assert rows[(rows.model == "Llama-3-8B") & (rows.gpu == "H100-80GB-SXM")].empty
    decode = rows[rows.phase == "decode"]
    assert decode.batch_size.max() == 128 and decode.tokens_per_request.max() == 2048  # attention profile limits
    assert not rows.duplicated(["model", "gpu", "tensor_parallel", "config_id"]).any()
    assert dropped > 0


@needs_data
def test_single_group_filters_and_dropped_count(vidur_root):
    rows, dropped = read_vidur(vidur_root, gpus=["a100"], models=["meta-llama/Llama-2-7b-hf"], tensor_parallel=[1])
    assert set(zip(rows.model, rows.gpu, rows.tensor_parallel)) == {("Llama-2-7B", "A100-80GB-SXM", 1)}
    # prefill: the 20 (b, l) with b·l ≤ 4096; decode: 9×6 grid minus b=256 (6) and c=4096 (8 more).
    assert (rows.phase == "prefill").sum() == 20 and (rows.phase == "decode").sum() == 40
    assert dropped == 14


@needs_data
def test_decode_time_grows_with_context_and_batch(composed):
    rows, _ = composed
    for key, group in rows[rows.phase == "decode"].groupby(["model", "gpu", "tensor_parallel"]):
        table = group.pivot_table(index="batch_size", columns="tokens_per_request", values="time_s")
        assert (np.diff(table.to_numpy(), axis=1) > 0).all(), key  # strictly in context
        assert (table.loc[128] > table.loc[32]).all() and (table.loc[32] > table.loc[1]).all(), key
        # Raw mlp.csv medians are locally non-monotone in num_tokens (kept, not smoothed): allow 5 %.
        steps = table.to_numpy()[1:] / table.to_numpy()[:-1]
        assert steps.min() > 0.95, key


@needs_data
def test_decode_row_is_the_sum_of_its_parts(vidur_root, composed):
    """Llama-2-7B, A100, TP1, b=1, c=1024: recompute from the raw CSV (ms → s)."""
    rows, _ = composed
    raw = pd.read_csv(vidur_root / "compute/a100/meta-llama/Llama-2-7b-hf/mlp.csv")
    one = raw[(raw.num_tokens == 1) & (raw.num_tensor_parallel_workers == 1)]
    medians = one.filter(like=".median")
    layer_ms = medians.drop(columns="time_stats.emb.median").sum(axis=1).median()
    emb_ms = one["time_stats.emb.median"].median()
    d0, d1 = fit_legacy_attention(vidur_root / ATTENTION_FILE).decode
    attn_ms = d0 + d1 * 1024 * (32 / 4)  # 32 KV heads per GPU vs the profile's 4, head_dim 128 both
    # per-iteration CPU overhead at b = 1, TP 1 (host + Ray terms of the legacy overhead file)
    overhead_ms = fit_cpu_overhead(vidur_root / CPU_OVERHEAD_FILE).ms(1, 1)
    assert 1.0 < overhead_ms < 3.0  # the file's TP1 rows: ~2.4 ms at b = 8
    expected_s = (32 * (layer_ms + attn_ms) + emb_ms + overhead_ms) / 1000.0
    row = rows[(rows.model == "Llama-2-7B") & (rows.gpu == "A100-80GB-SXM") & (rows.tensor_parallel == 1)
               & (rows.config_id == "decode-1-1024")]
    assert len(row) == 1
    assert row.time_s.iloc[0] == pytest.approx(expected_s, rel=1e-9)
    assert 0.005 < expected_s < 0.02  # a 7B decode step on an A100 is ~10 ms


@needs_data
def test_tp2_non_attention_below_tp1(vidur_root):
    for path in sorted((vidur_root / "compute").glob("*/*/*/mlp.csv")):
        profiles = read_mlp_profile(path)
        if 2 not in profiles:
            continue
        for tokens in (1, 64, 512, 4096):
            assert profiles[2].layer_ms(tokens) < profiles[1].layer_ms(tokens), (path, tokens)


@needs_data
def test_h100_prefill_faster_than_a100(composed):
    rows, _ = composed
    pre = rows[(rows.phase == "prefill") & (rows.model == "Llama-2-70B")]
    pair = pre.pivot_table(index=["tensor_parallel", "config_id"], columns="gpu", values="time_s").dropna()
    assert len(pair) > 50
    assert (pair["H100-80GB-SXM"] < pair["A100-80GB-SXM"]).all()


@needs_data
def test_attention_fit_reproduces_held_out_legacy_rows(vidur_root):
    fit = fit_legacy_attention(vidur_root / ATTENTION_FILE)
    # Measured (seed 0): decode 10.7 %, prefill 5.7 % held-out MAPE.
    assert fit.decode_holdout_mape < 12.0
    assert fit.prefill_holdout_mape < 7.0
    # Decode is memory bound: one token's K+V per layer per GPU is 2·4·128·2 B = 2048 B.
    bandwidth_gb_s = 2048 / (fit.decode[1] * 1e-3) / 1e9
    assert 0.5 * 2039 < bandwidth_gb_s < 2039
    assert fit.max_decode_batch == 128 and fit.decode_context_range == (32, 4032)


@needs_data
def test_aladdin_fit_on_llama2_7b_a100_tp1(vidur_root):
    rows, dropped = read_vidur(vidur_root, gpus=["A100-80GB-SXM"], models=["Llama-2-7B"], tensor_parallel=[1])
    fitted = _models(fit_groups(rows, "aladdin", source="vidur", dropped_rows=dropped))
    assert len(fitted) == 1
    model = fitted[0]
    assert model.prefill_s_per_token > 0 and model.decode_base_s > 0
    # Measured (seed 0): prefill held-out MAPE 5.98 %, decode 1.86 %.
    assert model.fit.phases["decode"].holdout_mape < 3.0
    assert model.fit.phases["prefill"].holdout_mape < 8.0


@needs_data
def test_allreduce_curve_is_non_decreasing(vidur_root):
    curve = read_allreduce(vidur_root / "network/a100_dgx/all_reduce.csv", 8)
    assert curve is not None and (np.diff(curve.y) >= 0).all()
    assert read_allreduce(vidur_root / "network/h100_dgx/all_reduce.csv", 16) is None


@needs_data
def test_missing_files_raise_input_error_naming_the_file(vidur_root, tmp_path):
    root = tmp_path / "vidur"
    root.mkdir()
    (root / "compute").symlink_to(vidur_root / "compute")  # a link, not a copy
    with pytest.raises(InputError, match="a100_attention_n_embd8192_q64_kv8_tp2.csv"):
        read_vidur(root, models=["Llama-2-7B"])
    (root / "legacy").symlink_to(vidur_root / "legacy")
    with pytest.raises(InputError, match="a100_dgx/all_reduce.csv"):
        read_vidur(root, models=["Llama-2-7B"], gpus=["a100"], tensor_parallel=[2])
    rows, _ = read_vidur(root, models=["Llama-2-7B"], gpus=["a100"], tensor_parallel=[1])  # TP1 needs no network
    assert len(rows) == 60


# --------------------------------------------------------------------------- synthetic data


def _write_synthetic_tree(root: Path) -> None:
    """A Vidur-shaped tree whose times are exact: layer = 0.1 + 0.001·n ms, emb = 0.01 ms,
    decode attention = 0.02 + 1e-6·b·kv ms, prefill attention = 0.02 + 1e-7·c² + 1e-5·c ms."""
    tokens = np.array([1, 64, 1024, 4096])
    mlp = pd.DataFrame({
        "time_stats.emb.median": 0.01, "time_stats.mlp_up_proj.median": 0.05 + 0.001 * tokens,
        "time_stats.add.median": 0.05, "n_head": 32, "n_kv_head": 32, "n_embd": 4096,
        "num_tokens": tokens, "num_tensor_parallel_workers": 1,
    })
    for hf_id in ("meta-llama/Llama-2-7b-hf", "acme/not-a-catalog-model"):
        (root / "compute/a100" / hf_id).mkdir(parents=True)
        mlp.to_csv(root / "compute/a100" / hf_id / "mlp.csv", index=False)
    decode = pd.DataFrame([(b, 0, kv, False) for b in (1, 2, 4, 8, 16, 32, 64, 100, 128) for kv in (32, 512, 2048, 4032)],
                          columns=["batch_size", "prefill_chunk_size", "kv_cache_size", "is_prefill"])
    decode["time_stats.attn_decode.median"] = 0.02 + 1e-6 * decode.batch_size * decode.kv_cache_size
    prefill = pd.DataFrame([(1, c, kv, True) for c in (64, 256, 1024, 2048, 4096) for kv in (0, 32)],
                           columns=["batch_size", "prefill_chunk_size", "kv_cache_size", "is_prefill"])
    c = prefill.prefill_chunk_size
    prefill["time_stats.attn_prefill.median"] = 0.02 + 1e-7 * c**2 + 1e-5 * c
    (root / "legacy").mkdir()
    pd.concat([decode, prefill]).to_csv(root / ATTENTION_FILE, index=False)


def test_synthetic_composition_is_exact(tmp_path):
    _write_synthetic_tree(tmp_path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rows, dropped = read_vidur(tmp_path, cpu_overhead=False)
    assert any("not-a-catalog-model" in str(w.message) for w in caught)
    assert set(rows.model) == {"Llama-2-7B"}
    layers = find_model("Llama-2-7B").num_layers
    by_id = rows.set_index("config_id").time_s

    def layer_ms(n: int) -> float:  # the synthetic tokens grid makes interpolation exact only at its points
        return float(np.interp(n, [1, 64, 1024, 4096], [0.1 + 0.001 * t for t in (1, 64, 1024, 4096)]))

    # decode b=1, c=1024: KV scale 32/4 = 8 on the memory-bound term only.
    expected = layers * (layer_ms(1) + 0.02 + 8 * 1e-6 * 1024) + 0.01
    assert by_id["decode-1-1024"] * 1000 == pytest.approx(expected, rel=1e-6)
    # prefill b=4, l=256: one varlen call, intercept once; query-head scale 32/32 = 1.
    expected = layers * (layer_ms(1024) + 0.02 + 4 * (1e-7 * 256**2 + 1e-5 * 256)) + 0.01
    assert by_id["prefill-4-256"] * 1000 == pytest.approx(expected, rel=1e-6)
    # Both groups request 20 prefill + 54 decode points; the composed group drops 14 decode
    # points, the skipped (non-catalog) group all 74.
    assert len(rows) == 60 and dropped == 14 + 74


def test_missing_root_raises_input_error(tmp_path):
    with pytest.raises(InputError, match="nowhere"):
        read_vidur(tmp_path / "nowhere")
    (tmp_path / "compute").mkdir()
    with pytest.raises(InputError, match="compute"):
        read_vidur(tmp_path)
