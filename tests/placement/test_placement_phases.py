"""Placement's MIP pipeline as named phases (`planner.placement.pipeline.PHASES`) and its public entry."""

from __future__ import annotations


import pytest
from support import toy_cost, toy_problem

from planner.core.contract import RunOptions
from planner.core.phases import phase_names
from planner.placement.pipeline import solve
from planner.placement.harness import HARNESS
from planner.placement.pipeline import PHASES, PlacementKnobs, run_heuristic, solve_placement
from planner.solver import SolveStatus

from planner.placement import pipeline as solve_module


def test_phase_seconds_are_recorded_in_run_order():
    p = toy_problem([(500, 5), (400, 5), (300, 5), (200, 5)], ttft=1.0, mode="colocated", gpu_memory_gb=10.0)
    res = solve_placement(p)
    assert res.status == SolveStatus.OPTIMAL and res.validation.feasible
    phases = res.stats["phases"]
    # a small model skips the repacking (`when`), every other phase runs, in the order of PHASES
    assert list(phases) == [n for n in phase_names(PHASES) if n != "repack"]
    assert all(seconds >= 0 for seconds in phases.values())


def test_an_unservable_request_ends_the_pipeline_at_the_precheck():
    # r1's KV cache (200,009 tokens) exceeds a worker's capacity: no worker can serve it
    p = toy_problem([(10, 10), (200_000, 10)])
    res = solve_placement(p)
    assert res.status == SolveStatus.INFEASIBLE and res.solution is None
    assert list(res.stats["phases"]) == ["precheck"]
    assert "request r1" in res.message


def test_the_max_workers_phase_returns_the_bound_that_proves_infeasibility():
    cost = toy_cost(decode_s_per_context_token=1e-4)
    p = toy_problem([(400, 200)] * 10, atgt=0.2, cost=cost, gpu_memory_gb=40.0, max_workers=2)
    res = solve_placement(p)
    assert res.status == SolveStatus.INFEASIBLE and res.bound is not None and res.bound > 2
    assert "max_workers=2" in res.message
    assert list(res.stats["phases"])[-1] == "max_workers"


class _Stop(Exception):
    pass


def test_repacking_uses_the_runs_solver(monkeypatch):
    # 250 requests of 0.4 of a worker: best-fit packs two per worker (125), the bound says 100, and the
    # model has 250 × 125 > REPACK_MIN_PAIRS pairs, so the repacking runs — with the solver of the run.
    seen: list[str] = []

    def spy(problem, solution, **kwargs):  # noqa: ANN001, ANN003
        seen.append(kwargs["solver"])
        raise _Stop

    monkeypatch.setattr(solve_module, "repack", spy)
    cost = toy_cost(decode_s_per_context_token=1e-4)
    p = toy_problem([(400, 200)] * 250, atgt=0.2, cost=cost, gpu_memory_gb=40.0)
    for solver in ("cbc", "highs"):
        with pytest.raises(_Stop):
            solve_placement(p, RunOptions(solver=solver))
    assert seen == ["cbc", "highs"]


def test_knobs_reach_the_pipeline():
    # repack_seconds=0 with no time: no repacking and no "skipped" note for it; the MIP is skipped
    cost = toy_cost(decode_s_per_context_token=1e-4)
    p = toy_problem([(400, 200)] * 60, atgt=0.2, cost=cost, gpu_memory_gb=40.0)
    said: list[str] = []
    res = solve_placement(p, RunOptions(time_limit=0.0), PlacementKnobs(repack_seconds=0, phase=said.append))
    assert said == ["lower bound and heuristics"]
    assert not any("repacking" in s for s in res.stats["skipped"])
    assert any(s.startswith("the MIP") for s in res.stats["skipped"])


def test_the_public_entry_is_the_harness_run():
    assert HARNESS.run is solve
    p = toy_problem([(500, 5)] * 3, ttft=1.0, mode="colocated", gpu_memory_gb=10.0)
    mip = solve(p, "mip", RunOptions(seed=1))
    assert mip.method == "mip" and mip.objective == solve_placement(p, RunOptions(seed=1)).objective == 3
    heuristic = solve(p, "best_fit", RunOptions())
    assert heuristic.solution == run_heuristic(p, "best_fit").solution
