"""Combinatorial lower bounds (so `compare` always has a gap) and the constants of the MIP's cuts.

Facts used, valid for every schedule of §3.3 (with or without evictions, any cost coefficients):

* **KV at a token.** Request i's t-th generated token (t = 1..O_i) leaves exactly
  ``I_i + t − 1`` KVs: the first token completes the prompt (KV = I_i); a decode adds one KV;
  a decode-phase eviction sets ``Iin ← m + 1``, so the refill that produces the next token ends
  at ``m + 1``.  Its O_i tokens come from O_i *distinct* non-empty batches.
* **How a token is paid** (per-layer ms, on top of ``a_o`` for the one token it adds to the
  ``I_i + O_i − 1`` processed at least): token 1 by a prefill of I_i tokens; token t ≥ 2 either
  by a decode reading ``I_i + t − 2`` KVs (``a_d·(I_i+t−2) + s_d``) or by a refill of
  ``I_i + t − 1`` tokens (``a_o·(I_i+t−2)`` extra tokens + its prefill attention).  A prefill of
  n tokens in k ≥ ⌈n/P⌉ chunks costs ``a_p·Σc² + s_p·k ≥ a_p·n²/k + s_p·k`` (Σc² ≥ n²/k by
  convexity), minimised over real k ∈ [⌈n/P⌉, n] (`prefill_cost_bound`).  Summing the cheaper
  option per token gives `request_work_bounds` (the request's own share of the objective).
* **Batch counts.** Non-empty batches ``N ≥ max(max_i O_i, ⌈Σ(I+O−1)/C⌉, ⌈Σ_i K_i / M⌉,
  ⌈Σ O / R_max⌉, clique)`` where ``K_i = Σ_t (I_i+t−1)`` (KVs held at token batches, ≤ M per
  batch) and *clique* = for any request i0, its O_{i0} tokens plus every token of another request
  whose KV exceeds ``max(M − I_{i0}, M/2)`` pairwise cannot share a batch (their KVs sum above M).
  *Ramp-up* (`ramp_up_batches`): in the j-th non-empty batch a request's token is at most its j-th,
  so the KVs of the tokens of batch j sum to at most ``cap_j = min(M, Σ_i min(I_i+O_i−1, I_i+j−1))``;
  the N batches must hold every token's KV, ``Σ_{j≤N} cap_j ≥ Σ_i K_i``.  It beats ⌈ΣK/M⌉ when
  the prompts do not fill M (the first batches cannot).
  Batches with a prefill ``≥ max(1, ⌈ΣI/P⌉, ⌈ΣI/M⌉, #{i : I_i > M/2})``: every first token
  completes a prefill and leaves I_i KVs, so the prompts completed in one batch sum to ≤ M (two
  above M/2 never complete together).  Every non-empty batch pays b_o and
  b_p or b_d, so the biases cost at least ``b_o·N + b_p·P_min + min(b_p, b_d)·(N − P_min)``.
  A caller that has proven more prefill batches for the schedules it cares about (``least``, e.g. the
  single-prefill-batch test of `staggered.single_prefill_batch_impossible` for schedules of ≤ J
  batches) passes ``least_prefill_batches`` and P_min becomes ``max(P_min, least)`` (`solve` turns
  it into a global bound with `prefill_cut_bound`).
* **Online:** request i alone still needs its work and O_i batches after arriving.

Mean TTFT ≥ mean over i of (one batch holding request i's whole prefill at minimum cost).
"""

from __future__ import annotations

import math

import numpy as np

from planner.batching.problem import BatchingProblem


def prefill_cost_bound(problem: BatchingProblem, tokens: np.ndarray) -> np.ndarray:
    """Lower bound (per-layer ms) on ``a_p·Σc² + s_p·#chunks`` for prefilling ``tokens`` tokens."""
    cm = problem.cost
    n = np.asarray(tokens, float)
    k_low = np.ceil(n / problem.prefill_limit)
    if cm.s_p > 0:
        k_star = n * math.sqrt(cm.a_p / cm.s_p)
    else:
        k_star = n
    k = np.clip(k_star, k_low, np.maximum(n, k_low))
    k = np.maximum(k, 1.0)
    return cm.a_p * n * n / k + cm.s_p * k


def request_work_bounds(problem: BatchingProblem) -> np.ndarray:
    """Per request (per-layer ms): the least possible value of its own objective share
    ``Σ_j a_o c + a_p(sq − dg) + s_p(cz − dg) + a_d w + s_d dg`` (module docstring)."""
    cm = problem.cost
    out = np.empty(problem.n)
    for idx, (I, O) in enumerate(zip(problem.inputs.tolist(), problem.outputs.tolist())):
        t = np.arange(2, O + 1, dtype=float)
        decode = cm.a_d * (I + t - 2) + cm.s_d
        refill = cm.a_o * (I + t - 2) + prefill_cost_bound(problem, I + t - 1)
        out[idx] = (cm.a_o * (I + O - 1) + float(prefill_cost_bound(problem, np.array([I]))[0])
                    + float(np.minimum(decode, refill).sum()))
    return out


def kv_at_tokens(problem: BatchingProblem) -> np.ndarray:
    """``K_i = Σ_{t=1..O_i} (I_i + t − 1)``: KVs request i holds summed over its token batches."""
    I, O = problem.inputs.astype(float), problem.outputs.astype(float)
    return O * I + O * (O - 1) / 2


