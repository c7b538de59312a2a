"""numba kernel of `planner.fleet`: N iteration-level engines (InferMax Algorithm 1) behind one router.

Imported lazily (numba's import is slow); every function is ``@njit(cache=True)``.  The decision rule
of each engine is that of `planner.batching.scheduler.simulate` (see its module docstring), ported
line by line; `planner.fleet.simulate` documents the fleet-level semantics (routing instants, blocking,
routers).  State lives in flat arrays:

* per request: ``Iin``, ``m`` (KV tokens processed since the last eviction), ``alloc`` (KV reserved),
  ``gen``, ``where`` (0 none / finished, 1 waiting, 2 running, 3 admitted in the batch being formed),
  the links ``nxt``/``prv`` of the one list it is in (a worker's waiting or running list, both in
  insertion order), ``stamp`` (= the batch counter while it is in the batch being formed);
* per worker ``W[w, :]`` (int64, the ``W_*`` columns) and ``T[w, :]`` (clock and busy seconds);
* scratch of the batch being formed (prefill ids and chunks, decode ids, new admissions, candidates)
  and its counters ``B[:]`` (the ``B_*`` columns);
* per worker cost row ``K[w, :]`` (`planner.fleet.costs.cost_matrix`): the ``K_*`` coefficients, then
  the all-reduce table's n tokens and n seconds from ``K_AR``; the batch time is `batch_seconds`.
"""

from __future__ import annotations

import numpy as np
from numba import njit

# per-worker integer state W[w, k]
W_ALLOC, W_RH, W_RT, W_RC, W_WH, W_WT, W_WC, W_BLOCK, W_ITER, W_EVICT = range(10)
W_COLS = 10
# per-worker parameters Q[w, k]
Q_C, Q_P, Q_M, Q_R, Q_PREFILL_FIRST, Q_HYBRID, Q_CHUNKED, Q_EVICT = range(8)
Q_COLS = 8
# batch counters B[k]
B_USED, B_HP, B_HD, B_NP, B_ND, B_NEW, B_EV, B_STAMP = range(8)
# cost coefficients K[w, k] (seconds)
K_BASE, K_TOK, K_PB, K_PT, K_PQ, K_PN, K_DB, K_DN, K_DK, K_FLOOR, K_PK, K_NAR = range(12)
K_AR = 12  # all-reduce table: K[w, K_AR:K_AR+n] tokens, K[w, K_AR+n:K_AR+2n] seconds (n = K[w, K_NAR])
K_COLS = 12
# step outcomes
RAN, RETRY, BLOCKED, IDLE, STUCK = range(5)
# router codes
ROUND_ROBIN, JSQ, LEAST_KV, ALADDIN = range(4)


@njit(cache=True)
def _allreduce(K, w, x):
    """The all-reduce table of worker w at x tokens: linear between points, the end values beyond (np.interp)."""
    n = int(K[w, K_NAR])
    lo = K_AR
    if x <= K[w, lo]:
        return K[w, lo + n]
    if x >= K[w, lo + n - 1]:
        return K[w, lo + 2 * n - 1]
    a = 0
    b = n - 1
    while b - a > 1:  # K[w, lo + a] <= x < K[w, lo + b]
        mid = (a + b) // 2
        if K[w, lo + mid] <= x:
            a = mid
        else:
            b = mid
    x0 = K[w, lo + a]
    y0 = K[w, lo + n + a]
    slope = (K[w, lo + n + b] - y0) / (K[w, lo + b] - x0)
    return slope * (x - x0) + y0


