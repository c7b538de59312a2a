"""Priority family CLI: `planner solve/compare/generate priority`, the --json contract, the
harness entry and bad input (one clear line each, exit 2, no traceback)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support import REPO, run_cli
from planner.harness import available_families

FIG3 = REPO / "instances" / "priority" / "fig3_toy.yaml"
FIG4 = REPO / "instances" / "priority" / "fig4_toy.yaml"
TABLE2_REF = str(REPO / "models" / "bilinear" / "qwen2.5-7b__v100-32gb-sxm2__tp2.yaml")


def test_solve_json_contract(monkeypatch, capsys):
    code, out, err = run_cli(monkeypatch, capsys, "solve", "priority", str(FIG4), "--json")
    assert code == 0, err
    data = json.loads(out)
    for key in ("status", "objective", "bound", "gap", "solve_seconds", "solver", "solution", "instance", "name"):
        assert key in data
    assert data["status"] == "optimal"
    assert data["objective"] == pytest.approx(3 / 1.8)  # Fig. 4 (C): 3 met in 1.8 s
    assert data["gap"] == pytest.approx(0.0, abs=1e-12)
    assert data["solution"]["instances"][0]["batches"] == [["job1", "job2"], ["job3"]]
    assert data["validation"]["feasible"]


def test_b_max_override_and_methods(monkeypatch, capsys):
    # --b-max 1 on Fig. 4: batches of one job at 300 ms: 300, 600, 900 -> all met, G = 3 / 1.8 s.
    code, out, err = run_cli(monkeypatch, capsys, "solve", "priority", str(FIG4), "--b-max", "1", "--method", "sa",
                             "--json")
    assert code == 0, err
    data = json.loads(out)
    assert all(len(b) == 1 for b in data["solution"]["instances"][0]["batches"])
    assert data["objective"] == pytest.approx(3 / 1.8)
    code, out, err = run_cli(monkeypatch, capsys, "solve", "priority", str(FIG4), "--method", "exhaustive")
    assert code == 0, err
    assert "1.66667" in out


def test_compare_table_has_every_method(monkeypatch, capsys):
    code, out, err = run_cli(monkeypatch, capsys, "compare", "priority", str(FIG4), "--json")
    assert code == 0, err
    data = json.loads(out)
    assert [r["method"] for r in data["methods"]] == ["sa", "fcfs", "spf", "edf", "exact"]
    assert data["optimum"] == pytest.approx(3 / 1.8)
    fcfs = next(r for r in data["methods"] if r["method"] == "fcfs")
    # one batch of 3: G = 1/2.4 -> gap (1.6667 - 0.41667) / 1.6667 = 75 %
    assert fcfs["gap"] == pytest.approx(0.75) and fcfs["gap_reference"] == "optimum"


def test_generate_then_solve(monkeypatch, capsys, tmp_path):
    path = tmp_path / "gen.yaml"
    code, _, err = run_cli(monkeypatch, capsys, "generate", "priority", str(path), "--jobs", "6", "--b-max", "2",
                           "--slo-spread", "0.5")
    assert code == 0, err
    code, out, err = run_cli(monkeypatch, capsys, "solve", "priority", str(path), "--json")
    assert code == 0, err
    assert json.loads(out)["status"] == "optimal"


def test_harness_entry():
    harness = available_families()["priority"]
    assert harness.sense == "max" and harness.exact_method == "exact"
    problem = harness.load(FIG4)
    from planner.harness import RunOptions

    result = harness.run(problem, "exact", RunOptions())
    assert result.objective == pytest.approx(3 / 1.8)


def _write(tmp_path: Path, jobs: str, head: str = "b_max: 2", cost_model: bool = True) -> Path:
    path = tmp_path / "bad.yaml"
    cost = f"cost_model: {TABLE2_REF}\n" if cost_model else ""
    path.write_text(f"family: priority\nname: bad\n{head}\n{cost}jobs:\n{jobs}")
    return path


def _assert_one_line(err: str, path: Path, expected: str) -> None:
    assert expected in err
    assert str(path) in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert len(err.strip()) < 250, "the message echoes the whole input"


GOOD_JOB = "  - {name: a, kind: e2e, input_tokens: 100, output_tokens: 50, slo_e2e_ms: 30000}\n"


@pytest.mark.parametrize(("jobs", "head", "expected"), [
    ("  - {name: a, kind: summarize, input_tokens: 100, output_tokens: 50, slo_e2e_ms: 30000}\n", "b_max: 2",
     "jobs[0].kind: unknown task type 'summarize'"),
    ("  - {name: a, kind: e2e, input_tokens: 100, output_tokens: 50, slo_e2e_ms: 0}\n", "b_max: 2",
     "jobs[0].slo_e2e_ms"),
    ("  - {name: a, kind: chat, input_tokens: 100, output_tokens: 50, slo_ttft_ms: -5, slo_tpot_ms: 50}\n", "b_max: 2",
     "jobs[0].slo_ttft_ms"),
    (GOOD_JOB, "b_max: 0", "b_max: must be at least 1"),
    ("  - {name: a, kind: chat, input_tokens: 100, output_tokens: 50, slo_ttft_ms: 500}\n", "b_max: 2",
     "jobs[0].slo_tpot_ms: required for a chat job"),
    # booleans are not numbers (YAML true/false used to run as 1/0)
    ("  - {name: a, kind: e2e, input_tokens: true, output_tokens: 50, slo_e2e_ms: 30000}\n", "b_max: 2",
     "jobs[0].input_tokens: expected a number, got true"),
    ("  - {name: a, kind: e2e, input_tokens: 100, output_tokens: 50, slo_e2e_ms: true}\n", "b_max: 2",
     "jobs[0].slo_e2e_ms: expected a number, got true"),
    (GOOD_JOB, "b_max: true", "b_max: expected a number, got true"),
    (GOOD_JOB, "b_max: 2\ntoken_capacity: false", "token_capacity: expected a number, got false"),
    (GOOD_JOB, "b_max: 2\nmemory: {memory_gb: true, utility: 0.9, kv_bytes_per_token: 524288}",
     "memory.memory_gb: expected a number, got a boolean"),
    # absurd lengths are rejected up front (10**12 tokens used to end in a 7 TiB MemoryError)
    ("  - {name: a, kind: chat, input_tokens: 16, output_tokens: 1000000000000, slo_ttft_ms: 500, slo_tpot_ms: 50}\n",
     "b_max: 2", "jobs[0].output_tokens: must be at most 1,000,000 tokens"),
    # SLOs of the other kind are an error, not silently ignored
    ("  - {name: a, kind: e2e, input_tokens: 100, output_tokens: 50, slo_e2e_ms: 30000, slo_ttft_ms: 100}\n",
     "b_max: 2", "jobs[0].slo_ttft_ms: does not apply to an e2e job"),
    (("  - {name: a, kind: chat, input_tokens: 100, output_tokens: 50, slo_ttft_ms: 500, slo_tpot_ms: 50, "
      "slo_e2e_ms: 9000}\n"), "b_max: 2", "jobs[0].slo_e2e_ms: does not apply to a chat job"),
    # cross-field problems name their field instead of echoing the whole file
    (GOOD_JOB + GOOD_JOB, "b_max: 2", "jobs[1].name: job name 'a' appears twice"),
    (GOOD_JOB, "b_max: 2\ntoken_capacity: 10", "token_capacity: 10 is less than the 150 tokens (input + output) of job 'a'"),
])
def test_bad_input_is_one_line(monkeypatch, capsys, tmp_path, jobs, head, expected):
    path = _write(tmp_path, jobs, head)
    code, _, err = run_cli(monkeypatch, capsys, "solve", "priority", str(path))
    assert code == 2
    _assert_one_line(err, path, expected)


def test_missing_cost_model_names_the_field(monkeypatch, capsys, tmp_path):
    path = _write(tmp_path, GOOD_JOB, cost_model=False)
    code, _, err = run_cli(monkeypatch, capsys, "solve", "priority", str(path))
    assert code == 2
    _assert_one_line(err, path, "cost_model: required: job 'a' has no exec_ms table")


def test_short_exec_ms_table_names_the_job(monkeypatch, capsys):
    code, _, err = run_cli(monkeypatch, capsys, "solve", "priority", str(FIG3), "--b-max", "2")
    assert code == 2
    _assert_one_line(err, FIG3, "jobs[0].exec_ms: gives latencies for 1 batch size(s), b_max is 2")


def test_huge_b_max_is_the_number_of_jobs(monkeypatch, capsys):
    # b_max > N allows nothing more than b_max = N; tables sized by 10**6 used to exhaust memory.
    code, out, err = run_cli(monkeypatch, capsys, "solve", "priority", str(FIG4), "--b-max", "1000000", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["status"] == "optimal" and data["objective"] == pytest.approx(3 / 1.8)


def test_compare_rejects_a_bad_time_limit(monkeypatch, capsys):
    code, _, err = run_cli(monkeypatch, capsys, "compare", "priority", str(FIG4), "--time-limit", "-1")
    assert code == 2 and "--time-limit must be positive, got -1" in err and len(err.strip().splitlines()) == 1


def test_multi_instance_without_capacity_names_the_file(monkeypatch, capsys, tmp_path):
    path = _write(tmp_path, GOOD_JOB + GOOD_JOB.replace("name: a", "name: b"))
    code, _, err = run_cli(monkeypatch, capsys, "solve", "priority", str(path), "--instances", "2", "--method", "fcfs")
    assert code == 2
    _assert_one_line(err, path, "token_capacity: required with --instances 2")


def test_bad_b_max_option(monkeypatch, capsys):
    code, _, err = run_cli(monkeypatch, capsys, "solve", "priority", str(FIG4), "--b-max", "0")
    assert code == 2 and "--b-max must be at least 1" in err and len(err.strip().splitlines()) == 1


def test_out_of_range_lengths_warn_but_solve(monkeypatch, capsys, tmp_path):
    # Table 2 was fitted for lengths < 2k tokens: 1900 + 400 = 2300 tokens is extrapolated.
    path = _write(tmp_path, GOOD_JOB + "  - {name: big, kind: e2e, input_tokens: 1900, output_tokens: 400, "
                                       "slo_e2e_ms: 30000}\n")
    code, out, err = run_cli(monkeypatch, capsys, "solve", "priority", str(path), "--json")
    assert code == 0
    warnings = [line for line in err.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "'big'" in warnings[0] and "fitted range" in warnings[0]
    assert json.loads(out)["status"] == "optimal"
