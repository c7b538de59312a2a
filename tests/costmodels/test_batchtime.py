"""The batch-time model (planner/costmodels/batchtime.py): exact recovery, the batch formula, derived forms,
bad input, and the cross-validation figures of the shipped files recomputed from ../shared/data."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from support import assert_one_line, run_cli

from planner.costmodels.batchtime import (
    AllReduceTable,
    BatchTimeModel,
    check_rows,
    derive_forms,
    fit_batchtime,
)
from planner.costmodels.files import load_cost_model, save_cost_model
from planner.errors import InputError, PlannerError

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared" / "data"
needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/data not present")

TRUE = dict(overhead_s=0.004, prefill_base_s=0.002, prefill_s_per_token=3e-5, prefill_floor_tokens=256.0,
            prefill_s_per_token_sq=2e-9, prefill_s_per_token_context=1.5e-9, prefill_s_per_request=5e-4,
            decode_base_s=0.0, decode_s_per_request=2e-4, decode_s_per_kv_token=4e-8)
AR = AllReduceTable(tokens=[1.0, 64.0, 1024.0, 65536.0], seconds=[1e-4, 2e-4, 9e-4, 0.03])


def _synthetic_rows(model: BatchTimeModel) -> pd.DataFrame:
    """Rows generated from known coefficients: prefill (b, c, k) and decode (b, d) grids."""
    pre = [(b, c, k) for b in (1, 2, 4) for c in (64, 128, 512, 2048) for k in (0, 512, 1536)]
    dec = [(b, d) for b in (1, 3, 8, 32, 64) for d in (100, 700, 3000)]
    rows = pd.DataFrame({
        "phase": ["prefill"] * len(pre) + ["decode"] * len(dec),
        "batch_size": [p[0] for p in pre] + [d[0] for d in dec],
        "chunk_tokens": [float(p[1]) for p in pre] + [1.0] * len(dec),
        "context_tokens": [float(p[2]) for p in pre] + [float(d[1]) for d in dec],
        "config_id": [f"p{i}" for i in range(len(pre))] + [f"d{i}" for i in range(len(dec))],
        "time_s": 0.0, "allreduce_s": 0.0,
    })
    tokens = np.where(rows.phase == "prefill", rows.batch_size * rows.chunk_tokens, rows.batch_size)
    rows["allreduce_s"] = AR(tokens)
    rows["time_s"] = model.predict_rows(rows)
    return rows


def _truth(**changes) -> BatchTimeModel:
    return BatchTimeModel(model="toy", gpu="toy", tensor_parallel=2, source_kind="measured end-to-end",
                          allreduce=AR, **{**TRUE, **changes})


@pytest.mark.parametrize("changes", [{}, {"prefill_floor_tokens": 0.0, "decode_base_s": 0.003, "prefill_base_s": 0.0}])
def test_fit_on_synthetic_rows_recovers_the_coefficients(changes):
    truth = _truth(**changes)
    rows = _synthetic_rows(truth)
    fitted = fit_batchtime(rows, model="toy", gpu="toy", tensor_parallel=2, source_kind="measured end-to-end",
                           source="synthetic", allreduce=AR)
    for name in TRUE:
        want, got = getattr(truth, name), getattr(fitted, name)
        assert got == pytest.approx(want, rel=1e-6, abs=1e-12), name
    for phase in ("prefill", "decode"):
        assert fitted.fit.phases[phase].cv["configuration"].mape < 1e-4
        assert fitted.fit.phases[phase].cv["batch_size"].mape < 1e-4


def test_a_mixed_batch_is_the_sum_of_its_parts_with_one_overhead():
    m = _truth(decode_base_s=0.001)
    chunks, decodes = [(256.0, 1000.0), (64.0, 0.0)], [300.0, 900.0, 50.0]
    tokens = 256 + 64 + 3
    prefill_part = (m.prefill_base_s + m.prefill_s_per_token * max(320, m.prefill_floor_tokens)
                    + m.prefill_s_per_token_sq * (256**2 + 64**2) + m.prefill_s_per_token_context * 256 * 1000
                    + m.prefill_s_per_request * 2)
    decode_part = m.decode_base_s + m.decode_s_per_request * 3 + m.decode_s_per_kv_token * 1250
    want = m.overhead_s + prefill_part + decode_part + float(AR(tokens))
    assert m.batch_time(chunks, decodes) == pytest.approx(want, rel=1e-12)
    # one phase alone: the same parts, the same single overhead
    assert m.batch_time((), decodes) == pytest.approx(m.overhead_s + decode_part + float(AR(3)), rel=1e-12)
    assert m.decode_step_time(3, 400.0) == pytest.approx(m.batch_time((), [400.0] * 3), rel=1e-12)
    assert m.prefill_time(2, 512, 100) == pytest.approx(m.batch_time([(512.0, 100.0)] * 2), rel=1e-12)
    assert m.batch_time() == 0.0


def test_derived_aladdin_and_bilinear_are_exact_when_the_model_has_their_form():
    # no quadratic, floor, per-request, chunk or all-reduce terms: Aladdin's Eqs. 2–3 hold exactly
    truth = BatchTimeModel(model="toy", gpu="toy", tensor_parallel=1, source_kind="measured end-to-end",
                           overhead_s=0.01, prefill_base_s=0.005, prefill_s_per_token=4e-5, decode_base_s=0.0,
                           decode_s_per_request=3e-4, decode_s_per_kv_token=5e-8)
    rows = _synthetic_rows(truth)
    rows["allreduce_s"] = 0.0
    rows = rows[rows.context_tokens.where(rows.phase == "prefill", 0) == 0]
    rows["time_s"] = truth.predict_rows(rows)
    derived = derive_forms(truth, rows, layers=40)
    a = derived["aladdin"].coefficients
    assert a["prefill_s_per_token"] == pytest.approx(4e-5, rel=1e-6)
    assert a["prefill_base_s"] == pytest.approx(0.015, rel=1e-6)
    assert a["decode_s_per_request"] == pytest.approx(3e-4, rel=1e-6)
    assert a["decode_s_per_context_token"] == pytest.approx(5e-8, rel=1e-6)
    assert a["decode_base_s"] == pytest.approx(0.01, rel=1e-6)
    for kind in ("aladdin", "bilinear", "infermax"):
        assert max(derived[kind].approximation_mape.values()) < 1e-4, kind


def test_derived_forms_state_their_error_against_the_measured_rows():
    truth = _truth()
    rows = _synthetic_rows(truth)
    rows["time_s"] *= np.where(np.arange(len(rows)) % 2 == 0, 1.1, 1.0)  # "measured" = model + 10 % on half
    derived = derive_forms(truth, rows, layers=40)
    al = derived["aladdin"]
    pre = rows[rows.phase == "prefill"]
    coef = al.coefficients
    pred = coef["prefill_s_per_token"] * pre.batch_size * pre.chunk_tokens + coef["prefill_base_s"]
    want = float(np.mean(np.abs(pred - pre.time_s) / pre.time_s) * 100)
    assert al.approximation_mape["prefill"] == pytest.approx(want, abs=1e-3)


def test_a_model_file_round_trips(tmp_path):
    rows = _synthetic_rows(_truth())
    fitted = fit_batchtime(rows, model="toy", gpu="toy", tensor_parallel=2, source_kind="measured end-to-end",
                           source="synthetic", allreduce=AR)
    path = save_cost_model(fitted, tmp_path / "batchtime" / "toy.yaml")
    assert load_cost_model(path) == fitted


def test_bad_rows_are_refused_with_the_field_named():
    rows = _synthetic_rows(_truth())
    with pytest.raises(InputError, match="time_s: required column is missing"):
        check_rows(rows.drop(columns="time_s"), "t.csv")
    bad = rows.copy()
    bad.loc[3, "time_s"] = 0.0
    with pytest.raises(InputError, match=r"row 4, column time_s: must be a positive time"):
        check_rows(bad, "t.csv")
    with pytest.raises(InputError, match="no decode rows"):
        check_rows(rows[rows.phase == "prefill"], "t.csv")
    one = rows[(rows.phase == "prefill") | (rows.batch_size == 8)]
    with pytest.raises(PlannerError, match="decode rows cannot identify the 3 fitted coefficients"):
        fit_batchtime(one, model="toy", gpu="toy", tensor_parallel=2, source_kind="measured end-to-end", source="s")


def test_cli_fit_of_a_single_batch_size_table_is_one_line(tmp_path, monkeypatch, capsys):
    table = tmp_path / "profile.csv"
    lines = ["phase,batch_size,tokens_per_request,time_ms"]
    lines += [f"prefill,1,{c},{10 + 0.01 * c}" for c in (128, 256, 512, 1024)]
    lines += [f"decode,4,{c},{20 + 0.001 * c}" for c in (128, 256, 512, 1024)]
    table.write_text("\n".join(lines) + "\n")
    code, _, err = run_cli(monkeypatch, capsys, "fit", str(table), "--source-format", "table", "--kind", "batchtime",
                           "--out-dir", str(tmp_path / "out"))
    assert_one_line(code, err, "decode rows cannot identify", "1 batch sizes")
    assert not (tmp_path / "out" / "batchtime").exists()


# ---------------------------------------------------------------- shipped files vs ../shared/data


def _assert_same_fit(shipped: BatchTimeModel, recomputed: BatchTimeModel) -> None:
    for phase, ph in recomputed.fit.phases.items():
        got = shipped.fit.phases[phase]
        assert got.rows == ph.rows and got.train_mape == pytest.approx(ph.train_mape, abs=1e-3)
        for scheme, cv in ph.cv.items():
            file_cv = got.cv[scheme]
            assert (file_cv.folds, file_cv.groups, file_cv.rows, file_cv.unidentifiable_folds) == (
                cv.folds, cv.groups, cv.rows, cv.unidentifiable_folds), (phase, scheme)
            assert file_cv.mape == pytest.approx(cv.mape, abs=1e-3), (phase, scheme)
            assert file_cv.max_ape == pytest.approx(cv.max_ape, abs=1e-3), (phase, scheme)
        assert set(got.forms_cv) == set(ph.forms_cv), phase
        for form, held in ph.forms_cv.items():
            assert got.forms_cv[form].direct == pytest.approx(held.direct, abs=1e-3), (phase, form)
            assert got.forms_cv[form].derived == pytest.approx(held.derived, abs=1e-3), (phase, form)
    for name in ("overhead_s", "prefill_s_per_token", "prefill_s_per_token_sq", "decode_s_per_request",
                 "decode_s_per_kv_token", "prefill_floor_tokens"):
        assert getattr(shipped, name) == pytest.approx(getattr(recomputed, name), rel=1e-6, abs=1e-12), name


@needs_shared
@pytest.mark.parametrize("group", [("Llama-2-70B", "A100-80GB-SXM", 2), ("BLOOM-176B", "H100-80GB-SXM", 8)])
def test_splitwise_cross_validation_figures_match_the_shipped_files(group):
    from planner.costmodels.batchtime_sources import fit_group, splitwise_groups
    from planner.costmodels.files import find_cost_model_path
    from planner.costmodels.profiles import read_splitwise

    profile, _ = read_splitwise(SHARED / "profiling/splitwise_sim/perf_model.csv")
    g = next(g for g in splitwise_groups(profile) if (g.model, g.gpu, g.tensor_parallel) == group)
    path = find_cost_model_path("batchtime", *group, ROOT / "models")
    assert path is not None, group
    shipped = load_cost_model(path)
    assert shipped.source_kind == "measured end-to-end"
    _assert_same_fit(shipped, fit_group(g, source="recomputed", seed=shipped.fit.seed))


@needs_shared
@pytest.mark.parametrize("group", [("CodeLlama-34B", "A100-80GB-SXM", 2), ("Llama-2-7B", "H100-80GB-SXM", 1)])
def test_vidur_cross_validation_figures_match_the_shipped_files(group):
    from planner.costmodels.batchtime_sources import fit_group, vidur_groups
    from planner.costmodels.files import find_cost_model_path

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        groups, _ = vidur_groups(SHARED / "profiling/vidur", only={group})
    g = next(g for g in groups if (g.model, g.gpu, g.tensor_parallel) == group)
    shipped = load_cost_model(find_cost_model_path("batchtime", *group, ROOT / "models"))
    assert shipped.source_kind == "kernel composition"
    codes = {c.code for c in shipped.caveats}
    # attention is measured for the reference shape only (A100, 32 q / 4 KV heads per GPU): the others say so
    assert ("attention_extrapolated" in codes) == bool(g.attention_added)
    assert ("attention_extrapolated" in codes) == (group != ("CodeLlama-34B", "A100-80GB-SXM", 2))
    # the scored rows are measured kernel rows only: every non-attention row's time is MLP + emb + AR + CPU
    # at a profiled num_tokens point (no interpolation in tokens)
    _assert_same_fit(shipped, fit_group(g, source="recomputed", seed=shipped.fit.seed))


@needs_shared
def test_every_shipped_batchtime_file_states_its_held_out_error_and_caveats():
    paths = sorted((ROOT / "models/batchtime").glob("*.yaml"))
    assert len(paths) >= 50
    for path in paths:
        m = load_cost_model(path)
        for phase in ("prefill", "decode"):
            cv = m.fit.phases[phase].cv["configuration"]
            assert cv.mape is not None and cv.rows > 0, (path, phase)
            above = cv.mape > m.fit.target_mape_pct
            assert above == any(c.code == "above_target" and phase in c.detail for c in m.caveats), (path, phase)
        assert set(m.derived) >= {"aladdin", "bilinear"}, path


def test_without_measured_attention_the_derived_error_is_stated_against_the_model():
    truth = _truth()
    rows = _synthetic_rows(truth)
    derived = derive_forms(truth, rows, layers=40, against_model=True)
    assert {d.error_basis for d in derived.values()} == {"batch-time model"}
    # the projection grid spreads decode contexts: a context-free Aladdin decode would miss; this one fits k3
    assert derived["aladdin"].coefficients["decode_s_per_context_token"] == pytest.approx(4e-8, rel=0.05)
    measured = derive_forms(truth, rows, layers=40)
    assert {d.error_basis for d in measured.values()} == {"measured rows"}


def test_cli_fit_of_a_user_table_writes_a_cross_validated_file(tmp_path, monkeypatch, capsys):
    import json

    truth = BatchTimeModel(model="toy", gpu="toy", tensor_parallel=1, source_kind="measured end-to-end",
                           overhead_s=0.01, prefill_s_per_token=4e-5, prefill_s_per_token_sq=1e-9,
                           decode_s_per_request=3e-4, decode_s_per_kv_token=5e-8)
    lines = ["model,gpu,tensor_parallel,phase,batch_size,tokens_per_request,time_s"]
    lines += [f"Llama-2-7B,A100-80GB-SXM,1,prefill,1,{c},{truth.prefill_time(1, c):.12g}"
              for c in (128, 256, 1024, 4096)]
    lines += [f"Llama-2-7B,A100-80GB-SXM,1,decode,{b},{d},{truth.decode_step_time(b, d):.12g}"
              for b in (1, 4, 16) for d in (200, 900, 3000)]
    table = tmp_path / "profile.csv"
    table.write_text("\n".join(lines) + "\n")
    code, out, err = run_cli(monkeypatch, capsys, "fit", str(table), "--source-format", "table", "--kind", "batchtime",
                             "--out-dir", str(tmp_path / "out"), "--json")
    assert code == 0, err
    data = json.loads(out)
    (row,) = data["models"]
    assert row["status"] == "written" and row["decode_cv_configuration_mape"] < 1e-3
    fitted = load_cost_model(row["file"])
    assert fitted.decode_s_per_kv_token == pytest.approx(5e-8, rel=1e-6)
    assert fitted.derived["infermax"].coefficients["n_layers"] == 32  # the catalog's Llama-2-7B