@njit(cache=True)
def batch_seconds(K, w, p_sum, p_sq, p_ck, n_p, n_d, d_kv):
    """Seconds of a batch of worker w: prefill chunks with Σc = ``p_sum``, Σc² = ``p_sq``, Σc·k = ``p_ck``
    (k: KV tokens held before the chunk), ``n_p`` of them; ``n_d`` decodes reading ``d_kv`` KV tokens in all
    (`planner.fleet.costs` module docstring).  Terms that are 0 for a `LinearBatchCost` (floor, Σc·k, table)
    add exactly 0.0, so it pays its linear form bit for bit."""
    secs = K[w, K_BASE] + K[w, K_TOK] * (p_sum + n_d)
    if n_p > 0:
        work = float(p_sum)
        if work < K[w, K_FLOOR]:
            work = K[w, K_FLOOR]
        secs += K[w, K_PB] + K[w, K_PT] * work + K[w, K_PQ] * p_sq + K[w, K_PN] * n_p + K[w, K_PK] * p_ck
    if n_d > 0:
        secs += K[w, K_DB] + K[w, K_DN] * n_d + K[w, K_DK] * d_kv
    if K[w, K_NAR] > 0:
        secs += _allreduce(K, w, float(p_sum + n_d))
    return secs


@njit(cache=True)
def _push_back(W, w, H, T_, C, nxt, prv, i):
    tail = W[w, T_]
    prv[i] = tail
    nxt[i] = -1
    if tail >= 0:
        nxt[tail] = i
    else:
        W[w, H] = i
    W[w, T_] = i
    W[w, C] += 1


@njit(cache=True)
def _push_front(W, w, H, T_, C, nxt, prv, i):
    head = W[w, H]
    nxt[i] = head
    prv[i] = -1
    if head >= 0:
        prv[head] = i
    else:
        W[w, T_] = i
    W[w, H] = i
    W[w, C] += 1


@njit(cache=True)
def _unlink(W, w, H, T_, C, nxt, prv, i):
    p = prv[i]
    q = nxt[i]
    if p >= 0:
        nxt[p] = q
    else:
        W[w, H] = q
    if q >= 0:
        prv[q] = p
    else:
        W[w, T_] = p
    nxt[i] = -1
    prv[i] = -1
    W[w, C] -= 1


@njit(cache=True)
def _evict(W, w, v, Iin, m, alloc, evictions, where, nxt, prv, B):
    """Recompute eviction of running request v: to the front of the waiting queue."""
    B[B_EV] += 1
    if m[v] >= Iin[v]:
        Iin[v] = m[v] + 1
    m[v] = 0
    W[w, W_ALLOC] -= alloc[v]
    alloc[v] = 0
    evictions[v] += 1
    W[w, W_EVICT] += 1
    _unlink(W, w, W_RH, W_RT, W_RC, nxt, prv, v)
    _push_front(W, w, W_WH, W_WT, W_WC, nxt, prv, v)
    where[v] = 1


@njit(cache=True)
def _victim(W, w, i, stamp, B, prv):
    """The latest-admitted running request not in the batch and not ``i`` (LIFO), or -1."""
    v = W[w, W_RT]
    while v >= 0:
        if stamp[v] != B[B_STAMP] and v != i:
            return v
        v = prv[v]
    return -1


@njit(cache=True)
def _add_prefill(W, Q, w, i, is_running, I0, O, Iin, m, alloc, evictions, where, nxt, prv, stamp, B,
                 p_ids, p_c, new_buf):
    """Try to add prefill candidate i: 0 added, 1 tokens, 2 R_max, 3 memory, 4 evicted itself."""
    C = Q[w, Q_C]
    P = Q[w, Q_P]
    M = Q[w, Q_M]
    rem = Iin[i] - m[i]
    budget = min(C - B[B_USED], P - B[B_USED])
    if Q[w, Q_CHUNKED] != 0:
        c = min(rem, budget)
        if c < 1:
            return 1
    else:
        if rem > budget:
            return 1
        c = rem
    if is_running == 0 and W[w, W_RC] + B[B_NEW] >= Q[w, Q_R]:
        return 2
    if Q[w, Q_EVICT] == 0:
        target = I0[i] + O[i] - 1
    else:
        target = Iin[i]
    need = max(0, target - alloc[i])
    if need > M - W[w, W_ALLOC]:
        if Q[w, Q_EVICT] != 0 and is_running != 0:
            while need > M - W[w, W_ALLOC]:
                v = _victim(W, w, i, stamp, B, prv)
                if v < 0:
                    _evict(W, w, i, Iin, m, alloc, evictions, where, nxt, prv, B)
                    return 4
                _evict(W, w, v, Iin, m, alloc, evictions, where, nxt, prv, B)
        else:
            return 3
    alloc[i] += need
    W[w, W_ALLOC] += need
    if is_running == 0:
        new_buf[B[B_NEW]] = i
        B[B_NEW] += 1
        where[i] = 3
    p_ids[B[B_NP]] = i
    p_c[B[B_NP]] = c
    B[B_NP] += 1
    stamp[i] = B[B_STAMP]
    B[B_USED] += c
    B[B_HP] = 1
    return 0


