"""Bad `planner fit` options and profiles: one clear line, exit code 2, never a traceback."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from support import assert_one_line, run_cli

SPLITWISE = Path("/work/shared/data/profiling/splitwise_sim/perf_model.csv")
HEADER = ["model", "hardware", "prompt_size", "batch_size", "token_size", "prompt_time", "token_time", "e2e_time",
          "tensor_parallel"]


def _profile(path: Path, rows: int = 40, last_prompt_time: str | None = None) -> Path:
    """A small consistent splitwise perf_model.csv (e2e = prompt + (T−1)·token)."""
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(HEADER)
        for k in range(rows):
            p, b, t = 256 * (1 + k % 4), 1 + k // 4 % 5, 64 * (1 + k % 3)
            prompt, token = 0.05 * p * b + 20.0, 30.0 + 0.01 * b * (p + t / 2)
            e2e = prompt + (t - 1) * token
            w.writerow(["llama2-70b", "a100-80gb", p, b, t, f"{prompt:.3f}", f"{token:.3f}", f"{e2e:.3f}", 4])
    if last_prompt_time is not None:
        lines = list(csv.reader(path.open()))
        lines[-1][HEADER.index("prompt_time")] = last_prompt_time
        with path.open("w", newline="") as fh:
            csv.writer(fh).writerows(lines)
    return path



def test_out_dir_that_is_a_file_is_one_line(tmp_path, monkeypatch, capsys):
    afile = tmp_path / "afile"
    afile.write_text("x")
    profile = _profile(tmp_path / "perf_model.csv")
    code, _, err = run_cli(monkeypatch, capsys, "fit", str(profile), "--source-format", "splitwise", "--kind", "both",
                           "--out-dir", str(afile))
    assert_one_line(code, err, f"{afile}: --out-dir must be a directory")
    assert afile.read_text() == "x"


@pytest.mark.skipif(not SPLITWISE.exists(), reason="shared splitwise profile not present")
def test_out_dir_that_is_a_file_with_the_real_profile(tmp_path, monkeypatch, capsys):
    afile = tmp_path / "afile"
    afile.write_text("x")
    code, _, err = run_cli(monkeypatch, capsys, "fit", str(SPLITWISE), "--source-format", "splitwise", "--kind", "both",
                           "--out-dir", str(afile))
    assert_one_line(code, err, f"{afile}: --out-dir must be a directory")


def test_a_file_inside_the_out_dir_blocking_a_kind_directory_is_one_line(tmp_path, monkeypatch, capsys):
    out = tmp_path / "models"
    out.mkdir()
    (out / "aladdin").write_text("x")
    profile = _profile(tmp_path / "perf_model.csv")
    code, _, err = run_cli(monkeypatch, capsys, "fit", str(profile), "--source-format", "splitwise", "--out-dir", str(out))
    assert_one_line(code, err, "cannot write the cost model")


@pytest.mark.parametrize("tp", ["0", "-2"])
def test_tp_must_be_at_least_one(tmp_path, monkeypatch, capsys, tp):
    profile = _profile(tmp_path / "perf_model.csv")
    code, _, err = run_cli(monkeypatch, capsys, "fit", str(profile), "--source-format", "splitwise", "--tp", tp,
                           "--out-dir", str(tmp_path / "models"))
    assert_one_line(code, err, f"--tp must be at least 1, got {tp}")
    assert not (tmp_path / "models").exists()


@pytest.mark.parametrize(("value", "problem"), [
    ("-5", "must be positive, got '-5'"),
    ("0", "must be positive, got '0'"),
    ("inf", "must be finite, got 'inf'"),
])
def test_non_positive_or_infinite_profile_times_are_one_line(tmp_path, monkeypatch, capsys, value, problem):
    profile = _profile(tmp_path / "perf_model.csv", rows=40, last_prompt_time=value)
    code, _, err = run_cli(monkeypatch, capsys, "fit", str(profile), "--source-format", "splitwise",
                           "--out-dir", str(tmp_path / "models"))
    assert_one_line(code, err, f"{profile}: row 40, column prompt_time: {problem}")


def test_the_good_profile_still_fits(tmp_path, monkeypatch, capsys):
    profile = _profile(tmp_path / "perf_model.csv")
    code, _, err = run_cli(monkeypatch, capsys, "fit", str(profile), "--source-format", "splitwise", "--tp", "4",
                           "--out-dir", str(tmp_path / "models"))
    assert code == 0, err


def test_table_profile_rejects_a_negative_time(tmp_path, monkeypatch, capsys):
    table = tmp_path / "profile.csv"
    table.write_text("phase,batch_size,tokens_per_request,time_ms\nprefill,1,100,5\ndecode,2,100,-1\n")
    code, _, err = run_cli(monkeypatch, capsys, "fit", str(table), "--source-format", "table",
                           "--out-dir", str(tmp_path / "models"))
    assert_one_line(code, err, f"{table}: row 2, column time_s: must be positive")
