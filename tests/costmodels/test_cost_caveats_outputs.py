"""Every CLI output built on a cost model carries the caveats its file states (issue 24 item 3).

Per family: the ``--json`` result's top-level ``cost_model_caveats`` holds the caveat codes of the file the
numbers came from (shipped files), and is [] for a copy of that file without its ``caveats`` section; the
terminal output ends with the one line ``cost model <model> / <gpu> / TP <g> caveats: …`` only when there
are caveats.  Small instances, in-process (`run_cli`).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from support import REPO, run_cli

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT / "models"


def _codes(path: Path) -> list[str]:
    return [c["code"] for c in yaml.safe_load(path.read_text()).get("caveats") or []]


def _stripped(path: Path, dest: Path) -> Path:
    """A copy of cost-model file ``path`` at ``dest`` without its caveats section."""
    data = yaml.safe_load(path.read_text())
    assert data.get("caveats"), f"{path} states no caveats: the test needs one that does"
    data.pop("caveats")
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(yaml.safe_dump(data, sort_keys=False))
    return dest


def _json(monkeypatch, capsys, *args: str) -> dict:
    code, out, err = run_cli(monkeypatch, capsys, *args)
    assert code == 0, err
    return json.loads(out)  # exactly one JSON object on stdout


def _by_label(lines: list[str]) -> dict[str, list[str]]:
    """``"<model> / <gpu> / TP <g>: code: detail"`` lines → {label: [codes]}."""
    found: dict[str, list[str]] = {}
    for line in lines:
        label, code, _ = line.split(": ", 2)
        found.setdefault(label, []).append(code)
    return found


# ---- placement (Aladdin) ------------------------------------------------------------------------------

def test_placement_solve_compare_generate_carry_caveats(monkeypatch, capsys, tmp_path):
    shipped = MODELS / "aladdin/llama-2-70b__a100-80gb-sxm__tp2.yaml"
    codes = _codes(shipped)
    assert "above_target" in codes
    code, out, err = run_cli(monkeypatch, capsys, "generate", "placement", str(tmp_path / "p.yaml"), "--requests", "6")
    assert code == 0, err
    assert "cost model Llama-2-70B / A100-80GB-SXM / TP 2 caveats: above_target: " in out
    data = _json(monkeypatch, capsys, "solve", "placement", str(tmp_path / "p.yaml"), "--json")
    assert [c.split(":", 1)[0] for c in data["cost_model_caveats"]] == codes
    data = _json(monkeypatch, capsys, "compare", "placement", str(tmp_path / "p.yaml"), "--json")
    assert [c.split(":", 1)[0] for c in data["cost_model_caveats"]] == codes
    code, out, _ = run_cli(monkeypatch, capsys, "solve", "placement", str(tmp_path / "p.yaml"))
    last = out.strip().splitlines()[-1]
    assert code == 0 and last.startswith("cost model Llama-2-70B / A100-80GB-SXM / TP 2 caveats: above_target: ")

    bare = _stripped(shipped, tmp_path / "bare.yaml")
    code, out, err = run_cli(monkeypatch, capsys, "generate", "placement", str(tmp_path / "q.yaml"), "--requests", "6",
                             "--cost-model", str(bare))
    assert code == 0 and "caveats" not in out, err
    assert _json(monkeypatch, capsys, "solve", "placement", str(tmp_path / "q.yaml"), "--json")["cost_model_caveats"] == []
    code, out, _ = run_cli(monkeypatch, capsys, "solve", "placement", str(tmp_path / "q.yaml"))
    assert code == 0 and "caveats" not in out


# ---- batching (InferMax) ------------------------------------------------------------------------------

def _batching_instance(tmp_path: Path, name: str, cost_model: Path) -> Path:
    data = yaml.safe_load((ROOT / "instances/batching/tiny3.yaml").read_text())
    data["cost_model"] = str(cost_model)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_batching_simulate_solve_compare_carry_caveats(monkeypatch, capsys, tmp_path):
    shipped = MODELS / "infermax/published-7b.yaml"
    codes = _codes(shipped)
    with_caveats = _batching_instance(tmp_path, "with", shipped)
    for args in (("simulate", "batching"), ("solve", "batching"), ("compare", "batching", "--no-mip")):
        data = _json(monkeypatch, capsys, *args, str(with_caveats), "--json")
        assert [c.split(":", 1)[0] for c in data["cost_model_caveats"]] == codes, args
    code, out, _ = run_cli(monkeypatch, capsys, "simulate", "batching", str(with_caveats))
    assert code == 0 and out.strip().splitlines()[-1].startswith(f"cost model infermax-7b caveats: {codes[0]}: ")

    without = _batching_instance(tmp_path, "without", _stripped(shipped, tmp_path / "bare.yaml"))
    for args in (("simulate", "batching"), ("solve", "batching")):
        assert _json(monkeypatch, capsys, *args, str(without), "--json")["cost_model_caveats"] == [], args
    code, out, _ = run_cli(monkeypatch, capsys, "simulate", "batching", str(without))
    assert code == 0 and "caveats" not in out


# ---- priority (bilinear) ------------------------------------------------------------------------------

def test_priority_solve_compare_generate_carry_caveats(monkeypatch, capsys, tmp_path):
    instance = ROOT / "instances/priority/paper_mix_n10_b1.yaml"
    shipped = MODELS / "bilinear/qwen2.5-7b__v100-32gb-sxm2__tp2.yaml"
    codes = _codes(shipped)
    assert codes
    data = _json(monkeypatch, capsys, "solve", "priority", str(instance), "--method", "fcfs", "--json")
    assert [c.split(":", 1)[0] for c in data["cost_model_caveats"]] == codes
    data = _json(monkeypatch, capsys, "compare", "priority", str(instance), "--json")
    assert [c.split(":", 1)[0] for c in data["cost_model_caveats"]] == codes
    code, out, err = run_cli(monkeypatch, capsys, "generate", "priority", str(tmp_path / "g.yaml"))
    assert code == 0, err
    assert out.strip().splitlines()[-1].startswith(f"cost model Qwen2.5-7B / V100-32GB-SXM2 / TP 2 caveats: {codes[0]}: ")

    data = yaml.safe_load(instance.read_text())
    data["cost_model"] = str(_stripped(shipped, tmp_path / "bare.yaml"))
    bare_instance = tmp_path / "bare-instance.yaml"
    bare_instance.write_text(yaml.safe_dump(data, sort_keys=False))
    data = _json(monkeypatch, capsys, "solve", "priority", str(bare_instance), "--method", "fcfs", "--json")
    assert data["cost_model_caveats"] == []
    code, out, _ = run_cli(monkeypatch, capsys, "solve", "priority", str(bare_instance), "--method", "fcfs")
    assert code == 0 and "caveats" not in out


# ---- deployment (hetero p1..p8 per configuration, Aladdin for cost plans) and routing ------------------

def _model_files(kind: str, stem: str) -> list[Path]:
    return sorted((MODELS / kind).glob(f"{stem}__tp*.yaml"))


def test_deployment_cluster_keys_caveats_by_configuration(monkeypatch, capsys, tmp_path):
    instance = ROOT / "instances/deployment/clusters/llama3-8b-8xv100.yaml"
    data = _json(monkeypatch, capsys, "solve", "deployment", str(instance), "--json")
    found = _by_label(data["cost_model_caveats"])
    files = _model_files("hetero", "llama-3-8b__v100-32gb-sxm2")
    expected = {f"Llama-3-8B / V100-32GB-SXM2 / TP {yaml.safe_load(f.read_text())['tensor_parallel']}": _codes(f)
                for f in files}
    assert found == {k: v for k, v in expected.items() if k in found} and len(found) >= 2
    assert "derived_from_other_gpu" in found["Llama-3-8B / V100-32GB-SXM2 / TP 1"]
    code, out, _ = run_cli(monkeypatch, capsys, "solve", "deployment", str(instance))
    assert code == 0 and "cost model Llama-3-8B / V100-32GB-SXM2 / TP 1 caveats: derived_from_other_gpu: " in out

    for f in files:  # the same configurations from copies without caveats
        _stripped(f, tmp_path / "models/hetero" / f.name)
    cluster = yaml.safe_load(instance.read_text())
    cluster["models_dir"] = str(tmp_path / "models")
    bare = tmp_path / "cluster.yaml"
    bare.write_text(yaml.safe_dump(cluster, sort_keys=False))
    assert _json(monkeypatch, capsys, "solve", "deployment", str(bare), "--json")["cost_model_caveats"] == []
    code, out, _ = run_cli(monkeypatch, capsys, "solve", "deployment", str(bare))
    assert code == 0 and "caveats" not in out


def test_deployment_cluster_lists_only_the_configurations_it_estimated(monkeypatch, capsys):
    """Degrees refused by the memory check (70B on one A100) used no model: their caveats are not listed."""
    data = _json(monkeypatch, capsys, "solve", "deployment",
                 str(ROOT / "instances/deployment/clusters/llama2-70b-a100-h100.yaml"), "--json")
    expected = {}
    for e in data["solution"]["estimates"]:
        codes = _codes(MODELS / f"hetero/llama-2-70b__{e['gpu'].lower()}__tp{e['tensor_parallel']}.yaml")
        if e["feasible"] and codes:
            expected[f"Llama-2-70B / {e['gpu']} / TP {e['tensor_parallel']}"] = codes
    assert not any(e["feasible"] for e in data["solution"]["estimates"]
                   if e["gpu"] == "A100-80GB-SXM" and e["tensor_parallel"] == 1)
    assert _by_label(data["cost_model_caveats"]) == expected and expected


def test_cost_plan_carries_the_caveats_of_its_estimated_capacities(monkeypatch, capsys):
    instance = ROOT / "instances/deployment/cost-two-models.yaml"
    data = _json(monkeypatch, capsys, "solve", "deployment", str(instance), "--json")
    found = _by_label(data["cost_model_caveats"])
    assert found["Llama-2-70B / A100-80GB-SXM / TP 2"] == _codes(MODELS / "aladdin/llama-2-70b__a100-80gb-sxm__tp2.yaml")
    data = _json(monkeypatch, capsys, "solve", "deployment", str(instance), "--max-load", "--json")
    assert _by_label(data["cost_model_caveats"]) == found
    # capacities given in the file: no cost model, no caveats
    assert _json(monkeypatch, capsys, "solve", "deployment", str(ROOT / "instances/deployment/synthetic-6x4x10.yaml"),
                 "--json")["cost_model_caveats"] == []


def test_routing_solve_compare_carry_caveats(monkeypatch, capsys, tmp_path):
    data = yaml.safe_load((ROOT / "instances/routing/llama3-8b-v100-small.yaml").read_text())
    data["requests"]["count"] = 8
    instance = tmp_path / "routing.yaml"
    instance.write_text(yaml.safe_dump(data, sort_keys=False))
    expected = {f"Llama-3-8B / V100-32GB-SXM2 / TP {t}": _codes(MODELS / f"hetero/llama-3-8b__v100-32gb-sxm2__tp{t}.yaml")
                for t in (4, 1)}
    for cmd in ("solve", "compare"):
        result = _json(monkeypatch, capsys, cmd, "routing", str(instance), "--json")
        assert _by_label(result["cost_model_caveats"]) == expected, cmd
    code, out, _ = run_cli(monkeypatch, capsys, "solve", "routing", str(instance))
    assert code == 0 and out.strip().splitlines()[-1].startswith("cost model Llama-3-8B / V100-32GB-SXM2 / TP ")

    for t in (4, 1):
        name = f"llama-3-8b__v100-32gb-sxm2__tp{t}.yaml"
        _stripped(MODELS / "hetero" / name, tmp_path / "models/hetero" / name)
    data["models_dir"] = str(tmp_path / "models")
    instance.write_text(yaml.safe_dump(data, sort_keys=False))
    assert _json(monkeypatch, capsys, "solve", "routing", str(instance), "--json")["cost_model_caveats"] == []


# ---- queueing (Aladdin models behind the estimator) ---------------------------------------------------

QUEUEING = """
family: queueing
name: small
objective: penalty
slo_classes: {interactive: 20, batch: 600}
instance_types:
  - {name: a100x4, gpu: A100-80GB-SXM, tensor_parallel: 4, swap_time_s: 12, count: 1, loaded_models: [Llama-2-70B]}
