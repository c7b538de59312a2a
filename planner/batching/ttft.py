"""The mean-TTFT objective: which schedules need searching, and how many batches that takes.

**Only the prefix matters.**  Request i's first-token time is the end of the batch of its first token;
batches after the last first token change no TTFT.  So a schedule is scored by its *prefix* (batches
1..F, F = the last first-token batch), and any prefix that reaches every first token can be finished
by any completion (`complete_schedule`) without changing the objective.

**Normal form of a prefix** (`ttft_prefix`, the map N_T).  From any schedule S delete

1. every token a request processes after its first token (decodes, refills: TTFT-free work),
2. every prefill chunk of a prompt segment that is evicted before it completes (wasted work),
3. every eviction, then evict each request with O_i > 1 in the first remaining batch after its
   first-token batch (its KV is no longer needed), and
4. every batch left without a token, and every batch after the last first-token batch.

What is left: request i's prompt chunks of the segment that produces its first token, in their
original batches (before its first token no decode-phase eviction can have happened, so that segment
is the prompt, Iin = I_i).  Every rule of §3.3 still holds — a batch processes a subset of what it
did (C, P hold), request i holds either what it held in S (during the kept segment) or nothing
(before it, and from the batch after its first token), so Σ KV and the running count only fall (M,
R_max) — and every batch time only falls: the §3.2 time is non-decreasing in the tokens, Σc², the KVs
read, the prefill and decode counts, and an entry removed removes its terms.  Batch j starts at the
end of batch j−1 or at the arrival of a request in it, both no later than in S, so every first-token
time is no later: TTFT(N_T(S)) ≤ TTFT(S).  Hence some TTFT-optimal schedule has a normal-form
prefix, in which **every batch runs prompt chunks only** (no decode).

**The first-token instance** (`first_token_problem`: the same requests and limits with every O_i = 1).
A normal-form prefix is a schedule of that instance: there a request finishes at its first token and
releases its KV after that batch, which is what the eviction of step 3 does (a request with O_i = 1
needs none), and the first-token times are the same.  Conversely, a schedule of the first-token
instance, with each request of O_i > 1 evicted in the batch after its first token (`ttft_prefix` of
the full instance), is a prefix of the full instance that `complete_schedule` finishes without
changing a first-token time.  So the least mean TTFT of the full instance is the least mean TTFT of
the first-token instance, whose model (`formulation.build_model` with every O_i = 1, all of its cuts
valid for it) is much smaller: U_i = I_i, one token per request.

**How many batches that prefix has** (`prefix_batch_bound`).  Let the normal-form prefix of a
schedule with mean TTFT ≤ τ (e.g. the best heuristic's) have N batches.

* Each batch runs at least one prompt token and the prompts sum to ΣI: ``N ≤ Σ_i I_i``.
* Each batch is a prefill batch, so it lasts at least ``t_b = scale·(b_o + b_p + s_p)`` plus its
  tokens' ``a_o·c + a_p·c²``; all ΣI prompt tokens are processed (Σ c² ≥ Σ c), and the batches run
  one after another from time 0: the last first token comes at
  ``F ≥ N·t_b + scale·(a_o + a_p)·ΣI``.
* The last first token belongs to some request i*, with ``F = a_{i*} + TTFT_{i*}``; every other
  request has ``TTFT_i ≥ ℓ_i`` (its own prompt's least batch time, `bounds.ttft_lower_bound`'s
  terms), so ``F ≤ max_i a_i + n·τ − (Σ_i ℓ_i − max_i ℓ_i)``.

Hence ``N ≤ min(ΣI, ⌊(max a + n·τ − Σℓ + max ℓ − scale·(a_o + a_p)·ΣI) / t_b⌋)``: the model of the
first-token instance with that many batches contains an optimal prefix, and its optimum is the TTFT
optimum over *all* schedules of the full instance, whatever their length.
"""

from __future__ import annotations

import math

import numpy as np

from planner.batching.problem import BatchingProblem
from planner.batching.schedule import Schedule


def first_token_problem(problem: BatchingProblem) -> BatchingProblem:
    """The first-token instance (module docstring): the same requests, arrivals, limits and costs, every
    output length 1."""
    requests = tuple(r.model_copy(update={"output_tokens": 1}) for r in problem.requests)
    return problem.model_copy(update={"requests": requests, "name": f"{problem.name}-first-tokens"})


def single_ttft_bounds(problem: BatchingProblem) -> np.ndarray:
    """ℓ_i (s): the least TTFT of request i — one batch with its whole prompt, nothing else
    (``scale·(a_o I + a_p I + b_o + b_p + s_p)``, Σc² ≥ Σc for chunks; the terms of `bounds.ttft_lower_bound`)."""
    cm = problem.cost
    I = problem.inputs.astype(float)
    return cm.scale * (cm.a_o * I + cm.b_o + cm.b_p + cm.s_p + cm.a_p * I)


