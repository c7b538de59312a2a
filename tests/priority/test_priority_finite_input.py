"""Priority instances: non-finite or out-of-range numbers in `memory:` (Eq. 20) and in explicit latency
tables are one line naming the file and the field, never a NaN message or an internal error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from support import assert_one_line, run_cli

MEMORY = {"memory_gb": 64, "utility": 0.9, "kv_bytes_per_token": 524288}


def generated(tmp_path: Path, monkeypatch, capsys) -> dict:
    code, _, err = run_cli(monkeypatch, capsys, "generate", "priority", str(tmp_path / "gp.yaml"), "--jobs", "6")
    assert code == 0, err
    return yaml.safe_load((tmp_path / "gp.yaml").read_text())


def with_memory(tmp_path: Path, monkeypatch, capsys, key: str, text: str) -> Path:
    """gp.yaml with ``memory:`` whose ``key`` is the YAML text ``text`` (e.g. ``.inf``)."""
    data = generated(tmp_path, monkeypatch, capsys)
    data.pop("token_capacity", None)
    data["memory"] = dict(MEMORY, **{key: "__VALUE__"})
    path = tmp_path / "gp.yaml"
    path.write_text(yaml.safe_dump(data, default_flow_style=None, width=200).replace("__VALUE__", text))
    return path


@pytest.mark.parametrize("key, text, words", [
    ("memory_gb", ".inf", "memory.memory_gb: must be a finite number, got inf"),
    ("memory_gb", "-.inf", "memory.memory_gb: must be a finite number, got -inf"),
    ("memory_gb", ".nan", "memory.memory_gb: must be a finite number, got nan"),
    ("memory_gb", "1" + "0" * 400, "memory.memory_gb: must be a finite number, got inf"),  # beyond the float range
    ("memory_gb", "1.0e+300", "memory.memory_gb: must be positive and at most 1e+06"),  # × 10^9 was inf → NaN
    ("memory_gb", "0", "memory.memory_gb: must be positive"),
    ("memory_gb", "abc", "memory.memory_gb: expected a number, not text (got 'abc')"),
    ("memory_gb", "'64'", "memory.memory_gb: expected a number, not text (got '64'): write 64 without quotes"),
    ("kv_bytes_per_token", "5e5", "memory.kv_bytes_per_token: expected a number, not text (got '5e5') "
                                  "(YAML reads 5e5 as text: write 500000 or 5.0e+5)"),
    ("memory_gb", "true", "memory.memory_gb: expected a number, got a boolean"),
    ("memory_gb", "[1, 2]", "memory.memory_gb: expected a number, got a list"),
    ("utility", ".inf", "memory.utility: must be a finite number, got inf"),
    ("utility", ".nan", "memory.utility: must be a finite number, got nan"),
    ("utility", "1.5", "memory.utility: must be in (0, 1]"),
    ("kv_bytes_per_token", ".inf", "memory.kv_bytes_per_token: must be a finite number, got inf"),
    ("kv_bytes_per_token", "1.0e-300", "memory.kv_bytes_per_token: must be at least 1 byte"),  # was an OverflowError
    ("kv_bytes_per_token", "0", "memory.kv_bytes_per_token: must be at least 1 byte"),
    ("kv_bytes_per_token", "1.0e+12", "memory: holds no token"),  # 64 GB × 0.9 / 10^12 bytes < 1 token
])
@pytest.mark.parametrize("command", ["solve", "compare"])
def test_bad_memory_is_one_line(monkeypatch, capsys, tmp_path, command, key, text, words):
    path = with_memory(tmp_path, monkeypatch, capsys, key, text)
    code, _, err = run_cli(monkeypatch, capsys, command, "priority", str(path))
    line = assert_one_line(code, err, f"gp.yaml: {words}")
    assert "NaN" not in line and "nan to integer" not in line.lower()


def test_good_memory_gives_eq20_capacity(monkeypatch, capsys, tmp_path):
    # 64 GB × 0.9 / 5·10^5 B = 115,200 tokens (5e5 without a dot is YAML text, refused above).
    path = with_memory(tmp_path, monkeypatch, capsys, "kv_bytes_per_token", "5.0e+5")
    from planner.priority.instance import load_priority_instance

    assert load_priority_instance(path).token_capacity == 115_200
    code, out, err = run_cli(monkeypatch, capsys, "solve", "priority", str(path), "--method", "fcfs", "--json")
    assert code == 0, err
    assert json.loads(out)["validation"]["feasible"]


def explicit(tmp_path: Path, monkeypatch, capsys, exec_ms: list, prefill_ms: list | None = None) -> tuple[Path, int]:
    """gp.yaml without a cost model: every job has exec_ms (chat jobs also prefill_ms); job 1 gets the given ones."""
    data = generated(tmp_path, monkeypatch, capsys)
    del data["cost_model"]
    for job in data["jobs"]:
        job["exec_ms"] = [100.0]
        if job["kind"] == "chat":
            job["prefill_ms"] = [10.0]
    chat = next(k for k, job in enumerate(data["jobs"]) if job["kind"] == "chat")
    data["jobs"][chat]["exec_ms"] = exec_ms
    if prefill_ms is not None:
        data["jobs"][chat]["prefill_ms"] = prefill_ms
    path = tmp_path / "gp.yaml"
    path.write_text(yaml.safe_dump(data))
    return path, chat


@pytest.mark.parametrize("exec_ms, prefill_ms, field", [
    ([float("inf")], None, "exec_ms"),  # was accepted: G = 0 for every plan
    ([1e308], None, "exec_ms"),  # finite, but its sums overflow
    ([float("inf")], [float("inf")], "exec_ms"),  # was a RuntimeWarning and a NaN TPOT
    ([100.0], [float("inf")], "prefill_ms"),
])
def test_bad_latency_table_is_one_line(monkeypatch, capsys, tmp_path, exec_ms, prefill_ms, field):
    path, chat = explicit(tmp_path, monkeypatch, capsys, exec_ms, prefill_ms)
    code, _, err = run_cli(monkeypatch, capsys, "solve", "priority", str(path))
    assert_one_line(code, err, f"gp.yaml: jobs[{chat}].{field}: entry 0 (batch size 1) must be a finite number "
                               "of at most 1e+12 ms")
    assert "RuntimeWarning" not in err


def test_finite_latency_table_still_solves(monkeypatch, capsys, tmp_path):
    path, _ = explicit(tmp_path, monkeypatch, capsys, [1e12], [5.0])
    code, out, err = run_cli(monkeypatch, capsys, "solve", "priority", str(path), "--json")
    assert code == 0, err
    assert json.loads(out)["objective"] > 0
