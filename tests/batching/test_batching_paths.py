"""Batching: the per-request path model, its dominance normalisation, the lazy staggered heuristic,
and the token-free-batch rule shared by the validator, the MIP and the brute force."""

from __future__ import annotations

import numpy as np
import pytest

from planner.batching.bounds import latency_lower_bound
from planner.batching.bruteforce import brute_force_latency
from planner.batching.flow_formulation import (applicable, build_flow_model, extract_flow_schedule, flow_warm_start,
                                               normalize_schedule)
from planner.batching.formulation import compress_schedule, time_unit
from planner.batching.problem import make_problem
from planner.batching.schedule import Schedule
from planner.batching.scheduler import PRESETS, simulate
from planner.batching.pipeline import heuristic_results, solve_batching
from planner.batching.staggered import best_staggered, lazy_plan, single_prefill_batch_impossible
from planner.batching.validator import validate_schedule
from planner.solver import SolveStatus


def _random_problem(seed: int, n_max: int = 4, length: int = 4, tight: float = 0.6):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, n_max))
    I, O = rng.integers(1, length, n), rng.integers(1, length, n)
    U = I + O - 1
    return make_problem(I, O, M=int(max(U.max(), tight * U.sum())))


@pytest.mark.parametrize("seed", [21, 22, 23, 24, 25])
def test_paths_mip_equals_brute_force_and_replays(seed):
    p = _random_problem(seed)
    assert applicable(p)[0]
    best = brute_force_latency(p)  # allows chunked prefill and every eviction
    res = solve_batching(p, time_limit=30, formulation="paths", stop_at_bound=False)
    assert res.status == SolveStatus.OPTIMAL and res.stats["formulation"] == "paths"
    assert abs(res.objective - best) <= 1e-9 * max(1.0, best)
    assert res.validation.feasible
    assert abs(res.validation.objective - res.stats["mip_objective"]) <= 1e-9 * max(1.0, best)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_every_path_row_holds_at_every_normalised_preset(seed):
    """N(S) of every preset schedule is valid, no dearer than S, maps onto the path model with every row
    satisfied (incl. ``cut_prefill_batches`` when it is added), and the model prices it as the validator."""
    rng = np.random.default_rng(seed)
    I, O = rng.integers(1, 12, 5), rng.integers(1, 12, 5)
    p = make_problem(I, O, M=int(max((I + O - 1).max(), 0.5 * (I + O - 1).sum())))
    least = 2 if single_prefill_batch_impossible(p, 40) else 1
    fm = build_flow_model(p, 40, least_prefill_batches=least)
    for name in PRESETS:
        sched = simulate(p, name).schedule
        original = validate_schedule(p, sched)
        assert original.feasible, name
        norm = normalize_schedule(p, sched)
        assert norm is not None, name
        report = validate_schedule(p, norm)
        assert report.feasible and report.objective <= original.objective * (1 + 1e-12), name
        x = flow_warm_start(p, fm, norm)
        assert x is not None, name
        assert fm.model.max_violation(x) <= 1e-9, name
        assert abs(float(fm.model.cost @ x) / time_unit(p) - report.objective) <= 1e-9 * report.objective, name
        back = extract_flow_schedule(p, fm, x)
        assert abs(validate_schedule(p, back).objective - report.objective) <= 1e-12


def test_normalisation_merges_chunks():
    p = make_problem([6, 2], [2, 2], M=100, C=4096, P=4096)
    chunked = Schedule.from_batches([{0: 3, 1: 2}, {0: 3, 1: 1}, {0: 1}])
    assert validate_schedule(p, chunked).feasible
    norm = normalize_schedule(p, chunked)
    assert norm.batches() == [{1: 2}, {0: 6, 1: 1}, {0: 1}]
    assert validate_schedule(p, norm).objective < validate_schedule(p, chunked).objective


