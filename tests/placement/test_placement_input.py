"""Bad options and files of the placement family (solve, compare, generate, simulate replay, plan scaling): one line, exit 2."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from support import REPO, assert_one_line, run_cli

SRC = REPO / "instances" / "placement" / "sharegpt-70b-a100-n40.yaml"


def one_line(monkeypatch, capsys, *args: str) -> str:
    code, _, err = run_cli(monkeypatch, capsys, *args)
    lines = err.strip().splitlines()
    assert code == 2, err
    assert len(lines) == 1, err
    assert "Traceback" not in err and "internal error" not in err
    return lines[0]


@pytest.mark.parametrize("command", ["solve", "compare"])
@pytest.mark.parametrize("option, value, words", [
    ("--time-limit", "-5", "--time-limit"), ("--time-limit", "0", "--time-limit"), ("--time-limit", "nan", "--time-limit"),
    ("--threads", "0", "--threads"), ("--threads", "-3", "--threads"),
])
def test_solve_compare_run_options(monkeypatch, capsys, command, option, value, words):
    line = one_line(monkeypatch, capsys, command, "placement", str(SRC), option, value)
    assert words in line and value in line


@pytest.mark.parametrize("args, words", [
    (("generate", "placement", "{tmp}/gx.yaml", "--ttft", "nan"), ["--ttft must be a positive number", "nan"]),
    (("generate", "placement", "{tmp}/gx.yaml", "--tpot", "0.01"), ["--tpot", "un-batched decode"]),
    (("generate", "placement", "{tmp}/gx.yaml", "--requests", "100000000000"), ["--requests", "at most"]),
    (("generate", "placement", "{tmp}/gx.yaml", "--ongoing", "100000000000"), ["--ongoing", "at most"]),
    (("simulate", "replay", "--rate", "1", "--ttft", "nan"), ["--ttft", "nan"]),
    (("simulate", "replay", "--rate", "1", "--tpot", "0.01"), ["--tpot", "un-batched decode"]),
    (("plan", "scaling", "--ttft", "nan"), ["--ttft", "nan"]),
    (("simulate", "replay", "--rate", "nan"), ["--rate", "nan"]),
    (("simulate", "replay", "--rate", "inf"), ["--rate", "inf"]),
    (("simulate", "replay", "--rate", "1", "--duration", "nan"), ["--duration", "nan"]),
    (("simulate", "replay", "--rate", "1", "--duration", "inf"), ["--duration", "inf"]),
    (("simulate", "replay", "--rate", "1e12"), ["--rate", "at most"]),
    (("simulate", "replay", "--rate", "1", "--duration", "1e9"), ["--duration", "at most"]),
    (("simulate", "replay", "--rate", "1", "--heartbeat", "nan"), ["--heartbeat", "nan"]),
    (("simulate", "replay", "--rate", "1", "--heartbeat", "1e-9"), ["--heartbeat", "at most"]),
    (("plan", "scaling", "--rate", "nan"), ["--rate", "nan"]),
    (("plan", "scaling", "--rate", "1", "--rate", "inf"), ["--rate", "inf"]),
    (("plan", "scaling", "--rate", "1", "--rate", "1e12"), ["--rate", "at most"]),
    (("plan", "scaling", "--heartbeat", "1e-9"), ["--heartbeat", "at most"]),
])
def test_bad_options_one_line(monkeypatch, capsys, tmp_path, args, words):
    line = one_line(monkeypatch, capsys, *(a.format(tmp=tmp_path) for a in args))
    for word in words:
        assert word in line, line


@pytest.mark.parametrize("family", ["placement", "priority"])
def test_generate_into_directory(monkeypatch, capsys, tmp_path, family):
    (tmp_path / "outdir").mkdir()
    monkeypatch.chdir(tmp_path)
    line = one_line(monkeypatch, capsys, "generate", family, "outdir", "--force")
    assert "outdir: is a directory, expected a file name" in line


def test_replay_trace_directory(monkeypatch, capsys, tmp_path):
    (tmp_path / "outdir").mkdir()
    monkeypatch.chdir(tmp_path)
    line = one_line(monkeypatch, capsys, "simulate", "replay", "--trace", "outdir")
    assert "outdir: is a directory, expected a trace file" in line


def test_mooncake_line_not_an_object(monkeypatch, capsys, tmp_path):
    monkeypatch.chdir(tmp_path)
    Path("mc.jsonl").write_text("[1,2]\n")
    line = one_line(monkeypatch, capsys, "simulate", "replay", "--trace", "mc.jsonl", "--trace-format", "mooncake")
    assert "mc.jsonl: line 1: expected a JSON object" in line


def test_unsorted_traces_are_sorted(monkeypatch, capsys, tmp_path):
    from planner.workloads.lengths import read_trace_lengths

    csv = tmp_path / "trace.csv"
    csv.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.5,374,44\n"
                   "2023-11-16 18:15:40.5,396,109\n2023-11-16 18:15:50.5,879,45\n")
    inputs, outputs, arrivals = read_trace_lengths(csv, "azure")
    assert list(inputs) == [396, 374, 879] and list(outputs) == [109, 44, 45]
    assert list(arrivals) == [0.0, 6.0, 10.0]
    mc = tmp_path / "mc.jsonl"
    mc.write_text('{"timestamp": 5000, "input_length": 100, "output_length": 50}\n'
                  '{"timestamp": 1000, "input_length": 200, "output_length": 60}\n')
    inputs, _, arrivals = read_trace_lengths(mc, "mooncake")
    assert list(inputs) == [200, 100] and list(arrivals) == [0.0, 4.0]
    code, out, err = run_cli(monkeypatch, capsys, "simulate", "replay", "--trace", str(csv), "--duration", "20", "--json")
    assert code == 0, err
    assert json.loads(out)["slo_attainment"] >= 0


# ---- scenario fields and request cells refused at load (one line naming file, field / row and column) ----

HEARTBEAT = REPO / "instances" / "placement" / "azure-conv-70b-a100-heartbeat.yaml"  # has ongoing rows
COST = REPO / "models" / "aladdin" / "llama-2-70b__a100-80gb-sxm__tp2.yaml"


@pytest.fixture
def heartbeat(tmp_path: Path) -> Path:
    """A copy of the shipped heartbeat instance (new and ongoing rows), absolute cost-model path."""
    import yaml

    data = yaml.safe_load(HEARTBEAT.read_text())
    data["cost_model"] = str(COST)
    data["requests"] = "requests.csv"
    (tmp_path / "requests.csv").write_text(HEARTBEAT.with_suffix(".csv").read_text())
    path = tmp_path / "inst.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _set_yaml(path: Path, key: str, value) -> None:
    import yaml

    data = yaml.safe_load(path.read_text())
    target = data
    *parents, last = key.split(".")
    for part in parents:
        target = target[part]
    target[last] = value
    path.write_text(yaml.safe_dump(data))


def _set_cell(path: Path, ongoing: bool, column: str, value: str) -> int:
    """Set ``column`` of the first new (or ongoing) row; its 1-based data-row number."""
    csv = path.parent / "requests.csv"
    lines = csv.read_text().splitlines()
    header = lines[0].split(",")
    for k in range(1, len(lines)):
        cells = lines[k].split(",")
        if bool(cells[header.index("worker")]) == ongoing:
            cells[header.index(column)] = value
            lines[k] = ",".join(cells)
            csv.write_text("\n".join(lines) + "\n")
            return k
    raise AssertionError("no such row")


@pytest.mark.parametrize("key, value, needles", [
    # an empty cost_model resolved to the scenario's directory and was reported against "." (no field)
    ("cost_model", "", ["inst.yaml: cost_model: empty"]),
    ("cost_model", "   ", ["inst.yaml: cost_model: empty"]),
    ("cost_model", ".", ["inst.yaml: cost_model:", "is a directory"]),
    ("requests", "", ["inst.yaml: requests: empty"]),
    ("requests", ".", ["inst.yaml: requests:", "is a directory"]),
    # a number where a model name is expected was reported as field "model.str"
    ("model", 5, ["inst.yaml: model: expected a catalog name or a mapping of fields, got 5"]),
    ("gpu", [1], ["inst.yaml: gpu: expected a catalog name or a mapping of fields, got [1]"]),
    # YAML booleans are not numbers (true was read as 1)
    ("tensor_parallel", True, ["inst.yaml: tensor_parallel: expected a number, got true"]),
    ("memory_utilization", True, ["inst.yaml: memory_utilization: expected a number, got true"]),
    ("placement.strictness", True, ["inst.yaml: placement.strictness: expected a number, got true"]),
    ("placement.max_workers", True, ["inst.yaml: placement.max_workers: expected a number, got true"]),
    ("price_per_hour", float("inf"), ["inst.yaml: price_per_hour:", "finite"]),
])
def test_scenario_field_errors_name_the_field(monkeypatch, capsys, heartbeat, key, value, needles):
    _set_yaml(heartbeat, key, value)
    code, _, err = run_cli(monkeypatch, capsys, "solve", "placement", str(heartbeat))
    line = assert_one_line(code, err, *needles)
    assert ".: " not in line and "model.str" not in line


@pytest.mark.parametrize("ongoing, column, value, needles", [
    # decode_s = inf reached the MIP, which reported "infeasible" with exit 0
    (True, "decode_s", "inf", ["must be a finite number, got inf"]),
    (True, "decode_s", "-inf", ["must be a finite number, got -inf"]),
    (True, "decode_s", "nan", ["not a number: 'nan'"]),
    (False, "arrival_s", "inf", ["must be a finite number, got inf"]),
    (True, "generated_tokens", "inf", ["must be a whole number, got 'inf'"]),
    (True, "worker", "inf", ["must be a whole number, got 'inf'"]),
    (False, "input_tokens", "inf", ["must be a whole number, got 'inf'"]),
    # a huge prediction on an ongoing row allocated terabytes ("internal error: MemoryError")
    (True, "predicted_output_tokens", "1000000000000", ["less than or equal to 1000000"]),
    (True, "generated_tokens", "2000000", ["less than or equal to 1000000"]),
])
def test_non_finite_or_huge_request_cells_are_refused_at_load(monkeypatch, capsys, heartbeat, ongoing, column, value,
                                                              needles):
    row = _set_cell(heartbeat, ongoing, column, value)
    code, _, err = run_cli(monkeypatch, capsys, "solve", "placement", str(heartbeat))
    assert_one_line(code, err, f"requests.csv: row {row}, column {column}:", *needles)


def test_ongoing_state_refuses_non_finite_decode_time():
    from pydantic import ValidationError

    from planner.placement.problem import OngoingState

    for bad in (float("inf"), float("nan")):
        with pytest.raises(ValidationError):
            OngoingState(worker=0, generated_tokens=3, decode_s=bad)
    assert OngoingState(worker=0, generated_tokens=3, decode_s=0.2).decode_s == 0.2


@pytest.mark.parametrize("arrival", [math.inf, math.nan, -1.0])
def test_a_request_built_in_code_refuses_a_non_finite_or_negative_arrival(arrival):
    from pydantic import ValidationError

    from planner.core.types import PlannedRequest

    with pytest.raises(ValidationError, match="arrival_s"):
        PlannedRequest(request_id="r", arrival_s=arrival, input_tokens=3, output_tokens=2, predicted_output_tokens=2)