@njit(cache=True)
def _waiting_group(W, Q, w, I0, O, Iin, m, alloc, evictions, where, nxt, prv, stamp, B, p_ids, p_c, new_buf):
    if Q[w, Q_HYBRID] == 0 and B[B_HD] != 0:
        return
    while W[w, W_WC] > 0:
        i = W[w, W_WH]
        why = _add_prefill(W, Q, w, i, 0, I0, O, Iin, m, alloc, evictions, where, nxt, prv, stamp, B,
                           p_ids, p_c, new_buf)
        if why != 0:
            return
        _unlink(W, w, W_WH, W_WT, W_WC, nxt, prv, i)


@njit(cache=True)
def _running_prefills(W, Q, w, I0, O, Iin, m, alloc, evictions, where, nxt, prv, stamp, B, p_ids, p_c, new_buf,
                      cand):
    if Q[w, Q_HYBRID] == 0 and B[B_HD] != 0:
        return
    k = 0
    v = W[w, W_RH]
    while v >= 0:  # snapshot of the running requests in prefill phase, in list order
        if m[v] < Iin[v]:
            cand[k] = v
            k += 1
        v = nxt[v]
    for q in range(k):
        i = cand[q]
        if stamp[i] == B[B_STAMP] or where[i] != 2:
            continue
        why = _add_prefill(W, Q, w, i, 1, I0, O, Iin, m, alloc, evictions, where, nxt, prv, stamp, B,
                           p_ids, p_c, new_buf)
        if why == 3:
            return


@njit(cache=True)
def _running_decodes(W, Q, w, Iin, m, alloc, evictions, where, nxt, prv, stamp, B, d_ids, cand):
    if Q[w, Q_HYBRID] == 0 and B[B_HP] != 0:
        return
    C = Q[w, Q_C]
    M = Q[w, Q_M]
    k = 0
    v = W[w, W_RH]
    while v >= 0:  # snapshot: running, decode phase, not in the batch
        if m[v] >= Iin[v] and stamp[v] != B[B_STAMP]:
            cand[k] = v
            k += 1
        v = nxt[v]
    if k == 0:
        return
    room = C - B[B_USED]
    if room <= 0:
        return
    k = min(k, room)
    free = M - W[w, W_ALLOC]
    start = B[B_ND]
    taken = 0
    total = 0
    for q in range(k):  # bulk: the longest prefix whose new KV slots fit
        i = cand[q]
        need = 1 if alloc[i] < m[i] + 1 else 0
        if total + need > free:
            break
        total += need
        taken += 1
    for q in range(taken):
        i = cand[q]
        if alloc[i] < m[i] + 1:
            alloc[i] += 1
            W[w, W_ALLOC] += 1
        stamp[i] = B[B_STAMP]
        d_ids[start + q] = i
    chosen = taken
    if taken < k and Q[w, Q_EVICT] != 0:
        for q in range(taken, k):
            i = cand[q]
            if where[i] != 2:  # evicted as a victim meanwhile
                continue
            if B[B_USED] + chosen >= C:
                break
            nd = 1 if alloc[i] < m[i] + 1 else 0
            ok = True
            while nd > M - W[w, W_ALLOC]:
                v = _victim(W, w, i, stamp, B, prv)
                if v < 0:
                    _evict(W, w, i, Iin, m, alloc, evictions, where, nxt, prv, B)
                    ok = False
                    break
                _evict(W, w, v, Iin, m, alloc, evictions, where, nxt, prv, B)
            if ok:
                alloc[i] += nd
                W[w, W_ALLOC] += nd
                d_ids[start + chosen] = i
                stamp[i] = B[B_STAMP]
                chosen += 1
    if chosen > 0:
        B[B_ND] += chosen
        B[B_USED] += chosen
        B[B_HD] = 1


