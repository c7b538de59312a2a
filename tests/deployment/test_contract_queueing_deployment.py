"""The Solution contract for queueing, deployment (cost plans, class plans, TP degrees) and routing.

run → to_dict → JSON → from_dict → validate gives the run's own verdict and objective; a corrupted plan
is found infeasible or refused; a malformed value is one `InputError` line naming the field.
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import pytest

from planner.deployment.harness import HARNESS as DEPLOYMENT
from planner.deployment.instance import load_deployment_instance
from planner.deployment.routing_harness import HARNESS as ROUTING
from planner.errors import InputError
from planner.harness import RunOptions
from planner.queueing.harness import HARNESS as QUEUEING

REPO = Path(__file__).resolve().parents[2]
OPTIONS = RunOptions(time_limit=10.0)

QUEUE_TWO_MODELS = REPO / "instances/queueing/two-models-one-a100.yaml"
QUEUE_OVERLOADED = REPO / "instances/queueing/overloaded-scale-up.yaml"
COST = REPO / "instances/deployment/cost-two-models.yaml"
COST_OVERLOAD = REPO / "instances/deployment/cost-overload.yaml"
CLASSES = REPO / "instances/deployment/melange-example.yaml"
CLUSTER = REPO / "instances/deployment/clusters/llama2-70b-a100-h100.yaml"
ROUTING_SMALL = REPO / "instances/routing/llama3-8b-v100-small.yaml"

_problems: dict[Path, object] = {}
_runs: dict[tuple[Path, str], object] = {}


def _problem(harness, path: Path):
    if path not in _problems:
        _problems[path] = load_deployment_instance(path) if path == CLUSTER else harness.load(path)
    return _problems[path]


def _run(harness, path: Path, method: str):
    """The run of ``method`` on ``path`` (cached: several tests read the same plan)."""
    if (path, method) not in _runs:
        problem = _problem(harness, path)
        if path == CLUSTER:  # TP enumeration: not a harness instance, its exact method is the enumeration
            from planner.deployment.enumeration import enumeration_result

            _runs[path, method] = enumeration_result(problem)
        else:
            _runs[path, method] = harness.run(problem, method, OPTIONS)
    return _runs[path, method]


def _json(data: dict) -> dict:
    return json.loads(json.dumps(data, allow_nan=False))


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-9 * max(abs(a), abs(b), 1e-300)


CASES = [
    pytest.param(QUEUEING, QUEUE_TWO_MODELS, "milp", id="queueing-milp"),
    pytest.param(QUEUEING, QUEUE_TWO_MODELS, "edf", id="queueing-edf"),
    pytest.param(QUEUEING, QUEUE_OVERLOADED, "milp", id="queueing-soft-plan"),
    pytest.param(QUEUEING, QUEUE_OVERLOADED, "fcfs", id="queueing-late-baseline"),
    pytest.param(DEPLOYMENT, COST, "milp", id="cost-milp"),
    pytest.param(DEPLOYMENT, COST, "greedy", id="cost-greedy"),
    pytest.param(DEPLOYMENT, COST_OVERLOAD, "milp", id="cost-max-load"),
    pytest.param(DEPLOYMENT, CLASSES, "milp", id="class-milp"),
    pytest.param(DEPLOYMENT, CLASSES, "greedy", id="class-greedy"),
    pytest.param(DEPLOYMENT, CLUSTER, "enumeration", id="tp-ranked"),
    pytest.param(ROUTING, ROUTING_SMALL, "milp", id="routing-milp"),
    pytest.param(ROUTING, ROUTING_SMALL, "mapper", id="routing-mapper"),
]


@pytest.mark.parametrize(("harness", "path", "method"), CASES)
def test_round_trip_gives_the_runs_verdict_and_objective(harness, path, method):
    problem = _problem(harness, path)
    result = _run(harness, path, method)
    assert result.solution is not None and result.validation is not None
    data = _json(result.solution.to_dict())
    plan = harness.plan_from_dict(problem, data)
    report = harness.validate(problem, plan)
    assert report.feasible == result.validation.feasible
    assert _close(report.objective, result.validation.objective)
    assert report.objective_name == result.validation.objective_name
    again = harness.plan_from_dict(problem, _json(plan.to_dict()))  # what from_dict reads, to_dict writes
    assert again == plan


def test_the_soft_plan_is_scored_on_the_soft_objective_and_infeasible_on_the_instances():
    problem = _problem(QUEUEING, QUEUE_OVERLOADED)
    result = _run(QUEUEING, QUEUE_OVERLOADED, "milp")
    data = _json(result.solution.to_dict())
    assert data["objective"] == "total_lateness"
    del data["objective"]  # the instance's objective: penalty, every SLO hard
    report = QUEUEING.validate(problem, QUEUEING.plan_from_dict(problem, data))
    assert not report.feasible and {v.constraint for v in report.violations} == {"deadline"}


def test_a_scale_up_plan_opens_candidates_and_costs_what_the_solver_said():
    problem = _problem(QUEUEING, QUEUE_OVERLOADED)
    scale_up = _run(QUEUEING, QUEUE_OVERLOADED, "milp").stats["scale_up"]
    data = _json(scale_up["plan"])
    report = QUEUEING.validate(problem, QUEUEING.plan_from_dict(problem, data))
    assert report.feasible and report.objective_name == "scale_up" and _close(report.objective, scale_up["cost"])
    data["objective"] = "penalty"  # a candidate instance outside a scale-up plan: refused when read
    with pytest.raises(InputError, match=r"queues\.a100x4\+1: a scale-up candidate"):
        QUEUEING.plan_from_dict(problem, data)


def test_a_queue_plan_written_by_hand_reads_group_names_in_order():
    problem = _problem(QUEUEING, QUEUE_TWO_MODELS)
    names = [g.name for g in problem.groups]
    order = ["summ-7b", "chat-7b", "batch-7b", "code-34b-a", "code-34b-b"]
    plan = QUEUEING.plan_from_dict(problem, {"queues": {"a100x4-1": order}})
    assert plan.queues == (tuple(names.index(n) for n in order),)
    assert plan.objective == problem.objective and plan.method == "plan"
    report = QUEUEING.validate(problem, plan)
    # the penalty is Σ (start − SLO): the recomputed starts and the SLOs give it back
    starts = report.details["start_s"]
    assert _close(report.objective, sum(starts[g.name] - g.slo_s for g in problem.groups))


def test_corrupted_queue_plans_are_infeasible():
    problem = _problem(QUEUEING, QUEUE_TWO_MODELS)
    data = _json(_run(QUEUEING, QUEUE_TWO_MODELS, "milp").solution.to_dict())
    dropped = copy.deepcopy(data)
    dropped["queues"]["a100x4-1"].pop()
    twice = copy.deepcopy(data)
    twice["queues"]["a100x4-1"].append(twice["queues"]["a100x4-1"][0])
    for bad in (dropped, twice):
        report = QUEUEING.validate(problem, QUEUEING.plan_from_dict(problem, bad))
        assert not report.feasible and report.violations[0].constraint == "group_once"


def test_corrupted_cost_plans_are_infeasible():
    problem = _problem(DEPLOYMENT, COST)
    data = _json(_run(DEPLOYMENT, COST, "milp").solution.to_dict())
    fewer = copy.deepcopy(data)
    fewer["instances"].pop()  # one option's instances removed: its model is no longer served
    report = DEPLOYMENT.validate(problem, DEPLOYMENT.plan_from_dict(problem, fewer))
    assert not report.feasible and "demand" in {v.constraint for v in report.violations}
    more = copy.deepcopy(data)
    more["instances"][0]["count"] = 10**9  # far beyond the inventory: reported, not expanded instance by instance
    report = DEPLOYMENT.validate(problem, DEPLOYMENT.plan_from_dict(problem, more))
    assert not report.feasible and "inventory" in {v.constraint for v in report.violations}


def test_a_cost_plan_written_by_hand_costs_count_times_degree_times_price():
    problem = _problem(DEPLOYMENT, COST)
    plan = DEPLOYMENT.plan_from_dict(problem, {"instances": [
        {"model": "Llama-2-70B", "gpu": "H100-80GB-SXM", "tensor_parallel": 4, "count": 2},
        {"model": "Llama-2-7B", "gpu": "A100-80GB-SXM", "tensor_parallel": 1, "count": 3}]})
    report = DEPLOYMENT.validate(problem, plan)
    assert _close(report.objective, 2 * 4 * 2.90 + 3 * 1 * 1.80)
    assert report.details["gpus_used"] == {"A100-80GB-SXM": 3, "H100-80GB-SXM": 8}


def test_corrupted_class_plan_is_infeasible():
    problem = _problem(DEPLOYMENT, CLASSES)
    data = _json(_run(DEPLOYMENT, CLASSES, "milp").solution.to_dict())
    data["routed_rps"].pop()
    report = DEPLOYMENT.validate(problem, DEPLOYMENT.plan_from_dict(problem, data))
    assert not report.feasible and "class_rate" in {v.constraint for v in report.violations}


def test_class_plan_routing_fractions_are_read_as_shares_of_the_class_rate():
    problem = _problem(DEPLOYMENT, CLASSES)
    data = _json(_run(DEPLOYMENT, CLASSES, "milp").solution.to_dict())
    exact = DEPLOYMENT.validate(problem, DEPLOYMENT.plan_from_dict(problem, data))
    del data["routed_rps"]  # the fractions alone: the same routes, up to rounding
    from_fractions = DEPLOYMENT.validate(problem, DEPLOYMENT.plan_from_dict(problem, data))
    assert from_fractions.feasible == exact.feasible and _close(from_fractions.objective, exact.objective)


def test_tp_plans_by_hand_and_corrupted():
    problem = _problem(DEPLOYMENT, CLUSTER)
    best = _run(DEPLOYMENT, CLUSTER, "enumeration")
    plan = DEPLOYMENT.plan_from_dict(problem, {"kind": "tp_degrees", "degrees": dict(zip(
        best.solution.groups, best.solution.best[0]))})
    report = DEPLOYMENT.validate(problem, plan)
    assert report.feasible and _close(report.objective, best.solution.best[1])
    bad = DEPLOYMENT.plan_from_dict(problem, {"degrees": {"dgx-a100": 3, "dgx-h100": 4}})
    report = DEPLOYMENT.validate(problem, bad)
    assert not report.feasible and report.violations[0].constraint == "divisibility"


def test_corrupted_routing_plans_are_refused_or_rescored():
    problem = _problem(ROUTING, ROUTING_SMALL)
    data = _json(_run(ROUTING, ROUTING_SMALL, "mapper").solution.to_dict())
    dropped = copy.deepcopy(data)
    rid = problem.request_ids[0]
    del dropped["assignment"][rid]
    with pytest.raises(InputError, match=f"request '{rid}' is routed to no instance"):
        ROUTING.plan_from_dict(problem, dropped)
    # every request on the first instance: a valid plan whose makespan is that instance's whole load
    piled = {"assignment": {r: problem.instances[0].name for r in problem.request_ids}}
    report = ROUTING.validate(problem, ROUTING.plan_from_dict(problem, piled))
    first = problem.instances[0].name
    assert _close(report.objective, report.details["loads_s"][first])
    assert all(v == 0.0 for name, v in report.details["loads_s"].items() if name != first)


def _set(path: tuple, value):
    def change(data: dict) -> dict:
        data = copy.deepcopy(data)
        target = data
        for key in path[:-1]:
            target = target[key]
        if value is _DELETE:
            del target[path[-1]]
        else:
            target[path[-1]] = value
        return data
    return change


_DELETE = object()

# (harness, instance, method, change, the field the one line names, words of the problem)
MALFORMED = [
    (QUEUEING, QUEUE_TWO_MODELS, "milp", _set(("queues", "a100x4-1", 0), "nobody"), "queues.a100x4-1[0]",
     "unknown group"),
    (QUEUEING, QUEUE_TWO_MODELS, "milp", _set(("queues", "a100x4-1", 0), 99), "queues.a100x4-1[0]", "expected a name"),
    (QUEUEING, QUEUE_TWO_MODELS, "milp", _set(("queues", "a100x4-1", 0), True), "queues.a100x4-1[0]",
     "expected a name"),
    (QUEUEING, QUEUE_TWO_MODELS, "milp", _set(("queues", "h100-9"), []), "queues.h100-9", "unknown queue"),
    (QUEUEING, QUEUE_TWO_MODELS, "milp", _set(("queues", "a100x4-1"), "chat-7b"), "queues.a100x4-1",
     "expected a list"),
    (QUEUEING, QUEUE_TWO_MODELS, "milp", _set(("queues",), _DELETE), "queues", "missing"),
    (QUEUEING, QUEUE_TWO_MODELS, "milp", _set(("objective",), "fastest"), "objective", "expected one of"),
    (QUEUEING, QUEUE_TWO_MODELS, "milp", _set(("kind",), "cost_plan"), "kind", "expected one of"),
    (QUEUEING, QUEUE_TWO_MODELS, "milp", _set(("order",), []), "order", "unknown key"),
    (DEPLOYMENT, COST, "milp", _set(("instances", 0, "count"), "3"), "instances[0].count", "expected a whole number"),
    (DEPLOYMENT, COST, "milp", _set(("instances", 0, "count"), -1), "instances[0].count", "must be at least 0"),
    (DEPLOYMENT, COST, "milp", _set(("instances", 0, "count"), 2.5), "instances[0].count", "expected a whole number"),
    (DEPLOYMENT, COST, "milp", _set(("instances", 0, "count"), 10**9 + 1), "instances[0].count", "at most"),
    (DEPLOYMENT, COST, "milp", _set(("instances", 0, "count"), _DELETE), "instances[0].count", "missing"),
    (DEPLOYMENT, COST, "milp", _set(("instances", 0, "option"), "Llama-2-70B on TPU tp4"), "instances[0].option",
     "unknown option"),
    (DEPLOYMENT, COST, "milp", _set(("instances", 0, "option"), 3), "instances[0].option", "expected a name"),
    (DEPLOYMENT, COST, "milp", _set(("load_scale",), float("nan")), "load_scale", "finite"),
    (DEPLOYMENT, COST, "milp", _set(("kind",), "class_plan"), "kind", "request-class instance"),
    (DEPLOYMENT, CLASSES, "milp", _set(("routed_rps", 0, "requests_per_s"), -2.0), "routed_rps[0].requests_per_s",
     "at least 0"),
    (DEPLOYMENT, CLASSES, "milp", _set(("routed_rps", 0, "class"), "nobody/short"), "routed_rps[0].class",
     "unknown class"),
    (DEPLOYMENT, CLASSES, "milp", _set(("instances", 0, "configuration"), None), "instances[0].configuration",
     "expected a name"),
    (DEPLOYMENT, CLUSTER, "enumeration", _set(("best", "degrees", "dgx-a100"), 0), "best.degrees.dgx-a100",
     "at least 1"),
    (DEPLOYMENT, CLUSTER, "enumeration", _set(("best", "degrees", "dgx-h100"), _DELETE), "best.degrees",
     "has no TP degree"),
    (ROUTING, ROUTING_SMALL, "mapper", _set(("assignment", "ghost"), 0), "assignment.ghost", "unknown request id"),
    (ROUTING, ROUTING_SMALL, "mapper", _set(("assignment",), ["a"]), "assignment", "expected a mapping"),
]


@pytest.mark.parametrize(("harness", "path", "method", "change", "field", "words"), MALFORMED,
                         ids=[f"{case[0].name}-{case[4]}-{case[5]}" for case in MALFORMED])
def test_malformed_plans_are_one_line_naming_the_field(harness, path, method, change, field, words):
    problem = _problem(harness, path)
    data = change(_json(_run(harness, path, method).solution.to_dict()))
    with pytest.raises(InputError) as caught:
        harness.plan_from_dict(problem, data)
    message = str(caught.value)
    assert "\n" not in message and caught.value.field == field and words in message, message


def test_a_routing_request_assigned_to_a_missing_instance_name_is_refused():
    problem = _problem(ROUTING, ROUTING_SMALL)
    data = {"assignment": {r: problem.instances[0].name for r in problem.request_ids}}
    data["assignment"][problem.request_ids[-1]] = "gpu-that-is-not-there"
    with pytest.raises(InputError, match="unknown instance 'gpu-that-is-not-there'"):
        ROUTING.plan_from_dict(problem, data)


@pytest.mark.parametrize("data", [[], "plan", None, 3])
def test_a_plan_that_is_not_an_object_is_one_line(data):
    for harness, path in ((QUEUEING, QUEUE_TWO_MODELS), (DEPLOYMENT, COST), (ROUTING, ROUTING_SMALL)):
        with pytest.raises(InputError, match="expected a mapping"):
            harness.plan_from_dict(_problem(harness, path), data)


def test_the_validators_report_no_nan_for_plans_read_back():
    """Every plan read back has a recomputed objective (a plan the reader accepts has the problem's shape)."""
    for harness, path, method in ((QUEUEING, QUEUE_TWO_MODELS, "edf"), (DEPLOYMENT, COST, "greedy"),
                                  (ROUTING, ROUTING_SMALL, "mapper")):
        problem = _problem(harness, path)
        plan = harness.plan_from_dict(problem, _json(_run(harness, path, method).solution.to_dict()))
        assert math.isfinite(harness.validate(problem, plan).objective)


# ---- the hand-written examples of the docs (an operator's current deployment) ------------------------

def test_documented_queue_plan_example():
    """Deadline order on the one A100 box (Llama-2-7B loaded): 7B, 34B, 7B, 34B, 7B swaps the model 4 times
    and still meets every SLO; the loaded model first (7B, 7B, 7B, 34B, 34B) swaps once."""
    problem = _problem(QUEUEING, QUEUE_TWO_MODELS)
    edf = QUEUEING.plan_from_dict(problem, {"kind": "queue_plan", "method": "current", "queues": {
        "a100x4-1": ["chat-7b", "code-34b-a", "summ-7b", "code-34b-b", "batch-7b"]}})
    grouped = QUEUEING.plan_from_dict(problem, {"queues": {
        "a100x4-1": ["chat-7b", "summ-7b", "batch-7b", "code-34b-a", "code-34b-b"]}})
    edf_report, grouped_report = QUEUEING.validate(problem, edf), QUEUEING.validate(problem, grouped)
    assert edf_report.feasible and edf_report.details["swaps"] == 4
    assert grouped_report.feasible and grouped_report.details["swaps"] == 1
    assert grouped_report.objective < edf_report.objective  # fewer swaps: a smaller sum of starts


def test_documented_cost_plan_example():
    """4 x Llama-2-70B on H100 tp4 (6.93 req/s >= 6) and 3 x Llama-2-7B on A100 tp8 (21.3 req/s >= 20):
    4·4·2.90 + 3·8·1.80 = 89.6 $/h."""
    problem = _problem(DEPLOYMENT, COST)
    plan = DEPLOYMENT.plan_from_dict(problem, {"kind": "cost_plan", "method": "current", "instances": [
        {"model": "Llama-2-70B", "gpu": "H100-80GB-SXM", "tensor_parallel": 4, "count": 4},
        {"model": "Llama-2-7B", "gpu": "A100-80GB-SXM", "tensor_parallel": 8, "count": 3}]})
    report = DEPLOYMENT.validate(problem, plan)
    assert report.feasible and _close(report.objective, 4 * 4 * 2.90 + 3 * 8 * 1.80)


def test_documented_class_plan_example():
    """Every class on A100-80GB-tp1: 6/20 + 3/20 + 15/40 + 6/20 = 1.125 instance-s/s on 2 instances, 2·3.67 $/h."""
    problem = _problem(DEPLOYMENT, CLASSES)
    a100 = "melange-example on A100-80GB-tp1"
    plan = DEPLOYMENT.plan_from_dict(problem, {
        "kind": "class_plan", "method": "current", "instances": [{"configuration": a100, "count": 2}],
        "routing_fractions": {f"melange-example/{c}": {a100: 1.0} for c in ("in0-out0", "in0-out1", "in1-out0",
                                                                              "in1-out1")}})
    report = DEPLOYMENT.validate(problem, plan)
    assert report.feasible and _close(report.objective, 2 * 3.67)
    assert _close(report.details["utilization"][a100], 1.125 / 2)


# ---- `planner validate` as a user runs it --------------------------------------------------------------

HANG_GUARD_S = 300


def _planner(args: list[str], cwd: Path):
    import os
    import subprocess
    import sys

    env = {**os.environ, "COLUMNS": "160", "PLANNER_DEBUG": ""}
    return subprocess.run([sys.executable, "-m", "planner", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=HANG_GUARD_S, env=env)


@pytest.mark.parametrize(("family", "path"), [("queueing", QUEUE_TWO_MODELS), ("deployment", CLASSES),
                                              ("deployment-tp", CLUSTER)])
def test_cli_validates_what_solve_printed(tmp_path, family, path):
    solver_family = "deployment" if family == "deployment-tp" else family  # `solve deployment` takes clusters too
    solved = _planner(["solve", solver_family, str(path), "--json", "--time-limit", "10"], tmp_path)
    assert solved.returncode == 0, solved.stderr[-500:]
    (tmp_path / "plan.json").write_text(solved.stdout)
    checked = _planner(["validate", family, str(path), "plan.json", "--json"], tmp_path)
    assert checked.returncode == 0, checked.stderr[-500:]
    report, expected = json.loads(checked.stdout), json.loads(solved.stdout)["validation"]
    assert report["feasible"] is True and _close(report["objective"], expected["objective"])


def test_cli_names_the_shortfall_of_an_operators_fleet_and_refuses_a_bad_count(tmp_path):
    small = {"instances": [{"model": "Llama-2-70B", "gpu": "H100-80GB-SXM", "tensor_parallel": 4, "count": 2},
                           {"model": "Llama-2-7B", "gpu": "A100-80GB-SXM", "tensor_parallel": 8, "count": 3}]}
    (tmp_path / "fleet.json").write_text(json.dumps(small))
    checked = _planner(["validate", "deployment", str(COST), "fleet.json"], tmp_path)
    assert checked.returncode == 1, checked.stderr[-500:]
    assert "Llama-2-70B" in checked.stdout and "needed" in checked.stdout
    small["instances"][1]["count"] = "3"
    (tmp_path / "fleet.json").write_text(json.dumps(small))
    refused = _planner(["validate", "deployment", str(COST), "fleet.json"], tmp_path)
    assert refused.returncode == 2 and refused.stdout == ""
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and "instances[1].count" in lines[0] and "fleet.json" in lines[0], refused.stderr


def test_cli_validates_a_hand_written_tp_plan_and_names_the_family_of_a_cluster(tmp_path):
    (tmp_path / "tp.json").write_text(json.dumps({"kind": "tp_degrees", "degrees": {"dgx-a100": 1, "dgx-h100": 8}}))
    checked = _planner(["validate", "deployment-tp", str(CLUSTER), "tp.json", "--json"], tmp_path)
    assert checked.returncode == 1, checked.stderr[-500:]
    report = json.loads(checked.stdout)
    assert report["feasible"] is False and report["sense"] == "max"
    assert [(v["constraint"], v["where"].split()[0]) for v in report["violations"]] == [("weights_memory", "dgx-a100")]
    assert report["cost_models"] == ["Llama-2-70B / A100-80GB-SXM / TP 1", "Llama-2-70B / H100-80GB-SXM / TP 8"]
    wrong = _planner(["validate", "deployment", str(CLUSTER), "tp.json"], tmp_path)
    assert wrong.returncode == 2 and wrong.stdout == ""
    lines = wrong.stderr.strip().splitlines()
    assert len(lines) == 1 and "deployment-tp" in lines[0] and CLUSTER.name in lines[0], wrong.stderr


def test_uniform_baselines_are_scored_by_the_validator_and_never_beat_the_enumeration():
    from planner.compare import compare
    from planner.deployment.tp_harness import HARNESS as TP

    problem = TP.load(CLUSTER)
    comparison = compare(problem, TP, options=OPTIONS)
    rows = {r.method: r for r in comparison.rows}
    assert rows["enumeration"].status == "optimal" and comparison.reference == rows["enumeration"].objective
    # Llama-2-70B's 137.95 GB of weights fit no single 80 GB GPU: no uniform TP 1 plan, and the reason is said
    assert rows["uniform-t1"].status == "no_solution" and rows["uniform-t1"].objective is None
    assert "weights" in rows["uniform-t1"].message
    for t in (2, 4, 8):
        row = rows[f"uniform-t{t}"]
        assert row.valid is True and row.result.solution.degrees == (t, t)
        assert _close(row.objective, row.result.validation.objective) and row.gap >= -1e-12
    enumerated = dict(rows["enumeration"].result.solution.ranked)
    assert _close(rows["uniform-t4"].objective, enumerated[(4, 4)])
    assert rows["enumeration"].result.solution.best[0] == (4, 4)
    assert rows["uniform-t4"].gap == 0.0  # the same plan scores the same: both objectives are the validator's
