"""The CLI end to end: the --json contract, compare, fit, generate, plan worker-config, simulate replay, plan scaling."""

from __future__ import annotations

import json

import pytest
import yaml

from support import REPO, run_cli

INSTANCE = REPO / "instances" / "placement" / "sharegpt-70b-a100-n40.yaml"


def test_solve_json_follows_the_contract(monkeypatch, capsys):
    code, out, err = run_cli(monkeypatch, capsys, "solve", "placement", str(INSTANCE), "--json")
    assert code == 0, err
    d = json.loads(out)
    for key in ("status", "objective", "bound", "gap", "solve_seconds", "solver", "solution", "validation"):
        assert key in d
    assert d["status"] == "optimal" and d["gap"] == 0.0 and d["solver"] == "highs"
    assert d["validation"]["feasible"] and d["validation"]["objective"] == d["objective"]
    assignment = d["solution"]["assignment"]
    assert len(assignment) == 40 and len(set(assignment.values())) == d["objective"]
    assert d["solution"]["gpus"] == 2 * d["objective"]


def test_every_shipped_instance_solves_to_proven_optimum(monkeypatch, capsys):
    for path in sorted((REPO / "instances" / "placement").glob("*.yaml")):
        code, out, err = run_cli(monkeypatch, capsys, "solve", "placement", str(path), "--json", "--time-limit", "60")
        assert code == 0, (path, err)
        d = json.loads(out)
        assert d["status"] == "optimal", (path, d["message"])
        assert d["validation"]["feasible"] and d["objective"] == d["validation"]["objective"]


def test_solve_with_gurobi_agrees_with_highs(monkeypatch, capsys, require_gurobi):
    _, out_h, _ = run_cli(monkeypatch, capsys, "solve", "placement", str(INSTANCE), "--json")
    code, out_g, err = run_cli(monkeypatch, capsys, "solve", "placement", str(INSTANCE), "--json", "--solver", "gurobi")
    assert code == 0, err
    g, h = json.loads(out_g), json.loads(out_h)
    if g["status"] == "error":  # a model above the pip license size: the message says so
        assert "2000" in g["message"]
    else:
        assert g["objective"] == h["objective"] and g["status"] == "optimal"


def test_compare_lists_every_heuristic_with_gap_to_optimum(monkeypatch, capsys):
    code, out, err = run_cli(monkeypatch, capsys, "compare", "placement", str(INSTANCE), "--json")
    assert code == 0, err
    d = json.loads(out)
    methods = {m["method"]: m for m in d["methods"]}
    assert set(methods) == {"best_fit", "first_fit_decreasing", "jsq", "power_of_two", "round_robin", "mip"}
    opt = d["optimum"]
    assert d["reference"] == opt and d["gap_reference"] == "optimum"
    for m in methods.values():
        assert m["valid"] and m["objective"] >= opt and m["bound"] <= opt and m["gpus"] >= m["objective"]
        # the one gap (planner.compare): relative to the larger value, e.g. 15 workers vs 14: 1/15
        assert m["gap"] == pytest.approx((m["objective"] - opt) / m["objective"])
        assert m["gap_reference"] == "optimum" and m["result"]["objective"] == m["objective"]
    code, out, _ = run_cli(monkeypatch, capsys, "compare", "placement", str(INSTANCE))
    assert code == 0 and "round_robin" in out and "MIP optimum" in out


def test_fit_writes_models_with_holdout_error(monkeypatch, capsys, tmp_path, shared_data):
    src = shared_data / "profiling" / "splitwise_sim" / "perf_model.csv"
    code, out, err = run_cli(monkeypatch, capsys, "fit", str(src), "--gpu", "A100", "--tp", "2",
                             "--out-dir", str(tmp_path), "--json")
    assert code == 0, err
    d = json.loads(out)
    assert len(d["models"]) == 1 and d["models"][0]["status"] == "written"
    assert d["models"][0]["decode_holdout_mape"] < 10
    written = yaml.safe_load((tmp_path / "aladdin/llama-2-70b__a100-80gb-sxm__tp2.yaml").read_text())
    assert "perf_model.csv" in written["provenance"]
    # a second run keeps the existing file unless --force
    code, out, _ = run_cli(monkeypatch, capsys, "fit", str(src), "--gpu", "A100", "--tp", "2",
                           "--out-dir", str(tmp_path), "--json")
    assert json.loads(out)["models"][0]["status"].startswith("skipped")
    # a kernel composition never replaces a file fitted on end-to-end measurements, even with --force
    before = (tmp_path / "aladdin/llama-2-70b__a100-80gb-sxm__tp2.yaml").read_text()
    code, out, err = run_cli(monkeypatch, capsys, "fit", str(shared_data / "profiling" / "vidur"), "--source-format", "vidur",
                             "--model", "Llama-2-70B", "--gpu", "A100-80GB-SXM", "--tp", "2", "--out-dir",
                             str(tmp_path), "--force", "--json")
    assert code == 0, err
    assert [m["status"] for m in json.loads(out)["models"]] == ["kept (the existing file is fitted on end-to-end measurements)"]
    assert (tmp_path / "aladdin/llama-2-70b__a100-80gb-sxm__tp2.yaml").read_text() == before


