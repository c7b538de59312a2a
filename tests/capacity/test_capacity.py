"""`planner capacity`: end to end (HTML + CSV + Parquet), monotone counts, bounds, repair, bad input,
and the ``--json`` solver contract (status, objective, bound, gap, solver, validator verdicts)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from pathlib import Path

import pandas as pd
import pytest
from support import REPO, assert_one_line, run_cli

from planner.capacity.points import point_problem, snapshot_requests, solve_capacity_point
from planner.capacity.report import POINT_COLUMNS, STATUSES, json_summary
from planner.capacity.run import DB_NAME, analyse, build_points, configurations, run_capacity
from planner.capacity.scenario import load_scenario
from planner.placement.solution import PlacementSolution
from planner.placement.validator import validate_placement
from planner.workloads.streams import find_distribution

SMALL = """\
name: small
model: Llama-2-70B
slos: {ttft_s: 1.6, atgt_s: 0.075}
workload: {distribution: sharegpt}
rates: [1, 2, 3, 4]
gpus:
  - {type: A100-80GB-SXM, price_per_hour: 1.8, tensor_parallel: [2, 4]}
  - {type: H100-80GB-SXM, price_per_hour: 3.0, tensor_parallel: best}
simulation: {duration_s: 600}
solve: {time_limit_s: 5, exact_max_requests: 80, seed: 1}
"""


def _write(tmp_path: Path, text: str, name: str = "scenario.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    """One end-to-end CLI run of the small scenario (serial executor), shared by the checks below."""
    tmp = tmp_path_factory.mktemp("capacity")
    scenario = _write(tmp, SMALL)
    out = tmp / "out"
    mp = pytest.MonkeyPatch()
    import sys
    from planner.cli.main import main

    mp.setattr(sys, "argv", ["planner", "capacity", str(scenario), "--report", str(out), "--executor", "serial",
                             "--no-progress"])
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    finally:
        mp.undo()
    return code, scenario, out


def test_end_to_end_writes_html_csv_parquet_with_the_expected_columns(small_run):
    code, _, out = small_run
    assert code == 0
    html = (out / "report.html").read_text()
    assert html.count("src='data:image/png;base64,") == 3  # GPUs vs rate, cost vs rate, percentiles vs fleet size
    assert "<img" in html and "http" not in html.split("<body>")[1].split("Generated")[0]  # self-contained
    csv = pd.read_csv(out / "points.csv")
    assert tuple(csv.columns) == POINT_COLUMNS
    parquet = pd.read_parquet(out / "points.parquet")
    assert tuple(parquet.columns) == POINT_COLUMNS and len(parquet) == len(csv)
    # A100 at TP 2 and 4, H100 at its Eq. 6 best degree: 3 series × 4 rates.
    assert len(csv) == 12
    assert set(csv.gpu) == {"A100-80GB-SXM", "H100-80GB-SXM"}
    assert (out / "results.sqlite").exists() and (out / "eq7.csv").exists()
    # the one-class mixed fleet at every rate, never above the cheapest single configuration (no inventory)
    from planner.capacity.report import MIXED_COLUMNS

    mixed = pd.read_csv(out / "mixed.csv")
    assert tuple(mixed.columns) == MIXED_COLUMNS and mixed.rate.tolist() == [1, 2, 3, 4]
    assert (mixed.kind == "one class").all() and mixed.met.all()
    cheapest = csv.groupby("rate").usd_per_hour.min()
    assert (mixed.usd_per_hour.to_numpy() <= cheapest.loc[mixed.rate].to_numpy() + 1e-9).all()
    assert "Mixed fleet at every rate" in html


def test_gpu_counts_are_monotone_in_rate_and_bounds_hold(small_run):
    _, _, out = small_run
    csv = pd.read_csv(out / "points.csv")
    for (_, _), frame in csv.groupby(["gpu", "tensor_parallel"]):
        frame = frame.sort_values("rate")
        assert frame.gpus.is_monotonic_increasing
        assert frame.bound_gpus.is_monotonic_increasing
    best = csv[csv.best_config]
    for _, frame in best.groupby("gpu"):
        assert frame.sort_values("rate").gpus.is_monotonic_increasing
    assert (csv.bound_gpus <= csv.gpus).all()
    assert (csv.gpus == csv.workers * csv.tensor_parallel).all()
    # $/h = GPUs × price: e.g. 4 A100 GPUs × $1.8 = $7.2
    assert (csv.usd_per_hour - csv.gpus * csv.price_per_gpu_hour).abs().max() < 1e-9
    assert all(f"with fewer than {b} GPUs under cost model Llama-2-70B / {gpu} / TP {tp}" in g
               for g, b, gpu, tp in zip(csv.guarantee, csv.bound_gpus, csv.gpu, csv.tensor_parallel))
    assert ((csv.status == "optimal") == (csv.workers == csv.bound_workers)).all()
    # the snapshot placement keeps its own proven bound
    assert (csv.snapshot_bound_gpus <= csv.snapshot_gpus).all()
    assert csv.snapshot_status.isin(["optimal", "feasible"]).all()


def test_rerun_skips_every_finished_point(small_run, monkeypatch, capsys):
    _, scenario, out = small_run
    before = pd.read_csv(out / "points.csv").drop(columns=["seconds"])
    code, stdout, _ = run_cli(monkeypatch, capsys, "capacity", str(scenario), "--report", str(out), "--executor",
                              "serial", "--no-progress", "--force")
    assert code == 0 and "12 already in the database, 0 solved now" in stdout
    pd.testing.assert_frame_equal(pd.read_csv(out / "points.csv").drop(columns=["seconds"]), before)


def test_report_files_of_an_earlier_run_are_not_overwritten_without_force(small_run, monkeypatch, capsys):
    _, scenario, out = small_run
    (out / "notes.txt").write_text("the user's notes")
    digests = {p.name: _digest(p) for p in out.iterdir() if p.is_file()}

    def refuse(*args, **kwargs):  # noqa: ANN002, ANN003
        raise AssertionError("the sweep ran before --out was checked")

    monkeypatch.setattr("planner.capacity.run.run_capacity", refuse)
    code, stdout, err = run_cli(monkeypatch, capsys, "capacity", str(scenario), "--report", str(out), "--executor",
                                "serial", "--no-progress")
    line = assert_one_line(code, err, "already holds report.html, points.csv, points.parquet, eq7.csv",
                           "pass --force")
    assert str(out) in line and stdout == ""
    assert {p.name: _digest(p) for p in out.iterdir() if p.is_file()} == digests


def test_an_interrupted_sweep_resumes_without_force_and_leaves_other_files_alone(tmp_path, monkeypatch, capsys):
    scenario = _write(tmp_path, SMALL.replace("rates: [1, 2, 3, 4]", "rates: [1, 2]"))
    out = tmp_path / "out"
    spec = load_scenario(scenario)
    points = build_points(spec, configurations(spec)[0])
    from planner.capacity.points import solve_capacity_point
    from planner.sweep import run_sweep

    # what a killed or Ctrl-C'd run leaves: the results database with some points, no report file
    run_sweep(points[:2], solve_capacity_point, db_path=out / DB_NAME, fingerprint=spec.fingerprint(),
              executor="serial", progress=False)
    (out / "notes.txt").write_text("the user's notes")
    code, stdout, err = run_cli(monkeypatch, capsys, "capacity", str(scenario), "--report", str(out), "--executor",
                                "serial", "--no-progress")
    assert code == 0, err
    assert f"{len(points)} points: 2 already in the database, {len(points) - 2} solved now" in stdout
    assert (out / "notes.txt").read_text() == "the user's notes"
    assert {"report.html", "points.csv", "points.parquet", "eq7.csv"} <= {p.name for p in out.iterdir()}
    assert not [p.name for p in out.iterdir() if p.name.endswith(".tmp")]


def _json_run(out: Path, scenario: Path, monkeypatch, capsys) -> dict:
    code, stdout, _ = run_cli(monkeypatch, capsys, "capacity", str(scenario), "--report", str(out), "--executor",
                              "serial", "--no-progress", "--json", "--force")  # the report files exist
    assert code == 0
    return json.loads(stdout)


def test_json_follows_the_solver_contract(small_run, monkeypatch, capsys):
    _, scenario, out = small_run
    data = _json_run(out, scenario, monkeypatch, capsys)
    # The old keys are kept; the contract's keys are added.
    assert {"scenario", "name", "points", "eq7", "failures", "outputs"} <= set(data)
    assert {"status", "objective", "bound", "gap", "solve_seconds", "solver", "solution", "validation"} <= set(data)
    points = data["points"]
    assert len(points) == 12 and data["failures"] == {}
    for p in points:
        assert set(POINT_COLUMNS) <= set(p)
        assert p["solver"] == "fleet-simulation"
        # The criterion is recounted from the per-request times: its objective is the point's worker count.
        assert p["validation"]["feasible"] is True and p["validation"]["violations"] == []
        assert p["validation"]["objective"] == p["workers"]
        assert math.isclose(p["gap"], abs(p["workers"] - p["bound_workers"]) / p["workers"])
        assert (p["gap"] == 0) == (p["status"] == "optimal")
        assert p["solve_seconds"] == p["seconds"] >= 0
    assert data["status"] == ("optimal" if all(p["status"] == "optimal" for p in points) else "feasible")
    assert data["solver"] == "fleet-simulation"
    assert math.isclose(data["solve_seconds"], sum(p["seconds"] for p in points), abs_tol=1e-3)
    # Headline: the cheapest configuration at the highest rate, and the lowest $/h any swept one could reach.
    top = max(p["rate"] for p in points)
    at_top = [p for p in points if p["rate"] == top]
    cheapest = min(at_top, key=lambda p: (p["usd_per_hour"], p["gpus"], p["tensor_parallel"]))
    assert data["objective"] == cheapest["usd_per_hour"]
    assert data["bound"] == min(p["bound_gpus"] * p["price_per_gpu_hour"] for p in at_top) <= data["objective"]
    assert math.isclose(data["gap"], (data["objective"] - data["bound"]) / data["objective"], abs_tol=1e-12)
    sol = data["solution"]
    assert (sol["rate"], sol["gpu"], sol["tensor_parallel"], sol["gpus"]) == (
        top, cheapest["gpu"], cheapest["tensor_parallel"], cheapest["gpus"])
    assert sol["validation"] == cheapest["validation"]
    assert [g["gpu"] for g in sol["per_gpu_type"]] == sorted({p["gpu"] for p in at_top},
                                                             key=lambda g: min(p["usd_per_hour"] for p in at_top
                                                                               if p["gpu"] == g))
    verdict = data["validation"]
    assert verdict["feasible"] is True and verdict["violations"] == []
    assert math.isclose(verdict["objective"], sol["validation"]["objective"] * sol["tensor_parallel"]
                        * cheapest["price_per_gpu_hour"])
    assert math.isclose(verdict["objective"], data["objective"])


def test_json_status_names_partial_failed_and_rejected_plans(small_run):
    _, scenario_path, out = small_run
    scenario = load_scenario(scenario_path)
    result = run_capacity(scenario, out, executor="serial", progress=False)  # every point resumed
    assert set(STATUSES) == {"optimal", "feasible", "partial", "failed"}
    base = json_summary(result)
    assert base["status"] in ("optimal", "feasible")
    pts = result.points.copy()
    pts["status"] = "optimal"
    assert json_summary(dataclasses.replace(result, points=pts))["status"] == "optimal"
    pts.loc[0, "status"] = "feasible"
    assert json_summary(dataclasses.replace(result, points=pts))["status"] == "feasible"
    partial = json_summary(dataclasses.replace(result, failures={"A100/tp2/rate9": "boom"}))
    assert partial["status"] == "partial" and partial["objective"] == base["objective"]
    failed = json_summary(dataclasses.replace(result, points=pts.iloc[0:0], failures={"k": "boom"}))
    assert failed["status"] == "failed" and failed["objective"] is None and failed["solution"] is None
    # A plan the validator rejects does not count as a plan: partial, and its violations are listed.
    rejected = result.points.copy()
    bad = {"feasible": False, "objective": 3.0,
           "violations": [{"constraint": "kv_capacity", "where": "worker 0", "value": 2.0, "limit": 1.0,
                           "message": "too much KV"}]}
    rejected["validation"] = [bad] + list(rejected["validation"].iloc[1:])
    summary = json_summary(dataclasses.replace(result, points=rejected))
    assert summary["status"] == "partial" and summary["validation"]["feasible"] is False
    row = rejected.iloc[0]
    assert summary["validation"]["violations"][0]["where"] == (
        f"{row.gpu} TP{row.tensor_parallel} at {row.rate:g} req/s: worker 0")


def test_snapshots_stored_without_solver_and_verdict_still_load(small_run):
    """A snapshot stored without solver / validation loads; the verdict is re-checked by the validator."""
    from planner.sweep.store import ResultsStore

    _, scenario_path, out = small_run
    scenario = load_scenario(scenario_path)
    configs, _, _ = configurations(scenario)
    params = {p.key: p.params for p in build_points(scenario, configs)}
    stored = ResultsStore(out / DB_NAME, scenario.fingerprint()).results()
    assert all("validation" in r["snapshot"] and "solver" in r["snapshot"] for r in stored.values())
    old = {k: {**r, "snapshot": {f: v for f, v in r["snapshot"].items() if f not in ("solver", "validation")}}
           for k, r in stored.items()}
    new_table, _ = analyse(stored, params, configs)
    old_table, _ = analyse(old, params, configs)
    pd.testing.assert_frame_equal(old_table, new_table)
    assert (old_table.snapshot_validation.map(lambda v: v["objective"]) == old_table.snapshot_workers).all()


def test_snapshots_are_nested_across_rates():
    dist = find_distribution("sharegpt")
    low = {r.request_id: r for r in snapshot_requests(dist, rate=2, rate_max=6, atgt_s=0.075, cap=4096, seed=4)}
    high = {r.request_id: r for r in snapshot_requests(dist, rate=6, rate_max=6, atgt_s=0.075, cap=4096, seed=4)}
    assert 0 < len(low) < len(high)
    assert all(high[k] == r for k, r in low.items())  # same request, same state, in both snapshots


def test_point_snapshot_plan_passes_the_validator_and_counts_agree(tmp_path):
    scenario = load_scenario(_write(tmp_path, SMALL))
    configs, _, _ = configurations(scenario)
    point = build_points(scenario, configs)[2]  # A100 TP 2 at 3 req/s
    result = solve_capacity_point(point.params)["snapshot"]
    problem = point_problem(point.params)
    ids = tuple(result["assignment"])
    report = validate_placement(problem, PlacementSolution(ids, tuple(result["assignment"][i] for i in ids), "x"))
    assert report.feasible
    # The snapshot carries the validator's verdict on its plan, and the engine that produced it.
    assert result["validation"] == report.to_dict()
    assert result["validation"]["objective"] == result["workers"]
    assert result["solver"] == ("highs" if result["method"] == "mip" else "heuristic")
    assert len(set(result["assignment"].values())) == result["workers"]
    assert result["bound_workers"] <= result["workers"] <= result["best_fit_workers"]
    assert set(ids) == {r.request_id for r in problem.requests}


def _one_config(tmp_path: Path):
    scenario = load_scenario(_write(tmp_path, SMALL.replace("tensor_parallel: [2, 4]", "tensor_parallel: [2]")
                                    .replace("  - {type: H100-80GB-SXM, price_per_hour: 3.0, tensor_parallel: best}\n", "")))
    configs, _, _ = configurations(scenario)
    points = {p.key: p.params for p in build_points(scenario, configs)}
    return configs, points, {k: solve_capacity_point(v) for k, v in points.items()}


def test_a_worse_snapshot_at_a_lower_rate_is_replaced_by_the_restricted_higher_plan(tmp_path):
    configs, points, results = _one_config(tmp_path)
    low_key = min(points, key=lambda k: points[k]["rate"])
    # Replace the lowest rate's snapshot plan by a valid but wasteful one: one worker per request, not proven optimal.
    wasteful = dict(results[low_key]["snapshot"])
    ids = sorted(wasteful["assignment"])
    wasteful.update(assignment={r: k for k, r in enumerate(ids)}, workers=len(ids), status="feasible",
                    bound_workers=1)
    results[low_key] = {**results[low_key], "snapshot": wasteful}
    table, _ = analyse(results, points, configs)
    row = table[table.rate == points[low_key]["rate"]].iloc[0]
    nxt = table.sort_values("rate").iloc[1]
    assert row.snapshot_workers <= nxt.snapshot_workers < len(ids)
    # The restricted plan carries its own verdict (not the wasteful plan's).
    assert row.snapshot_validation["feasible"]
    assert row.snapshot_validation["objective"] == row.snapshot_workers != wasteful["workers"]
    assert table.sort_values("rate").snapshot_workers.is_monotonic_increasing


def test_snapshot_lower_bounds_carry_up_in_rate(tmp_path):
    configs, points, results = _one_config(tmp_path)
    keys = sorted(points, key=lambda k: points[k]["rate"])
    # Pretend the second rate's snapshot proved only 1 worker: the first rate's proven bound still holds there.
    weak = dict(results[keys[1]]["snapshot"])
    weak.update(bound_workers=1, status="feasible")
    results[keys[1]] = {**results[keys[1]], "snapshot": weak}
    table, _ = analyse(results, points, configs)
    first, second = table.sort_values("rate").iloc[:2].itertuples()
    assert second.snapshot_bound_gpus == max(2, first.snapshot_bound_gpus)


def test_shipped_scenario_loads_and_sweeps_two_gpu_types():
    path = REPO / "instances" / "capacity" / "llama2-70b-sharegpt-a100-h100.yaml"
    scenario = load_scenario(path)
    configs, excluded, eq6 = configurations(scenario)
    assert {c.gpu for c in configs} == {"A100-80GB-SXM", "H100-80GB-SXM"}
    assert len(scenario.rates) >= 4
    # H100 "best": exactly one degree, the Eqs. 5–6 argmax among the feasible fitted degrees.
    h100 = [c for c in configs if c.gpu == "H100-80GB-SXM"]
    assert len(h100) == 1 and h100[0].tensor_parallel == eq6["H100-80GB-SXM"].best.tensor_parallel
    assert any(e.gpu == "H100-80GB-SXM" and e.tensor_parallel == 1 for e in excluded)  # 138 GB > 80 GB


# ---- bad input: one line each, and the results database is not touched -------------------------

BAD = [
    (lambda s: s.replace("model: Llama-2-70B\n", ""), "model: required field is missing"),
    (lambda s: s.replace("slos: {ttft_s: 1.6, atgt_s: 0.075}\n", ""), "slos: required field is missing"),
    (lambda s: s.replace("type: H100-80GB-SXM", "type: H200-NOPE"), "gpus[1].type: unknown GPU type 'H200-NOPE'"),
    (lambda s: s.replace("rates: [1, 2, 3, 4]", "rates: []"), "rates: the rate grid is empty"),
    (lambda s: s.replace("rates: [1, 2, 3, 4]", "rates: [1, -2]"), "rates[1]: arrival rates must be positive, got -2"),
    (lambda s: s.replace("model: Llama-2-70B", "model: GPT-9"), "model: unknown model 'GPT-9'"),
    (lambda s: s.replace(", price_per_hour: 1.8", ""), "gpus[0].price_per_hour: required"),
    (lambda s: s.replace("slos: {ttft_s: 1.6, atgt_s: 0.075}", "slos: {ttft_s: 1.6}"), "slos.atgt_s: required field"),
]


@pytest.mark.parametrize("edit,message", BAD, ids=[m.split(":")[0] for _, m in BAD])
def test_bad_scenario_is_one_line_and_the_database_is_untouched(small_run, tmp_path, monkeypatch, capsys, edit, message):
    _, _, out = small_run
    db = out / "results.sqlite"
    before = _digest(db)
    bad = _write(tmp_path, edit(SMALL), "bad.yaml")
    code, stdout, err = run_cli(monkeypatch, capsys, "capacity", str(bad), "--report", str(out), "--no-progress")
    assert code == 2
    assert message in err and "bad.yaml" in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert _digest(db) == before


def test_unreachable_ray_address_from_the_cli_is_one_line_and_the_database_is_untouched(small_run, monkeypatch, capsys):
    _, scenario, out = small_run
    db = out / "results.sqlite"
    before = _digest(db)
    code, _, err = run_cli(monkeypatch, capsys, "capacity", str(scenario), "--report", str(out), "--executor", "ray",
                           "--address", "127.0.0.1:1", "--no-progress", "--force")
    assert code == 2 and "no Ray cluster reachable" in err and len(err.strip().splitlines()) == 1
    assert _digest(db) == before


def test_a_changed_scenario_in_the_same_out_dir_is_refused(small_run, tmp_path, monkeypatch, capsys):
    _, _, out = small_run
    db = out / "results.sqlite"
    before = _digest(db)
    other = _write(tmp_path, SMALL.replace("seed: 1", "seed: 2"), "other.yaml")
    # --force overwrites report files, never another sweep's results database
    code, _, err = run_cli(monkeypatch, capsys, "capacity", str(other), "--report", str(out), "--no-progress", "--force")
    assert code == 2 and "different sweep" in err
    assert _digest(db) == before


def test_eq7_fit_matches_least_squares_by_hand(small_run):
    _, _, out = small_run
    csv = pd.read_csv(out / "points.csv")
    fits = pd.read_csv(out / "eq7.csv")
    for fit in fits.itertuples():
        frame = csv[(csv.gpu == fit.gpu) & (csv.tensor_parallel == fit.tensor_parallel)]
        x, y = frame.rate.to_numpy(float), frame.workers.to_numpy(float)
        # slope = cov(x, y) / var(x); intercept = ȳ − slope·x̄
        slope = ((x - x.mean()) * (y - y.mean())).sum() / ((x - x.mean()) ** 2).sum()
        assert math.isclose(fit.k_w, slope, rel_tol=1e-9, abs_tol=1e-12)
        assert math.isclose(fit.c_w, y.mean() - slope * x.mean(), rel_tol=1e-9, abs_tol=1e-9)


def test_workload_from_a_real_trace_file(shared_data, tmp_path):
    trace = shared_data / "traces" / "azure_llm_inference_2023" / "AzureLLMInferenceTrace_conv.csv"
    if not trace.exists():
        pytest.skip("Azure conversation trace not available")
    text = SMALL.replace("workload: {distribution: sharegpt}", f"workload: {{trace: {trace}, format: azure}}")
    scenario = load_scenario(_write(tmp_path, text))
    assert scenario.workload_label.startswith("trace AzureLLMInferenceTrace_conv.csv")
    assert scenario.distribution.source == str(trace)
    configs, _, _ = configurations(scenario)
    point = build_points(scenario, configs)[0]
    result = solve_capacity_point(point.params)
    assert result["measured_requests"] > 0 and result["bound_workers"] <= result["workers"]
    missing = text.replace(str(trace), str(tmp_path / "nope.csv"))
    from planner.errors import InputError

    with pytest.raises(InputError, match="workload.trace: file not found"):
        load_scenario(_write(tmp_path, missing, "missing.yaml"))
