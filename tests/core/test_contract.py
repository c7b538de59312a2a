"""The Solution contract every family passes (`planner.harness.FamilyHarness.plan_from_dict` / ``validate``).

For one small shipped instance per family, the exact method and one heuristic run through ``HARNESS.run``;
their plan goes ``to_dict`` → strict JSON text → ``plan_from_dict`` → ``validate`` and must come back with
the run's own feasibility and objective (1e-9 relative).  A corrupted plan (a request moved, dropped or
over a limit) must be refused with one line or found infeasible.  A family whose harness does not
implement the contract fails here, it is not skipped.

Then `planner validate` as users run it (subprocesses: what a user sees): a solve's ``--json`` output
validates with exit 0 and the same objective; a hand-edited plan that breaks a constraint exits 1 and
names it; malformed JSON, a plan of another family and a missing file exit 2 with one line on stderr.
"""

from __future__ import annotations

import copy
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from support import REPO, assert_one_line, run_cli, toy_problem
from planner.errors import InputError
from planner.harness import FAMILY_MODULES, RunOptions, available_families
from planner.placement.problem import OngoingState

#: One small shipped instance per family: each method below runs in well under a few seconds.
INSTANCES = {
    "placement": "instances/placement/sharegpt-70b-a100-n40.yaml",
    "batching": "instances/batching/tiny3.yaml",
    "priority": "instances/priority/hetero_n10_b2.yaml",
    "queueing": "instances/queueing/two-models-one-a100.yaml",
    "deployment": "instances/deployment/cost-two-models.yaml",
    "deployment-tp": "instances/deployment/clusters/llama3-8b-8xv100.yaml",
    "routing": "instances/routing/llama3-8b-v100-small.yaml",
}
#: Time limit of every run (routing's exact method stops at it; the others finish long before).
TIME_LIMIT_S = 3.0
#: a hang guard per subprocess, not a speed assertion
HANG_GUARD_S = 300


def test_every_harness_family_has_a_contract_case() -> None:
    assert set(INSTANCES) == set(FAMILY_MODULES)


def _harness(family: str):
    harness = available_families().get(family)
    if harness is None:
        pytest.fail(f"family {family} is not installed")
    if harness.plan_from_dict is None or harness.validate is None:
        pytest.fail(f"{family}: HARNESS does not implement the Solution contract "
                    f"(plan_from_dict={harness.plan_from_dict}, validate={harness.validate})")
    return harness


def _same(a: float | None, b: float | None) -> bool:
    if a is None or b is None or (isinstance(a, float) and math.isnan(a)) or (isinstance(b, float) and math.isnan(b)):
        return (a is None or math.isnan(a)) and (b is None or math.isnan(b))
    return a == pytest.approx(b, rel=1e-9, abs=1e-12)


def _through_json(solution) -> dict:
    """``to_dict`` as a user's file holds it: strict JSON (no NaN/Infinity, which `planner validate` refuses)."""
    return json.loads(json.dumps(solution.to_dict(), allow_nan=False))


@pytest.fixture(scope="module")
def runs() -> dict:
    """(family, "exact" | "heuristic") -> (problem, result), each run once for the module."""
    return {}


def _run(runs: dict, family: str, kind: str):
    if (family, kind) not in runs:
        harness = _harness(family)
        problem = harness.load(REPO / INSTANCES[family])
        method = harness.exact_method if kind == "exact" else harness.heuristics[0]
        result = harness.run(problem, method, RunOptions(seed=0, time_limit=TIME_LIMIT_S))
        runs[family, kind] = (problem, result)
    return runs[family, kind]


