"""Bad deployment / cost-plan / routing input: one line `FILE: field: problem`, exit code 2, never a traceback or hang."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from support import run_cli

CL = "family: deployment-tp\nmodel: Llama-3-8B\nsamples: 50\n"
MA = "machines: [{gpu: V100-32GB-SXM2, gpus: 8}]\n"
INV = "inventory: [{gpu: A100-80GB-SXM, machines: 4, gpus_per_machine: 8, price_per_gpu_hour: %s}]\n"
DEM = "demands: [{model: Llama-2-7B, rate: %s, workload: sharegpt, ttft_s: 2, atgt_s: 0.1}]\n"
CP = INV % "1.8" + DEM % "6"
RT_INST = ("instances: [{name: v100-t4, gpu: V100-32GB-SXM2, tensor_parallel: 4}, "
           "{name: v100-t1, gpu: V100-32GB-SXM2, tensor_parallel: 1, count: 2}]\n")
RT = "family: routing\nmodel: Llama-3-8B\n" + RT_INST

# case: (command, file text, expected `field: problem` after the file name)
BAD = {
    # 1. paths that are not text
    "models_dir_int": ("deployment", CL + MA + "models_dir: 5\n", "models_dir: must be a path (text), got 5"),
    "models_dir_list": ("deployment", CL + MA + "models_dir: [a]\n", "models_dir: must be a path (text), got ['a']"),
    "samples_csv_int": ("deployment", CL + MA + "samples_csv: 5\n", "samples_csv: must be a path (text), got 5"),
    "requests_csv_int": ("routing", RT + "requests_csv: 5\n", "requests_csv: must be a path (text), got 5"),
    # 2. seeds
    "seed_text": ("deployment", CL + MA + "seed: abc\n", "seed: must be a non-negative integer, got 'abc'"),
    "seed_float": ("deployment", CL + MA + "seed: 1.5\n", "seed: must be a non-negative integer, got 1.5"),
    "seed_negative": ("deployment", CL + MA + "seed: -1\n", "seed: must be a non-negative integer, got -1"),
    "routing_seed_text": ("routing", RT + "requests: {count: 10, seed: abc}\n",
                          "requests.seed: must be a non-negative integer, got 'abc'"),
    "routing_seed_negative": ("routing", RT + "requests: {count: 10, seed: -5}\n",
                              "requests.seed: must be a non-negative integer, got -5"),
    # 3. slo not a mapping
    "slo_scalar": ("deployment", CL + MA + "slo: 5\n", "slo: must be a mapping (ttft_s, atgt_s), got 5"),
    # 4. degrees not a list
    "degrees_scalar": ("cost", CP + "degrees: 5\n", "degrees: must be a non-empty list of TP degrees, got 5"),
    # 9-14. huge sizes
    "inventory_huge": ("cost", CP.replace("machines: 4", "machines: 1000000000000"),
                       "inventory[0].machines: must be at most 100,000"),
    "gpus_huge": ("deployment", CL + "machines: [{gpu: V100-32GB-SXM2, gpus: 100000000000}]\n",
                  "machines[0].gpus: must be at most 1,024"),
    "independent_huge": ("deployment", CL + "independent_machines: true\n"
                         "machines: [{gpu: V100-32GB-SXM2, gpus: 8, count: 100000000}]\n",
                         "machines[0].count: must be at most 100,000"),
    "independent_many": ("deployment", CL + "independent_machines: true\n"
                         "machines: [{gpu: V100-32GB-SXM2, gpus: 8, count: 2000}]\n",
                         "independent_machines: at most 1,000 machines in all"),
    "samples_huge": ("deployment", "family: deployment-tp\nmodel: Llama-3-8B\nsamples: 100000000\n" + MA,
                     "samples: must be at most 100,000"),
    "requests_huge": ("routing", RT + "requests: {count: 50000000}\n", "requests.count: must be at most 1,000,000"),
    "requests_pairs": ("routing", RT + "requests: {count: 1000000}\n", "requests.count: 1,000,000 requests x 3 instances = 3,000,000 pairs, at most 2,000,000"),
    "instances_huge": ("routing", RT.replace("count: 2", "count: 10000000"),
                       "instances[1].count: must be at most 10,000"),
    # 19-22. inf / huge / booleans
    "price_inf": ("cost", INV % ".inf" + DEM % "6",
                  "inventory[0].price_per_gpu_hour: must be a finite positive number, got inf"),
    "price_huge": ("cost", INV % "1.0e+308" + DEM % "6", "inventory[0].price_per_gpu_hour: must be at most"),
    "price_bool": ("cost", INV % "true" + DEM % "6", "inventory[0].price_per_gpu_hour: expected a number, got true"),
    "rate_inf": ("cost", INV % "1.8" + DEM % ".inf", "demands[0].rate: must be a finite positive number, got inf"),
    "rate_huge": ("cost", INV % "1.8" + DEM % "1.0e+300", "demands[0].rate: must be at most"),
    "rate_bool": ("cost", INV % "1.8" + DEM % "true", "demands[0].rate: expected a number, got true"),
    "theta_bool": ("routing", RT + "theta: true\n", "theta: expected a number, got true"),
    "theta_inf": ("routing", RT + "theta: .inf\n", "theta: must be a finite positive number, got inf"),
    "wrr_inf": ("routing", ("family: routing\nmodel: Llama-3-8B\n"
                "instances: [{name: a, gpu: V100-32GB-SXM2, tensor_parallel: 4, wrr_weight: .inf}]\n"),
                "instances[0].wrr_weight: must be a finite positive number, got inf"),
    "overhead_inf": ("deployment", CL + MA + "engine_overhead_gb: .inf\n",
                     "engine_overhead_gb: must be a finite non-negative number, got inf"),
    # 23. huge machine count
    "count_huge": ("deployment", CL + "machines: [{gpu: V100-32GB-SXM2, gpus: 8, count: 100000000000000000000000}]\n",
                   "machines[0].count: must be at most 100,000"),
    # 24. unknown keys
    "unknown_top": ("deployment", CL + MA + "samplez: 5\n", "samplez: unknown field (check the spelling)"),
    "unknown_machine": ("deployment", CL + "machines: [{gpu: V100-32GB-SXM2, gpus: 8, cuont: 3}]\n",
                        "machines[0].cuont: unknown field (check the spelling)"),
    "unknown_requests": ("routing", RT + "requests: {cuont: 10}\n", "requests.cuont: unknown field (check the spelling)"),
    "unknown_routing_top": ("routing", RT + "thetta: 3\n", "thetta: unknown field (check the spelling)"),
    "unknown_slo": ("deployment", CL + MA + "slo: {ttft: 1}\n", "slo.ttft: unknown field (check the spelling)"),
    "unknown_demand": ("cost", INV % "1.8" + "demands: [{model: Llama-2-7B, rate: 6, workload: sharegpt, bogus: 1}]\n",
                       "demands[0].bogus: unknown field (check the spelling)"),
    "unknown_instance": ("routing", RT.replace("count: 2", "cuont: 2"),
                         "instances[1].cuont: unknown field (check the spelling)"),
    # 25. booleans must be booleans
    "independent_text": ("deployment", CL + MA + 'independent_machines: "no"\n',
                         "independent_machines: must be true or false, got 'no'"),
    # 28-30. duplicate names
    "duplicate_groups": ("deployment", CL + "machines: [{name: a, gpu: V100-32GB-SXM2, gpus: 8}, "
                         "{name: a, gpu: V100-32GB-SXM2, gpus: 4}]\n",
                         "machines: duplicate group name 'a' (machines[0] and machines[1])"),
    "duplicate_demands": ("cost", INV % "1.8" + "demands: [{model: Llama-2-7B, rate: 6, workload: sharegpt}, "
                          "{model: Llama-2-7B, rate: 1, workload: sharegpt}]\n",
                          "demands: duplicate model 'Llama-2-7B' (demands[0] and demands[1])"),
    "duplicate_instances": ("routing", ("family: routing\nmodel: Llama-3-8B\n"
                            "instances: [{name: a, gpu: V100-32GB-SXM2, tensor_parallel: 4}, "
                            "{name: a, gpu: V100-32GB-SXM2, tensor_parallel: 1}]\n"),
                            "instances: duplicate instance name 'a' (instances[0] and instances[1])"),
    # 31. degrees that divide nothing
    "degrees_divide_nothing": ("cost", CP + "degrees: [3]\n", "degrees: 3 divides no machine's GPU count"),
    "price_text_exponent": ("cost", INV % "1e308" + DEM % "6",
                            "inventory[0].price_per_gpu_hour: expected a number, got '1e308' (YAML reads"),
    # 32. token caps and field paths
    "max_input_huge": ("deployment", CL + MA + "max_input: 100000000000000000000000\n",
                       "max_input: must be at most 1,000,000"),
    "max_input_float": ("deployment", CL + MA + "max_input: 1e23\n", "max_input: must be a positive integer"),
    "slo_text": ("deployment", CL + MA + "slo: {ttft_s: abc}\n", "slo.ttft_s: expected a number, got 'abc'"),
    "wrr_text": ("routing", ("family: routing\nmodel: Llama-3-8B\n"
                 "instances: [{name: a, gpu: V100-32GB-SXM2, tensor_parallel: 4, wrr_weight: abc}]\n"),
                 "instances[0].wrr_weight: expected a number, got 'abc'"),
}

COMMANDS = {"deployment": ("solve", "deployment"), "cost": ("solve", "deployment"), "routing": ("solve", "routing")}


def _one_line(stderr: str) -> str:
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr and "Warning" not in stderr
    return lines[0]


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_deployment_input_one_line(monkeypatch, capsys, tmp_path: Path, case: str) -> None:
    kind, text, expected = BAD[case]
    path = tmp_path / f"{case}.yaml"
    path.write_text(text)
    start = time.perf_counter()
    code, _, stderr = run_cli(monkeypatch, capsys, *COMMANDS[kind], str(path))
    assert time.perf_counter() - start < 10, "a bad size must be refused at once, not worked on"
    line = _one_line(stderr)
    assert code == 2, stderr
    assert f"{path}: {expected}" in line, line


@pytest.mark.parametrize("command", [("solve", "routing"), ("compare", "routing"), ("solve", "deployment")])
@pytest.mark.parametrize("option", [("--time-limit", "nan"), ("--time-limit", "0"), ("--threads", "0"),
                                    ("--threads", "-3")])
def test_run_options_refused(monkeypatch, capsys, tmp_path: Path, command, option) -> None:
    path = tmp_path / "inst.yaml"
    path.write_text(RT if command[1] == "routing" else CP)
    code, _, stderr = run_cli(monkeypatch, capsys, *command, str(path), *option)
    line = _one_line(stderr)
    assert code == 2
    assert option[0] in line and ("must be positive" in line or "must be at least 1" in line), line


def test_routing_time_limit_covers_the_whole_call(monkeypatch, capsys, tmp_path: Path) -> None:
    """The warm start's local search and the routers count against --time-limit (5000 requests, 5 s: was 27.5 s)."""
    path = tmp_path / "big.yaml"
    path.write_text(RT + "requests: {count: 3000}\n")
    for command in (("solve", "routing"), ("compare", "routing")):
        start = time.perf_counter()
        code, _, stderr = run_cli(monkeypatch, capsys, *command, str(path), "--time-limit", "2")
        assert code == 0, stderr
        assert time.perf_counter() - start < 12, command


