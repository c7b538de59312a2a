"""Every ``define_*`` constraint family of the placement MIP checked on a hand-solved tiny case.

Equations: docs/formulations.md §1.3 (Aladdin's placement MIP, M0–M6) and the docstrings of
`planner/placement/formulation.py`.  Each test builds the model through `build_model`, picks the
family's rows by their row-block name and compares them with a matrix (or row activities) derived
by hand in the comments.

Toy worker (tests/conftest.py): KV capacity = (memory − 1 GB) / 1 MB per token (2 GB → 1000 tokens);
cost model k1 = 1 ms/token, c1 = 0.1 s, k2 = 10 ms/request, k3 = 0, c2 = 0.05 s unless overridden.
Column layout of `build_model`: ``assign`` x (one column per eligible (request, worker) pair, candidate
worker u lists its eligible requests in request order), then ``open`` y (one per candidate worker),
then the class indicators and KV chain columns.
"""

from __future__ import annotations

import numpy as np
import pytest

from support import toy_cost, toy_problem
from support.rows import family

from planner.core.types import SLOClass
from planner.placement.formulation import build_model
from planner.placement.problem import OngoingState


def xy(pm, dense):
    """The x and y columns of ``dense`` (asserting no other column is touched)."""
    cols = np.concatenate([pm.assign.columns, pm.open.columns])
    rest = np.setdiff1d(np.arange(dense.shape[1]), cols)
    assert not dense[:, rest].any(), "the family touches columns other than x and y"
    return dense[:, cols]


def three_requests(num_candidates=2, **kw):
    """Decode-only, three new requests with remaining 1 iteration: KV peak = I tokens.

    Normalised sizes (KV share dominates: ATGT share 0.01/0.95): r0 100/1000, r1 300/1000, r2 200/1000,
    so the symmetry-breaking ranks are r1 → 0, r2 → 1, r0 → 2 and candidate u takes ranks ≥ u:
    candidate 0 → r0, r1, r2 (x0, x1, x2); candidate 1 → r0, r2 (x3, x4); candidate 2 → r0 (x5).
    """
    p = toy_problem([(100, 1), (300, 1), (200, 1)], **kw)
    return p, build_model(p, num_candidates)


def test_slots_follow_symmetry_breaking_ranks():
    """make_slots: the request of rank k may use candidate workers 0..k (exact symmetry breaking)."""
    _, pm = three_requests(3)
    assert pm.slots.pair_request.tolist() == [0, 1, 2, 0, 2, 0]
    assert pm.slots.pair_slot.tolist() == [0, 0, 0, 1, 1, 2]


def test_define_assignment_each_new_request_once():
    """(M1) Σ_j x_ij = 1 ∀ i ∈ R_new (Aladdin placement, docs/formulations.md §1.3)."""
    _, pm = three_requests()
    A, lo, hi = family(pm.model, "assignment")
    #            x0 x1 x2 x3 x4 | y0 y1
    expected = [[1, 0, 0, 1, 0, 0, 0],  # r0 on candidate 0 or 1
                [0, 1, 0, 0, 0, 0, 0],  # r1 (rank 0) only on candidate 0
                [0, 0, 1, 0, 1, 0, 0]]  # r2 on candidate 0 or 1
    np.testing.assert_allclose(xy(pm, A), expected)
    np.testing.assert_allclose(lo, 1.0)
    np.testing.assert_allclose(hi, 1.0)


