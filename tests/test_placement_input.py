"""Bad options and files of the placement family (solve, compare, generate, replay, scaling): one line, exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import REPO, run_cli

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
    (("generate", "placement", "{tmp}/gx.yaml", "--atgt", "0.01"), ["--atgt", "un-batched decode"]),
    (("generate", "placement", "{tmp}/gx.yaml", "--requests", "100000000000"), ["--requests", "at most"]),
    (("generate", "placement", "{tmp}/gx.yaml", "--ongoing", "100000000000"), ["--ongoing", "at most"]),
    (("replay", "--rate", "1", "--ttft", "nan"), ["--ttft", "nan"]),
    (("replay", "--rate", "1", "--atgt", "0.01"), ["--atgt", "un-batched decode"]),
    (("scaling", "--ttft", "nan"), ["--ttft", "nan"]),
    (("replay", "--rate", "nan"), ["--rate", "nan"]),
    (("replay", "--rate", "inf"), ["--rate", "inf"]),
    (("replay", "--rate", "1", "--duration", "nan"), ["--duration", "nan"]),
    (("replay", "--rate", "1", "--duration", "inf"), ["--duration", "inf"]),
    (("replay", "--rate", "1e12"), ["--rate", "at most"]),
    (("replay", "--rate", "1", "--duration", "1e9"), ["--duration", "at most"]),
    (("replay", "--rate", "1", "--heartbeat", "nan"), ["--heartbeat", "nan"]),
    (("replay", "--rate", "1", "--heartbeat", "1e-9"), ["--heartbeat", "at most"]),
    (("scaling", "--rates", "nan"), ["--rates", "nan"]),
    (("scaling", "--rates", "1,inf"), ["--rates", "inf"]),
    (("scaling", "--rates", "1,1e12"), ["--rates", "at most"]),
    (("scaling", "--heartbeat", "1e-9"), ["--heartbeat", "at most"]),
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
    line = one_line(monkeypatch, capsys, "replay", "--trace", "outdir")
    assert "outdir: is a directory, expected a trace file" in line


def test_mooncake_line_not_an_object(monkeypatch, capsys, tmp_path):
    monkeypatch.chdir(tmp_path)
    Path("mc.jsonl").write_text("[1,2]\n")
    line = one_line(monkeypatch, capsys, "replay", "--trace", "mc.jsonl", "--format", "mooncake")
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
    code, out, err = run_cli(monkeypatch, capsys, "replay", "--trace", str(csv), "--duration", "20", "--json")
    assert code == 0, err
    assert json.loads(out)["slo_attainment"] >= 0
