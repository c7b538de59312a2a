"""Independent validators of the deployment family.

They share no code with the formulations (`cost_formulation`, `routing_formulation`) nor with the
problem's derived arrays: the cost validator recomputes $/h, GPUs per type, served capacity and a
machine packing from the raw option list; the routing validator recomputes every processing time
from the p1..p8 coefficients (Eq. 4 summed step by step, not the closed form) and Eq. 5's batch size.
"""

from __future__ import annotations

import math

from planner.core.result import ValidationReport, Violation
from planner.deployment.problem import CostPlanProblem, RoutingProblem
from planner.deployment.solution import CostPlanSolution, RoutingSolution

TOLERANCE = 1e-6


def _pack(machine_size: int, machines: int, sizes: list[int]) -> bool:
    """First-fit decreasing of instance sizes onto machines (an instance never spans two machines)."""
    free = [machine_size] * machines
    for size in sorted(sizes, reverse=True):
        for m, room in enumerate(free):
            if room >= size:
                free[m] -= size
                break
        else:
            return False
    return True


def validate_cost_plan(problem: CostPlanProblem, solution: CostPlanSolution) -> ValidationReport:
    """Feasibility (inventory, packing, demand × load scale) and the recomputed $/h."""
    violations: list[Violation] = []
    if len(solution.counts) != len(problem.options):
        return ValidationReport(False, math.nan, (Violation("shape", "counts", len(solution.counts),
                                                            len(problem.options), "one count per option expected"),))
    cost = 0.0
    gpus_used = [0] * len(problem.inventory)
    sizes: list[list[int]] = [[] for _ in problem.inventory]
    served = [0.0] * len(problem.demands)
    for option, count in zip(problem.options, solution.counts):
        if count < 0:
            violations.append(Violation("integrality", "count", count, 0, "negative instance count"))
            continue
        inv = problem.inventory[option.gpu_index]
        cost += count * option.tensor_parallel * inv.price_per_gpu_hour
        gpus_used[option.gpu_index] += count * option.tensor_parallel
        sizes[option.gpu_index] += [option.tensor_parallel] * count
        served[option.model_index] += count * option.capacity
    for g, inv in enumerate(problem.inventory):
        if gpus_used[g] > inv.gpus:
            violations.append(Violation("inventory", inv.gpu.name, gpus_used[g], inv.gpus,
                                        f"{gpus_used[g]} {inv.gpu.name} GPUs used, {inv.gpus} available"))
        elif not _pack(inv.gpus_per_machine, inv.machines, sizes[g]):
            violations.append(Violation("packing", inv.gpu.name, gpus_used[g], inv.gpus,
                                        f"instances do not pack onto {inv.machines} machines of {inv.gpus_per_machine}"))
    for m, demand in enumerate(problem.demands):
        need = demand.rate * solution.load_scale
        if served[m] < need * (1 - TOLERANCE) - TOLERANCE:
            violations.append(Violation("demand", demand.model, served[m], need,
                                        f"{demand.model}: {served[m]:.4g} req/s served < {need:.4g} needed"))
    details = {"gpus_used": {inv.gpu.name: gpus_used[g] for g, inv in enumerate(problem.inventory)},
               "served_rps": {d.model: served[m] for m, d in enumerate(problem.demands)}}
    name = "usd_per_hour" if solution.load_scale == 1.0 else f"usd_per_hour at {solution.load_scale:g}x the requested rates"
    return ValidationReport(not violations, cost, tuple(violations), details, objective_name=name)


def _request_time(inst, inputs: int, outputs: int, kv_per_token: float, max_batch: int) -> float:
    b = max(1, min(max_batch, math.floor(inst.kv_size_bytes / (kv_per_token * (inputs + outputs)))))
    c = inst.cost
    prefill = c.p1 * b * inputs + c.p2 * b + c.p3 * inputs + c.p4
    decode = sum(c.p5 * b * (inputs + k) + c.p6 * b + c.p7 * (inputs + k) + c.p8 for k in range(1, outputs + 1))
    return (prefill + decode) * c.seconds_per_unit / b


def validate_routing(problem: RoutingProblem, solution: RoutingSolution) -> ValidationReport:
    """Every request assigned once to an instance whose KV cache holds it; makespan recomputed."""
    violations: list[Violation] = []
    if tuple(solution.request_ids) != tuple(problem.request_ids):
        return ValidationReport(False, math.nan, (Violation("coverage", "requests", len(solution.request_ids),
                                                            len(problem.request_ids), "request ids differ from the problem"),))
    loads = [0.0] * len(problem.instances)
    kv_token = problem.model.kv_bytes_per_token
    for rid, s, i, o in zip(problem.request_ids, solution.assignment, problem.inputs, problem.predicted_outputs):
        if not 0 <= s < len(problem.instances):
            violations.append(Violation("assignment", rid, s, len(problem.instances), f"{rid}: no instance {s}"))
            continue
        inst = problem.instances[s]
        if kv_token * (i + o) > inst.kv_size_bytes:
            violations.append(Violation("kv_limit", f"{rid} on {inst.name}", kv_token * (i + o), inst.kv_size_bytes,
                                        f"{rid} ({i}+{o} tokens) does not fit the KV cache of {inst.name}"))
        loads[s] += _request_time(inst, i, o, kv_token, problem.max_batch)
    details = {"loads_s": {inst.name: loads[s] for s, inst in enumerate(problem.instances)}}
    return ValidationReport(not violations, max(loads), tuple(violations), details)
