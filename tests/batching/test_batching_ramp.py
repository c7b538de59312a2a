"""Ramp-up batch count (`bounds.ramp_up_batches`): valid, and stronger than the area bound when the
prompts do not fill M."""

from __future__ import annotations

import math

import pytest

from planner.batching.bounds import kv_at_tokens, latency_lower_bound, min_batches, ramp_up_batches
from planner.batching.bruteforce import brute_force_latency
from planner.batching.problem import make_problem
from planner.batching.pipeline import solve_batching
from planner.solver import SolveStatus


def test_two_short_prompts_need_six_batches():
    """I = (1, 1), O = (4, 4), M = 4: token t of a request holds t KVs, ΣK = 2·(1+2+3+4) = 20.

    The area bound gives ⌈20/4⌉ = 5, the longest request 4 and the clique bound 5.  Ramp-up: the
    j-th batch holds at most min(4, 2·j) KVs at tokens (batch 1: both prompts, 1 + 1), so the
    cumulative capacity is 2, 6, 10, 14, 18, 22 and N ≥ 6.  Six batches do it: both run tokens 1 and 2
    together (KV 1+1, then 2+2), r1 is evicted, r0 decodes tokens 3 and 4 alone, then r1 refills
    (3 tokens, its token 3) and decodes token 4."""
    p = make_problem([1, 1], [4, 4], M=4)
    assert math.ceil(float(kv_at_tokens(p).sum()) / p.M) == 5
    assert ramp_up_batches(p) == 6 and min_batches(p) == 6
    res = solve_batching(p, time_limit=30, threads=1, stop_at_bound=False)
    assert res.status == SolveStatus.OPTIMAL
    assert res.solution.num_batches >= 6
    assert res.validation.feasible and res.validation.objective == pytest.approx(res.objective, rel=1e-12)
    assert latency_lower_bound(p) <= res.objective + 1e-12


@pytest.mark.parametrize("inputs, outputs, M", [([1, 1], [5, 5], 5), ([2, 1], [5, 5], 6), ([1, 1], [4, 4], 4)])
def test_lower_bound_with_ramp_below_brute_force(inputs, outputs, M):
    """Short prompts, longer outputs, tight M: the ramp-up term beats the area bound ⌈ΣK/M⌉ here,
    and the bound stays below the exact optimum of the brute force (every schedule of §3.3)."""
    p = make_problem(inputs, outputs, M=M)
    assert ramp_up_batches(p) > math.ceil(float(kv_at_tokens(p).sum()) / M)
    assert latency_lower_bound(p) <= brute_force_latency(p) + 1e-12


def _ramp_reference(problem) -> int:
    """The bound's definition as a plain loop, one batch at a time (the shipped version works in blocks)."""
    I, O = problem.inputs.astype(int), problem.outputs.astype(int)
    U, M, need = I + O - 1, int(problem.M), int(kv_at_tokens(problem).sum())
    held, j = 0, 0
    while held < need:
        j += 1
        cap = min(M, int(sum(min(u, i + j - 1) for u, i in zip(U, I))))
        if cap == M or j >= int(O.max()):
            return j - 1 + math.ceil((need - held) / cap)
        held += cap
    return j


@pytest.mark.parametrize("seed", range(6))
def test_blocked_ramp_equals_the_batch_by_batch_definition(seed):
    import numpy as np

    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 9)) if seed < 3 else 5000  # seeds 3–5: several blocks of 1,024 batches
    I, O = rng.integers(1, 50, n), rng.integers(1, 3000, n)
    M = int(rng.integers(int((I + O - 1).max()), int((I + O - 1).sum()) + 2))
    p = make_problem(I, O, M=M)
    assert ramp_up_batches(p) == _ramp_reference(p)