@pytest.mark.parametrize("kind", ["exact", "heuristic"])
@pytest.mark.parametrize("family", list(INSTANCES))
def test_plan_survives_json_and_validates_the_same(runs, family: str, kind: str) -> None:
    harness = _harness(family)
    problem, result = _run(runs, family, kind)
    assert result.solution is not None and result.validation is not None, result.message
    data = _through_json(result.solution)
    plan = harness.plan_from_dict(problem, data)
    report = harness.validate(problem, plan)
    assert report.feasible == result.validation.feasible, report.summary()
    assert _same(report.objective, result.validation.objective), (report.objective, result.validation.objective)
    assert _same(report.objective, result.objective)
    # the plan read back writes everything needed to read it again: a second round trip changes nothing
    again = harness.validate(problem, harness.plan_from_dict(problem, _through_json(plan)))
    assert again.feasible == report.feasible and _same(again.objective, report.objective)


# ---- corrupted plans ----------------------------------------------------------------------------------

def _first_key(mapping: dict) -> str:
    return next(iter(mapping))


def _corrupt_placement(problem, data: dict) -> list[dict]:
    moved = copy.deepcopy(data)
    moved["assignment"] = {rid: 0 for rid in moved["assignment"]}  # every request on one worker
    dropped = copy.deepcopy(data)
    del dropped["assignment"][_first_key(dropped["assignment"])]
    return [moved, dropped]


def _corrupt_batching(problem, data: dict) -> list[dict]:
    dropped = copy.deepcopy(data)
    dropped["batches"] = dropped["batches"][:-1]  # the last batch's tokens are never processed
    over = copy.deepcopy(data)
    tokens = over["batches"][0]["tokens"]
    rid = _first_key(tokens)
    tokens[rid] += max(r.input_tokens for r in problem.requests)  # past the request's prompt
    return [dropped, over]


def _corrupt_priority(problem, data: dict) -> list[dict]:
    names = [job.name for job in problem.jobs]
    one_batch = {"batches": [names]}  # more jobs than b_max in one batch
    assert len(names) > problem.b_max
    dropped = copy.deepcopy(data)  # the first job of the first batch is left out
    dropped["instances"][0].pop("priority_order", None)
    batches = dropped["instances"][0]["batches"]
    batches[0].pop(0)
    dropped["instances"][0]["batches"] = [b for b in batches if b]
    return [one_batch, dropped]


def _corrupt_queueing(problem, data: dict) -> list[dict]:
    dropped = copy.deepcopy(data)
    queue = dropped["queues"][_first_key(dropped["queues"])]
    queue.pop(0)
    return [dropped]


def _corrupt_deployment(problem, data: dict) -> list[dict]:
    empty = copy.deepcopy(data)
    empty["instances"] = empty["instances"][:1]  # one option left: far below the load
    return [empty]


def _corrupt_deployment_tp(problem, data: dict) -> list[dict]:
    group = _first_key(data["best"]["degrees"])
    odd = copy.deepcopy(data)
    odd["best"]["degrees"][group] = 3  # divides no machine's 8 GPUs
    missing = copy.deepcopy(data)
    del missing["best"]["degrees"][group]  # a group without a degree
    return [odd, missing]


def _corrupt_routing(problem, data: dict) -> list[dict]:
    dropped = copy.deepcopy(data)
    del dropped["assignment"][_first_key(dropped["assignment"])]
    return [dropped]


CORRUPT = {"placement": _corrupt_placement, "batching": _corrupt_batching, "priority": _corrupt_priority,
           "queueing": _corrupt_queueing, "deployment": _corrupt_deployment,
           "deployment-tp": _corrupt_deployment_tp, "routing": _corrupt_routing}


@pytest.mark.parametrize("family", list(INSTANCES))
def test_corrupted_plan_is_refused_or_infeasible(runs, family: str) -> None:
    harness = _harness(family)
    problem, result = _run(runs, family, "exact")
    assert result.validation is not None and result.validation.feasible
    for k, bad in enumerate(CORRUPT[family](problem, _through_json(result.solution))):
        try:
            plan = harness.plan_from_dict(problem, json.loads(json.dumps(bad)))
        except InputError as exc:
            assert "\n" not in str(exc) and exc.problem, (k, str(exc))
            continue
        report = harness.validate(problem, plan)
        assert not report.feasible and report.violations, (k, bad)


