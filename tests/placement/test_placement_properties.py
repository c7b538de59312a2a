"""Property tests on random tiny placement instances.

Brute force enumerates every placement (set partitions of the new requests, each block on an
ongoing worker or a fresh one) and keeps the feasible ones according to the *independent
validator* — it shares no code with the MIP.  Then: MIP optimum = brute force, and every
heuristic ≥ MIP ≥ lower bound, and the MIP's objective equals the validator's.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support import toy_cost, toy_problem
from planner.placement.bounds import lower_bound
from planner.placement.heuristics import HEURISTICS
from planner.placement.problem import OngoingState
from planner.placement.solution import PlacementSolution
from planner.core.contract import RunOptions
from planner.placement.pipeline import run_heuristic, solve_placement
from planner.placement.validator import validate_placement
from planner.solver import SolveStatus


def _set_partitions(items: list[int]):
    if not items:
        yield []
        return
    first, rest = items[0], items[1:]
    for part in _set_partitions(rest):
        for k in range(len(part)):
            yield part[:k] + [[first, *part[k]]] + part[k + 1 :]
        yield [[first], *part]


def brute_force_workers(problem) -> int | None:
    """Fewest workers of any placement the validator accepts (None if none is feasible)."""
    ids = [r.request_id for r in problem.requests]
    fixed = {k: problem.ongoing[rid].worker for k, rid in enumerate(ids) if rid in problem.ongoing}
    new = [k for k in range(len(ids)) if k not in fixed]
    labels = sorted(set(fixed.values()))
    fresh = (max(labels) + 1) if labels else 0
    best = None
    for partition in _set_partitions(new):
        # each block goes to one distinct existing worker or to its own fresh worker
        for targets in itertools.product([*labels, None], repeat=len(partition)):
            used = [t for t in targets if t is not None]
            if len(used) != len(set(used)):
                continue
            assignment = np.zeros(len(ids), dtype=np.int64)
            for k, w in fixed.items():
                assignment[k] = w
            next_label = fresh
            for block, t in zip(partition, targets):
                if t is None:
                    t, next_label = next_label, next_label + 1
                assignment[block] = t
            sol = PlacementSolution.from_array(tuple(ids), assignment, "brute")
            report = validate_placement(problem, sol)
            if report.feasible and (best is None or report.objective < best):
                best = int(report.objective)
    return best


request = st.tuples(st.integers(1, 500), st.integers(1, 300))


@st.composite
def tiny_problems(draw):
    n_new = draw(st.integers(1, 5))
    reqs = draw(st.lists(request, min_size=n_new, max_size=n_new))
    mode = draw(st.sampled_from(["decode_only", "colocated"]))
    strictness = draw(st.sampled_from([0.0, 0.5, 1.0]))
    memory = draw(st.sampled_from([1.6, 1.9, 2.5]))  # KV capacity 600, 900, 1500 tokens
    cost = toy_cost(
        decode_s_per_context_token=draw(st.sampled_from([0.0, 2e-5, 5e-5])),
        decode_s_per_request=draw(st.sampled_from([0.005, 0.02])),
    )
    atgt = draw(st.sampled_from([0.09, 0.12, 0.2]))
    ttft = draw(st.sampled_from([0.7, 1.0]))
    slos = None
    classes = None
    if draw(st.booleans()):  # two SLO classes: exercises the class-indicator rows of M2/M3
        from planner.core.types import SLOClass

        slos = {
            "tight": SLOClass(ttft_s=ttft * 0.8, atgt_s=draw(st.sampled_from([0.08, 0.1]))),
            "loose": SLOClass(ttft_s=ttft, atgt_s=atgt + 0.05),
        }
    ongoing = {}
    with_ongoing = draw(st.booleans()) and n_new <= 4
    if with_ongoing:
        # one ongoing request on worker 0, progress g and decode time τ with positive slack
        i, o = draw(request)
        o = max(o, 2)
        g = draw(st.integers(1, o - 1))
        tau = g * atgt * draw(st.sampled_from([0.3, 0.9]))
        reqs = [(i, o), *reqs]
        ongoing = {"r0": OngoingState(worker=0, generated_tokens=g, decode_s=tau)}
    if slos is not None:
        classes = draw(st.lists(st.sampled_from(["tight", "loose"]), min_size=len(reqs), max_size=len(reqs)))
    return toy_problem(
        reqs, ttft=ttft, atgt=atgt, mode=mode, strictness=strictness, gpu_memory_gb=memory, cost=cost, ongoing=ongoing,
        slos=slos, classes=classes,
    )


def _precheck_ok(problem) -> bool:
    from planner.placement.bounds import precheck

    return not precheck(problem.arrays)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tiny_problems())
def test_mip_equals_brute_force_and_sandwiches_heuristics(problem):
    brute = brute_force_workers(problem)
    mip = solve_placement(problem)
    if brute is None:
        assert mip.status == SolveStatus.INFEASIBLE
        return
    assert _precheck_ok(problem)
    assert mip.status == SolveStatus.OPTIMAL, mip.message
    assert mip.objective == brute
    assert mip.validation.feasible and mip.validation.objective == mip.objective
    lb = lower_bound(problem.arrays).value
    assert lb <= mip.objective
    for name in HEURISTICS:
        h = run_heuristic(problem, name)
        if h.solution is None:  # load balancers may find no SLO-feasible pool with ongoing workers
            assert h.status == SolveStatus.INFEASIBLE
            continue
        assert h.validation.feasible, (name, h.validation.summary())
        assert h.objective == h.validation.objective, name
        assert h.objective >= mip.objective, name


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(problem=tiny_problems())
def test_highs_and_gurobi_agree(problem, solvers):
    if "gurobi" not in solvers:
        pytest.skip("gurobi unavailable or not in --solvers")
    a = solve_placement(problem, RunOptions(solver="highs"))
    b = solve_placement(problem, RunOptions(solver="gurobi"))
    assert a.status == b.status
    assert a.objective == b.objective


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(0.01, 1.0), min_size=1, max_size=7))
def test_martello_toth_l2_is_a_valid_bin_packing_bound(sizes):
    from planner.placement.bounds import martello_toth_l2

    # exact optimum by brute force over set partitions
    best = len(sizes)
    for part in _set_partitions(list(range(len(sizes)))):
        if all(sum(sizes[i] for i in block) <= 1.0 + 1e-12 for block in part):
            best = min(best, len(part))
    lb = martello_toth_l2(np.array(sizes), 1.0)
    assert int(np.ceil(sum(sizes) - 1e-9)) <= lb <= best
