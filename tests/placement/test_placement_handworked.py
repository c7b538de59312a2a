"""Tiny placement instances whose optimum is worked out by hand in the comments.

Toy worker (see conftest): KV capacity = 1 GPU × mem − 1e9 B of weights, at 1e6 B per
token; cost model k1 = 1 ms/token, c1 = 0.1 s, k2 = 10 ms/request, k3 = 0, c2 = 0.05 s
unless a test overrides it.
"""

from __future__ import annotations

import pytest

from support import toy_cost, toy_problem
from planner.placement.bounds import lower_bound
from planner.placement.heuristics import HEURISTICS, best_fit, first_fit_decreasing
from planner.placement.problem import OngoingState
from planner.core.contract import RunOptions
from planner.placement.pipeline import PlacementKnobs, run_heuristic, solve_placement
from planner.placement.validator import validate_placement
from planner.solver import SolveStatus


def _optimum(problem, solver="highs"):
    res = solve_placement(problem, RunOptions(solver=solver))
    assert res.status == SolveStatus.OPTIMAL, res.message
    assert res.validation is not None and res.validation.feasible, res.validation.summary()
    assert res.objective == res.validation.objective  # MIP objective == validator's
    return res


@pytest.mark.parametrize("memory_gb, expected", [(1.128, 1), (1.127, 2)])
def test_kv_is_checked_at_the_true_peak_not_at_start_or_sum_of_peaks(memory_gb, expected):
    # A: I=10, ô=100; B: I=100, ô=10.  KV capacity = (memory − 1 GB)/1 MB per token = 128 or 127 tokens.
    # Footprints at iteration τ: A holds 10+τ−1 (τ ≤ 100), B holds 100+τ−1 (τ ≤ 10).
    #   τ=1: 10+100 = 110;  τ=10: 19+109 = 128 (peak, B's last iteration);  τ=11..100: A alone ≤ 109.
    # Sum of individual peaks would be 109+109 = 218 (too pessimistic), first iteration 110 (too optimistic).
    # So one worker exactly when capacity ≥ 128.
    p = toy_problem([(10, 100), (100, 10)], gpu_memory_gb=memory_gb)
    assert p.arrays.kv_capacity == pytest.approx(128.0 if expected == 1 else 127.0)
    res = _optimum(p)
    assert res.objective == expected
    assert best_fit(p).workers_used == expected


@pytest.mark.parametrize(
    "strictness, count, expected",
    [
        # k3 = 1e-4 s/token, k2 = 0.01 s, c2 = 0.05 s, ATGT 0.2 s → per-worker budget Σ(k3·ℓ + k2) ≤ 0.15 s.
        # I = 400, ô = 200:  ℓ(λ) = 400 + λ·200.
        (0.5, 3, 2),  # ℓ = 500 → 0.06 s each; two fit (0.12), three do not (0.18) → ⌈3/2⌉ = 2
        (0.5, 5, 3),  # ⌈5/2⌉ = 3
        (1.0, 5, 3),  # ℓ = 600 → 0.07 s each; two fit (0.14) → 3
        (0.0, 5, 2),  # ℓ = 400 → 0.05 s each; three fit exactly (0.15 = budget) → 3 + 2 → 2
    ],
)
def test_atgt_knapsack_with_strictness_knob(strictness, count, expected):
    cost = toy_cost(decode_s_per_context_token=1e-4)
    p = toy_problem([(400, 200)] * count, atgt=0.2, strictness=strictness, cost=cost, gpu_memory_gb=10.0)
    res = _optimum(p)
    assert res.objective == expected
    lb = lower_bound(p.arrays).value
    assert lb <= expected
    if (strictness, count) == (0.5, 5):
        # Five items of 0.06/0.15 = 0.4 of a worker: volume exactly 2.0 and none above half, so
        # every bound says 2 while only two fit per worker: optimum 3.  The MIP closes that gap.
        assert lb == 2


def test_ttft_prefill_batch_pairs_large_with_small_prompts():
    # Colocated: prefill batch k1·ΣI + c1 ≤ TTFT 1.0 s  ⇔  ΣI ≤ 900 tokens per worker.
    # Prompts 500, 400, 300, 200: total 1400 > 900, so ≥ 2 workers; {500,400} + {300,200} fits → 2.
    p = toy_problem([(500, 5), (400, 5), (300, 5), (200, 5)], ttft=1.0, mode="colocated", gpu_memory_gb=10.0)
    assert _optimum(p).objective == 2
    # Three prompts of 500: any two sum to 1000 > 900, so each needs its own worker → 3.
    # The volume bound says only ⌈1500/900⌉ = 2; Martello–Toth L2 (all items > 450) proves 3.
    q = toy_problem([(500, 5)] * 3, ttft=1.0, mode="colocated", gpu_memory_gb=10.0)
    assert _optimum(q).objective == 3
    lb = lower_bound(q.arrays)
    assert lb.value == 3 and "L2" in lb.source