groups:
  - {name: a, model: Llama-2-70B, slo_class: interactive, num_requests: 4, mean_input_tokens: 300, mean_output_tokens: 100, std_output_tokens: 30, max_output_tokens: 256}
  - {name: b, model: Llama-2-70B, slo_class: batch, num_requests: 8, mean_input_tokens: 500, mean_output_tokens: 200, std_output_tokens: 50, max_output_tokens: 512}
"""


@pytest.fixture
def estimator_cache():
    """The estimator caches its model look-ups by (model, GPU, TP): cleared around a test that moves the models."""
    from planner.queueing.estimator import _cost_model

    _cost_model.cache_clear()
    yield
    _cost_model.cache_clear()


def test_queueing_solve_compare_carry_caveats(monkeypatch, capsys, tmp_path, estimator_cache):
    instance = tmp_path / "q.yaml"
    instance.write_text(QUEUEING)
    shipped = MODELS / "aladdin/llama-2-70b__a100-80gb-sxm__tp4.yaml"
    expected = {"Llama-2-70B / A100-80GB-SXM / TP 4": _codes(shipped)}
    assert "above_target" in expected["Llama-2-70B / A100-80GB-SXM / TP 4"]
    for cmd in ("solve", "compare"):
        data = _json(monkeypatch, capsys, cmd, "queueing", str(instance), "--json")
        assert _by_label(data["cost_model_caveats"]) == expected, cmd
    code, out, _ = run_cli(monkeypatch, capsys, "solve", "queueing", str(instance))
    assert code == 0 and out.strip().splitlines()[-1].startswith(
        "cost model Llama-2-70B / A100-80GB-SXM / TP 4 caveats: above_target: ")

    from planner.queueing.estimator import _cost_model

    _stripped(shipped, tmp_path / "models/aladdin" / shipped.name)
    monkeypatch.setenv("PLANNER_MODELS_DIR", str(tmp_path / "models"))
    _cost_model.cache_clear()
    assert _json(monkeypatch, capsys, "solve", "queueing", str(instance), "--json")["cost_model_caveats"] == []


# ---- per-instance caveats for `planner compare all` ---------------------------------------------------

def test_instance_cost_model_caveats_name_the_files_of_each_instance():
    from planner.cli.common import instance_cost_model_caveats

    placement = instance_cost_model_caveats("placement", ROOT / "instances/placement/sharegpt-70b-a100-n40.yaml")
    assert _by_label(placement) == {
        "Llama-2-70B / A100-80GB-SXM / TP 2": _codes(MODELS / "aladdin/llama-2-70b__a100-80gb-sxm__tp2.yaml")}
    priority = instance_cost_model_caveats("priority", ROOT / "instances/priority/paper_mix_n10_b1.yaml")
    assert _by_label(priority) == {
        "Qwen2.5-7B / V100-32GB-SXM2 / TP 2": _codes(MODELS / "bilinear/qwen2.5-7b__v100-32gb-sxm2__tp2.yaml")}
    routing = instance_cost_model_caveats("routing", ROOT / "instances/routing/llama2-70b-a100-h100.yaml")
    labels = _by_label(routing)
    assert labels and all(codes == _codes(MODELS / "hetero" / "llama-2-70b__{}__tp{}.yaml".format(
        label.split(" / ")[1].lower(), label.rsplit(" ", 1)[1])) for label, codes in labels.items())


# ---- cost predict --------------------------------------------------------------------------------------

def test_cost_predict_carries_caveats(monkeypatch, capsys, tmp_path):
    rows = tmp_path / "rows.csv"
    rows.write_text("batch_size,prompt_tokens,output_tokens\n4,256,64\n")
    shipped = MODELS / "aladdin/llama-2-70b__a100-80gb-sxm__tp2.yaml"
    data = _json(monkeypatch, capsys, "cost", "predict", str(shipped), str(rows), "--json")
    assert [c.split(":", 1)[0] for c in data["cost_model_caveats"]] == _codes(shipped)
    code, out, _ = run_cli(monkeypatch, capsys, "cost", "predict", str(shipped), str(rows))
    assert code == 0 and out.strip().splitlines()[-1].startswith(
        "cost model Llama-2-70B / A100-80GB-SXM / TP 2 caveats: above_target: ")
    bare = _stripped(shipped, tmp_path / "bare.yaml")
    assert _json(monkeypatch, capsys, "cost", "predict", str(bare), str(rows), "--json")["cost_model_caveats"] == []


def test_a_built_in_infermax_set_named_by_an_instance_shows_its_shipped_files_caveats(monkeypatch, capsys, tmp_path):
    # instances name the published 7B set by name (cost_model: infermax-7b); its numbers are the file's
    shipped = yaml.safe_load((REPO / "models/infermax/published-7b.yaml").read_text())
    code, out, err = run_cli(monkeypatch, capsys, "simulate", "batching", str(REPO / "instances/batching/tiny3.yaml"),
                             "--json")
    assert code == 0, err
    codes = [c.split(":")[0] for c in json.loads(out)["cost_model_caveats"]]
    assert codes == [c["code"] for c in shipped["caveats"]] and "published_coefficients" in codes
    # a models directory whose file holds other coefficients: nothing is borrowed from it
    other = tmp_path / "models" / "infermax"
    other.mkdir(parents=True)
    (other / "published-7b.yaml").write_text(yaml.safe_dump({**shipped, "b_o": shipped["b_o"] * 2}))
    monkeypatch.setenv("PLANNER_MODELS_DIR", str(tmp_path / "models"))
    code, out, err = run_cli(monkeypatch, capsys, "simulate", "batching", str(REPO / "instances/batching/tiny3.yaml"),
                             "--json")
    assert code == 0, err
    assert json.loads(out)["cost_model_caveats"] == []
