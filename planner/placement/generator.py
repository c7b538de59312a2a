"""Generate placement instances from the length distributions of real traces.

A generated heartbeat has ``new_requests`` requests to place and, optionally,
``ongoing_requests`` requests already decoding.  Ongoing requests are sampled
from the same distribution and given a progress ``g`` uniform in
[1, real output − 1] (they are still running) and a decode time so far of
``g × t_atgt × f`` with f uniform in [0.6, 0.95] (they have been meeting their
SLO).  Their workers come from best-fit on an earlier virtual heartbeat in
which each ongoing request is placed with its *current* context I + g and
remaining prediction ô − g, so every ongoing worker is feasible.
"""

from __future__ import annotations

import numpy as np

from planner.core.types import LLMSpec, PlannedRequest, SLOSet, WorkerConfig
from planner.costmodels.models import AladdinCostModel
from planner.placement.heuristics import best_fit
from planner.placement.problem import OngoingState, PlacementOptions, PlacementProblem
from planner.workloads.lengths import LengthDistribution
from planner.workloads.streams import poisson_workload


def generate_placement_problem(
    *,
    name: str,
    dist: LengthDistribution,
    model: LLMSpec,
    worker: WorkerConfig,
    cost: AladdinCostModel,
    slos: SLOSet,
    options: PlacementOptions,
    new_requests: int,
    ongoing_requests: int = 0,
    heartbeat_s: float = 1.0,
    seed: int = 0,
    slo_class: str = "default",
) -> PlacementProblem:
    rng = np.random.default_rng(seed)
    cap = model.max_context_tokens
    # Timeline: ongoing requests arrived at 0; new requests arrive during the heartbeat after it.
    fresh = poisson_workload(
        dist, rate=max(new_requests, 1) / heartbeat_s, count=new_requests, seed=seed,
        max_total_tokens=cap, slo_class=slo_class, prefix="n", start_s=heartbeat_s if ongoing_requests else 0.0,
    )
    requests: list[PlannedRequest] = list(fresh.requests)
    ongoing: dict[str, OngoingState] = {}
    if ongoing_requests:
        old = poisson_workload(
            dist, rate=1.0, count=ongoing_requests, seed=seed + 7919, max_total_tokens=cap, slo_class=slo_class, prefix="o",
        )
        # keep requests with at least 2 output tokens so that 1 ≤ g < real output
        running = [r for r in old.requests if r.output_tokens >= 2]
        gen = np.array([int(rng.integers(1, r.output_tokens)) for r in running])
        atgt = slos[slo_class].atgt_s
        decode = gen * atgt * rng.uniform(0.6, 0.95, size=len(running))
        shifted = tuple(
            r.model_copy(
                update={
                    "arrival_s": 0.0,
                    "input_tokens": r.input_tokens + int(g),
                    "predicted_output_tokens": max(r.predicted_output_tokens - int(g), 1),
                }
            )
            for r, g in zip(running, gen)
        )
        earlier = PlacementProblem(
            name=f"{name}:earlier", model=model, worker=worker, cost=cost, slos=slos, requests=shifted,
            options=options.model_copy(update={"mode": "decode_only", "max_workers": None}),
        )
        placed = best_fit(earlier).as_array()
        for r, g, d, w in zip(running, gen, decode, placed):
            requests.append(r.model_copy(update={"arrival_s": 0.0}))
            ongoing[r.request_id] = OngoingState(worker=int(w), generated_tokens=int(g), decode_s=float(d))
    return PlacementProblem(
        name=name, model=model, worker=worker, cost=cost, slos=slos,
        requests=tuple(requests), ongoing=ongoing, options=options,
    )
