"""`planner.compare`: the one gap, the one reference rule, and `compare FAMILY` = `compare all`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from support import REPO

from planner.compare import Scored, compare, reference_of
from planner.core.result import Result, ValidationReport
from planner.core.status import SolveStatus
from planner.errors import InfeasibleError, PlannerError
from planner.harness import FamilyHarness, RunOptions


def _result(method: str, status: SolveStatus, objective: float | None, bound: float | None = None, *,
            valid: bool | None = True, offset: float = 0.0) -> Result:
    validation = None if valid is None or objective is None else ValidationReport(valid, objective)
    return Result(family="toy", method=method, solver="test", status=status, objective=objective, bound=bound, solve_seconds=0.01, solution=None, validation=validation,
                  objective_offset=offset)


def _harness(sense: str, outcomes: dict[str, Result | Exception], exact: str = "exact") -> FamilyHarness:
    def run(problem, method, options):
        outcome = outcomes[method]
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    return FamilyHarness(name="toy", description="canned results", sense=sense, objective_name="cost",
                         load=lambda path: None, heuristics=tuple(m for m in outcomes if m != exact),
                         exact_method=exact, run=run)


F, O = SolveStatus.FEASIBLE, SolveStatus.OPTIMAL


def test_min_family_gaps_leave_out_the_objective_offset():
    # queueing-like: objective = penalty − 10 (a constant).  Optimum 2 (12 without the constant); a
    # heuristic at 5 (15): |15 − 12| / 15 = 0.2, not |5 − 2| / 5 = 0.6.
    h = _harness("min", {"a": _result("a", F, 5.0, offset=-10.0), "b": _result("b", F, 2.0, offset=-10.0),
                         "exact": _result("exact", O, 2.0, 2.0, offset=-10.0)})
    c = compare(None, h)
    assert (c.reference, c.gap_reference, c.objective_offset) == (2.0, "optimum", -10.0)
    assert c.row("a").gap == pytest.approx(0.2)
    assert c.row("b").gap == 0.0 and str(c.row("b").gap) == "0.0"  # equal: 0.0, never −0.0
    assert c.row("exact").gap == 0.0
    assert {r.gap_reference for r in c.rows} == {"optimum"}
    assert "without the objective's constant -10" in c.reference_text()


def test_max_family_gap_is_relative_to_the_larger_value():
    # priority-like (maximise G): optimum 2.0; 1.5 is worse by 0.5 / 2.0 = 25 %; positive = worse.
    h = _harness("max", {"fcfs": _result("fcfs", F, 1.5), "exact": _result("exact", O, 2.0, 2.0)})
    c = compare(None, h)
    assert c.row("fcfs").gap == pytest.approx(0.25) and c.row("exact").gap == 0.0
    frame = c.to_frame()
    assert list(frame.method) == ["fcfs", "exact"] and frame.gap.tolist() == pytest.approx([0.25, 0.0])
    data = c.to_dict()
    assert data["reference"] == 2.0 and data["gap_reference"] == "optimum" and data["optimum"] == 2.0
    assert [m["gap"] for m in data["methods"]] == pytest.approx([0.25, 0.0])
    assert data["methods"][0]["result"]["objective"] == 1.5


def test_time_limited_exact_makes_its_bound_the_reference():
    # min: the exact solver stopped at 10 with bound 8 → reference 8 ("bound"); a heuristic at 12:
    # (12 − 8) / 12 = 1/3 ≥ its true gap to the unknown optimum; the exact row: its own gap (10 − 8) / 10.
    h = _harness("min", {"h": _result("h", F, 12.0), "exact": _result("exact", F, 10.0, 8.0)})
    c = compare(None, h)
    assert (c.reference, c.gap_reference, c.optimum) == (8.0, "bound", None)
    assert c.row("h").gap == pytest.approx(1 / 3)
    assert c.row("exact").gap == pytest.approx(0.2) == pytest.approx(c.row("exact").result.gap)
    assert "bound 8" in c.reference_text() and "upper estimate" in c.reference_text()


def test_without_exact_proof_or_bound_the_best_valid_plan_is_the_reference():
    # max: the exact method stopped with no plan and no bound; the invalid plan (9) is not a reference
    # and gets no gap; the best valid plan (4) is.
    h = _harness("max", {"bad": _result("bad", F, 9.0, valid=False), "a": _result("a", F, 4.0),
                         "b": _result("b", F, 3.0), "exact": _result("exact", SolveStatus.NO_SOLUTION, None, None)})
    c = compare(None, h)
    assert (c.reference, c.gap_reference) == (4.0, "incumbent")
    assert c.row("a").gap == 0.0 and c.row("b").gap == pytest.approx(0.25)
    assert c.row("bad").gap is None and c.row("bad").gap_reference == "" and c.row("bad").valid is False
    assert c.row("exact").gap is None
    # the exact method not run at all: the same rule
    c = compare(None, h, methods=("a", "b"))
    assert (c.reference, c.gap_reference, c.exact) == (4.0, "incumbent", None)
    # no plan anywhere: no reference, no gaps
    assert reference_of([Scored("x", "heuristic", "infeasible", None, None, None)], "min") == (None, "")


def test_a_method_that_cannot_finish_is_an_infeasible_row_and_progress_reports_every_method():
    events = []
    h = _harness("min", {"stuck": InfeasibleError("request r1 exceeds the budget"), "a": _result("a", F, 3.0),
                         "exact": _result("exact", O, 3.0, 3.0)})
    c = compare(None, h, progress=events.append)
    stuck = c.row("stuck")
    assert stuck.status == "infeasible" and stuck.gap is None and "r1 exceeds" in stuck.message
    assert [(e.method, e.result is None) for e in events] == [
        ("stuck", True), ("stuck", False), ("a", True), ("a", False), ("exact", True), ("exact", False)]
    assert all(e.total == 3 for e in events)
    # every method infeasible: the instance has no plan, said once
    h = _harness("min", {"a": InfeasibleError("no instance"), "exact": InfeasibleError("no instance")})
    with pytest.raises(InfeasibleError, match="no instance"):
        compare(None, h)
    with pytest.raises(PlannerError, match="unknown toy method 'nope'"):
        compare(None, h, methods=("nope",))


def test_placement_n40_jsq_gap_is_relative_to_the_larger_value():
    # The instance: jsq 36 workers vs the optimum 14 → (36 − 14) / 36 = 61.11 % (not 157.14 %).
    from planner.placement.harness import HARNESS

    problem = HARNESS.load(REPO / "instances" / "placement" / "sharegpt-70b-a100-n40.yaml")
    c = compare(problem, "placement", options=RunOptions(time_limit=60))
    assert c.gap_reference == "optimum"
    for row in c.rows:
        if row.objective is not None:
            assert row.gap == pytest.approx((row.objective - c.reference) / row.objective)
            assert row.gap == pytest.approx(HARNESS.gap_to(row.objective, c.reference))
    jsq = c.row("jsq")
    assert jsq.objective == pytest.approx(c.reference / (1 - jsq.gap))


# ---- compare FAMILY and compare all agree (what a user sees: subprocess, --json) --------------------------


def _planner(*args: str, cwd: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "planner", *args], capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def two_families(tmp_path_factory):
    root = tmp_path_factory.mktemp("compare")
    placement = REPO / "instances" / "placement"
    data = yaml.safe_load((placement / "sharegpt-70b-a100-n40.yaml").read_text())
    data["cost_model"] = str((placement / data["cost_model"]).resolve())
    (root / "placement").mkdir()
    (root / "placement" / "n40.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    shutil.copy(placement / data["requests"], root / "placement" / data["requests"])
    (root / "queueing").mkdir()
    shutil.copy(REPO / "instances" / "queueing" / "two-models-one-a100.yaml", root / "queueing" / "two.yaml")
    return root


def test_compare_family_and_compare_all_show_the_same_gaps(two_families, tmp_path):
    every = _planner("compare", "all", str(two_families), "--executor", "serial", "--no-progress", "--json",
                     "--time-limit", "60", cwd=tmp_path)
    assert "gap_definition" in every
    checked = 0
    for family, name in (("placement", "n40.yaml"), ("queueing", "two.yaml")):
        one = _planner("compare", family, str(two_families / family / name), "--json", "--time-limit", "60", cwd=tmp_path)
        rows = {r["method"]: r for r in every["rows"] if r["instance"] == f"{family}/{name}"}
        assert set(rows) == {m["method"] for m in one["methods"]}
        assert one["gap_reference"] == "optimum"
        for m in one["methods"]:
            r = rows[m["method"]]
            assert (m["status"], m["objective"], m["gap_reference"]) == (r["status"], r["objective"], r["gap_reference"])
            if m["gap"] is None:
                assert r["gap"] is None
            else:
                assert m["gap"] == pytest.approx(r["gap"], abs=1e-12)
                checked += 1
        if family == "queueing":  # the objective's constant (−Σ SLO) is left out of the gaps
            assert one["objective_offset"] < 0
            worse = [m for m in one["methods"] if m["gap"] and m["gap"] > 0]
            assert worse, one["methods"]
            for m in worse:
                off = one["objective_offset"]
                assert m["gap"] == pytest.approx((m["objective"] - one["reference"]) / (m["objective"] - off))
    assert checked >= 8


def test_compare_deployment_table_and_json(monkeypatch, capsys):
    # melange-example: greedy and single-type 7.34 $/h vs the MILP optimum 4.68 $/h → (7.34 − 4.68) / 7.34
    from support import run_cli

    instance = str(REPO / "instances" / "deployment" / "melange-example.yaml")
    code, out, err = run_cli(monkeypatch, capsys, "compare", "deployment", instance, "--json")
    assert code == 0, err
    data = json.loads(out)
    rows = {m["method"]: m for m in data["methods"]}
    assert set(rows) == {"greedy", "single-type", "milp"} and data["gap_reference"] == "optimum"
    opt = rows["milp"]["objective"]
    assert data["reference"] == opt and rows["milp"]["gap"] == 0.0
    for name in ("greedy", "single-type"):
        assert rows[name]["valid"] and rows[name]["objective"] >= opt
        assert rows[name]["gap"] == pytest.approx((rows[name]["objective"] - opt) / rows[name]["objective"])
    code, out, err = run_cli(monkeypatch, capsys, "compare", "deployment", instance)
    assert code == 0 and "gap to the MILP optimum" in out and "single-type" in out


def test_same_instance_and_seed_give_the_same_comparison():
    from planner.priority.harness import HARNESS

    problem = HARNESS.load(REPO / "instances" / "priority" / "fig4_toy.yaml")
    runs = [compare(problem, "priority", options=RunOptions(time_limit=30, seed=3)) for _ in range(2)]
    keys = [[(r.method, r.status, r.objective, r.gap, r.gap_reference) for r in c.rows] for c in runs]
    assert keys[0] == keys[1]
    assert [r.result.solution for r in runs[0].rows] == [r.result.solution for r in runs[1].rows]


def test_compare_all_table_uses_the_same_reference_rule():
    # Stored sweep results of one placement instance (min): the MIP stopped at 14 workers with bound 12,
    # so every gap is to the bound 12 ("bound"); jsq 36: (36 − 12) / 36; a second instance whose MIP
    # failed without a bound: gaps to the best plan ("incumbent"), a failed point has no gap.
    from planner.sweep.compare_all import build_table
    from planner.sweep.engine import SweepPoint

    def point(inst, method, kind):
        return SweepPoint(f"{inst}|{method}", {"family": "placement", "instance": inst, "method": method, "kind": kind})

    def res(status, objective, bound=None):
        return {"status": status, "objective": objective, "bound": bound, "seconds": 0.1, "validated": objective is not None,
                "objective_offset": 0.0, "message": ""}

    points = [point("a", "jsq", "heuristic"), point("a", "mip", "exact"), point("b", "jsq", "heuristic"),
              point("b", "best_fit", "heuristic"), point("b", "mip", "exact")]
    results = {"a|jsq": res("feasible", 36.0, 12.0), "a|mip": res("feasible", 14.0, 12.0),
               "b|jsq": res("feasible", 20.0, 10.0), "b|best_fit": res("feasible", 16.0, 10.0)}
    table = build_table(points, results, {"b|mip": "solver crashed"}).set_index(["instance", "method"])
    assert table.loc[("a", "jsq"), "gap"] == pytest.approx(24 / 36) and table.loc[("a", "jsq"), "gap_reference"] == "bound"
    assert table.loc[("a", "mip"), "gap"] == pytest.approx(2 / 14)
    assert table.loc[("b", "jsq"), "gap"] == pytest.approx(4 / 20) and table.loc[("b", "jsq"), "gap_reference"] == "incumbent"
    assert table.loc[("b", "best_fit"), "gap"] == 0.0
    assert table.loc[("b", "mip"), "status"] == "failed" and pd.isna(table.loc[("b", "mip"), "gap"])
