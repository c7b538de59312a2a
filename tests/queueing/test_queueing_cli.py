"""CLI, instance files, bad input and the estimator of the queueing family."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from planner.queueing.estimator import EstimatorSettings, group_work_s, rates_for
from planner.queueing.groups import QueuedRequest, form_groups
from planner.queueing.instance import load_queueing_instance
from support.queueing_cli import INSTANCE, run
from support.queueing_cli import instance_file as _instance

REPO = Path(__file__).resolve().parents[2]




def test_solve_json_contract(monkeypatch, capsys):
    code, out, _ = run(monkeypatch, capsys, "solve", "queueing", str(INSTANCE), "--json")
    assert code == 0
    data = json.loads(out)
    for key in ("status", "objective", "bound", "gap", "solve_seconds", "solver", "solution"):
        assert key in data
    assert data["status"] == "optimal"
    assert data["objective"] == pytest.approx(data["validation"]["objective"])
    assert data["validation"]["objective_name"] == "penalty"
    assert data["evaluation"]["swaps"] == 1
    # the penalty carries the constant −Σ SLO; it is declared, and the gap leaves it out
    problem = load_queueing_instance(INSTANCE)
    assert data["objective_offset"] == pytest.approx(-float(problem.slo().sum()))


def test_compare_scores_every_plan_on_the_soft_objective_when_slos_cannot_be_met(monkeypatch, capsys):
    # overloaded-scale-up: no plan meets every SLO, so the MILP row holds the soft version's plan
    # (total lateness) and has no penalty; every baseline is scored on the same soft objective by the
    # validator, so the rows compare, and no baseline beats the soft MILP's plan.
    overloaded = REPO / "instances" / "queueing" / "overloaded-scale-up.yaml"
    code, out, _ = run(monkeypatch, capsys, "compare", "queueing", str(overloaded), "--json", "--time-limit", "10")
    assert code == 0
    data = json.loads(out)
    assert data["soft_objective_name"] == "total_lateness"
    methods = {m["method"]: m for m in data["methods"]}
    assert methods["milp"]["objective"] is None
    assert methods["milp"]["result"]["validation"]["objective_name"] == "total_lateness"
    assert methods["milp"]["soft"]["value"] == pytest.approx(methods["milp"]["result"]["validation"]["objective"])
    for name in ("fcfs", "edf", "greedy"):
        assert methods[name]["soft"]["objective"] == "total_lateness"
        assert methods[name]["soft"]["value"] >= methods["milp"]["soft"]["value"] - 1e-6


def test_compare_lists_every_method(monkeypatch, capsys):
    code, out, _ = run(monkeypatch, capsys, "compare", "queueing", str(INSTANCE), "--json")
    assert code == 0
    methods = {m["method"]: m for m in json.loads(out)["methods"]}
    assert set(methods) == {"fcfs", "edf", "greedy", "milp"}
    assert methods["milp"]["objective"] <= min(methods[m]["objective"] for m in ("fcfs", "edf", "greedy")) + 1e-6
    # EDF alternates 7B and 34B (4 swaps from the loaded 7B... see the instance description); the MILP swaps once.
    assert methods["milp"]["evaluation"]["swaps"] < methods["edf"]["evaluation"]["swaps"]


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    return path


BASE = """family: queueing
slo_classes: {{interactive: {slo}}}
instance_types:
  - {{name: a, gpu: A100-80GB-SXM, tensor_parallel: {tp}, swap_time_s: 5, count: {count}}}
groups:
  - {{name: g, model: {model}, slo_class: interactive, num_requests: 4, mean_input_tokens: 100, mean_output_tokens: 100}}
