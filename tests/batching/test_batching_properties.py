"""Batching soundness on random tiny instances: MIP = exhaustive brute force = validator, bound ≤ optimum.

`INSTANCES` seeded instances (B = 2–3 requests, I, O ≤ 3, M anywhere from the largest request's final KV
to all of them, sometimes a small C = P or R_max, the published 7B and 70B cost sets).  Every instance is
solved for the mean TTFT by the big-M model (the TTFT prefix model; with the best preset's warm start on
even instances, without on odd ones), and for the latency by the path model where it applies (every
second instance, warm starts alternating) and by the big-M model on every 20th (its LP is weak, so its
solves take longest).  Each result must be ``optimal`` with the objective of `bruteforce.brute_force`,
the oracle that searches every schedule without a batch limit; the MIP's own objective must equal the
validator's replay, and the reported bound must not exceed the brute-force optimum.  Time limits are off
(``time_limit=None``): the outcome does not depend on the machine.
"""

from __future__ import annotations

import numpy as np
import pytest

from planner.batching.bruteforce import brute_force
from planner.batching.costmodel import PUBLISHED
from planner.batching.flow_formulation import applicable
from planner.batching.problem import BatchingProblem, make_problem
from planner.batching.pipeline import solve_batching
from planner.errors import PlannerError
from planner.solver import SolveStatus

INSTANCES = 200
REL = 1e-6


def tiny(k: int) -> BatchingProblem:
    rng = np.random.default_rng([22, k])
    n = int(rng.integers(2, 4))
    I, O = rng.integers(1, 4, n), rng.integers(1, 4, n)
    U = I + O - 1
    limits = {"M": int(rng.integers(U.max(), U.sum() + 1))}
    if rng.random() < 0.25:
        limits["C"] = int(rng.integers(1, int(I.max()) + 2))  # P = C: prompts may need chunks
    if rng.random() < 0.2:
        limits["R_max"] = int(rng.integers(1, n + 1))
    cost = PUBLISHED["70b" if k % 2 else "7b"]
    return make_problem(I, O, name=f"tiny{k}", cost=cost, **limits)


_OPTIMA: dict[tuple[int, str], float] = {}


def optimum(k: int, objective: str) -> float:
    if (k, objective) not in _OPTIMA:
        _OPTIMA[k, objective] = brute_force(tiny(k), objective)
    return _OPTIMA[k, objective]


def solve(k: int, objective: str, formulation: str, warm: bool, searched_heuristics: bool = False):
    """The MIP always runs (``stop_at_bound=False``); the searched heuristics (order search, lazy plans)
    only where asked, the rollouts never (8,000 rollouts per call would dominate the test's time)."""
    return solve_batching(tiny(k), objective=objective, formulation=formulation, warm_start=warm, time_limit=None,
                          stop_at_bound=False, rollout_search=False, order_search=searched_heuristics,
                          lazy_heuristic=searched_heuristics)


def check(result, best: float) -> None:
    assert result.status == SolveStatus.OPTIMAL, result.message
    assert result.validation.feasible, result.validation.summary()
    assert result.objective == pytest.approx(best, rel=REL), result.message
    assert result.validation.objective == pytest.approx(result.stats["mip_objective"], rel=REL)
    assert result.stats["mip_point_value"] == pytest.approx(result.stats["mip_objective"], rel=REL)
    assert result.bound <= best * (1 + 1e-9)


@pytest.mark.parametrize("k", range(INSTANCES))
def test_ttft_mip_equals_brute_force(k):
    check(solve(k, "ttft", "bigm", warm=k % 2 == 0), optimum(k, "ttft"))


@pytest.mark.parametrize("k", range(0, INSTANCES, 2))
def test_latency_paths_mip_equals_brute_force(k):
    if not applicable(tiny(k))[0]:
        with pytest.raises(PlannerError, match="paths formulation does not apply"):
            solve(k, "latency", "paths", warm=True)
        return
    check(solve(k, "latency", "paths", warm=k % 4 == 0), optimum(k, "latency"))


@pytest.mark.parametrize("k", range(0, INSTANCES, 20))
def test_latency_bigm_mip_equals_brute_force(k):
    # the searched heuristics give a smaller J (a better incumbent): the weak big-M model needs it
    check(solve(k, "latency", "bigm", warm=k % 40 == 0, searched_heuristics=True), optimum(k, "latency"))


def test_the_instances_cover_every_case():
    # the generator reaches the cases the properties are about: chunks forced by C, a running limit,
    # KV too small for every request at once, both cost sets, three requests, paths not applicable
    problems = [tiny(k) for k in range(INSTANCES)]
    assert sum(p.C < int(p.inputs.max()) for p in problems) >= 10
    assert sum(p.R_max is not None and p.R_max < p.n for p in problems) >= 10
    assert sum(p.M < int((p.inputs + p.outputs - 1).sum()) for p in problems) >= 100
    assert sum(p.n == 3 for p in problems) >= 60
    assert sum(not applicable(p)[0] for p in problems[::2]) >= 5
