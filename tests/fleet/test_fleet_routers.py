"""Routers on small hand cases, Little's law in a long run, mixed fleets and the CLI (planner.fleet)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from support import assert_one_line, run_cli

from planner.fleet import FleetRequests, LinearBatchCost, WorkerSpec, simulate_fleet

# prefill part 0.1 + 0.001·Σc, decode part 0.05 s: a 500-token prompt takes 0.6 s, a decode step 0.05 s
COST = LinearBatchCost(pb=0.1, pt=0.001, db=0.05)


def test_round_robin_jsq_and_least_kv_follow_their_rules() -> None:
    """r0 (t=0, I=500) → w0 under every router (all tie, lowest index).  r1 (t=1, I=10): w0 holds r0 (KV 500+),
    w1 nothing → w1 for jsq and least-KV; round robin → w1 too.  r2 (t=2, I=10): each worker holds one
    request → jsq ties → w0; least-KV → w1 (≈ 10 + 20 KV tokens against ≈ 500 + 28); round robin → w0."""
    spec = WorkerSpec(cost=COST, M=5000, scheduler="vllm", C=1000)
    reqs = FleetRequests([0.0, 1.0, 2.0], [500, 10, 10], [100, 100, 100])
    got = {r: simulate_fleet(reqs, spec, n_workers=2, router=r).worker.tolist()
           for r in ("round_robin", "jsq", "least_kv")}
    assert got == {"round_robin": [0, 1, 0], "jsq": [0, 1, 0], "least_kv": [0, 1, 1]}


def test_jsq_counts_queued_requests_and_least_kv_only_held_kv() -> None:
    """Four requests at t = 0: nothing has run when they are routed, so no KV is held anywhere and least-KV
    sends all of them to w0 (documented: queued requests reserve nothing yet); jsq alternates."""
    spec = WorkerSpec(cost=COST, M=5000, scheduler="vllm", C=1000)
    reqs = FleetRequests(np.zeros(4), [10] * 4, [5] * 4)
    assert simulate_fleet(reqs, spec, n_workers=2, router="jsq").worker.tolist() == [0, 1, 0, 1]
    assert simulate_fleet(reqs, spec, n_workers=2, router="least_kv").worker.tolist() == [0, 0, 0, 0]


def test_round_robin_skips_a_worker_too_small_for_the_request() -> None:
    small = WorkerSpec(cost=COST, M=100, scheduler="sarathi", label="small")
    big = WorkerSpec(cost=COST, M=10_000, scheduler="sarathi", label="big")
    reqs = FleetRequests([0.0, 0.1, 0.2, 0.3], [10, 500, 10, 10], [5, 5, 5, 5])
    res = simulate_fleet(reqs, [small, big], router="round_robin")
    # r0 → small; r1 (needs 504 KV) would be big's turn anyway; r2 → small; r3 → big
    assert res.worker.tolist() == [0, 1, 0, 1]
    res = simulate_fleet(FleetRequests([0.0, 0.1], [500, 10], [5, 5]), [small, big], router="round_robin")
    assert res.worker.tolist() == [1, 0]  # r0 skips small (too big for it); r1 takes the next turn
    assert res.worker_labels == ("small", "big")


def test_aladdin_router_best_fit_on_predicted_decode_load() -> None:
    """c2 = 0.05, each request's decode load k2 = 0.01 (k3 = 0), TPOT SLO 0.075: a worker takes at most two
    (0.05 + 0.02 = 0.07 ≤ 0.075; a third gives 0.08).  Most loaded first: r0 → w0 (ties), r1 → w0, r2 → w1
    (w0 full), r3 → w1, r4: nothing fits → least loaded (tie) → w0.  With three workers r4 → w2."""
    cost = LinearBatchCost(pb=0.1, pt=0.001, db=0.05, dn=0.01)
    spec = WorkerSpec(cost=cost, M=100_000, scheduler="sarathi")
    reqs = FleetRequests(np.arange(5) * 0.001, [10] * 5, [400] * 5)
    assert simulate_fleet(reqs, spec, n_workers=2, router="aladdin", tpot_s=0.075).worker.tolist() == [0, 0, 1, 1, 0]
    assert simulate_fleet(reqs, spec, n_workers=3, router="aladdin", tpot_s=0.075).worker.tolist() == [0, 0, 1, 1, 2]


def test_aladdin_router_kv_family() -> None:
    """I = 100, O = 50, M = 250.  When r1 arrives (t = 0.001), w0 has run r0's prefill batch (g = 1), so r0
    needs 101 + t KV at decode iteration t < 49; with r1 (100 + t) the peak at t = 48 is 149 + 148 = 297 > 250:
    r1 goes to w1 although w0 is the most loaded.  With M = 400 it fits on w0."""
    reqs = FleetRequests([0.0, 0.001], [100, 100], [50, 50])
    tight = WorkerSpec(cost=COST, M=250, scheduler="sarathi")
    loose = WorkerSpec(cost=COST, M=400, scheduler="sarathi")
    assert simulate_fleet(reqs, tight, n_workers=2, router="aladdin").worker.tolist() == [0, 1]
    assert simulate_fleet(reqs, loose, n_workers=2, router="aladdin").worker.tolist() == [0, 0]


def test_aladdin_router_uses_predicted_outputs() -> None:
    """The same KV case, but r0 is predicted to stop after 5 tokens: its predicted footprint is small and
    r1 is placed on w0 (the real outputs still run: r0 decodes 50 tokens there, with evictions if needed)."""
    reqs = FleetRequests([0.0, 0.001], [100, 100], [50, 50], predicted_output=[5, 50])
    tight = WorkerSpec(cost=COST, M=250, scheduler="sarathi")
    res = simulate_fleet(reqs, tight, n_workers=2, router="aladdin")
    assert res.worker.tolist() == [0, 0]
    assert np.isfinite(res.finish_s).all()


def test_littles_law_in_a_long_run() -> None:
    """Poisson arrivals (rate 20/s, 30,000 requests) on 4 workers at moderate load: the time-average number in
    the system (event sweep) equals throughput × mean e2e, and what arrivals see (PASTA) agrees within 2 %."""
    rng = np.random.default_rng(7)
    n = 30_000
    arrivals = np.cumsum(rng.exponential(1 / 20.0, n))
    reqs = FleetRequests(arrivals, rng.integers(50, 800, n), rng.integers(5, 120, n))
    spec = WorkerSpec(cost=LinearBatchCost(pb=0.01, pt=2e-5, db=0.01, dn=2e-4, dk=1e-8), M=40_000,
                      scheduler="sarathi", C=2048, R_max=128)
    res = simulate_fleet(reqs, spec, n_workers=4, router="jsq")
    L = res.mean_in_flight
    assert L > 5  # a loaded system, not an empty one
    assert L == pytest.approx(res.throughput_rps * float(res.e2e_s.mean()), rel=0.02)
    assert float(res.in_flight_at_arrivals.mean()) == pytest.approx(L, rel=0.02)
    assert 0.2 < res.utilisation.mean() < 1.0


def test_summary_percentiles_and_warmup() -> None:
    spec = WorkerSpec(cost=COST, M=5000, scheduler="sarathi")
    reqs = FleetRequests(np.arange(20) * 0.5, np.full(20, 100), np.full(20, 10))
    res = simulate_fleet(reqs, spec, n_workers=2, router="jsq", ttft_s=1.0, tpot_s=0.1)
    s = res.summary(warmup_s=5.0)
    late = res.arrival_s >= 5.0
    assert s["p90_ttft_s"] == pytest.approx(np.percentile(res.ttft_s[late], 90))
    assert s["slo_attainment"] == pytest.approx(res.slo_met()[late].mean())
    frame = res.to_frame()
    assert len(frame) == 20 and np.allclose(frame["e2e_s"], res.e2e_s)
    assert res.workers_frame()["requests"].sum() == 20


# ---- CLI ---------------------------------------------------------------------------------------------------

TRACE = "../shared/data/traces/azure_llm_inference_2023/AzureLLMInferenceTrace_conv.csv"


@pytest.mark.parametrize("args,needle", [
    (["--rate", "0"], "--rate must be a positive number"),
    (["--rate", "2", "--workers", "0"], "--workers must be between 1"),
    (["--rate", "2", "--router", "random"], "--router must be one of"),
    (["--rate", "2", "--method", "fifo"], "--method must be one of"),
    (["--rate", "2", "--gpu", "H100-80GB-SXM", "--tp", "3"], "no Aladdin cost model"),
    (["--rate", "2", "--model", "no-such-model"], "unknown model"),
    ([], "give exactly one of --trace or --rate"),
])
def test_cli_bad_input_is_one_line(monkeypatch, capsys, args, needle) -> None:
    code, _, err = run_cli(monkeypatch, capsys, "simulate", "fleet", *args)
    assert_one_line(code, err, needle)


def test_cli_trace_window_without_requests_is_one_line(monkeypatch, capsys, tmp_path) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,5000,10\n"
                     "2023-11-16 18:15:50.6805900,100,10\n")
    code, _, err = run_cli(monkeypatch, capsys, "simulate", "fleet", "--trace", str(trace), "--trace-duration", "2")
    assert_one_line(code, err, "no request of the trace", "within the first 2 s")


def test_cli_json_names_the_cost_model(monkeypatch, capsys) -> None:
    code, out, err = run_cli(monkeypatch, capsys, "simulate", "fleet", "--rate", "2", "--duration", "30",
                             "--workers", "2", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["cost_model_file"].endswith("llama-2-70b__h100-80gb-sxm__tp2.yaml")
    assert data["workers"] == 2 and data["gpus"] == 4 and data["requests"] > 20
    assert 0 <= data["slo_attainment"] <= 1 and isinstance(data["meets_slos"], bool)


def test_cli_lists_agree_with_the_package() -> None:
    from planner.cli import fleet as fleet_cli
    from planner.fleet import ROUTERS
    from planner.workloads.lengths import TRACE_FORMATS

    assert fleet_cli.ROUTERS == ROUTERS
    assert set(fleet_cli.TRACE_FORMATS) == set(TRACE_FORMATS) - {"sharegpt"}  # the formats with timestamps


def test_mixed_fleet_uses_each_workers_own_cost_model() -> None:
    """Two workers whose batch-time coefficients differ by a factor 2, round robin, two identical requests at the
    same instant: the one on the slow worker has exactly twice the TTFT, e2e and busy time."""
    fast = WorkerSpec(cost=LinearBatchCost(pb=0.1, pt=0.001, db=0.02, dn=0.001), M=5000, label="fast", gpus=1)
    slow = WorkerSpec(cost=LinearBatchCost(pb=0.2, pt=0.002, db=0.04, dn=0.002), M=5000, label="slow", gpus=2)
    res = simulate_fleet(FleetRequests([0.0, 0.0], [300, 300], [20, 20]), [fast, slow], router="round_robin")
    assert res.worker.tolist() == [0, 1]
    assert res.ttft_s[1] == pytest.approx(2 * res.ttft_s[0]) and res.e2e_s[1] == pytest.approx(2 * res.e2e_s[0])
    assert res.busy_s[1] == pytest.approx(2 * res.busy_s[0])
    assert res.num_gpus == 3 and res.workers_frame()["label"].tolist() == ["fast", "slow"]


def test_fewest_workers_meets_the_target_and_one_fewer_does_not() -> None:
    from planner.fleet import fewest_workers

    rng = np.random.default_rng(4)
    n = 3000
    reqs = FleetRequests(np.cumsum(rng.exponential(1 / 30.0, n)), rng.integers(50, 800, n), rng.integers(5, 120, n))
    spec = WorkerSpec(cost=LinearBatchCost(pb=0.01, pt=2e-5, db=0.01, dn=2e-4, dk=1e-8), M=40_000,
                      scheduler="sarathi", C=2048, R_max=128)
    found = fewest_workers(reqs, spec, ttft_s=0.5, tpot_s=0.02)
    n_best = found.workers
    assert n_best > 1 and found.tried[n_best] and found.result.meets(percentile=99)
    assert not simulate_fleet(reqs, spec, n_workers=n_best - 1, ttft_s=0.5, tpot_s=0.02).meets(percentile=99)
    loose = fewest_workers(reqs, spec, ttft_s=0.5, tpot_s=0.02, attainment=0.5)
    assert loose.workers <= n_best and loose.result.meets_attainment(0.5)


def test_aladdin_kv_check_equals_the_dense_footprint_of_workerload() -> None:
    """`_kv_fits` (maximum only at the points where a request leaves) against the dense per-iteration sum of
    `planner.placement.state.WorkerLoad`: max_{t < r_new} Σ_j (b_j + t)[t < r_j] + b_new + t ≤ M."""
    from planner.fleet._kernel import W_COLS, W_RC, W_RH, W_RT, W_WH, W_WT, _kv_fits

    rng = np.random.default_rng(9)
    for _ in range(300):
        k = int(rng.integers(0, 12))
        n = k + 1
        I0 = rng.integers(1, 200, n)
        gen = np.concatenate([rng.integers(0, 60, k), [0]])
        pred = np.maximum(gen + rng.integers(-5, 80, n), 1)
        nxt = np.full(n, -1, np.int64)
        W = np.zeros((1, W_COLS), np.int64)
        W[0, [W_RH, W_RT, W_WH, W_WT]] = -1
        for j in range(k):  # all held requests on the running list, in order
            if j:
                nxt[j - 1] = j
            else:
                W[0, W_RH] = j
            W[0, W_RT] = j
            W[0, W_RC] += 1
        r_new = int(max(pred[k], 1))
        r = np.maximum(pred[:k] - gen[:k], 1)
        t = np.arange(r_new)
        dense = sum(np.where(t < r[j], I0[j] + gen[j] + t, 0) for j in range(k)) + I0[k] + t
        limit = float(rng.integers(int(dense.max()) - 30, int(dense.max()) + 30))
        got = _kv_fits(W, 0, k, float(I0[k]), r_new, limit, I0.astype(np.int64), gen.astype(np.int64),
                       pred.astype(np.int64), nxt, np.empty(n, np.int64), np.empty(n))
        assert got == bool(dense.max() <= limit), (I0, gen, pred, limit)


@pytest.mark.parametrize("router", ["jsq", "round_robin", "least_kv", "aladdin"])
def test_groups_confine_each_request_to_its_workers_and_do_not_interact(router) -> None:
    """Requests of group g only reach workers of group g, so the fleet is independent fleets side by side:
    each group's requests on its workers alone give exactly the same times (and workers, renumbered)."""
    rng = np.random.default_rng(4)
    n = 300
    reqs = FleetRequests(np.sort(rng.uniform(0, 60, n)), rng.integers(10, 800, n), rng.integers(2, 120, n))
    fast = WorkerSpec(cost=COST, M=6000, scheduler="vllm", C=2000, label="fast")
    slow = WorkerSpec(cost=LinearBatchCost(pb=0.2, pt=0.002, db=0.08), M=4000, scheduler="sarathi", label="slow")
    fleet = [fast, slow, fast, slow, slow]
    wgroup = np.array([0, 1, 0, 2, 2])
    rgroup = rng.integers(0, 3, n)
    res = simulate_fleet(reqs, fleet, router=router, tpot_s=0.2, request_groups=rgroup, worker_groups=wgroup)
    assert (wgroup[res.worker] == rgroup).all()
    for g in range(3):
        mine = rgroup == g
        members = np.flatnonzero(wgroup == g)
        sub = FleetRequests(reqs.arrival_s[mine], reqs.input_tokens[mine], reqs.output_tokens[mine])
        alone = simulate_fleet(sub, [fleet[w] for w in members], router=router, tpot_s=0.2)
        assert np.array_equal(members[alone.worker], res.worker[mine])
        assert np.array_equal(alone.first_token_s, res.first_token_s[mine])
        assert np.array_equal(alone.finish_s, res.finish_s[mine])


