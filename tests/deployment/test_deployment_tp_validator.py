"""The TP-enumeration plan's independent validator (`validate_tp_plan`): shipped clusters agree with the
enumeration, hand-worked objectives for both estimators, wrong plans rejected, tampered objectives caught."""

from __future__ import annotations

import ast
import dataclasses
import json
from functools import cache
from pathlib import Path

import pytest

from planner.catalog import find_gpu, find_model
from planner.core.types import GPUSpec, LLMSpec
from planner.costmodels.models import AladdinCostModel, HeteroCostModel
from planner.deployment.enumeration import enumerate_cluster, enumeration_result
from planner.deployment.instance import load_deployment_instance
from planner.deployment.problem import ClusterProblem, MachineGroup, MemoryOptions, model_key
from planner.deployment.validator import validate_tp_plan
from planner.solver import SolveStatus
from support import run_cli

REPO = Path(__file__).resolve().parents[2]
CLUSTERS = sorted((REPO / "instances/deployment/clusters").glob("*.yaml"))
VALIDATOR_SRC = REPO / "planner/deployment/validator.py"


@cache
def _load(name: str) -> ClusterProblem:  # frozen problems: loaded once, shared by the tests
    problem = load_deployment_instance(REPO / "instances/deployment/clusters" / name)
    assert isinstance(problem, ClusterProblem)
    return problem


def _kinds(report) -> set[str]:
    return {v.constraint for v in report.violations}


# ---- every shipped cluster: the validator accepts the best plan and recomputes its tokens/s -------------

def test_shipped_clusters_cover_both_estimators():
    assert len(CLUSTERS) >= 3
    assert {_load(p.name).estimator for p in CLUSTERS} == {"static", "continuous"}


@pytest.mark.parametrize("path", CLUSTERS, ids=lambda p: p.stem)
def test_shipped_cluster_best_plan_is_valid_and_objective_agrees(path):
    problem = _load(path.name)
    result = enumeration_result(problem)
    report = result.validation
    assert report is not None and report.feasible, report.summary()
    assert report.objective_name == "tokens_per_s"
    assert report.details["objective_recomputed"] is True
    assert report.objective == pytest.approx(result.objective, rel=1e-9)
    assert result.status == SolveStatus.OPTIMAL
    assert "differs" not in result.message and "rejects" not in result.message
    # every ranked combination, not only the best, is recomputed to the same tokens/s
    for degrees, tokens_per_s in result.solution.ranked:
        other = validate_tp_plan(problem, degrees)
        assert other.feasible and other.objective == pytest.approx(tokens_per_s, rel=1e-9), degrees


def test_plan_as_mapping_equals_plan_as_sequence():
    problem = _load("llama2-70b-a100-h100.yaml")
    by_name = validate_tp_plan(problem, {"dgx-h100": 8, "dgx-a100": 2})
    by_order = validate_tp_plan(problem, (2, 8))
    assert by_name.feasible and by_name.objective == by_order.objective


# ---- hand-worked objectives ------------------------------------------------------------------------------

# A one-byte-per-token toy model: KV bytes/token = 2 · 1 layer · 1 KV head · head dim 1 · 0.5 B = 1 B,
# weights = 2 parameters · 0.5 B = 1 B.  With φ = 1 and δ = 0, KV(t=1) = memory − 1 B.
TOY = LLMSpec(name="toy", num_layers=1, hidden_size=1, num_attention_heads=1, num_kv_heads=1, head_dim=1,
              num_parameters=2, dtype_bytes=0.5)
NO_OVERHEAD = MemoryOptions(memory_utilization=1.0, engine_overhead_gb=0.0)


def _toy_static_problem() -> ClusterProblem:
    gpu = GPUSpec(name="toy-gpu", memory_gb=31e-9)  # 31 B: KV(t=1) = 31 − 1 = 30 B
    cost = HeteroCostModel(model="toy", gpu="toy-gpu", tensor_parallel=1, time_unit="s",
                           p1=0, p2=0, p3=0, p4=1.0, p5=0, p6=0, p7=0, p8=1.0)
    return ClusterProblem(
        name="toy-static", model=TOY,
        machines=(MachineGroup(name="box", gpu=gpu, gpus_per_machine=4, count=2, tensor_parallel=1),),
        sample_inputs=(10, 10, 10, 2), sample_outputs=(5, 5, 5, 20), max_input=5, max_output=20,
        memory=NO_OVERHEAD, estimator="static", hetero_models={model_key("toy-gpu", 1): cost})


