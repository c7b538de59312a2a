"""Bad capacity scenarios and `compare all` options: one clear line, exit code 2, never a traceback."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from support import REPO, assert_one_line, run_cli

CAP = """\
model: Llama-2-70B
slos: {ttft_s: 1.6, atgt_s: 0.075}
workload: {distribution: sharegpt}
rates: [2]
gpus:
  - {type: H100-80GB-SXM, price_per_hour: 3, tensor_parallel: [4]}
solve: {time_limit_s: 3, exact_max_requests: 100, seed: 0}
"""


def _run_cap(tmp_path: Path, monkeypatch, capsys, text: str) -> tuple[int, str, str, Path]:
    path = tmp_path / "cap.yaml"
    path.write_text(text)
    code, out, err = run_cli(monkeypatch, capsys, "capacity", str(path), "--report", str(tmp_path / "out"),
                             "--parallel", "1", "--no-progress")
    return code, out, err, path



@pytest.mark.parametrize(("old", "new", "message"), [
    ("seed: 0", "seed: -1", "solve.seed: must be a non-negative integer, got -1"),
    ("seed: 0", "seed: abc", "solve.seed: expected a number, not text (got 'abc')"),
    ("seed: 0", "seed: 1.5", "solve.seed: must be a non-negative integer, got 1.5"),
    ("seed: 0", "seed: true", "solve.seed: expected a number, got true"),
    ("rates: [2]", "rates: [true]", "rates[0]: expected a number, got true"),
    ("rates: [2]", "rates: [.inf]", "rates[0]: must be finite, got inf"),
    ("rates: [2]", "rates: [2, .nan]", "rates[1]: must be finite, got nan"),
    ("price_per_hour: 3", "price_per_hour: .inf", "gpus[0].price_per_hour: must be finite, got inf"),
    ("price_per_hour: 3", "price_per_hour: true", "gpus[0].price_per_hour: expected a number, got true"),
    ("ttft_s: 1.6", "ttft_s: .inf", "slos.ttft_s: must be finite, got inf"),
    ("time_limit_s: 3", "time_limit_s: .nan", "solve.time_limit_s: must be finite, got nan"),
    ("tensor_parallel: [4]", "tensor_parallel: [true]", "gpus[0].tensor_parallel: [0] must be a positive integer"),
])
def test_bad_numbers_are_one_line_naming_the_field(tmp_path, monkeypatch, capsys, old, new, message):
    assert old in CAP
    code, _, err, path = _run_cap(tmp_path, monkeypatch, capsys, CAP.replace(old, new))
    assert_one_line(code, err, f"{path}: {message}")


def test_a_trace_that_is_a_directory_is_one_line(tmp_path, monkeypatch, capsys):
    (tmp_path / "traces").mkdir()
    text = CAP.replace("{distribution: sharegpt}", f"{{trace: {tmp_path / 'traces'}}}")
    code, _, err, path = _run_cap(tmp_path, monkeypatch, capsys, text)
    assert_one_line(code, err, f"{path}: workload.trace: {tmp_path / 'traces'} is a directory, expected a trace file")


def test_a_huge_rate_is_refused_at_once_instead_of_hanging(tmp_path, monkeypatch, capsys):
    start = time.perf_counter()
    code, _, err, path = _run_cap(tmp_path, monkeypatch, capsys, CAP.replace("rates: [2]", "rates: [2, 1000000]"))
    assert_one_line(code, err, f"{path}: rates[1]: rate 1e+06 req/s")
    assert "at most 50000 are supported" in err
    assert time.perf_counter() - start < 30
    assert not (tmp_path / "out" / "results.sqlite").exists()


def test_compare_all_report_must_be_a_directory(tmp_path, monkeypatch, capsys):
    afile = tmp_path / "afile"
    afile.write_text("x")
    code, _, err = run_cli(monkeypatch, capsys, "compare", "all", str(REPO / "instances" / "capacity"),
                           "--report", str(afile), "--no-progress")
    assert_one_line(code, err, f"{afile}: --report must be a directory")
    assert afile.read_text() == "x"


@pytest.mark.parametrize("value", ["nan", "0", "-1", "inf"])
def test_compare_all_time_limit_must_be_a_positive_number(tmp_path, monkeypatch, capsys, value):
    code, _, err = run_cli(monkeypatch, capsys, "compare", "all", str(tmp_path), "--time-limit", value,
                           "--no-progress")
    assert_one_line(code, err, "--time-limit must be a positive number, got")