def test_batching_evictions_survive_json() -> None:
    """A schedule that evicts (vLLM's preset on the §3.4 instance): read back, it evicts the same requests;
    without its evictions the same batches overflow M."""
    harness = _harness("batching")
    problem = harness.load(REPO / "instances/batching/evict_small.yaml")
    result = harness.run(problem, "vllm", RunOptions(seed=0))
    data = _through_json(result.solution)
    assert any(batch["evicted"] for batch in data["batches"])
    report = harness.validate(problem, harness.plan_from_dict(problem, data))
    assert report.feasible and report.details["evictions"] == result.validation.details["evictions"] > 0
    assert report.objective == pytest.approx(result.objective, rel=1e-9)
    for batch in data["batches"]:
        batch["evicted"] = []
    kept = harness.validate(problem, harness.plan_from_dict(problem, data))
    assert not kept.feasible and "M" in {v.constraint for v in kept.violations}


def test_placement_plan_that_migrates_an_ongoing_request_is_infeasible() -> None:
    problem = toy_problem([(10, 5), (10, 5)], ongoing={"r0": OngoingState(worker=3, generated_tokens=2)})
    harness = _harness("placement")
    kept = harness.validate(problem, harness.plan_from_dict(problem, {"assignment": {"r0": 3, "r1": 4}}))
    moved = harness.validate(problem, harness.plan_from_dict(problem, {"assignment": {"r0": 0, "r1": 4}}))
    assert kept.feasible and kept.objective == 2
    assert not moved.feasible and [v.constraint for v in moved.violations] == ["no_migration"]


# ---- reading errors: one line naming the field -----------------------------------------------------

BAD_PLANS = [
    ("placement", [], "", "expected a mapping"),
    ("placement", {"assigment": {}}, "assignment", "required key is missing"),
    ("placement", {"assignment": {}, "extra": 1}, "extra", "unknown key"),
    ("placement", {"assignment": {"nope": 0}}, "assignment.nope", "unknown request id"),
    ("placement", {"assignment": {"n0000": -1}}, "assignment.n0000", "at least 0"),
    ("placement", {"assignment": {"n0000": 10**12}}, "assignment.n0000", "at most"),
    ("placement", {"assignment": {"n0000": "3"}}, "assignment.n0000", "whole number"),
    ("placement", {"assignment": {"n0000": 2.0}}, "assignment.n0000", "write 2"),
    ("placement", {"assignment": {"n0000": True}}, "assignment.n0000", "boolean"),
    ("placement", {"assignment": {"n0000": 0}}, "assignment", "has no worker"),
    ("batching", {"batches": "omitted"}, "batches", "expected a list"),
    ("batching", {"batches": [{"tokens": {"a": 0}}]}, "batches[0].tokens.a", "at least 1"),
    ("batching", {"batches": [{"tokens": {"z": 1}}]}, "batches[0].tokens.z", "unknown request id"),
    ("batching", {"batches": [{"tokens": {"a": 1}, "evicted": ["b", "b"]}]}, "batches[0].evicted[1]", "evicted twice"),
    ("batching", {"batches": [{"token": {"a": 1}}]}, "batches[0].tokens", "required key is missing"),
    ("batching", {"batches": [{"tokens": {"a": None}}]}, "batches[0].tokens.a", "got null"),
    ("priority", {"batches": [["job1", "job2"], ["job1"]]}, "batches[1][0]", "placed twice"),
    ("priority", {"batches": [["job1", "job2"]]}, "batches", "'job3' is in no batch"),
    ("priority", {"batches": [["job1", "job2"], []]}, "batches[1]", "empty batch"),
    ("priority", {"batches": [["job1", "job9"]]}, "batches[0][1]", "unknown job"),
    ("priority", {"instances": []}, "instances", "at least one instance"),
    ("priority", {"batches": [], "instances": []}, "instances", "not both"),
    ("priority", {"instances": [{"batches": [["job1", "job2"], ["job3"]], "priority_order": ["job3", "job1", "job2"]}]},
     "instances[0].priority_order", "read left to right"),
]
BAD_PLAN_INSTANCES = {"placement": INSTANCES["placement"], "batching": "instances/batching/tiny3.yaml",
                      "priority": "instances/priority/fig4_toy.yaml"}


