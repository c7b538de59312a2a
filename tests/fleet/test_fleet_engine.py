"""The fleet engine against the batching family's simulator, the cost-model mappings, and a hand-computed
2-worker case (planner.fleet)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from planner.batching.costmodel import PUBLISHED
from planner.batching.problem import make_problem
from planner.batching.scheduler import PRESETS, simulate
from planner.costmodels.models import AladdinCostModel
from planner.errors import PlannerError
from planner.fleet import FleetRequests, LinearBatchCost, WorkerSpec, simulate_fleet


def _instances(seed: int, count: int, online: bool):
    """Small random instances: n ≤ 10 requests, tight to loose KV limits (evictions happen), random C, R_max."""
    rng = np.random.default_rng(seed)
    for _ in range(count):
        n = int(rng.integers(1, 11))
        I = rng.integers(1, 80, n)
        O = rng.integers(1, 30, n)
        arrivals = np.round(rng.uniform(0, 0.3, n), 3) if online else np.zeros(n)
        need = I + O - 1
        M = int(rng.integers(need.max(), 2 * need.max() + 2))
        C = int(rng.integers(max(int(I.max()), 8), 250))
        R = int(rng.integers(1, n + 2))
        yield I, O, arrivals, C, M, R


@pytest.mark.parametrize("online", [False, True], ids=["all-at-0", "arrivals"])
def test_one_worker_reproduces_the_batching_simulator(online: bool) -> None:
    """Every preset, 16 random instances: same per-request first-token and finish times (1e-9 s), TTFT,
    E2E, batch count and evictions as planner.batching.scheduler.simulate."""
    evicting = 0
    compared = 0
    for I, O, arrivals, C, M, R in _instances(11 + online, 16, online):
        for name in PRESETS:
            problem = make_problem(I, O, arrivals=arrivals, C=C, M=M, R_max=R, cost=PUBLISHED["70b"])
            ref = simulate(problem, name)
            res = simulate_fleet(FleetRequests(arrivals, I, O), WorkerSpec.from_batching(problem, name))
            pr = ref.schedule.per_request
            np.testing.assert_allclose(res.finish_s, pr["finish"], rtol=0, atol=1e-9, err_msg=name)
            np.testing.assert_allclose(res.ttft_s, pr["ttft"], rtol=0, atol=1e-9, err_msg=name)
            np.testing.assert_allclose(res.e2e_s, pr["e2e"], rtol=0, atol=1e-9, err_msg=name)
            np.testing.assert_allclose(res.tpot_s, pr["tpot"], rtol=0, atol=1e-9, err_msg=name)
            assert int(res.iterations.sum()) == ref.schedule.metrics["batches"], name
            assert np.array_equal(res.preemptions, pr["evictions"]), name
            assert math.isclose(float(res.busy_s.sum()), ref.schedule.metrics["busy_seconds"], rel_tol=1e-12,
                                abs_tol=1e-9)
            evicting += int(pr["evictions"].sum() > 0)
            compared += 1
    assert compared == 16 * len(PRESETS)
    assert evicting > 10  # the instances exercise the eviction paths, not only the easy ones


def test_infermax_mapping_matches_batch_seconds() -> None:
    rng = np.random.default_rng(3)
    for model in PUBLISHED.values():
        lin = LinearBatchCost.from_infermax(model)
        for _ in range(200):
            chunks = rng.integers(1, 2000, rng.integers(0, 4))
            n_d = int(rng.integers(0 if chunks.size else 1, 60))
            kv = float(rng.integers(0, 100_000)) if n_d else 0.0
            ref = model.batch_seconds(int(chunks.sum()) + n_d, float((chunks.astype(float) ** 2).sum()), chunks.size,
                                      kv, n_d)
            got = lin.batch_seconds(float(chunks.sum()), float((chunks.astype(float) ** 2).sum()), chunks.size, kv, n_d)
            assert math.isclose(got, ref, rel_tol=1e-12), (chunks, n_d, kv)
    assert LinearBatchCost.from_infermax(PUBLISHED["7b"]).batch_seconds(0, 0, 0, 0, 0) == 0.0


def test_aladdin_mapping_is_eq2_and_eq3_and_their_sum_for_hybrid_batches() -> None:
    cost = AladdinCostModel(model="m", gpu="g", tensor_parallel=2, prefill_s_per_token=1.3e-4, prefill_base_s=0.02,
                            decode_s_per_request=3e-4, decode_s_per_context_token=6e-8, decode_base_s=0.037,
                            kv_bytes_per_token=327680.0)
    lin = LinearBatchCost.from_aladdin(cost)
    assert math.isclose(lin.batch_seconds(1500, 1500.0**2, 1, 0, 0), cost.prefill_time(1500), rel_tol=1e-12)
    assert math.isclose(lin.batch_seconds(0, 0, 0, 40_000, 25), cost.decode_time(25, 40_000), rel_tol=1e-12)
    assert math.isclose(lin.batch_seconds(512, 512.0**2, 1, 40_000, 25),
                        cost.prefill_time(512) + cost.decode_time(25, 40_000), rel_tol=1e-12)


def test_aladdin_worker_kv_limit_is_the_placement_capacity() -> None:
    from planner.catalog import find_gpu, find_model
    from planner.core.types import WorkerConfig
    from planner.costmodels.files import find_cost_model

    llm, gpu = find_model("Llama-2-70B"), find_gpu("H100-80GB-SXM")
    cost = find_cost_model("aladdin", llm.name, gpu.name, 2)
    worker = WorkerConfig(gpu=gpu, tensor_parallel=2)
    spec = WorkerSpec.from_aladdin(llm, worker, cost, kv_headroom=0.9)
    assert spec.M == math.floor(0.9 * worker.kv_capacity_bytes(llm) / cost.kv_bytes_per_token)
    assert spec.gpus == 2 and spec.cost.pb == cost.prefill_base_s and spec.cost.dk == cost.decode_s_per_context_token


def test_hand_computed_two_workers_four_requests_round_robin() -> None:
    """vllm (prefill priority, no hybrid batches, no chunking), C = P = 100, M = 1000.
    Batch time: prefill part 1 + 0.1·Σc, decode part 0.5 (no other term).

    Round robin: r0 → w0, r1 → w1, r2 → w0, r3 → w1.
    w0: t=0   prefill r0 (10 tok): 1 + 1.0 = 2.0 → t=2;  r0's first token at 2.
        (r2 arrived at 1, joined w0's queue while the batch ran)
        t=2   prefill r2 (10 tok): 2.0 → t=4; r2 (O=1) finishes at 4.   TTFT 3, e2e 3, queueing 1
        t=4   decode r0: 0.5 → 4.5;  t=4.5 decode r0: 0.5 → 5.0, r0 (O=3) done.  TTFT 2, e2e 5, TPOT (5−2)/2 = 1.5
        busy 2 + 2 + 0.5 + 0.5 = 5.0 s, 4 iterations
    w1: t=0   prefill r1 (20 tok): 1 + 2.0 = 3.0 → t=3; r1's first token at 3.
        (r3 arrived at 2.5 while the batch ran)
        t=3   prefill r3 (10 tok): 2.0 → t=5; r3's first token at 5.
        t=5   decode r1 and r3: 0.5 → 5.5; both (O=2) done.
              r1: TTFT 3, e2e 5.5, TPOT 2.5;  r3: TTFT 2.5, e2e 3, TPOT 0.5, queueing 0.5
        busy 3 + 2 + 0.5 = 5.5 s, 3 iterations
    makespan 5.5 s; utilisation 5/5.5 and 1.
    """
    cost = LinearBatchCost(pb=1.0, pt=0.1, db=0.5)
    spec = WorkerSpec(cost=cost, M=1000, scheduler="vllm", C=100, P=100)
    reqs = FleetRequests(arrival_s=[0.0, 0.0, 1.0, 2.5], input_tokens=[10, 20, 10, 10], output_tokens=[3, 2, 1, 2])
    res = simulate_fleet(reqs, spec, n_workers=2, router="round_robin")
    assert res.worker.tolist() == [0, 1, 0, 1]
    np.testing.assert_allclose(res.first_token_s, [2.0, 3.0, 4.0, 5.0], atol=1e-12)
    np.testing.assert_allclose(res.finish_s, [5.0, 5.5, 4.0, 5.5], atol=1e-12)
    np.testing.assert_allclose(res.ttft_s, [2.0, 3.0, 3.0, 2.5], atol=1e-12)
    np.testing.assert_allclose(res.e2e_s, [5.0, 5.5, 3.0, 3.0], atol=1e-12)
    np.testing.assert_allclose(res.tpot_s, [1.5, 2.5, np.nan, 0.5], atol=1e-12)
    np.testing.assert_allclose(res.queueing_s, [0.0, 0.0, 1.0, 0.5], atol=1e-12)
    np.testing.assert_allclose(res.busy_s, [5.0, 5.5], atol=1e-12)
    assert res.iterations.tolist() == [4, 3]
    assert res.makespan_s == pytest.approx(5.5)
    np.testing.assert_allclose(res.utilisation, [5.0 / 5.5, 1.0])
    s = res.summary(ttft_s=2.9, tpot_s=2.0)
    # SLO met: r0 (2 ≤ 2.9, 1.5 ≤ 2), r3 (2.5, 0.5); r1 misses TTFT (3), r2 misses TTFT (3)
    assert s["slo_attainment"] == pytest.approx(0.5)
    assert res.meets_attainment(0.5, ttft_s=2.9, tpot_s=2.0) and not res.meets_attainment(0.75, ttft_s=2.9, tpot_s=2.0)
    # P50 TTFT = median(2, 3, 3, 2.5) = 2.75; P50 TPOT over O > 1 = median(1.5, 2.5, 0.5) = 1.5
    assert s["p50_ttft_s"] == pytest.approx(2.75) and s["p50_tpot_s"] == pytest.approx(1.5)
    assert res.meets(ttft_s=2.75, tpot_s=1.5, percentile=50) and not res.meets(ttft_s=2.7, tpot_s=1.5, percentile=50)


def test_same_input_gives_identical_arrays() -> None:
    rng = np.random.default_rng(0)
    n = 400
    reqs = FleetRequests(np.sort(rng.uniform(0, 20, n)), rng.integers(1, 600, n), rng.integers(1, 200, n))
    spec = WorkerSpec(cost=LinearBatchCost.from_infermax(PUBLISHED["7b"]), M=6000, scheduler="sarathi", C=1024,
                      R_max=64)
    for router in ("round_robin", "jsq", "least_kv", "aladdin"):
        a = simulate_fleet(reqs, spec, n_workers=3, router=router, ttft_s=1.0, tpot_s=0.05)
        b = simulate_fleet(reqs, spec, n_workers=3, router=router, ttft_s=1.0, tpot_s=0.05)
        for name in ("worker", "first_token_s", "first_scheduled_s", "finish_s", "preemptions", "busy_s", "iterations"):
            assert np.array_equal(getattr(a, name), getattr(b, name), equal_nan=True), (router, name)
        assert np.isfinite(a.finish_s).all()


def test_unservable_request_is_one_clear_error() -> None:
    spec = WorkerSpec(cost=LinearBatchCost(db=0.01, pb=0.01), M=50, scheduler="vllm", C=100)
    with pytest.raises(PlannerError, match="needs 59 KV tokens"):
        simulate_fleet(FleetRequests([0.0], [40], [20]), spec, n_workers=2)
    with pytest.raises(PlannerError, match="prefill budget"):
        simulate_fleet(FleetRequests([0.0], [120], [1]), WorkerSpec(cost=spec.cost, M=500, scheduler="vllm", C=100))
    with pytest.raises(PlannerError, match="unknown router"):
        simulate_fleet(FleetRequests([0.0], [4], [2]), spec, router="random")
    with pytest.raises(PlannerError, match="at least 1 worker"):
        simulate_fleet(FleetRequests([0.0], [4], [2]), spec, n_workers=0)
    with pytest.raises(PlannerError, match="unknown scheduler"):
        simulate_fleet(FleetRequests([0.0], [4], [2]), WorkerSpec(cost=spec.cost, M=50, scheduler="fifo"))
    with pytest.raises(PlannerError, match="at least 1 token"):
        FleetRequests([0.0, 1.0], [4, 0], [2, 2])


def test_fused_decode_stretches_are_bit_identical_to_batch_by_batch() -> None:
    """`fuse_decodes` (pure-decode stretches in one pass) changes nothing: every array equal, bit for bit,
    over presets with and without eviction, every router, 1–4 workers."""
    rng = np.random.default_rng(2)
    fused_some = False
    for trial in range(12):
        n = int(rng.integers(5, 120))
        reqs = FleetRequests(np.sort(rng.uniform(0, rng.uniform(0.1, 20), n)), rng.integers(1, 400, n),
                             rng.integers(1, 150, n))
        for scheduler in ("vllm", "sarathi", "sarathi-ef", "vllm-hy"):
            spec = WorkerSpec(cost=LinearBatchCost.from_infermax(PUBLISHED["7b"]), M=int(rng.integers(600, 12_000)),
                              scheduler=scheduler, C=int(rng.integers(450, 3000)), R_max=int(rng.integers(1, 60)))
            router = ("round_robin", "jsq", "least_kv", "aladdin")[trial % 4]
            N = int(rng.integers(1, 5))
            a = simulate_fleet(reqs, spec, n_workers=N, router=router, ttft_s=1.0, tpot_s=0.05)
            b = simulate_fleet(reqs, spec, n_workers=N, router=router, ttft_s=1.0, tpot_s=0.05, fuse_decodes=False)
            for name in ("worker", "first_token_s", "first_scheduled_s", "finish_s", "preemptions", "busy_s",
                         "iterations"):
                assert np.array_equal(getattr(a, name), getattr(b, name), equal_nan=True), (trial, scheduler, name)
            fused_some |= int(a.iterations.sum()) > 2 * n
    assert fused_some