def test_lazy_staggered_schedule_is_valid_and_beats_presets_when_idling_pays():
    # B = 8, seed 0 of the scaling benchmark: every preset evicts; starting everyone together and letting
    # running requests idle reaches the combinatorial lower bound (so it is optimal).
    rng = np.random.default_rng(0)
    I, O = rng.integers(1, 65, 8), rng.integers(1, 65, 8)
    p = make_problem(I, O, M=int(0.6 * (I + O - 1).sum()))
    found = best_staggered(p)
    assert found is not None
    schedule, value = found
    report = validate_schedule(p, schedule)
    assert report.feasible and abs(report.objective - value) <= 1e-12
    assert value <= latency_lower_bound(p) * (1 + 1e-9)
    assert value < min(r.objective for r in heuristic_results(p).values())
    res = solve_batching(p, time_limit=30)
    assert res.status == SolveStatus.OPTIMAL and res.stats["proof"] == "combinatorial lower bound"
    assert abs(res.objective - value) <= 1e-12 and res.validation.feasible


def test_single_prefill_batch_cut_agrees_with_brute_force():
    # M = 7 fits both prompts (6) but not a finishing request (KV 5) beside the other's prompt (3): with a
    # single prefill batch both start together and one of them must finish first, so it is impossible
    p = make_problem([3, 3], [3, 3], M=7)
    assert lazy_plan(p, 10, together=True) is None
    assert single_prefill_batch_impossible(p, 10)
    res = solve_batching(p, time_limit=30, formulation="paths", stop_at_bound=False)
    assert res.stats["least_prefill_batches"] == 2
    assert abs(res.objective - brute_force_latency(p)) <= 1e-9 * res.objective
    roomy = make_problem([3, 3], [3, 3], M=8)
    assert not single_prefill_batch_impossible(roomy, 10)


def test_validator_rejects_token_free_batch():
    # a: I=1, O=2; b: I=1, O=2; M = 2.  Batch 2 only evicts b (no token).  The old validator charged
    # it nothing; the MIP (batch_nonempty) and the brute force have no such batch.
    p = make_problem([1, 1], [2, 2], M=2)
    sched = Schedule.from_batches([{0: 1, 1: 1}, {}, {0: 1}, {1: 2}], [[], [1], [], []])
    report = validate_schedule(p, sched)
    assert not report.feasible
    assert [v.constraint for v in report.violations] == ["token_free_batch"]
    # the same moves with the eviction carried by a batch that runs a token are valid
    ok = Schedule.from_batches([{0: 1, 1: 1}, {0: 1}, {1: 2}], [[], [1], []])
    assert validate_schedule(p, ok).feasible


def test_compress_schedule_never_moves_an_eviction_onto_a_running_request():
    # b is evicted in a token-free batch and refilled right after: the eviction goes back to batch 1's
    # successor only if b does not run there, else to the batch before, else it cannot be kept
    sched = Schedule.from_batches([{0: 1}, {}, {0: 1, 1: 2}], [[], [1], []])
    out = compress_schedule(sched)
    assert out.batches() == [{0: 1}, {0: 1, 1: 2}] and out.evictions() == [[1], []]
    both = Schedule.from_batches([{0: 1, 1: 1}, {}, {0: 1, 1: 2}], [[], [1], []])
    with pytest.raises(ValueError):
        compress_schedule(both)
    fine = Schedule.from_batches([{0: 1, 1: 1}, {}, {0: 1}], [[], [1], []])
    assert compress_schedule(fine).evictions() == [[], [1]]


@pytest.mark.parametrize("seed", range(6))
def test_simulator_never_emits_token_free_batches(seed):
    rng = np.random.default_rng(100 + seed)
    n = int(rng.integers(2, 7))
    I, O = rng.integers(1, 9, n), rng.integers(1, 9, n)
    p = make_problem(I, O, M=int((I + O - 1).max()))  # tightest M: evictions everywhere
    for name in PRESETS:
        sched = simulate(p, name).schedule
        assert all(sched.batches()), name
        assert validate_schedule(p, sched).feasible, name
