"""Every ``define_*`` of the batching MIPs checked on a hand-solved tiny case.

Equations: docs/formulations.md §3.3 (InferMax's batch-schedule MIP, big-M form: constraints (1)–(6), the
exact c² secants, the ``cut_*`` valid inequalities) and §3.4 (the per-request path model), and the
docstrings of `planner/batching/formulation.py` and `flow_formulation.py`.

The instance: request A (I = 2, O = 2) and request B (I = 1, O = 1), limits C = P = M = 3, J = 3 batches,
cost model (per-layer ms, n_layers = 1 so scale = 1e-3 s/ms and `time_unit` = 1000: model time = ms):
a_o = 1, b_o = 2, a_p = 3, b_p = 4, s_p = 12, a_d = 6, b_d = 7, s_d = 8.

The hand schedule: batch 1 prefills A (2 tokens) and B (1 token) — each makes its first token; batch 2
decodes A (1 token, reading A's 2 KVs) and releases the finished B by a cost-free eviction (B was in its
decode phase: Iin ← m + 1 = 2 = U_B + 1); batch 3 is empty and releases A (Iin ← 3 + 1 = 4).
Its column values, written out per variable for j = 0..3 (j = 0 is the fixed initial state), follow;
the tests check that every family's rows accept this point and that a named change to it is rejected
by the family it breaks.
"""

from __future__ import annotations

import numpy as np
import pytest

from support.rows import family
from support.rows import violation as family_violation

from planner.batching.costmodel import InferMaxCostModel
from planner.batching.flow_formulation import DECODE, EVICT, IDLE_D, IDLE_E, IDLE_R, PREFILL, build_flow_model
from planner.batching.formulation import CUT_DEFINITIONS, CUT_FAMILIES, build_model
from planner.batching.problem import make_problem

COST = InferMaxCostModel(n_layers=1, a_o=1, b_o=2, a_p=3, b_p=4, s_p=12, a_d=6, b_d=7, s_d=8)
A, B = 0, 1

#: the hand schedule, per variable: rows A, B; columns j = 0..3 (module docstring)
HAND = {
    "Iin": [[2, 2, 2, 4], [1, 1, 2, 2]],
    "m":   [[0, 2, 3, 0], [0, 1, 0, 0]],
    "c":   [[0, 2, 1, 0], [0, 1, 0, 0]],
    "d":   [[0, 0, 1, 1], [0, 0, 1, 0]],   # d_j = [m_{j−1} ≥ Iin_{j−1}]
    "q":   [[0, 1, 1, 0], [0, 1, 0, 0]],   # q_j = [m_j ≥ Iin_j]
    "g":   [[0, 1, 1, 0], [0, 1, 0, 0]],   # a token is generated
    "e":   [[0, 0, 0, 1], [0, 0, 1, 0]],   # evictions (releases)
    "ed":  [[0, 0, 0, 1], [0, 0, 1, 0]],   # e ∧ d
    "cz":  [[0, 1, 1, 0], [0, 1, 0, 0]],   # c > 0
    "mz":  [[0, 1, 1, 0], [0, 1, 0, 0]],   # m > 0
    "dg":  [[0, 0, 1, 0], [0, 0, 0, 0]],   # a decode that generates
    "sq":  [[0, 4, 1, 0], [0, 1, 0, 0]],   # c²
    "w":   [[0, 0, 2, 0], [0, 0, 0, 0]],   # KVs read by a decode
    "u":   [0, 1, 1, 0],
    "up":  [0, 1, 0, 0],
    "ud":  [0, 0, 1, 0],
}
#: batch times of the hand schedule (ms; §3.2: a_o Σc + b_o + a_p(Σc² over prefills) + b_p + s_p·#prefills
#: + a_d Σw + b_d + s_d·#decodes): batch 1 = 3 + 2 + 3·(4 + 1) + 4 + 12·2 = 48, batch 2 = 1 + 2 + 6·2 + 7 + 8 = 30
BATCH_TIMES = (48.0, 30.0, 0.0)


def problem(**kw):
    limits = dict(C=3, P=3, M=3)
    limits.update(kw)
    return make_problem([2, 1], [2, 1], cost=COST, **limits)


def hand_point(bm, changes=None):
    """The hand schedule as a column vector of ``bm``; ``changes``: {(var, i, j) or (var, j): value}."""
    v = bm.vars
    x = np.zeros(bm.model.num_cols)
    for name, val in HAND.items():
        x[getattr(v, name).columns] = np.asarray(val, float).ravel()
    for key, val in (changes or {}).items():
        blk = getattr(v, key[0])
        x[blk.col(*key[1:])] = val
    return x


@pytest.fixture(scope="module")
def full():
    """The big-M model with every cut group (J = 3)."""
    return build_model(problem(), 3, cuts=tuple(CUT_DEFINITIONS))


def test_hand_schedule_satisfies_every_family(full):
    """The hand schedule is a §3.3 schedule: no row or bound of any family (cuts included) rejects it."""
    x = hand_point(full)
    assert full.model.max_violation(x) == 0.0, [
        (name, family_violation(full.model, name, x)) for name in full.model.families
        if family_violation(full.model, name, x) > 0]
    for name in ("termination", "link_d", "link_q", "link_ed", "input_growth", "memory_update", "prefill_no_overrun",
                 "evict_no_tokens", "decode_one_token", "finished_no_tokens", "link_cz", "link_mz", "link_g",
                 "link_dg", "batch_C", "batch_P", "batch_M", "prefill_square", "kv_read", "batch_indicators",
                 "batch_nonempty", "empty_batches_last", *CUT_FAMILIES[:-1]):
        assert name in full.model.families, name
    # no memory clique here: for i0 = A the threshold is max(M − 2, M/2) = 1.5 ≥ I_B; for i0 = B it is 2 ≥ I_A
    assert "cut_memory_clique" not in full.model.families