@njit(cache=True)
def _step(W, Q, K, Tm, w, more_arrivals, I0, O, Iin, m, alloc, gen, evictions, where, nxt, prv, stamp, B,
          p_ids, p_c, d_ids, new_buf, cand, first, first_sched, finish, done_count):
    """Form and run one batch of worker w at its clock; the outcome code (RAN, RETRY, BLOCKED, IDLE, STUCK)."""
    if W[w, W_RC] == 0 and W[w, W_WC] == 0:
        return IDLE
    B[B_STAMP] += 1
    B[B_USED] = 0
    B[B_HP] = 0
    B[B_HD] = 0
    B[B_NP] = 0
    B[B_ND] = 0
    B[B_NEW] = 0
    B[B_EV] = 0
    if Q[w, Q_PREFILL_FIRST] != 0:
        _waiting_group(W, Q, w, I0, O, Iin, m, alloc, evictions, where, nxt, prv, stamp, B, p_ids, p_c, new_buf)
        _running_prefills(W, Q, w, I0, O, Iin, m, alloc, evictions, where, nxt, prv, stamp, B, p_ids, p_c,
                          new_buf, cand)
        _running_decodes(W, Q, w, Iin, m, alloc, evictions, where, nxt, prv, stamp, B, d_ids, cand)
    else:
        _running_decodes(W, Q, w, Iin, m, alloc, evictions, where, nxt, prv, stamp, B, d_ids, cand)
        _running_prefills(W, Q, w, I0, O, Iin, m, alloc, evictions, where, nxt, prv, stamp, B, p_ids, p_c,
                          new_buf, cand)
        _waiting_group(W, Q, w, I0, O, Iin, m, alloc, evictions, where, nxt, prv, stamp, B, p_ids, p_c, new_buf)
    for q in range(B[B_NEW]):
        i = new_buf[q]
        _push_back(W, w, W_RH, W_RT, W_RC, nxt, prv, i)
        where[i] = 2
    n_p = B[B_NP]
    n_d = B[B_ND]
    if n_p == 0 and n_d == 0:
        if more_arrivals and W[w, W_RC] == 0:
            return BLOCKED
        if B[B_EV] > 0:
            return RETRY
        if more_arrivals:
            return BLOCKED
        return STUCK
    # ---- Process ----
    p_sum = 0
    p_sq = 0.0
    p_ck = 0.0
    for q in range(n_p):
        c = p_c[q]
        p_sum += c
        p_sq += float(c) * float(c)
        p_ck += float(c) * float(m[p_ids[q]])
    d_kv = 0
    for q in range(n_d):
        d_kv += m[d_ids[q]]
    secs = batch_seconds(K, w, p_sum, p_sq, p_ck, n_p, n_d, d_kv)
    t0 = Tm[w, 0]
    t1 = t0 + secs
    Tm[w, 0] = t1
    Tm[w, 1] += secs
    W[w, W_ITER] += 1
    for q in range(n_p + n_d):
        if q < n_p:
            i = p_ids[q]
            m[i] += p_c[q]
        else:
            i = d_ids[q - n_p]
            m[i] += 1
        if np.isnan(first_sched[i]):
            first_sched[i] = t0
    for q in range(n_p + n_d):
        i = p_ids[q] if q < n_p else d_ids[q - n_p]
        if m[i] >= Iin[i]:
            gen[i] += 1
            if np.isnan(first[i]):
                first[i] = t1
            if gen[i] >= O[i]:
                finish[i] = t1
                W[w, W_ALLOC] -= alloc[i]
                alloc[i] = 0
                m[i] = 0
                _unlink(W, w, W_RH, W_RT, W_RC, nxt, prv, i)
                where[i] = 0
                done_count[0] += 1
    return RAN


