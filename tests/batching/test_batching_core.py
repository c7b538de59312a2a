"""Batching (InferMax) family: hand-worked schedules, brute force = MIP, validator agreement, §3.4."""

from __future__ import annotations

import numpy as np
import pytest

from planner.batching.bounds import latency_lower_bound
from planner.batching.bruteforce import brute_force_latency
from planner.batching.costmodel import PUBLISHED
from planner.batching.problem import make_problem
from planner.batching.scheduler import PRESETS, simulate
from planner.batching.pipeline import heuristic_results, run_scheduler, solve_batching
from planner.batching.validator import validate_schedule
from planner.solver import SolveStatus

CM = PUBLISHED["7b"]
S = CM.n_layers * 1e-3  # seconds per per-layer ms


def close(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))


def test_hand_worked_two_requests_one_hybrid_batch():
    # a: I=2, O=1; b: I=1, O=2; M large.  Optimal: batch 1 prefills both (3 tokens, Σc² = 4 + 1),
    # a finishes and b gets its first token; batch 2 decodes b, reading its 1 KV.
    #   T1 = a_o·3 + b_o + a_p·5 + b_p + 2·s_p,   T2 = a_o·1 + b_o + a_d·1 + b_d + s_d.
    # Any other schedule has ≥ 2 batches with at least these tokens (b needs 2 batches), so it is optimal.
    p = make_problem([2, 1], [1, 2], M=100)
    t1 = CM.a_o * 3 + CM.b_o + CM.a_p * 5 + CM.b_p + 2 * CM.s_p
    t2 = CM.a_o * 1 + CM.b_o + CM.a_d * 1 + CM.b_d + CM.s_d
    expected = (t1 + t2) * S
    res = solve_batching(p, time_limit=30)
    assert res.status == SolveStatus.OPTIMAL
    assert close(res.objective, expected)
    assert close(brute_force_latency(p), expected)
    assert res.solution.batches() == [{0: 2, 1: 1}, {1: 1}]


def test_hand_worked_eviction_is_optimal_when_kv_is_tight():
    # a, b: I=1, O=2 each (final KV 2 each), M=2.
    # Evicting: B1 prefill a,b (m=1+1=2); B2 decode a (m_a=2), evict b (Iin_b ← m_b+1 = 2, m_b=0);
    #           B3 refill b (2 tokens, Σc²=4) → b's 2nd token.
    #   cost = 5·a_o + 3·b_o + (1+1+4)·a_p + 2·b_p + 3·s_p + a_d·1 + b_d + s_d
    # Sequential (eviction-free): 4 batches (a prefill, a decode, b prefill, b decode):
    #   cost = 4·a_o + 4·b_o + 2·a_p + 2·b_p + 2·s_p + 2·(a_d + b_d + s_d)
    # evict − sequential = a_o − b_o + 4a_p + s_p − a_d − b_d − s_d < 0 with the 7B set (b_o dominates).
    p = make_problem([1, 1], [2, 2], M=2)
    evict = (5 * CM.a_o + 3 * CM.b_o + 6 * CM.a_p + 2 * CM.b_p + 3 * CM.s_p + CM.a_d + CM.b_d + CM.s_d) * S
    sequential = (4 * CM.a_o + 4 * CM.b_o + 2 * CM.a_p + 2 * CM.b_p + 2 * CM.s_p + 2 * (CM.a_d + CM.b_d + CM.s_d)) * S
    assert evict < sequential
    res = solve_batching(p, time_limit=30)
    assert res.status == SolveStatus.OPTIMAL
    assert close(res.objective, evict)
    assert close(brute_force_latency(p), evict)
    assert res.solution.metrics["evictions"] == 1
    assert close(run_scheduler(p, "vllm-ef").objective, sequential)


@pytest.mark.parametrize("formulation", ["paths", "bigm"])
@pytest.mark.parametrize("seed", [3, 7])
def test_brute_force_equals_mip_and_ordering(seed, formulation):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 4))
    inputs, outputs = rng.integers(1, 4, n), rng.integers(1, 4, n)
    M = int(max((inputs + outputs - 1).max(), (inputs + outputs - 1).sum() - 2))
    p = make_problem(inputs, outputs, M=M)
    # stop_at_bound=False: the MIP runs even when a heuristic schedule already meets the lower bound
    res = solve_batching(p, time_limit=30, formulation=formulation, stop_at_bound=False)
    assert res.status == SolveStatus.OPTIMAL and res.stats["formulation"] == formulation
    assert close(res.objective, brute_force_latency(p))
    # MIP schedule replays with the same cost; the MIP's own objective agrees
    assert res.validation.feasible and close(res.validation.objective, res.stats["mip_objective"])
    lb = latency_lower_bound(p)
    assert lb <= res.objective + 1e-12
    for name, h in heuristic_results(p).items():
        assert h.objective >= res.objective - 1e-12, name