def test_local_search_budget_and_never_worse(tmp_path: Path) -> None:
    import numpy as np

    from planner.core.work import WorkClock
    from planner.deployment.instance import load_routing_instance
    from planner.deployment.routing import ROUTERS, local_search

    path = tmp_path / "r.yaml"
    path.write_text(RT + "requests: {count: 200}\n")
    problem = load_routing_instance(path)
    start = ROUTERS["rr"](problem).as_array()
    p = problem.processing_times

    def makespan(a: np.ndarray) -> float:
        loads = np.zeros(p.shape[1])
        np.add.at(loads, a, p[np.arange(len(a)), a])
        return float(loads.max())

    spent = WorkClock(1.0)
    spent.charge(1.0)  # nothing of the budget left: unchanged
    info: dict = {}
    assert (local_search(problem, start, clock=spent, info=info) == start).all() and info["budget_stop"]
    better = local_search(problem, start)
    assert makespan(better) < makespan(start) and problem.fits[np.arange(len(better)), better].all()
    # a nominal budget stops after the same rounds on every run
    runs = []
    for _ in range(2):
        info = {}
        runs.append((local_search(problem, start, clock=WorkClock(0.01, guard_share=float("inf")), info=info), info))
    assert (runs[0][0] == runs[1][0]).all() and runs[0][1] == runs[1][1] and runs[0][1]["budget_stop"]


def test_largest_independent_cluster_is_quick(monkeypatch, capsys, tmp_path: Path) -> None:
    """1,000 machines choosing their own degree (the cap): cost models read once per (GPU, t), not per machine."""
    import json

    path = tmp_path / "ind.yaml"
    path.write_text(CL + "independent_machines: true\nmachines: [{gpu: V100-32GB-SXM2, gpus: 8, count: 1000}]\n")
    start = time.perf_counter()
    code, stdout, stderr = run_cli(monkeypatch, capsys, "solve", "deployment", str(path), "--json")
    assert code == 0, stderr
    assert time.perf_counter() - start < 30
    assert json.loads(stdout)["solution"]["combinations"] == 4**1000
