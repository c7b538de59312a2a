"""Online replay (heartbeat loop + Alg. 2) and the Eq. 7 worker-scaling fit."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from planner.catalog import find_gpu, find_model
from planner.core.types import PlannedRequest, SLOClass, SLOSet, WorkerConfig, Workload
from planner.costmodels.models import AladdinCostModel
from planner.errors import PlannerError
from planner.placement.online import replay
from planner.placement.problem import PlacementOptions
from planner.placement.scaling import fit_eq7, workers_vs_rate
from planner.workloads.streams import find_distribution, poisson_workload

PERF_CSV = Path(__file__).resolve().parents[3] / "shared" / "data" / "profiling" / "splitwise_sim" / "perf_model.csv"
MODEL = find_model("Llama-2-70B")
WORKER = WorkerConfig(gpu=find_gpu("A100"), tensor_parallel=2)
SLOS = SLOSet(classes={"default": SLOClass(ttft_s=1.6, atgt_s=0.075)})

# Round coefficients for hand arithmetic: k1 = 1e-3 s/token, c1 = 0.1 s, k2 = 0.01 s,
# k3 = 1e-5 s/token, c2 = 0.05 s.
TOY = AladdinCostModel(
    model="Llama-2-70B", gpu="A100", tensor_parallel=2, prefill_s_per_token=1e-3, prefill_base_s=0.1,
    decode_s_per_request=0.01, decode_s_per_context_token=1e-5, decode_base_s=0.05, kv_bytes_per_token=327680,
)


@pytest.fixture(scope="module")
def cost() -> AladdinCostModel:
    if PERF_CSV.exists():
        from planner.costmodels.fitting import fit_aladdin
        from planner.costmodels.profiles import read_splitwise

        p, _ = read_splitwise(PERF_CSV)
        rows = p[(p.model == "Llama-2-70B") & (p.gpu == "A100-80GB-SXM") & (p.tensor_parallel == 2)]
        return fit_aladdin(rows, source="splitwise")
    return AladdinCostModel(
        model="Llama-2-70B", gpu="A100", tensor_parallel=2, prefill_s_per_token=3.5e-4, prefill_base_s=0.028,
        decode_s_per_request=8e-4, decode_s_per_context_token=1.5e-7, decode_base_s=0.055,
        kv_bytes_per_token=327680,
    )


@pytest.fixture(scope="module")
def sharegpt():
    return find_distribution("sharegpt")


def _req(rid: str, arrival: float, inp: int, out: int, pred: int | None = None) -> Request:
    return PlannedRequest(request_id=rid, arrival_s=arrival, input_tokens=inp, output_tokens=out,
                   predicted_output_tokens=out if pred is None else pred)


def _replay(requests, cost=TOY, **kw):
    kw.setdefault("model", MODEL)
    kw.setdefault("worker", WORKER)
    kw.setdefault("slos", SLOS)
    return replay(Workload(requests=tuple(requests)), cost=cost, **kw)


def test_tiny_trace_bookkeeping():
    # Heartbeat Δ = 1 s.  A (0.25 s) and B (0.5 s) are new at h = 1.  Best-fit puts both on worker 0:
    # M2 at λ = 0.5 gives 0.05 + 2·0.01 + 1e-5·(101.5 + 201) = 0.073025 ≤ 0.075.
    # Prefill 0.1 + 1e-3·300 = 0.4 s: first token at 1.4 for both.
    # Decode: b=2, L=300: 0.073 → 1.473;  b=2, L=302: 0.07302 → 1.54602 (B done, 2 tokens);
    #         b=1, L=102: 0.06102 → 1.60704 (A done, 3 tokens).
    # At h = 2 worker 0 is empty and released.  C (1.2 s) gets a fresh worker, label 1 (no reuse).
    # Prefill 0.1 + 0.05 = 0.15 → 2.15.  Decode: 0.0605 → 2.2105, 0.06051 → 2.27101.
    res = _replay([_req("A", 0.25, 100, 3), _req("B", 0.5, 200, 2), _req("C", 1.2, 50, 2)])
    df = res.requests.set_index("request_id")
    assert list(df.worker) == [0, 0, 1]
    assert list(df.heartbeat) == [1, 1, 2]
    np.testing.assert_allclose(df.heartbeat_wait_s, [0.75, 0.5, 0.8])
    np.testing.assert_allclose(df.iteration_wait_s, [0.0, 0.0, 0.0])
    np.testing.assert_allclose(df.prefill_s, [0.4, 0.4, 0.15])
    np.testing.assert_allclose(df.ttft_s, [1.15, 0.9, 0.95])
    np.testing.assert_allclose(df.finish_s, [1.60704, 1.54602, 2.27101], rtol=0, atol=1e-12)
    np.testing.assert_allclose(df.decode_s, [0.20704, 0.14602, 0.12101], rtol=0, atol=1e-12)
    np.testing.assert_allclose(df.atgt_s, [0.20704 / 3, 0.14602 / 2, 0.12101 / 2], rtol=1e-12)
    assert df.slo_met.all() and res.slo_attainment == 1.0
    hb = res.heartbeats
    assert list(hb.heartbeat) == [1, 2]
    assert list(hb.new_requests) == [2, 1]
    assert list(hb.active_workers) == [1, 1]
    assert list(hb.opened) == [1, 1] and list(hb.released) == [0, 1]
    assert list(hb.finished) == [2, 1]
    assert res.peak_workers == 1 and res.mean_workers == 1.0 and res.kv_overflows == 0
    # KV peak of worker 0 in its window: 302 tokens in the second iteration.
    w0 = res.workers[res.workers.worker == 0]
    assert w0.kv_peak_fraction.iloc[0] == pytest.approx(302 * 327680 / WORKER.kv_capacity_bytes(MODEL))


def test_ttft_clock():
    # TTFT SLO 1.0 s (M3 still allows the 0.4 s prefill batch of A and B).  On the arrival clock A misses it
    # (TTFT 1.15 s), B (0.9 s) and C (0.95 s) meet it.  On the heartbeat clock A's TTFT is 1.4 − 1 = 0.4 s.
    reqs = [_req("A", 0.25, 100, 3), _req("B", 0.5, 200, 2), _req("C", 1.2, 50, 2)]
    slos = SLOSet(classes={"default": SLOClass(ttft_s=1.0, atgt_s=0.075)})
    by_arrival = _replay(reqs, slos=slos)
    assert list(by_arrival.requests.ttft_met) == [False, True, True]
    assert list(by_arrival.requests.atgt_met) == [True, True, True]
    assert by_arrival.slo_attainment == pytest.approx(2 / 3)
    by_heartbeat = _replay(reqs, slos=slos, ttft_clock="heartbeat")
    assert by_heartbeat.requests.ttft_met.all() and by_heartbeat.slo_attainment == 1.0


def test_worker_over_its_limit_is_closed_not_infeasible():
    # λ = 0, ATGT SLO 0.0731 s.  At h = 1 A and B fit together: 0.05 + 2·0.01 + 1e-5·300 = 0.073.  Each
    # token adds 2e-5 s, so at h = 2 (g = 9 after the 1.4 s first token) their ongoing load alone breaks M2.
    # Worker 0 is closed for C instead of making the heartbeat infeasible.
    slos = SLOSet(classes={"default": SLOClass(ttft_s=1.6, atgt_s=0.0731)})
    reqs = [_req("A", 0.25, 100, 20), _req("B", 0.5, 200, 20), _req("C", 1.5, 50, 5)]
    res = _replay(reqs, slos=slos, options=PlacementOptions(strictness=0.0))
    assert list(res.requests.worker) == [0, 0, 1]
    assert list(res.heartbeats.closed_workers) == [0, 1] + [0] * (len(res.heartbeats) - 2)
    assert not res.heartbeats.fallback.any() and res.requests.finished.all()


def _reference_one_worker(requests: list[Request], cost: AladdinCostModel, dt: float) -> dict[str, float]:
    """Iteration-by-iteration single-worker oracle: prefill batch at each heartbeat, then decodes."""
    clock, finish, g, running = 0.0, {}, {}, []
    horizon = int(np.ceil(max(r.arrival_s for r in requests) / dt)) + 10_000
    for k in range(horizon + 1):
        h, end = k * dt, (k + 1) * dt
        new = [r for r in requests if np.ceil(r.arrival_s / dt - 1e-12) == k]
        if new:
            clock = max(clock, h) + cost.prefill_time(sum(r.input_tokens for r in new))
            running += new
            g.update({r.request_id: 0 for r in new})
        while running and clock < end:
            clock += cost.decode_time(len(running), sum(r.input_tokens + g[r.request_id] for r in running))
            for r in running:
                g[r.request_id] += 1
                if g[r.request_id] == r.output_tokens:
                    finish[r.request_id] = clock
            running = [r for r in running if r.request_id not in finish]
        if len(finish) == len(requests):
            return finish
    raise AssertionError("oracle did not finish")


@pytest.mark.parametrize("dt", [0.07, 0.5, 1.0])
def test_carry_over_loses_no_time(dt):
    # D alone: prefill 0.1 + 1e-3·1000 = 1.1 s, then Σ_{g=0}^{49} (0.06 + 1e-5·(1000 + g)) = 3.51225 s.
    # The finish time 1.1 + 3.51225 = 4.61225 s must not depend on where the heartbeats cut the iterations.
    res = _replay([_req("D", 0.0, 1000, 50)], heartbeat_s=dt)
    row = res.requests.iloc[0]
    assert row.first_token_s == pytest.approx(1.1, abs=1e-12)
    assert row.finish_s == pytest.approx(1.1 + 3.51225, abs=1e-9)


@pytest.mark.parametrize("dt", [0.25, 1.0])
def test_in_flight_iteration_and_stalls_match_oracle(dt):
    # Cheap prefills (c1 = 0, k1 = 1e-5) and decodes (k2 = 0.003, k3 = 1e-6) so that M2–M4 let later
    # arrivals join worker 0 while D decodes.  Their prefill waits for the iteration in flight at the
    # heartbeat and stalls D.  The vectorised replay must match a scalar iteration-by-iteration oracle.
    cost = TOY.model_copy(update={"prefill_base_s": 0.0, "prefill_s_per_token": 1e-5,
                                  "decode_s_per_request": 0.003, "decode_s_per_context_token": 1e-6})
    reqs = [_req("D", 0.0, 1000, 120), _req("E", 1.3, 10, 30), _req("F", 2.05, 20, 5), _req("G", 2.6, 30, 12)]
    res = _replay(reqs, cost=cost, heartbeat_s=dt)
    df = res.requests.set_index("request_id")
    assert (df.worker == 0).all(), "the oracle assumes a single worker"
    oracle = _reference_one_worker(reqs, cost, dt)
    for rid, t in oracle.items():
        assert df.finish_s[rid] == pytest.approx(t, abs=1e-9), rid
    late = df.drop(index="D")
    assert (late.iteration_wait_s > 0).any()  # at least one prefill waited for an iteration in flight
    assert (late.iteration_wait_s < 0.075).all()


def test_kv_overflow_and_atgt_miss_are_recorded_not_raised():
    # u = 0.87: KV capacity 2·0.87·80e9 − 137.95e9 = 1.25 GB = 3815 tokens.  X and Y (I = 500) are predicted
    # at 10 tokens but generate 3000.  Plan at h = 1 with k3 = 2e-6: prefill 0.1 + 1e-3·1000 = 1.1 s ≤ 1.6;
    # M2 0.05 + 2·0.01 + 2e-6·2·505 = 0.07202 ≤ 0.075; KV peak 2·509 tokens.  So both go on worker 0.
    # Without Alg. 2 they stay together and grow to 2·3499 tokens > 3815: overflow.
    # Decode: Σ_{g=0}^{2999} (0.07 + 2e-6·2·(500 + g)) = 210 + 4e-6·(1.5e6 + 2999·3000/2) = 233.994 s,
    # ATGT 0.077998 > 0.075: both miss the ATGT SLO.  Their TTFT from the heartbeat, 1.1 s, is met.
    worker = WorkerConfig(gpu=find_gpu("A100"), tensor_parallel=2, memory_utilization=0.87)
    cost = TOY.model_copy(update={"decode_s_per_context_token": 2e-6})
    reqs = [_req("X", 0.1, 500, 3000, pred=10), _req("Y", 0.2, 500, 3000, pred=10)]
    res = _replay(reqs, cost=cost, worker=worker, rebalance=False, ttft_clock="heartbeat")
    df = res.requests
    assert df.finished.all() and (df.worker == 0).all()
    np.testing.assert_allclose(df.decode_s, 233.994, rtol=1e-9)
    assert not df.atgt_met.any() and df.ttft_met.all() and res.slo_attainment == 0.0
    assert res.kv_overflows > 0
    frac = res.heartbeats.kv_peak_fraction.max()
    assert frac == pytest.approx(2 * 3499 * 327680 / worker.kv_capacity_bytes(MODEL))
    assert res.repredictions == 0


def test_alg2_repredicts_when_real_exceeds_prediction(sharegpt, cost):
    # Without a predictor the prediction grows by one token each time g reaches it:
    # ô = 5, o = 40 → re-predictions at g = 5, 6, …, 39 = 35 events.
    res = _replay([_req("R", 0.0, 100, 40, pred=5), _req("S", 0.0, 100, 8, pred=20)])
    df = res.requests.set_index("request_id")
    assert df.repredictions["R"] == 35 and df.final_prediction["R"] == 40
    assert df.repredictions["S"] == 0 and res.repredictions == 35
    assert res.heartbeats.repredictions.sum() == 35
    # S finished 12 tokens early: E_0 = +12 − (40 − 5) = −23 tokens after the run.
    assert res.workers.error_tokens.iloc[-1] == pytest.approx(12 - 35)
    assert _replay([_req("R", 0.0, 100, 40, pred=5)], rebalance=False).repredictions == 0

    # With the distribution's conditional mean on a Poisson stream: exactly the underestimated requests
    # are re-predicted, and every re-prediction is above the previous one.
    wl = poisson_workload(sharegpt, rate=1.0, duration_s=40, seed=3, max_total_tokens=MODEL.max_context_tokens)
    res = replay(wl, model=MODEL, worker=WORKER, cost=cost, slos=SLOS, predictor=sharegpt)
    df = res.requests
    assert df.finished.all()
    under = df.output_tokens > df.predicted_output_tokens
    assert under.any()
    assert ((df.repredictions > 0) == under).all()
    assert (df.final_prediction[under] > df.predicted_output_tokens[under]).all()
    assert res.repredictions == int(df.repredictions.sum()) == int(res.heartbeats.repredictions.sum())


def test_alg2_moves_go_to_overestimated_workers(sharegpt, cost):
    # Moves are rare at low rates.  This stream (3 req/s, 40 s, seed 1) has some.  Every moved request
    # must end on a worker that was marked "over" at its heartbeat.
    wl = poisson_workload(sharegpt, rate=3.0, duration_s=40, seed=1, max_total_tokens=MODEL.max_context_tokens)
    res = replay(wl, model=MODEL, worker=WORKER, cost=cost, slos=SLOS, predictor=sharegpt)
    moved = res.requests[res.requests.moved]
    assert res.moves == len(moved) > 0
    marks = res.workers.set_index(["heartbeat", "worker"]).mark
    assert all(marks[(r.heartbeat, r.worker)] == "over" for r in moved.itertuples())
    assert res.kv_overflows == 0 and res.requests.finished.all()
    assert res.invalid_plans == 0  # every heartbeat plan passed the independent validator
    no_alg2 = replay(wl, model=MODEL, worker=WORKER, cost=cost, slos=SLOS, predictor=sharegpt, rebalance=False)
    assert no_alg2.moves == 0 and no_alg2.repredictions == 0


def test_perfect_predictions_meet_every_slo(sharegpt, cost):
    # predicted == real, best-fit, λ = 0.5, θ = 1.  M2/M4/M5 keep ATGT and KV at every heartbeat.  TTFT is
    # judged from the heartbeat: M3 bounds the prefill, not the wait for the heartbeat.
    wl = poisson_workload(sharegpt, rate=1.0, duration_s=60, seed=0, max_total_tokens=MODEL.max_context_tokens)
    wl = Workload(requests=tuple(r.model_copy(update={"predicted_output_tokens": r.output_tokens}) for r in wl))
    res = replay(wl, model=MODEL, worker=WORKER, cost=cost, slos=SLOS, predictor=sharegpt, ttft_clock="heartbeat")
    assert len(wl) > 30
    assert res.requests.finished.all()
    assert res.slo_attainment == 1.0
    assert res.kv_overflows == 0 and res.repredictions == 0 and res.moves == 0
    assert res.p99_atgt_s <= 0.075
    assert res.heartbeats.kv_peak_fraction.max() <= 1.0
    assert not res.heartbeats.fallback.any()
    # The arrival clock adds the heartbeat wait, in [0, Δ).
    hw = res.requests.heartbeat_wait_s
    assert ((hw >= 0) & (hw < 1.0)).all()
    np.testing.assert_allclose(res.requests.ttft_s, hw + res.requests.iteration_wait_s + res.requests.prefill_s)


@pytest.mark.parametrize("method", ["best_fit", "power_of_two"])
def test_replay_is_deterministic(sharegpt, cost, method):
    wl = poisson_workload(sharegpt, rate=1.5, duration_s=30, seed=7, max_total_tokens=MODEL.max_context_tokens)
    runs = [replay(wl, model=MODEL, worker=WORKER, cost=cost, slos=SLOS, predictor=sharegpt, method=method, seed=1)
            for _ in range(2)]
    for name in ("requests", "heartbeats", "workers"):
        pd.testing.assert_frame_equal(getattr(runs[0], name), getattr(runs[1], name))
    assert runs[0].to_dict() | {"placement_seconds": 0} == runs[1].to_dict() | {"placement_seconds": 0}


def test_replay_to_dict_is_json(sharegpt, cost):
    import json

    wl = poisson_workload(sharegpt, rate=1.0, duration_s=10, seed=1, max_total_tokens=MODEL.max_context_tokens)
    res = replay(wl, model=MODEL, worker=WORKER, cost=cost, slos=SLOS, max_heartbeats=5)
    data = json.loads(json.dumps(res.to_dict(frames=True)))
    assert len(data["heartbeats_table"]) == 5
    assert data["finished"] < data["requests"]  # stopped early: unfinished requests count as misses
    assert data["slo_attainment"] <= data["finished"] / data["requests"]


def test_fit_eq7_exact_line():
    k, c, r2 = fit_eq7([1, 2, 4], [3, 5, 9])
    assert (k, c, r2) == pytest.approx((2.0, 1.0, 1.0))


def test_workers_vs_rate_is_monotone(sharegpt, cost):
    fit = workers_vs_rate([0.5, 1.0, 2.0], dist=sharegpt, model=MODEL, worker=WORKER, cost=cost, slos=SLOS,
                          duration_s=60, warmup_s=20, seed=0)
    workers = fit.table.workers.tolist()
    assert workers == sorted(workers) and workers[-1] > workers[0]
    assert fit.k_w > 0
    assert (fit.table.gpus == fit.table.workers * 2).all()
    assert fit.predict(2.0) >= 1 and fit.predict(4.0) >= fit.predict(1.0)
    assert 0.0 <= fit.r2 <= 1.0
    assert set(fit.to_dict()) >= {"k_w", "c_w", "r2", "points"}


def test_workers_vs_rate_with_one_rate_measures_it_and_fits_no_line(sharegpt, cost):
    fit = workers_vs_rate([1.0], dist=sharegpt, model=MODEL, worker=WORKER, cost=cost, slos=SLOS,
                          duration_s=40, warmup_s=10, seed=0)
    assert fit.k_w is None and fit.c_w is None and fit.r2 is None
    assert fit.predict(1.0) == int(fit.table.workers.iloc[0]) >= 1
    with pytest.raises(PlannerError, match="not fitted"):
        fit.predict(2.0)