def test_static_objective_hand_worked():
    # KV = 30 B, 1 B per token; Alg. 1 in sample order (I, O) = (10,5), (10,5), (10,5), (2,20):
    #   [r0, r1]: 20 + 2·5 = 30 ≤ 30; + r2: 30 + 3·5 = 45 > 30 → batch {r0, r1}
    #   [r2]: + r3: 12 + 2·20 = 52 > 30 → batch {r2};  [r3] alone
    # each batch costs p4 = 1 s of prefill + O_B decode steps of p8 = 1 s: (1+5) + (1+5) + (1+20) = 33 s
    # tokens = 3·(10+5) + (2+20) = 67 → 67/33 tokens/s per instance; 4 instances per machine, 2 machines
    problem = _toy_static_problem()
    report = validate_tp_plan(problem, (1,))
    assert report.feasible, report.summary()
    assert report.details["groups"]["box"]["batches"] == 3
    assert report.objective == pytest.approx(2 * 4 * 67 / 33, rel=1e-12)
    solution, _ = enumerate_cluster(problem)
    assert solution.best[1] == pytest.approx(report.objective, rel=1e-12)


def _toy_continuous_problem(**update) -> ClusterProblem:
    gpu = GPUSpec(name="toy-gpu", memory_gb=10_001e-9)  # KV(t=1) = 10,001 − 1 = 10,000 B
    cost = AladdinCostModel(model="toy", gpu="toy-gpu", tensor_parallel=1, prefill_s_per_token=0.0005,
                            prefill_base_s=0.02, decode_s_per_request=0.001, decode_s_per_context_token=0.00002,
                            decode_base_s=0.01, kv_bytes_per_token=1.0)
    data = {"name": "toy-continuous", "model": TOY,
            "machines": (MachineGroup(name="box", gpu=gpu, gpus_per_machine=2, count=3),),
            "sample_inputs": (100, 300), "sample_outputs": (50, 150), "max_input": 1000, "max_output": 1000,
            "memory": NO_OVERHEAD, "estimator": "continuous", "ttft_s": 1.0, "atgt_s": 0.13,
            "aladdin_models": {model_key("toy-gpu", 1): cost, model_key("toy-gpu", 2): cost}}
    data.update(update)
    return ClusterProblem(**data)


def test_continuous_objective_hand_worked():
    # Ī = 200, Ō = 100, mean context l̄ = 200 + 100/2 = 250 tokens.
    # KV limit: 10,000 B / (1 B · 250) = 40; ATGT limit: (0.13 − c2 0.01)/(k2 0.001 + k3 0.00002·250) = 0.12/0.006 = 20
    # b* = min(40, 20, 256) = 20; prefill = 0.0005·200 + 0.02 = 0.12 s ≤ TTFT 1 s
    # seconds per request = 0.12 + Ō·(c2/b* + k2 + k3·l̄) = 0.12 + 100·(0.0005 + 0.006) = 0.77 s
    # instance: 300 tokens / 0.77 s; t = 1 → 2 instances per machine; 3 machines
    problem = _toy_continuous_problem()
    report = validate_tp_plan(problem, (1,))
    assert report.feasible, report.summary()
    assert report.objective == pytest.approx(3 * 2 * 300 / 0.77, rel=1e-12)
    # the enumeration's own estimate agrees (rel 1e-9), whichever degree it ranks first
    solution, _ = enumerate_cluster(problem)
    for degrees, value in solution.ranked:
        assert validate_tp_plan(problem, degrees).objective == pytest.approx(value, rel=1e-9)


# ---- wrong plans are rejected with the right violation ------------------------------------------------

def test_degree_that_does_not_divide_the_machine_is_rejected():
    problem = _load("llama3-8b-8xv100.yaml")  # one box of 8 V100s: 3 does not divide 8
    report = validate_tp_plan(problem, (3,))
    assert not report.feasible
    assert _kinds(report) == {"divisibility"}
    assert report.violations[0].value == 3 and report.violations[0].limit == 8


def test_llama2_70b_at_tp1_on_an_80gb_gpu_does_not_fit():
    # Llama-2-70B: 68,976,648,192 parameters · 2 B = 137.95 GB of weights; one A100-80GB gives
    # 80 · 0.9 = 72 GB to the engine, minus δ = 2 GB → KV = 72 − 2 − 137.95 = −67.95 GB < 0
    problem = _load("llama2-70b-a100-h100.yaml")
    report = validate_tp_plan(problem, (1, 4))
    assert not report.feasible
    assert _kinds(report) == {"weights_memory"}
    (v,) = report.violations
    assert "dgx-a100" in v.where
    assert report.details["groups"]["dgx-a100"]["kv_size_gb"] == pytest.approx(72 - 2 - 137.953, abs=0.01)
    assert report.details["objective_recomputed"] is False