def test_define_decode_slo_single_class_knapsack():
    """(M2, Aladdin Eqs. 3–4) k3·Σ x_ij·ℓ_i(λ) + k2·Σ x_ij + c2·y_j ≤ t_atgt·y_j, scaled by 1/(t_atgt − c2).

    k3 = 1e-4 s/token, k2 = 0.01 s, c2 = 0.05 s, t_atgt = 0.2 s → scale 1/0.15.
    r0 (I=400, ô=200), r1 (I=100, ô=100); λ = 0.5: ℓ = 500, 150 → loads 0.06, 0.025 s → 0.4, 1/6.
    λ = 1: ℓ = 600, 200 → 0.07, 0.03 s → 7/15, 0.2.
    Ranks: r0 larger → candidate 0: r0, r1 (x0, x1); candidate 1: r1 (x2).
    """
    cost = toy_cost(decode_s_per_context_token=1e-4)
    for lam, (l0, l1) in [(0.5, (0.4, 1 / 6)), (1.0, (7 / 15, 0.2))]:
        p = toy_problem([(400, 200), (100, 100)], atgt=0.2, strictness=lam, cost=cost, gpu_memory_gb=10.0)
        pm = build_model(p, 2)
        A, lo, hi = family(pm.model, "decode_slo")
        #            x0  x1  x2 | y0  y1
        expected = [[l0, l1, 0, -1, 0],
                    [0, 0, l1, 0, -1]]
        np.testing.assert_allclose(xy(pm, A), expected, rtol=1e-12)
        np.testing.assert_allclose(hi, 0.0, atol=1e-15)
        assert np.all(lo == -np.inf)
    # Feasibility at λ = 1: both on candidate 0 → 7/15 + 0.2 = 2/3 ≤ 1 (0.1 s ≤ 0.15 s), accepted;
    # with t_atgt = 0.12 (scale 1/0.07) the same point gives 0.1/0.07 > 1, rejected.
    for atgt, ok in [(0.2, True), (0.12, False)]:
        p = toy_problem([(400, 200), (100, 100)], atgt=atgt, strictness=1.0, cost=cost, gpu_memory_gb=10.0)
        pm = build_model(p, 2)
        A, lo, hi = family(pm.model, "decode_slo")
        point = np.zeros(pm.model.num_cols)
        point[pm.assign.col(0)] = point[pm.assign.col(1)] = point[pm.open.col(0)] = 1.0
        act = A @ point
        assert bool(np.all(act <= hi + 1e-12)) is ok, act


def test_define_decode_slo_ongoing_worker_moves_its_load_to_the_right_side():
    """(M2) On an ongoing worker y ≡ 1 and the ongoing load is a constant: Σ load_i·x_ij/(L−c2) ≤ 1 − load_on/(L−c2).

    Ongoing r0 on worker 0 (load k2 = 0.01 s), new r1 (load 0.01 s), t_atgt = 1.0, c2 = 0.05 → scale 1/0.95.
    One candidate: pairs (r1, worker 0) = x0, (r1, candidate 0) = x1.
    """
    p = toy_problem([(100, 50), (100, 5)], ongoing={"r0": OngoingState(worker=0, generated_tokens=10, decode_s=1.0)})
    pm = build_model(p, 1)
    A, lo, hi = family(pm.model, "decode_slo")
    #            x0         x1        y0
    expected = [[0.01 / 0.95, 0, 0],
                [0, 0.01 / 0.95, -1]]
    np.testing.assert_allclose(xy(pm, A), expected, rtol=1e-12)
    np.testing.assert_allclose(hi, [1 - 0.01 / 0.95, 0.0], rtol=1e-12, atol=1e-15)


def test_define_decode_slo_tighter_class_indicator():
    """(M2 with SLO classes) Σ load·x/(L−c2) − y_j + (L−t)/(L−c2)·z_jt ≤ 0 and x_ij − z_jt ≤ 0 for i of class t.

    tight t = 0.08 s, loose L = 0.2 s, load k2 = 0.01 s, c2 = 0.05 → scale 1/0.15, (L − t)/0.15 = 0.8.
    r0 tight, r1 r2 loose; one candidate worker: x0, x1, x2, y0, z0.  z = 1 leaves Σ load ≤ t − c2 = 0.03 s:
    three requests fit (3/15 − 1 + 0.8 = 0), four would not.
    """
    slos = {"tight": SLOClass(ttft_s=10, atgt_s=0.08), "loose": SLOClass(ttft_s=10, atgt_s=0.2)}
    p = toy_problem([(10, 5)] * 3, slos=slos, classes=["tight", "loose", "loose"], gpu_memory_gb=10.0)
    pm = build_model(p, 1)
    A, lo, hi = family(pm.model, "decode_slo")
    z = pm.indicators[0].block
    assert z is not None and z.size == 1
    cols = np.concatenate([pm.assign.columns, pm.open.columns, z.columns])
    assert not np.delete(A, cols, axis=1).any()
    k = 1 / 15
    #           x0 x1 x2  y0   z0
    expected = [[k, k, k, -1, 0.0],   # loose limit L
                [k, k, k, -1, 0.8],   # tight limit t when z = 1
                [1, 0, 0, 0, -1.0]]   # link: the tight request forces z
    np.testing.assert_allclose(A[:, cols], expected, rtol=1e-12)
    np.testing.assert_allclose(hi, 0.0, atol=1e-15)
    point = np.zeros(pm.model.num_cols)
    point[cols] = [1, 1, 1, 1, 1]
    assert np.all(A @ point <= hi + 1e-12)  # 3·0.01 = 0.03 ≤ 0.03: tight row at equality
    point[z.col(0)] = 0.0
    assert (A @ point)[2] > 0  # the tight request without its indicator is rejected by the link


