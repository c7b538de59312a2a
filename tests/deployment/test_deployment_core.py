"""Deployment family: memory check (Eq. 1–2), Alg. 1, enumeration vs brute force, cost MILP vs brute force."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from planner.catalog import find_gpu, find_model
from planner.core.types import GPUSpec
from planner.costmodels.models import HeteroCostModel
from planner.deployment.cost_solve import max_servable_load, run_cost_heuristic, solve_cost_plan
from planner.deployment.enumeration import enumerate_cluster
from planner.deployment.memory import check_degrees, kv_size_bytes, paper_kv_bytes_per_token
from planner.deployment.problem import (
    ClusterProblem, CostPlanProblem, GPUInventory, InstanceOption, MachineGroup, ModelDemand, model_key,
)
from planner.deployment.solution import CostPlanSolution
from planner.deployment.throughput import static_batches, static_throughput
from planner.deployment.validator import validate_cost_plan
from planner.solver import SolveStatus
from support.deployment import cost_problem as _cost_problem, cost_brute_force as _brute_force

LLAMA3_8B = find_model("Llama-3-8B")
V100 = find_gpu("V100-32GB-SXM2")


# ---- Eq. 1–2 on the paper's 8x V100 box (FORMULATIONS.md §5.5) ------------------------------------

def test_llama3_8b_on_8xv100_kv_sizes_and_candidates():
    # Φ·b = 8,030,261,248 × 2 B = 16.06 GB; KVSize(t) = t·32·0.9 − 2 − 16.06 GB
    # t=1: 28.8 − 18.06 = 10.74; t=2: 57.6 − 18.06 = 39.54; t=4: 115.2 − 18.06 = 97.14; t=8: 230.4 − 18.06 = 212.34
    checks = check_degrees(LLAMA3_8B, V100, 8, max_input=4096, max_output=4096)
    assert [c.tensor_parallel for c in checks] == [1, 2, 4, 8]
    assert [c.instances for c in checks] == [8, 4, 2, 1]
    assert [round(c.kv_size_gb, 2) for c in checks] == [10.74, 39.54, 97.14, 212.34]
    # Eq. 2 with the context of 8192 tokens × 128 KiB = 1.07 GB ≤ 10.74 GB: every degree is a candidate
    assert all(c.feasible for c in checks)
    assert {c.tensor_parallel for c in checks if c.feasible} == {1, 2, 4, 8}


def test_kv_bytes_per_token_gqa_vs_paper():
    # GQA: 2 · 32 layers · 8 KV heads · 128 · 2 B = 131,072 B = 128 KiB; paper's 2·l·h·b = 2·32·4096·2 = 512 KiB
    assert LLAMA3_8B.kv_bytes_per_token == 131072
    assert paper_kv_bytes_per_token(LLAMA3_8B) == 524288


def test_weights_that_do_not_fit_are_reported():
    llama70 = find_model("Llama-2-70B")
    checks = check_degrees(llama70, V100, 8, max_input=2048, max_output=2048)
    by_t = {c.tensor_parallel: c for c in checks}
    # 137.95 GB of weights: 1, 2 and 4 V100s (28.8 / 57.6 / 115.2 GB usable) cannot hold them
    assert not by_t[1].feasible and not by_t[2].feasible and not by_t[4].feasible
    assert "do not fit" in by_t[1].reason
    assert by_t[8].feasible  # 230.4 − 2 − 137.95 = 90.45 GB of KV
    assert by_t[8].kv_size_gb == pytest.approx(90.45, abs=0.01)


# ---- Alg. 1 ------------------------------------------------------------------------------------------

def _toy_hetero(t: int = 1, **p: float) -> HeteroCostModel:
    base = dict(p1=0.0, p2=0.0, p3=0.0, p4=1.0, p5=0.0, p6=0.0, p7=0.0, p8=1.0)
    base.update(p)
    return HeteroCostModel(model="toy", gpu="toy-gpu", tensor_parallel=t, time_unit="s", **base)


def test_static_batching_hand_worked():
    # kv_token = 1 B, KVSize = 30 B; requests (I, O) = (10, 5), (10, 5), (10, 5), (2, 20)
    # batch [0,1]: 20 + 2·5 = 30 ≤ 30 ok; adding r2: 30 + 3·5 = 45 > 30 → batch (0, 2)
    # batch [2]: adding r3: 12 + 2·20 = 52 > 30 → batch (2, 3); batch [3] alone: (3, 4)
    inputs, outputs = np.array([10, 10, 10, 2]), np.array([5, 5, 5, 20])
    assert static_batches(inputs, outputs, kv_size=30, kv_per_token=1) == [(0, 2), (2, 3), (3, 4)]
    # a request bigger than the cache still gets a batch of its own (at least one per batch)
    assert static_batches(np.array([100]), np.array([1]), kv_size=30, kv_per_token=1) == [(0, 1)]


def test_static_throughput_hand_worked():
    # T_prefill = 1 s per batch (p4), T_decode = O_B s (p8 = 1 per step): batches take 1+5, 1+5, 1+20 = 33 s
    # tokens = 15·3 + 22 = 67; one instance: 67/33 tokens/s; machine of 4 GPUs with t = 1: ×4
    est = static_throughput(_toy_hetero(), kv_size=30, kv_per_token=1, inputs=np.array([10, 10, 10, 2]),
                            outputs=np.array([5, 5, 5, 20]), gpus_per_machine=4)
    assert est.batches == 3
    assert est.total_time_s == pytest.approx(33.0)
    assert est.tokens_per_s_instance == pytest.approx(67 / 33)
    assert est.tokens_per_s_machine == pytest.approx(4 * 67 / 33)


def test_hetero_decode_closed_form_equals_sum():
    m = _toy_hetero(p5=0.01, p6=0.2, p7=0.003, p8=0.5)
    b, i, o = 7, 33, 12
    direct = sum(0.01 * b * (i + k) + 0.2 * b + 0.003 * (i + k) + 0.5 for k in range(1, o + 1))
    assert m.decode_time_s(b, i, o) == pytest.approx(direct)


# ---- enumeration vs brute force ----------------------------------------------------------------------

def _cluster(groups: list[tuple[str, float, int, int]], models: dict[str, HeteroCostModel]) -> ClusterProblem:
    machines = tuple(MachineGroup(name=n, gpu=GPUSpec(name=g, memory_gb=mem), gpus_per_machine=u, count=c)
                     for n, (g, mem, u, c) in zip("abcdef", groups))
    return ClusterProblem(name="toy", model=LLAMA3_8B, machines=machines, sample_inputs=(100, 300, 50, 700),
                          sample_outputs=(200, 20, 400, 60), max_input=1000, max_output=1000,
                          hetero_models=models)


def test_enumeration_every_combination_once_and_best_is_brute_force():
    rng = np.random.default_rng(3)
    groups = [("g1", 40.0, 8, 2), ("g2", 24.0, 4, 3), ("g3", 80.0, 2, 1)]
    models = {}
    for g, _, u, _ in groups:
        for t in (1, 2, 4, 8):
            if u % t == 0:
                models[model_key(g, t)] = _toy_hetero(t, p1=float(rng.uniform(1e-6, 1e-5)), p4=float(rng.uniform(0.01, 0.1)),
                                                      p5=float(rng.uniform(1e-8, 1e-7)), p8=float(rng.uniform(0.005, 0.03)) / t)
    problem = _cluster(groups, models)
    solution, _ = enumerate_cluster(problem)
    by_group = {}
    for e in solution.estimates:
        if e.feasible:
            by_group.setdefault(e.group, {})[e.tensor_parallel] = e.tokens_per_s_machine
    # g2 (24 GB): Llama-3-8B needs 16.06 + 2 GB: t=1 gives 24·0.9 − 18.06 = 3.54 GB ≥ 1.07·(2000/8192)... feasible
    names = solution.groups
    brute = {}
    for combo in itertools.product(*[sorted(by_group[n]) for n in names]):
        brute[combo] = sum(by_group[n][t] * c for n, t, c in zip(names, combo, [g[3] for g in groups]))
    ranked = dict(solution.ranked)
    assert len(solution.ranked) == len(brute) == solution.combinations  # every combination exactly once
    assert set(ranked) == set(brute)
    for combo, value in brute.items():
        assert ranked[combo] == pytest.approx(value)
    best = max(brute, key=brute.get)
    assert solution.best[0] == best
    assert [v for _, v in solution.ranked] == sorted((v for _, v in solution.ranked), reverse=True)


# ---- cost MILP vs brute force ---------------------------------------------------------------------------





@pytest.mark.parametrize("seed", range(12))
def test_cost_milp_equals_brute_force(seed, solvers):
    problem = _cost_problem(np.random.default_rng(seed))
    best_cost, best_scale = _brute_force(problem)
    for solver in solvers:
        result = solve_cost_plan(problem, solver=solver)
        assert result.validation is not None and result.validation.feasible  # never exceeds the inventory
        if math.isfinite(best_cost):
            assert result.status == SolveStatus.OPTIMAL
            assert result.objective == pytest.approx(best_cost, rel=1e-6)
            assert result.objective == pytest.approx(result.validation.objective)
            assert result.gap is not None and result.gap <= 1e-6
        else:  # infeasible load: answered with the max servable load, not a crash
            assert result.status == SolveStatus.INFEASIBLE
            assert result.solution.mode == "max_load"
            assert result.solution.load_scale == pytest.approx(best_scale, rel=1e-6)
            assert f"{best_scale:.4g}" in result.message
        scale, _, _ = max_servable_load(problem, solver=solver)
        assert scale == pytest.approx(best_scale, rel=1e-6)
        for method in ("greedy", "single-type"):
            h = run_cost_heuristic(problem, method)
            if h.solution is not None:
                assert h.validation.feasible
                assert h.objective >= best_cost - 1e-6


def test_cost_validator_catches_inventory_excess_and_unserved_load():
    inventory = (GPUInventory(gpu=GPUSpec(name="g", memory_gb=80), machines=1, gpus_per_machine=4, price_per_gpu_hour=2.0),)
    demands = (ModelDemand(model="m", rate=3.0),)
    options = (InstanceOption(gpu_index=0, tensor_parallel=2, model_index=0, capacity=1.0),)
    problem = CostPlanProblem(name="v", inventory=inventory, demands=demands, options=options)
    # 3 instances × 2 GPUs = 6 > 4 GPUs; cost 3·2·2 = 12 $/h
    report = validate_cost_plan(problem, CostPlanSolution((3,), "hand"))
    assert not report.feasible and report.objective == pytest.approx(12.0)
    assert {v.constraint for v in report.violations} == {"inventory"}
    # 2 instances serve 2 req/s < 3 needed
    report = validate_cost_plan(problem, CostPlanSolution((2,), "hand"))
    assert [v.constraint for v in report.violations] == ["demand"]
    # the MILP: needs 3 instances but only 2 fit → max load 2/3
    result = solve_cost_plan(problem)
    assert result.status == SolveStatus.INFEASIBLE
    assert result.solution.load_scale == pytest.approx(2 / 3, rel=1e-6)
    assert result.validation.feasible


def test_kv_size_eq1_engine_overhead_once_per_instance():
    # t=2, 40 GB GPUs, φ = 1, δ = 3 GB: 80 − 3 − 16.06 = 60.94 GB
    gpu = GPUSpec(name="g", memory_gb=40)
    assert kv_size_bytes(LLAMA3_8B, gpu, 2, 1.0, 3.0) / 1e9 == pytest.approx(80 - 3 - 16.060522496)
