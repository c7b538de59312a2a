"""Several models in one capacity scenario sharing a GPU inventory (`planner.capacity.multi`): the joint plan
respects the inventory that planning each model alone overdraws, each model's fleet is recounted from its own
simulation, each model's sweep is the single-model one (same fingerprint, resumed), old files are unchanged,
and bad ``models:`` input is one line."""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import yaml
from support import REPO, assert_one_line, run_cli

from planner.capacity.multi import joint_answer, model_dir_name, run_multi_capacity
from planner.capacity.points import criterion_check, meets, point_requests, point_worker
from planner.capacity.run import build_points
from planner.capacity.scenario import (
    MultiScenario,
    Scenario,
    load_scenario,
    read_capacity_file,
    scenario_from_mapping,
)
from planner.errors import InputError
from planner.fleet import simulate_fleet

#: a hang guard per subprocess, not a speed assertion
HANG_GUARD_S = 300

#: Two small models; each alone prefers H100 (2 GPUs each at these prices), the inventory holds 3.
TWO_MODELS = {
    "name": "two-small",
    "models": [
        {"model": "Llama-2-7B", "slos": {"ttft_s": 0.5, "tpot_s": 0.03}, "workload": {"distribution": "sharegpt"},
         "rates": [4]},
        {"model": "Llama-2-13B", "slos": {"ttft_s": 0.8, "tpot_s": 0.05}, "rates": [3]},
    ],
    "gpus": [
        {"type": "A100-80GB-SXM", "price_per_hour": 2.5, "tensor_parallel": [1]},
        {"type": "H100-80GB-SXM", "price_per_hour": 3.0, "tensor_parallel": [1], "available": 3},
    ],
    "simulation": {"duration_s": 200, "snapshot": False},
}


