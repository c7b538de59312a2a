"""Fuzz findings of the queueing family: extreme but legal inputs end within the time limit with a
validated plan, out-of-range inputs are one line naming file and field, and an SLO no plan can meet
names its group."""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import yaml

from planner.core.contract import RunOptions
from planner.core.work import WorkClock
from planner.queueing import effort
from planner.queueing.capacity import BOUND_BUILD_FLOOR_SECONDS, bound_model_seconds, capacity_lower_bound, fleets_by_cost, witness_fleet
from planner.queueing.certified import solve_certified
from planner.queueing.generator import random_problem
from planner.queueing.heuristics import HEURISTICS
from planner.queueing.instance import MAX_CELLS, MAX_GROUPS, MAX_INSTANCES, load_queueing_instance
from planner.queueing.local_search import improve_plan
from planner.queueing.problem import InstanceType, QueueingProblem
from planner.queueing.pipeline import QueueingKnobs, hopeless_groups, milp_out_of_time, solve_queueing
from planner.queueing.validator import validate_assignment
from planner.solver import SolveStatus
from support.queueing_cli import INSTANCE, run
from support.queueing_cli import instance_file as _instance


def _copy(tmp_path: Path, mutate) -> Path:
    """The shipped two-models-one-a100 instance with ``mutate(data)`` applied."""
    data = yaml.safe_load(INSTANCE.read_text())
    mutate(data)
    path = tmp_path / "q.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _one_line(monkeypatch, capsys, path: Path, needles: list[str]) -> None:
    code, _, err = run(monkeypatch, capsys, "solve", "queueing", str(path), "--time-limit", "5")
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith(f"error: {path}: "), lines[0]
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])


# ---- F6: SLO slack far in the past (or future) -------------------------------------------------

def _as_requests(d: dict) -> None:
    d.pop("groups")
    d["requests"] = [{"model": "Llama-2-7B", "slo_class": "interactive", "input_tokens": 10, "output_tokens": 10,
                      "arrival_s": -1e15}]


@pytest.mark.parametrize("mutate, needles", [
    (lambda d: d.__setitem__("now_s", 1.0e15),
     ["now_s: groups[0] SLO slack -1e+15 s", "beyond what the planner handles (±1e+12 s)"]),
    (lambda d: d.__setitem__("now_s", 1.0e100), ["now_s: groups[0] SLO slack -1e+100 s", "beyond what the planner handles"]),
    (lambda d: d["groups"][1].__setitem__("arrival_s", 2.0e13),
     ["groups[1].arrival_s: groups[1] SLO slack 2e+13 s", "beyond what the planner handles"]),
    (_as_requests, ["requests[0].arrival_s: requests[0] SLO slack -1e+15 s", "beyond what the planner handles"]),
])
def test_slack_beyond_the_horizon_either_way_is_one_line(monkeypatch, capsys, tmp_path, mutate, needles):
    # now_s 1e15 used to hang the local search; 1e100 ended in "HiGHS rejected the model" (exit 1).
    _one_line(monkeypatch, capsys, _copy(tmp_path, mutate), needles)


