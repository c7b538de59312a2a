"""Order search over the presets (`planner.batching.orderings`) and its use as a warm start."""

from __future__ import annotations

import numpy as np
import pytest

from planner.batching.orderings import SEARCH_PRESETS, best_ordered_schedule, map_back, permuted
from planner.batching.problem import make_problem
from planner.batching.scheduler import simulate
from planner.batching.pipeline import run_scheduler, solve_batching
from planner.batching.validator import validate_schedule
from planner.solver import SolveStatus

# Σ I = 39 > M = 26: the prompts cannot all be held, so who goes first matters.  In index order vLLM
# admits r0 (14) and r1 (11) first and r3 (I = 5, O = 1) waits; the search finds an order whose
# schedule is strictly cheaper than every searched preset in index order.
CONTENDED = {"inputs": [14, 11, 9, 5], "outputs": [5, 1, 2, 1], "M": 26}


def _contended():
    return make_problem(CONTENDED["inputs"], CONTENDED["outputs"], M=CONTENDED["M"], name="contended")


def test_permuted_schedule_maps_back_with_the_same_cost():
    """A schedule of the permuted instance, renamed, is a valid schedule of the original with the same cost."""
    problem = _contended()
    order = np.array([3, 2, 1, 0])
    sim = simulate(permuted(problem, order), "vllm")
    back = map_back(sim.schedule, order, tuple(r.request_id for r in problem.requests))
    report = validate_schedule(problem, back)
    assert report.feasible, report.summary()
    assert report.objective == pytest.approx(float(sim.schedule.metrics["total_latency"]), rel=1e-12)
    # request r3 (I = 5, O = 1) is listed first, so it is in the first batch with its whole prompt
    assert back.batches()[0].get(3) == 5


def test_order_search_beats_the_index_order_and_validates():
    problem = _contended()
    found = best_ordered_schedule(problem)
    assert found is not None
    name, schedule, value = found
    report = validate_schedule(problem, schedule)
    assert report.feasible and report.objective == pytest.approx(value, rel=1e-12)
    index_order = min(run_scheduler(problem, preset).objective for preset in SEARCH_PRESETS)
    assert value < index_order * (1 - 1e-6), (name, value, index_order)
    assert "order" in name


def test_order_search_is_deterministic_and_offline_only():
    problem = _contended()
    first, second = best_ordered_schedule(problem), best_ordered_schedule(problem)
    assert first[0] == second[0] and first[2] == second[2]
    online = make_problem([4, 5], [2, 3], arrivals=[0.0, 0.01], M=20)
    assert best_ordered_schedule(online) is None


def test_solve_uses_the_ordered_schedule_and_keeps_the_optimum():
    """The MIP optimum is the same with or without the order search; its warm start is never worse."""
    problem = _contended()
    with_search = solve_batching(problem, time_limit=30, threads=1, stop_at_bound=False)
    without = solve_batching(problem, time_limit=30, threads=1, stop_at_bound=False, order_search=False)
    assert with_search.status == without.status == SolveStatus.OPTIMAL
    assert with_search.objective == pytest.approx(without.objective, rel=1e-9)
    assert with_search.validation.objective == pytest.approx(with_search.objective, rel=1e-12)
    ordered = best_ordered_schedule(problem)[2]
    assert with_search.objective <= ordered * (1 + 1e-9)


def test_mip_too_large_returns_the_best_of_all_candidates():
    """Above ``max_cells`` the returned schedule is the cheapest heuristic, the ordered one included."""
    problem = _contended()
    result = solve_batching(problem, max_cells=1, stop_at_bound=False)
    assert "MIP not built" in result.message
    ordered = best_ordered_schedule(problem)
    presets = min(run_scheduler(problem, name).objective for name in ("vllm", "vllm-hy", "sarathi", "vllm-ef"))
    assert result.objective <= min(ordered[2], presets) * (1 + 1e-12)
    assert result.validation.feasible and result.validation.objective == result.objective
    assert result.bound <= result.objective + 1e-12
    assert result.solution.metrics["total_latency"] == pytest.approx(result.objective, rel=1e-12)


def test_lazy_search_respects_the_batch_cap():
    """`best_staggered(max_batches=…)` never returns a schedule with more batches than the cap, and a cap
    below the longest request (4 tokens need 4 batches) leaves nothing."""
    from planner.batching.staggered import best_staggered

    problem = make_problem([3, 5, 2], [2, 3, 4], M=100)
    free = best_staggered(problem, threads=1)
    assert free is not None and free[0].num_batches == 4
    assert best_staggered(problem, threads=1, max_batches=3) is None
    capped = best_staggered(problem, threads=1, max_batches=4)
    assert capped is not None and capped[0].num_batches <= 4
    assert validate_schedule(problem, capped[0]).objective == pytest.approx(capped[1], rel=1e-12)


def test_a_passed_deadline_keeps_the_best_start_order_and_simulates_no_swap():
    """``deadline`` in the past: every preset still simulates its distinct start orders (index, by input and by
    output length, each way), no swap; the result is the cheapest of those, validated, and ``wall_cut`` says
    the search was cut."""
    import time

    problem = _contended()
    I, O = np.array(CONTENDED["inputs"]), np.array(CONTENDED["outputs"])
    starts = {tuple(int(i) for i in order) for order in (
        np.arange(4), np.argsort(I, kind="stable"), np.argsort(-I, kind="stable"),
        np.argsort(O, kind="stable"), np.argsort(-O, kind="stable"))}
    ids = tuple(r.request_id for r in problem.requests)
    cheapest = np.inf
    for preset in SEARCH_PRESETS:
        for order in starts:
            sim = simulate(permuted(problem, np.array(order)), preset)
            report = validate_schedule(problem, map_back(sim.schedule, np.array(order), ids))
            if report.feasible:
                cheapest = min(cheapest, report.objective)
    info: dict = {}
    name, schedule, value = best_ordered_schedule(problem, info=info, deadline=time.perf_counter() - 1.0)
    assert info["wall_cut"] is True
    assert info["evaluations"] == len(starts) * len(SEARCH_PRESETS)
    assert value == pytest.approx(cheapest, rel=1e-12)
    assert validate_schedule(problem, schedule).objective == pytest.approx(value, rel=1e-12)
    uncut: dict = {}
    assert best_ordered_schedule(problem, info=uncut)[2] <= value * (1 + 1e-12)
    assert not uncut.get("wall_cut") and uncut["evaluations"] > info["evaluations"]
