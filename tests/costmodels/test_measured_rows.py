"""Each Aladdin / bilinear / hetero file states its own error against measured rows, and its caveats
(planner/costmodels/measured_error.py, models/annotate_measured.py)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import yaml
from support import REPO

from planner.costmodels import cost_model_caveats
from planner.costmodels.batchtime import TARGET_MAPE_PCT
from planner.costmodels.batchtime_sources import GroupRows
from planner.costmodels.files import cost_model_filename, load_cost_model
from planner.costmodels.measured_error import annotate
from planner.costmodels.models import AladdinCostModel
from planner.errors import InputError

MODELS = REPO / "models"
FORM_FILES = sorted(p for kind in ("aladdin", "bilinear", "hetero") for p in (MODELS / kind).glob("*.yaml"))
COEFFICIENT_FREE = {"measured_rows", "caveats"}


def _script():
    spec = importlib.util.spec_from_file_location("annotate_measured", MODELS / "annotate_measured.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ---- recomputed from ../shared/data ------------------------------------------------------------

#: Splitwise rows; Vidur rows with measured attention (chunked prefill); Vidur rows without attention
#: (scored against the batch-time model); the same configurations' bilinear and hetero files.
RECOMPUTED = {("Llama-2-70B", "A100-80GB-SXM", 4), ("CodeLlama-34B", "A100-80GB-SXM", 2),
              ("Llama-2-7B", "A100-80GB-SXM", 1)}


def test_shipped_measured_rows_sections_are_recomputed_from_the_shared_data(shared_data):
    got = _script().annotated(MODELS, shared_data, only=RECOMPUTED)
    assert len(got) == 9  # 3 configurations x aladdin, bilinear, hetero
    for path, shipped, recomputed in got:
        assert shipped.measured_rows == recomputed.measured_rows, path.name
        assert shipped.caveats == recomputed.caveats, path.name
    bases = {(p.parent.name, m.model): m.measured_rows.basis for p, m, _ in got}
    assert bases[("aladdin", "Llama-2-70B")] == bases[("aladdin", "CodeLlama-34B")] == "measured rows"
    assert bases[("aladdin", "Llama-2-7B")] == "batch-time model"


def test_aladdin_measured_figures_agree_with_an_independent_evaluation(shared_data):
    """The file's MAPE with the model's own Eq. 2 / Eq. 3 methods, row by row; the form's CV equals the
    ``forms_cv.direct`` figure the batch-time fitter computed on the same folds."""
    from planner.costmodels.measured_error import load_groups

    key = ("Llama-2-70B", "A100-80GB-SXM", 4)
    group, _ = next(iter(load_groups(shared_data, only={key}).values()))
    model = load_cost_model(MODELS / cost_model_filename("aladdin", *key))
    bt = load_cost_model(MODELS / cost_model_filename("batchtime", *key))
    rows = group.rows
    for phase in ("prefill", "decode"):
        part = rows[rows.phase == phase]
        if phase == "prefill":
            pred = [model.prefill_time(b * c) for b, c in zip(part.batch_size, part.chunk_tokens)]
        else:
            pred = [model.decode_time(b, b * d) for b, d in zip(part.batch_size, part.context_tokens)]
        ape = np.abs(np.array(pred) - part.time_s.to_numpy()) / part.time_s.to_numpy() * 100
        stated = model.measured_rows.phases[phase]
        assert stated.rows == len(part)
        assert stated.mape == pytest.approx(ape.mean(), abs=1e-4)
        assert stated.max_ape == pytest.approx(ape.max(), abs=1e-4)
        assert stated.cv_mape == pytest.approx(bt.fit.phases[phase].forms_cv["aladdin"].direct, abs=1e-4)


# ---- every shipped file --------------------------------------------------------------------------

@pytest.mark.parametrize("path", FORM_FILES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_shipped_form_file_states_its_measured_rows_error_and_caveats(path):
    m = load_cost_model(path)
    assert m.measured_rows is not None and m.caveats is not None, f"{path.name}: run models/annotate_measured.py"
    codes = {c.code for c in m.caveats}
    section = m.measured_rows
    if section.basis == "none":
        assert not section.phases and "no_measured_rows" in codes
        return
    assert set(section.phases) == {"prefill", "decode"}
    for e in section.phases.values():
        assert e.rows > 0 and e.max_ape >= e.mape > 0
    if section.basis == "measured rows":
        assert all(e.cv_mape is not None for e in section.phases.values())
    else:  # the rows of this shape hold no attention
        assert {"attention_extrapolated", "attention_not_scored"} <= codes
    worst = max(max(e.mape, e.cv_mape or 0.0) for e in section.phases.values())
    assert ("above_target" in codes) == (worst > TARGET_MAPE_PCT)


def test_v100_13b_and_published_files_carry_their_caveats():
    v100 = sorted((MODELS / "hetero").glob("*v100*.yaml"))
    assert len(v100) == 4
    for path in v100:
        m = load_cost_model(path)
        codes = [c.code for c in m.caveats]
        assert {"derived_from_other_gpu", "no_measured_rows", "attention_extrapolated"} <= set(codes), path.name
        assert m.measured_rows.basis == "none"
        assert any(line.startswith("derived_from_other_gpu: no V100 data") for line in cost_model_caveats(m))
    thirteen = sorted((MODELS / "aladdin").glob("llama-2-13b__*.yaml"))
    assert len(thirteen) == 8
    for path in thirteen:
        m = load_cost_model(path)
        assert {"derived_from_other_model", "no_measured_rows"} <= {c.code for c in m.caveats}, path.name
        assert m.measured_rows.basis == "none" and "llama-2-7b" in m.measured_rows.note
    published = load_cost_model(MODELS / "bilinear/qwen2.5-7b__v100-32gb-sxm2__tp2.yaml")
    assert {"published_coefficients", "no_measured_rows"} <= {c.code for c in published.caveats}


# ---- the computation on synthetic rows -----------------------------------------------------------

def _aladdin(**kw) -> AladdinCostModel:
    base = dict(model="Llama-2-7B", gpu="A100-80GB-SXM", tensor_parallel=1, prefill_s_per_token=1e-4,
                prefill_base_s=0.02, decode_s_per_request=2e-4, decode_s_per_context_token=3e-7, decode_base_s=0.015,
                kv_bytes_per_token=524288.0)
    return AladdinCostModel(**(base | kw))


def _rows(model: AladdinCostModel, factor: float) -> pd.DataFrame:
    """Rows ``factor`` x the model's own times: prefill b x c, decode b at context d."""
    pre = [(b, c) for b in (1, 2, 4, 8) for c in (128, 512, 2048)]
    dec = [(b, d) for b in (1, 4, 16, 64) for d in (256, 1024, 4096)]
    return pd.DataFrame({
        "phase": ["prefill"] * len(pre) + ["decode"] * len(dec),
        "batch_size": [b for b, _ in pre] + [b for b, _ in dec],
        "chunk_tokens": [float(c) for _, c in pre] + [1.0] * len(dec),
        "context_tokens": [0.0] * len(pre) + [float(d) for _, d in dec],
        "time_s": [factor * model.prefill_time(b * c) for b, c in pre]
        + [factor * model.decode_time(b, b * d) for b, d in dec],
        "allreduce_s": 0.0,
        "config_id": [f"p{b}-{c}" for b, c in pre] + [f"d{b}-{d}" for b, d in dec]})


