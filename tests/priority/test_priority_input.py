"""Bad priority cost models: one line naming the file, the phase and the problem, exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from support import REPO, run_cli

COST = REPO / "models" / "bilinear" / "qwen2.5-7b__v100-32gb-sxm2__tp2.yaml"


def broken_instance(tmp_path: Path, monkeypatch, capsys, edit) -> Path:
    code, _, err = run_cli(monkeypatch, capsys, "generate", "priority", str(tmp_path / "gp.yaml"), "--jobs", "6")
    assert code == 0, err
    cost = yaml.safe_load(COST.read_text())
    edit(cost)
    (tmp_path / "cm.yaml").write_text(yaml.safe_dump(cost))
    data = yaml.safe_load((tmp_path / "gp.yaml").read_text())
    data["cost_model"] = "cm.yaml"
    (tmp_path / "gp.yaml").write_text(yaml.safe_dump(data))
    return tmp_path / "gp.yaml"


@pytest.mark.parametrize("command", ["solve", "compare"])
@pytest.mark.parametrize("edit, words", [
    (lambda c: c["decode"].update(alpha=0, beta=0, gamma=0, delta=0),
     "cm.yaml: decode: all coefficients are 0 (every latency would be 0)"),
    (lambda c: c["prefill"].update(alpha=0, beta=0, gamma=0, delta=0),
     "cm.yaml: prefill: all coefficients are 0 (every latency would be 0)"),
    (lambda c: c["prefill"].update(alpha=float("inf")), "cm.yaml: prefill.alpha: must be a finite number"),
    (lambda c: c["decode"].update(beta=1e308), "cm.yaml: decode.beta: must be a finite number"),
    (lambda c: c["decode"].update(delta=True), "cm.yaml: decode.delta: expected a number, got true"),
])
def test_bad_cost_model(monkeypatch, capsys, tmp_path, command, edit, words):
    path = broken_instance(tmp_path, monkeypatch, capsys, edit)
    code, _, err = run_cli(monkeypatch, capsys, command, "priority", str(path))
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1, err
    assert words in err


def test_exact_search_keeps_the_time_limit_at_n100(monkeypatch, capsys, tmp_path):
    """At N = 100, b_max = 4 one node lists C(100, 4) ≈ 3.9 M batches (~15 s): the search stops before it."""
    import json
    import time

    path = tmp_path / "gp_100.yaml"
    code, _, err = run_cli(monkeypatch, capsys, "generate", "priority", str(path), "--jobs", "100", "--b-max", "4")
    assert code == 0, err
    started = time.perf_counter()
    code, out, err = run_cli(monkeypatch, capsys, "solve", "priority", str(path), "--time-limit", "3", "--json")
    elapsed = time.perf_counter() - started
    assert code == 0, err
    assert elapsed < 40, elapsed  # a hang guard (it ran > 120 s), not a speed target: generous for CI
    result = json.loads(out)
    assert result["objective"] > 0 and result["bound"] >= result["objective"]
    assert "time limit" in result["message"]