def test_define_variables_bounds(full):
    """define_variables: Iin ∈ [I, U+1], m ∈ [0, U], c ∈ [0, min(P, U)], sq ≤ cmax², w ≤ U, column 0 the initial state
    (U_A = 3, cmax_A = 3; U_B = 1, cmax_B = 1)."""
    m, v = full.model, full.vars

    def bounds(blk):
        sl = slice(blk.start, blk.start + blk.size)
        return m.col_lower[sl].reshape(blk.shape).tolist(), m.col_upper[sl].reshape(blk.shape).tolist()

    assert bounds(v.Iin) == ([[2] * 4, [1] * 4], [[2, 4, 4, 4], [1, 2, 2, 2]])
    assert bounds(v.m) == ([[0] * 4] * 2, [[0, 3, 3, 3], [0, 1, 1, 1]])
    assert bounds(v.c) == ([[0] * 4] * 2, [[0, 3, 3, 3], [0, 1, 1, 1]])
    assert bounds(v.sq)[1] == [[0, 9, 9, 9], [0, 1, 1, 1]]
    assert bounds(v.w)[1] == [[0, 3, 3, 3], [0, 1, 1, 1]]
    for name in ("d", "q", "g", "e", "ed", "cz", "mz", "dg"):
        assert bounds(getattr(v, name))[1] == [[0, 1, 1, 1]] * 2, name
    assert v.start is None and v.ttft is None and v.G is None  # offline latency model
    assert m.integrality[v.c.columns].all() and not m.integrality[v.sq.columns].any()


def test_define_termination_exact_rows(full):
    """(1) Σ_j g_ij = O_i: rows g_A1 + g_A2 + g_A3 = 2, g_B1 + g_B2 + g_B3 = 1."""
    A_, lo, hi = family(full.model, "termination")
    g = full.vars.g
    expected = np.zeros((2, full.model.num_cols))
    expected[0, g.col(A, np.arange(1, 4))] = 1
    expected[1, g.col(B, np.arange(1, 4))] = 1
    np.testing.assert_array_equal(A_, expected)
    assert lo.tolist() == hi.tolist() == [2, 1]


@pytest.mark.parametrize("name, changes", [
    # define_termination (1): A makes only one token
    ("termination", {("g", A, 2): 0}),
    # define_phase_links: m_A1 = 2 ≥ Iin_A1 = 2 so d_A2 must be 1 (m − Iin ≤ Mi·d − 1 reads 0 ≤ −1)
    ("link_d", {("d", A, 2): 0}),
    # define_phase_links: m_B2 = 0 < Iin_B2 = 2 so q_B2 must be 0 (m − Iin ≥ −Mi(1 − q) reads −2 ≥ 0)
    ("link_q", {("q", B, 2): 1}),
    # define_input_growth: e_B2 = d_B2 = 1 forces ed_B2 = 1
    ("link_ed", {("ed", B, 2): 0}),
    # define_input_growth (2)/(6): B evicted in its decode phase must get Iin = m_{j−1} + 1 = 2, not keep 1
    ("input_growth", {("Iin", B, 2): 1}),
    # define_memory_update (3): m_A2 = m_A1 + c_A2 = 3, not 2
    ("memory_update", {("m", A, 2): 2}),
    # define_memory_update (3): a prefill may not run past Iin (A has Iin = 2 but would hold 3 after batch 1)
    ("prefill_no_overrun", {("m", A, 1): 3, ("c", A, 1): 3, ("sq", A, 1): 9}),
    # define_token_rules (4): an evicted request processes no token in that batch
    ("evict_no_tokens", {("c", B, 2): 1}),
    # define_token_rules (4): a decode processes one token (c + (cmax − 1)·d ≤ cmax: 2 + 2 > 3)
    ("decode_one_token", {("c", A, 2): 2}),
    # define_token_rules: B is released (Iin_B2 = U_B + 1 = 2), so it may not process a token in batch 3
    ("finished_no_tokens", {("c", B, 3): 1}),
    ("link_cz", {("cz", A, 1): 0}),       # c_A1 = 2 > 0 forces cz = 1
    ("link_mz", {("mz", A, 1): 0}),       # m_A1 = 2 > 0 forces mz = 1
    ("link_g", {("q", A, 1): 0}),         # g = cz ∧ q: g_A1 = 1 needs q_A1 = 1
    ("link_dg", {("dg", A, 2): 0}),       # dg = d ∧ g: d_A2 = g_A2 = 1 forces dg = 1
    # define_cost_terms: secant k = 1 of c²: sq ≥ 3c − 2 = 4 at c = 2
    ("prefill_square", {("sq", A, 1): 3}),
    # define_cost_terms: a decode of A in batch 2 reads m_A1 = 2 KVs: w ≥ m_{j−1} − U(1 − dg) = 2
    ("kv_read", {("w", A, 2): 1}),
    # define_cost_terms: batch 1 holds prefills (cz − dg = 1), so up_1 = 1
    ("batch_indicators", {("up", 1): 0}),
    # define_cost_terms: a batch in use processes a token (batch 3 has none)
    ("batch_nonempty", {("u", 3): 1}),
    # define_cost_terms: empty batches last, u_2 ≥ u_3
    ("empty_batches_last", {("u", 2): 0, ("u", 3): 1}),
    # define_request_work_cuts: A's share without the KV read of its decode is 47 − 12 = 35 < L_A = 47
    ("cut_request_work", {("w", A, 2): 0}),
    # define_token_total_cuts: Σ_j c_Aj ≥ I + O − 1 = 3
    ("cut_token_total", {("c", A, 2): 0}),
    # define_token_total_cuts: Σ_j (g − dg) ≥ 1 (the first token completes a prefill)
    ("cut_first_token_prefill", {("dg", A, 1): 1}),
    # define_kv_at_token_cuts: m_ij ≥ I_i·g_ij (A's token in batch 2 leaves ≥ 2 KVs)
    ("cut_kv_at_token", {("m", A, 2): 1}),
    # define_kv_at_token_cuts: Σ_j m_Aj ≥ K_A = O·I + O(O−1)/2 = 5
    ("cut_kv_time", {("m", A, 2): 2}),
    # define_active_batch_cuts: Σ(c − dg) ≤ P·up_1 with up_1 = 0 reads 3 ≤ 0
    ("cut_active_batch", {("up", 1): 0}),
    # define_active_batch_cuts: Σ_j u_j ≥ N_min = 2
    ("cut_batch_count", {("u", 2): 0}),
    # define_batch_kind_cuts: up_2 + ud_2 ≥ u_2
    ("cut_batch_kind", {("ud", 2): 0}),
])
def test_family_rejects_a_broken_hand_schedule(full, name, changes):
    """Each family's rows accept the hand schedule and reject the named change (see the comment per case)."""
    assert family_violation(full.model, name, hand_point(full)) == 0.0
    assert family_violation(full.model, name, hand_point(full, changes)) > 0.5