@njit(cache=True)
def _fused_decodes(W, Q, K, Tm, w, horizon, Iin, m, alloc, gen, O, nxt, max_iterations):
    """Run, in one pass, the pure-decode batches that `_step` would form next, as long as nothing can change
    their composition: no waiting request, every running request in its decode phase and within the token
    budget (so each batch is exactly the running list), no completion (the batch in which the first request
    finishes is left to `_step`), the KV slots of every step fit in bulk (all requests need one new slot per
    step, or none needs any during the stretch) and each batch starts before ``horizon``.  The batch times
    are computed with `_step`'s function (`batch_seconds`), so the clock is bit-identical to running them one
    by one."""
    if W[w, W_WC] != 0:
        return
    n_d = W[w, W_RC]
    if n_d == 0 or n_d > Q[w, Q_C]:
        return
    min_rem = np.iinfo(np.int64).max
    min_e = np.iinfo(np.int64).max
    all_zero = True
    D = 0
    v = W[w, W_RH]
    while v >= 0:
        if m[v] < Iin[v]:
            return
        e = alloc[v] - m[v]
        if e != 0:
            all_zero = False
        min_e = min(min_e, e)
        min_rem = min(min_rem, O[v] - gen[v])
        D += m[v]
        v = nxt[v]
    S = min_rem - 1  # steps strictly before the first completion
    if S <= 0:
        return
    if all_zero:
        S = min(S, (Q[w, Q_M] - W[w, W_ALLOC]) // n_d)
        slots = 1
    elif min_e >= S:
        slots = 0
    else:
        return
    S = min(S, max_iterations + 1 - W[w, W_ITER])
    t = Tm[w, 0]
    busy = Tm[w, 1]
    k = 0
    while k < S and t < horizon:
        secs = batch_seconds(K, w, 0, 0.0, 0.0, 0, n_d, D + n_d * k)
        t = t + secs
        busy += secs
        k += 1
    if k == 0:
        return
    Tm[w, 0] = t
    Tm[w, 1] = busy
    W[w, W_ITER] += k
    v = W[w, W_RH]
    while v >= 0:
        m[v] += k
        gen[v] += k
        alloc[v] += slots * k
        v = nxt[v]
    W[w, W_ALLOC] += slots * k * n_d


@njit(cache=True)
def _advance(W, Q, K, Tm, w, horizon, more_arrivals, I0, O, Iin, m, alloc, gen, evictions, where, nxt, prv,
             stamp, B, p_ids, p_c, d_ids, new_buf, cand, first, first_sched, finish, done_count, max_iterations,
             fuse):
    """Run worker w's batches that start before ``horizon``; 0, or STUCK, or -1 when over max_iterations."""
    while W[w, W_BLOCK] == 0 and Tm[w, 0] < horizon:
        if W[w, W_ITER] > max_iterations:
            return -1
        r = _step(W, Q, K, Tm, w, more_arrivals, I0, O, Iin, m, alloc, gen, evictions, where, nxt, prv, stamp,
                  B, p_ids, p_c, d_ids, new_buf, cand, first, first_sched, finish, done_count)
        if r == RAN:
            if fuse:
                _fused_decodes(W, Q, K, Tm, w, horizon, Iin, m, alloc, gen, O, nxt, max_iterations)
            continue
        if r == RETRY:
            continue
        if r == STUCK:
            return STUCK
        W[w, W_BLOCK] = 1  # BLOCKED or IDLE: until a request is routed here
    return 0


@njit(cache=True)
def _kv_fits(W, w, i_new, kv_base_new, r_new, limit, I0, gen, pred, nxt, scratch_r, scratch_b):
    """Aladdin M5 at this worker: max over future decode iterations t < r_new of Σ_{j: r_j > t}(b_j + t)
    + b_new + t ≤ limit, with b_j = I_j + g_j and r_j = max(ô_j − g_j, 1) over the requests it holds
    (waiting and running).  The sum is piecewise linear and increasing in t between the points where a
    request leaves, so the maximum is at t = r_j − 1 (r_j < r_new) or t = r_new − 1."""
    k = 0
    for head in (W[w, W_WH], W[w, W_RH]):
        v = head
        while v >= 0:
            scratch_r[k] = max(pred[v] - gen[v], 1)
            scratch_b[k] = I0[v] + gen[v]
            k += 1
            v = nxt[v]
    order = np.argsort(scratch_r[:k])
    # suffix sums over requests sorted by r: alive at t ⇔ r_j > t
    total_b = 0.0
    for q in range(k):
        total_b += scratch_b[q]
    alive_b = total_b
    alive_n = k
    q = 0
    while True:
        # the next breakpoint t = r_(q) − 1 among requests still alive, capped at r_new − 1
        if q < k:
            t = scratch_r[order[q]] - 1
            if t > r_new - 1:
                t = r_new - 1
        else:
            t = r_new - 1
        if alive_b + alive_n * t + kv_base_new + t > limit:
            return False
        if t >= r_new - 1:
            return True
        # drop every request whose r_j − 1 == t (they leave after iteration t)
        while q < k and scratch_r[order[q]] - 1 <= t:
            alive_b -= scratch_b[order[q]]
            alive_n -= 1
            q += 1


@njit(cache=True)
def _ineligible(Q, w, I, need):
    """Worker w can never serve a request of prompt I and final KV need: M too small, or a non-chunked
    prefill budget min(C, P) below the prompt."""
    if need > Q[w, Q_M]:
        return True
    return Q[w, Q_CHUNKED] == 0 and I > min(Q[w, Q_C], Q[w, Q_P])


@njit(cache=True)
def _barred(Q, w, I, need, rgroup, wgroup, i):
    """Worker w may not take request i: `_ineligible`, or i is restricted to a group (``rgroup[i] ≥ 0``)
    that w is not in."""
    if rgroup[i] >= 0 and wgroup[w] != rgroup[i]:
        return True
    return _ineligible(Q, w, I, need)


@njit(cache=True)
def _route(router, N, i, rr_next, W, Q, K, I0, O, pred, gen, Iin, m, nxt, strictness, ttft_s, tpot_s,
           load, scratch_r, scratch_b, rgroup, wgroup):
    """The worker request i goes to (see `planner.fleet.simulate` for each router's rule); -1 if none fits.
    Only workers of request i's group are considered when it has one (``rgroup[i] ≥ 0``)."""
    need = I0[i] + O[i] - 1
    if router == ROUND_ROBIN:
        for k in range(N):
            w = (rr_next + k) % N
            if not _barred(Q, w, I0[i], need, rgroup, wgroup, i):
                return w
        return -1
    best = -1
    if router == JSQ or router == LEAST_KV:
        best_v = 0
        for w in range(N):
            if _barred(Q, w, I0[i], need, rgroup, wgroup, i):
                continue
            val = W[w, W_WC] + W[w, W_RC] if router == JSQ else W[w, W_ALLOC]
            if best < 0 or val < best_v:
                best = w
                best_v = val
        return best
    # ALADDIN: best fit on predicted decode load
    for w in range(N):
        k2 = K[w, K_TOK] + K[w, K_DN]
        k3 = K[w, K_DK]
        total = 0.0
        for head in (W[w, W_WH], W[w, W_RH]):
            v = head
            while v >= 0:
                ell = I0[v] + gen[v] + strictness * max(pred[v] - gen[v], 0)
                total += k3 * ell + k2
                v = nxt[v]
        load[w] = total
    order = np.argsort(-load[:N], kind="mergesort")  # most loaded first, ties: lowest index
    ell_new = I0[i] + strictness * pred[i]
    for q in range(N):
        w = order[q]
        if _barred(Q, w, I0[i], need, rgroup, wgroup, i):
            continue
        k2 = K[w, K_TOK] + K[w, K_DN]
        k3 = K[w, K_DK]
        c2 = K[w, K_BASE] + K[w, K_DB]
        if c2 + load[w] + k3 * ell_new + k2 > tpot_s * (1.0 + 1e-9):
            continue
        if ttft_s < np.inf:
            k1 = K[w, K_TOK] + K[w, K_PT]
            c1 = K[w, K_BASE] + K[w, K_PB]
            pending = 0
            for head in (W[w, W_WH], W[w, W_RH]):
                v = head
                while v >= 0:
                    if m[v] < Iin[v]:
                        pending += Iin[v] - m[v]
                    v = nxt[v]
            if c1 + k1 * (pending + I0[i]) > ttft_s * (1.0 + 1e-9):
                continue
        if _kv_fits(W, w, i, float(I0[i]), max(pred[i], 1), float(Q[w, Q_M]), I0, gen, pred, nxt,
                    scratch_r, scratch_b):
            return w
    # nothing fits: the least-loaded eligible worker
    for w in range(N):
        if not _barred(Q, w, I0[i], need, rgroup, wgroup, i) and (best < 0 or load[w] < load[best]):
            best = w
    return best


@njit(cache=True)
def run_fleet(order, arrival, I0, O, pred, router, Q, K, strictness, ttft_s, tpot_s, max_iterations,
              worker_of, first, first_sched, finish, evictions, W, Tm, fuse, rgroup, wgroup):
    """Route the requests in ``order`` (arrival order) and run every worker to completion.

    ``rgroup[i]`` (−1: any worker) and ``wgroup[w]`` restrict request i to the workers of its group.
    Fills the per-request outputs and ``W``/``Tm``; returns (status, worker, request): status 0 done,
    1 a request fits no worker, 2 a worker is stuck, 3 too many iterations."""
    n = I0.shape[0]
    N = Q.shape[0]
    Iin = I0.copy()
    m = np.zeros(n, np.int64)
    alloc = np.zeros(n, np.int64)
    gen = np.zeros(n, np.int64)
    where = np.zeros(n, np.int64)
    nxt = np.full(n, -1, np.int64)
    prv = np.full(n, -1, np.int64)
    stamp = np.zeros(n, np.int64)
    B = np.zeros(8, np.int64)
    p_ids = np.empty(n, np.int64)
    p_c = np.empty(n, np.int64)
    d_ids = np.empty(n, np.int64)
    new_buf = np.empty(n, np.int64)
    cand = np.empty(n, np.int64)
    load = np.zeros(N)
    scratch_r = np.empty(n, np.int64)
    scratch_b = np.empty(n)
    done_count = np.zeros(1, np.int64)
    for w in range(N):
        W[w, W_RH] = -1
        W[w, W_RT] = -1
        W[w, W_WH] = -1
        W[w, W_WT] = -1
    groups = 1  # round-robin turn per request group (slot 0: requests without a group)
    for q in range(n):
        if rgroup[q] + 2 > groups:
            groups = rgroup[q] + 2
    turn = np.zeros(groups, np.int64)
    for k in range(n):
        i = order[k]
        a = arrival[i]
        for w in range(N):
            s = _advance(W, Q, K, Tm, w, a, True, I0, O, Iin, m, alloc, gen, evictions, where, nxt, prv, stamp,
                         B, p_ids, p_c, d_ids, new_buf, cand, first, first_sched, finish, done_count,
                         max_iterations, fuse)
            if s == STUCK:
                return 2, w, -1
            if s < 0:
                return 3, w, -1
        w = _route(router, N, i, turn[rgroup[i] + 1], W, Q, K, I0, O, pred, gen, Iin, m, nxt, strictness, ttft_s, tpot_s,
                   load, scratch_r, scratch_b, rgroup, wgroup)
        if w < 0:
            return 1, -1, i
        turn[rgroup[i] + 1] = (w + 1) % N
        worker_of[i] = w
        _push_back(W, w, W_WH, W_WT, W_WC, nxt, prv, i)
        where[i] = 1
        W[w, W_BLOCK] = 0
        if Tm[w, 0] < a:
            Tm[w, 0] = a
    for w in range(N):
        W[w, W_BLOCK] = 0
        s = _advance(W, Q, K, Tm, w, np.inf, False, I0, O, Iin, m, alloc, gen, evictions, where, nxt, prv, stamp,
                     B, p_ids, p_c, d_ids, new_buf, cand, first, first_sched, finish, done_count, max_iterations,
                     fuse)
        if s == STUCK:
            return 2, w, -1
        if s < 0:
            return 3, w, -1
        if W[w, W_RC] + W[w, W_WC] > 0:
            return 2, w, -1
    return 0, -1, -1