def _write(tmp_path, raw, name="multi.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def _recount(scenario: Scenario, result, counts: dict[str, int]) -> dict:
    """Simulate a model's fleet (workers per "GPU TPn") on its own stream, independently of the planner's
    check, and recount the criterion from the per-request times."""
    params = {p.key: p.params for p in build_points(scenario, result.configurations)}
    rate = next(iter(params.values()))["rate"]
    fleet, first = [], None
    for label, n in counts.items():
        gpu, tp = label.rsplit(" TP", 1)
        p = next(q for q in params.values() if q["gpu"]["name"] == gpu and q["tensor_parallel"] == int(tp))
        assert p["rate"] == rate
        first = first or p
        fleet += [point_worker(p)[0]] * n
    sim = simulate_fleet(point_requests(first), fleet, router=first["router"], ttft_s=first["ttft_s"],
                         tpot_s=first["atgt_s"], strictness=first["strictness"])
    check = criterion_check(first, sim, len(fleet))
    assert check["feasible"] == meets(first, sim)
    return check


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    """`TWO_MODELS` swept once (serial) into ``out``: (scenario, result, output directory)."""
    tmp = tmp_path_factory.mktemp("multi")
    multi = read_capacity_file(_write(tmp, TWO_MODELS))
    return multi, run_multi_capacity(multi, tmp / "out", executor="serial", progress=False), tmp / "out"


def test_joint_plan_respects_the_inventory_that_planning_alone_overdraws(tmp_path, swept):
    multi, result, out = swept
    assert isinstance(multi, MultiScenario) and multi.points == 1
    assert not result.failures
    (joint,) = result.joint
    available = {g.spec.name: g.available for g in multi.gpus}
    h100 = "H100-80GB-SXM"
    # planned alone, each model takes H100s; side by side they ask for more than the inventory holds
    assert not joint.alone_fit and joint.alone_gpus[h100] > available[h100]
    # the joint fleet stays within it and every model meets its own criterion
    assert joint.gpus.get(h100, 0) <= available[h100] and joint.met
    assert joint.usd_per_hour == pytest.approx(sum(s.usd_per_hour for s in joint.models))
    # the joint MILP has every model's alone problem as a relaxation: its plan costs at least their plans' sum
    alone_plans = sum(next(m.plan_usd_per_hour for m in r.mixed_by_rate) for r in result.results)
    assert joint.plan_usd_per_hour >= alone_plans - 1e-6
    for scenario, res, share in zip(multi.models, result.results, joint.models):
        assert share.model == scenario.model.name and share.rate == scenario.rates[0]
        check = _recount(scenario, res, {k: n for k, n in share.counts.items() if n})
        assert check["feasible"] and share.met and check["objective"] == sum(share.counts.values())
    # tighter inventories on the same sweeps: within both limits (a model may get a genuine mix, simulated and
    # recounted), or no joint fleet at all, said in one note
    for a100, h100_limit in ((2, 3), (1, 1)):
        raw = {**TWO_MODELS, "gpus": [{**TWO_MODELS["gpus"][0], "available": a100},
                                      {**TWO_MODELS["gpus"][1], "available": h100_limit}]}
        tight = read_capacity_file(_write(tmp_path, raw, f"tight{a100}.yaml"))
        got = joint_answer(tight, result.results, 0)
        if h100_limit == 1:
            assert not got.models and not got.met and "no joint fleet within the inventory" in got.note
            continue
        assert got.met and got.gpus.get("A100-80GB-SXM", 0) <= a100 and got.gpus.get(h100, 0) <= h100_limit
        for scenario, res, share in zip(tight.models, result.results, got.models):
            assert _recount(scenario, res, {k: n for k, n in share.counts.items() if n})["feasible"]
    # each model's sweep is the single-model one: same fingerprint as a file with its entry and the shared fields
    shared = {k: v for k, v in TWO_MODELS.items() if k != "models"}
    for entry, scenario in zip(TWO_MODELS["models"], multi.models):
        alone = scenario_from_mapping({**shared, **entry}, tmp_path / "one.yaml")
        assert alone.fingerprint() == scenario.fingerprint()
    # resumed: a second run solves nothing again and gives the same joint fleet
    again = run_multi_capacity(multi, out, executor="serial", progress=False)
    for res in again.results:
        assert res.summary.skipped == res.summary.total and res.summary.completed == 0
        assert (out / model_dir_name(res.scenario.model.name) / "results.sqlite").is_file()
    assert again.joint[0].to_dict() == joint.to_dict()


#: Fingerprints (results-database identities) of the shipped single-model scenarios, before ``models:`` existed.
SHIPPED_FINGERPRINTS = {
    "llama2-70b-sharegpt-a100-h100.yaml": ("8535b8e9d4c692e0", "51f3ea0c4940bec5"),
    "llama2-70b-sharegpt-size-classes.yaml": ("377047561c36953a", "711f7cb91df14534"),
}


def test_single_model_files_read_as_before():
    for name, (points, classes) in SHIPPED_FINGERPRINTS.items():
        path = REPO / "instances" / "capacity" / name
        scenario = read_capacity_file(path)
        assert isinstance(scenario, Scenario) and scenario == load_scenario(path)
        assert (scenario.fingerprint(), scenario.classes_fingerprint()) == (points, classes)


def test_a_non_default_solver_is_its_own_database():
    """Another solver may stop a time-limited point elsewhere: its results never resume a HiGHS database."""
    scenario = load_scenario(REPO / "instances" / "capacity" / next(iter(SHIPPED_FINGERPRINTS)))
    other = scenario.model_copy(update={"solver": "cbc"})
    assert other.fingerprint() != scenario.fingerprint()
    assert other.classes_fingerprint() != scenario.classes_fingerprint()


def _entry(i: int, **change) -> dict:
    return {**TWO_MODELS["models"][i], **change}


@pytest.mark.parametrize("raw, field, words", [
    ({**TWO_MODELS, "models": [_entry(0, rates=[4, 6]), _entry(1)]}, "models[1].rates",
     "1 rate(s), but models[0].rates has 2"),
    ({**TWO_MODELS, "models": [_entry(0), _entry(1, model="llama-2-7b")]}, "models[1].model", "given twice"),
    ({**TWO_MODELS, "model": "Llama-2-7B"}, "model", "not both"),
    ({**TWO_MODELS, "rates": [1]}, "rates", "give rates per model"),
    ({**TWO_MODELS, "models": [_entry(0, rates=[4, 2]), _entry(1, rates=[1, 2])]}, "models[0].rates",
     "strictly increasing"),
    ({**TWO_MODELS, "models": [_entry(0, gpus=[]), _entry(1)]}, "models[0].gpus", "unknown field"),
    ({**TWO_MODELS, "classes": {"input": [1024]}}, "classes", "not supported with models"),
    ({**TWO_MODELS, "models": [_entry(0), _entry(1, slos={"ttft_s": -1, "tpot_s": 0.05})]}, "models[1].slos.ttft_s",
     ""),
    ({**TWO_MODELS, "models": []}, "models", "non-empty list"),
    ({**TWO_MODELS, "models": [_entry(0), "Llama-2-13B"]}, "models[1]", "must be a mapping"),
    ({**TWO_MODELS, "models": [_entry(0), _entry(1, rates=[0])]}, "models[1].rates", "positive"),
    # a shared field that fails for one model names the model: no Llama-3-8B cost model on H100s
    ({**TWO_MODELS, "models": [_entry(0), _entry(1, model="Llama-3-8B")]}, "gpus[1].type",
     "(for models[1], Llama-3-8B)"),
])
def test_bad_models_input_is_one_line_naming_file_and_field(tmp_path, raw, field, words):
    path = _write(tmp_path, raw)
    with pytest.raises(InputError) as info:
        read_capacity_file(path)
    message = str(info.value)
    assert message.startswith(f"{path}: {field}"), message
    assert words in message and "\n" not in message


def test_cli_two_models_json_and_a_bad_file(tmp_path):
    good = _write(tmp_path, TWO_MODELS)
    bad = _write(tmp_path, {**TWO_MODELS, "models": [_entry(0, rates=[4, 6]), _entry(1)]}, "bad.yaml")
    runs = {"good": [str(good), "--json", "--no-progress", "--executor", "serial"], "bad": [str(bad), "--no-progress"]}

    def run(args):
        return subprocess.run([sys.executable, "-m", "planner", "capacity", *args], capture_output=True, text=True,
                              cwd=REPO, timeout=HANG_GUARD_S)

    with ThreadPoolExecutor(max_workers=2) as pool:
        procs = dict(zip(runs, pool.map(run, runs.values())))
    assert procs["bad"].stdout == ""
    assert_one_line(procs["bad"].returncode, procs["bad"].stderr, f"{bad}: models[1].rates:", "joint point")
    proc = procs["good"]
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)  # exactly one JSON object
    assert doc["status"] == "feasible" and doc["validation"]["feasible"]
    assert [m["model"] for m in doc["models"]] == ["Llama-2-7B", "Llama-2-13B"]
    assert all(m["status"] in ("optimal", "feasible") and m["points"] for m in doc["models"])
    (joint,) = doc["joint_fleets"]
    assert doc["objective"] == pytest.approx(joint["usd_per_hour"])
    assert joint["gpus"].get("H100-80GB-SXM", 0) <= 3 and not joint["alone_fit"]
    assert all(s["check"]["feasible"] for s in joint["models"])