def colocated_with_ongoing(prompt):
    """Colocated: ongoing r0 on worker 0 (g = 10 in τ = 9.5 s, t_atgt 1.0 → slack s = 0.5 s), new r1 of ``prompt`` tokens.

    One candidate worker: x0 = (r1, worker 0), x1 = (r1, candidate 0), y0.
    """
    p = toy_problem(
        [(100, 50), (prompt, 5)], mode="colocated", ttft=1.0, gpu_memory_gb=10.0,
        ongoing={"r0": OngoingState(worker=0, generated_tokens=10, decode_s=9.5)},
    )
    return p, build_model(p, 1)


def test_define_ttft_prefill_batch():
    """(M3, Aladdin Eq. 2) k1·Σ_{i∈R_new} x_ij·I_i + c1·y_j ≤ t_ttft·y_j, scaled by 1/(t_ttft − c1).

    I = 300, k1 = 1 ms → 0.3 s; t_ttft = 1.0, c1 = 0.1 → coefficient 0.3/0.9 = 1/3.
    Ongoing worker (y ≡ 1): (1/3)·x0 ≤ 1; candidate: (1/3)·x1 − y0 ≤ 0.
    """
    _, pm = colocated_with_ongoing(300)
    A, lo, hi = family(pm.model, "ttft")
    np.testing.assert_allclose(xy(pm, A), [[1 / 3, 0, 0], [0, 1 / 3, -1]], rtol=1e-12)
    np.testing.assert_allclose(hi, [1.0, 0.0], atol=1e-15)


def test_define_prefill_preemption_ongoing_slack():
    """(M4) k1·Σ_{i∈R_new} x_ij·I_i + c1 ≤ s_j = min_{i on j}(t_atgt·g_i − τ_i), scaled by 1/(s_j − c1).

    s_0 = 1.0·10 − 9.5 = 0.5 s; I = 300 → 0.3/(0.5 − 0.1) = 0.75 ≤ 1 (accepted at x0 = 1).
    I = 500 would need 0.6 s > 0.5: the pair is not eligible at all (no x column on worker 0).
    """
    _, pm = colocated_with_ongoing(300)
    A, lo, hi = family(pm.model, "prefill_preemption")
    np.testing.assert_allclose(xy(pm, A), [[0.75, 0, 0]], rtol=1e-12)
    np.testing.assert_allclose(hi, [1.0])
    _, pm = colocated_with_ongoing(500)
    assert pm.slots.pair_slot.tolist() == [1]  # only the candidate worker
    assert "prefill_preemption" not in pm.model.families


@pytest.mark.parametrize("memory_gb, ok", [(1.128, True), (1.127, False)])
def test_define_kv_capacity_dense_rows_at_needed_breakpoint(memory_gb, ok):
    """(M5) Σ_i x_ij·v_i[τ] ≤ θ·M_kv·y_j at the completion breakpoints, v_i[τ] = kv(I_i + g_i + τ − 1), scaled by 1/cap.

    A (I=10, ô=100), B (I=100, ô=10); breakpoints τ ∈ {100, 10}.  τ = 100: only A, 109 tokens ≤ cap —
    implied, dropped.  τ = 10: 19 + 109 = 128 tokens.  cap = 128 (1.128 GB) or 127 → one row
    (19/cap)·xA + (109/cap)·xB − y0 ≤ 0 on the single candidate; the point xA = xB = y0 = 1 sits at
    128/cap − 1: 0 (accepted) or 1/127 (rejected).
    """
    p = toy_problem([(10, 100), (100, 10)], gpu_memory_gb=memory_gb)
    cap = p.arrays.kv_capacity
    assert cap == pytest.approx(128.0 if ok else 127.0)
    pm = build_model(p, 1)
    A, lo, hi = family(pm.model, "kv_capacity")
    np.testing.assert_allclose(xy(pm, A), [[19 / cap, 109 / cap, -1]], rtol=1e-12)
    np.testing.assert_allclose(hi, [0.0], atol=1e-15)
    point = np.zeros(pm.model.num_cols)
    point[[pm.assign.col(0), pm.assign.col(1), pm.open.col(0)]] = 1.0
    assert bool((A @ point)[0] <= hi[0] + 1e-12) is ok