def test_define_batch_limits_rows_and_activities():
    """(5) per batch: Σ_i c ≤ C, Σ_i (c − dg) ≤ P, Σ_i m ≤ M, Σ_i mz ≤ R_max (only when R_max < N).

    Hand schedule per batch: Σc = 3, 1, 0; Σ(c − dg) = 3, 0, 0; Σm = 3, 3, 0; Σmz = 2, 1, 0."""
    bm = build_model(problem(R_max=1), 3, cuts=False)
    x = hand_point(bm)
    for name, limit, activity in (("batch_C", 3, [3, 1, 0]), ("batch_P", 3, [3, 0, 0]), ("batch_M", 3, [3, 3, 0]),
                                  ("batch_R", 1, [2, 1, 0])):
        A_, lo, hi = family(bm.model, name)
        assert A_.shape[0] == 3 and hi.tolist() == [limit] * 3, name
        np.testing.assert_allclose(A_ @ x, activity, err_msg=name)
    assert family_violation(bm.model, "batch_R", x) == 1.0  # two requests hold KV in batch 1, R_max = 1
    assert "batch_R" not in build_model(problem(R_max=2), 3, cuts=False).model.families  # R_max ≥ N: no rows


def test_define_cost_terms_secants_of_c_squared(full):
    """sq ≥ (2k+1)·c − k(k+1), k = 0..cmax−1: for A (cmax = 3) the max over k at c = 0, 1, 2, 3 is 0, 1, 4, 9 = c²."""
    A_, lo, hi = family(full.model, "prefill_square")
    v = full.vars
    rows = np.flatnonzero(A_[:, v.sq.col(A, 1)] != 0)
    assert rows.size == 3  # k = 0, 1, 2
    for c in range(4):
        x = np.zeros(full.model.num_cols)
        x[v.c.col(A, 1)] = c
        need = max(lo[r] - A_[r] @ x for r in rows)  # least sq with every secant row satisfied
        assert need == c * c


def test_define_request_work_cuts_bound_is_the_hand_minimum(full):
    """Σ_j [a_o c + a_p (sq − dg) + s_p (cz − dg) + a_d w + s_d dg] ≥ L_i (bounds.request_work_bounds).

    By hand: L_A = a_o·3 + prompt (2 tokens, best chunking k* = 2·√(a_p/s_p) = 1 chunk: a_p·4 + s_p = 24)
    + token 2 by a decode (a_d·2 + s_d = 20, cheaper than a refill a_o·2 + 36) = 47; L_B = a_o + a_p + s_p = 16.
    The hand schedule pays exactly these (A: 26 + 21, B: 16), so both rows are tight."""
    A_, lo, hi = family(full.model, "cut_request_work")
    np.testing.assert_allclose(lo, [47 * (1 - 1e-9), 16 * (1 - 1e-9)], rtol=1e-12)
    np.testing.assert_allclose(A_ @ hand_point(full), [47, 16], rtol=1e-12)


def test_define_active_batch_cuts_batch_counts(full):
    """Σ_j u_j ≥ N_min, Σ_j up_j ≥ P_min: N_min ≥ max O = 2 and the hand schedule has 2 batches, so N_min = 2
    exactly (less is a weaker bound, more cuts off a schedule); P_min = 1 (both prompts fit one batch)."""
    A_, lo, hi = family(full.model, "cut_batch_count")
    assert lo.tolist() == [2.0, 1.0]
    np.testing.assert_allclose(A_ @ hand_point(full), [2, 1])