def test_longest_request_that_does_not_fit_the_kv_cache_is_rejected():
    # Llama-2-70B on 2 × A100-80GB: KV = 2·72 − 2 − 137.95 = 4.05 GB.  GQA: 2 · 80 layers · 8 KV heads · 128 · 2 B
    # = 327,680 B per token (the paper's 2·l·h·b would give 2·80·8192·2 = 2,621,440 B).
    # Eq. 2 with I_max + O_max = 4096: 1.34 GB ≤ 4.05 GB fits; with 16,384 tokens: 5.37 GB > 4.05 GB.
    problem = _load("llama2-70b-a100-h100.yaml")
    assert validate_tp_plan(problem, (2, 8)).feasible
    long = problem.model_copy(update={"max_input": 8192, "max_output": 8192})
    report = validate_tp_plan(long, (2, 8))
    assert not report.feasible and _kinds(report) == {"kv_memory"}
    (v,) = report.violations
    assert v.limit == pytest.approx(327_680 * 16_384) and v.value == pytest.approx(4.05e9, rel=1e-3)
    # TP 8 on the H100s (8·72 − 2 − 137.95 = 436 GB) still fits


def test_fixed_degree_and_shape_and_missing_model_are_rejected():
    problem = _toy_static_problem()  # the group's TP is fixed to 1
    assert _kinds(validate_tp_plan(problem, (2,))) >= {"fixed_degree"}
    assert _kinds(validate_tp_plan(problem, (1, 1))) == {"shape"}
    assert _kinds(validate_tp_plan(problem, {"other": 1})) == {"shape"}
    # t = 2 divides 4 and the memory fits (2·31 − 1 = 61 B), but there is no p1..p8 model for toy-gpu@tp2
    free = problem.model_copy(update={"machines": (problem.machines[0].model_copy(update={"tensor_parallel": None}),)})
    assert _kinds(validate_tp_plan(free, (2,))) == {"cost_model"}


def test_continuous_slo_violation_is_rejected():
    # TTFT 0.1 s < the 0.12 s prefill of a mean prompt: no degree meets the SLO
    report = validate_tp_plan(_toy_continuous_problem(ttft_s=0.1), (1,))
    assert not report.feasible and _kinds(report) == {"slo"}
    # ATGT 0.0105 s: (0.0105 − 0.01)/0.006 = 0.083 requests per decode iteration < 1
    report = validate_tp_plan(_toy_continuous_problem(atgt_s=0.0105), (1,))
    assert not report.feasible and _kinds(report) == {"slo"}


# ---- a tampered enumeration is caught ---------------------------------------------------------------------

def test_tampered_objective_is_detected():
    problem = _load("llama3-8b-8xv100.yaml")
    solution, seconds = enumerate_cluster(problem)
    (degrees, value), *rest = solution.ranked
    honest = enumeration_result(problem, solution, seconds)
    assert honest.message == ""
    tampered = dataclasses.replace(solution, ranked=((degrees, value * 1.01), *rest))
    result = enumeration_result(problem, tampered, seconds)
    assert result.validation.feasible  # the plan itself is fine ...
    assert result.validation.objective == pytest.approx(value, rel=1e-9)  # ... its tokens/s is recomputed ...
    assert "differs from the validator's" in result.message  # ... and the 1 % inflation is named
    # below the 1e-6 tolerance nothing is reported
    within = dataclasses.replace(solution, ranked=((degrees, value * (1 + 1e-9)), *rest))
    assert enumeration_result(problem, within, seconds).message == ""


def test_tampered_plan_is_an_error():
    problem = _load("llama2-70b-a100-h100.yaml")
    solution, seconds = enumerate_cluster(problem)
    _, value = solution.best
    tampered = dataclasses.replace(solution, ranked=(((1, 4), value),))  # Llama-2-70B on one A100: no fit
    result = enumeration_result(problem, tampered, seconds)
    assert result.status == SolveStatus.ERROR
    assert "validator rejects" in result.message and not result.validation.feasible


# ---- independence and the CLI ---------------------------------------------------------------------------

def test_validator_shares_no_code_with_enumeration_memory_or_throughput():
    tree = ast.parse(VALIDATOR_SRC.read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    for module in ("planner.deployment.enumeration", "planner.deployment.memory", "planner.deployment.throughput"):
        assert module not in imported


def test_cli_json_carries_the_verdict(monkeypatch, capsys):
    path = REPO / "instances/deployment/clusters/llama3-8b-8xv100.yaml"
    code, stdout, _ = run_cli(monkeypatch, capsys, "solve", "deployment", str(path), "--json")
    assert code == 0
    data = json.loads(stdout)
    assert data["validation"] is not None and data["validation"]["feasible"]
    assert data["validation"]["objective_name"] == "tokens_per_s"
    assert data["validation"]["objective"] == pytest.approx(data["objective"], rel=1e-9)
    code, stdout, _ = run_cli(monkeypatch, capsys, "solve", "deployment", str(path))
    assert code == 0 and "validator: valid, tokens/s recomputed" in stdout


def test_catalog_figures_used_above():
    # the hand arithmetic in the memory tests relies on these catalog entries
    llama70 = find_model("Llama-2-70B")
    assert llama70.num_parameters * llama70.dtype_bytes == pytest.approx(137.953e9, rel=1e-4)
    assert 2 * llama70.num_layers * llama70.num_kv_heads * llama70.head_dim * llama70.dtype_bytes == 327_680
    assert find_gpu("A100-80GB-SXM").memory_gb == 80