def test_generate_then_solve(monkeypatch, capsys, tmp_path):
    monkeypatch.chdir(REPO)
    target = tmp_path / "gen.yaml"
    code, _, err = run_cli(monkeypatch, capsys, "generate", "placement", str(target), "--workload", "azure_code",
                           "--requests", "12", "--ongoing", "30", "--seed", "5")
    assert code == 0, err
    code, out, err = run_cli(monkeypatch, capsys, "solve", "placement", str(target), "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["status"] == "optimal" and d["stats"]["ongoing_workers"] >= 1


def test_worker_config_json(monkeypatch, capsys):
    monkeypatch.chdir(REPO)
    code, out, err = run_cli(monkeypatch, capsys, "plan", "worker-config", "--model", "Llama-2-70B", "--gpu", "A100-80GB-SXM", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["best_tensor_parallel"] == 2
    assert [o["feasible"] for o in d["options"]] == [False, True, True, True]


def test_replay_and_scaling_small(monkeypatch, capsys):
    monkeypatch.chdir(REPO)
    code, out, err = run_cli(monkeypatch, capsys, "simulate", "replay", "--rate", "1", "--duration", "30", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["requests"] > 10 and d["finished"] == d["requests"] and d["kv_overflows"] == 0
    code, out, err = run_cli(monkeypatch, capsys, "plan", "scaling", "--rate", "0.5", "--rate", "2", "--duration", "60", "--warmup", "20", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["k_w"] > 0


def test_cli_method_and_format_lists_match_the_packages():
    # The CLI spells these lists out so that building it does not import the packages; they must agree.
    from planner.cli.online import METHODS, TRACE_FORMATS
    from planner.placement.heuristics import HEURISTICS
    from planner.workloads import lengths

    assert METHODS == (*HEURISTICS, "mip")
    assert TRACE_FORMATS == lengths.TRACE_FORMATS
    from planner.batching.scheduler import PRESETS
    from planner.cli.batching import PRESET_NAMES

    assert PRESET_NAMES == tuple(PRESETS)
    from planner.cli import priority as priority_cli
    from planner.priority import pipeline as priority_solve

    assert priority_cli.METHODS == priority_solve.METHODS
    assert priority_cli.EXACT_METHODS == priority_solve.EXACT_METHODS


def test_small_gaps_are_shown_with_enough_decimals():
    from planner.cli.common import fmt_gap

    # 0.0054 % must not print as 0.01 % (the optimality tolerance) nor 0.00 %
    assert [fmt_gap(g) for g in (None, float("nan"), 0.0, 5.4e-5, 0.0123)] == ["-", "-", "0.00%", "0.0054%", "1.23%"]


def test_huge_whole_numbers_are_not_printed_digit_by_digit():
    from planner.cli.common import fmt

    # 1e300 is "integral" as a float, but printing int(1e300) gives 301 digits
    assert fmt(1e300) == "1e+300" and fmt(float("inf")) == "inf" and fmt(12.0) == "12" and fmt(0.5) == "0.5"


def test_outputs_built_on_a_cost_model_carry_its_caveats(monkeypatch, capsys):
    # worker-config: the derived 13B files say they are derived from another model and have no measured rows
    code, out, err = run_cli(monkeypatch, capsys, "plan", "worker-config", "--model", "Llama-2-13B", "--gpu", "A100-80GB-SXM",
                             "--tp", "1", "--json")
    assert code == 0, err
    (option,) = json.loads(out)["options"]
    assert {"derived_from_other_model", "no_measured_rows"} <= set(option["cost_caveats"])
    # replay: the Splitwise H100 TP 4 file states that its prefill error is above the 5 % target
    code, out, err = run_cli(monkeypatch, capsys, "simulate", "replay", "--model", "Llama-2-70B", "--gpu", "H100-80GB-SXM",
                             "--tp", "4", "--rate", "1", "--duration", "60", "--json")
    assert code == 0, err
    caveats = json.loads(out)["cost_model_caveats"]
    assert any(c.startswith("above_target: ") and "prefill" in c for c in caveats)