"""


@pytest.mark.parametrize("values, needle", [
    (dict(slo=20, tp=1, count=1, model="No-Such-Model"), "unknown model"),
    (dict(slo=0, tp=1, count=1, model="Llama-2-7B"), "SLO must be positive"),
    (dict(slo=20, tp=1, count=1, model="Llama-2-70B"), "fits on no instance"),
    (dict(slo=20, tp=1, count=0, model="Llama-2-7B"), "zero serving instances"),
])
def test_bad_input_is_one_line(monkeypatch, capsys, tmp_path, values, needle):
    path = _write(tmp_path, BASE.format(**values))
    code, out, err = run(monkeypatch, capsys, "solve", "queueing", str(path))
    assert code == 2
    assert needle in err and str(path) in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_unknown_objective_is_one_line(monkeypatch, capsys):
    code, _, err = run(monkeypatch, capsys, "solve", "queueing", str(INSTANCE), "--objective", "fastest")
    assert code == 2 and "--objective" in err


def test_heterogeneous_throughput_from_cost_models():
    s = EstimatorSettings()
    a100 = rates_for("Llama-2-7B", "A100-80GB-SXM", 1, 300, 200, s)
    h100 = rates_for("Llama-2-7B", "H100-80GB-SXM", 1, 300, 200, s)
    assert a100 is not None and h100 is not None
    assert h100.throughput_tokens_per_s > a100.throughput_tokens_per_s
    # Θ = B / (d·ε) by construction (Eq. 15)
    assert a100.throughput_tokens_per_s == pytest.approx(a100.batch_size / (a100.decode_s_per_token * 1.1))
    assert rates_for("Llama-2-70B", "A100-80GB-SXM", 1, 300, 200, s) is None  # 140 GB of weights on one 80 GB GPU


def test_group_work_modes():
    # mean: 4 requests × 100 tokens / Θ 200 = 2 s
    assert group_work_s(4, 100, 30, 400, 200.0, EstimatorSettings()) == pytest.approx(2.0)
    # quantile 0.5 adds z = 0: still 2 s; quantile 0.8413 adds ≈ 1·√4·30 = 60 tokens → 460/200 = 2.3 s
    assert group_work_s(4, 100, 30, 400, 200.0, EstimatorSettings(quantile=0.5)) == pytest.approx(2.0)
    assert group_work_s(4, 100, 30, 400, 200.0, EstimatorSettings(quantile=0.841344746)) == pytest.approx(2.3, rel=1e-4)
    # conservative (fewer than 8 requests): 4 × O_max 400 / 200 = 8 s
    assert group_work_s(4, 100, 30, 400, 200.0, EstimatorSettings(conservative_below=8)) == pytest.approx(8.0)


def test_groups_split_above_delta_times_batch():
    # 10 requests of one key, δ·B = 2·2 = 4 → halves of 5, then 3+2 each: sizes 3, 2, 3, 2 in FCFS order.
    reqs = [QueuedRequest("M", "c", 20.0, 100, 100, arrival_s=float(k)) for k in range(10)]
    groups = form_groups(reqs, {"M": 2.0}, delta=2.0)
    assert [g.num_requests for g in groups] == [3, 2, 3, 2]
    assert [g.arrival_s for g in groups] == [0.0, 3.0, 5.0, 8.0]


def test_instance_loads_with_requests(tmp_path):
    path = tmp_path / "req.yaml"
    path.write_text("""family: queueing
slo_classes: {interactive: 20, batch: 600}
instance_types:
  - {name: a, gpu: A100-80GB-SXM, tensor_parallel: 1, swap_time_s: 5, count: 2}
requests:
  - {model: Llama-2-7B, slo_class: interactive, input_tokens: 100, output_tokens: 100}
  - {model: Llama-2-7B, slo_class: interactive, input_tokens: 120, output_tokens: 90}
  - {model: Llama-2-7B, slo_class: batch, input_tokens: 1000, output_tokens: 900}
""")
    p = load_queueing_instance(path)
    assert p.num_groups == 2 and p.num_queues == 2
    assert sorted(g.num_requests for g in p.groups) == [1, 2]


def test_simulate_replays_every_policy(monkeypatch, capsys, tmp_path):
    path = tmp_path / "trace.yaml"
    path.write_text("""family: queueing
slo_classes: {interactive: 20, batch: 600}
instance_types:
  - {name: a, gpu: A100-80GB-SXM, tensor_parallel: 4, swap_time_s: 12, count: 1, loaded_models: [Llama-2-7B]}