def prefix_batch_bound(problem: BatchingProblem, mean_ttft: float) -> int:
    """Most batches of the normal-form prefix of a schedule with mean TTFT ≤ ``mean_ttft`` (module docstring)."""
    cm = problem.cost
    total_prompt = int(problem.inputs.sum())
    per_batch = cm.scale * (cm.b_o + cm.b_p + cm.s_p)
    if per_batch <= 0 or not math.isfinite(mean_ttft):
        return total_prompt
    ell = single_ttft_bounds(problem)
    last = (float(problem.arrivals.max()) + problem.n * mean_ttft - (float(ell.sum()) - float(ell.max()))
            - cm.scale * (cm.a_o + cm.a_p) * total_prompt)
    return int(max(1, min(total_prompt, math.floor(last / per_batch + 1e-9))))


def ttft_prefix(problem: BatchingProblem, schedule: Schedule) -> Schedule:
    """N_T(schedule) of the module docstring: the normal-form prefix (no completion).  Requests that never
    produce a token in ``schedule`` keep nothing."""
    n = problem.n
    O = problem.outputs
    Iin = problem.inputs.astype(np.int64).copy()
    m = np.zeros(n, np.int64)
    first = np.full(n, -1, np.int64)
    segment: list[list[tuple[int, int]]] = [[] for _ in range(n)]  # (batch, tokens) of the open prompt segment
    kept: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    evictions = schedule.evictions()
    for j, entries in enumerate(schedule.iter_batches()):
        for i in evictions[j]:
            if m[i] >= Iin[i]:
                Iin[i] = m[i] + 1
            m[i] = 0
            segment[i] = []  # a prompt segment evicted before its first token: wasted chunks
        for i, c in entries.items():
            m[i] += c
            if first[i] >= 0:
                continue  # after the first token: dropped
            segment[i].append((j, c))
            if m[i] >= Iin[i]:
                first[i] = j
                kept[i] = segment[i]
                segment[i] = []
        for i in entries:  # released after the last token (the validator's rule): only the first matters here
            if first[i] == j and O[i] == 1:
                m[i] = 0
    batches: dict[int, dict[int, int]] = {}
    for i in range(n):
        for j, c in kept[i]:
            batches.setdefault(j, {})[i] = c
    order = sorted(batches)
    position = {j: k for k, j in enumerate(order)}
    new_evictions: list[list[int]] = [[] for _ in order]
    for i in range(n):
        if first[i] >= 0 and O[i] > 1 and position[int(first[i])] + 1 < len(order):
            new_evictions[position[int(first[i])] + 1].append(i)
    return Schedule.from_batches([batches[j] for j in order], new_evictions, schedule.request_ids)


def complete_schedule(problem: BatchingProblem, prefix: Schedule) -> Schedule:
    """``prefix`` followed by a completion that finishes every request (module docstring: it changes no
    first-token time of a prefix that reaches every first token).

    Replays the prefix (§3.3 rules), then takes the unfinished requests in index order in groups: a
    group is the next requests whose final KVs ``U_i = I_i + O_i − 1`` sum to at most M, at most
    min(R_max, C) of them.  The group's first batch evicts every other request holding KV; then each
    batch decodes every group member in the decode phase (one token each) and gives the members still
    prefilling (a refill after an eviction, or an unfinished prompt) chunks within what is left of P
    and C, until the whole group has finished.  A member's KV never exceeds its U_i, so every batch
    fits M, R_max, C and P, and every batch runs a token (a decode, or a chunk of ≥ 1 token)."""
    n = problem.n
    I, O = problem.inputs.astype(np.int64), problem.outputs.astype(np.int64)
    U = I + O - 1
    C, P, M, R = problem.C, problem.prefill_limit, problem.M, problem.running_limit
    Iin = I.copy()
    m = np.zeros(n, np.int64)
    gen = np.zeros(n, np.int64)
    batches = [dict(b) for b in prefix.batches()]
    evictions = [list(e) for e in prefix.evictions()]

    def run(entries: dict[int, int], evicted: list[int]) -> None:
        for i in evicted:
            if m[i] >= Iin[i]:
                Iin[i] = m[i] + 1
            m[i] = 0
        for i, c in entries.items():
            m[i] += c
            if m[i] >= Iin[i]:
                gen[i] += 1
        for i in entries:
            if gen[i] >= O[i]:
                m[i] = 0

    for entries, evicted in zip(batches, evictions):
        run(entries, evicted)
    todo = [i for i in range(n) if gen[i] < O[i]]
    while todo:
        group: list[int] = []
        held = 0
        for i in todo:
            if len(group) < min(R, C) and held + U[i] <= M:
                group.append(i)
                held += int(U[i])
        members = set(group)
        evicted = [k for k in range(n) if m[k] > 0 and k not in members]
        while any(gen[i] < O[i] for i in group):
            entries: dict[int, int] = {}
            c_left, p_left = C, P
            for i in group:
                if gen[i] < O[i] and m[i] >= Iin[i]:
                    entries[i] = 1
                    c_left -= 1
            for i in group:
                if gen[i] < O[i] and m[i] < Iin[i]:
                    c = int(min(Iin[i] - m[i], p_left, c_left))
                    if c > 0:
                        entries[i] = c
                        c_left -= c
                        p_left -= c
            batches.append(entries)
            evictions.append(sorted(evicted))
            run(entries, evicted)
            evicted = []
        todo = [i for i in todo if gen[i] < O[i]]
    return Schedule.from_batches(batches, evictions, prefix.request_ids)