@pytest.mark.parametrize("family,data,field,needle", BAD_PLANS, ids=[f"{c[0]}-{c[3]}" for c in BAD_PLANS])
def test_bad_plan_is_one_line_naming_the_field(family: str, data, field: str, needle: str) -> None:
    harness = _harness(family)
    problem = harness.load(REPO / BAD_PLAN_INSTANCES[family])
    with pytest.raises(InputError) as caught:
        harness.plan_from_dict(problem, data)
    assert caught.value.field == field and needle in caught.value.problem, str(caught.value)
    assert "\n" not in str(caught.value)


def test_documented_hand_written_plans_read_as_documented() -> None:
    """The examples of `planner validate --help` and the plan-format docstrings."""
    batching = _harness("batching")
    tiny3 = batching.load(REPO / "instances/batching/tiny3.yaml")
    evicting = {"batches": [{"tokens": {"a": 2, "b": 1}}, {"tokens": {"a": 1, "c": 3}, "evicted": ["b"]},
                            {"tokens": {"a": 1, "b": 2}}]}
    report = batching.validate(tiny3, batching.plan_from_dict(tiny3, evicting))
    assert report.feasible and report.details["evictions"] == 1
    priority = _harness("priority")
    fig4 = priority.load(REPO / "instances/priority/fig4_toy.yaml")
    # Fig. 4 of the paper (the instance's description): batch (job1, job2) then job3, all meet their SLO
    # in 500 + 1300 = 1800 ms of latency in total: G = 3 / 1.8 s
    report = priority.validate(fig4, priority.plan_from_dict(fig4, {"batches": [["job1", "job2"], ["job3"]]}))
    assert report.feasible and report.objective == pytest.approx(3 / 1.8)
    two = {"instances": [{"batches": [["job1", "job2"]]}, {"batches": [["job3"]]}]}
    assert priority.validate(fig4, priority.plan_from_dict(fig4, two)).feasible


# ---- `planner validate` as a user runs it -----------------------------------------------------------