@pytest.mark.parametrize("prompt, expected", [(300, 1), (500, 2)])
def test_new_prefill_may_not_break_ongoing_atgt(prompt, expected):
    # Ongoing request on worker 0: g = 10 tokens in τ = 9.5 s with ATGT SLO 1.0 s/token
    # → slack s = 1.0·10 − 9.5 = 0.5 s.  A new prompt of I tokens stalls it for 0.1 + 0.001·I s:
    # I = 300 → 0.4 s ≤ 0.5 (shares worker 0: 1 worker); I = 500 → 0.6 s > 0.5 (needs a new worker: 2).
    p = toy_problem(
        [(100, 50), (prompt, 5)],
        mode="colocated",
        ttft=10.0,
        gpu_memory_gb=10.0,
        ongoing={"r0": OngoingState(worker=0, generated_tokens=10, decode_s=9.5)},
    )
    res = _optimum(p)
    assert res.objective == expected
    assert res.solution.worker_of()["r0"] == 0  # no migration


def test_slo_classes_tight_class_limits_its_whole_worker():
    # Classes: tight ATGT 0.08 s, loose 0.2 s; k2 = 0.01, c2 = 0.05, k3 = 0.
    # A worker holding a tight request runs ≤ (0.08 − 0.05)/0.01 = 3 requests; loose-only ≤ 15.
    # 2 tight + 10 loose: the volume bound at the loose limit says ⌈12·0.01/0.15⌉ = 1, but one worker
    # would hold 12 > 3 requests with a tight one among them.  {t, t, l} + {9 l} → optimum 2.
    from planner.core.types import SLOClass

    slos = {"tight": SLOClass(ttft_s=10, atgt_s=0.08), "loose": SLOClass(ttft_s=10, atgt_s=0.2)}
    classes = ["tight", "tight"] + ["loose"] * 10
    p = toy_problem([(10, 5)] * 12, slos=slos, classes=classes, gpu_memory_gb=10.0)
    assert lower_bound(p.arrays).value == 1
    res = _optimum(p)
    assert res.objective == 2
    # and 4 tight requests alone need ⌈4/3⌉ = 2 workers
    q = toy_problem([(10, 5)] * 4, slos=slos, classes=["tight"] * 4, gpu_memory_gb=10.0)
    assert _optimum(q).objective == 2


def test_request_that_fits_nowhere_is_named():
    # KV capacity 1000 tokens; request r1 needs 900 + 200 − 1 = 1099 at its last iteration.
    p = toy_problem([(10, 10), (900, 200)])
    res = solve_placement(p)
    assert res.status == SolveStatus.INFEASIBLE
    assert "request r1" in res.message and "kv_capacity" in res.message
    h = run_heuristic(p, "best_fit")
    assert h.status == SolveStatus.INFEASIBLE and "request r1" in h.message


def test_worker_cap_below_the_bound_is_infeasible_with_the_bound_named():
    # Three prompts of 500 need 3 workers (see above); with max_workers = 2 there is no plan.
    p = toy_problem([(500, 5)] * 3, ttft=1.0, mode="colocated", gpu_memory_gb=10.0, max_workers=2)
    res = solve_placement(p)
    assert res.status == SolveStatus.INFEASIBLE
    assert "at least 3 workers" in res.message


def test_worker_cap_infeasible_in_the_mip_names_the_conflicting_family():
    # Decode-only, KV capacity 700 tokens (1.7 GB − 1 GB at 1 MB/token). Requests (I, ô):
    # r0 = (600, 10), r1 = (400, 290), r2 = (100, 590); alone their KV peaks are 609, 689, 689.
    # Pairs at the shorter one's last iteration: r0+r1 at τ=10: 609+409 = 1018; r0+r2 at τ=10:
    # 609+109 = 718; r1+r2 at τ=290: 689+389 = 1078 — every pair exceeds 700: three workers needed.
    # Every bound says 2 (volume at τ=10: 1127/700 → 2; L2: only two items above 350 at any τ),
    # so with max_workers = 2 only the MIP can prove infeasibility, and the conflict is KV.
    p = toy_problem([(600, 10), (400, 290), (100, 590)], gpu_memory_gb=1.7, max_workers=2)
    assert lower_bound(p.arrays).value == 2
    res = solve_placement(p)
    assert res.status == SolveStatus.INFEASIBLE
    assert "kv_capacity" in res.message and "max_workers=2" in res.message
    assert solve_placement(p.model_copy(update={"options": p.options.model_copy(update={"max_workers": 3})})).objective == 3


def test_every_heuristic_is_validated_and_never_below_the_optimum():
    p = toy_problem([(500, 5), (400, 5), (300, 5), (200, 5), (100, 5)], ttft=1.0, mode="colocated", gpu_memory_gb=10.0)
    opt = _optimum(p).objective
    for name in HEURISTICS:
        r = run_heuristic(p, name)
        assert r.validation.feasible, (name, r.validation.summary())
        assert r.objective >= opt
        assert r.bound <= opt


