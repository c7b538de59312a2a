"""Global bound from the single-prefill-batch test (`bounds.prefill_cut_bound`): never above the exact
optimum (brute force over every §3.3 schedule), and reported by `solve_batching`."""

from __future__ import annotations

import numpy as np
import pytest

from planner.batching.bounds import latency_lower_bound, min_prefill_batches, prefill_cut_bound
from planner.batching.bruteforce import brute_force_latency
from planner.batching.formulation import batch_count_bound
from planner.batching.problem import make_problem
from planner.batching.pipeline import heuristic_results, solve_batching
from planner.batching.staggered import single_prefill_batch_impossible
from planner.solver import SolveStatus


def _incumbent(problem) -> float:
    return min(r.objective for r in heuristic_results(problem).values())


def test_cut_raises_the_bound_and_stays_below_the_optimum():
    # I = (3, 3), O = (3, 3), M = 7: both prompts fit together (P_min = 1), but a single prefill batch is
    # impossible (one request must finish first, its KV 5 beside the other's 3 > 7), so every schedule
    # pays b_p at least twice: the bound rises by b_p − b_d batches' worth and stays ≤ the optimum.
    p = make_problem([3, 3], [3, 3], M=7)
    assert min_prefill_batches(p) == 1
    incumbent = _incumbent(p)
    J = batch_count_bound(p, incumbent)
    assert single_prefill_batch_impossible(p, J)
    cut = prefill_cut_bound(p, incumbent, 2)
    cm = p.cost
    assert cut == pytest.approx(latency_lower_bound(p) + cm.scale * (cm.b_p - min(cm.b_p, cm.b_d)), rel=1e-12)
    assert cut <= brute_force_latency(p) + 1e-12


def test_cut_never_exceeds_the_incumbent():
    p = make_problem([3, 3], [3, 3], M=7)
    low = latency_lower_bound(p)
    assert prefill_cut_bound(p, low * 0.5, 2) == pytest.approx(low * 0.5)


@pytest.mark.parametrize("seed", range(6))
def test_cut_below_brute_force_on_random_tiny_instances(seed):
    rng = np.random.default_rng(100 + seed)
    inputs, outputs = rng.integers(1, 5, 2), rng.integers(2, 5, 2)
    M = int(max((inputs + outputs - 1).max(), inputs.sum() + 1))  # both prompts fit: P_min = 1
    p = make_problem(inputs, outputs, M=M)
    incumbent = _incumbent(p)
    if not single_prefill_batch_impossible(p, batch_count_bound(p, incumbent)):
        assert prefill_cut_bound(p, incumbent, 1) == pytest.approx(min(latency_lower_bound(p), incumbent))
        return
    assert prefill_cut_bound(p, incumbent, 2) <= brute_force_latency(p) + 1e-12


def test_solve_reports_the_cut_bound():
    p = make_problem([3, 3], [3, 3], M=7)
    res = solve_batching(p, time_limit=30, threads=1, formulation="paths", stop_at_bound=False)
    assert res.status == SolveStatus.OPTIMAL
    assert res.stats["least_prefill_batches"] == 2
    cut = res.stats["prefill_cut_bound"]
    assert cut is not None and cut > res.stats["combinatorial_bound"]
    assert cut <= res.objective + 1e-12 and res.bound <= res.objective + 1e-12
    assert res.validation.feasible and res.validation.objective == pytest.approx(res.objective, rel=1e-12)
