"""Batching pipelines as named phases (`planner.core.phases`): the exact pipeline `solve_batching`
(`solve.MIP_PHASES`) and the simulator `simulate` (`scheduler.SIMULATION_PHASES`) record their phases'
wall seconds; the public entry `planner.batching.pipeline` is the harness's ``run``; the lazy staggered
heuristic and the single-prefill-batch test use the run's solver; the batching request carries the core
request's field names."""

from __future__ import annotations


import pytest
from support import REPO

import planner.batching
from planner.batching import staggered
from planner.batching.harness import HARNESS
from planner.batching.instance import load_batching_instance
from planner.batching.problem import BatchingProblem, Request, make_problem
from planner.batching.scheduler import SIMULATION_PHASES, simulate
from planner.core.contract import RunOptions
from planner.core.phases import phase_names
from planner.core.types import PlannedRequest, Request as CoreRequest
from planner.solver import SolveStatus

from planner.batching import pipeline as solve_module
HETERO8 = REPO / "instances" / "batching" / "hetero8.yaml"


def _in_order(recorded: list[str], declared: list[str]) -> bool:
    """``recorded`` is a subsequence of ``declared`` (phases run in order, some skipped)."""
    it = iter(declared)
    return all(name in it for name in recorded)


def test_a_mip_run_records_every_phase_it_ran_in_order():
    problem = make_problem([2, 1, 3], [2, 3, 1], M=6)
    result = solve_module.solve_batching(problem, time_limit=None, stop_at_bound=False)
    phases = result.stats["phases"]
    declared = phase_names(solve_module.MIP_PHASES)
    assert _in_order(list(phases), declared)
    for name in ("precheck", "presets", "batch count", "mip budget", "build mip", "solve", "validate", "assemble"):
        assert name in phases
    assert "stop at bound" not in phases and "no plan" not in phases  # skipped: the MIP gave a plan
    assert all(seconds >= 0 for seconds in phases.values())
    assert result.status == SolveStatus.OPTIMAL and result.validation.feasible


def test_a_run_stopped_at_the_bound_ends_at_that_phase():
    problem = load_batching_instance(HETERO8)
    result = solve_module.solve_batching(problem, time_limit=None, order_search=False, rollout_search=False)
    phases = list(result.stats["phases"])
    assert phases[-1] == "stop at bound" and "lazy staggered" in phases and "build mip" not in phases
    assert result.status == SolveStatus.OPTIMAL and result.stats["warm_start"] == "lazy-staggered"


def test_a_simulation_records_its_phases():
    problem = load_batching_instance(HETERO8)
    sim = simulate(problem, "sarathi")
    assert list(sim.phase_seconds) == phase_names(SIMULATION_PHASES)
    result = solve_module.run_scheduler(problem, "sarathi")
    assert list(result.stats["phases"]) == phase_names(SIMULATION_PHASES)
    assert result.objective == pytest.approx(sim.total_latency, rel=1e-9)


def test_the_public_solve_is_the_harness_run_and_dispatches_every_method():
    exact_direct = HARNESS.run(make_problem([2, 1, 3], [2, 3, 1], M=6), "mip", RunOptions(time_limit=None))
    problem = make_problem([2, 1, 3], [2, 3, 1], M=6)
    exact = planner.batching.solve(problem, "mip", RunOptions(time_limit=None))
    assert exact.method == "mip" and exact.status == SolveStatus.OPTIMAL
    assert exact.objective == exact_direct.objective and exact.solution.to_dict() == exact_direct.solution.to_dict()
    preset = planner.batching.solve(problem, "vllm", RunOptions())
    assert preset.method == "vllm" and preset.objective >= exact.objective * (1 - 1e-9)
    searched = planner.batching.solve(problem, "order search", RunOptions())
    assert searched.method == "order search" and searched.validation.feasible
    online = make_problem([2, 1], [2, 3], arrivals=[0.0, 0.5], M=6)
    refused = planner.batching.solve(online, "preemptive rollouts", RunOptions())
    assert refused.status == SolveStatus.NO_SOLUTION and "offline" in refused.message


def _recording(monkeypatch) -> list[str]:
    """Record the solver name of every model `staggered` solves (then solve it for real)."""
    used: list[str] = []
    real = staggered.solve

    def spy(model, solver="highs", options=None):
        used.append(solver)
        return real(model, solver, options)

    monkeypatch.setattr(staggered, "solve", spy)
    return used


@pytest.mark.parametrize("solver", ["highs", "cbc"])
def test_the_lazy_staggered_plans_use_the_runs_solver(monkeypatch, solver):
    from planner.solver.cbc_backend import cbc_available

    if solver == "cbc" and not cbc_available()[0]:
        pytest.skip(cbc_available()[1])
    used = _recording(monkeypatch)
    problem = load_batching_instance(HETERO8)
    result = solve_module.solve_batching(problem, solver=solver, time_limit=None, order_search=False,
                                         rollout_search=False)
    assert used and set(used) == {solver}
    assert result.solver == solver and result.stats["warm_start"] == "lazy-staggered"


def test_the_single_prefill_batch_test_uses_the_given_solver(monkeypatch):
    used = _recording(monkeypatch)
    problem = make_problem([3, 3], [2, 2], M=7)  # both prompts (6 KV) fit together: the MIP is solved
    staggered.single_prefill_batch_impossible(problem, 3, solver="cbc")
    assert used == ["cbc"]


def test_the_batching_request_is_the_core_request():
    assert Request is CoreRequest
    planned = PlannedRequest(request_id="q", arrival_s=1.5, input_tokens=7, output_tokens=4, predicted_output_tokens=9)
    problem = BatchingProblem(requests=(planned,), C=16, M=64)
    held = problem.requests[0]
    assert type(held) is CoreRequest  # the prediction plays no role in InferMax's schedule
    assert (held.request_id, held.arrival_s, held.input_tokens, held.output_tokens) == ("q", 1.5, 7, 4)
    assert held.kv_need == 7 + 4 - 1
