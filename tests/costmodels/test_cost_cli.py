"""`planner models` and `planner cost predict` as a user runs them (subprocesses of the installed entry point)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support import assert_one_line, run_cli

from planner.cli.cost import load_any_cost_model, predict

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "models/batchtime/llama-2-70b__a100-80gb-sxm__tp2.yaml"
HANG_GUARD_S = 120


def _run(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "120", "PLANNER_DEBUG": ""}
    return subprocess.run([sys.executable, "-m", "planner", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=HANG_GUARD_S, env=env)


def _one_error_line(proc: subprocess.CompletedProcess, *needles: str) -> None:
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])


def test_models_json_lists_every_shipped_file_once_with_source_and_error():
    proc = _run("models", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)  # the whole stdout: one JSON object
    listed = {Path(r["file"]).resolve() for r in data["models"]}
    on_disk = {p.resolve() for kind in ("batchtime", "aladdin", "bilinear", "hetero", "infermax")
               for p in (ROOT / "models" / kind).glob("*.yaml")}
    assert listed == on_disk and len(data["models"]) == len(on_disk)
    sources = {"measured end-to-end", "kernel composition", "derived", "published", "unknown"}
    for r in data["models"]:
        assert "error" not in r, r
        assert r["source"] in sources, r
    bt = [r for r in data["models"] if r["kind"] == "batchtime"]
    assert bt, "no batch-time files listed"
    for r in bt:
        assert r["coverage"]["decode_batch_sizes"] and r["heldout"]["prefill"]["mape"] is not None
    for r in bt[:3]:  # the figures are the file's own
        file_fit = load_any_cost_model(Path(r["file"])).fit.phases
        assert r["heldout"]["decode"]["mape"] == file_fit["decode"].cv["configuration"].mape
    derived = [r for r in data["models"] if r["source"] == "derived"]
    # derived from another GPU or model (caveat says so), or from the batch-time model of the same configuration
    from_batchtime = [r for r in derived
                      if load_any_cost_model(Path(r["file"])).provenance.startswith("derived from models/batchtime/")]
    assert from_batchtime and derived
    assert all({"derived_from_other_gpu", "derived_from_other_model"} & set(r["caveats"])
               for r in derived if r not in from_batchtime)


def test_models_on_a_missing_directory_is_one_line(tmp_path, monkeypatch, capsys):
    code, _, err = run_cli(monkeypatch, capsys, "models", "--models-dir", str(tmp_path / "nope"))
    assert_one_line(code, err, "models directory not found")


@pytest.mark.skipif(not MODEL.exists(), reason="batch-time model file not shipped")
def test_cost_predict_writes_the_models_own_times(tmp_path, monkeypatch, capsys):
    rows = tmp_path / "rows.csv"
    rows.write_text("batch_size,prompt_tokens,output_tokens,context_tokens\n1,512,128,0\n8,1024,256,64\n")
    out = tmp_path / "pred.csv"
    proc = _run("cost", "predict", str(MODEL), str(rows), "--csv", str(out), "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    model = load_any_cost_model(MODEL)
    assert len(data["rows"]) == 2
    for r in data["rows"]:
        b, p, o, k = r["batch_size"], r["prompt_tokens"], r["output_tokens"], r["context_tokens"]
        assert r["prefill_s"] == pytest.approx(model.prefill_time(b, p, k), rel=1e-12)
        assert r["decode_s_per_token"] == pytest.approx(model.decode_step_time(b, k + p + o / 2), rel=1e-12)
    assert out.read_text().splitlines()[0] == ("batch_size,prompt_tokens,output_tokens,context_tokens,"
                                               "prefill_s,decode_s_per_token")
    # never over an existing file without --force
    again = _run("cost", "predict", str(MODEL), str(rows), "--csv", str(out))
    _one_error_line(again, str(out), "already exists; pass --force")
    code, stdout, err = run_cli(monkeypatch, capsys, "cost", "predict", str(MODEL), str(rows), "--csv", str(out),
                                "--force")
    assert code == 0 and "under cost model" in stdout, err


def test_cost_predict_reads_every_kind_and_context_is_optional(tmp_path):
    rows = tmp_path / "rows.csv"
    rows.write_text("batch_size,prompt_tokens,output_tokens\n4,256,64\n")
    aladdin = load_any_cost_model(ROOT / "models/aladdin/llama-2-70b__a100-80gb-sxm__tp2.yaml")
    pre, dec = predict(aladdin, 4, 256, 64, 0)
    assert pre == pytest.approx(aladdin.prefill_time(1024)) and dec == pytest.approx(aladdin.decode_time(4, 4 * 288))
    proc = _run("cost", "predict", str(ROOT / "models/infermax/published-7b.yaml"), str(rows), "--json")
    assert proc.returncode == 0, proc.stderr
    r = json.loads(proc.stdout)["rows"][0]
    infermax = load_any_cost_model(ROOT / "models/infermax/published-7b.yaml")
    assert r["context_tokens"] == 0
    assert r["prefill_s"] == pytest.approx(infermax.batch_seconds(1024, 4 * 256**2, 4, 0, 0))


@pytest.mark.parametrize("content, needles", [
    ("batch_size,prompt_tokens\n1,512\n", ["output_tokens", "required column is missing"]),
    ("batch_size,prompt_tokens,output_tokens\n1,512,128\n0,64,8\n", ["row 2, column batch_size", "must be positive"]),
    ("batch_size,prompt_tokens,output_tokens\n1,x,128\n", ["row 1, column prompt_tokens", "not a number"]),
    ("batch_size,prompt_tokens,output_tokens,context_tokens\n1,5,1,-3\n", ["row 1, column context_tokens",
                                                                           "must be 0 or more"]),
])
def test_cost_predict_bad_rows_are_one_line(tmp_path, monkeypatch, capsys, content, needles):
    rows = tmp_path / "rows.csv"
    rows.write_text(content)
    code, _, err = run_cli(monkeypatch, capsys, "cost", "predict", str(MODEL), str(rows))
    assert_one_line(code, err, str(rows), *needles)


def test_cost_predict_bad_input_as_a_user_sees_it(tmp_path):
    """One subprocess per kind of refusal: a bad row, a bad model file (stderr is one line, exit 2)."""
    rows = tmp_path / "rows.csv"
    rows.write_text("batch_size,prompt_tokens,output_tokens\n1,512,128\n2,0,5\n")
    _one_error_line(_run("cost", "predict", str(MODEL), str(rows)), str(rows), "row 2, column prompt_tokens")
    rows.write_text("batch_size,prompt_tokens,output_tokens\n1,512,128\n")
    bad = tmp_path / "m.yaml"
    bad.write_text("kind: quantum\n")
    _one_error_line(_run("cost", "predict", str(bad), str(rows)), str(bad), "kind", "unknown cost-model kind")


def test_cost_predict_missing_model_file_is_one_line(tmp_path, monkeypatch, capsys):
    rows = tmp_path / "rows.csv"
    rows.write_text("batch_size,prompt_tokens,output_tokens\n1,512,128\n")
    code, _, err = run_cli(monkeypatch, capsys, "cost", "predict", str(tmp_path / "missing.yaml"), str(rows))
    assert_one_line(code, err, "missing.yaml")
