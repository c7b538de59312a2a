"""`planner cost derive` / `planner.costmodels.derived`: Aladdin and bilinear files derived from a batch-time model."""

from __future__ import annotations

import json

import pytest
import yaml
from support import REPO, assert_one_line, run_cli

from planner.costmodels.derived import derived_cost_model
from planner.costmodels.files import load_cost_model
from planner.costmodels.models import AladdinCostModel, BilinearCostModel
from planner.errors import PlannerError

SOURCE = REPO / "models/batchtime/llama-2-70b__a100-80gb-sxm__tp4.yaml"  # Splitwise end-to-end rows
BT = load_cost_model(SOURCE)


@pytest.mark.parametrize("kind", ["aladdin", "bilinear"])
def test_a_derived_file_holds_the_projection_its_error_and_the_data_caveats(kind):
    model = derived_cost_model(BT, kind, "bt.yaml")
    fit = BT.derived[kind]
    assert isinstance(model, AladdinCostModel if kind == "aladdin" else BilinearCostModel)
    assert (model.model, model.gpu, model.tensor_parallel) == (BT.model, BT.gpu, BT.tensor_parallel)
    if kind == "aladdin":
        assert {k: getattr(model, k) for k in fit.coefficients} == fit.coefficients
        assert model.kv_bytes_per_token == BT.kv_bytes_per_token
    else:
        for phase in ("prefill", "decode"):
            coefs = getattr(model, phase)
            assert [coefs.alpha, coefs.beta, coefs.gamma, coefs.delta] == [
                fit.coefficients[f"{phase}_{n}"] for n in ("alpha", "beta", "gamma", "delta")]
    rows = model.measured_rows
    assert rows.basis == fit.error_basis == "measured rows"
    for phase, err in rows.phases.items():
        assert (err.mape, err.max_ape) == (fit.approximation_mape[phase], fit.approximation_max_ape[phase])
        assert err.rows == BT.fit.phases[phase].rows and err.cv_mape == BT.fit.phases[phase].forms_cv[kind].derived
    codes = [c.code for c in model.caveats]
    over = any(v > 5.0 for v in fit.approximation_mape.values())
    assert ("above_target" in codes) == over and codes.count("above_target") <= 1
    assert {c.code for c in BT.caveats} - {"above_target"} <= set(codes)
    assert model.provenance.startswith("derived from bt.yaml")
    assert model.valid_range.max_batch_size == max(BT.coverage.prefill_batch_sizes + BT.coverage.decode_batch_sizes)


def test_the_derived_aladdin_decode_is_the_batch_time_decode():
    """Splitwise end-to-end rows: the batch-time decode has Eq. 3's form, so the projection is exact there."""
    model = derived_cost_model(BT, "aladdin", "bt.yaml")
    for b, ctx in [(1, 512), (16, 1024), (64, 4096)]:
        assert model.decode_time(b, b * ctx) == pytest.approx(BT.decode_step_time(b, ctx), rel=1e-9)


def test_a_form_that_cannot_be_derived_is_one_line():
    with pytest.raises(PlannerError, match="--kind must be one of aladdin, bilinear"):
        derived_cost_model(BT, "hetero", "bt.yaml")
    with pytest.raises(PlannerError, match="has no derived aladdin coefficients"):
        derived_cost_model(BT.model_copy(update={"derived": {}}), "aladdin", "bt.yaml")
    with pytest.raises(PlannerError, match="kv_bytes_per_token"):
        derived_cost_model(BT.model_copy(update={"kv_bytes_per_token": None}), "aladdin", "bt.yaml")