def test_define_memory_clique_cuts_rows():
    """Σ_{i∈S} g_ij ≤ u_j for S = {i0} ∪ {i : I_i > max(M − I_i0, M/2)}: two prompts of 3 tokens with M = 4
    (3 > max(4 − 3, 2)) can never make tokens in the same batch: rows g_0j + g_1j − u_j ≤ 0, j = 1, 2."""
    bm = build_model(make_problem([3, 3], [1, 1], cost=COST, C=6, M=4), 2, cuts=("memory_clique",))
    A_, lo, hi = family(bm.model, "cut_memory_clique")
    v = bm.vars
    expected = np.zeros((2, bm.model.num_cols))
    for r, j in enumerate((1, 2)):
        expected[r, [v.g.col(0, j), v.g.col(1, j)]] = 1
        expected[r, v.u.col(j)] = -1
    np.testing.assert_array_equal(A_, expected)
    assert hi.tolist() == [0.0, 0.0]


def test_define_valid_inequalities_adds_only_the_named_groups():
    """define_valid_inequalities: cuts=("batch_kind",) adds cut_batch_kind only; cuts=False none."""
    fams = set(build_model(problem(), 3, cuts=("batch_kind",)).model.families)
    assert {f for f in fams if f.startswith("cut_")} == {"cut_batch_kind"}
    assert not any(f.startswith("cut_") for f in build_model(problem(), 3, cuts=False).model.families)


def test_define_objective_latency_and_goal(full):
    """min Σ_j T_j (offline): at the hand schedule 48 + 30 + 0 = 78 ms = 0.078 s; goal_latency ≤ 0.078 accepts
    it, ≤ 0.07799 s rejects it."""
    x = hand_point(full)
    assert full.model.cost @ x == pytest.approx(sum(BATCH_TIMES))
    for goal, ok in ((0.078, True), (0.07799, False)):
        bm = build_model(problem(), 3, cuts=False, goal_latency=goal)
        assert (family_violation(bm.model, "goal_latency", hand_point(bm)) == 0.0) is ok


def test_define_timing_online_arrivals():
    """start_j ≥ end_{j−1}, start_j ≥ T_i·cz_ij, end_j = start_j + T_j.  B arrives at 0.01 s = 10 units: batch 1
    starts at 10, ends at 58; batch 2 at 58 → 88; the empty batch 3 at 88 → 88."""
    bm = build_model(make_problem([2, 1], [2, 1], arrivals=[0.0, 0.01], cost=COST, C=3, P=3, M=3), 3, cuts=False)
    x = hand_point(bm)
    x[bm.vars.start.columns] = [0, 10, 58, 88]
    x[bm.vars.end.columns] = [0, 58, 88, 88]
    assert bm.model.max_violation(x) < 1e-9
    assert bm.model.cost @ x == pytest.approx(88)  # online objective: end_J
    early = x.copy()
    early[bm.vars.start.col(1)], early[bm.vars.end.col(1)] = 5, 53  # before B's arrival
    assert family_violation(bm.model, "arrival", early) > 4
    short = x.copy()
    short[bm.vars.end.col(2)] = 87  # batch 2 shorter than its 30 ms
    assert family_violation(bm.model, "batch_end", short) > 0.5
    overlap = x.copy()
    overlap[bm.vars.start.col(2)], overlap[bm.vars.end.col(2)] = 57, 87  # starts before batch 1 ends
    assert family_violation(bm.model, "batch_order", overlap) > 0.5


def test_define_ttft_first_token_batch():
    """ttft_i ≥ end_j − T_i − H·(1 − g_ij + G_i,j−1), G_ij = Σ_{j'≤j} g: both first tokens come from batch 1
    (end 48), so ttft = (48, 48) satisfies every row and the objective mean TTFT is 48; ttft_A = 47 is rejected."""
    bm = build_model(problem(), 3, objective="ttft", cuts=False)
    v = bm.vars
    assert v.G is not None  # O_A = 2 > 1
    x = hand_point(bm)
    x[v.start.columns] = [0, 0, 48, 78]
    x[v.end.columns] = [0, 48, 78, 78]
    x[v.G.columns] = np.array([[0, 1, 2, 2], [0, 1, 1, 1]], float).ravel()
    x[v.ttft.columns] = [48, 48]
    assert bm.model.max_violation(x) < 1e-9
    assert bm.model.cost @ x == pytest.approx(48)
    bad = x.copy()
    bad[v.ttft.col(A)] = 47
    assert family_violation(bm.model, "ttft", bad) > 0.5
    bad = x.copy()
    bad[v.G.col(A, 2)] = 1  # the counter misses A's second token
    assert family_violation(bm.model, "first_token_count", bad) > 0.5


# ---- the path model (§3.4) ----------------------------------------------------------------------------

#: Arcs of the pruned network for J = 3, enumerated by hand (batch j, for t = 0..O−1: from (t, E) idle then
#: prefill, from (t, R) idle, evict, decode; then idle at done).  (request, batch, kind, t_from, tokens, kv)
HAND_ARCS = [
    (A, 1, IDLE_E, 0, 0, 0), (A, 1, PREFILL, 0, 2, 2),
    (A, 2, PREFILL, 0, 2, 2), (A, 2, IDLE_R, 1, 0, 2), (A, 2, EVICT, 1, 0, 0), (A, 2, DECODE, 1, 1, 3),
    (A, 3, PREFILL, 1, 3, 3), (A, 3, DECODE, 1, 1, 3), (A, 3, IDLE_D, 2, 0, 0),
    (B, 1, IDLE_E, 0, 0, 0), (B, 1, PREFILL, 0, 1, 1),
    (B, 2, IDLE_E, 0, 0, 0), (B, 2, PREFILL, 0, 1, 1), (B, 2, IDLE_D, 1, 0, 0),
    (B, 3, PREFILL, 0, 1, 1), (B, 3, IDLE_D, 1, 0, 0),
]
#: the hand schedule as paths: A prefill (1), decode (2), idle done (3); B prefill (1), idle done (2, 3)
PATH = [1, 5, 8, 10, 13, 15]


