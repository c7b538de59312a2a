"""Each InferMax (§3.2) file states its own error against the measured rows of its configuration, and its
caveats (planner/costmodels/measured_error.py, models/annotate_measured.py --kind infermax)."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
import yaml
from support import REPO

from planner.batching.costmodel import PUBLISHED, load_infermax_model
from planner.costmodels.batchtime import TARGET_MAPE_PCT, model_grid
from planner.costmodels.files import load_cost_model
from planner.errors import InputError

MODELS = REPO / "models"
FILES = sorted((MODELS / "infermax").glob("*.yaml"))


def _script():
    spec = importlib.util.spec_from_file_location("annotate_measured", MODELS / "annotate_measured.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_infermax_file_states_its_measured_rows_error_and_caveats(path):
    m = load_infermax_model(path)
    assert m.measured_rows is not None, f"{path.name}: run python models/annotate_measured.py --kind infermax"
    codes = {c.code for c in m.caveats}
    section = m.measured_rows
    assert set(section.phases) == {"prefill", "decode"}
    for e in section.phases.values():
        assert e.rows > 0 and e.max_ape >= e.mape >= 0  # 0 where the form holds the batch-time model exactly
    if section.basis == "batch-time model":  # the Vidur rows of these shapes hold no attention
        assert {"attention_extrapolated", "attention_not_scored"} <= codes
    worst = max(max(e.mape, e.cv_mape or 0.0) for e in section.phases.values())
    assert ("above_target" in codes) == (worst > TARGET_MAPE_PCT)
    assert ("published_coefficients" in codes) == path.name.startswith("published-")


def test_infermax_sections_are_recomputed_from_the_shared_data(shared_data):
    got = _script().annotated(MODELS, shared_data, kinds=("infermax",))
    assert sorted(p.name for p, _, _ in got) == sorted(p.name for p in FILES)
    for path, shipped, recomputed in got:
        assert shipped.measured_rows == recomputed.measured_rows, path.name
        assert shipped.caveats == recomputed.caveats, path.name


def test_infermax_figures_agree_with_an_independent_evaluation(shared_data):
    """The fitted 7B file's MAPE with the model's own `batch_seconds`, row by row, on the grid its section
    names (the Llama-2-7B A100 TP 1 rows hold no attention: scored against the batch-time model)."""
    from planner.costmodels.measured_error import load_groups

    key = ("Llama-2-7B", "A100-80GB-SXM", 1)
    group, _ = next(iter(load_groups(shared_data, only={key}).values()))
    model = load_infermax_model(MODELS / "infermax/llama-2-7b__a100-80gb-sxm__tp1.yaml")
    bt = load_cost_model(MODELS / "batchtime/llama-2-7b__a100-80gb-sxm__tp1.yaml")
    grid = model_grid(group.rows)
    y = bt.predict_rows(grid)
    assert model.measured_rows.basis == "batch-time model"
    for phase in ("prefill", "decode"):
        part = (grid.phase == phase).to_numpy()
        pred = []
        for b, c, d in zip(grid.batch_size[part], grid.chunk_tokens[part], grid.context_tokens[part]):
            pred.append(model.batch_seconds(b * c, b * c * c, b, 0, 0) if phase == "prefill"
                        else model.batch_seconds(b, 0, 0, b * d, b))
        ape = np.abs(np.array(pred) - y[part]) / y[part] * 100
        stated = model.measured_rows.phases[phase]
        assert stated.rows == int(part.sum())
        assert stated.mape == pytest.approx(ape.mean(), abs=1e-4)
        assert stated.max_ape == pytest.approx(ape.max(), abs=1e-4)


def test_a_model_without_the_sections_dumps_as_before():
    """Instance files embed the cost model's dump: an unannotated model adds no keys to them."""
    data = PUBLISHED["7b"].model_dump(mode="json")
    assert "measured_rows" not in data and "caveats" not in data
    annotated = load_infermax_model(MODELS / "infermax/published-7b.yaml").model_dump(mode="json")
    assert annotated["measured_rows"]["basis"] and annotated["caveats"]


def test_an_unknown_caveat_code_in_an_infermax_file_is_one_clear_error(tmp_path):
    data = yaml.safe_load((MODELS / "infermax/published-7b.yaml").read_text())
    data["caveats"] = [{"code": "looks_fine", "detail": "x"}]
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(InputError) as exc:
        load_infermax_model(path)
    assert "bad.yaml" in str(exc.value) and "caveats" in str(exc.value) and "\n" not in str(exc.value)