def test_cli_writes_a_file_placement_solves_with_and_models_lists_as_derived(tmp_path, monkeypatch, capsys):
    target = tmp_path / "models/aladdin/llama-2-70b__a100-80gb-sxm__tp4.yaml"
    target.parent.mkdir(parents=True)
    code, out, err = run_cli(monkeypatch, capsys, "cost", "derive", str(SOURCE), str(target), "--kind", "aladdin",
                             "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["model_file"] == str(target) and "above_target" in report["caveats"]
    written = load_cost_model(target)
    assert written == derived_cost_model(BT, "aladdin", str(SOURCE))  # the file reads back as derived
    code, out, err = run_cli(monkeypatch, capsys, "models", "--models-dir", str(tmp_path / "models"), "--json")
    assert code == 0, err
    assert [m["source"] for m in json.loads(out)["models"]] == ["derived"]
    scenario = tmp_path / "p.yaml"
    code, _, err = run_cli(monkeypatch, capsys, "generate", "placement", str(scenario), "--tp", "4",
                           "--cost-model", str(target), "--requests", "12")
    assert code == 0, err
    code, out, err = run_cli(monkeypatch, capsys, "solve", "placement", str(scenario), "--json")
    assert code == 0, err
    solved = json.loads(out)
    assert solved["status"] == "optimal" and solved["validation"]["feasible"]
    assert any("above_target" in c for c in solved["cost_model_caveats"])


def test_cli_bad_input_is_one_line(tmp_path, monkeypatch, capsys):
    out = tmp_path / "d.yaml"
    out.write_text("kept: true\n")
    code, _, err = run_cli(monkeypatch, capsys, "cost", "derive", str(SOURCE), str(out), "--kind", "aladdin")
    assert_one_line(code, err, str(out), "already exists", "--force")
    assert yaml.safe_load(out.read_text()) == {"kept": True}  # nothing a user saved is lost
    aladdin = REPO / "models/aladdin/llama-2-70b__a100-80gb-sxm__tp4.yaml"
    code, _, err = run_cli(monkeypatch, capsys, "cost", "derive", str(aladdin), str(tmp_path / "x.yaml"),
                           "--kind", "aladdin")
    assert_one_line(code, err, aladdin.name, "kind", "batch-time")
    code, _, err = run_cli(monkeypatch, capsys, "cost", "derive", str(SOURCE), str(tmp_path / "x.yaml"),
                           "--kind", "hetero")
    assert_one_line(code, err, "--kind", "aladdin, bilinear, infermax")
    assert not (tmp_path / "x.yaml").exists()


def test_the_derived_infermax_file_runs_a_batching_instance(tmp_path, monkeypatch, capsys):
    """InferMax (the batching family's form, per layer in ms) from a Vidur batch-time file; a batching instance
    that names the file simulates and solves under it, and its caveats travel with the numbers."""
    from planner.batching.costmodel import infermax_from_batchtime, load_infermax_model

    source = REPO / "models/batchtime/llama-2-7b__a100-80gb-sxm__tp1.yaml"
    bt = load_cost_model(source)
    target = tmp_path / "im.yaml"
    code, _, err = run_cli(monkeypatch, capsys, "cost", "derive", str(source), str(target), "--kind", "infermax")
    assert code == 0, err
    model = load_infermax_model(target)
    assert model == infermax_from_batchtime(bt, str(source))
    coefs = dict(bt.derived["infermax"].coefficients)
    assert model.n_layers == coefs.pop("n_layers") == bt_layers(bt)
    assert {k: getattr(model, k) for k in coefs} == coefs
    assert model.measured_rows.basis == bt.derived["infermax"].error_basis
    instance = tmp_path / "b.yaml"
    instance.write_text(f"family: batching\ncost_model: {target}\nlimits: {{C: 64, M: 400}}\n"
                        "requests:\n  - {request_id: a, input_tokens: 20, output_tokens: 4}\n"
                        "  - {request_id: b, input_tokens: 30, output_tokens: 3}\n")
    code, out, err = run_cli(monkeypatch, capsys, "solve", "batching", str(instance), "--json", "--time-limit", "20")
    assert code == 0, err
    solved = json.loads(out)
    assert solved["status"] == "optimal" and solved["validation"]["feasible"]
    assert any("attention_extrapolated" in c for c in solved["cost_model_caveats"])


def bt_layers(bt) -> int:
    from planner.catalog import find_model

    return find_model(bt.model).num_layers
