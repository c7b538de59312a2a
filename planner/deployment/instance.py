"""Instance files of the deployment and routing families (YAML; one-line errors naming file and field).

Three kinds, told apart by their keys (see instances/deployment/README.md):

* TP enumeration (``family: deployment-tp``): ``model``, ``machines``, ``workload``/``samples``.
* cost plan (``family: deployment``): ``inventory``, ``demands`` (+ optional ``capacities``).
* routing batch (``family: routing``): ``model``, ``instances``, ``requests``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from planner.catalog import find_gpu, find_model, gpu_names, model_names
from planner.core.io import read_csv_table, read_yaml_mapping, resolve_relative, validate_model
from planner.core.types import GPUSpec, LLMSpec
from planner.deployment.memory import check_degrees, divisors, kv_size_bytes
from planner.deployment.problem import (
    ClusterProblem, CostPlanProblem, GPUInventory, InstanceOption, MachineGroup, MemoryOptions, ModelDemand,
    RoutingProblem, ServingInstance, model_key,
)
from planner.deployment.throughput import continuous_capacity, find_aladdin_model, find_hetero_model
from planner.errors import InputError, PlannerError
from planner.workloads.streams import find_distribution

CLUSTER_FAMILIES = ("deployment-tp",)


def _model(path: Path, field: str, name: Any) -> LLMSpec:
    spec = find_model(str(name)) if name else None
    if spec is None:
        raise InputError(path, field, f"unknown model {name!r} (catalog: {', '.join(model_names())})")
    return spec


def _gpu(path: Path, field: str, name: Any) -> GPUSpec:
    spec = find_gpu(str(name)) if name else None
    if spec is None:
        raise InputError(path, field, f"unknown GPU type {name!r} (catalog: {', '.join(gpu_names())})")
    return spec


def _list(path: Path, data: dict, key: str) -> list[dict]:
    items = data.get(key)
    if not isinstance(items, list) or not items or not all(isinstance(x, dict) for x in items):
        raise InputError(path, key, "required: a non-empty list of mappings")
    return items


def _positive_int(path: Path, field: str, value: Any, *, allow_zero: bool = False) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < (0 if allow_zero else 1):
        raise InputError(path, field, f"must be a {'non-negative' if allow_zero else 'positive'} integer, got {value!r}")
    return value


def _models_dir(path: Path, data: dict) -> Path | None:
    return resolve_relative(path, data["models_dir"]) if data.get("models_dir") else None


def _memory(path: Path, data: dict) -> MemoryOptions:
    keys = ("memory_utilization", "engine_overhead_gb", "max_batch")
    return validate_model(MemoryOptions, {k: data[k] for k in keys if k in data}, path)


def _samples(path: Path, data: dict, model: LLMSpec) -> tuple[np.ndarray, np.ndarray]:
    """(inputs, outputs) from ``samples_csv`` (input_tokens, output_tokens) or a workload distribution."""
    if data.get("samples_csv"):
        csv = resolve_relative(path, data["samples_csv"])
        table = read_csv_table(csv, {"input_tokens": int, "output_tokens": int})
        return table["input_tokens"].to_numpy(), table["output_tokens"].to_numpy()
    count = _positive_int(path, "samples", data.get("samples", 200))
    seed = data.get("seed", 0)
    try:
        dist = find_distribution(str(data.get("workload", "sharegpt")))
    except PlannerError as exc:
        raise InputError(path, "workload", str(exc)) from None
    return dist.sample(count, np.random.default_rng(seed), max_total_tokens=model.max_context_tokens)


def _max_lengths(path: Path, data: dict, model: LLMSpec) -> tuple[int, int]:
    """Eq. 2's I_max, O_max: given, else [R] split the model context (only the sum matters)."""
    total = model.max_context_tokens
    max_in = _positive_int(path, "max_input", data.get("max_input", total // 2))
    max_out = _positive_int(path, "max_output", data.get("max_output", total - total // 2))
    return max_in, max_out


def load_cluster_problem(path: Path, data: dict) -> ClusterProblem:
    model = _model(path, "model", data.get("model"))
    groups = []
    for k, item in enumerate(_list(path, data, "machines")):
        field = f"machines[{k}]"
        gpus = item.get("gpus")
        if gpus == 0:
            raise InputError(path, f"{field}.gpus", "a machine with 0 GPUs cannot run an instance")
        gpus = _positive_int(path, f"{field}.gpus", gpus)
        count = _positive_int(path, f"{field}.count", item.get("count", 1))
        tp = item.get("tensor_parallel")
        if tp is not None:
            tp = _positive_int(path, f"{field}.tensor_parallel", tp)
            if gpus % tp:
                raise InputError(path, f"{field}.tensor_parallel",
                                 f"TP degree {tp} does not divide the machine's {gpus} GPUs (choose from {divisors(gpus)})")
        gpu = _gpu(path, f"{field}.gpu", item.get("gpu"))
        name = str(item.get("name", f"group{k}"))
        if data.get("independent_machines", False):  # asked otherwise: every machine picks its own degree
            groups += [MachineGroup(name=f"{name}#{c}", gpu=gpu, gpus_per_machine=gpus, count=1, tensor_parallel=tp)
                       for c in range(count)]
        else:  # machines of one type share a choice (the paper's setting)
            groups.append(MachineGroup(name=name, gpu=gpu, gpus_per_machine=gpus, count=count, tensor_parallel=tp))
    inputs, outputs = _samples(path, data, model)
    max_in, max_out = _max_lengths(path, data, model)
    estimator = data.get("estimator", "static")
    if estimator not in ("static", "continuous"):
        raise InputError(path, "estimator", f"must be static or continuous, got {estimator!r}")
    slo = data.get("slo") or {}
    models_dir = _models_dir(path, data)
    hetero, aladdin = {}, {}
    for g in groups:
        for t in ([g.tensor_parallel] if g.tensor_parallel else divisors(g.gpus_per_machine)):
            key = model_key(g.gpu.name, t)
            found_h = find_hetero_model(model.name, g.gpu.name, t, models_dir)
            if found_h is not None:
                hetero[key] = found_h
            found_a = find_aladdin_model(model.name, g.gpu.name, t, models_dir)
            if found_a is not None:
                aladdin[key] = found_a
    payload = dict(name=str(data.get("name", path.stem)), model=model, machines=tuple(groups),
                   sample_inputs=tuple(int(i) for i in inputs), sample_outputs=tuple(int(o) for o in outputs),
                   max_input=max_in, max_output=max_out, memory=_memory(path, data), estimator=estimator,
                   ttft_s=slo.get("ttft_s"), atgt_s=slo.get("atgt_s"), hetero_models=hetero, aladdin_models=aladdin)
    return validate_model(ClusterProblem, payload, path)


def _demand(path: Path, k: int, item: dict) -> tuple[ModelDemand, str | None]:
    field = f"demands[{k}]"
    payload = {key: item[key] for key in ("model", "rate", "mean_input", "mean_output", "ttft_s", "atgt_s") if key in item}
    if "workload" in item and ("mean_input" not in item or "mean_output" not in item):
        try:
            dist = find_distribution(str(item["workload"]))
        except PlannerError as exc:
            raise InputError(path, f"{field}.workload", str(exc)) from None
        payload.setdefault("mean_input", dist.mean_input)
        payload.setdefault("mean_output", dist.mean_output)
    return validate_model(ModelDemand, payload, path, field), item.get("workload")


def load_cost_plan(path: Path, data: dict) -> CostPlanProblem:
    inventory = []
    for k, item in enumerate(_list(path, data, "inventory")):
        field = f"inventory[{k}]"
        if item.get("gpus_per_machine") == 0:
            raise InputError(path, f"{field}.gpus_per_machine", "a machine with 0 GPUs cannot run an instance")
        if item.get("price_per_gpu_hour") is None:
            raise InputError(path, f"{field}.price_per_gpu_hour",
                             "required for a cost plan: the $ price of one GPU-hour of this type")
        gpu = _gpu(path, f"{field}.gpu", item.get("gpu"))
        inventory.append(validate_model(GPUInventory, {**{key: item[key] for key in
                                        ("machines", "gpus_per_machine", "price_per_gpu_hour") if key in item}, "gpu": gpu},
                                        path, field))
    demands = [_demand(path, k, item)[0] for k, item in enumerate(_list(path, data, "demands"))]
    degrees = data.get("degrees")
    options, skipped = [], []
    if data.get("capacities"):
        gpu_index = {inv.gpu.name: g for g, inv in enumerate(inventory)}
        model_index = {d.model: m for m, d in enumerate(demands)}
        for k, item in enumerate(_list(path, data, "capacities")):
            field = f"capacities[{k}]"
            gname = (find_gpu(str(item.get("gpu"))) or GPUSpec(name=str(item.get("gpu")), memory_gb=1)).name
            if gname not in gpu_index:
                raise InputError(path, f"{field}.gpu", f"{item.get('gpu')!r} is not in the inventory")
            if item.get("model") not in model_index:
                raise InputError(path, f"{field}.model", f"{item.get('model')!r} is not in demands")
            tp = _positive_int(path, f"{field}.tensor_parallel", item.get("tensor_parallel"))
            if inventory[gpu_index[gname]].gpus_per_machine % tp:
                raise InputError(path, f"{field}.tensor_parallel", f"TP degree {tp} does not divide the "
                                 f"{inventory[gpu_index[gname]].gpus_per_machine} GPUs of a {gname} machine")
            options.append(validate_model(InstanceOption, {"gpu_index": gpu_index[gname], "tensor_parallel": tp,
                                          "model_index": model_index[item["model"]],
                                          "capacity": item.get("requests_per_s"), "source": "given"}, path, field))
    else:
        memory = _memory(path, data)
        models_dir = _models_dir(path, data)
        for m, demand in enumerate(demands):
            spec = _model(path, f"demands[{m}].model", demand.model)
            for g, inv in enumerate(inventory):
                cand = [t for t in divisors(inv.gpus_per_machine) if degrees is None or t in degrees]
                checks = check_degrees(spec, inv.gpu, inv.gpus_per_machine, max_input=spec.max_context_tokens // 2,
                                       max_output=spec.max_context_tokens - spec.max_context_tokens // 2,
                                       memory_utilization=memory.memory_utilization,
                                       engine_overhead_gb=memory.engine_overhead_gb, degrees=cand)
                for check in checks:
                    label = f"{spec.name} on {inv.gpu.name} tp{check.tensor_parallel}"
                    if not check.feasible:
                        skipped.append(f"{label}: {check.reason}")
                        continue
                    cost = find_aladdin_model(spec.name, inv.gpu.name, check.tensor_parallel, models_dir)
                    if cost is None:
                        skipped.append(f"{label}: no Aladdin cost model")
                        continue
                    cap = continuous_capacity(cost, kv_size=check.kv_size_bytes, kv_per_token=spec.kv_bytes_per_token,
                                              mean_input=demand.mean_input, mean_output=demand.mean_output,
                                              ttft_s=demand.ttft_s, atgt_s=demand.atgt_s, max_batch=memory.max_batch)
                    if not cap.feasible:
                        skipped.append(f"{label}: {cap.reason}")
                        continue
                    options.append(InstanceOption(gpu_index=g, tensor_parallel=check.tensor_parallel, model_index=m,
                                                  capacity=cap.requests_per_s,
                                                  source=f"continuous estimate, batch {cap.batch:.1f} ({cap.bottleneck})"))
    for m, demand in enumerate(demands):
        if not any(o.model_index == m for o in options):
            why = "; ".join(s for s in skipped if s.startswith(demand.model)) or "no capacity given"
            raise InputError(path, f"demands[{m}].model", f"{demand.model} fits nowhere in the inventory ({why})")
    payload = dict(name=str(data.get("name", path.stem)), inventory=tuple(inventory), demands=tuple(demands),
                   options=tuple(options), skipped=tuple(skipped))
    return validate_model(CostPlanProblem, payload, path)


def load_routing_problem(path: Path, data: dict | None = None) -> RoutingProblem:
    data = read_yaml_mapping(path) if data is None else data
    model = _model(path, "model", data.get("model"))
    memory = _memory(path, data)
    models_dir = _models_dir(path, data)
    instances, weights = [], []
    for k, item in enumerate(_list(path, data, "instances")):
        field = f"instances[{k}]"
        gpu = _gpu(path, f"{field}.gpu", item.get("gpu"))
        tp = _positive_int(path, f"{field}.tensor_parallel", item.get("tensor_parallel", 1))
        count = _positive_int(path, f"{field}.count", item.get("count", 1))
        kv = kv_size_bytes(model, gpu, tp, memory.memory_utilization, memory.engine_overhead_gb)
        if kv <= 0:
            raise InputError(path, field, f"{model.name} does not fit on {tp} x {gpu.name} (KV size {kv / 1e9:.2f} GB)")
        cost = find_hetero_model(model.name, gpu.name, tp, models_dir)
        if cost is None:
            raise InputError(path, field, f"no p1..p8 model for {model.name} on {gpu.name} tp{tp} "
                                          "(fit one: planner fit --kind hetero)")
        name = str(item.get("name", f"{gpu.name}-tp{tp}"))
        for c in range(count):
            instances.append(ServingInstance(name=f"{name}#{c}" if count > 1 else name, gpu=gpu.name,
                                             tensor_parallel=tp, kv_size_bytes=kv, cost=cost))
            if "wrr_weight" in item:
                weights.append(item["wrr_weight"])
    if weights and len(weights) != len(instances):
        raise InputError(path, "instances", "give wrr_weight on every instance entry or on none")
    req = data.get("requests") or {}
    if data.get("requests_csv"):
        csv = resolve_relative(path, data["requests_csv"])
        table = read_csv_table(csv, {"request_id": str, "input_tokens": int, "predicted_output_tokens": int})
        ids = tuple(table["request_id"])
        inputs, predicted = table["input_tokens"].to_numpy(), table["predicted_output_tokens"].to_numpy()
    else:
        if not isinstance(req, dict):
            raise InputError(path, "requests", "must be a mapping (workload, count, seed) or use requests_csv")
        count = _positive_int(path, "requests.count", req.get("count", 100))
        try:
            dist = find_distribution(str(req.get("workload", "sharegpt")))
        except PlannerError as exc:
            raise InputError(path, "requests.workload", str(exc)) from None
        rng = np.random.default_rng(req.get("seed", 0))
        inputs, outputs = dist.sample(count, rng, max_total_tokens=model.max_context_tokens)
        # §5.4 output predictor: numpy.random.normal(mean, std) of the sampled outputs (≥ 1, context-capped)
        predicted = np.clip(np.rint(rng.normal(outputs.mean(), outputs.std(), size=count)), 1,
                            np.maximum(1, model.max_context_tokens - inputs)).astype(int)
        ids = tuple(f"r{k}" for k in range(count))
    need = model.kv_bytes_per_token * (np.asarray(inputs) + np.asarray(predicted))
    biggest = max(s.kv_size_bytes for s in instances)
    if (need > biggest).any():
        k = int(np.argmax(need > biggest))
        raise InputError(path, "requests", f"request {ids[k]} ({inputs[k]}+{predicted[k]} tokens) fits no instance's KV cache")
    payload = dict(name=str(data.get("name", path.stem)), model=model, instances=tuple(instances), request_ids=ids,
                   inputs=tuple(int(i) for i in inputs), predicted_outputs=tuple(int(o) for o in predicted),
                   theta=data.get("theta", 2.0), max_batch=memory.max_batch,
                   wrr_weights=tuple(weights) if weights else None)
    return validate_model(RoutingProblem, payload, path)


def load_deployment_instance(path: Path | str) -> ClusterProblem | CostPlanProblem:
    """A TP-enumeration cluster or a cost plan, by the keys present."""
    path = Path(path)
    data = read_yaml_mapping(path)
    family = data.get("family")
    if family not in (None, "deployment", *CLUSTER_FAMILIES):
        raise InputError(path, "family", f"expected deployment or deployment-tp, got {family!r}")
    if "inventory" in data or "demands" in data:
        return load_cost_plan(path, data)
    if "machines" in data:
        return load_cluster_problem(path, data)
    raise InputError(path, "", "neither a cost plan (inventory, demands) nor a cluster (machines)")


def load_cost_plan_file(path: Path | str) -> CostPlanProblem:
    problem = load_deployment_instance(path)
    if not isinstance(problem, CostPlanProblem):
        raise InputError(path, "inventory", "not a cost-plan instance (needs inventory, demands)")
    return problem


def load_routing_instance(path: Path | str) -> RoutingProblem:
    path = Path(path)
    data = read_yaml_mapping(path)
    if data.get("family") not in (None, "routing"):
        raise InputError(path, "family", f"expected routing, got {data.get('family')!r}")
    return load_routing_problem(path, data)
