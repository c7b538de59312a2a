"""Instance files of the deployment and routing families (YAML; one-line errors naming file and field).

Three kinds, told apart by their keys (see instances/deployment/README.md):

* TP enumeration (``family: deployment-tp``): ``model``, ``machines``, ``workload``/``samples``.
* cost plan (``family: deployment``): ``inventory``, ``demands`` (+ optional ``degrees``, ``capacities``).
  Each GPU type appears once in ``inventory`` (a second entry is refused, not merged or dropped).
  ``degrees`` restricts the TP degrees of every option, estimated or given: a ``capacities`` entry
  whose ``tensor_parallel`` is not in ``degrees`` is not used (it is listed in ``skipped``); the same
  (model, gpu, tensor_parallel) given twice is refused.
* routing batch (``family: routing``): ``model``, ``instances``, ``requests``.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from planner.catalog import find_gpu, find_model, gpu_alias_problem, gpu_names, model_names
from planner.core.io import (
    MAX_REQUEST_TOKENS,
    check_input_dir,
    check_unique,
    name_field,
    read_csv_table,
    read_yaml_mapping,
    resolve_relative,
    shown,
    validate_model,
    yaml_number_hint,
)
from planner.core.types import GPUSpec, LLMSpec
from planner.deployment.memory import check_degrees, divisors, kv_size_bytes
from planner.deployment.problem import (
    ClusterProblem,
    CostPlanProblem,
    GPUInventory,
    InstanceOption,
    MachineGroup,
    MemoryOptions,
    ModelDemand,
    RoutingProblem,
    ServingInstance,
    model_key,
)
from planner.deployment.throughput import continuous_capacity, find_aladdin_model, find_hetero_model
from planner.errors import InputError, PlannerError
from planner.workloads.streams import find_distribution

CLUSTER_FAMILIES = ("deployment-tp",)


def _model(path: Path, field: str, name: Any) -> LLMSpec:
    """A catalog model name (or alias), or a mapping of every `LLMSpec` field (name, num_layers,
    hidden_size, num_attention_heads, num_kv_heads, head_dim, num_parameters; optional dtype_bytes,
    max_context_tokens), e.g. an architecture the catalog does not hold or a catalog model read
    differently (Llama-3-8B with num_kv_heads: 32, the heterogeneous-cluster paper's 512 KiB/token).
    Cost-model files are looked up by the mapping's ``name``."""
    if isinstance(name, dict):
        return validate_model(LLMSpec, name, path, field)
    spec = find_model(name) if isinstance(name, str) and name else None
    if spec is None:
        raise InputError(path, field, f"unknown model {shown(name)} (catalog: {', '.join(model_names())}; "
                                      "or a mapping of its fields: name, num_layers, hidden_size, num_attention_heads, "
                                      "num_kv_heads, head_dim, num_parameters)")
    return spec


def _gpu(path: Path, field: str, name: Any) -> GPUSpec:
    """The catalog GPU of that exact name; an alias naming several SKUs is refused, never rewritten."""
    problem = gpu_alias_problem(name) if isinstance(name, str) else None
    if problem is not None:
        raise InputError(path, field, problem)
    spec = find_gpu(str(name), aliases=False) if name else None
    if spec is None:
        raise InputError(path, field, f"unknown GPU type {shown(name)} (catalog: {', '.join(gpu_names())})")
    return spec


#: Size caps (one clear line instead of a hang or MemoryError); each named in its one-line error.
MAX_GPUS_PER_MACHINE = 1024
MAX_MACHINES = 100_000  # per machine group / inventory entry
MAX_INDEPENDENT_MACHINES = 1_000  # machines in all with independent_machines: true (one group, one table row each)
MAX_SAMPLES = 100_000
MAX_ROUTING_REQUESTS = 1_000_000
MAX_ROUTING_INSTANCES = 10_000
MAX_ROUTING_PAIRS = 2_000_000  # requests x instances (the processing-time matrix and the MILP columns)
MAX_TOKENS = MAX_REQUEST_TOKENS  # max_input / max_output
MAX_RATE = 1e9  # requests/s of one demand
MAX_PRICE = 1e6  # $ per GPU-hour
MAX_SLO_S = 1e6  # seconds (ttft_s, atgt_s)
MAX_MEAN_TOKENS = float(MAX_REQUEST_TOKENS)
MAX_WEIGHT = 1e12  # wrr_weight
MAX_THETA = 1e6
MAX_SEED = 2**63 - 1

_CLUSTER_KEYS = ("family", "name", "model", "machines", "independent_machines", "estimator", "workload", "samples",
                 "seed", "samples_csv", "max_input", "max_output", "memory_utilization", "engine_overhead_gb",
                 "max_batch", "slo", "models_dir")
_MACHINE_KEYS = ("name", "gpu", "gpus", "count", "tensor_parallel")
_SLO_KEYS = ("ttft_s", "atgt_s")
_COST_KEYS = ("family", "name", "inventory", "demands", "degrees", "capacities", "memory_utilization",
              "engine_overhead_gb", "max_batch", "models_dir")
_INVENTORY_KEYS = ("gpu", "machines", "gpus_per_machine", "price_per_gpu_hour")
_DEMAND_KEYS = ("model", "rate", "workload", "mean_input", "mean_output", "ttft_s", "atgt_s")
_CAPACITY_KEYS = ("model", "gpu", "tensor_parallel", "requests_per_s")
_ROUTING_KEYS = ("family", "name", "model", "instances", "requests", "requests_csv", "theta", "memory_utilization",
                 "engine_overhead_gb", "max_batch", "models_dir")
_INSTANCE_KEYS = ("name", "gpu", "tensor_parallel", "count", "wrr_weight")
_REQUEST_KEYS = ("workload", "count", "seed")


def _known(path: Path, prefix: str, item: dict, allowed: tuple[str, ...]) -> None:
    """An unknown (misspelt) key is one line, never silently ignored."""
    for key in item:
        if key not in allowed:
            raise InputError(path, f"{prefix}{key}", "unknown field (check the spelling)")


def _list(path: Path, data: dict, key: str, allowed: tuple[str, ...] | None = None) -> list[dict]:
    items = data.get(key)
    if not isinstance(items, list) or not items or not all(isinstance(x, dict) for x in items):
        raise InputError(path, key, "required: a non-empty list of mappings")
    if allowed is not None:
        for k, item in enumerate(items):
            _known(path, f"{key}[{k}].", item, allowed)
    return items


def _positive_int(path: Path, field: str, value: Any, *, allow_zero: bool = False, maximum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < (0 if allow_zero else 1):
        raise InputError(path, field, f"must be a {'non-negative' if allow_zero else 'positive'} integer, got {value!r}")
    if maximum is not None and value > maximum:
        raise InputError(path, field, f"must be at most {maximum:,}, got {value:,}")
    return value


def _seed(path: Path, field: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_SEED:
        raise InputError(path, field, f"must be a non-negative integer, got {value!r}")
    return value


def _number(path: Path, field: str, value: Any, *, maximum: float, allow_zero: bool = False) -> float:
    """A finite number in (0, maximum] (or [0, maximum]); booleans and text refused."""
    if isinstance(value, bool):
        raise InputError(path, field, f"expected a number, got {str(value).lower()}")
    if not isinstance(value, (int, float)):
        raise InputError(path, field, f"expected a number, got {value!r} {yaml_number_hint(value)}".rstrip())
    kind = "non-negative" if allow_zero else "positive"
    if isinstance(value, float) and not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        raise InputError(path, field, f"must be a finite {kind} number, got {value!r}")
    if value > maximum:
        raise InputError(path, field, f"must be at most {maximum:g}, got {value:g}")
    return float(value)


def _optional_number(path: Path, data: dict, key: str, field: str, maximum: float, **kw: Any) -> None:
    if key in data and data[key] is not None:
        _number(path, field, data[key], maximum=maximum, **kw)


def _text_path(path: Path, field: str, value: Any) -> Path:
    if not isinstance(value, str) or not value.strip():
        raise InputError(path, field, f"must be a path (text), got {value!r}")
    return resolve_relative(path, value)


def _bool(path: Path, field: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise InputError(path, field, f"must be true or false, got {value!r}")
    return value


def _unique(path: Path, field: str, names: list[str], kind: str) -> None:
    try:
        check_unique(names, kind, field)
    except ValueError as exc:
        raise InputError(path, field, str(exc)) from None


def _models_dir(path: Path, data: dict) -> Path | None:
    if data.get("models_dir") is None:
        return None
    target = _text_path(path, "models_dir", data["models_dir"])
    return check_input_dir(target, "a directory of cost models (hetero/, aladdin/)", source=path, field="models_dir")


def _memory(path: Path, data: dict) -> MemoryOptions:
    keys = ("memory_utilization", "engine_overhead_gb", "max_batch")
    _optional_number(path, data, "memory_utilization", "memory_utilization", 1.0)
    _optional_number(path, data, "engine_overhead_gb", "engine_overhead_gb", 1e5, allow_zero=True)
    if "max_batch" in data:
        _positive_int(path, "max_batch", data["max_batch"], maximum=1_000_000)
    return validate_model(MemoryOptions, {k: data[k] for k in keys if k in data}, path)


def _samples(path: Path, data: dict, model: LLMSpec) -> tuple[np.ndarray, np.ndarray]:
    """(inputs, outputs) from ``samples_csv`` (input_tokens, output_tokens) or a workload distribution."""
    if data.get("samples_csv") is not None:
        csv = _text_path(path, "samples_csv", data["samples_csv"])
        table = read_csv_table(csv, {"input_tokens": int, "output_tokens": int}, source=path, field="samples_csv")
        if len(table) > MAX_SAMPLES:
            raise InputError(csv, "", f"at most {MAX_SAMPLES:,} sample rows, got {len(table):,}")
        return table["input_tokens"].to_numpy(), table["output_tokens"].to_numpy()
    count = _positive_int(path, "samples", data.get("samples", 200), maximum=MAX_SAMPLES)
    seed = _seed(path, "seed", data.get("seed", 0))
    try:
        dist = find_distribution(str(data.get("workload", "sharegpt")))
    except PlannerError as exc:
        raise InputError(path, "workload", str(exc)) from None
    return dist.sample(count, np.random.default_rng(seed), max_total_tokens=model.max_context_tokens)


def _max_lengths(path: Path, data: dict, model: LLMSpec) -> tuple[int, int]:
    """Eq. 2's I_max, O_max: given, else [R] split the model context (only the sum matters)."""
    total = model.max_context_tokens
    max_in = _positive_int(path, "max_input", data.get("max_input", total // 2), maximum=MAX_TOKENS)
    max_out = _positive_int(path, "max_output", data.get("max_output", total - total // 2), maximum=MAX_TOKENS)
    return max_in, max_out


def load_cluster_problem(path: Path, data: dict) -> ClusterProblem:
    _known(path, "", data, _CLUSTER_KEYS)
    model = _model(path, "model", data.get("model"))
    independent = _bool(path, "independent_machines", data.get("independent_machines", False))
    groups, names = [], []
    for k, item in enumerate(_list(path, data, "machines", _MACHINE_KEYS)):
        field = f"machines[{k}]"
        gpus = item.get("gpus")
        if gpus == 0:
            raise InputError(path, f"{field}.gpus", "a machine with 0 GPUs cannot run an instance")
        gpus = _positive_int(path, f"{field}.gpus", gpus, maximum=MAX_GPUS_PER_MACHINE)
        count = _positive_int(path, f"{field}.count", item.get("count", 1), maximum=MAX_MACHINES)
        tp = item.get("tensor_parallel")
        if tp is not None:
            tp = _positive_int(path, f"{field}.tensor_parallel", tp)
            if gpus % tp:
                raise InputError(path, f"{field}.tensor_parallel",
                                 f"TP degree {tp} does not divide the machine's {gpus} GPUs (choose from {divisors(gpus)})")
        gpu = _gpu(path, f"{field}.gpu", item.get("gpu"))
        name = name_field(item, "name", f"group{k}", path, f"{field}.name")
        names.append(name)
        if independent:  # asked otherwise: every machine picks its own degree
            groups += [MachineGroup(name=f"{name}#{c}", gpu=gpu, gpus_per_machine=gpus, count=1, tensor_parallel=tp)
                       for c in range(count)]
        else:  # machines of one type share a choice (the paper's setting)
            groups.append(MachineGroup(name=name, gpu=gpu, gpus_per_machine=gpus, count=count, tensor_parallel=tp))
    _unique(path, "machines", names, "group name")
    if independent and len(groups) > MAX_INDEPENDENT_MACHINES:
        raise InputError(path, "independent_machines", f"at most {MAX_INDEPENDENT_MACHINES:,} machines in all when "
                         f"each chooses its own degree, got {len(groups):,} (set it false to share a degree per group)")
    inputs, outputs = _samples(path, data, model)
    max_in, max_out = _max_lengths(path, data, model)
    estimator = data.get("estimator", "static")
    if estimator not in ("static", "continuous"):
        raise InputError(path, "estimator", f"must be static or continuous, got {estimator!r}")
    slo = data.get("slo")
    slo = {} if slo is None else slo
    if not isinstance(slo, dict):
        raise InputError(path, "slo", f"must be a mapping (ttft_s, atgt_s), got {slo!r}")
    _known(path, "slo.", slo, _SLO_KEYS)
    for key in _SLO_KEYS:
        _optional_number(path, slo, key, f"slo.{key}", MAX_SLO_S)
    models_dir = _models_dir(path, data)
    hetero, aladdin, seen = {}, {}, set()
    for g in groups:
        for t in ([g.tensor_parallel] if g.tensor_parallel else divisors(g.gpus_per_machine)):
            key = model_key(g.gpu.name, t)
            if key in seen:  # machines of one type share their cost models: read each file once
                continue
            seen.add(key)
            found_h = find_hetero_model(model.name, g.gpu.name, t, models_dir)
            if found_h is not None:
                hetero[key] = found_h
            found_a = find_aladdin_model(model.name, g.gpu.name, t, models_dir)
            if found_a is not None:
                aladdin[key] = found_a
    payload = dict(name=name_field(data, "name", path.stem, path), model=model, machines=tuple(groups),
                   sample_inputs=tuple(int(i) for i in inputs), sample_outputs=tuple(int(o) for o in outputs),
                   max_input=max_in, max_output=max_out, memory=_memory(path, data), estimator=estimator,
                   ttft_s=slo.get("ttft_s"), atgt_s=slo.get("atgt_s"), hetero_models=hetero, aladdin_models=aladdin)
    return validate_model(ClusterProblem, payload, path)


def _demand(path: Path, k: int, item: dict) -> tuple[ModelDemand, str | None]:
    field = f"demands[{k}]"
    _optional_number(path, item, "rate", f"{field}.rate", MAX_RATE)
    for key in ("mean_input", "mean_output"):
        _optional_number(path, item, key, f"{field}.{key}", MAX_MEAN_TOKENS)
    for key in ("ttft_s", "atgt_s"):
        _optional_number(path, item, key, f"{field}.{key}", MAX_SLO_S)
    payload = {key: item[key] for key in ("model", "rate", "mean_input", "mean_output", "ttft_s", "atgt_s") if key in item}
    if "workload" in item and ("mean_input" not in item or "mean_output" not in item):
        try:
            dist = find_distribution(str(item["workload"]))
        except PlannerError as exc:
            raise InputError(path, f"{field}.workload", str(exc)) from None
        payload.setdefault("mean_input", dist.mean_input)
        payload.setdefault("mean_output", dist.mean_output)
    return validate_model(ModelDemand, payload, path, field), item.get("workload")


def _cost_inventory(path: Path, data: dict) -> list[GPUInventory]:
    """``inventory``: one entry per GPU type (machines, GPUs per machine, $ per GPU-hour)."""
    inventory = []
    for k, item in enumerate(_list(path, data, "inventory", _INVENTORY_KEYS)):
        field = f"inventory[{k}]"
        if item.get("gpus_per_machine") == 0:
            raise InputError(path, f"{field}.gpus_per_machine", "a machine with 0 GPUs cannot run an instance")
        if item.get("price_per_gpu_hour") is None:
            raise InputError(path, f"{field}.price_per_gpu_hour",
                             "required for a cost plan: the $ price of one GPU-hour of this type")
        _positive_int(path, f"{field}.gpus_per_machine", item.get("gpus_per_machine"), maximum=MAX_GPUS_PER_MACHINE)
        _positive_int(path, f"{field}.machines", item.get("machines"), maximum=MAX_MACHINES)
        _number(path, f"{field}.price_per_gpu_hour", item["price_per_gpu_hour"], maximum=MAX_PRICE)
        gpu = _gpu(path, f"{field}.gpu", item.get("gpu"))
        first = next((i for i, inv in enumerate(inventory) if inv.gpu.name == gpu.name), None)
        if first is not None:
            raise InputError(path, f"{field}.gpu", f"{gpu.name} is listed twice (inventory[{first}] and "
                                                   f"inventory[{k}]); give one entry per GPU type with all its machines")
        inventory.append(validate_model(GPUInventory, {**{key: item[key] for key in
                                        ("machines", "gpus_per_machine", "price_per_gpu_hour") if key in item}, "gpu": gpu},
                                        path, field))
    return inventory


def _cost_degrees(path: Path, data: dict, inventory: list[GPUInventory]) -> list | None:
    """``degrees`` (the TP degrees allowed; None: every divisor of a machine's GPU count): some must divide a machine."""
    degrees = data.get("degrees")
    if degrees is not None:
        if not isinstance(degrees, list) or not degrees:
            raise InputError(path, "degrees", f"must be a non-empty list of TP degrees, got {degrees!r}")
        for k, t in enumerate(degrees):
            _positive_int(path, f"degrees[{k}]", t, maximum=MAX_GPUS_PER_MACHINE)
        if not any(inv.gpus_per_machine % t == 0 for t in degrees for inv in inventory):
            t = degrees[0] if len(degrees) == 1 else f"none of {degrees}"
            raise InputError(path, "degrees", f"{t} divides no machine's GPU count "
                                 f"({', '.join(sorted({str(inv.gpus_per_machine) for inv in inventory}))})")
    return degrees


def _given_options(path: Path, data: dict, inventory: list[GPUInventory], demands: list,
                   degrees: list | None) -> tuple[list[InstanceOption], list[str]]:
    """(options, skipped) from ``capacities`` (requests/s per model, GPU type and TP degree, as given)."""
    options: list[InstanceOption] = []
    skipped: list[str] = []
    gpu_index = {inv.gpu.name: g for g, inv in enumerate(inventory)}
    model_index = {d.model: m for m, d in enumerate(demands)}
    given: dict[tuple[str, str, int], int] = {}
    for k, item in enumerate(_list(path, data, "capacities", _CAPACITY_KEYS)):
        field = f"capacities[{k}]"
        if isinstance(item.get("gpu"), str) and gpu_alias_problem(item["gpu"]) is not None:
            raise InputError(path, f"{field}.gpu", gpu_alias_problem(item["gpu"]))
        found = find_gpu(item["gpu"], aliases=False) if isinstance(item.get("gpu"), str) else None
        gname = found.name if found is not None else None
        if gname not in gpu_index:
            raise InputError(path, f"{field}.gpu", f"{shown(item.get('gpu'))} is not in the inventory")
        if not isinstance(item.get("model"), str) or item["model"] not in model_index:
            raise InputError(path, f"{field}.model", f"{shown(item.get('model'))} is not in demands")
        tp = _positive_int(path, f"{field}.tensor_parallel", item.get("tensor_parallel"))
        _number(path, f"{field}.requests_per_s", item.get("requests_per_s"), maximum=MAX_RATE)
        if inventory[gpu_index[gname]].gpus_per_machine % tp:
            raise InputError(path, f"{field}.tensor_parallel", f"TP degree {tp} does not divide the "
                             f"{inventory[gpu_index[gname]].gpus_per_machine} GPUs of a {gname} machine")
        key = (item["model"], gname, tp)
        if key in given:
            raise InputError(path, field, f"{item['model']} on {gname} tp{tp} is given twice "
                                          f"(capacities[{given[key]}] and capacities[{k}])")
        given[key] = k
        if degrees is not None and tp not in degrees:  # the file's degrees restrict the given capacities too
            skipped.append(f"{item['model']} on {gname} tp{tp}: TP {tp} is not in degrees {degrees} ({field})")
            continue
        options.append(validate_model(InstanceOption, {"gpu_index": gpu_index[gname], "tensor_parallel": tp,
                                      "model_index": model_index[item["model"]],
                                      "capacity": item.get("requests_per_s"), "source": "given"}, path, field))
    return options, skipped


def _estimated_options(path: Path, data: dict, inventory: list[GPUInventory], demands: list,
                       degrees: list | None) -> tuple[list[InstanceOption], list[str]]:
    """(options, skipped): every feasible TP degree of every model on every GPU type, its capacity the
    continuous-batching estimate from its Aladdin cost model (`throughput.continuous_capacity`)."""
    options: list[InstanceOption] = []
    skipped: list[str] = []
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
                                              source=f"continuous estimate, batch {cap.batch:.1f} ({cap.bottleneck})",
                                              cost_model=cost))
    return options, skipped


def _every_demand_fits(path: Path, demands: list, options: list[InstanceOption], skipped: list[str]) -> None:
    """One line naming the first model without any instance option, and why."""
    for m, demand in enumerate(demands):
        if not any(o.model_index == m for o in options):
            why = "; ".join(s for s in skipped if s.startswith(demand.model)) or "no capacity given"
            raise InputError(path, f"demands[{m}].model", f"{demand.model} fits nowhere in the inventory ({why})")


def load_cost_plan(path: Path, data: dict) -> CostPlanProblem:
    """A cost plan: the inventory, the demands, the TP degrees allowed (``degrees``) and each instance option's
    capacity, given (``capacities``) or estimated from the Aladdin cost models (`_estimated_options`)."""
    _known(path, "", data, _COST_KEYS)
    inventory = _cost_inventory(path, data)
    demands = [_demand(path, k, item)[0] for k, item in enumerate(_list(path, data, "demands", _DEMAND_KEYS))]
    _unique(path, "demands", [d.model for d in demands], "model")
    degrees = _cost_degrees(path, data, inventory)
    if data.get("capacities") is not None:  # given (an empty list is refused by _list, not read as absent)
        options, skipped = _given_options(path, data, inventory, demands, degrees)
    else:
        options, skipped = _estimated_options(path, data, inventory, demands, degrees)
    _every_demand_fits(path, demands, options, skipped)
    payload = dict(name=name_field(data, "name", path.stem, path), inventory=tuple(inventory), demands=tuple(demands),
                   options=tuple(options), skipped=tuple(skipped))
    return validate_model(CostPlanProblem, payload, path)


def load_routing_problem(path: Path, data: dict | None = None) -> RoutingProblem:
    data = read_yaml_mapping(path) if data is None else data
    _known(path, "", data, _ROUTING_KEYS)
    model = _model(path, "model", data.get("model"))
    memory = _memory(path, data)
    models_dir = _models_dir(path, data)
    if "theta" in data:
        _number(path, "theta", data["theta"], maximum=MAX_THETA)
    instances, weights, entry_names = [], [], []
    total = 0
    for k, item in enumerate(_list(path, data, "instances", _INSTANCE_KEYS)):
        field = f"instances[{k}]"
        gpu = _gpu(path, f"{field}.gpu", item.get("gpu"))
        tp = _positive_int(path, f"{field}.tensor_parallel", item.get("tensor_parallel", 1),
                           maximum=MAX_GPUS_PER_MACHINE)
        count = _positive_int(path, f"{field}.count", item.get("count", 1), maximum=MAX_ROUTING_INSTANCES)
        total += count
        if total > MAX_ROUTING_INSTANCES:
            raise InputError(path, f"{field}.count", f"at most {MAX_ROUTING_INSTANCES:,} instances in all, "
                             f"got {total:,} so far")
        if "wrr_weight" in item:
            _number(path, f"{field}.wrr_weight", item["wrr_weight"], maximum=MAX_WEIGHT)
        kv = kv_size_bytes(model, gpu, tp, memory.memory_utilization, memory.engine_overhead_gb)
        if kv <= 0:
            raise InputError(path, field, f"{model.name} does not fit on {tp} x {gpu.name} (KV size {kv / 1e9:.2f} GB)")
        cost = find_hetero_model(model.name, gpu.name, tp, models_dir)
        if cost is None:
            raise InputError(path, field, f"no p1..p8 model for {model.name} on {gpu.name} tp{tp} "
                                          "(fit one: planner fit --kind hetero)")
        name = name_field(item, "name", f"{gpu.name}-tp{tp}", path, f"{field}.name")
        entry_names.append(name)
        _unique(path, "instances", entry_names, "instance name")
        for c in range(count):
            instances.append(ServingInstance(name=f"{name}#{c}" if count > 1 else name, gpu=gpu.name,
                                             tensor_parallel=tp, kv_size_bytes=kv, cost=cost))
            if "wrr_weight" in item:
                weights.append(item["wrr_weight"])
    if weights and len(weights) != len(instances):
        raise InputError(path, "instances", "give wrr_weight on every instance entry or on none")
    _unique(path, "instances", [s.name for s in instances], "instance name")
    req = data.get("requests")
    req = {} if req is None else req
    if data.get("requests_csv") is not None:
        if "requests" in data:
            raise InputError(path, "requests", "give requests or requests_csv, not both")
        csv = _text_path(path, "requests_csv", data["requests_csv"])
        table = read_csv_table(csv, {"request_id": str, "input_tokens": int, "predicted_output_tokens": int},
                               maximum={"input_tokens": MAX_REQUEST_TOKENS,
                                        "predicted_output_tokens": MAX_REQUEST_TOKENS},
                               source=path, field="requests_csv")
        _pairs(csv, "", len(table), len(instances))
        ids = tuple(table["request_id"])
        inputs, predicted = table["input_tokens"].to_numpy(), table["predicted_output_tokens"].to_numpy()
    else:
        if not isinstance(req, dict):
            raise InputError(path, "requests", "must be a mapping (workload, count, seed) or use requests_csv")
        _known(path, "requests.", req, _REQUEST_KEYS)
        count = _positive_int(path, "requests.count", req.get("count", 100), maximum=MAX_ROUTING_REQUESTS)
        _pairs(path, "requests.count", count, len(instances))
        seed = _seed(path, "requests.seed", req.get("seed", 0))
        try:
            dist = find_distribution(str(req.get("workload", "sharegpt")))
        except PlannerError as exc:
            raise InputError(path, "requests.workload", str(exc)) from None
        rng = np.random.default_rng(seed)
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
    payload = dict(name=name_field(data, "name", path.stem, path), model=model, instances=tuple(instances), request_ids=ids,
                   inputs=tuple(int(i) for i in inputs), predicted_outputs=tuple(int(o) for o in predicted),
                   theta=data.get("theta", 2.0), max_batch=memory.max_batch,
                   wrr_weights=tuple(weights) if weights else None)
    return validate_model(RoutingProblem, payload, path)


def _pairs(path: Path, field: str, requests: int, instances: int) -> None:
    if requests * instances > MAX_ROUTING_PAIRS:
        raise InputError(path, field, f"{requests:,} requests x {instances:,} instances = {requests * instances:,} "
                         f"pairs, at most {MAX_ROUTING_PAIRS:,} (fewer requests or instances)")


def load_deployment_instance(path: Path | str):
    """A TP-enumeration cluster, a cost plan, or a mixed fleet for request classes
    (`planner.deployment.classes_instance`: keys ``gpus`` and ``models``), by the keys present."""
    path = Path(path)
    data = read_yaml_mapping(path)
    family = data.get("family")
    if family not in (None, "deployment", *CLUSTER_FAMILIES):
        raise InputError(path, "family", f"expected deployment or deployment-tp, got {family!r}")
    if "models" in data or "gpus" in data:
        if "inventory" in data or "demands" in data:
            raise InputError(path, "models" if "models" in data else "gpus",
                             "give gpus and models (request classes) or inventory and demands (cost plan), not both")
        from planner.deployment.classes_instance import load_class_plan

        return load_class_plan(path, data)
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
