"""CLI of the deployment and routing families: shipped instances, --json contract, one-line bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support import run_cli

REPO = Path(__file__).resolve().parents[2]
CLUSTER = REPO / "instances/deployment/clusters/llama3-8b-8xv100.yaml"
COST = REPO / "instances/deployment/cost-two-models.yaml"
OVERLOAD = REPO / "instances/deployment/cost-overload.yaml"


def test_solve_cluster_json(monkeypatch, capsys):
    code, stdout, _ = run_cli(monkeypatch, capsys, "solve", "deployment", str(CLUSTER), "--json")
    assert code == 0
    data = json.loads(stdout)
    for key in ("status", "objective", "bound", "gap", "solve_seconds", "solver", "solution"):
        assert key in data
    kv = {e["tensor_parallel"]: round(e["kv_size_gb"], 2) for e in data["solution"]["estimates"]}
    assert kv == {1: 10.74, 2: 39.54, 4: 97.14, 8: 212.34}
    assert data["solution"]["combinations"] == 4
    assert data["objective"] == max(r["tokens_per_s"] for r in data["solution"]["ranked"])


def test_solve_cost_plan_json_proven_optimal(monkeypatch, capsys):
    code, stdout, _ = run_cli(monkeypatch, capsys, "solve", "deployment", str(COST), "--json")
    assert code == 0
    data = json.loads(stdout)
    assert data["status"] == "optimal" and data["gap"] <= 1e-6
    assert data["validation"]["feasible"] and data["objective"] == pytest.approx(data["validation"]["objective"])
    gpus = {}
    for item in data["solution"]["instances"]:
        gpu, tp = item["option"].split(" on ")[1].rsplit(" tp", 1)
        gpus[gpu] = gpus.get(gpu, 0) + int(tp) * item["count"]
    assert gpus.get("A100-80GB-SXM", 0) <= 32 and gpus.get("H100-80GB-SXM", 0) <= 16


def test_plan_cost_overload_gives_max_load(monkeypatch, capsys):
    code, stdout, _ = run_cli(monkeypatch, capsys, "solve", "deployment", str(OVERLOAD), "--json")
    assert code == 0
    data = json.loads(stdout)
    assert data["status"] == "infeasible"
    assert 0 < data["solution"]["load_scale"] < 1 and data["validation"]["feasible"]
    # status infeasible, objective null: the verdict says it scores the max-load plan's $/h
    assert data["objective"] is None and "x the requested rates" in data["validation"]["objective_name"]
    code, stdout, _ = run_cli(monkeypatch, capsys, "solve", "deployment", str(OVERLOAD), "--max-load", "--json")
    assert code == 0
    assert json.loads(stdout)["objective"] == pytest.approx(data["solution"]["load_scale"], rel=1e-6)


def test_compare_routing_small(monkeypatch, capsys, tmp_path):
    inst = tmp_path / "r.yaml"
    inst.write_text("family: routing\nname: small\nmodel: Llama-3-8B\n"
                    f"models_dir: {REPO / 'models'}\n"
                    "instances:\n  - {name: t4, gpu: V100-32GB-SXM2, tensor_parallel: 4}\n"
                    "  - {name: t1, gpu: V100-32GB-SXM2, tensor_parallel: 1, count: 2}\n"
                    "requests: {workload: sharegpt, count: 12, seed: 0}\n")
    code, stdout, _ = run_cli(monkeypatch, capsys, "compare", "routing", str(inst), "--json")
    assert code == 0
    data = json.loads(stdout)
    assert {m["method"] for m in data["methods"]} == {"rr", "wrr", "si", "mb", "mapper", "milp"}
    bound = next(m for m in data["methods"] if m["kind"] == "exact")["bound"]
    for m in data["methods"]:
        assert m["valid"] and m["objective"] >= bound * (1 - 1e-9)
        if data["gap_reference"] == "bound":  # to the bound: an upper estimate of the gap to the optimum
            assert data["reference"] == bound and m["gap"] >= 0


BAD = {
    "zero_gpus": ("family: deployment-tp\nmodel: Llama-3-8B\nmachines:\n  - {name: m, gpu: V100, gpus: 0}\n",
                  "machines[0].gpus: a machine with 0 GPUs"),
    "tp_not_dividing": ("family: deployment-tp\nmodel: Llama-3-8B\nmachines:\n  - {name: m, gpu: V100, gpus: 8, tensor_parallel: 3}\n",
                        "does not divide"),
    "fits_nowhere": ("family: deployment\ninventory:\n  - {gpu: A10-24GB, machines: 1, gpus_per_machine: 2, price_per_gpu_hour: 1}\n"
                     "demands:\n  - {model: Llama-2-70B, rate: 1, workload: sharegpt}\n", "fits nowhere"),
    "price_missing": ("family: deployment\ninventory:\n  - {gpu: A100, machines: 1, gpus_per_machine: 8}\n"
                      "demands:\n  - {model: Llama-2-7B, rate: 1, workload: sharegpt}\n", "price_per_gpu_hour"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_one_line(monkeypatch, capsys, tmp_path, case):
    text, expected = BAD[case]
    path = tmp_path / f"{case}.yaml"
    path.write_text(text)
    code, stdout, stderr = run_cli(monkeypatch, capsys, "solve", "deployment", str(path))
    assert code == 2
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    assert len(lines) == 1 and expected in lines[0] and "Traceback" not in stderr


def test_fit_hetero_kind(monkeypatch, capsys, tmp_path, shared_data):
    from planner.costmodels.files import load_cost_model

    code, _, _ = run_cli(monkeypatch, capsys, "fit", str(shared_data / "profiling/splitwise_sim/perf_model.csv"),
                         "--kind", "hetero", "--model", "Llama-2-70B", "--gpu", "A100-80GB-SXM", "--tp", "4",
                         "--out-dir", str(tmp_path), "--json")
    assert code == 0
    fitted = load_cost_model(tmp_path / "hetero/llama-2-70b__a100-80gb-sxm__tp4.yaml")
    assert fitted.kind == "hetero" and fitted.fit is not None
    assert fitted.fit.phases["decode"].holdout_mape is not None
    code, _, _ = run_cli(monkeypatch, capsys, "fit", str(shared_data / "profiling/splitwise_sim/perf_model.csv"),
                         "--kind", "bilinear", "--model", "Llama-2-70B", "--gpu", "A100-80GB-SXM", "--tp", "4",
                         "--out-dir", str(tmp_path), "--json")
    bil = load_cost_model(tmp_path / "bilinear/llama-2-70b__a100-80gb-sxm__tp4.yaml")
    # same least-squares problem: p1..p4 = prefill α..δ, p5..p8 = decode α..δ
    assert (fitted.p1, fitted.p4, fitted.p5, fitted.p8) == (bil.prefill.alpha, bil.prefill.delta, bil.decode.alpha, bil.decode.delta)


def test_harness_registration_and_runs():
    from planner.harness import RunOptions, available_families, family_of

    families = available_families()
    dep, routing = families["deployment"], families["routing"]
    assert dep.sense == "min" and dep.exact_method == "milp" and set(dep.heuristics) == {"greedy", "single-type"}
    assert routing.objective_name == "makespan (s)" and set(routing.heuristics) == {"rr", "wrr", "si", "mb", "mapper"}
    assert family_of(COST, families) == "deployment"
    assert family_of(CLUSTER, families) == "deployment-tp"
    tp = families["deployment-tp"]
    assert tp.sense == "max" and tp.exact_method == "enumeration"
    assert tp.heuristics == ("uniform-t1", "uniform-t2", "uniform-t4", "uniform-t8")
    problem = dep.load(COST)
    exact = dep.run(problem, "milp", RunOptions())
    for method in dep.heuristics:
        r = dep.run(problem, method, RunOptions())
        if r.objective is not None:
            assert r.validation.feasible and r.objective >= exact.objective - 1e-9


def test_cluster_model_fits_nowhere_one_line(monkeypatch, capsys, tmp_path):
    # Llama-2-70B (137.95 GB of weights) on machines of 2 x A10-24GB: 2·24·0.9 = 43.2 GB < 139.95 GB
    path = tmp_path / "nowhere.yaml"
    path.write_text("family: deployment-tp\nmodel: Llama-2-70B\nsamples: 5\n"
                    "machines:\n  - {name: small, gpu: A10-24GB, gpus: 2}\n")
    code, _, stderr = run_cli(monkeypatch, capsys, "solve", "deployment", str(path))
    assert code == 2
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    assert len(lines) == 1 and "fits on no TP degree" in lines[0]


def test_independent_machines_enumerates_per_machine(monkeypatch, capsys, tmp_path):
    # 2 V100 boxes choosing independently: 4 × 4 = 16 combinations; sharing: 4
    text = ("family: deployment-tp\nmodel: Llama-3-8B\nsamples: 20\n"
            f"models_dir: {REPO / 'models'}\n"
            "machines:\n  - {name: box, gpu: V100-32GB-SXM2, gpus: 8, count: 2}\n")
    shared, independent = tmp_path / "shared.yaml", tmp_path / "independent.yaml"
    shared.write_text(text)
    independent.write_text(text + "independent_machines: true\n")
    _, out_shared, _ = run_cli(monkeypatch, capsys, "solve", "deployment", str(shared), "--json")
    _, out_indep, _ = run_cli(monkeypatch, capsys, "solve", "deployment", str(independent), "--json")
    a, b = json.loads(out_shared), json.loads(out_indep)
    assert a["solution"]["combinations"] == 4 and b["solution"]["combinations"] == 16
    assert a["objective"] == pytest.approx(b["objective"])  # additive throughput: same best value
    assert len({tuple(r["degrees"].values()) for r in b["solution"]["ranked"]}) == 16  # each exactly once


def test_combination_count_of_many_independent_machines_does_not_overflow(monkeypatch, capsys, tmp_path):
    # 40 V100 boxes choosing independently among 4 degrees: 4^40 ≈ 1.2e24 combinations, past int64
    # (9.2e18); the count is exact and only the best plan (per-box maximum) is listed.
    path = tmp_path / "many.yaml"
    path.write_text("family: deployment-tp\nmodel: Llama-3-8B\nsamples: 20\n"
                    f"models_dir: {REPO / 'models'}\n"
                    "machines:\n  - {name: box, gpu: V100-32GB-SXM2, gpus: 8, count: 40}\nindependent_machines: true\n")
    code, out, _ = run_cli(monkeypatch, capsys, "solve", "deployment", str(path), "--json")
    assert code == 0
    data = json.loads(out)
    assert data["solution"]["combinations"] == 4**40
    assert any("about 10^24 combinations" in note for note in data["solution"]["notes"])
    assert data["validation"]["feasible"]


def test_many_machine_groups_print_one_configuration_column(monkeypatch, capsys, tmp_path):
    # 30 groups: the ranked table would need a column per group (unreadable; 1,000 groups took 5.4 s to
    # draw): one text column names the degrees by group instead, and the estimate table is cut at 40 rows.
    import yaml

    data = yaml.safe_load(CLUSTER.read_text())
    data["machines"] = [{"name": f"box{k}", "gpu": ("V100-32GB-SXM2", "A100-80GB-SXM")[k % 2], "gpus": 8, "count": 1}
                        for k in range(30)]
    path = tmp_path / "many.yaml"
    path.write_text(yaml.safe_dump(data))
    code, stdout, _ = run_cli(monkeypatch, capsys, "solve", "deployment", str(path))
    assert code == 0
    assert "TP degrees (30 machine groups)" in stdout and "t[box0]" not in stdout
    assert "… 80 more rows (120 in all; every row is in --json)" in stdout  # 30 groups × 4 degrees
    code, stdout, _ = run_cli(monkeypatch, capsys, "solve", "deployment", str(path), "--json")
    assert len(json.loads(stdout)["solution"]["estimates"]) == 120
    code, stdout, _ = run_cli(monkeypatch, capsys, "solve", "deployment", str(CLUSTER))
    assert "TP degrees (" not in stdout and "best: v100-box t=1 (" in stdout  # one group: a column per group


def test_compare_deployment_of_a_cluster_sets_the_uniform_baselines_beside_the_enumeration(monkeypatch, capsys):
    code, stdout, _ = run_cli(monkeypatch, capsys, "compare", "deployment", str(CLUSTER), "--json")
    assert code == 0
    data = json.loads(stdout)
    assert data["family"] == "deployment-tp" and data["sense"] == "max" and data["exact_method"] == "enumeration"
    rows = {r["method"]: r for r in data["methods"]}
    assert list(rows) == ["uniform-t1", "uniform-t2", "uniform-t4", "uniform-t8", "enumeration"]
    best = rows["enumeration"]
    assert best["status"] == "optimal" and data["reference"] == best["objective"]
    ranked = {tuple(r["degrees"].values()): r["tokens_per_s"] for r in best["result"]["solution"]["ranked"]}
    for t in (1, 2, 4, 8):  # one machine group: each baseline is a row of the ranked table, scored by the validator
        row = rows[f"uniform-t{t}"]
        assert row["valid"] is True and row["degrees"] == f"v100-box t={t}"
        assert row["objective"] == pytest.approx(ranked[(t,)], rel=1e-12)
        assert row["gap"] == pytest.approx((best["objective"] - row["objective"]) / best["objective"], abs=1e-12)
