"""The capacity answer (fewest simulated workers) against the certified bound: bound ≤ answer on every
point (a fleet one below the bound fails, and a violation is an error), monotone in the SLOs and the
rate (common random numbers), the criterion recounted independently, and the shipped scenario."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from support import REPO

from planner.capacity import points as points_module
from planner.capacity.points import BoundViolation, criterion_check, simulate_point, solve_capacity_point
from planner.capacity.run import analyse, build_points, configurations
from planner.capacity.scenario import load_scenario

BASE = """\
name: answer
model: Llama-2-70B
slos: {{ttft_s: {ttft}, tpot_s: {tpot}}}
workload: {{distribution: sharegpt}}
rates: {rates}
gpus:
  - {{type: H100-80GB-SXM, price_per_hour: 3.0, tensor_parallel: [4]}}
simulation: {{duration_s: 300, snapshot: false}}
solve: {{seed: 3}}
"""


def _points(tmp_path: Path, *, ttft=1.0, tpot=0.06, rates=(2, 4, 6), name="s.yaml"):
    path = tmp_path / name
    path.write_text(BASE.format(ttft=ttft, tpot=tpot, rates=list(rates)))
    scenario = load_scenario(path)
    configs, _, _ = configurations(scenario)
    return scenario, configs, {p.key: p.params for p in build_points(scenario, configs)}


def test_the_fleet_one_below_the_bound_fails_and_the_answer_meets_the_criterion(tmp_path):
    _, _, points = _points(tmp_path)
    for params in points.values():
        result = solve_capacity_point(params)
        bound, answer = result["bound_workers"], result["workers"]
        assert 1 <= bound <= answer
        if bound > 1:  # the search starts one below the bound: that fleet was simulated and failed
            assert result["tried"][str(bound - 1)] is False
        assert result["tried"][str(answer)] is True
        if str(answer - 1) in result["tried"]:
            assert result["tried"][str(answer - 1)] is False
        assert result["check"]["feasible"] and result["check"]["objective"] == answer
        assert result["p_ttft_s"] <= params["ttft_s"] and result["p_tpot_s"] <= params["atgt_s"]


def test_a_simulated_fleet_below_the_bound_is_an_error_not_a_result(tmp_path, monkeypatch):
    _, _, points = _points(tmp_path, rates=(2,))
    params = next(iter(points.values()))
    honest = points_module.instance_bound

    def inflated(*args, **kwargs):  # a bound that claims far more workers than the simulator needs
        import dataclasses

        real = honest(*args, **kwargs)
        return dataclasses.replace(real, workers=real.workers + 40)

    monkeypatch.setattr(points_module, "instance_bound", inflated)
    with pytest.raises(BoundViolation, match="certified bound says at least"):
        solve_capacity_point(params)


def test_criterion_recount_agrees_with_the_simulator_and_rejects_a_tighter_slo(tmp_path):
    _, _, points = _points(tmp_path, rates=(4,))
    params = next(iter(points.values()))
    result = solve_capacity_point(params)
    fleet = simulate_point(params, result["workers"])
    assert criterion_check(params, fleet, result["workers"])["feasible"]
    tight = {**params, "atgt_s": result["p_tpot_s"] * 0.9}
    verdict = criterion_check(tight, fleet, result["workers"])
    assert not verdict["feasible"] and verdict["violations"][0]["where"] == "P99 TPOT"
    # attainment form: the fraction meeting both SLOs, recounted by hand
    att = {**params, "percentile": None, "attainment": 1.0}
    first, finish = fleet.first_token_s, fleet.finish_s
    out = fleet.output_tokens
    keep = fleet.arrival_s >= params["warmup_s"]
    ok = (first - fleet.arrival_s) <= params["ttft_s"]
    gaps = np.where(out >= 2, (finish - first) / np.maximum(out - 1, 1), 0.0)
    ok &= gaps <= params["atgt_s"]
    assert criterion_check(att, fleet, result["workers"])["feasible"] == bool(ok[keep].all())


@pytest.mark.parametrize("seed", range(3))
def test_answer_and_bound_never_increase_when_an_slo_loosens(tmp_path, seed):
    rng = np.random.default_rng(seed)
    ttft = float(rng.uniform(0.6, 2.0))
    tpot = float(rng.uniform(0.05, 0.09))
    rate = float(rng.choice([2.0, 4.0, 6.0]))
    loose_ttft, loose_tpot = ttft * float(rng.uniform(1.0, 2.0)), tpot * float(rng.uniform(1.0, 1.6))
    _, _, tight = _points(tmp_path, ttft=ttft, tpot=tpot, rates=(rate,), name="t.yaml")
    _, _, loose = _points(tmp_path, ttft=loose_ttft, tpot=loose_tpot, rates=(rate,), name="l.yaml")
    a = solve_capacity_point(next(iter(tight.values())))
    b = solve_capacity_point(next(iter(loose.values())))
    assert b["bound_workers"] <= a["bound_workers"], (ttft, tpot, loose_ttft, loose_tpot)
    assert b["workers"] <= a["workers"], (ttft, tpot, loose_ttft, loose_tpot)


def test_answer_and_bound_never_decrease_when_the_rate_rises(tmp_path):
    _, configs, points = _points(tmp_path, rates=(1, 2.5, 4, 5.5, 7))
    results = {k: solve_capacity_point(v) for k, v in points.items()}
    table, _ = analyse(results, points, configs)
    table = table.sort_values("rate")
    assert table.workers.is_monotonic_increasing and table.bound_workers.is_monotonic_increasing
    assert (table.bound_workers <= table.workers).all()
    # the raw bounds are monotone too (common random numbers: a lower rate's requests are a subset)
    raw = [results[k]["bound_workers"] for k in sorted(points, key=lambda k: points[k]["rate"])]
    assert raw == sorted(raw)


def test_shipped_scenario_is_monotone_and_bounded(tmp_path):
    text = (REPO / "instances" / "capacity" / "llama2-70b-sharegpt-a100-h100.yaml").read_text()
    text = text.replace("tensor_parallel: [2, 4, 8]", "tensor_parallel: [4]") + "simulation: {duration_s: 300, snapshot: false}\n"
    path = tmp_path / "shipped.yaml"
    path.write_text(text)
    scenario = load_scenario(path)
    configs, _, _ = configurations(scenario)
    points = {p.key: p.params for p in build_points(scenario, configs)}
    table, _ = analyse({k: solve_capacity_point(v) for k, v in points.items()}, points, configs)
    for _, frame in table.groupby(["gpu", "tensor_parallel"]):
        frame = frame.sort_values("rate")
        assert frame.gpus.is_monotonic_increasing and frame.bound_gpus.is_monotonic_increasing
        assert (frame.bound_gpus <= frame.gpus).all()


def test_scaling_shows_the_fleet_answer_and_bound_beside_aladdins_online_heuristic(monkeypatch, capsys):
    import json

    from support import run_cli

    code, stdout, err = run_cli(monkeypatch, capsys, "plan", "scaling", "--rate", "2", "--gpu", "H100-80GB-SXM", "--tp", "4",
                                "--ttft", "1", "--tpot", "0.06", "--duration", "90", "--warmup", "15", "--json")
    assert code == 0, err
    data = json.loads(stdout)
    assert "Aladdin's online heuristic" in data["workers_are"] and "planner.fleet" in data["fleet_workers_are"]
    (row,) = data["points"]
    assert 1 <= row["bound_gpus"] <= row["fleet_gpus"] == 4 * row["fleet_workers"]
    assert row["fleet_p99_ttft_s"] <= 1 and row["fleet_p99_tpot_s"] <= 0.06


def test_the_scenario_offers_exactly_the_fleet_routers_and_presets():
    import typing

    from planner.batching.scheduler import PRESETS
    from planner.capacity.scenario import ScenarioSimulation
    from planner.fleet.simulate import ROUTERS

    fields = ScenarioSimulation.model_fields
    assert set(typing.get_args(fields["router"].annotation)) == set(ROUTERS)
    assert set(typing.get_args(fields["scheduler"].annotation)) == {k for k in PRESETS if not k.endswith("-ef")}