def test_outputs_lay_out_one_directory_per_model(swept, monkeypatch):
    import planner.capacity.report as report
    from planner.capacity.report import check_multi_report_files, write_multi_outputs
    from planner.errors import PlannerError

    multi, result, out = swept
    # each model's own report.html is the single-model one (tested there); stub its plots to keep this fast
    monkeypatch.setattr(report, "render_html", lambda res: f"<html>{res.scenario.model.name}</html>")
    paths = write_multi_outputs(result, out)
    for scenario in multi.models:
        sub = out / model_dir_name(scenario.model.name)
        assert (sub / "report.html").read_text() == f"<html>{scenario.model.name}</html>"
        assert (sub / "points.csv").is_file() and (sub / "mixed.csv").is_file() and (sub / "results.sqlite").is_file()
    csv = paths["joint"].read_text().splitlines()
    assert csv[0].startswith("point,model,rate,fleet") and len(csv) == 1 + 2 + 1  # header, two models, total
    assert np.isclose(float(csv[-1].split(",")[5]), result.joint[0].usd_per_hour)
    page = paths["report"].read_text()
    assert "Joint mixed fleet per point" in page and "llama-2-13b/report.html" in page
    with pytest.raises(PlannerError, match="already holds report.html, joint.csv"):
        check_multi_report_files(multi, out, force=False)
    check_multi_report_files(multi, out, force=True)


def test_an_existing_out_file_is_refused_before_any_model_is_swept(tmp_path, monkeypatch, capsys):
    """`planner capacity` with ``models:`` checks --out before it sweeps (as a one-model scenario does)."""
    import planner.capacity.multi as multi

    scenario = tmp_path / "two.yaml"
    scenario.write_text(yaml.safe_dump(TWO_MODELS))
    existing = tmp_path / "answer.json"
    existing.write_text("{}")
    swept: list[object] = []
    monkeypatch.setattr(multi, "run_multi_capacity", lambda *args, **kwargs: swept.append(args))
    code, out, err = run_cli(monkeypatch, capsys, "capacity", str(scenario), "--out", str(existing), "--no-progress")
    assert_one_line(code, err, str(existing), "already exists", "--force")
    assert out == "" and swept == [] and existing.read_text() == "{}"
