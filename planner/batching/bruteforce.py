"""Exact search over *all* schedules for tiny offline instances (test oracle for the MIP).

Dijkstra over states ``(Iin_i, m_i, generated_i)`` per request; one edge = one batch, in which every
request idles, is evicted (if it holds KV) or processes a feasible number of tokens (decode: 1,
prefill: 1..Iin−m), subject to C, P, M, R_max.  Edge weight = the §3.2 batch time.  Independent of
the MIP (no batch-count limit J), so it also checks that J was large enough.
"""

from __future__ import annotations

import heapq
import itertools

from planner.batching.problem import BatchingProblem


def brute_force_latency(problem: BatchingProblem, max_states: int = 500_000) -> float:
    if problem.online:
        raise ValueError("brute force handles offline instances only")
    reqs = problem.requests
    O = [r.output_len for r in reqs]
    P = problem.prefill_limit
    R = problem.running_limit
    cm = problem.cost
    start = tuple((r.input_len, 0, 0) for r in reqs)
    best = {start: 0.0}
    heap = [(0.0, start)]
    seen = 0
    while heap:
        cost, state = heapq.heappop(heap)
        if cost > best.get(state, float("inf")) + 1e-15:
            continue
        if all(s[2] == O[i] for i, s in enumerate(state)):
            return cost
        seen += 1
        if seen > max_states:
            raise RuntimeError("state space too large for brute force")
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
            for (Iin, m, gen), (act, c), (_, m2, gen2), o in zip(state, combo, new, O):
                kv = m + c if act == "run" else m2
                held += kv
                holding += kv > 0
            if held > problem.M or holding > R:
                continue
            secs = cm.batch_seconds(tokens, sq, n_p, kv_read, n_d)
            key = tuple(new)
            total = cost + secs
            if total < best.get(key, float("inf")) - 1e-15:
                best[key] = total
                heapq.heappush(heap, (total, key))
    raise RuntimeError("no schedule finishes the instance")