groups:
  - {name: g1, model: Llama-2-7B, slo_class: batch, num_requests: 200, mean_input_tokens: 300, mean_output_tokens: 400, arrival_s: 0}
  - {name: g2, model: CodeLlama-34B, slo_class: batch, num_requests: 8, mean_input_tokens: 300, mean_output_tokens: 200, arrival_s: 1}
  - {name: g3, model: Llama-2-7B, slo_class: interactive, num_requests: 4, mean_input_tokens: 300, mean_output_tokens: 200, arrival_s: 2}
""")
    code, out, err = run(monkeypatch, capsys, "simulate", "queueing", str(path), "--json")
    assert code == 0, err
    replays = {r["policy"]: r for r in json.loads(out)["replays"]}
    assert set(replays) == {"qlm", "edf", "fcfs"}
    # g1 (200 requests) still runs when g3 arrives; FCFS serves g2 (a 12 s swap) first, the trigger moves g3 ahead.
    assert replays["qlm"]["milp_solves"] >= 1
    assert replays["qlm"]["start_s"]["g3"] < replays["fcfs"]["start_s"]["g3"]
    assert replays["qlm"]["slo_attainment"]["interactive"] == 1.0




def _set(section: str, key: str, value, index: int = 0):
    return lambda d: d[section][index].__setitem__(key, value)


def _as_requests(d: dict) -> None:
    d.pop("groups")
    d["requests"] = [{"model": "Llama-2-7B", "slo_class": "interactive", "input_tokens": 10, "output_tokens": 10,
                      "arrival_s": float("inf")}]


@pytest.mark.parametrize("mutate, needles", [
    (_set("groups", "mean_input_tokens", float("inf")), ["groups[0].mean_input_tokens", "finite number"]),
    (_set("groups", "arrival_s", float("nan")), ["groups[0].arrival_s", "finite number"]),
    (lambda d: d.__setitem__("now_s", float("nan")), ["now_s", "finite number"]),
    (lambda d: d["slo_classes"].__setitem__("interactive", float("inf")), ["slo_classes.interactive", "finite number"]),
    (_as_requests, ["requests[0].arrival_s", "finite number"]),
    (_set("instance_types", "swap_time_s", float("inf")), ["instance_types[0].swap_time_s", "finite number"]),
    (_set("instance_types", "swap_time_s", 1e9), ["instance_types[0].swap_time_s", "less than or equal to 86400"]),
    (_set("groups", "mean_output_tokens", 1e12), ["groups[0].mean_output_tokens", "less than or equal to 1000000"]),
    (_set("groups", "num_requests", True), ["groups[0].num_requests", "expected a number, got true"]),
    (_set("instance_types", "count", True), ["instance_types[0].count", "expected a number, got true"]),
    (_set("groups", "max_output_tokens", 10), ["groups[0].max_output_tokens", "at least mean_output_tokens (100), got 10"]),
    (lambda d: d["instance_types"].append(dict(d["instance_types"][0])),
     ["instance_types: duplicate instance type name 'a' (instance_types[0] and instance_types[1])"]),
    (_set("groups", "name", "g0", index=1), ["groups: duplicate group name 'g0' (groups[0] and groups[1])"]),
    (lambda d: d["groups"][0].update(num_requests=10**12, mean_output_tokens=1e6, max_output_tokens=1e6),
     ["groups[0]: estimated serving time", "beyond what the planner handles"]),
])
def test_bad_values_are_one_line_naming_file_and_field(monkeypatch, capsys, tmp_path, mutate, needles):
    path = _instance(tmp_path, mutate)
    code, _, err = run(monkeypatch, capsys, "solve", "queueing", str(path))
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith(f"error: {path}: ")
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])


def test_the_base_instance_of_the_bad_value_tests_is_valid(tmp_path):
    p = load_queueing_instance(_instance(tmp_path, lambda d: None))
    assert p.num_groups == 2 and [q.name for q in p.queues] == ["a-1"]


@pytest.mark.parametrize("args, needle", [
    (["solve", "queueing", str(INSTANCE), "--threads", "-3"], "--threads must be at least 1, got -3"),
    (["compare", "queueing", str(INSTANCE), "--time-limit", "-1"], "--time-limit must be positive"),
])
def test_bad_options_are_one_line(monkeypatch, capsys, args, needle):
    code, _, err = run(monkeypatch, capsys, *args)
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1
