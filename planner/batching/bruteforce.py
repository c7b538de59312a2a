"""Exact search over *all* schedules for tiny offline instances (test oracle for the MIP).

Dijkstra over states ``(Iin_i, m_i, generated_i)`` per request; one edge = one batch, in which every
request idles, is evicted (if it holds KV) or processes a feasible number of tokens (decode: 1,
prefill: 1..Iin−m), subject to C, P, M, R_max.  Edge weights (both ≥ 0, so Dijkstra is exact):

* latency: the §3.2 batch time T of the batch;
* TTFT: ``T · w / n`` with w = the requests that have no token yet when the batch starts.  Offline
  every batch starts when the previous one ends, so request i's first-token time is the sum of the
  batch times up to its first-token batch and Σ_i first_i = Σ_batches T · w: the mean TTFT is the
  path's total weight.

There is no bound on the number of batches.  The latency search runs until every request has generated
all its tokens; the TTFT search stops at the first state (in cost order) where every request has a
token *and* a depth-first search finds batches that finish every request from there (after the last
first token every batch weighs 0, so that state's cost is the schedule's mean TTFT).  Nothing is
assumed about what follows the last first token, so the oracle shares nothing with the MIP's batch
count J or its TTFT prefix reasoning (`planner.batching.ttft`); it checks both.  Batch times
come from `InferMaxCostModel.batch_seconds`, the rules are re-implemented here (not the validator's
or the simulator's code).
"""

from __future__ import annotations

import heapq
import itertools

from planner.batching.problem import BatchingProblem

OBJECTIVES = ("latency", "ttft")


def brute_force(problem: BatchingProblem, objective: str = "latency", max_states: int = 500_000) -> float:
    """The least total latency (s) or mean TTFT (s) over every schedule of the offline ``problem``."""
    if problem.online:
        raise ValueError("brute force handles offline instances only")
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {OBJECTIVES}, got {objective!r}")
    n = problem.n
    O = [r.output_tokens for r in problem.requests]
    start = tuple((r.input_tokens, 0, 0) for r in problem.requests)
    best = {start: 0.0}
    heap = [(0.0, start)]
    seen = 0
    finishable: dict[tuple, bool] = {}
    while heap:
        cost, state = heapq.heappop(heap)
        if cost > best.get(state, float("inf")) + 1e-15:
            continue
        if all(s[2] == O[i] for i, s in enumerate(state)):
            return cost
        # TTFT: once every request has a token, the rest costs 0; the state still has to be finishable
        # (searched for, not assumed), and the first such state popped is the cheapest.
        if objective == "ttft" and all(s[2] >= 1 for s in state) and _finishable(problem, state, finishable):
            return cost
        seen += 1
        if seen > max_states:
            raise RuntimeError("state space too large for brute force")
        waiting = sum(1 for s in state if s[2] == 0)  # requests without a token when this batch starts
        weight = 1.0 if objective == "latency" else waiting / n
        for key, secs in _batches(problem, state):
            total = cost + secs * weight
            if total < best.get(key, float("inf")) - 1e-15:
                best[key] = total
                heapq.heappush(heap, (total, key))
    raise RuntimeError("no schedule finishes the instance")


def _finishable(problem: BatchingProblem, state: tuple, memo: dict) -> bool:
    """Whether some sequence of batches from ``state`` finishes every request (depth-first search)."""
    O = [r.output_tokens for r in problem.requests]
    stack = [state]
    visited = set()
    while stack:
        s = stack.pop()
        if memo.get(s) or all(x[2] == O[i] for i, x in enumerate(s)):
            memo[state] = True
            return True
        if s in visited:
            continue
        visited.add(s)
        stack.extend(key for key, _ in _batches(problem, s) if key not in visited)
    memo[state] = False
    return False


def _batches(problem: BatchingProblem, state: tuple):
    """Every batch from ``state``: (next state, batch seconds)."""
    O = [r.output_tokens for r in problem.requests]
    P = problem.prefill_limit
    R = problem.running_limit
    cm = problem.cost
    options = []
    for i, (Iin, m, gen) in enumerate(state):
        acts = [("idle", 0)]
        if gen < O[i]:
            if m > 0:
                acts.append(("evict", 0))
            if m >= Iin:
                acts.append(("run", 1))
            else:
                acts.extend(("run", c) for c in range(1, Iin - m + 1))
        options.append(acts)
    for combo in itertools.product(*options):
        tokens = pre = sq = n_p = kv_read = n_d = 0
        new = []
        for i, ((Iin, m, gen), (act, c)) in enumerate(zip(state, combo)):
            if act == "evict":
                new.append((m + 1 if m >= Iin else Iin, 0, gen))
                continue
            if act == "idle":
                new.append((Iin, m, gen))
                continue
            if m >= Iin:
                n_d += 1
                kv_read += m
            else:
                n_p += 1
                pre += c
                sq += c * c
            tokens += c
            m2 = m + c
            gen2 = gen + (1 if m2 >= Iin else 0)
            new.append((Iin, 0 if gen2 == O[i] else m2, gen2))
        if tokens == 0:
            continue
        if tokens > problem.C or pre > P:
            continue
        # KV held after the batch: finished requests still hold theirs at this batch
        held = 0
        holding = 0
        for (Iin, m, gen), (act, c), (_, m2, gen2) in zip(state, combo, new):
            kv = m + c if act == "run" else m2
            held += kv
            holding += kv > 0
        if held > problem.M or holding > R:
            continue
        yield tuple(new), cm.batch_seconds(tokens, sq, n_p, kv_read, n_d)


def brute_force_latency(problem: BatchingProblem, max_states: int = 500_000) -> float:
    """`brute_force` with the latency objective."""
    return brute_force(problem, "latency", max_states)


def brute_force_ttft(problem: BatchingProblem, max_states: int = 500_000) -> float:
    """`brute_force` with the mean-TTFT objective."""
    return brute_force(problem, "ttft", max_states)