def flow_point(fm, x_on=PATH, u=(0, 1, 1, 0), up=(0, 1, 0, 0), ud=(0, 0, 1, 0)):
    x = np.zeros(fm.model.num_cols)
    x[fm.vars.x.col(np.asarray(x_on))] = 1
    x[fm.vars.u.columns], x[fm.vars.up.columns], x[fm.vars.ud.columns] = u, up, ud
    return x


def test_flow_arcs_and_define_flow_variables():
    """The pruned time-expanded network (module docstring) and define_flow_variables: x binary per arc,
    u/up/ud binary with column 0 fixed to 0."""
    fm = build_flow_model(problem(), 3)
    a = fm.arcs
    got = list(zip(a.request.tolist(), a.batch.tolist(), a.kind.tolist(), a.t_from.tolist(), a.tokens.tolist(),
                   a.kv.tolist()))
    assert got == HAND_ARCS
    m = fm.model
    assert m.integrality[fm.vars.x.columns].all() and m.col_upper[fm.vars.x.columns].tolist() == [1] * 16
    for blk in (fm.vars.u, fm.vars.up, fm.vars.ud):
        assert m.col_upper[blk.columns].tolist() == [0, 1, 1, 1] and m.integrality[blk.columns].all()
    # objective: arc costs + biases; the hand schedule costs 78 ms as in the big-M model
    assert m.cost @ flow_point(fm) == pytest.approx(sum(BATCH_TIMES))


def test_define_flow_balance_one_path_per_request():
    """Σ_in x − Σ_out x = −1 at each source, +1 at each sink, 0 elsewhere: the hand paths satisfy it; A's path
    without its decode in batch 2 breaks it (two nodes out of balance)."""
    fm = build_flow_model(problem(), 3)
    A_, lo, hi = family(fm.model, "flow_balance")
    x = flow_point(fm)
    assert family_violation(fm.model, "flow_balance", x) == 0.0
    assert sorted(lo.tolist()).count(-1) == 2 and sorted(hi.tolist()).count(1) == 2  # two sources, two sinks
    broken = flow_point(fm, [1, 8, 10, 13, 15])
    assert np.count_nonzero(A_ @ broken - lo) == 2
    assert fm.model.max_violation(x) == 0.0  # every family of the path model accepts the hand paths


@pytest.mark.parametrize("name, kw", [
    ("use_batch", dict(u=(0, 1, 0, 0))),          # A's decode and nothing else in batch 2 ⇒ u_2 = 1
    ("use_prefill", dict(up=(0, 0, 0, 0))),       # prefills in batch 1 ⇒ up_1 = 1
    ("use_decode", dict(ud=(0, 0, 0, 0))),        # A's decode in batch 2 ⇒ ud_2 = 1
    ("kind_prefill", dict(up=(0, 1, 0, 1))),      # up_3 ≤ u_3 = 0
    ("kind_decode", dict(ud=(0, 0, 1, 1))),       # ud_3 ≤ u_3 = 0
    ("kind_any", dict(u=(0, 1, 1, 1))),           # u_3 ≤ up_3 + ud_3 = 0
    ("batch_nonempty", dict(u=(0, 1, 1, 1), up=(0, 1, 0, 1))),  # batch 3 runs no token
    ("empty_batches_last", dict(u=(0, 1, 0, 1))),  # u_2 ≥ u_3
])
def test_define_batch_use_rejects(name, kw):
    """define_batch_use: Σ_{token arcs of i in j} x ≤ u_j (and prefill/decode ≤ up_j/ud_j), up ≤ u, ud ≤ u,
    u ≤ up + ud, u_j ≤ Σ token arcs, u_j ≥ u_{j+1}: each change to the hand point breaks the named rows."""
    fm = build_flow_model(problem(), 3)
    assert family_violation(fm.model, name, flow_point(fm)) == 0.0
    assert family_violation(fm.model, name, flow_point(fm, **kw)) > 0.5


def test_define_flow_batch_limits_rows():
    """(5) Σ c·x ≤ C·u_j, Σ_prefill c·x ≤ P·up_j, Σ kv·x ≤ M·u_j (kv after the batch; B's finishing prefill keeps
    its 1 KV in batch 1, A's finishing decode its 3 in batch 2), Σ_{kv>0} x ≤ R_max.

    Hand paths, per batch: tokens 3, 1, 0; prefill tokens 3, 0, 0; KV 2 + 1 = 3, 3, 0; holders 2, 1, 0."""
    fm = build_flow_model(problem(R_max=1), 3)
    x = flow_point(fm)
    for name, act in (("batch_C", [0, 1 - 3, 0]), ("batch_P", [0, 0, 0]), ("batch_M", [0, 0, 0]),
                      ("batch_R", [2, 1, 0])):
        A_, lo, hi = family(fm.model, name)
        np.testing.assert_allclose(A_ @ x, act, err_msg=name)
    _, _, hi = family(fm.model, "batch_R")
    assert hi.tolist() == [1, 1, 1]
    tight = build_flow_model(problem(M=3, C=3, P=2), 3)  # P = 2 < the 3 prefill tokens of batch 1
    assert family_violation(tight.model, "batch_P", flow_point(tight)) == 1.0