def test_round_robin_takes_turns_within_each_group_and_ungrouped_requests_go_anywhere() -> None:
    spec = WorkerSpec(cost=COST, M=5000, scheduler="vllm", C=1000)
    reqs = FleetRequests(np.arange(8) * 0.01, [10] * 8, [5] * 8)
    res = simulate_fleet(reqs, spec, n_workers=4, router="round_robin",
                         request_groups=[0, 1, 0, 1, 0, -1, 1, -1], worker_groups=[0, 0, 1, 1])
    # group 0 → workers 0, 1 in turn; group 1 → workers 2, 3 in turn; -1 → the next of all four in turn
    assert res.worker.tolist() == [0, 2, 1, 3, 0, 0, 2, 1]


@pytest.mark.parametrize("groups, needle", [
    (([0, 0], None), "give request_groups and worker_groups together"),
    (([0], [0, 0]), "request_groups has shape (1,), expected (2,)"),
    (([0, 2], [0, 1]), "request 1 is in group 2, which has no worker"),
    (([0, 0.5], [0, 1]), "request_groups must hold whole numbers"),
    (([0, 0], [0, -1]), "worker_groups must hold whole numbers ≥ 0"),
])
def test_bad_groups_are_one_clear_error(groups, needle) -> None:
    from planner.errors import PlannerError

    spec = WorkerSpec(cost=COST, M=5000, scheduler="vllm", C=1000)
    with pytest.raises(PlannerError) as info:
        simulate_fleet(FleetRequests([0.0, 1.0], [10, 10], [5, 5]), spec, n_workers=2, router="jsq",
                       request_groups=groups[0], worker_groups=groups[1])
    assert needle in str(info.value)


def test_a_group_whose_workers_are_too_small_is_named() -> None:
    small = WorkerSpec(cost=COST, M=100, scheduler="sarathi", label="small")
    big = WorkerSpec(cost=COST, M=10_000, scheduler="sarathi", label="big")
    from planner.errors import InfeasibleError

    with pytest.raises(InfeasibleError, match="request 1 needs 504 KV tokens .* KV limit of group 0 is M = 100"):
        simulate_fleet(FleetRequests([0.0, 0.1], [10, 500], [5, 5]), [small, big], router="jsq",
                       request_groups=[0, 0], worker_groups=[0, 1])
