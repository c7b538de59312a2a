"""Batching soundness: the issue's counterexamples, the objective-agreement rule, the TTFT first-token
normal form and completion, and repeatable time-limited solves (no wall-clock assertions)."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from planner.batching import effort
from planner.batching.bruteforce import brute_force
from planner.batching.costmodel import PUBLISHED
from planner.batching.problem import make_problem
from planner.batching.pipeline import heuristic_results, solve_batching
from planner.batching.ttft import complete_schedule, first_token_problem, prefix_batch_bound, ttft_prefix
from planner.batching.validator import validate_schedule
from planner.core.agreement import objective_mismatch, reconcile_status
from planner.core.work import WorkClock
from planner.solver import SolveStatus

#: the module itself (the package attribute ``planner.batching.pipeline`` is the public entry function)
from planner.batching import pipeline as solve_module

P70 = PUBLISHED["70b"]


@pytest.mark.parametrize("warm", [True, False])
def test_ttft_optimum_needs_more_batches_than_the_latency_incumbent(warm):
    # I = [3, 2], O = [2, 4], C = 6, P = 3, M = 6, 70B: the optimum prefills r1 (2 tokens), then r0 (3)
    # while r1 is evicted: 0.0450923893 s.  A batch count derived from the presets' latency (5) holds only
    # a 0.0484281671 s schedule; the first-token model's count comes from the TTFT itself.
    p = make_problem([3, 2], [2, 4], C=6, P=3, M=6, cost=P70)
    best = brute_force(p, "ttft")
    assert best == pytest.approx(0.0450923893, rel=1e-9)
    res = solve_batching(p, objective="ttft", time_limit=None, warm_start=warm, stop_at_bound=False)
    assert res.status == SolveStatus.OPTIMAL and res.validation.feasible
    assert res.objective == pytest.approx(best, rel=1e-9)
    assert res.stats["mip_objective"] == pytest.approx(res.objective, rel=1e-9)
    assert res.bound <= best * (1 + 1e-9)
    assert res.stats["first_token_model"] and res.stats["J"] >= prefix_batch_bound(p, res.objective)


def test_ttft_schedule_never_runs_a_finished_request():
    # I = [1, 2, 1], O = [1, 3, 3], 70B: r0 finishes in its first batch; no later batch may run it
    p = make_problem([1, 2, 1], [1, 3, 3], M=4, cost=P70)
    for warm in (True, False):
        res = solve_batching(p, objective="ttft", time_limit=None, warm_start=warm, stop_at_bound=False)
        assert res.validation.feasible, res.validation.summary()
        first = next(j for j, b in enumerate(res.solution.batches()) if 0 in b)
        assert all(0 not in b for b in res.solution.batches()[first + 1:])
        assert res.objective == pytest.approx(brute_force(p, "ttft"), rel=1e-9)


def test_bigm_model_forbids_work_after_the_last_token():
    # The full big-M model (TTFT with a latency goal) on the same instance: the finished_no_tokens rows
    # exist and its schedule replays (no "runs after finishing").
    from planner.batching.formulation import build_model

    p = make_problem([1, 2, 1], [1, 3, 3], M=4, cost=P70)
    bm = build_model(p, 8, "ttft")
    assert "finished_no_tokens" in {b.name for b in bm.model.row_blocks}
    res = solve_batching(p, objective="ttft", time_limit=None, goal_scheduler="vllm", goal_factor=1.0,
                         stop_at_bound=False)
    assert res.validation.feasible, res.validation.summary()
    assert res.stats["mip_objective"] == pytest.approx(res.validation.objective, rel=1e-6)


def test_objective_mismatch_names_both_values_and_demotes_optimal():
    assert objective_mismatch(1.0, 1.0 + 1e-9) == ""
    text = objective_mismatch(0.013696, 0.013781)
    assert "0.013696" in text and "0.013781" in text
    status, why = reconcile_status(SolveStatus.OPTIMAL, "", text)
    assert status == SolveStatus.FEASIBLE and "not reported optimal" in why and "0.013781" in why
    assert reconcile_status(SolveStatus.OPTIMAL, "", "") == (SolveStatus.OPTIMAL, "")
    assert objective_mismatch(None, 1.0) != ""


def _lying_solver(monkeypatch, factor: float, times: int | None = None):
    """Make `solve` report ``factor`` × the true objective (and bound) on its first ``times`` MIP calls."""
    real = solve_module.solve
    calls = {"n": 0}

    def fake(model, solver="highs", options=None):
        out = real(model, solver, options)
        calls["n"] += 1
        if out.objective is not None and (times is None or calls["n"] <= times):
            out = replace(out, objective=out.objective * factor, bound=out.bound * factor)
        return out

    monkeypatch.setattr(solve_module, "solve", fake)
    return calls


def test_solver_objective_unlike_its_point_is_solved_again_without_the_warm_start(monkeypatch):
    # the first (warm-started) solve reports an objective that is not its point's value; the second,
    # without the warm start, is consistent and proves the optimum
    p = make_problem([1, 1, 1], [1, 3, 3], M=5)
    calls = _lying_solver(monkeypatch, 0.99, times=1)
    res = solve_batching(p, time_limit=None, stop_at_bound=False, formulation="paths")
    assert calls["n"] == 2 and res.stats["resolved_without_warm_start"]
    assert res.status == SolveStatus.OPTIMAL and res.objective == pytest.approx(brute_force(p), rel=1e-9)


def test_an_objective_unlike_the_replay_is_never_reported_optimal(monkeypatch):
    p = make_problem([1, 1, 1], [1, 3, 3], M=5)
    _lying_solver(monkeypatch, 0.99)  # every solve lies: nothing consistent to fall back on
    res = solve_batching(p, time_limit=None, stop_at_bound=False, formulation="paths")
    assert res.status == SolveStatus.FEASIBLE
    assert "solver-reported objective" in res.message and "not reported optimal" in res.message
    assert res.objective == pytest.approx(res.validation.objective)
    assert res.bound <= res.objective


@pytest.mark.parametrize("seed", range(6))
def test_first_token_normal_form_keeps_first_tokens_and_completes(seed):
    # every preset schedule: its normal-form prefix is a schedule of the first-token instance, and the
    # completed schedule is valid with no later first token (ttft module docstring)
    rng = np.random.default_rng(seed)
    n = 5
    I, O = rng.integers(1, 30, n), rng.integers(1, 30, n)
    M = int(max((I + O - 1).max(), 0.5 * (I + O - 1).sum()))
    p = make_problem(I, O, M=M, C=int(rng.integers(20, 60)), R_max=int(rng.integers(2, n + 1)))
    first = first_token_problem(p)
    for name, result in heuristic_results(p, "ttft").items():
        prefix = ttft_prefix(p, result.solution)
        assert validate_schedule(first, ttft_prefix(first, result.solution), "ttft").feasible, name
        whole = complete_schedule(p, prefix)
        report = validate_schedule(p, whole, "ttft")
        assert report.feasible, (name, report.summary())
        assert report.objective <= result.objective * (1 + 1e-12), name
        assert prefix.num_batches <= prefix_batch_bound(p, report.objective), name


def test_heuristics_stop_on_nominal_work_not_on_the_wall_clock():
    # a clock whose wall-clock guard is off: which presets run depends only on their nominal costs
    p = make_problem([14, 11, 9, 5], [5, 1, 2, 1], M=26)
    runs = []
    for _ in range(2):
        clock = WorkClock(0.06, guard_share=math.inf)
        skipped: list[str] = []
        out = heuristic_results(p, clock=clock, skipped=skipped)
        runs.append((list(out), skipped, round(clock.spent, 12)))
    assert runs[0] == runs[1]
    assert runs[0][1] and runs[0][0]  # some presets ran, some were skipped
    assert runs[0][2] >= effort.PRESET_FIXED * len(runs[0][0])


def test_a_skipped_mip_gives_the_same_plan_with_a_bound(monkeypatch):
    # A MIP too large for the time left is skipped on its nominal cost (here: any MIP), deterministically:
    # two runs give the same plan, with the combinatorial bound, and say so.
    monkeypatch.setattr(effort, "ROOT_PER_NONZERO", 1e3)
    p = make_problem([14, 11, 9, 5], [5, 1, 2, 1], M=26)
    results = [solve_batching(p, time_limit=60, seed=3, stop_at_bound=False) for _ in range(2)]
    for res in results:
        assert any(s.startswith("the MIP") for s in res.stats["skipped"])
        assert res.validation.feasible and res.bound <= res.objective * (1 + 1e-12)
        assert res.status in (SolveStatus.OPTIMAL, SolveStatus.FEASIBLE)
        assert "time limit: skipped" in res.message
    first, second = (r.solution for r in results)
    assert first.batches() == second.batches() and first.evictions() == second.evictions()
    assert results[0].stats["nominal_seconds"] == results[1].stats["nominal_seconds"]
