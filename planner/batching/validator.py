"""Independent schedule validator: replays any schedule batch by batch and recomputes its cost.

Shares no code with the formulation or the simulator.  Rules checked (docs/formulations.md §3.3):

* per batch: Σc ≤ C, prefill tokens ≤ P, Σ KV held after the batch ≤ M, requests holding KV
  after the batch ≤ R_max;
* phase rules: a decode-phase request (m ≥ Iin) processes at most 1 token; a prefill never goes
  beyond its input; nothing is processed before arrival, after completion, or by a request
  evicted in the same batch;
* token accounting: every request ends with exactly O generated tokens;
* every batch processes at least one token (an eviction-only batch is rejected, as in the MIP's
  ``batch_nonempty`` rows and the brute-force oracle, whose every batch runs a token).

Timing: batch j starts at max(end of batch j−1, latest arrival among its requests) (offline: the
sum of the previous batch times) and lasts T_j of the §3.2 model, recomputed here from scratch.
The objective is the total latency (end of the last batch) or the mean TTFT.
"""

from __future__ import annotations

import math

from planner.batching.problem import BatchingProblem
from planner.batching.schedule import Schedule
from planner.core.result import ValidationReport, Violation

TOLERANCE = 1e-9


def _batch_ms(cost, tokens: int, sq: int, n_p: int, kv: int, n_d: int) -> float:
    if n_p + n_d == 0:
        return 0.0
    total = cost.b_o + cost.a_o * tokens
    if n_p:
        total += cost.b_p + cost.a_p * sq + cost.s_p * n_p
    if n_d:
        total += cost.b_d + cost.a_d * kv + cost.s_d * n_d
    return total


def validate_schedule(problem: BatchingProblem, schedule: Schedule, objective: str = "latency") -> ValidationReport:
    """Replay ``schedule``; objective ``latency`` (end of the last batch) or ``ttft`` (mean TTFT)."""
    reqs = problem.requests
    n = len(reqs)
    P = problem.P if problem.P is not None else problem.C
    R_max = problem.R_max if problem.R_max is not None else n
    Iin = [r.input_tokens for r in reqs]
    kv = [0] * n
    produced = [0] * n
    first_token = [math.nan] * n
    done_at = [math.nan] * n
    violations: list[Violation] = []
    clock = 0.0
    per_batch: list[float] = []
    eviction_count = 0
    held = holding = 0  # Σ kv and #{kv > 0}, kept as running totals (cost per entry, not per request)

    def bad(constraint: str, where: str, value: float, limit: float, message: str) -> None:
        violations.append(Violation(constraint, where, float(value), float(limit), message))

    evicted_lists = schedule.evictions()
    for j, entries in enumerate(schedule.iter_batches()):  # one batch at a time: memory per batch, not per schedule
        evicted = set(evicted_lists[j])
        where = f"batch {j}"
        for i in evicted:
            if i in entries:
                bad("evict_no_tokens", f"{where}, request {reqs[i].request_id}", entries[i], 0,
                    f"{where}: request {reqs[i].request_id} is evicted and processes tokens")
            if kv[i] > 0 and produced[i] < reqs[i].output_tokens:
                eviction_count += 1
            if kv[i] >= Iin[i]:  # decode-phase victim: generated tokens become prompt
                Iin[i] = kv[i] + 1
            held -= kv[i]
            holding -= kv[i] > 0
            kv[i] = 0
        tokens = prefill_tokens = square_sum = n_prefill = kv_read = n_decode = 0
        start = clock
        for i, c in entries.items():
            r = reqs[i]
            start = max(start, r.arrival_s)
            if produced[i] >= r.output_tokens:
                bad("finished", f"{where}, request {r.request_id}", c, 0, f"{where}: request {r.request_id} runs after finishing")
                continue
            if kv[i] >= Iin[i]:  # decode
                if c > 1:
                    bad("decode_one_token", f"{where}, request {r.request_id}", c, 1,
                        f"{where}: decode request {r.request_id} processes {c} tokens")
                n_decode += 1
                kv_read += kv[i]
            else:
                if kv[i] + c > Iin[i]:
                    bad("prefill_overrun", f"{where}, request {r.request_id}", kv[i] + c, Iin[i],
                        f"{where}: prefill of {r.request_id} overruns its input ({kv[i]}+{c} > {Iin[i]})")
                n_prefill += 1
                prefill_tokens += c
                square_sum += c * c
            tokens += c
        if not entries:
            bad("token_free_batch", where, 0, 1, f"{where}: processes no token (every batch runs at least one token; "
                "evictions belong to a batch that runs other requests)")
        if tokens > problem.C:
            bad("C", where, tokens, problem.C, f"{where}: {tokens} tokens > C={problem.C}")
        if prefill_tokens > P:
            bad("P", where, prefill_tokens, P, f"{where}: {prefill_tokens} prefill tokens > P={P}")
        seconds = _batch_ms(problem.cost, tokens, square_sum, n_prefill, kv_read, n_decode) * problem.cost.n_layers / 1000.0
        per_batch.append(seconds)
        clock = start + seconds if entries else clock
        for i, c in entries.items():
            was_holding = kv[i] > 0
            kv[i] += c
            held += c
            holding += (kv[i] > 0) - was_holding
            if kv[i] >= Iin[i] and produced[i] < reqs[i].output_tokens:
                produced[i] += 1
                if math.isnan(first_token[i]):
                    first_token[i] = clock
                if produced[i] == reqs[i].output_tokens:
                    done_at[i] = clock
        if held > problem.M:
            bad("M", where, held, problem.M, f"{where}: {held} KV tokens held > M={problem.M}")
        if holding > R_max:
            bad("R_max", where, holding, R_max, f"{where}: {holding} running requests > R_max={R_max}")
        for i in entries:  # finished requests release their KV after their last batch (only a request
            if produced[i] >= reqs[i].output_tokens:  # of this batch can hold KV once finished)
                held -= kv[i]
                holding -= kv[i] > 0
                kv[i] = 0
    for i, r in enumerate(reqs):
        if produced[i] != r.output_tokens:
            bad("termination", f"request {r.request_id}", produced[i], r.output_tokens,
                f"request {r.request_id} generated {produced[i]} of {r.output_tokens} tokens")
    finished = all(not math.isnan(x) for x in done_at)
    latency = clock
    ttfts = [first_token[i] - reqs[i].arrival_s for i in range(n)]
    mean_ttft = sum(ttfts) / n if finished else math.inf
    value = latency if objective == "latency" else mean_ttft
    return ValidationReport(
        feasible=not violations,
        objective=value,
        violations=tuple(violations),
        details={"total_latency": latency, "mean_ttft": mean_ttft, "evictions": eviction_count,
                 "batch_seconds": per_batch},
    )
