"""Priority family CLI: `planner solve/compare/generate priority`, the --json contract, the
harness entry and bad input (one clear line each, exit 2, no traceback)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import REPO, run_cli
from planner.harness import available_families

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
    assert fcfs["gap_to_optimum"] == pytest.approx(0.75)


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


def _write(tmp_path: Path, jobs: str, head: str = "b_max: 2") -> Path:
    path = tmp_path / "bad.yaml"
    path.write_text(f"family: priority\nname: bad\n{head}\ncost_model: {TABLE2_REF}\njobs:\n{jobs}")
    return path


GOOD_JOB = "  - {name: a, kind: e2e, input_tokens: 100, output_tokens: 50, slo_e2e_ms: 30000}\n"


@pytest.mark.parametrize(("jobs", "head", "expected"), [
    ("  - {name: a, kind: summarize, input_tokens: 100, output_tokens: 50, slo_e2e_ms: 30000}\n", "b_max: 2",
     "jobs.0.kind: unknown task type 'summarize'"),
    ("  - {name: a, kind: e2e, input_tokens: 100, output_tokens: 50, slo_e2e_ms: 0}\n", "b_max: 2",
     "jobs.0.slo_e2e_ms"),
    ("  - {name: a, kind: chat, input_tokens: 100, output_tokens: 50, slo_ttft_ms: -5, slo_tpot_ms: 50}\n", "b_max: 2",
     "jobs.0.slo_ttft_ms"),
    (GOOD_JOB, "b_max: 0", "b_max: must be at least 1"),
    ("  - {name: a, kind: chat, input_tokens: 100, output_tokens: 50, slo_ttft_ms: 500}\n", "b_max: 2",
     "a chat job needs slo_ttft_ms and slo_tpot_ms"),
])
def test_bad_input_is_one_line(monkeypatch, capsys, tmp_path, jobs, head, expected):
    path = _write(tmp_path, jobs, head)
    code, out, err = run_cli(monkeypatch, capsys, "solve", "priority", str(path))
    assert code == 2
    assert expected in err
    assert str(path) in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


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