def test_large_negative_slack_within_the_horizon_still_solves(monkeypatch, capsys, tmp_path):
    # Every deadline passed ~1e11 s ago: no plan meets them; the soft plan is returned and validated.
    path = _copy(tmp_path, lambda d: d.__setitem__("now_s", 1.0e11))
    code, out, err = run(monkeypatch, capsys, "solve", "queueing", str(path), "--time-limit", "5", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["status"] == "infeasible" and data["validation"]["feasible"]
    assert "cannot meet its SLO even first on any instance" in data["message"]


# ---- F7: huge work, descent float noise and the local search's budget --------------------------

def _huge(d: dict) -> None:
    for g in d["groups"]:
        g.update(num_requests=1_000_000, mean_input_tokens=1e6, mean_output_tokens=1e6, max_output_tokens=1e6)


def _kernel_inputs(problem: QueueingProblem, plan):
    work, tail = problem.queue_work(), problem.queue_tail()
    allowed = np.isfinite(work) & np.isfinite(tail)
    models = problem.models
    model_of = np.array([models.index(g.model) for g in problem.groups], dtype=np.int64)
    loaded = np.array([-1 if q.loaded_model is None else models.index(q.loaded_model) for q in problem.queues],
                      dtype=np.int64)
    sequences = np.full((problem.num_queues, problem.num_groups), -1, dtype=np.int64)
    lengths = np.array([len(s) for s in plan.queues], dtype=np.int64)
    for g, seq in enumerate(plan.queues):
        sequences[g, :len(seq)] = seq
    return (sequences, lengths, np.where(allowed, work, 0.0), np.zeros_like(work), problem.slo(), problem.queue_swap(),
            problem.queue_busy(), loaded, model_of, allowed)


def test_descent_on_huge_estimates_converges_and_its_budget_stops_a_cycling_one(tmp_path):
    from planner.queueing.compiled import local_search

    problem = load_queueing_instance(_copy(tmp_path, _huge))
    assert problem.work_s.max() > 1e11  # costs ~1e16 with the lateness weight: rounding noise of a few units
    start = HEURISTICS["edf"](problem)
    # The old rule (any gain > 1e-9 is an improvement, relative tolerance 0) cycles on rounding noise
    # inside the first pass; the budget stops it there: passes negated, work at the budget.
    counter = np.zeros(3, dtype=np.int64)
    passes = local_search(*_kernel_inputs(problem, start), 100, True, counter, 0.01, effort.EVALUATION, effort.SCAN, 0.0)
    assert passes == -1
    assert 0.01 <= effort.EVALUATION * counter[0] + effort.SCAN * counter[1] <= 0.011
    # With the relative tolerance (the default) the same descent reaches a local optimum at once.
    counter = np.zeros(3, dtype=np.int64)
    passes = local_search(*_kernel_inputs(problem, start), 100, True, counter, 0.01, effort.EVALUATION, effort.SCAN)
    assert 0 < passes <= 5
    info: dict = {}
    plan = improve_plan(problem, start, info=info)
    assert info == {"budget_stop": False, "passes": passes}
    assert validate_assignment(problem, plan, "total_lateness").feasible


def test_huge_groups_solve_returns_a_validated_soft_plan(monkeypatch, capsys, tmp_path):
    # num_requests and token counts at their limits used to keep `solve --time-limit 5` running > 120 s.
    path = _copy(tmp_path, _huge)
    code, out, err = run(monkeypatch, capsys, "solve", "queueing", str(path), "--time-limit", "5", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["status"] == "infeasible"
    assert data["validation"]["feasible"] and data["validation"]["objective_name"] == "total_lateness"
    assert data["stats"]["soft"]["value"] == pytest.approx(data["validation"]["objective"])


def test_the_local_search_stops_on_its_nominal_budget():
    # 400 groups × 8 queues: the full descent from greedy costs ~0.45 nominal s; with 0.02 s it stops
    # there (repeatably: wall-clock guard off), keeps only improving moves, and says so.
    p = random_problem(400, 8, seed=0)
    start = HEURISTICS["greedy"](p)
    clock = WorkClock(0.02, guard_share=math.inf)
    info: dict = {}
    plan = improve_plan(p, start, clock=clock, info=info)
    assert info["budget_stop"] and 0.02 <= clock.spent <= 0.021
    assert validate_assignment(p, plan).objective <= validate_assignment(p, start).objective
    again = improve_plan(p, start, clock=WorkClock(0.02, guard_share=math.inf))
    assert again.queues == plan.queues
    # The certified pipeline reports it (stats and message) and still returns a validated plan.
    clock = WorkClock(0.02, guard_share=math.inf)
    result = solve_certified(p, [start], time_limit=0.02, clock=clock)
    assert result is not None and result.stats["local_search_budget_stop"]
    assert "stopped on the time limit" in result.message
    assert validate_assignment(p, result.solution).feasible
    assert result.bound <= result.objective + 1e-9


# ---- F8: number of instances --------------------------------------------------------------------

@pytest.mark.parametrize("mutate, needles", [
    (lambda d: d["instance_types"][0].__setitem__("count", 10_000_000),
     [f"instance_types[0].count: at most {MAX_INSTANCES} instances in total", "declares 10000002"]),
    (lambda d: d["instance_types"][0].update(count=4000, extra_available=200),
     ["instance_types[0].extra_available: at most 4096 instances in total", "declares 4200"]),
])
def test_too_many_instances_is_one_line(monkeypatch, capsys, tmp_path, mutate, needles):
    _one_line(monkeypatch, capsys, _copy(tmp_path, mutate), needles)


def test_the_most_instances_allowed_solve_with_a_validated_plan(monkeypatch, capsys, tmp_path):
    # 4,094 + 2 candidates = the cap: the solve returns a validated optimal plan (~1 s of solve time).
    path = _copy(tmp_path, lambda d: d["instance_types"][0].update(count=MAX_INSTANCES - 2))
    code, out, err = run(monkeypatch, capsys, "solve", "queueing", str(path), "--time-limit", "5", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["validation"]["feasible"] and data["status"] in ("optimal", "feasible")
    assert len(data["solution"]["queues"]) == MAX_INSTANCES - 2


def test_a_milp_that_cannot_be_built_in_time_is_skipped_and_the_best_plan_reported(monkeypatch):
    # 100 queues × 300 groups: the model-block MILP would take ~3 s to build, more than half of the
    # 5 s (4,096 queues × 60 groups took 17 s, after which HiGHS got the whole time limit again).
    p = random_problem(300, 100, seed=1)
    assert "was not built" in milp_out_of_time(p, "blocks", 5.0) and not milp_out_of_time(p, "blocks", None)
    assert not milp_out_of_time(random_problem(60, 4, seed=1), "blocks", 5.0)
    forced = solve_queueing(p, RunOptions(time_limit=5.0), QueueingKnobs(formulation="blocks"))
    assert forced.status == SolveStatus.FEASIBLE and validate_assignment(p, forced.solution).feasible
    assert "was not built" in forced.message and "the best baseline plan" in forced.message
    # When the certified pipeline has a plan but no bound, its local-search plan is the one reported.
    monkeypatch.setattr("planner.queueing.certified.swap_assignment_bound", lambda *args, **kwargs: None)
    result = solve_queueing(p, RunOptions(time_limit=5.0))
    assert result.status == SolveStatus.FEASIBLE and validate_assignment(p, result.solution).feasible
    assert "was not built" in result.message and "the local-search from" in result.message
    assert result.objective <= forced.objective + 1e-9


def test_fleets_by_cost_is_the_sorted_product_and_lazy():
    types = (InstanceType("a", "x", 1, 1.0, 1, extra_available=3, cost_per_instance=1.0),
             InstanceType("b", "x", 1, 1.0, 0, extra_available=2, cost_per_instance=2.0),
             InstanceType("c", "x", 1, 1.0, 0, extra_available=2, cost_per_instance=1.5))
    p = random_problem(3, 1, seed=0)
    p = p._replace(types=types, work_s=np.ones((3, 3)), tail_s=np.ones((3, 3)),
                   queues=(replace(p.queues[0], type_index=0),))
    expected = sorted(itertools.product(range(4), range(3), range(3)),
                      key=lambda c: (sum(types[t].cost_per_instance * k for t, k in enumerate(c)), sum(c), c))
    assert [c for _, c in fleets_by_cost(p)] == expected
    # two types with 2,048 candidates each: 4.2 M fleets, used to be sorted in full (25 s) before the first try
    big = p._replace(types=tuple(replace(t, extra_available=2048) for t in types[:2]), work_s=np.ones((2, 3)),
                     tail_s=np.ones((2, 3)))
    first = list(itertools.islice(fleets_by_cost(big), 4))
    assert [c for _, c in first] == [(0, 0), (1, 0), (0, 1), (2, 0)]
    assert witness_fleet(big, clock=WorkClock(0.5)) is not None


def _reference_list_schedule(problem: QueueingProblem, order: list[int]) -> list[list[int]]:
    """The baselines' list scheduling as a plain scan over the queues (the implementation before numpy)."""
    clock = [q.busy_s for q in problem.queues]
    loaded = [q.loaded_model for q in problem.queues]
    sequences: list[list[int]] = [[] for _ in problem.queues]
    for i in order:
        group = problem.groups[i]
        def start(g: int, group=group) -> float:
            swap = problem.types[problem.queues[g].type_index].swap_time_s
            return clock[g] + (swap if loaded[g] != group.model else 0.0)
        options = [g for g, q in enumerate(problem.queues)
                   if not q.optional and math.isfinite(problem.work_s[q.type_index, i])]
        best = min(options, key=lambda g: (start(g), g))
        clock[best] = start(best) + problem.work_s[problem.queues[best].type_index, i]
        loaded[best] = group.model
        sequences[best].append(i)
    return sequences


@pytest.mark.parametrize("seed", range(6))
def test_vectorised_baselines_place_groups_like_the_scan(seed):
    p = random_problem(40 + 10 * seed, 2 + seed, seed=seed)
    p = p._replace(queues=tuple(replace(q, busy_s=float((3 * k) % 7)) for k, q in enumerate(p.queues)))
    for problem in (p, p.with_candidates(), p.with_objective(deadline="completion")):
        fcfs_order = sorted(range(problem.num_groups), key=lambda i: (problem.groups[i].arrival_s, i))
        edf_order = sorted(range(problem.num_groups),
                           key=lambda i: (problem.groups[i].slo_s, problem.groups[i].arrival_s, i))
        assert [list(s) for s in HEURISTICS["fcfs"](problem).queues] == _reference_list_schedule(problem, fcfs_order)
        assert [list(s) for s in HEURISTICS["edf"](problem).queues] == _reference_list_schedule(problem, edf_order)


# ---- F14: a group that cannot meet its SLO even first ------------------------------------------

def test_an_slo_no_instance_can_meet_names_the_group(monkeypatch, capsys, tmp_path):
    path = _copy(tmp_path, lambda d: d.__setitem__("slo_classes", {"interactive": 0.001, "batch-1": 60, "batch-2": 3600}))
    code, out, err = run(monkeypatch, capsys, "solve", "queueing", str(path), "--time-limit", "5", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["status"] == "infeasible" and data["validation"]["feasible"]  # the soft plan
    message = data["message"]
    assert "group 'chat-7b' (SLO class interactive, its SLO deadline passed 3.999 s ago) cannot meet its SLO " \
           "even first on any instance" in message
    assert "scale-up: adding instances cannot help: group 'chat-7b' cannot meet its SLO even first on a new " \
           "instance of any type" in message
    assert data["stats"]["hopeless_groups"] == [{"group": "chat-7b", "slo_slack_s": pytest.approx(-3.999),
                                                 "best_head_estimate_s": 0.0, "new_instance_helps": False}]


def test_a_group_only_a_new_faster_swapping_instance_can_serve_in_time(tmp_path):
    # The A100 instance swaps in 12 s; a new H100 instance in 8 s.  A group of a model that is not
    # loaded with 10 s of slack is late first on the A100 but in time first on a new H100.
    def mutate(d):
        d["slo_classes"]["interactive"] = 10.0
        d["groups"][0]["model"] = "CodeLlama-34B"
        d["instance_types"][0].update(tensor_parallel=4, swap_time_s=12, loaded_models=["Llama-2-7B"])
        d["instance_types"].append({"name": "h", "gpu": "H100-80GB-SXM", "tensor_parallel": 4, "swap_time_s": 8,
                                    "count": 0, "extra_available": 1})
    problem = load_queueing_instance(_instance(tmp_path, mutate))
    hopeless = hopeless_groups(problem)
    assert [(problem.groups[h.index].name, h.best_head_s, h.new_instance_helps) for h in hopeless] == [("g0", 12.0, True)]
    result = solve_queueing(problem, RunOptions(time_limit=5))
    assert result.status == SolveStatus.INFEASIBLE
    assert "group 'g0' (SLO class interactive, 10 s of SLO slack left) cannot meet its SLO even first" in result.message
    assert "adding instances cannot help" not in result.message
    assert result.stats["scale_up"]["extra_instances"] == {"h": 1}


# ---- F17: names and loaded models ---------------------------------------------------------------

@pytest.mark.parametrize("mutate, needles", [
    (lambda d: d["groups"][0].__setitem__("name", [1, 2]), ["groups[0].name: expected a name (text), got [1, 2]"]),
    (lambda d: d["groups"][0].__setitem__("name", None), ["groups[0].name: expected a name (text), got null"]),
    (lambda d: d["instance_types"][0].__setitem__("name", 7), ["instance_types[0].name: expected a name (text), got 7"]),
    (lambda d: d["slo_classes"].__setitem__(5, 20), ["slo_classes: key 5: expected a class name (text)"]),
    (lambda d: d["instance_types"][0].update(tensor_parallel=1, loaded_models=["Llama-2-7B", "Llama-2-70B"], count=2),
     ["instance_types[0].loaded_models[1]: Llama-2-70B does not fit on a100x4 (1 × A100-80GB-SXM"]),
])
def test_bad_names_and_unloadable_models_are_one_line(monkeypatch, capsys, tmp_path, mutate, needles):
    _one_line(monkeypatch, capsys, _copy(tmp_path, mutate), needles)


# ---- group count and the capacity bound's size --------------------------------------------------

def _with_groups(count: int, instances: int):
    def mutate(d):
        template = d["groups"][0]
        d["groups"] = [dict(template, name=f"g{k}") for k in range(count)]
        d["instance_types"][0].update(count=instances, extra_available=0)
    return mutate


@pytest.mark.parametrize("groups, instances, needles", [
    (MAX_GROUPS + 1, 1, [f"groups: {MAX_GROUPS + 1} groups; the planner handles at most {MAX_GROUPS}"]),
    (5_000, 1_000, ["groups: 5000 groups on 1000 instances", f"at most {MAX_CELLS}"]),
])
def test_too_many_groups_is_one_line(monkeypatch, capsys, tmp_path, groups, instances, needles):
    data = yaml.safe_load(INSTANCE.read_text())
    _with_groups(groups, instances)(data)
    path = tmp_path / "q.yaml"
    path.write_text(json.dumps(data))  # JSON is YAML, and much faster to write than yaml.safe_dump
    _one_line(monkeypatch, capsys, path, needles)


def test_capacity_bound_model_size_is_estimated_from_its_cells():
    # 20,000 groups with 40 SLO thresholds put ~7 M share variables in the bound's model (29 M
    # non-zeros, 17.8 GB and 135 s before this estimate counted them); under a 5 s limit it is skipped.
    small = random_problem(200, 16, seed=0)
    groups = tuple(replace(g, name=f"{g.name}-{k}") for k in range(100) for g in small.groups)
    large = small._replace(groups=groups, work_s=np.tile(small.work_s, 100), tail_s=np.tile(small.tail_s, 100))
    assert bound_model_seconds(small) < BOUND_BUILD_FLOOR_SECONDS  # built under any time limit
    assert bound_model_seconds(large) > 10 * bound_model_seconds(small)
    assert capacity_lower_bound(large, time_limit=5.0) is None
