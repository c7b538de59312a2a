"""Scaling of the deployment family: TP enumeration, cost MILP, routing MILP.

* enumeration: clusters of 10, 100, 1,000 machines spread over 6 GPU types (machines of one type share
  a TP choice), Alg. 1 on 200 ShareGPT samples; target 1,000 machines ≤ 1 s.  The 6 types use
  SYNTHETIC p1..p8 models (seeded) - the timing does not depend on their values.
* cost MILP: 6 GPU types × 4 TP degrees × 10 models (240 integer variables), synthetic capacities;
  target ≤ 10 s.
* routing MILP: 100, 500, 2,000 ShareGPT requests × 8 instances of Llama-3-8B (2× V100 t2, 4× V100 t1,
  2× A100 t1; V100 models DERIVED, see models/hetero/derive_v100.py); status and gap at the time limit.

Usage:  python benchmarks/deployment_scaling.py [--quick] [--out FILE | --update-results]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from machine_info import machine_line  # noqa: E402
from results_paths import add_output_options, output_path  # noqa: E402
from planner.catalog import find_gpu, find_model  # noqa: E402
from planner.costmodels.models import HeteroCostModel  # noqa: E402
from planner.deployment.cost_solve import solve_cost_plan  # noqa: E402
from planner.deployment.enumeration import enumerate_cluster  # noqa: E402
from planner.deployment.memory import kv_size_bytes  # noqa: E402
from planner.deployment.problem import (  # noqa: E402
    ClusterProblem, CostPlanProblem, GPUInventory, InstanceOption, MachineGroup, ModelDemand, RoutingProblem,
    ServingInstance, model_key,
)
from planner.deployment.routing import ROUTERS  # noqa: E402
from planner.deployment.routing_solve import solve_routing  # noqa: E402
from planner.deployment.throughput import find_hetero_model  # noqa: E402
from planner.workloads.streams import find_distribution  # noqa: E402

TYPES = ["V100-32GB-SXM2", "A100-80GB-SXM", "H100-80GB-SXM", "A800-80GB-PCIe", "L40S-48GB", "A40-48GB"]



def bench_enumeration(sizes: list[int]) -> list[str]:
    model = find_model("Llama-3-8B")
    rng = np.random.default_rng(0)
    inputs, outputs = find_distribution("sharegpt").sample(200, np.random.default_rng(0), max_total_tokens=8192)
    models = {}
    for g in TYPES:
        speed = rng.uniform(0.5, 3.0)
        for t in (1, 2, 4, 8):
            models[model_key(g, t)] = HeteroCostModel(
                model="Llama-3-8B", gpu=g, tensor_parallel=t, time_unit="ms",
                p1=0.07 / speed / t ** 0.9, p2=0.0, p3=0.002, p4=3.6 + t, p5=8e-5 / speed / t ** 0.8,
                p6=0.07 / speed / t ** 0.8, p7=1e-5, p8=11.8 / speed / t ** 0.7 + 0.5 * t)
    rows = ["| machines | groups | combinations | seconds | best degrees |", "|---:|---:|---:|---:|---|"]
    for n in sizes:
        counts = np.full(len(TYPES), n // len(TYPES))
        counts[: n % len(TYPES)] += 1
        machines = tuple(MachineGroup(name=g, gpu=find_gpu(g), gpus_per_machine=8, count=int(c))
                         for g, c in zip(TYPES, counts) if c)
        problem = ClusterProblem(name=f"bench{n}", model=model, machines=machines, sample_inputs=tuple(map(int, inputs)),
                                 sample_outputs=tuple(map(int, outputs)), max_input=4096, max_output=4096,
                                 hetero_models=models)
        start = time.perf_counter()
        sol, _ = enumerate_cluster(problem)
        seconds = time.perf_counter() - start
        rows.append(f"| {n} | {len(machines)} | {sol.combinations} | {seconds:.3f} | {sol.best[0]} |")
    return rows


def bench_cost(time_limit: float) -> list[str]:
    rng = np.random.default_rng(1)
    inventory = tuple(GPUInventory(gpu=find_gpu(g), machines=int(rng.integers(2, 12)), gpus_per_machine=8,
                                   price_per_gpu_hour=float(rng.uniform(0.6, 4.0))) for g in TYPES)
    demands = tuple(ModelDemand(model=f"model{m}", rate=float(rng.uniform(1, 15))) for m in range(10))
    options = tuple(InstanceOption(gpu_index=g, tensor_parallel=t, model_index=m,
                                   capacity=float(rng.uniform(0.2, 1.5) * t ** rng.uniform(0.6, 1.1)))
                    for g in range(6) for t in (1, 2, 4, 8) for m in range(10))
    problem = CostPlanProblem(name="bench", inventory=inventory, demands=demands, options=options)
    rows = ["| types × TP × models | integer vars | status | $/h | bound | gap | seconds |", "|---|---:|---|---:|---:|---:|---:|"]
    start = time.perf_counter()
    r = solve_cost_plan(problem, time_limit=time_limit)
    seconds = time.perf_counter() - start
    gap = "-" if r.gap is None else f"{100 * r.gap:.3f}%"
    rows.append(f"| 6 × 4 × 10 | {r.stats['integer_variables']} | {r.status.value} | {r.objective or float('nan'):.2f} | "
                f"{r.bound or float('nan'):.2f} | {gap} | {seconds:.3f} |")
    return rows


def routing_problem(n: int) -> RoutingProblem:
    model = find_model("Llama-3-8B")
    specs = [("V100-32GB-SXM2", 2, 2), ("V100-32GB-SXM2", 1, 4), ("A100-80GB-SXM", 1, 2)]
    instances = []
    for gpu, t, count in specs:
        cost = find_hetero_model("Llama-3-8B", gpu, t, REPO / "models")
        kv = kv_size_bytes(model, find_gpu(gpu), t)
        instances += [ServingInstance(name=f"{gpu}-t{t}#{k}", gpu=gpu, tensor_parallel=t, kv_size_bytes=kv, cost=cost)
                      for k in range(count)]
    rng = np.random.default_rng(n)
    inputs, outputs = find_distribution("sharegpt").sample(n, rng, max_total_tokens=8192)
    predicted = np.clip(np.rint(rng.normal(outputs.mean(), outputs.std(), n)), 1, 8192 - inputs).astype(int)
    return RoutingProblem(name=f"r{n}", model=model, instances=tuple(instances), request_ids=tuple(f"r{k}" for k in range(n)),
                          inputs=tuple(map(int, inputs)), predicted_outputs=tuple(map(int, predicted)))


def bench_routing(sizes: list[int], time_limit: float) -> list[str]:
    rows = ["| requests × instances | binaries | status | makespan (s) | bound (s) | gap | mapper gap to bound | RR gap to bound | seconds |",
            "|---|---:|---|---:|---:|---:|---:|---:|---:|"]
    for n in sizes:
        problem = routing_problem(n)
        mapper = ROUTERS["mapper"](problem)
        rr = ROUTERS["rr"](problem)
        start = time.perf_counter()
        r = solve_routing(problem, time_limit=time_limit)
        seconds = time.perf_counter() - start

        def span(sol):
            a = sol.as_array()
            return np.bincount(a, weights=problem.processing_times[np.arange(n), a], minlength=len(problem.instances)).max()
        gap = "-" if r.gap is None else f"{100 * r.gap:.3f}%"
        mg = "-" if r.bound is None else f"{100 * (span(mapper) - r.bound) / span(mapper):.2f}%"
        rg = "-" if r.bound is None else f"{100 * (span(rr) - r.bound) / span(rr):.2f}%"
        rows.append(f"| {n} × 8 | {r.stats['integer_variables']} | {r.status.value} | {r.objective:.3f} | {r.bound:.3f} | "
                    f"{gap} | {mg} | {rg} | {seconds:.1f} |")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="reduced run (< 2 minutes)")
    add_output_options(parser, "deployment_scaling")
    args = parser.parse_args()
    args.out = output_path(parser, args, "deployment_scaling")
    route_sizes = [100, 500] if args.quick else [100, 500, 2000]
    route_limit = 20.0 if args.quick else 120.0
    parts = [f"# Deployment family scaling{' (quick)' if args.quick else ''}", "", machine_line(), "",
             "## TP enumeration (6 GPU types, machines of 8 GPUs; Alg. 1 on 200 samples; target 1,000 machines ≤ 1 s)", "",
             *bench_enumeration([10, 100, 1000]), "",
             "## Cost MILP (HiGHS; synthetic capacities; target ≤ 10 s)", "", *bench_cost(60.0), "",
             f"## Routing makespan MILP (HiGHS, relative gap 1e-4, time limit {route_limit:g} s, warm start mapper + local search)", "",
             *bench_routing(route_sizes, route_limit), ""]
    text = "\n".join(parts)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
