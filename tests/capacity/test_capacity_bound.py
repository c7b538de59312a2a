"""The policy-independent capacity bound (`planner.capacity.bound`): hand arithmetic, validity
against explicit schedules, monotonicity, infeasibility, bad input and the shipped scenario."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest

from planner.capacity.bound import (
    instance_bound,
    kv_tokens_per_worker,
    max_rate_per_worker,
    steady_state_bound,
)
from planner.catalog import find_gpu, find_model
from planner.core.types import WorkerConfig
from planner.costmodels.files import load_cost_model
from planner.costmodels.models import AladdinCostModel
from planner.errors import PlannerError
from planner.workloads.streams import find_distribution, poisson_workload

from support import REPO


def _cost(k1=0.1, c1=0.1, k2=0.01, k3=0.0, c2=0.05, kv_base=0.0) -> AladdinCostModel:
    return AladdinCostModel(model="toy", gpu="toy-gpu", tensor_parallel=1, prefill_s_per_token=k1,
                            prefill_base_s=c1, decode_s_per_request=k2, decode_s_per_context_token=k3,
                            decode_base_s=c2, kv_bytes_per_token=1.0, kv_bytes_base=kv_base, provenance="test")


# ---------------------------------------------------------------------------------------------
# hand-computed case


def test_hand_computed_three_requests():
    # k1 = 0.1, c1 = 0.1, k2 = 0.01, k3 = 0, c2 = 0.05; M = 40 KV tokens; TTFT f = 2.9, TPOT τ = 0.25;
    # a 0.25 s grid (windows end between grid points, so the bound's 2e-9 SLO widening moves nothing).
    # All three arrive at 0:  r1 (I=10, O=3), r2 (I=20, O=2), r3 (I=10, O=1).
    # Prefill tokens   k1·ΣI = 0.1·40 = 4.0 s
    # Prefill batches  c1·k1·ΣI/(f − c1) = 0.1·0.1·40/2.8 = 0.142857 s
    # Decode entries   e = k2 = 0.01 each; r1 has 2, r2 has 1 → Σe = 0.03 s, N = 3, Q = 3·√0.01 = 0.3
    # Iterations, TPOT: R ≥ Q²/((τ − c2)·N) = 0.09/(0.2·3) = 0.15 → c2·R = 0.0075
    # Iterations, KV:   contexts r1: 10, 11; r2: 20 → ΣL = 41; R ≥ 41/40 = 1.025 → c2·R = 0.05125 (binds)
    # Windows [a, a + f + τ(O − 1)]: r1 [0, 3.4], r2 [0, 3.15], r3 [0, 2.9] → on the grid [0, 3.5],
    # [0, 3.25], [0, 3.0]; the busiest is [0, 3.5]:
    #   time = (4.0 + 0.142857 + 0.03 + 0.05125)/3.5 = 4.224107/3.5 = 1.206888
    #   ([0, 3.25] holds r2, r3: (3.0 + 0.107143 + 0.01 + 0.025)/3.25 = 0.9668, lower.)
    # Prefill within the TTFT windows [0, 2.9] → [0, 3.0] alone: (4.0 + 0.142857)/3 = 1.380952 (binds)
    # → 2 workers.
    cost = _cost()
    b = instance_bound([0, 0, 0], [10, 20, 10], [3, 2, 1], cost, 40, 2.9, 0.25, grid_s=0.25)
    assert b.feasible and b.workers == 2
    assert b.time_workers == pytest.approx(4.224107 / 3.5, rel=1e-6)
    assert b.prefill_ttft_workers == pytest.approx(4.142857 / 3.0, rel=1e-6)
    assert b.workers_real == b.prefill_ttft_workers
    assert b.binding == "prefill within TTFT windows" and b.window_s == (0.0, 3.0)
    assert b.prefill_workers == pytest.approx(4.0 / 3.0)
    assert b.prefill_batches_workers == pytest.approx(0.4 / 2.8 / 3.0, rel=1e-6)
    assert b.iterations_from == "kv"
    # memory: Σ L·(c2 + k2) = 41·0.06 = 2.46 KV-token-seconds / M = 0.0615 → /3.5 = 0.017571
    assert b.memory_workers == pytest.approx(41 * 0.06 / 40 / 3.5)
    assert "under cost model toy / toy-gpu / TP 1" in b.relative_to
    # Attainment 2/3: one request may be sacrificed.  Per-request time with KV iterations:
    #   r1 1.0 + 0.035714 + 0.02 + 0.05·21/40 = 1.081964; r2 2.0 + 0.071429 + 0.01 + 0.05·20/40 = 2.106429;
    #   r3 1.0 + 0.035714 = 1.035714.  The cheapest two drop r2: (4.224107 − 2.106429)/3.5 = 0.605051.
    #   TPOT form: A = 4.172857 − 2.081429 (r2) = 2.091428, Q = 0.3 − 0.2 (r1) = 0.1 → c2·0.01/(0.2·3)
    #   = 0.000833 → 2.092262/3.5 = 0.597789, lower.
    #   Prefill alone, one TTFT violator allowed: (4.142857 − 2.071429 (r2))/3 = 0.690476 (binds) → 1 worker.
    half = instance_bound([0, 0, 0], [10, 20, 10], [3, 2, 1], cost, 40, 2.9, 0.25, grid_s=0.25, alpha=2 / 3)
    assert half.workers == 1 and half.requests_required == 2
    assert half.time_workers == pytest.approx(2.117678 / 3.5, rel=1e-6)
    assert half.workers_real == pytest.approx(2.071428 / 3.0, rel=1e-6)


def test_hand_computed_decode_bound_terms():
    # k1 = 0.001, c1 = 0, k2 = 0.01, k3 = 0.001, c2 = 0.05; M = 1000; f = 0.45, τ = 0.1.
    # r1 (a = 0, I = 10, O = 4) and r2 (a = 0, I = 20, O = 3):
    #   prefill k1·ΣI = 0.03; c1 = 0 → no batch term
    #   contexts r1: 10, 11, 12; r2: 20, 21 → e = k2 + k3·L: 0.020, 0.021, 0.022, 0.030, 0.031 → Σe = 0.124
    #   N = 5; Q (midpoint-integral lower bound of Σ√e) ≈ √0.020 + … + √0.031 = 0.7595 (checked below)
    #   R ≥ Q²/((τ − c2)·N) = Q²/0.25 ≈ 2.307; KV: ΣL/M = 74/1000 = 0.074 → TPOT form binds,
    #   c2·R ≈ 0.11536
    #   windows r1 [0, 0.75], r2 [0, 0.65]; grid 0.1 → busiest [0, 0.8]: (0.03 + 0.124 + 0.11536)/0.8 ≈ 0.3367
    #   prefill alone over [0, 0.45] → [0, 0.5]: 0.03/0.5 = 0.06
    cost = _cost(k1=0.001, c1=0.0, k2=0.01, k3=0.001, c2=0.05)
    b = instance_bound([0, 0], [10, 20], [4, 3], cost, 1000, 0.45, 0.1, grid_s=0.1)
    sqrt_sum = sum(math.sqrt(0.01 + 0.001 * c) for c in (10, 11, 12, 20, 21))
    assert b.iterations_from == "tpot" and b.binding == "time" and b.window_s == pytest.approx((0.0, 0.8))
    assert b.decode_token_workers == pytest.approx(0.124 / 0.8)
    assert b.prefill_workers == pytest.approx(0.03 / 0.8)
    assert b.iteration_workers <= 0.05 * sqrt_sum ** 2 / 0.25 / 0.8
    assert b.iteration_workers == pytest.approx(0.05 * sqrt_sum ** 2 / 0.25 / 0.8, rel=1e-4)
    assert b.workers_real == pytest.approx(b.prefill_workers + b.decode_token_workers + b.iteration_workers)
    assert b.workers == 1 and b.prefill_ttft_workers == pytest.approx(0.06)


def test_tpot_iteration_bound_is_cauchy_schwarz_on_one_context():
    # One request class: I = 100, O = 11 (10 decode entries), k3 = 0 so e = k2 = 0.004 per entry.
    # τ = 0.03, c2 = 0.02: Σ b_i·(c2 + b_i·e) ≤ τ·N → b ≤ (τ − c2)/e = 2.5 entries per iteration,
    # so R ≥ N/2.5.  Ten such requests at t = 0: N = 100 → R ≥ 40 → c2·R = 0.8 s.
    cost = _cost(k1=0.0, c1=0.0, k2=0.004, k3=0.0, c2=0.02)
    b = instance_bound([0.0] * 10, [100] * 10, [11] * 10, cost, 1e9, 1.0, 0.03, grid_s=0.125)
    assert b.iterations_from == "tpot"
    # window [0, 1 + 0.03·10] = [0, 1.3] on the 0.125 grid → [0, 1.375]
    assert b.iteration_workers == pytest.approx(0.8 / 1.375)
    assert b.decode_token_workers == pytest.approx(100 * 0.004 / 1.375)


# ---------------------------------------------------------------------------------------------
# validity: explicit schedules never need fewer workers than the bound


def _simulate_worker(reqs, cost, m_kv, policy):
    """One worker, its requests (a, I, O) → {index: (first token time, last token time)}.

    Batch times as in the bound's model: prefill part c1 + k1·ΣI, decode part c2 + k2·b + k3·Σ(I + g − 1)
    (g = tokens generated so far, so the entry producing token j reads I + j − 2); a request is admitted
    when the KV of every admitted request at full length, Σ(I + O), stays ≤ M.
    """
    k1, c1 = cost.prefill_s_per_token, cost.prefill_base_s
    k2, k3, c2 = cost.decode_s_per_request, cost.decode_s_per_context_token, cost.decode_base_s
    t = 0.0
    pending = sorted(reqs, key=lambda r: (r[1], r[0]))  # (idx, a, I, O)
    running: dict[int, list] = {}
    done: dict[int, tuple[float, float]] = {}
    for _ in range(10_000):
        if not pending and not running:
            return done
        kv_used = sum(st[0][2] + st[0][3] for st in running.values())
        arrived = [r for r in pending if r[1] <= t + 1e-15]
        admit = []
        for r in arrived:
            if kv_used + r[2] + r[3] <= m_kv and (policy == "prefill_all" or not admit):
                admit.append(r)
                kv_used += r[2] + r[3]
        do_prefill = bool(admit) and (policy != "decode_first" or not running)
        do_decode = bool(running) and (policy == "hybrid" or not do_prefill)
        if not do_prefill and not do_decode:
            if not pending:
                raise AssertionError("stuck")
            t = max(t, min(r[1] for r in pending))
            continue
        dur = 0.0
        if do_prefill:
            dur += c1 + k1 * sum(r[2] for r in admit)
        if do_decode:
            dur += c2 + k2 * len(running) + k3 * sum(st[0][2] + st[1] - 1 for st in running.values())
        t += dur
        if do_decode:
            for idx in list(running):
                st = running[idx]
                st[1] += 1
                if st[1] == st[0][3]:
                    done[idx] = (st[2], t)
                    del running[idx]
        if do_prefill:
            for r in admit:
                pending.remove(r)
                if r[3] == 1:
                    done[r[0]] = (t, t)
                else:
                    running[r[0]] = [r, 1, t]
    raise AssertionError("simulation did not finish")


def _meets(reqs, done, f, tau, alpha, criterion):
    ttft = np.array([done[i][0] - a for i, a, _, _ in reqs])
    multi = [(i, o) for i, _, _, o in reqs if o >= 2]
    tpot_all = np.array([(done[i][1] - done[i][0]) / (o - 1) if o >= 2 else 0.0 for i, _, _, o in reqs])
    if criterion == "attainment":
        ok = (ttft <= f) & (tpot_all <= tau)
        return ok.sum() >= math.ceil(alpha * len(reqs) - 1e-9)
    tpot = np.array([(done[i][1] - done[i][0]) / (o - 1) for i, o in multi])
    return (np.percentile(ttft, 100 * alpha) <= f) and (tpot.size == 0 or np.percentile(tpot, 100 * alpha) <= tau)


def _fewest_workers_found(reqs, cost, m_kv, f, tau, alpha, criterion, max_workers=3):
    for w in range(1, max_workers + 1):
        for assign in itertools.product(range(w), repeat=len(reqs)):
            if w > 1 and len(set(assign)) < w:
                continue
            for policy in ("prefill_first", "prefill_all", "decode_first", "hybrid"):
                done = {}
                for k in range(w):
                    done.update(_simulate_worker([r for r, x in zip(reqs, assign) if x == k], cost, m_kv, policy))
                if _meets(reqs, done, f, tau, alpha, criterion):
                    return w
    return None


def test_bound_never_exceeds_an_explicit_feasible_schedule():
    rng = np.random.default_rng(2326)
    checked = tight = 0
    for _ in range(160):
        cost = _cost(k1=rng.uniform(0.005, 0.05), c1=rng.uniform(0, 0.1), k2=rng.uniform(0, 0.02),
                     k3=rng.choice([0.0, rng.uniform(0, 0.003)]), c2=rng.uniform(0, 0.1))
        n = int(rng.integers(2, 4))
        reqs = [(k, float(rng.uniform(0, 0.4)), int(rng.integers(1, 25)), int(rng.integers(1, 5))) for k in range(n)]
        m_kv = float(rng.integers(30, 90))
        f, tau = float(rng.uniform(0.2, 1.2)), float(rng.uniform(0.03, 0.3))
        criterion, alpha = [("attainment", 1.0), ("attainment", 0.6), ("percentile", 0.9)][int(rng.integers(3))]
        a, i, o = (np.array([r[c] for r in reqs]) for c in (1, 2, 3))
        b = instance_bound(a, i, o, cost, m_kv, f, tau, alpha=alpha, criterion=criterion)
        found = _fewest_workers_found(reqs, cost, m_kv, f, tau, alpha, criterion)
        if found is None:
            continue
        checked += 1
        assert b.feasible, f"the bound calls a schedulable case infeasible: {b.reason}"
        assert b.workers <= found, (reqs, cost, m_kv, f, tau, alpha, criterion, b.to_dict(), found)
        tight += b.workers == found and found >= 2
    assert checked >= 60
    assert tight >= 3  # the comparison is not vacuous: the bound meets the schedule's count at ≥ 2 workers


def test_infeasible_tpot_is_reported_with_the_reason():
    # τ = 0.05 ≤ c2 + k2 + k3·I = 0.04 + 0.01 + 0.001·10: the request alone is too slow on any fleet.
    cost = _cost(k1=0.01, c1=0.0, k2=0.01, k3=0.001, c2=0.04)
    b = instance_bound([0.0, 0.1], [10, 10], [5, 5], cost, 1000, 1.0, 0.05)
    assert not b.feasible and b.workers is None
    assert "TPOT" in b.reason and "cannot meet" in b.reason
    assert "no number of workers" in b.summary()
    assert json.loads(json.dumps(b.to_dict(), allow_nan=False))["workers_real"] is None
    # Alone each iteration takes 0.04 + 0.01 + 0.001·(10 + m) ≥ 0.06: a looser TPOT is feasible.
    assert instance_bound([0.0, 0.1], [10, 10], [5, 5], cost, 1000, 1.0, 0.07).feasible
    # A one-token request has no TPOT: with attainment 1/2 the other request may miss.
    ok = instance_bound([0.0, 0.1], [10, 10], [5, 1], cost, 1000, 1.0, 0.05, alpha=0.5)
    assert ok.feasible and ok.forced_violators == 1 and ok.workers >= 1
    # TTFT impossible: c1 + k1·I > f
    t = instance_bound([0.0], [200], [2], cost, 1000, 1.0, 0.5)
    assert not t.feasible and "TTFT" in t.reason
    # KV impossible: the prompt plus the per-request KV base b_kv/a_kv = 50 tokens exceeds M = 55
    kv = instance_bound([0.0], [10], [2], _cost(kv_base=50.0), 55, 5.0, 0.5)
    assert not kv.feasible and instance_bound([0.0], [10], [2], _cost(kv_base=50.0), 60, 5.0, 0.5).feasible
    s = steady_state_bound(find_distribution("sharegpt"), 1.0, cost, 1e6, 1.0, 0.05, sample_size=2000)
    assert not s.feasible and "TPOT" in s.reason and max_rate_per_worker(
        find_distribution("sharegpt"), cost, 1e6, 1.0, 0.05, sample_size=2000) == 0.0


def test_percentile_with_no_request_required_to_meet_both_still_needs_the_ttft_prefill():
    # P90 over 2 requests: the ⌊(2 − 1)·0.9⌋ = 0-th order statistic must be within each SLO, so one
    # request may miss TTFT and the other TPOT: no request has to meet both.  One must still meet TTFT;
    # r2 cannot (c1 + k1·30 = 3.1 > f = 1.15), so it is the one TTFT violator and r1 meets TTFT:
    # k1·10 + c1·k1·10/(f − c1) = 1.0 + 0.1·0.1·10/1.05 = 1.095238 within [0, 1.15] → [0, 1.2] on the
    # 0.1 grid → 0.912698 → 1 worker.
    cost = _cost()
    b = instance_bound([0.0, 0.0], [10, 30], [2, 2], cost, 100, 1.15, 0.5, alpha=0.9, criterion="percentile",
                       grid_s=0.1)
    assert b.requests_required == 0 and b.workers == 1
    assert b.binding == "prefill within TTFT windows"
    assert b.prefill_ttft_workers == pytest.approx(1.095238 / 1.2, rel=1e-6) and b.forced_violators == 1


# ---------------------------------------------------------------------------------------------
# monotonicity


def _random_instance(rng, n):
    return (np.sort(rng.uniform(0, 20, n)), rng.integers(1, 400, n), rng.integers(1, 120, n))


def test_instance_bound_is_monotone_in_slos_alpha_and_added_requests():
    rng = np.random.default_rng(23)
    cost = _cost(k1=2e-4, c1=0.02, k2=3e-4, k3=6e-7, c2=0.03)
    for _ in range(40):
        a, i, o = _random_instance(rng, int(rng.integers(20, 80)))
        m_kv = float(rng.uniform(2_000, 20_000))
        f1, f2 = sorted(rng.uniform(0.2, 2.0, 2))
        t1, t2 = sorted(rng.uniform(0.04, 0.2, 2))
        p1, p2 = sorted(rng.uniform(0.5, 1.0, 2))

        def real(f, t, alpha=1.0, criterion="attainment", aa=a, ii=i, oo=o, grid=None):
            b = instance_bound(aa, ii, oo, cost, m_kv, f, t, alpha=alpha, criterion=criterion, grid_s=grid)
            return b.workers_real if b.feasible else math.inf

        tol = 1e-9
        assert real(f2, t1) <= real(f1, t1) * (1 + tol)
        assert real(f1, t2) <= real(f1, t1) * (1 + tol)
        assert real(f2, t2) <= real(f1, t1) * (1 + tol)
        assert real(f1, t1, p1) <= real(f1, t1, p2) * (1 + tol)
        assert real(f1, t1, min(p1, 0.99), "percentile") <= real(f1, t1, min(p2, 0.99), "percentile") * (1 + tol)
        # adding requests (attainment 1, fixed grid): never lower
        extra = _random_instance(rng, 10)
        aa, ii, oo = (np.concatenate([x, y]) for x, y in zip((a, i, o), extra))
        assert real(f1, t1, aa=aa, ii=ii, oo=oo, grid=0.5) >= real(f1, t1, grid=0.5) * (1 - tol)
        # a sub-stream of a thinned Poisson stream (common random numbers): never higher
        keep = rng.random(a.size) < 0.6
        if keep.any():
            assert real(f1, t1, aa=a[keep], ii=i[keep], oo=o[keep], grid=0.5) <= real(f1, t1, grid=0.5) * (1 + tol)


def test_steady_state_bound_is_monotone_in_rate_slos_and_alpha():
    cost = load_cost_model(REPO / "models/aladdin/llama-2-70b__h100-80gb-sxm__tp2.yaml")
    dist = find_distribution("sharegpt")
    rng = np.random.default_rng(7)
    kw = dict(sample_size=4000, max_total_tokens=4096)
    for _ in range(6):
        r1, r2 = sorted(rng.uniform(0.5, 30, 2))
        f1, f2 = sorted(rng.uniform(0.8, 3, 2))
        t1, t2 = sorted(rng.uniform(0.045, 0.2, 2))
        a1, a2 = sorted(rng.uniform(0.9, 1.0, 2))

        def real(r, f, t, a=1.0):
            return steady_state_bound(dist, r, cost, 67_000, f, t, alpha=a, **kw).workers_real

        assert real(r1, f1, t1) <= real(r2, f1, t1)
        assert real(r1, f2, t1) <= real(r1, f1, t1) * (1 + 1e-12)
        assert real(r1, f1, t2) <= real(r1, f1, t1) * (1 + 1e-12)
        assert real(r1, f1, t1, a1) <= real(r1, f1, t1, a2) * (1 + 1e-12)
        p1, p2 = min(a1, 0.999), min(a2, 0.999)
        pct = [steady_state_bound(dist, r1, cost, 67_000, f1, t1, alpha=p, criterion="percentile", **kw).workers_real
               for p in (p1, p2)]
        assert pct[0] <= pct[1] * (1 + 1e-12)
    rate = max_rate_per_worker(dist, cost, 67_000, 1.0, 0.05, **kw)
    b = steady_state_bound(dist, 10.0, cost, 67_000, 1.0, 0.05, **kw)
    assert rate == pytest.approx(10.0 / b.workers_real)


# ---------------------------------------------------------------------------------------------
# the shipped scenario numbers


def _scenario():
    cost = load_cost_model(REPO / "models/aladdin/llama-2-70b__h100-80gb-sxm__tp2.yaml")
    model = find_model("Llama-2-70B")
    m_kv = kv_tokens_per_worker(WorkerConfig(gpu=find_gpu("H100-80GB-SXM"), tensor_parallel=2)
                                .kv_capacity_bytes(model), cost)
    return cost, model, m_kv, find_distribution("sharegpt")


def test_shipped_scenario_steady_state_matches_a_direct_token_sum_and_is_monotone_in_tpot(capsys):
    cost, model, m_kv, dist = _scenario()
    n, cap = 20_000, model.max_context_tokens
    b05 = steady_state_bound(dist, 10.0, cost, m_kv, 1.0, 0.05, sample_size=n, max_total_tokens=cap)
    b10 = steady_state_bound(dist, 10.0, cost, m_kv, 1.0, 0.10, sample_size=n, max_total_tokens=cap)
    assert b05.feasible and b10.feasible
    assert b10.workers_real <= b05.workers_real and b10.workers <= b05.workers
    # Independent recomputation at TPOT 0.05, token by token on the same seeded sample: λ per second of
    # k1·I·f/(f − c1) + Σ_j e_j + c2·max((Σ√e)²/((τ − c2)·N), ΣL/M) with exact sums over j.
    inp, out = dist.sample(n, np.random.default_rng([0, 23]), model.max_context_tokens)
    k1, c1, k2, k3, c2 = (cost.prefill_s_per_token, cost.prefill_base_s, cost.decode_s_per_request,
                          cost.decode_s_per_context_token, cost.decode_base_s)
    ctx = np.concatenate([np.arange(i, i + o - 1, dtype=float) for i, o in zip(inp, out)])
    e = k2 + k3 * ctx
    pre = (k1 * inp * 1.0 / (1.0 - c1)).sum()
    it = max(np.sqrt(e).sum() ** 2 / ((0.05 - c2) * ctx.size), ctx.sum() / m_kv)
    direct = 10.0 * (pre + e.sum() + c2 * it) / n
    assert b05.workers_real == pytest.approx(direct, rel=1e-4)  # the √-sum is an integral lower bound
    assert b05.workers_real <= direct
    # A finite Poisson window of the same stream: its bound is below the steady state's (edge effects
    # only lower it) and within 15 % of it.
    w = poisson_workload(dist, rate=10.0, duration_s=300, seed=1, max_total_tokens=model.max_context_tokens)
    inst = instance_bound(w.arrival_s, w.input_tokens, w.output_tokens, cost, m_kv, 1.0, 0.05)
    assert 0.85 * b05.workers_real <= inst.workers_real <= 1.05 * b05.workers_real
    with capsys.disabled():
        print(f"\n[bound] ShareGPT ≤ 4096 tokens, 10 req/s, TTFT 1 s: TPOT 0.05 → {b05.workers} "
              f"({b05.workers_real:.2f}; prefill {b05.prefill_workers:.2f} + c1 {b05.prefill_batches_workers:.2f} "
              f"+ decode tokens {b05.decode_token_workers:.2f} + c2·R {b05.iteration_workers:.2f} from "
              f"{b05.iterations_from}; memory {b05.memory_workers:.2f}); TPOT 0.1 → {b10.workers} "
              f"({b10.workers_real:.2f}, R from {b10.iterations_from}); 300 s instance → {inst.workers} "
              f"({inst.workers_real:.2f}) {b05.relative_to[:60]}…")


# ---------------------------------------------------------------------------------------------
# bad input


@pytest.mark.parametrize("kwargs, needle", [
    (dict(ttft_s=0.0), "ttft_s"),
    (dict(tpot_s=-1.0), "tpot_s"),
    (dict(kv_tokens_per_worker=float("nan")), "kv_tokens_per_worker"),
    (dict(alpha=1.5), "alpha"),
    (dict(alpha=1.0, criterion="percentile"), "percentile"),
    (dict(criterion="median"), "criterion"),
])
def test_bad_arguments_give_one_line(kwargs, needle):
    args = dict(arrival_s=[0.0], input_tokens=[5], output_tokens=[3], cost=_cost(), kv_tokens_per_worker=100.0,
                ttft_s=1.0, tpot_s=0.1)
    args.update(kwargs)
    with pytest.raises(PlannerError) as err:
        instance_bound(**args)
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_bad_requests_and_rate_give_one_line():
    cost = _cost()
    for a, i, o, needle in [([], [], [], "no requests"), ([0.0], [5, 6], [1], "differ in length"),
                            ([0.0], [0], [1], "input_tokens"), ([0.0], [5], [1.5], "output_tokens"),
                            ([float("inf")], [5], [1], "arrival_s")]:
        with pytest.raises(PlannerError, match=needle):
            instance_bound(a, i, o, cost, 100, 1.0, 0.1)
    with pytest.raises(PlannerError, match="rate"):
        steady_state_bound(find_distribution("sharegpt"), 0.0, cost, 100, 1.0, 0.1)