@pytest.mark.parametrize("factor", [1.0, 1.25])
def test_file_error_and_form_cv_on_rows_of_known_error(factor):
    model = _aladdin()
    group = GroupRows(model=model.model, gpu=model.gpu, tensor_parallel=1, rows=_rows(model, factor),
                      source_kind="measured end-to-end")
    out = annotate(model, group, "synthetic rows")
    expected = abs(1 - factor) / factor * 100  # measured f·t, predicted t: |t − f·t| / (f·t)
    for e in out.measured_rows.phases.values():
        assert e.rows == 12
        assert e.mape == pytest.approx(expected, abs=1e-4) and e.max_ape == pytest.approx(expected, abs=1e-4)
        assert e.cv_mape == pytest.approx(0.0, abs=1e-3)  # the rows are exactly of the form: the refit recovers them
    codes = [c.code for c in out.caveats]
    assert ("above_target" in codes) == (expected > TARGET_MAPE_PCT)
    # every coefficient unchanged
    assert out.model_dump(exclude=COEFFICIENT_FREE) == model.model_dump(exclude=COEFFICIENT_FREE)


def test_no_rows_means_basis_none_and_a_caveat():
    out = annotate(_aladdin(), None, "")
    assert out.measured_rows.basis == "none" and out.measured_rows.phases == {}
    assert [c.code for c in out.caveats] == ["no_measured_rows"]


# ---- file format -------------------------------------------------------------------------------

def test_old_format_file_without_the_new_sections_still_loads(tmp_path):
    src = MODELS / "aladdin/llama-2-70b__a100-80gb-sxm__tp4.yaml"
    data = yaml.safe_load(src.read_text())
    assert COEFFICIENT_FREE <= set(data)
    old = {k: v for k, v in data.items() if k not in COEFFICIENT_FREE}
    path = tmp_path / "old.yaml"
    path.write_text(yaml.safe_dump(old))
    m = load_cost_model(path)
    assert m.measured_rows is None and m.caveats is None and cost_model_caveats(m) == []
    assert m.prefill_s_per_token == data["prefill_s_per_token"]


def test_an_unknown_caveat_code_is_one_clear_error(tmp_path):
    data = yaml.safe_load((MODELS / "aladdin/llama-2-70b__a100-80gb-sxm__tp4.yaml").read_text())
    data["caveats"] = [{"code": "looks_fine", "detail": "x"}]
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(InputError) as exc:
        load_cost_model(path)
    assert "bad.yaml" in str(exc.value) and "caveats" in str(exc.value) and "\n" not in str(exc.value)


# ---- planner models shows the file's own figures -------------------------------------------------

def test_planner_models_shows_each_files_own_measured_rows_figures_and_caveats():
    env = {**os.environ, "COLUMNS": "250", "PLANNER_DEBUG": ""}
    proc = subprocess.run([sys.executable, "-m", "planner", "models", "--json"], cwd=REPO, capture_output=True,
                          text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    rows = {os.path.realpath(r["file"]): r for r in json.loads(proc.stdout)["models"]}
    for path in FORM_FILES[:: max(1, len(FORM_FILES) // 12)] + [MODELS / "hetero/llama-3-8b__v100-32gb-sxm2__tp1.yaml"]:
        r, m = rows[os.path.realpath(path)], load_cost_model(path)
        assert r["measured_rows_basis"] == m.measured_rows.basis, path.name
        assert [c.code for c in m.caveats] == [c for c in r["caveats"] if c != "scored_on_synthesised_rows"]
        if m.measured_rows.phases:
            assert r["measured_rows_mape"] == {ph: e.mape for ph, e in m.measured_rows.phases.items()}
        if m.measured_rows.basis == "measured rows":
            assert r["measured_rows_heldout_mape"] == {ph: e.cv_mape for ph, e in m.measured_rows.phases.items()}