def _planner(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "160", "PLANNER_DEBUG": ""}
    return subprocess.run([sys.executable, "-m", "planner", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=HANG_GUARD_S, env=env)


SOLVED = {"placement": INSTANCES["placement"], "batching": "instances/batching/tiny3.yaml",
          "priority": "instances/priority/fig4_toy.yaml"}


@pytest.mark.parametrize("family", list(SOLVED))
def test_cli_validates_a_solve_output(monkeypatch, capsys, tmp_path: Path, family: str) -> None:
    instance = str(REPO / SOLVED[family])
    code, solved, err = run_cli(monkeypatch, capsys, "solve", family, instance, "--json")
    assert code == 0, err[-500:]
    (tmp_path / "plan.json").write_text(solved)
    checked = _planner(["validate", family, instance, "plan.json", "--json"], tmp_path)  # as a user runs it
    assert checked.returncode == 0, checked.stderr[-500:]
    report = json.loads(checked.stdout)  # stdout is exactly one JSON object
    expected = json.loads(solved)["validation"]
    assert report["family"] == family and report["feasible"] is True and report["violations"] == []
    assert report["objective"] == pytest.approx(expected["objective"], rel=1e-9)
    assert report["objective_name"] == available_families()[family].objective_name
    # the bare plan (the "solution" part) reads the same
    (tmp_path / "bare.json").write_text(json.dumps(json.loads(solved)["solution"]))
    code, shown, err = run_cli(monkeypatch, capsys, "validate", family, instance, str(tmp_path / "bare.json"))
    assert code == 0 and ": feasible" in shown and "objective recomputed from the plan" in shown, err


def test_cli_names_the_violation_of_a_hand_edited_plan(monkeypatch, capsys, tmp_path: Path) -> None:
    instance = str(REPO / INSTANCES["placement"])
    problem = available_families()["placement"].load(Path(instance))
    (tmp_path / "crowded.json").write_text(json.dumps({"assignment": {r.request_id: 7 for r in problem.requests}}))
    shown = _planner(["validate", "placement", instance, "crowded.json"], tmp_path)
    assert shown.returncode == 1, shown.stderr[-500:]
    assert "INFEASIBLE" in shown.stdout and "kv_capacity" in shown.stdout and "worker 7" in shown.stdout
    code, as_json, _ = run_cli(monkeypatch, capsys, "validate", "placement", instance, str(tmp_path / "crowded.json"),
                               "--json")
    assert code == 1
    report = json.loads(as_json)
    assert report["feasible"] is False and report["objective"] == 1
    assert "kv_capacity" in {v["constraint"] for v in report["violations"]}


def test_cli_malformed_plan_is_one_line_and_exit_2(tmp_path: Path) -> None:
    (tmp_path / "plan.json").write_text('{"batches": [')
    proc = _planner(["validate", "batching", str(REPO / "instances/batching/tiny3.yaml"), "plan.json", "--json"],
                    tmp_path)
    assert proc.stdout == ""
    assert_one_line(proc.returncode, proc.stderr, "plan.json: not valid JSON (line 1, column 14")


@pytest.mark.parametrize("case", ["wrong-family", "missing", "unknown-id", "null-solution", "not-an-object",
                                  "duplicate-key", "nan"])
def test_cli_bad_plan_file_is_one_line_and_exit_2(monkeypatch, capsys, tmp_path: Path, case: str) -> None:
    plan = tmp_path / "plan.json"
    text, needle = {
        "wrong-family": (json.dumps({"family": "placement", "solution": {"assignment": {}}}),
                         "family: this is a plan of family 'placement', not 'batching'"),
        "missing": (None, "file not found"),
        "unknown-id": (json.dumps({"family": "batching", "solution": {"batches": [{"tokens": {"zz": 1}}]}}),
                       "solution.batches[0].tokens.zz: unknown request id 'zz'"),
        "null-solution": (json.dumps({"family": "batching", "solution": None}), "solution: is null"),
        "not-an-object": ("[1, 2]", "expected a JSON object"),
        "duplicate-key": ('{"batches": [{"tokens": {"a": 1, "a": 2}}]}', "duplicate key 'a'"),
        "nan": ('{"batches": [{"tokens": {"a": NaN}}]}', "NaN is not a number JSON allows"),
    }[case]
    if text is not None:
        plan.write_text(text)
    code, shown, err = run_cli(monkeypatch, capsys, "validate", "batching", str(REPO / "instances/batching/tiny3.yaml"),
                               str(plan), "--json")
    assert shown == ""
    assert_one_line(code, err, needle, str(plan))


def test_cli_family_without_the_contract_is_one_line(monkeypatch, capsys) -> None:
    import dataclasses

    import planner.batching.harness as batching_harness

    monkeypatch.setattr(batching_harness, "HARNESS", dataclasses.replace(batching_harness.HARNESS, plan_from_dict=None))
    code, _, err = run_cli(monkeypatch, capsys, "validate", "batching", str(REPO / "instances/batching/tiny3.yaml"),
                           "plan.json")
    assert_one_line(code, err, "validation of batching plans is not available")
    code, _, err = run_cli(monkeypatch, capsys, "validate", "scheduling", "x.yaml", "plan.json")
    assert_one_line(code, err, "unknown family 'scheduling'")
