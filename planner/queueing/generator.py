"""Random queueing problems for tests and benchmarks (deterministic in the seed).

Groups mix three catalog models served with TP 4 on A100 and H100 instances (so every model fits
everywhere and heterogeneous instances get different Θ from the shipped Aladdin cost models) and
QLM's three SLO classes (interactive 20 s, batch-1 60 s, batch-2 1 h, §4.4) with a random part
of the slack already elapsed.
"""

from __future__ import annotations

import numpy as np

from planner.queueing.estimator import EstimatorSettings, group_tail_s, group_work_s, rates_for
from planner.queueing.problem import InstanceType, QueueingProblem, RequestGroup, VirtualQueue

MODELS = ("Llama-2-7B", "CodeLlama-34B", "Llama-2-70B")
SLO_CLASSES = {"interactive": 20.0, "batch-1": 60.0, "batch-2": 3600.0}
CLASS_MIX = (0.1, 0.2, 0.7)
GPU_TYPES = (("a100x4", "A100-80GB-SXM", 4, 12.0), ("h100x4", "H100-80GB-SXM", 4, 8.0))


def random_problem(num_groups: int, num_queues: int, *, seed: int = 0, objective: str = "penalty",
                   models: tuple[str, ...] = MODELS, settings: EstimatorSettings | None = None) -> QueueingProblem:
    rng = np.random.default_rng(seed)
    settings = settings or EstimatorSettings()
    classes = list(SLO_CLASSES)
    groups = []
    for i in range(num_groups):
        cls = classes[int(rng.choice(len(classes), p=CLASS_MIX))]
        n = int(rng.integers(2, 17))
        mean_out = float(rng.integers(100, 400))
        groups.append(RequestGroup(
            name=f"g{i:03d}", model=str(models[int(rng.integers(len(models)))]), slo_class=cls,
            slo_s=float(SLO_CLASSES[cls] * rng.uniform(0.5, 1.0)), num_requests=n,
            mean_input_tokens=float(rng.integers(100, 800)), mean_output_tokens=mean_out,
            std_output_tokens=mean_out / 3, max_output_tokens=2 * mean_out, arrival_s=float(i),
        ))
    types = tuple(InstanceType(name, gpu, tp, swap, 0, extra_available=2) for name, gpu, tp, swap in GPU_TYPES)
    work = np.full((len(types), num_groups), np.inf)
    tail = np.full((len(types), num_groups), np.inf)
    for t, typ in enumerate(types):
        for i, g in enumerate(groups):
            rates = rates_for(g.model, typ.gpu, typ.tensor_parallel, g.mean_input_tokens, g.mean_output_tokens, settings)
            if rates is None:
                continue
            work[t, i] = group_work_s(g.num_requests, g.mean_output_tokens, g.std_output_tokens, g.max_output_tokens,
                                      rates.throughput_tokens_per_s, settings)
            tail[t, i] = group_tail_s(rates, g.max_output_tokens, settings)
    queues = []
    for k in range(num_queues):
        t = k % len(types)
        queues.append(VirtualQueue(f"q{k}", t, models[k % len(models)]))
    counts = [sum(1 for q in queues if q.type_index == t) for t in range(len(types))]
    types = tuple(InstanceType(ty.name, ty.gpu, ty.tensor_parallel, ty.swap_time_s, c, ty.extra_available)
                  for ty, c in zip(types, counts))
    queues.sort(key=lambda q: (q.type_index, q.loaded_model or ""))
    return QueueingProblem(f"random-n{num_groups}-q{num_queues}-s{seed}", tuple(groups), types, tuple(queues),
                           work, tail, objective=objective)
