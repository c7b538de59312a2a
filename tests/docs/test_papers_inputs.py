"""Inputs added for the papers' reproductions (docs/papers.md): a model given as a field mapping in
deployment instances, and the derived Llama-2-13B Aladdin models (models/derive_llama2_13b.py)."""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys

import pytest
import yaml
from support import REPO

from planner.catalog import find_gpu, find_model
from planner.costmodels.files import load_cost_model
from planner.costmodels.models import AladdinCostModel
from planner.deployment.enumeration import enumerate_cluster
from planner.deployment.instance import load_deployment_instance
from planner.errors import InputError, PlannerError

CLUSTER = REPO / "instances/deployment/clusters/llama3-8b-8xv100.yaml"
PAPER_KV = REPO / "instances/deployment/clusters/llama3-8b-8xv100-paper-kv.yaml"


def _derive_module():
    spec = importlib.util.spec_from_file_location("derive_llama2_13b", REPO / "models/derive_llama2_13b.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _cluster_with(tmp_path, model) -> object:
    data = yaml.safe_load(CLUSTER.read_text())
    data["model"] = model
    data["models_dir"] = str(REPO / "models")
    path = tmp_path / "inst.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _llama3_fields(**changes) -> dict:
    fields = find_model("Llama-3-8B").model_dump()
    fields.update(changes)
    return fields


# ---- model as a mapping in deployment instances ---------------------------------------------------

def test_a_model_mapping_sizes_the_kv_cache_from_its_own_fields():
    catalog = load_deployment_instance(CLUSTER)
    paper = load_deployment_instance(PAPER_KV)
    # 2 (K, V) x 32 layers x kv_heads x 128 head_dim x 2 bytes
    assert catalog.model.kv_bytes_per_token == 2 * 32 * 8 * 128 * 2 == 131072
    assert paper.model.kv_bytes_per_token == 2 * 32 * 32 * 128 * 2 == 524288
    assert paper.model.name == catalog.model.name  # the same cost-model files are used
    assert paper.hetero_models.keys() == catalog.hetero_models.keys() and paper.hetero_models
    cat_sol, _ = enumerate_cluster(catalog)
    pap_sol, _ = enumerate_cluster(paper)
    cat = {e.tensor_parallel: e for e in cat_sol.estimates}
    pap = {e.tensor_parallel: e for e in pap_sol.estimates}
    # same memory (Eq. 1 does not depend on the KV size per token), 4x the bytes per token: at t = 1
    # Alg. 1 holds fewer requests per batch, so the instance is slower
    assert pap[1].kv_size_gb == cat[1].kv_size_gb
    assert pap[1].tokens_per_s_machine < cat[1].tokens_per_s_machine


def test_a_mapping_equal_to_the_catalog_entry_gives_the_catalog_answer(tmp_path):
    by_name = enumerate_cluster(load_deployment_instance(_cluster_with(tmp_path, "Llama-3-8B")))[0]
    by_fields = enumerate_cluster(load_deployment_instance(_cluster_with(tmp_path, _llama3_fields())))[0]
    assert by_name.ranked == by_fields.ranked


@pytest.mark.parametrize("model, where, problem", [
    (_llama3_fields(num_kv_heads=0), "model.num_kv_heads", "greater than 0"),
    (_llama3_fields(num_kv_heads=24), "model", "multiple of num_kv_heads"),
    (_llama3_fields(heads=32), "model.heads", "unknown field"),
    ({k: v for k, v in _llama3_fields().items() if k != "num_parameters"}, "model.num_parameters", "missing"),
    (_llama3_fields(num_layers="32"), "model.num_layers", "32"),
    (["Llama-3-8B"], "model", "unknown model"),
])
def test_a_bad_model_mapping_is_one_line_naming_file_field_and_problem(tmp_path, model, where, problem):
    path = _cluster_with(tmp_path, model)
    with pytest.raises(InputError) as info:
        load_deployment_instance(path)
    text = str(info.value)
    assert "\n" not in text and "inst.yaml" in text and f"{where}:" in text and problem in text, text


def test_a_bad_model_mapping_on_the_command_line(tmp_path):
    path = _cluster_with(tmp_path, _llama3_fields(num_kv_heads=0))
    proc = subprocess.run([sys.executable, "-m", "planner", "solve", "deployment", str(path)], capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert proc.returncode != 0
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "inst.yaml: model.num_kv_heads:" in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr


# ---- derived Llama-2-13B models ------------------------------------------------------------------

def test_shipped_13b_models_are_what_the_script_derives_from_the_shipped_7b_models():
    derive = _derive_module()
    planned = derive.planned()
    assert len(planned) == 8  # A100 and H100, TP 1, 2, 4, 8
    for target, model in planned:
        assert target.exists(), f"{target.name} missing: run python models/derive_llama2_13b.py"
        assert derive.same(load_cost_model(target), model), \
            f"{target.name} differs from its derivation: run python models/derive_llama2_13b.py"
        assert model.provenance.startswith("DERIVED, NOT MEASURED")


def test_the_derivation_rule_coefficient_by_coefficient():
    derive = _derive_module()
    base = AladdinCostModel(model="Llama-2-7B", gpu="A100-80GB-SXM", tensor_parallel=2, prefill_s_per_token=1e-4,
                            prefill_base_s=0.02, decode_s_per_request=2e-4, decode_s_per_context_token=3e-7,
                            decode_base_s=0.015, kv_bytes_per_token=524288.0, provenance="synthetic; test")
    got = derive.derive(base, "synthetic.yaml")
    params = 13015864320 / 6738415616
    layers = 40 / 32
    bandwidth = find_gpu("A100-80GB-SXM").memory_bandwidth_gb_s * 1e9
    read7, read13 = 13476831232 / 2 / bandwidth, 26031728640 / 2 / bandwidth
    assert math.isclose(got.prefill_s_per_token, 1e-4 * params, rel_tol=1e-12)
    assert math.isclose(got.prefill_base_s, 0.02 * layers, rel_tol=1e-12)
    assert math.isclose(got.decode_s_per_request, 2e-4 * layers, rel_tol=1e-12)
    assert math.isclose(got.decode_s_per_context_token, 3e-7 * 819200 / 524288, rel_tol=1e-12)
    assert math.isclose(got.decode_base_s, read13 + (0.015 - read7) * layers, rel_tol=1e-12)
    assert got.kv_bytes_per_token == 819200 and got.model == "Llama-2-13B" and got.fit is None
    assert "synthetic.yaml" in got.provenance


@pytest.mark.parametrize("change, message", [
    (dict(model="Llama-2-70B"), "model: expected Llama-2-7B"),
    (dict(gpu="No-Such-GPU"), "No-Such-GPU"),
])
def test_the_derivation_refuses_a_wrong_source(change, message):
    derive = _derive_module()
    base = load_cost_model(REPO / "models/aladdin/llama-2-7b__a100-80gb-sxm__tp1.yaml").model_copy(update=change)
    with pytest.raises(PlannerError, match=message):
        derive.derive(base, "src.yaml")


def _worker_config(model: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "planner", "plan", "worker-config", "--model", model, "--gpu", "A100-80GB-SXM",
                           "--json"], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)


def test_worker_config_marks_the_13b_rows_derived():
    proc = _worker_config("Llama-2-13B")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["best_tensor_parallel"] is not None
    assert {o["cost_source"] for o in report["options"]} == {"derived"}
    fitted = _worker_config("Llama-2-7B")
    assert {o["cost_source"] for o in json.loads(fitted.stdout)["options"]} == {"fitted"}
