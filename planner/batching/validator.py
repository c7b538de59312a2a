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
from dataclasses import dataclass, field

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


@dataclass
class _Replay:
    """The replay's state after the batches so far: per request its prompt length ``Iin`` (a decode-phase
    request evicted re-prefills its generated tokens as prompt), KV held, tokens generated, first-token and
    completion times; the clock, Σ KV held and #requests holding KV (running totals), evictions, batch times."""

    Iin: list[int]
    kv: list[int]
    produced: list[int]
    first_token: list[float]
    done_at: list[float]
    clock: float = 0.0
    held: int = 0
    holding: int = 0
    evictions: int = 0
    per_batch: list[float] = field(default_factory=list)

    @staticmethod
    def initial(problem: BatchingProblem) -> "_Replay":
        n = len(problem.requests)
        return _Replay([r.input_tokens for r in problem.requests], [0] * n, [0] * n, [math.nan] * n, [math.nan] * n)

    def drop_kv(self, i: int) -> None:
        """Request i releases its KV."""
        self.held -= self.kv[i]
        self.holding -= self.kv[i] > 0
        self.kv[i] = 0


@dataclass(frozen=True)
class _BatchTerms:
    """What one batch processes (the §3.2 cost terms: Σc, prefill tokens, Σc² over prefills, #prefills, KV
    read by decodes, #decodes) and when it starts (the end of the previous batch or its latest arrival)."""

    start: float
    tokens: int
    prefill_tokens: int
    square_sum: int
    n_prefill: int
    kv_read: int
    n_decode: int


def _violation(constraint: str, where: str, value: float, limit: float, message: str) -> Violation:
    """A violation with its value and limit as floats."""
    return Violation(constraint, where, float(value), float(limit), message)


def validate_schedule(problem: BatchingProblem, schedule: Schedule, objective: str = "latency") -> ValidationReport:
    """Replay ``schedule``; objective ``latency`` (end of the last batch) or ``ttft`` (mean TTFT).

    Per batch, in this order: evictions (``evict_no_tokens``), the token rules of each entry
    (``finished``, ``decode_one_token``, ``prefill_overrun``), the batch limits (``token_free_batch``,
    ``C``, ``P``), the memory after the batch (``M``, ``R_max``); at the end ``termination``.
    """
    reqs = problem.requests
    P = problem.P if problem.P is not None else problem.C
    R_max = problem.R_max if problem.R_max is not None else len(reqs)
    state = _Replay.initial(problem)
    violations: list[Violation] = []
    evicted_lists = schedule.evictions()
    for j, entries in enumerate(schedule.iter_batches()):  # one batch at a time: memory per batch, not per schedule
        evicted = set(evicted_lists[j])
        where = f"batch {j}"
        violations += _check_evict_no_tokens(problem, where, evicted, entries)
        _evict(problem, state, evicted)
        found, terms = _check_token_rules(problem, state, where, entries)
        violations += found
        violations += _check_batch_limits(problem, where, entries, terms, P)
        _run_batch(problem, state, entries, terms)
        violations += _check_memory(problem, state, where, R_max)
        for i in entries:  # finished requests release their KV after their last batch (only a request
            if state.produced[i] >= reqs[i].output_tokens:  # of this batch can hold KV once finished)
                state.drop_kv(i)
    violations += _check_termination(problem, state)
    return _report(problem, state, objective, violations)


def _check_evict_no_tokens(problem: BatchingProblem, where: str, evicted: set[int],
                           entries: dict[int, int]) -> list[Violation]:
    """``evict_no_tokens``: a request evicted in a batch processes no token in it."""
    return [_violation("evict_no_tokens", f"{where}, request {problem.requests[i].request_id}", entries[i], 0,
                       f"{where}: request {problem.requests[i].request_id} is evicted and processes tokens")
            for i in evicted if i in entries]


def _evict(problem: BatchingProblem, state: _Replay, evicted: set[int]) -> None:
    """The evicted requests drop their KV; an unfinished request holding KV counts as one eviction."""
    for i in evicted:
        if state.kv[i] > 0 and state.produced[i] < problem.requests[i].output_tokens:
            state.evictions += 1
        if state.kv[i] >= state.Iin[i]:  # decode-phase victim: generated tokens become prompt
            state.Iin[i] = state.kv[i] + 1
        state.drop_kv(i)