def memory_cliques(problem: BatchingProblem) -> list[tuple[int, tuple[int, ...]]]:
    """For each request i0: (i0, requests i ≠ i0 whose every token conflicts with every token of i0
    and with each other: ``I_i > max(M − I_{i0}, M/2)``).  Only non-trivial cliques are listed."""
    I = problem.inputs
    out = []
    for i0 in range(problem.n):
        threshold = max(problem.M - I[i0], problem.M / 2)
        others = tuple(int(i) for i in np.flatnonzero(I > threshold) if i != i0)
        if others:
            out.append((i0, others))
    return out


def ramp_up_batches(problem: BatchingProblem) -> int:
    """Least N with ``Σ_{j=1..N} min(M, Σ_i min(I_i+O_i−1, I_i+j−1)) ≥ Σ_i K_i`` (module docstring,
    *Ramp-up*).  Once cap_j reaches M (or every request its last KV) the rest is counted in closed form."""
    I, O = problem.inputs.astype(np.int64), problem.outputs.astype(np.int64)
    U = I + O - 1
    M = int(problem.M)
    need = int(kv_at_tokens(problem).sum())
    last = int(O.max())
    held, start = 0, 1
    block = max(1024, (1 << 22) // max(len(I), 1))  # batches j per vectorised block (memory ~ block × n)
    while held < need:  # the loop "j += 1; cap_j; stop at cap_j = M or j = max O; held += cap_j", in blocks
        j = np.arange(start, min(start + block, last) + 1, dtype=np.int64)
        cap = np.minimum(M, np.minimum(U[None, :], I[None, :] + j[:, None] - 1).sum(axis=1))
        before = held + np.cumsum(cap) - cap  # held at the start of batch j
        stop = (cap == M) | (j >= last)
        reach = before + cap >= need
        hit = np.flatnonzero(stop | reach)
        if hit.size:
            k = int(hit[0])
            if stop[k]:
                return int(j[k]) - 1 + math.ceil((need - int(before[k])) / int(cap[k]))
            return int(j[k])
        held = int(before[-1] + cap[-1])
        start = int(j[-1]) + 1
    return start - 1


def min_batches(problem: BatchingProblem) -> int:
    """Fewest non-empty batches of any schedule (module docstring, *Batch counts*)."""
    I, O = problem.inputs, problem.outputs
    U = I + O - 1
    M = problem.M
    counts = [int(O.max()), math.ceil(float(U.sum()) / problem.C), math.ceil(float(kv_at_tokens(problem).sum()) / M),
              math.ceil(float(O.sum()) / problem.running_limit), ramp_up_batches(problem)]
    for i0 in range(problem.n):
        threshold = math.floor(max(M - I[i0], M / 2))
        big = np.maximum(0, U - np.maximum(threshold, I - 1))  # tokens of i with KV > threshold
        big[i0] = 0
        counts.append(int(O[i0] + big.sum()))
    return max(counts)


def min_prefill_batches(problem: BatchingProblem) -> int:
    """Fewest batches containing a prefill chunk (module docstring)."""
    I = problem.inputs
    return max(1, math.ceil(float(I.sum()) / problem.prefill_limit), math.ceil(float(I.sum()) / problem.M),
               int(np.count_nonzero(2 * I > problem.M)))


def bias_lower_bound(problem: BatchingProblem, least_prefill_batches: int = 1) -> float:
    """Least total of the per-batch biases (per-layer ms); ``least_prefill_batches``: see the module
    docstring (valid only for the schedules for which the caller proved it)."""
    cm = problem.cost
    P_min = max(min_prefill_batches(problem), least_prefill_batches)
    N = max(min_batches(problem), P_min)
    return cm.b_o * N + cm.b_p * P_min + min(cm.b_p, cm.b_d) * (N - P_min)


def latency_lower_bound(problem: BatchingProblem, include_biases: bool = True, least_prefill_batches: int = 1) -> float:
    """See the module docstring; ``include_biases=False`` leaves out every per-batch bias and the
    online term (used to bound the batch count, `formulation.batch_count_bound`);
    ``least_prefill_batches`` as in `bias_lower_bound`."""
    cm = problem.cost
    work = request_work_bounds(problem)
    ms = float(work.sum()) + (bias_lower_bound(problem, least_prefill_batches) if include_biases else 0.0)
    bound = ms * cm.scale
    if problem.online and include_biases:
        O = problem.outputs.astype(float)
        single = problem.arrivals + cm.scale * (work + cm.b_o * O + cm.b_p + min(cm.b_p, cm.b_d) * (O - 1))
        bound = max(bound, float(single.max()))
    return float(bound)


def prefill_cut_bound(problem: BatchingProblem, incumbent_latency: float, least_prefill_batches: int) -> float:
    """Global latency bound when every schedule of ≤ J non-empty batches is proven to have at least
    ``least_prefill_batches`` prefill batches, J ≥ `formulation.batch_count_bound` of the incumbent.

    Any schedule S either has N ≤ J batches, so latency(S) ≥ `latency_lower_bound` with that many
    prefill batches, or N > J ≥ batch_count_bound(incumbent), so latency(S) ≥ the incumbent's (the
    batch-count bound is the largest N whose bias + work bound stays ≤ the incumbent, up to round-off
    of 1e-9 batch).  Hence OPT ≥ min(incumbent, latency_lower_bound(least_prefill_batches))."""
    cut = latency_lower_bound(problem, least_prefill_batches=least_prefill_batches)
    return float(min(cut, incumbent_latency))


def ttft_lower_bound(problem: BatchingProblem) -> float:
    cm = problem.cost
    I = problem.inputs.astype(float)
    one = cm.scale * (cm.a_o * I + cm.b_o + cm.b_p + cm.s_p + cm.a_p * I)
    return float(np.mean(one))