def test_simulator_matches_validator_for_every_preset():
    rng = np.random.default_rng(0)
    for M in (100_000, 400):
        p = make_problem(rng.integers(1, 120, 40), rng.integers(1, 60, 40), M=M, R_max=16)
        for name in PRESETS:
            sim = simulate(p, name)
            report = validate_schedule(p, sim.schedule)
            assert report.feasible, (name, report.summary())
            assert close(report.objective, sim.total_latency), name
            assert report.details["evictions"] == sim.schedule.metrics["evictions"]
            if name.endswith("-ef"):
                assert sim.schedule.metrics["evictions"] == 0
            assert report.objective >= latency_lower_bound(p) - 1e-12
    assert any(simulate(p, n).schedule.metrics["evictions"] > 0 for n in ("vllm", "sarathi"))


def test_online_arrivals_simulator_and_mip_replay():
    p = make_problem([3, 2, 2], [2, 2, 1], arrivals=[0.0, 0.004, 0.02], M=8)
    for name in ("vllm", "sarathi-ef"):
        sim = simulate(p, name)
        rep = validate_schedule(p, sim.schedule)
        assert rep.feasible and close(rep.objective, sim.total_latency)
        assert sim.total_latency > 0.02  # the last request arrives at 20 ms
    res = solve_batching(p, time_limit=30, stop_at_bound=False)
    assert res.validation.feasible and res.stats["formulation"] == "bigm"  # online: the paths model does not apply
    assert close(res.validation.objective, res.stats["mip_objective"])
    assert res.objective <= min(r.objective for r in heuristic_results(p).values()) + 1e-12


def test_ttft_objective_and_goal_constraint():
    p = make_problem([3, 1, 2], [2, 3, 1], M=100)
    res = solve_batching(p, objective="ttft", time_limit=30)
    assert res.status == SolveStatus.OPTIMAL
    assert close(res.validation.objective, res.stats["mip_objective"])
    assert all(res.objective <= h.objective + 1e-12 for h in heuristic_results(p, "ttft").values())
    # every preset is already optimal here, so "≤ 0.95 × vllm-ef" is infeasible, and says which family
    tight = solve_batching(p, time_limit=30, goal_scheduler="vllm-ef", goal_factor=0.95)
    assert tight.status == SolveStatus.INFEASIBLE and "goal_latency" in tight.message
    # the eviction instance of the hand-worked test: evicting beats eviction-free by > 10 %
    q = make_problem([1, 1], [2, 2], M=2)
    vllm_ef = run_scheduler(q, "vllm-ef").objective
    goal = solve_batching(q, objective="ttft", time_limit=30, goal_scheduler="vllm-ef", goal_factor=0.9)
    assert goal.validation.feasible
    assert goal.solution.metrics["total_latency"] <= 0.9 * vllm_ef + 1e-12


def test_section_3_4_eviction_crossover():
    # §3.4: O = B = 4, M = max(2I, I+O−1): two prefills fit, only one request keeps its KV to the end.
    # With the published 7B set the evicting vLLM schedule beats its eviction-free variant up to I = 40
    # and loses from I = 48 on (FORMULATIONS.md §3.2 caveat: break-even near I ≈ 40, not 128).
    wins = {}
    for I in (4, 16, 40, 48, 128):
        p = make_problem([I] * 4, [4] * 4, M=max(2 * I, I + 3))
        evicting, free = run_scheduler(p, "vllm"), run_scheduler(p, "vllm-ef")
        assert evicting.solution.metrics["evictions"] > 0
        wins[I] = evicting.objective < free.objective
    assert wins == {4: True, 16: True, 40: True, 48: False, 128: False}
    # at small I the MIP's schedule (not proved optimal within the limit; it starts from the best
    # preset) evicts and beats the eviction-free schedule by > 10 %
    p = make_problem([2] * 4, [4] * 4, M=5)
    res = solve_batching(p, time_limit=5)
    assert res.validation.feasible and res.solution.metrics["evictions"] > 0
    assert res.objective <= run_scheduler(p, "vllm-ef").objective * (1 - 0.1)


def test_simulator_rank_policies_and_knobs():
    p = make_problem([50, 5, 20, 5], [5, 30, 5, 2], M=200)
    by_input = simulate(p, "vllm", rank="input", C=60)
    assert validate_schedule(p.with_limits(C=60), by_input.schedule).feasible
    # with C=60 the 50-token prompt cannot share a batch with others: shortest input first admits 5,5,20
    assert by_input.schedule.batches()[0] == {1: 5, 3: 5, 2: 20}
    assert simulate(p, "sarathi", P=8).schedule.tokens.max() <= 8