def _check_token_rules(problem: BatchingProblem, state: _Replay, where: str,
                       entries: dict[int, int]) -> tuple[list[Violation], _BatchTerms]:
    """Per entry: ``finished`` (nothing runs after completion), ``decode_one_token`` (a decode-phase request,
    KV ≥ Iin, processes one token), ``prefill_overrun`` (a prefill stays within its input); and the batch's
    cost terms (a finished request's entry counts only its arrival)."""
    out: list[Violation] = []
    reqs, kv, Iin, produced = problem.requests, state.kv, state.Iin, state.produced  # locals: the replay's hot loop
    start = state.clock
    tokens = prefill_tokens = square_sum = n_prefill = kv_read = n_decode = 0
    for i, c in entries.items():
        r = reqs[i]
        start = max(start, r.arrival_s)
        if produced[i] >= r.output_tokens:
            out.append(_violation("finished", f"{where}, request {r.request_id}", c, 0,
                                  f"{where}: request {r.request_id} runs after finishing"))
            continue
        if kv[i] >= Iin[i]:  # decode
            if c > 1:
                out.append(_violation("decode_one_token", f"{where}, request {r.request_id}", c, 1,
                                      f"{where}: decode request {r.request_id} processes {c} tokens"))
            n_decode += 1
            kv_read += kv[i]
        else:
            if kv[i] + c > Iin[i]:
                out.append(_violation("prefill_overrun", f"{where}, request {r.request_id}", kv[i] + c, Iin[i],
                                      f"{where}: prefill of {r.request_id} overruns its input "
                                      f"({kv[i]}+{c} > {Iin[i]})"))
            n_prefill += 1
            prefill_tokens += c
            square_sum += c * c
        tokens += c
    return out, _BatchTerms(start, tokens, prefill_tokens, square_sum, n_prefill, kv_read, n_decode)


def _check_batch_limits(problem: BatchingProblem, where: str, entries: dict[int, int], terms: _BatchTerms,
                        P: int) -> list[Violation]:
    """``token_free_batch`` (every batch runs a token), ``C`` (Σc ≤ C) and ``P`` (prefill tokens ≤ P)."""
    out: list[Violation] = []
    if not entries:
        out.append(_violation("token_free_batch", where, 0, 1,
                              f"{where}: processes no token (every batch runs at least one token; "
                              "evictions belong to a batch that runs other requests)"))
    if terms.tokens > problem.C:
        out.append(_violation("C", where, terms.tokens, problem.C, f"{where}: {terms.tokens} tokens > C={problem.C}"))
    if terms.prefill_tokens > P:
        out.append(_violation("P", where, terms.prefill_tokens, P,
                              f"{where}: {terms.prefill_tokens} prefill tokens > P={P}"))
    return out


def _run_batch(problem: BatchingProblem, state: _Replay, entries: dict[int, int], terms: _BatchTerms) -> None:
    """The batch's time T_j (clock: its start + T_j), then its tokens: KV grows by c; a request at or past
    its prompt generates one token (first token and completion stamped at the batch's end)."""
    seconds = _batch_ms(problem.cost, terms.tokens, terms.square_sum, terms.n_prefill, terms.kv_read,
                        terms.n_decode) * problem.cost.n_layers / 1000.0
    state.per_batch.append(seconds)
    state.clock = terms.start + seconds if entries else state.clock
    reqs, kv, Iin, produced = problem.requests, state.kv, state.Iin, state.produced  # locals: the replay's hot loop
    first_token, done_at = state.first_token, state.done_at
    clock, held, holding = state.clock, state.held, state.holding
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
    state.held, state.holding = held, holding


def _check_memory(problem: BatchingProblem, state: _Replay, where: str, R_max: int) -> list[Violation]:
    """``M`` (Σ KV held after the batch ≤ M) and ``R_max`` (requests holding KV after the batch ≤ R_max)."""
    out: list[Violation] = []
    if state.held > problem.M:
        out.append(_violation("M", where, state.held, problem.M,
                              f"{where}: {state.held} KV tokens held > M={problem.M}"))
    if state.holding > R_max:
        out.append(_violation("R_max", where, state.holding, R_max,
                              f"{where}: {state.holding} running requests > R_max={R_max}"))
    return out


def _check_termination(problem: BatchingProblem, state: _Replay) -> list[Violation]:
    """``termination``: every request ends with exactly O generated tokens."""
    return [_violation("termination", f"request {r.request_id}", state.produced[i], r.output_tokens,
                       f"request {r.request_id} generated {state.produced[i]} of {r.output_tokens} tokens")
            for i, r in enumerate(problem.requests) if state.produced[i] != r.output_tokens]


def _report(problem: BatchingProblem, state: _Replay, objective: str, violations: list[Violation]) -> ValidationReport:
    """Total latency (the clock after the last batch) and mean TTFT (∞ unless every request finished)."""
    reqs = problem.requests
    n = len(reqs)
    finished = all(not math.isnan(x) for x in state.done_at)
    latency = state.clock
    ttfts = [state.first_token[i] - reqs[i].arrival_s for i in range(n)]
    mean_ttft = sum(ttfts) / n if finished else math.inf
    value = latency if objective == "latency" else mean_ttft
    return ValidationReport(
        feasible=not violations,
        objective=value,
        violations=tuple(violations),
        details={"total_latency": latency, "mean_ttft": mean_ttft, "evictions": state.evictions,
                 "batch_seconds": state.per_batch},
    )