def test_define_prefill_count_cut():
    """Σ_j up_j ≥ least (row cut_prefill_batches, only when least > 1): the hand schedule has one prefill batch."""
    assert "cut_prefill_batches" not in build_flow_model(problem(), 3).model.families
    fm = build_flow_model(problem(), 3, least_prefill_batches=2)
    A_, lo, hi = family(fm.model, "cut_prefill_batches")
    assert lo.tolist() == [2.0]
    np.testing.assert_array_equal(np.flatnonzero(A_[0]), fm.vars.up.columns[1:])
    assert family_violation(fm.model, "cut_prefill_batches", flow_point(fm)) == 1.0


# ---- every big-M row, coefficient by coefficient, from the §3.3 equations ------------------------------

def equation_rows(bm, prob):
    """The rows of every family of the big-M model written from the docstring equations (not from the code):
    {family: [({column: coefficient}, lower, upper), ...]}.  Per request: Mi = I + O, U = I + O − 1,
    cmax = min(P, U); here Mi = (4, 2), U = (3, 1), cmax = (3, 1); cost coefficients in model units (s = 1)."""
    v, J, inf = bm.vars, bm.J, np.inf
    I, O = prob.inputs.tolist(), prob.outputs.tolist()
    rows: dict[str, list] = {}

    def row(fam, terms, lo=-inf, hi=inf):
        coef: dict[int, float] = {}
        for blk, idx, val in terms:
            col = int(blk.col(*idx))
            coef[col] = coef.get(col, 0.0) + float(val)
        rows.setdefault(fam, []).append(({c: a for c, a in coef.items() if a != 0}, float(lo), float(hi)))

    cells = [(i, j) for i in range(prob.n) for j in range(1, J + 1)]
    for i in range(prob.n):  # (1)
        row("termination", [(v.g, (i, j), 1) for j in range(1, J + 1)], O[i], O[i])
    for i, j in cells:
        Mi, U = I[i] + O[i], I[i] + O[i] - 1
        cmax = min(prob.prefill_limit, U)
        # d_j = [m_{j−1} ≥ Iin_{j−1}], q_j = [m_j ≥ Iin_j]:  −Mi(1 − ind) ≤ m − Iin ≤ Mi·ind − 1
        for fam, ind, t in (("link_d", v.d, j - 1), ("link_q", v.q, j)):
            terms = [(v.m, (i, t), 1), (v.Iin, (i, t), -1), (ind, (i, j), -Mi)]
            row(fam, terms, lo=-Mi)
            row(fam, terms, hi=-1)
        # ed = e ∧ d
        row("link_ed", [(v.ed, (i, j), 1), (v.e, (i, j), -1)], hi=0)
        row("link_ed", [(v.ed, (i, j), 1), (v.d, (i, j), -1)], hi=0)
        row("link_ed", [(v.ed, (i, j), 1), (v.e, (i, j), -1), (v.d, (i, j), -1)], lo=-1)
        # (2)/(6): 0 ≤ Iin_j − Iin_{j−1} ≤ Mi·ed,  |Iin_j − m_{j−1} − 1| ≤ Mi(1 − ed)
        row("input_growth", [(v.Iin, (i, j), 1), (v.Iin, (i, j - 1), -1)], lo=0)
        row("input_growth", [(v.Iin, (i, j), 1), (v.Iin, (i, j - 1), -1), (v.ed, (i, j), -Mi)], hi=0)
        row("input_growth", [(v.Iin, (i, j), 1), (v.m, (i, j - 1), -1), (v.ed, (i, j), Mi)], hi=1 + Mi)
        row("input_growth", [(v.Iin, (i, j), 1), (v.m, (i, j - 1), -1), (v.ed, (i, j), -Mi)], lo=1 - Mi)
        # (3): m_j ≤ Mi(1 − e_j); m_j = m_{j−1} + c_j unless e_j; m_j ≤ Iin_{j−1} unless e_j or d_j
        row("memory_update", [(v.m, (i, j), 1), (v.e, (i, j), Mi)], hi=Mi)
        row("memory_update", [(v.m, (i, j), 1), (v.m, (i, j - 1), -1), (v.c, (i, j), -1)], hi=0)
        row("memory_update", [(v.m, (i, j), 1), (v.m, (i, j - 1), -1), (v.c, (i, j), -1), (v.e, (i, j), Mi)], lo=0)
        row("prefill_no_overrun", [(v.m, (i, j), 1), (v.Iin, (i, j - 1), -1), (v.e, (i, j), -Mi),
                                   (v.d, (i, j), -Mi)], hi=0)
        # (4): c ≤ cmax(1 − e); c ≤ 1 + (cmax − 1)(1 − d); c ≤ cmax(U + 1 − Iin_{j−1})
        row("evict_no_tokens", [(v.c, (i, j), 1), (v.e, (i, j), cmax)], hi=cmax)
        row("decode_one_token", [(v.c, (i, j), 1), (v.d, (i, j), cmax - 1)], hi=cmax)
        row("finished_no_tokens", [(v.c, (i, j), 1), (v.Iin, (i, j - 1), cmax)], hi=cmax * (U + 1))
        # cz = [c > 0], mz = [m > 0], g = cz ∧ q, dg = d ∧ g
        row("link_cz", [(v.c, (i, j), 1), (v.cz, (i, j), -1)], lo=0)
        row("link_cz", [(v.c, (i, j), 1), (v.cz, (i, j), -cmax)], hi=0)
        row("link_mz", [(v.m, (i, j), 1), (v.mz, (i, j), -1)], lo=0)
        row("link_mz", [(v.m, (i, j), 1), (v.mz, (i, j), -U)], hi=0)
        for fam, out, a, b in (("link_g", v.g, v.cz, v.q), ("link_dg", v.dg, v.d, v.g)):
            row(fam, [(out, (i, j), 1), (a, (i, j), -1)], hi=0)
            row(fam, [(out, (i, j), 1), (b, (i, j), -1)], hi=0)
            row(fam, [(out, (i, j), 1), (a, (i, j), -1), (b, (i, j), -1)], lo=-1)
        # c² secants k = 0..cmax−1; KVs read by a decode; batch indicators
        for k in range(cmax):
            row("prefill_square", [(v.sq, (i, j), 1), (v.c, (i, j), -(2 * k + 1))], lo=-k * (k + 1))
        row("kv_read", [(v.w, (i, j), 1), (v.m, (i, j - 1), -1), (v.dg, (i, j), -U)], lo=-U)
        row("batch_indicators", [(v.u, (j,), 1), (v.cz, (i, j), -1)], lo=0)
        row("batch_indicators", [(v.up, (j,), 1), (v.cz, (i, j), -1), (v.dg, (i, j), 1)], lo=0)
        row("batch_indicators", [(v.ud, (j,), 1), (v.dg, (i, j), -1)], lo=0)
        row("cut_kv_at_token", [(v.m, (i, j), 1), (v.g, (i, j), -I[i])], lo=0)
    ii = range(prob.n)
    for j in range(1, J + 1):  # (5) and the per-batch rows
        row("batch_C", [(v.c, (i, j), 1) for i in ii], hi=prob.C)
        row("batch_P", [(v.c, (i, j), 1) for i in ii] + [(v.dg, (i, j), -1) for i in ii], hi=prob.prefill_limit)
        row("batch_M", [(v.m, (i, j), 1) for i in ii], hi=prob.M)
        row("batch_nonempty", [(v.u, (j,), 1)] + [(v.cz, (i, j), -1) for i in ii], hi=0)
        if j < J:
            row("empty_batches_last", [(v.u, (j,), 1), (v.u, (j + 1,), -1)], lo=0)
        row("cut_active_batch", [(v.u, (j,), -prob.M)] + [(v.m, (i, j), 1) for i in ii], hi=0)
        row("cut_active_batch", [(v.u, (j,), -prob.C)] + [(v.c, (i, j), 1) for i in ii], hi=0)
        row("cut_active_batch", [(v.up, (j,), -prob.prefill_limit)] + [(v.c, (i, j), 1) for i in ii]
            + [(v.dg, (i, j), -1) for i in ii], hi=0)
        row("cut_active_batch", [(v.up, (j,), -prob.M)] + [(v.g, (i, j), I[i]) for i in ii]
            + [(v.dg, (i, j), -I[i]) for i in ii], hi=0)
        row("cut_batch_kind", [(v.up, (j,), 1), (v.ud, (j,), 1), (v.u, (j,), -1)], lo=0)
    jj = range(1, J + 1)
    L = (47, 16)  # test_define_request_work_cuts_bound_is_the_hand_minimum
    for i in ii:
        U = I[i] + O[i] - 1
        # a_o c + a_p (sq − dg) + s_p (cz − dg) + a_d w + s_d dg  →  c: 1, sq: 3, dg: −3 − 12 + 8 = −7, cz: 12, w: 6
        row("cut_request_work", [(v.c, (i, j), 1) for j in jj] + [(v.sq, (i, j), 3) for j in jj]
            + [(v.dg, (i, j), -7) for j in jj] + [(v.cz, (i, j), 12) for j in jj] + [(v.w, (i, j), 6) for j in jj],
            lo=L[i] * (1 - 1e-9))
        row("cut_token_total", [(v.c, (i, j), 1) for j in jj], lo=U)
        row("cut_first_token_prefill", [(v.g, (i, j), 1) for j in jj] + [(v.dg, (i, j), -1) for j in jj], lo=1)
        row("cut_kv_time", [(v.m, (i, j), 1) for j in jj], lo=O[i] * I[i] + O[i] * (O[i] - 1) / 2)
    row("cut_batch_count", [(v.u, (j,), 1) for j in jj], lo=2)
    row("cut_batch_count", [(v.up, (j,), 1) for j in jj], lo=1)
    return rows


