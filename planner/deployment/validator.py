"""Independent validators of the deployment family.

They share no code with the formulations (`cost_formulation`, `routing_formulation`) nor with the
problem's derived arrays: the cost validator recomputes $/h, GPUs per type, served capacity and a
machine packing from the raw option list; the routing validator recomputes every processing time
from the p1..p8 coefficients (Eq. 4 summed step by step, not the closed form) and Eq. 5's batch size.
The TP-enumeration validator re-derives Eq. 1–2 memory and the cluster tokens/s (both estimators:
Alg. 1 static batching and the continuous-batching estimate) from the problem data and the cost-model
coefficients, sharing no code with `memory`, `throughput` or `enumeration`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from planner.core.result import ValidationReport, Violation
from planner.core.types import GB
from planner.deployment.problem import ClusterProblem, CostPlanProblem, RoutingProblem
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
    sizes: list[dict[int, int]] = [{} for _ in problem.inventory]  # instances per TP degree, per GPU type
    served = [0.0] * len(problem.demands)
    for option, count in zip(problem.options, solution.counts):
        if count < 0:
            violations.append(Violation("integrality", "count", count, 0, "negative instance count"))
            continue
        inv = problem.inventory[option.gpu_index]
        cost += count * option.tensor_parallel * inv.price_per_gpu_hour
        gpus_used[option.gpu_index] += count * option.tensor_parallel
        per_degree = sizes[option.gpu_index]
        per_degree[option.tensor_parallel] = per_degree.get(option.tensor_parallel, 0) + count
        served[option.model_index] += count * option.capacity
    for g, inv in enumerate(problem.inventory):
        if gpus_used[g] > inv.gpus:
            violations.append(Violation("inventory", inv.gpu.name, gpus_used[g], inv.gpus,
                                        f"{gpus_used[g]} {inv.gpu.name} GPUs used, {inv.gpus} available"))
        # packed only within the inventory: at most as many instances as the type has GPUs
        elif not _pack(inv.gpus_per_machine, inv.machines, [t for t, n in sizes[g].items() for _ in range(n)]):
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
    k = np.arange(1, outputs + 1, dtype=float)  # every decode step, summed (vectorised: no Python loop per token)
    decode = float(np.sum(c.p5 * b * (inputs + k) + c.p6 * b + c.p7 * (inputs + k) + c.p8))
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


# ---- TP enumeration (best TP degree per machine group, cluster tokens/s) ---------------------------
#
# Re-derived from the problem data, the model/GPU specs and the cost-model coefficients alone: nothing
# from `memory`, `throughput` or `enumeration` is imported.  The rules (docs/formulations.md §5.2–5.3):
#
# * Eq. 1  KV(t) = t·(GPU bytes)·φ − δ_engine − (parameters · bytes per parameter); ≤ 0: weights do not fit.
# * Eq. 2  KV(t) ≥ kv_token·(I_max + O_max), kv_token = 2·layers·KV heads·head dim·bytes (GQA-correct;
#          the paper's 2·l·h·b ignores grouped-query attention).
# * static (Alg. 1): requests in sample order; a batch takes the next request while
#          kv_token·(Σ I + n·max O) ≤ KV(t), n ≤ max_batch, at least one request per batch; a batch of b
#          requests with longest input I and output O costs Eq. 3 + Eq. 4, Eq. 4 summed step by step here
#          (not the closed form); machine tokens/s = (u/t)·(Σ I + Σ O)/(Σ batch times).
# * continuous: mean Ī, Ō, mean context l̄ = Ī + Ō/2; b* = min(KV/(kv_token·l̄), (ATGT − c2)/(k2 + k3·l̄),
#          max_batch); a request occupies the instance for its prefill k1·Ī + c1 and Ō decode iterations,
#          each shared by b* requests: seconds per request = k1·Ī + c1 + Ō·(c2/b* + k2 + k3·l̄);
#          instance tokens/s = (Ī + Ō)/that; infeasible if b* < 1 or the prefill exceeds the TTFT.
# * cluster tokens/s = Σ_groups count · (u/t) · instance tokens/s.

_SECONDS = {"s": 1.0, "ms": 1e-3}


def _static_instance_tokens_per_s(cost, kv_bytes: float, kv_token: float, inputs: list[int], outputs: list[int],
                                  max_batch: int) -> tuple[float, int]:
    """Alg. 1 on one instance: (tokens/s, batches)."""
    p1, p2, p3, p4, p5, p6, p7, p8 = (cost.p1, cost.p2, cost.p3, cost.p4, cost.p5, cost.p6, cost.p7, cost.p8)
    unit = _SECONDS[cost.time_unit]
    seconds, batches, r, q = 0.0, 0, 0, len(inputs)
    while r < q:
        members = [r]
        total_in, longest_out = inputs[r], outputs[r]
        nxt = r + 1
        while nxt < q and len(members) < max_batch:
            cand_in, cand_out = total_in + inputs[nxt], max(longest_out, outputs[nxt])
            if kv_token * (cand_in + (len(members) + 1) * cand_out) > kv_bytes:
                break
            members.append(nxt)
            total_in, longest_out = cand_in, cand_out
            nxt += 1
        b = len(members)
        i_b = max(inputs[k] for k in members)
        o_b = max(outputs[k] for k in members)
        prefill = p1 * b * i_b + p2 * b + p3 * i_b + p4
        decode = 0.0
        for step in range(1, o_b + 1):
            decode += p5 * b * (i_b + step) + p6 * b + p7 * (i_b + step) + p8
        seconds += (prefill + decode) * unit
        batches += 1
        r = nxt
    return (sum(inputs) + sum(outputs)) / seconds, batches


def _continuous_instance_tokens_per_s(cost, kv_bytes: float, kv_token: float, mean_in: float, mean_out: float,
                                      ttft: float | None, atgt: float | None, max_batch: int) -> tuple[float, str]:
    """The continuous-batching estimate of one instance: (tokens/s, reason it is infeasible or "")."""
    context = mean_in + mean_out / 2.0
    prefill = cost.prefill_s_per_token * mean_in + cost.prefill_base_s
    if ttft is not None and prefill > ttft:
        return 0.0, f"prefill of a mean prompt takes {prefill:.4g} s > TTFT {ttft:g} s"
    per_request_step = cost.decode_s_per_request + cost.decode_s_per_context_token * context
    limits = [kv_bytes / (kv_token * context), float(max_batch)]
    if atgt is not None:
        limits.append((atgt - cost.decode_base_s) / per_request_step)
    batch = min(limits)
    if batch < 1.0:
        return 0.0, f"at most {batch:.3g} mean requests run at once (KV and ATGT limits): less than one"
    seconds_per_request = prefill + mean_out * (cost.decode_base_s / batch + per_request_step)
    return (mean_in + mean_out) / seconds_per_request, ""


def validate_tp_plan(problem: ClusterProblem, degrees: Sequence[int] | Mapping[str, int]) -> ValidationReport:
    """The TP-enumeration plan ``degrees`` (one per machine group, in `problem.machines` order, or a
    ``{group name: degree}`` mapping): divisibility, the fixed degree, Eq. 1–2 memory, an estimate for
    the problem's estimator, and the cluster tokens/s recomputed independently (module notes above)."""
    groups = problem.machines
    if isinstance(degrees, Mapping):
        names = [g.name for g in groups]
        if set(degrees) != set(names):
            return ValidationReport(False, math.nan, (Violation(
                "shape", "groups", len(degrees), len(names),
                f"plan names groups {sorted(map(str, degrees))}, the cluster has {names}"),), objective_name="tokens_per_s")
        chosen = [degrees[n] for n in names]
    else:
        chosen = list(degrees)
        if len(chosen) != len(groups):
            return ValidationReport(False, math.nan, (Violation(
                "shape", "groups", len(chosen), len(groups), "one TP degree per machine group expected"),),
                objective_name="tokens_per_s")
    model = problem.model
    kv_token = 2.0 * model.num_layers * model.num_kv_heads * model.head_dim * model.dtype_bytes
    weights = float(model.num_parameters) * model.dtype_bytes
    longest = kv_token * (problem.max_input + problem.max_output)
    phi, overhead = problem.memory.memory_utilization, problem.memory.engine_overhead_gb * GB
    max_batch = problem.memory.max_batch
    inputs, outputs = [int(i) for i in problem.sample_inputs], [int(o) for o in problem.sample_outputs]
    mean_in, mean_out = sum(inputs) / len(inputs), sum(outputs) / len(outputs)
    violations: list[Violation] = []
    per_group: dict[str, dict] = {}
    static_memo: dict[tuple[str, float], tuple[float, int]] = {}
    total, complete = 0.0, True
    for group, t in zip(groups, chosen):
        u = group.gpus_per_machine
        where = f"{group.name} ({group.gpu.name} x{u}) t={t}"
        if isinstance(t, bool) or not isinstance(t, (int, np.integer)) or t < 1:
            violations.append(Violation("degree", where, float("nan"), u, f"{group.name}: TP degree {t!r} is not a positive integer"))
            complete = False
            continue
        t = int(t)
        if u % t:
            violations.append(Violation("divisibility", where, t, u,
                                        f"{group.name}: TP {t} does not divide the machine's {u} GPUs"))
            complete = False
            continue
        if group.tensor_parallel is not None and t != group.tensor_parallel:
            violations.append(Violation("fixed_degree", where, t, group.tensor_parallel,
                                        f"{group.name}: TP is fixed to {group.tensor_parallel}, the plan uses {t}"))
        kv = t * group.gpu.memory_gb * GB * phi - overhead - weights
        row = {"tensor_parallel": t, "instances_per_machine": u // t, "kv_size_gb": kv / GB,
               "required_gb": longest / GB, "machines": group.count}
        per_group[group.name] = row
        if kv <= 0:
            violations.append(Violation("weights_memory", where, weights + overhead, t * group.gpu.memory_gb * GB * phi,
                                        f"{group.name}: weights {weights / GB:.2f} GB + engine {overhead / GB:g} GB "
                                        f"exceed {t} x {group.gpu.memory_gb:g} GB x {phi:g}"))
            complete = False
            continue
        if kv < longest:
            violations.append(Violation("kv_memory", where, kv, longest,
                                        f"{group.name}: KV {kv / GB:.2f} GB < {longest / GB:.2f} GB for the longest "
                                        f"request ({problem.max_input}+{problem.max_output} tokens)"))
        key = f"{group.gpu.name}@tp{t}"
        if problem.estimator == "static":
            cost = problem.hetero_models.get(key)
            if cost is None:
                violations.append(Violation("cost_model", where, 0, 1, f"{group.name}: no p1..p8 model for {key}"))
                complete = False
                continue
            if (key, kv) not in static_memo:  # machines split into many groups (independent_machines) repeat it
                static_memo[key, kv] = _static_instance_tokens_per_s(cost, kv, kv_token, inputs, outputs, max_batch)
            per_instance, row["batches"] = static_memo[key, kv]
        else:
            cost = problem.aladdin_models.get(key)
            if cost is None:
                violations.append(Violation("cost_model", where, 0, 1, f"{group.name}: no Aladdin cost model for {key}"))
                complete = False
                continue
            per_instance, why = _continuous_instance_tokens_per_s(cost, kv, kv_token, mean_in, mean_out,
                                                                  problem.ttft_s, problem.atgt_s, max_batch)
            if why:
                violations.append(Violation("slo", where, 0, 1, f"{group.name}: {why}"))
                complete = False
                continue
        machine = per_instance * (u // t)
        row.update(tokens_per_s_instance=per_instance, tokens_per_s_machine=machine,
                   tokens_per_s_group=machine * group.count)
        total += machine * group.count
    details = {"estimator": problem.estimator, "groups": per_group,
               "objective_recomputed": complete,
               "objective_note": (f"cluster tokens/s recomputed with an independent {problem.estimator} estimate"
                                  if complete else "not recomputed: some group has no throughput estimate")}
    return ValidationReport(not violations, total if complete else math.nan, tuple(violations), details,
                            objective_name="tokens_per_s")