def test_define_kv_capacity_ongoing_worker_carries_its_kv_on_the_right_side():
    """(M5) On an ongoing worker y ≡ 1: Σ_{r_i ≥ τ} ((w_i + τ − 1)/cap)·x_ij ≤ 1 − ongoing_j(τ)/cap.

    Ongoing r0 on worker 0: I = 50, ô = 60, g = 10 → remaining 50, KV base 60.  New r1, r2: I = 20, ô = 30
    (remaining 30).  cap = 150 tokens (1.15 GB).  Breakpoint τ = 30: ongoing 60 + 29 = 89, each new 20 + 29 = 49:
    one new request fits (138 ≤ 150, so both pairs are eligible on worker 0), both do not (187).
    Worker 0's row: (49/150)·x(r1,w0) + (49/150)·x(r2,w0) ≤ 1 − 89/150.  The candidate worker holds at most
    98 tokens at τ = 30 — implied, no row.  Columns: x0 = (r1, w0), x1 = (r2, w0), x2 = (r1, c0), x3 = (r2, c0).
    """
    p = toy_problem([(50, 60), (20, 30), (20, 30)], gpu_memory_gb=1.15,
                    ongoing={"r0": OngoingState(worker=0, generated_tokens=10, decode_s=1.0)})
    assert p.arrays.kv_capacity == pytest.approx(150.0)
    pm = build_model(p, 1)
    assert pm.slots.pair_request.tolist() == [1, 2, 1, 2] and pm.slots.pair_slot.tolist() == [0, 0, 1, 1]
    A, lo, hi = family(pm.model, "kv_capacity")
    np.testing.assert_allclose(xy(pm, A), [[49 / 150, 49 / 150, 0, 0, 0]], rtol=1e-12)
    np.testing.assert_allclose(hi, [1 - 89 / 150], rtol=1e-12)
    assert 49 / 150 <= hi[0] < 98 / 150  # one new request accepted, two rejected


def test_define_kv_capacity_chain_rows_at_a_hand_built_point():
    """(M5, cumulative form) S_q = S_{q−1} + Σ_{r_i=τ_q} w_i·x_i / cap, N_q = N_{q−1} + Σ_{r_i=τ_q} x_i,
    S_q + (τ_q − 1)/cap·N_q − y ≤ −ongoing/cap.

    Chains pay off only when Σ_τ |live(τ)| > 2|R| + 7|τ|: 18 requests i = 1..18 with I = 10, ô = i
    (remaining r_i = i, w_i = 10), cap = 20 tokens (1.02 GB) so every breakpoint τ = 1..18 is needed
    ((19 − τ)·(9 + τ) > 20).  Dense: 171 nonzeros, chain: 36 + 126 = 162 → chain.
    Point: requests 1..18 all on the candidate worker, y = 1; at τ the live requests are those with
    i ≥ τ, so S(τ) = 10·(19 − τ)/20, N(τ) = 19 − τ, and the capacity row reads
    ((19 − τ)·(10 + τ − 1))/20 − 1 — the KV of the live requests over the capacity, minus 1.
    """
    p = toy_problem([(10, i) for i in range(1, 19)], gpu_memory_gb=1.02, atgt=10.0)
    cap = p.arrays.kv_capacity
    assert cap == pytest.approx(20.0)
    pm = build_model(p, 1)
    assert len(pm.kv.levels) == 1
    slot, offset, taus = pm.kv.levels[0]
    np.testing.assert_array_equal(taus, np.arange(18, 0, -1))
    A, lo, hi = family(pm.model, "kv_capacity")
    assert A.shape[0] == 3 * 18  # tokens chain, requests chain, capacity
    point = np.zeros(pm.model.num_cols)
    point[pm.assign.columns] = 1.0  # one candidate: every request has exactly one column
    point[pm.open.col(0)] = 1.0
    live = 19 - taus
    point[pm.kv.tokens.start + offset + np.arange(18)] = 10 * live / 20
    point[pm.kv.requests.start + offset + np.arange(18)] = live
    act = A @ point
    np.testing.assert_allclose(act[:36], 0.0, atol=1e-12)  # chains hold with equality
    np.testing.assert_allclose(lo[:36], 0.0)
    np.testing.assert_allclose(hi[:36], 0.0)
    np.testing.assert_allclose(act[36:], live * (10 + taus - 1) / 20 - 1, rtol=1e-12)
    np.testing.assert_allclose(hi[36:], 0.0, atol=1e-15)
    # Drop the request with i = 18 (it alone is live at τ = 18): the chain rows reject the stale S, N.
    point[pm.assign.col(17)] = 0.0
    assert np.abs(A[:36] @ point).max() > 0.1