def model_rows(model, fam):
    A_, lo, hi = family(model, fam)
    return [({int(c): float(A_[r, c]) for c in np.flatnonzero(A_[r])}, float(lo[r]), float(hi[r]))
            for r in range(A_.shape[0])]


def canonical(rows):
    return sorted((tuple(sorted((c, round(a, 9)) for c, a in coef.items())), round(lo, 9), round(hi, 9))
                  for coef, lo, hi in rows)


def test_every_bigm_family_matches_its_equations_exactly(full):
    """Each family's rows (as a set: coefficients and bounds) equal the §3.3 equations written out in
    `equation_rows`; every family of the model is covered and none is missing."""
    expected = equation_rows(full, problem())
    assert set(full.model.families) == set(expected)
    for fam, rows in expected.items():
        assert canonical(model_rows(full.model, fam)) == canonical(rows), fam


def test_timing_and_ttft_rows_match_their_equations():
    """define_timing and define_ttft, coefficient by coefficient.

    batch_end: end_j − start_j − T_j = 0 with T_j's terms (a_o c + a_p sq + (−a_p − s_p + s_d) dg + s_p cz + a_d w
    per request, b_o u + b_p up + b_d ud); batch_order: start_j − end_{j−1} ≥ 0; arrival (online only, one
    row per cell): start_j − T_i·cz_ij ≥ 0 with T_B = 10 units; ttft (offline, O_A = 2 so with G):
    ttft_i − end_j − H_j·g_ij + H_j·G_i,j−1 ≥ −T_i − H_j with H_j = j × max batch time = 101·j
    (max batch time = a_o·3 + b_o + a_p·3² + b_p + s_p·2 + a_d·3 + b_d + s_d·2 = 101 ms), and
    first_token_count: G_ij − G_i,j−1 − g_ij = 0."""
    for arrivals, objective in (([0.0, 0.01], "latency"), ([0.0, 0.0], "ttft")):
        prob = make_problem([2, 1], [2, 1], arrivals=arrivals, cost=COST, C=3, P=3, M=3)
        bm = build_model(prob, 3, objective=objective, cuts=False)
        v, J = bm.vars, 3
        rows: dict[str, list] = {}

        def row(fam, terms, lo, hi, rows=rows):
            rows.setdefault(fam, []).append(({int(c): float(a) for c, a in terms if a != 0}, float(lo), float(hi)))

        per_request = ((v.c, 1), (v.sq, 3), (v.dg, -7), (v.cz, 12), (v.w, 6))
        for j in range(1, J + 1):
            T = [(blk.col(i, j), a) for blk, a in per_request for i in range(2)]
            T += [(v.u.col(j), 2), (v.up.col(j), 4), (v.ud.col(j), 7)]
            row("batch_end", [(v.end.col(j), 1), (v.start.col(j), -1)] + [(c, -a) for c, a in T], 0, 0)
            row("batch_order", [(v.start.col(j), 1), (v.end.col(j - 1), -1)], 0, np.inf)
            for i, t in enumerate((0.0, 10.0) if objective == "latency" else ()):
                row("arrival", [(v.start.col(j), 1), (v.cz.col(i, j), -t)], 0, np.inf)
            if objective == "ttft":
                H = 101.0 * j
                for i in range(2):
                    row("first_token_count", [(v.G.col(i, j), 1), (v.G.col(i, j - 1), -1), (v.g.col(i, j), -1)], 0, 0)
                    row("ttft", [(v.ttft.col(i), 1), (v.end.col(j), -1), (v.g.col(i, j), -H), (v.G.col(i, j - 1), H)],
                        -H, np.inf)
        for fam, expected in rows.items():
            assert canonical(model_rows(bm.model, fam)) == canonical(expected), (objective, fam)


