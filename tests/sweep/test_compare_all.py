"""`planner compare all`: every family's heuristics against its exact solver over a directory."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
import yaml
from support import REPO, assert_one_line, run_cli

from planner.harness import available_families
from planner.sweep.compare_all import find_instances, run_compare_point

PLACEMENT = REPO / "instances" / "placement"


def _copy_placement(name: str, target: Path) -> None:
    """Copy an instance (YAML + CSV) with its cost-model path made absolute."""
    target.mkdir(parents=True, exist_ok=True)
    data = yaml.safe_load((PLACEMENT / f"{name}.yaml").read_text())
    data["cost_model"] = str((PLACEMENT / data["cost_model"]).resolve())
    (target / f"{name}.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    shutil.copy(PLACEMENT / data["requests"], target / data["requests"])


@pytest.fixture(scope="module")
def placement_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("instances")
    for name in ("sharegpt-70b-a100-n40", "azure-code-70b-h100-decode-n120"):
        _copy_placement(name, root / "placement")
    (root / "notes.yaml").write_text("just: notes\n")  # no family key, not under a family directory: ignored
    (root / "README.md").write_text("not an instance\n")
    return root


def test_compare_all_table_and_summary_on_placement(placement_dir, tmp_path, monkeypatch, capsys):
    out = tmp_path / "out"
    code, stdout, err = run_cli(monkeypatch, capsys, "compare", "all", str(placement_dir), "--report", str(out),
                                "--executor", "serial", "--time-limit", "30", "--json", "--no-progress")
    assert code == 0, err
    data = json.loads(stdout)
    rows = pd.DataFrame(data["rows"])
    harness = available_families()["placement"]
    assert set(rows.instance) == {"placement/sharegpt-70b-a100-n40.yaml", "placement/azure-code-70b-h100-decode-n120.yaml"}
    assert len(rows) == 2 * (len(harness.heuristics) + 1)
    exact = rows[rows.kind == "exact"]
    assert (exact.method == "mip").all() and (exact.status == "optimal").all() and (exact.gap.abs() < 1e-12).all()
    for inst, frame in rows.groupby("instance"):
        optimum = frame[frame.kind == "exact"].objective.iloc[0]
        for row in frame[(frame.kind == "heuristic") & frame.objective.notna()].itertuples():
            # gap = (heuristic − optimum) / heuristic, e.g. 15 workers vs 14 → 1/15 = 6.67 %
            assert row.gap == pytest.approx((row.objective - optimum) / row.objective)
            assert row.gap >= 0 and row.gap_reference == "optimum"
    # every row with a plan carries the independent validator's verdict
    assert rows[rows.objective.notna()].valid.all()
    # and every instance the caveats of the cost-model file it was solved under (Splitwise prefill > 5 %)
    assert set(data["cost_model_caveats"]) == set(rows.instance)
    for inst, lines in data["cost_model_caveats"].items():
        assert any(": above_target: " in line for line in lines), (inst, lines)
    summary = pd.DataFrame(data["summary"])
    assert set(summary.method) == set(harness.heuristics)
    for row in summary.itertuples():
        frame = rows[(rows.method == row.method) & rows.gap.notna()]
        assert row.mean_gap == pytest.approx(frame.gap.mean()) and row.worst_gap == pytest.approx(frame.gap.max())
        assert row.instances + row.no_plan == 2
    assert (out / "compare.csv").exists() and (out / "summary.csv").exists()
    # The tables of that run are not overwritten without --force (refused before anything runs) ...
    before = {name: (out / name).read_bytes() for name in ("compare.csv", "summary.csv")}
    code, stdout, err = run_cli(monkeypatch, capsys, "compare", "all", str(placement_dir), "--report", str(out),
                                "--executor", "serial", "--time-limit", "30", "--no-progress")
    assert_one_line(code, err, "already holds compare.csv, summary.csv", "pass --force")
    assert {name: (out / name).read_bytes() for name in before} == before
    # ... and with --force the re-run resumes from the database: nothing is solved again.
    code, stdout, _ = run_cli(monkeypatch, capsys, "compare", "all", str(placement_dir), "--report", str(out),
                              "--executor", "serial", "--time-limit", "30", "--no-progress", "--force")
    assert code == 0 and f"{len(rows)} already in the database, 0 solved now" in stdout


def test_every_family_with_shipped_instances_runs_through_the_harness():
    """Generic over the families present: the smallest shipped instance of each, every method."""
    found = find_instances(REPO / "instances")
    families = available_families()
    by_family: dict[str, list[Path]] = {}
    for fam, path in found:
        by_family.setdefault(fam, []).append(path)
    for fam, harness in families.items():
        folder = REPO / "instances" / fam
        if folder.is_dir() and any(folder.glob("*.yaml")):
            assert fam in by_family, f"instances/{fam}/ holds YAML files but none was found as a {fam} instance"
    assert "placement" in by_family
    for fam, paths in by_family.items():
        harness = families[fam]
        # smallest instance: YAML plus its same-stem sidecar files (CSV requests …)
        smallest = min(paths, key=lambda p: sum(f.stat().st_size for f in p.parent.glob(p.stem + ".*")))
        results = {}
        for method in (*harness.heuristics, harness.exact_method):
            results[method] = run_compare_point({"family": fam, "path": str(smallest), "method": method,
                                                 "solver": "highs", "time_limit": 3.0, "threads": 1, "seed": 0})
            assert results[method]["validated"] in (True, None), f"{fam}/{method}: {results[method]['message']}"
        exact = results[harness.exact_method]
        if exact["status"] == "optimal":
            for method in harness.heuristics:
                gap = harness.gap_to(results[method]["objective"], exact["objective"])
                assert gap is None or gap >= -1e-6, f"{fam}/{method} beats the proven optimum on {smallest.name}"


def test_bad_directories_and_families_are_one_line(tmp_path, monkeypatch, capsys):
    code, _, err = run_cli(monkeypatch, capsys, "compare", "all", str(tmp_path / "missing"), "--no-progress")
    assert code == 2 and "directory not found" in err and len(err.strip().splitlines()) == 1
    (tmp_path / "empty").mkdir()
    code, _, err = run_cli(monkeypatch, capsys, "compare", "all", str(tmp_path / "empty"), "--no-progress")
    assert code == 2 and "no instance of the families" in err and len(err.strip().splitlines()) == 1
    code, _, err = run_cli(monkeypatch, capsys, "compare", "all", str(PLACEMENT), "--family", "nope", "--no-progress")
    assert code == 2 and "--family 'nope': not an available family" in err


def test_a_broken_instance_fails_its_rows_with_one_line_and_the_others_run(tmp_path, monkeypatch, capsys):
    _copy_placement("sharegpt-70b-a100-n40", tmp_path / "placement")
    (tmp_path / "placement" / "broken.yaml").write_text("family: placement\nmodel: Llama-2-70B\n")
    code, stdout, err = run_cli(monkeypatch, capsys, "compare", "all", str(tmp_path), "--report", str(tmp_path / "out"),
                                "--executor", "serial", "--json", "--no-progress")
    assert code == 2
    rows = pd.DataFrame(json.loads(stdout)["rows"])
    broken = rows[rows.instance == "placement/broken.yaml"]
    assert (broken.status == "failed").all() and broken.message.str.contains("broken.yaml").all()
    good = rows[rows.instance == "placement/sharegpt-70b-a100-n40.yaml"]
    assert (good.status != "failed").all()
    assert "6 run(s) failed" in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_gap_leaves_out_the_objective_constant():
    # queueing's penalty = Σ start − Σ SLO: with Σ SLO = 1000, plans of Σ start 110 and 100 have
    # penalties −890 and −900.  Relative to the larger penalty the gap would be 10/900 = 1.1 %; without
    # the constant (offset −1000) it is 10/110 = 9.1 %, the gap on what a plan changes.
    harness = available_families()["queueing"]
    assert harness.gap_to(-890.0, -900.0) == pytest.approx(10 / 900)
    assert harness.gap_to(-890.0, -900.0, offset=-1000.0) == pytest.approx(10 / 110)