def test_define_worker_used_and_open_link():
    """(M6) y_j ≤ Σ_i x_ij; open link x_ij ≤ y_j for every candidate pair (Aladdin placement, §1.3)."""
    _, pm = three_requests()
    A, lo, hi = family(pm.model, "worker_used")
    #            x0  x1  x2  x3  x4 | y0 y1
    np.testing.assert_allclose(xy(pm, A), [[-1, -1, -1, 0, 0, 1, 0],
                                           [0, 0, 0, -1, -1, 0, 1]])
    np.testing.assert_allclose(hi, 0.0)
    A, lo, hi = family(pm.model, "open_link")
    np.testing.assert_allclose(xy(pm, A), [[1, 0, 0, 0, 0, -1, 0],
                                           [0, 1, 0, 0, 0, -1, 0],
                                           [0, 0, 1, 0, 0, -1, 0],
                                           [0, 0, 0, 1, 0, 0, -1],
                                           [0, 0, 0, 0, 1, 0, -1]])
    np.testing.assert_allclose(hi, 0.0)
    assert "open_link" not in build_model(three_requests()[0], 2, open_link=False).model.families


def test_define_symmetry_breaking_prefix():
    """Used candidate workers form a prefix: y_j − y_{j+1} ≥ 0 (see make_slots)."""
    _, pm = three_requests(3)
    A, lo, hi = family(pm.model, "symmetry_breaking")
    np.testing.assert_allclose(A[:, pm.open.columns], [[1, -1, 0], [0, 1, -1]])
    assert not np.delete(A, pm.open.columns, axis=1).any()
    np.testing.assert_allclose(lo, 0.0)
    assert np.all(hi == np.inf)


def test_define_worker_count_bounds_with_ongoing_workers():
    """lower ≤ K + Σ_j y_j ≤ upper: with K = 1 ongoing worker, lower 2, cap 3 → 1 ≤ y0 + y1 ≤ 2."""
    p = toy_problem([(100, 50), (100, 5), (100, 5)], max_workers=3,
                    ongoing={"r0": OngoingState(worker=0, generated_tokens=10, decode_s=1.0)})
    pm = build_model(p, 2, lower_bound=2)
    A, lo, hi = family(pm.model, "max_workers")
    np.testing.assert_allclose(A[:, pm.open.columns], [[1, 1]])
    assert not np.delete(A, pm.open.columns, axis=1).any()
    assert (lo[0], hi[0]) == (1.0, 2.0)
    # Without a cap the family is the lower-bound cut "worker_count": y0 + y1 ≥ 1.
    p2 = toy_problem([(100, 50), (100, 5), (100, 5)],
                     ongoing={"r0": OngoingState(worker=0, generated_tokens=10, decode_s=1.0)})
    pm2 = build_model(p2, 2, lower_bound=2)
    A, lo, hi = family(pm2.model, "worker_count")
    np.testing.assert_allclose(A[:, pm2.open.columns], [[1, 1]])
    assert not np.delete(A, pm2.open.columns, axis=1).any()
    assert (lo[0], hi[0]) == (1.0, np.inf)
