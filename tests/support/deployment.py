"""Tiny deployment problems shared by the deployment tests: routing batches and cost plans, with their
brute-force optima."""

from __future__ import annotations

import itertools
import math

import numpy as np

from planner.catalog import find_model
from planner.core.types import GPUSpec
from planner.costmodels.models import HeteroCostModel
from planner.deployment.problem import CostPlanProblem, GPUInventory, InstanceOption, ModelDemand, RoutingProblem, ServingInstance

def routing_problem(seed: int, n: int = 7) -> RoutingProblem:
    rng = np.random.default_rng(seed)
    inputs = tuple(int(x) for x in rng.integers(20, 500, n))
    outputs = tuple(int(x) for x in rng.integers(10, 350, n))
    instances = (serving_instance("fast", 4, 900, 4.0), serving_instance("slow-a", 1, 700, 1.0), serving_instance("slow-b", 1, 700, 1.0))
    return RoutingProblem(name="tiny", model=LLAMA3_8B, instances=instances, request_ids=tuple(f"r{k}" for k in range(n)),
                          inputs=inputs, predicted_outputs=outputs)


def routing_brute_force(problem: RoutingProblem) -> float:
    p, fits = problem.processing_times, problem.fits
    best = np.inf
    for combo in itertools.product(range(len(problem.instances)), repeat=len(problem.request_ids)):
        combo = np.array(combo)
        if not fits[np.arange(len(combo)), combo].all():
            continue
        loads = np.bincount(combo, weights=p[np.arange(len(combo)), combo], minlength=len(problem.instances))
        best = min(best, loads.max())
    return best


def cost_problem(rng: np.random.Generator) -> CostPlanProblem:
    inventory = (
        GPUInventory(gpu=GPUSpec(name="gA", memory_gb=80), machines=1, gpus_per_machine=4,
                     price_per_gpu_hour=float(rng.uniform(1, 3))),
        GPUInventory(gpu=GPUSpec(name="gB", memory_gb=40), machines=1, gpus_per_machine=2,
                     price_per_gpu_hour=float(rng.uniform(0.5, 2))),
    )
    demands = (ModelDemand(model="m1", rate=float(rng.uniform(0.5, 4))), ModelDemand(model="m2", rate=float(rng.uniform(0.5, 4))))
    options = []
    for g, inv in enumerate(inventory):
        for t in (1, 2, 4):
            if inv.gpus_per_machine % t:
                continue
            for m in range(2):
                if rng.random() < 0.6:
                    options.append(InstanceOption(gpu_index=g, tensor_parallel=t, model_index=m,
                                                  capacity=float(rng.uniform(0.3, 2.0) * t ** 0.8)))
    for m in range(2):  # every model has at least one option
        if not any(o.model_index == m for o in options):
            options.append(InstanceOption(gpu_index=0, tensor_parallel=1, model_index=m, capacity=1.0))
    return CostPlanProblem(name="tiny", inventory=inventory, demands=demands, options=tuple(options))


def cost_brute_force(problem: CostPlanProblem) -> tuple[float, float]:
    """(min cost serving the load or inf, max common load scale) over every count vector within inventory."""
    ranges = [range(problem.inventory[o.gpu_index].gpus // o.tensor_parallel + 1) for o in problem.options]
    best_cost, best_scale = math.inf, 0.0
    for counts in itertools.product(*ranges):
        used = [0] * len(problem.inventory)
        served = [0.0] * len(problem.demands)
        for o, c in zip(problem.options, counts):
            used[o.gpu_index] += c * o.tensor_parallel
            served[o.model_index] += c * o.capacity
        if any(u > inv.gpus for u, inv in zip(used, problem.inventory)):
            continue
        scale = min(s / d.rate for s, d in zip(served, problem.demands))
        best_scale = max(best_scale, scale)
        if scale >= 1 - 1e-9:
            best_cost = min(best_cost, float(np.dot(counts, problem.option_price)))
    return best_cost, best_scale


LLAMA3_8B = find_model("Llama-3-8B")  # 131,072 KV bytes per token


def serving_instance(name: str, t: int, kv_tokens: int, speed: float) -> ServingInstance:
    cost = HeteroCostModel(model="toy", gpu="g", tensor_parallel=t, time_unit="s",
                           p1=1e-6 / speed, p2=0.0, p3=1e-5 / speed, p4=0.01 / speed,
                           p5=1e-8 / speed, p6=1e-4 / speed, p7=0.0, p8=0.02 / speed)
    return ServingInstance(name=name, gpu="g", tensor_parallel=t, kv_size_bytes=kv_tokens * 131072.0, cost=cost)