def test_first_fit_decreasing_beats_arrival_order_best_fit_on_a_classic_case():
    # Prompts (arrival order) 200, 200, 500, 500, 400, 400 with ΣI ≤ 900 per worker.
    # Best-fit in arrival order: {200,200,500} {500,400} {400} → 3.  FFD: {500,400} {500,400} {200,200} → 3.
    # Optimum: 2200/900 → ≥ 3, so both are optimal here; the MIP agrees.
    p = toy_problem([(200, 5), (200, 5), (500, 5), (500, 5), (400, 5), (400, 5)], ttft=1.0, mode="colocated",
                    gpu_memory_gb=10.0)
    assert best_fit(p).workers_used == 3
    assert first_fit_decreasing(p).workers_used == 3
    assert _optimum(p).objective == 3


def test_validator_catches_a_bad_placement():
    # Both requests on one worker although capacity is 127 < 128 (first test): the validator must say KV.
    from planner.placement.solution import PlacementSolution

    p = toy_problem([(10, 100), (100, 10)], gpu_memory_gb=1.127)
    bad = PlacementSolution(("r0", "r1"), (0, 0), "hand")
    report = validate_placement(p, bad)
    assert not report.feasible
    assert report.violations[0].constraint == "kv_capacity"
    assert "iteration 10" in report.violations[0].where


def test_time_limit_returns_incumbent_and_bound():
    # 60 requests of 0.4 of a worker each (ATGT budget 0.15 s, 0.06 s per request at λ = ½): every
    # bound says ⌈60·0.4⌉ = 24, the optimum is 30 (two per worker).  With no time to search, the
    # solve must still return the heuristic plan (30) and a valid bound (24 ≤ bound ≤ 30).
    cost = toy_cost(decode_s_per_context_token=1e-4)
    p = toy_problem([(400, 200)] * 60, atgt=0.2, cost=cost, gpu_memory_gb=40.0)
    res = solve_placement(p, RunOptions(time_limit=0.0), PlacementKnobs(repack_seconds=0))
    assert res.status in (SolveStatus.FEASIBLE, SolveStatus.OPTIMAL)
    assert res.objective == 30 and res.validation.feasible
    assert 24 <= res.bound <= 30
    if res.status == SolveStatus.FEASIBLE:
        assert res.gap == pytest.approx((30 - res.bound) / 30)
    # with time, the MIP proves 30
    full = solve_placement(p)
    assert full.status == SolveStatus.OPTIMAL and full.objective == 30 and full.bound == 30


def test_kv_chain_levels_allocated_for_every_request_breakpoint():
    """Regression: a worker whose KV rows use the cumulative chain extends its breakpoints τ to every
    request's own breakpoint; the chain variables were sized before that extension, so the build
    failed with "kv_capacity: column index out of range" (found by the capacity sweep: Llama-2-70B,
    2×H100, 46 decode-only requests, best-fit = lower bound = 2 workers)."""
    from pathlib import Path

    from planner.catalog import find_gpu, find_model
    from planner.core.types import PlannedRequest, SLOClass, SLOSet, WorkerConfig
    from planner.costmodels.files import load_cost_model
    from planner.placement.problem import PlacementOptions, PlacementProblem

    lengths = [(3825, 135), (758, 143), (1340, 150), (1521, 175), (1324, 168), (3219, 211), (3263, 228), (996, 196),
               (1265, 222), (505, 47), (404, 54), (2694, 88), (2552, 95), (2419, 126), (390, 148), (740, 64),
               (1164, 130), (739, 121), (2812, 211), (1505, 199), (1048, 190), (433, 122), (262, 261), (2618, 277),
               (3407, 281), (2899, 296), (2404, 324), (130, 329), (3194, 350), (962, 338), (3244, 366), (1103, 351),
               (1009, 355), (1515, 372), (1603, 377), (2242, 390), (3381, 395), (1067, 373), (2062, 401),
               (2405, 405), (1286, 383), (101, 415), (3163, 413), (438, 301), (1764, 424), (24, 392)]
    repo = Path(__file__).resolve().parents[2]
    problem = PlacementProblem(
        name="kv-chain-regression", model=find_model("Llama-2-70B"),
        worker=WorkerConfig(gpu=find_gpu("H100-80GB-SXM"), tensor_parallel=2),
        cost=load_cost_model(repo / "models/aladdin/llama-2-70b__h100-80gb-sxm__tp2.yaml"),
        slos=SLOSet(classes={"default": SLOClass(ttft_s=1.6, atgt_s=0.075)}),
        requests=tuple(PlannedRequest(request_id=f"q{k}", arrival_s=0.0, input_tokens=i, output_tokens=o,
                               predicted_output_tokens=o) for k, (i, o) in enumerate(lengths)),
        options=PlacementOptions(mode="decode_only"),
    )
    result = solve_placement(problem, RunOptions(solver="highs"))
    assert result.status == SolveStatus.OPTIMAL
    assert result.validation.feasible and result.validation.objective == result.objective
    assert result.objective >= lower_bound(problem.arrays).value