def test_flow_batch_rows_match_their_equations():
    """define_batch_use and define_batch_limits of the path model, coefficient by coefficient, from the
    equations and the hand arc table `HAND_ARCS` (arc k = column x_k):
    use_batch/use_prefill/use_decode per (request, batch) with such arcs: Σ x − u_j/up_j/ud_j ≤ 0;
    kind_prefill up_j − u_j ≤ 0, kind_decode ud_j − u_j ≤ 0, kind_any u_j − up_j − ud_j ≤ 0;
    batch_nonempty u_j − Σ_{token arcs in j} x ≤ 0; empty_batches_last u_j − u_{j+1} ≥ 0;
    batch_C Σ tokens·x − C·u_j ≤ 0, batch_P Σ_prefill tokens·x − P·up_j ≤ 0, batch_M Σ kv·x − M·u_j ≤ 0,
    batch_R Σ_{kv>0} x ≤ R_max (R_max = 1 < N = 2)."""
    fm = build_flow_model(problem(R_max=1), 3)
    v, J = fm.vars, 3
    x = lambda k: int(v.x.col(k))  # noqa: E731
    rows: dict[str, list] = {}

    def row(fam, terms, lo=-np.inf, hi=np.inf):
        coef: dict[int, float] = {}
        for c, a in terms:
            coef[int(c)] = coef.get(int(c), 0.0) + float(a)
        rows.setdefault(fam, []).append(({c: a for c, a in coef.items() if a != 0}, float(lo), float(hi)))

    token = lambda kind: kind in (DECODE, PREFILL)  # noqa: E731
    for fam, keep, ind in (("use_batch", token, v.u), ("use_prefill", lambda k: k == PREFILL, v.up),
                           ("use_decode", lambda k: k == DECODE, v.ud)):
        for i in (A, B):
            for j in range(1, J + 1):
                arcs = [k for k, (r, b, kind, *_rest) in enumerate(HAND_ARCS) if r == i and b == j and keep(kind)]
                if arcs:
                    row(fam, [(x(k), 1) for k in arcs] + [(ind.col(j), -1)], hi=0)
    for j in range(1, J + 1):
        in_j = [(k, a) for k, a in enumerate(HAND_ARCS) if a[1] == j]
        row("kind_prefill", [(v.up.col(j), 1), (v.u.col(j), -1)], hi=0)
        row("kind_decode", [(v.ud.col(j), 1), (v.u.col(j), -1)], hi=0)
        row("kind_any", [(v.u.col(j), 1), (v.up.col(j), -1), (v.ud.col(j), -1)], hi=0)
        row("batch_nonempty", [(v.u.col(j), 1)] + [(x(k), -1) for k, a in in_j if token(a[2])], hi=0)
        if j < J:
            row("empty_batches_last", [(v.u.col(j), 1), (v.u.col(j + 1), -1)], lo=0)
        row("batch_C", [(x(k), a[4]) for k, a in in_j] + [(v.u.col(j), -3)], hi=0)
        row("batch_P", [(x(k), a[4]) for k, a in in_j if a[2] == PREFILL] + [(v.up.col(j), -3)], hi=0)
        row("batch_M", [(x(k), a[5]) for k, a in in_j] + [(v.u.col(j), -3)], hi=0)
        row("batch_R", [(x(k), 1) for k, a in in_j if a[5] > 0], hi=1)
    for fam, expected in rows.items():
        assert canonical(model_rows(fm.model, fam)) == canonical(expected), fam
