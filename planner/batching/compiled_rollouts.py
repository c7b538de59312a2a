"""numba kernel of `planner.batching.rollouts`: one randomised preemptive-priority rollout.

Imported lazily (numba's import is slow); ``@njit(cache=True)``.  Semantics are those of §3.3 as the
independent validator replays them (`planner.batching.validator`): a request holds ``kv`` KV tokens
and an input ``Iin``; it is in prefill while ``kv < Iin`` (a chunk ``c ≤ Iin − kv``), in decode
otherwise (one token); it generates a token whenever ``kv ≥ Iin`` after its batch; a decode-phase
eviction sets ``Iin ← kv + 1``, any eviction ``kv ← 0``; after each batch Σ kv ≤ M and at most
``R_max`` requests hold KV (finished requests release theirs after their last batch); a batch
holds ≤ C tokens, ≤ P of them prefill.  Offline: every request has arrived at t = 0.

Policy of one rollout, batch by batch: the unfinished requests are ranked by a random-weighted key

    key_r = w₀·(O_r − produced_r)/64 + w₁·[r holds KV] + w₂·Iin_r/64 + w₃·I_r/64 + noise·U(0, 1)

(lowest first; the weights and the noise level are the policy's, U is drawn afresh per batch), then
taken in that order: a request holding KV may idle with probability ``idle`` (keeping its KV);
otherwise it asks for one decode token or its largest prefill chunk (within C, P and its input).
If the KV (or R_max) does not allow it, requests ranked *below* it that hold KV and are not in the
batch are evicted, lowest rank first, until it fits (if even all of them would not make room,
nobody is evicted and it waits).  This is how the better schedules of the B = 8 benchmark look
(CP-SAT's among them): a waiting request preempts a running one, not only LIFO on overflow.
The batch time is the §3.2 model; the rollout's latency is the sum over batches (the caller
re-checks the best rollouts with the independent validator).
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def rollout(inputs, outputs, M, C, P, R_max, coefficients, scale, weights, noise, idle, seed, max_batches,
            out_batch, out_request, out_tokens, out_evict_batch, out_evict_request):
    """One rollout of the policy (``weights`` (4), ``noise``, ``idle``), its per-batch randomness seeded by
    ``seed``; returns (latency s, batches, entries, evictions), latency = inf when it stalls, exceeds
    ``max_batches`` or would overflow the ``out_*`` arrays, which receive the schedule."""
    np.random.seed(seed)
    n = inputs.shape[0]
    a_o, b_o, a_p, b_p, s_p, a_d, b_d, s_d = (coefficients[0], coefficients[1], coefficients[2], coefficients[3],
                                              coefficients[4], coefficients[5], coefficients[6], coefficients[7])
    kv = np.zeros(n, np.int64)
    Iin = inputs.copy()
    produced = np.zeros(n, np.int64)
    take = np.zeros(n, np.int64)
    key = np.empty(n)
    latency = 0.0
    entries = 0
    evictions = 0
    batches = 0
    remaining = n
    while remaining > 0:
        if batches >= max_batches or entries + n > out_batch.shape[0] or evictions + n > out_evict_batch.shape[0]:
            return np.inf, batches, entries, evictions  # too long for the buffers: dropped
        for r in range(n):
            take[r] = 0
            key[r] = (weights[0] * (outputs[r] - produced[r]) / 64.0 + weights[1] * (1.0 if kv[r] > 0 else 0.0)
                      + weights[2] * Iin[r] / 64.0 + weights[3] * inputs[r] / 64.0 + noise * np.random.random())
        order = np.argsort(key)
        held = 0
        holding = 0
        for r in range(n):
            held += kv[r]
            if kv[r] > 0:
                holding += 1
        tokens = 0
        prefill = 0
        for k in range(n):
            r = order[k]
            if produced[r] >= outputs[r] or take[r] < 0:  # finished, or evicted in this batch
                continue
            if kv[r] > 0 and idle > 0.0 and np.random.random() < idle:
                continue
            if kv[r] >= Iin[r]:
                need = 1
                if tokens + 1 > C:
                    continue
            else:
                need = min(Iin[r] - kv[r], P - prefill, C - tokens)
                if need <= 0:
                    continue
            extra_holder = 1 if kv[r] == 0 else 0
            if held + need > M or holding + extra_holder > R_max:
                free = 0
                freed = 0
                enough = False
                for q in range(n - 1, k, -1):  # lowest rank first, only below r
                    v = order[q]
                    if kv[v] > 0 and take[v] == 0 and produced[v] < outputs[v]:
                        free += kv[v]
                        freed += 1
                        if held - free + need <= M and holding - freed + extra_holder <= R_max:
                            enough = True
                            break
                if not enough:
                    continue
                free = 0
                freed = 0
                for q in range(n - 1, k, -1):
                    v = order[q]
                    if kv[v] > 0 and take[v] == 0 and produced[v] < outputs[v]:
                        if held - free + need <= M and holding - freed + extra_holder <= R_max:
                            break
                        free += kv[v]
                        freed += 1
                        if kv[v] >= Iin[v]:
                            Iin[v] = kv[v] + 1
                        kv[v] = 0
                        take[v] = -1
                        out_evict_batch[evictions] = batches
                        out_evict_request[evictions] = v
                        evictions += 1
                held -= free
                holding -= freed
            take[r] = need
            held += need
            holding += extra_holder
            tokens += need
            if kv[r] < Iin[r]:
                prefill += need
        if tokens == 0:
            return np.inf, batches, entries, evictions
        square = 0
        n_prefill = 0
        kv_read = 0
        n_decode = 0
        for r in range(n):
            c = take[r]
            if c <= 0:
                continue
            out_batch[entries] = batches
            out_request[entries] = r
            out_tokens[entries] = c
            entries += 1
            if kv[r] >= Iin[r]:
                n_decode += 1
                kv_read += kv[r]
            else:
                n_prefill += 1
                square += c * c
        ms = b_o + a_o * tokens
        if n_prefill > 0:
            ms += b_p + a_p * square + s_p * n_prefill
        if n_decode > 0:
            ms += b_d + a_d * kv_read + s_d * n_decode
        latency += ms * scale
        for r in range(n):
            c = take[r]
            if c <= 0:
                continue
            kv[r] += c
            if kv[r] >= Iin[r]:
                produced[r] += 1
                if produced[r] >= outputs[r]:
                    remaining -= 1
        for r in range(n):
            if produced[r] >= outputs[r]:
                kv[r] = 0
        batches += 1
    return latency, batches, entries, evictions
