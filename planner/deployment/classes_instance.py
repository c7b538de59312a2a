"""Instance files of mixed fleets for request classes (``family: deployment`` with ``gpus`` and ``models``).

Keys (one-line errors naming file and field; unknown keys refused at every level)::

    family: deployment
    name: TEXT                      # optional (default: the file stem)
    source: TEXT                    # optional: where the prices and capacities come from (printed)
    gpus:                           # GPU types, each once
      - {name: A100-80GB-SXM, price_per_gpu_hour: 3.67, available: 16}    # a catalog GPU: exact name
      - {name: A10G, memory_gb: 24, price_per_gpu_hour: 1.01}             # specs given: any name
    models:
      - name: TEXT                  # a label (the model need not be in the catalog)
        classes: [{name: TEXT, rate: REQ_PER_S}, ...]
        configurations:
          - {name: TEXT?, gpu: NAME, tensor_parallel: 1, requests_per_s: {CLASS: MU, ...}}

A GPU without specs is looked up by its exact catalog name (any letter case); an alias naming several
SKUs (``A100-80GB``: SXM or PCIe) is refused with the candidates, never rewritten.  A GPU with
``memory_gb`` (and optionally ``memory_bandwidth_gb_s``, ``fp16_tflops``) is defined by the file and
keeps its name exactly.  ``available`` (GPUs of that type, shared by all models) is optional: without
it the type is unlimited.  ``requests_per_s`` maps class names of the same model to μ > 0; a class
not listed cannot be routed to that configuration; every class with a positive rate needs one
configuration that can serve it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from planner.catalog import find_gpu, gpu_alias_problem, gpu_names
from planner.core.io import name_field, shown
from planner.deployment.classes import ClassPlanProblem, Configuration, GPUType, RequestClass
from planner.deployment.instance import (
    MAX_GPUS_PER_MACHINE,
    MAX_PRICE,
    MAX_RATE,
    _known,
    _number,
    _positive_int,
    _unique,
)
from planner.errors import InputError

_KEYS = ("family", "name", "source", "gpus", "models")
_GPU_KEYS = ("name", "price_per_gpu_hour", "available", "memory_gb", "memory_bandwidth_gb_s", "fp16_tflops")
_SPEC_KEYS = ("memory_gb", "memory_bandwidth_gb_s", "fp16_tflops")
_MODEL_KEYS = ("name", "classes", "configurations")
_CLASS_KEYS = ("name", "rate")
_CONFIG_KEYS = ("name", "gpu", "tensor_parallel", "requests_per_s")

#: Size caps (one clear line beyond them).
MAX_CLASSES = 100_000
MAX_CONFIGURATIONS = 10_000
MAX_PAIRS = 2_000_000
MAX_AVAILABLE = 10_000_000
MAX_MEMORY_GB = 1e5
MAX_SPEC = 1e9


def _items(path: Path, container: dict, key: str, field: str, allowed: tuple[str, ...]) -> list[dict]:
    """``container[key]``: a non-empty list of mappings with only ``allowed`` keys (``field`` names it)."""
    items = container.get(key)
    if not isinstance(items, list) or not items or not all(isinstance(x, dict) for x in items):
        raise InputError(path, field, f"required: a non-empty list of mappings, got {shown(items)}")
    for k, item in enumerate(items):
        _known(path, f"{field}[{k}].", item, allowed)
    return items


def _name(path: Path, field: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InputError(path, field, f"expected a name (text), got {shown(value)}")
    return value


def _gpu_type(path: Path, k: int, item: dict) -> GPUType:
    field = f"gpus[{k}]"
    name = _name(path, f"{field}.name", item.get("name"))
    if item.get("price_per_gpu_hour") is None:
        raise InputError(path, f"{field}.price_per_gpu_hour", f"required: the $ price of one {name} GPU-hour")
    price = _number(path, f"{field}.price_per_gpu_hour", item["price_per_gpu_hour"], maximum=MAX_PRICE)
    available = None
    if item.get("available") is not None:
        available = _positive_int(path, f"{field}.available", item["available"], allow_zero=True, maximum=MAX_AVAILABLE)
    given = [key for key in _SPEC_KEYS if item.get(key) is not None]
    for key in given:
        _number(path, f"{field}.{key}", item[key], maximum=MAX_MEMORY_GB if key == "memory_gb" else MAX_SPEC)
    if given:
        if "memory_gb" not in given:
            raise InputError(path, f"{field}.memory_gb", f"required with the other specs of {name}")
        return GPUType(name, price, available, float(item["memory_gb"]), "given")
    problem = gpu_alias_problem(name)
    if problem is not None:
        raise InputError(path, f"{field}.name", problem)
    spec = find_gpu(name, aliases=False)
    if spec is None:
        close = [g for g in gpu_names() if g.lower().startswith(name.lower())]
        hint = f" or write a catalog name ({', '.join(close)})" if close else ""
        raise InputError(path, f"{field}.name", f"{name!r} is not in the GPU catalog: give its memory_gb "
                                                f"(and price_per_gpu_hour) to define it{hint}")
    return GPUType(spec.name, price, available, spec.memory_gb, "catalog")


def load_class_plan(path: Path, data: dict) -> ClassPlanProblem:
    """A `ClassPlanProblem` from the parsed YAML mapping ``data`` of ``path`` (see the module docstring)."""
    _known(path, "", data, _KEYS)
    source = data.get("source", "")
    if not isinstance(source, str):
        raise InputError(path, "source", f"expected text, got {shown(source)}")
    gpus = [_gpu_type(path, k, item) for k, item in enumerate(_items(path, data, "gpus", "gpus", _GPU_KEYS))]
    _unique(path, "gpus", [g.name for g in gpus], "GPU name")
    gpu_index = {g.name: i for i, g in enumerate(gpus)}
    models: list[str] = []
    classes: list[RequestClass] = []
    configs: list[Configuration] = []
    pairs = 0
    for m, item in enumerate(_items(path, data, "models", "models", _MODEL_KEYS)):
        mfield = f"models[{m}]"
        models.append(_name(path, f"{mfield}.name", item.get("name")))
        first = len(classes)
        for k, cl in enumerate(_items(path, item, "classes", f"{mfield}.classes", _CLASS_KEYS)):
            cfield = f"{mfield}.classes[{k}]"
            cname = _name(path, f"{cfield}.name", cl.get("name"))
            if cl.get("rate") is None:
                raise InputError(path, f"{cfield}.rate", "required: requests/s of this class")
            rate = _number(path, f"{cfield}.rate", cl["rate"], maximum=MAX_RATE, allow_zero=True)
            classes.append(RequestClass(m, cname, rate))
            if len(classes) > MAX_CLASSES:
                raise InputError(path, cfield, f"at most {MAX_CLASSES:,} classes in all")
        own = {cl.name: i for i, cl in enumerate(classes[first:], first)}
        _unique(path, f"{mfield}.classes", [cl.name for cl in classes[first:]], "class name")
        names = []
        for c, conf in enumerate(_items(path, item, "configurations", f"{mfield}.configurations", _CONFIG_KEYS)):
            field = f"{mfield}.configurations[{c}]"
            gname = _name(path, f"{field}.gpu", conf.get("gpu"))
            if gname not in gpu_index:
                raise InputError(path, f"{field}.gpu", f"{gname!r} is not in gpus ({', '.join(gpu_index)})")
            tp = _positive_int(path, f"{field}.tensor_parallel", conf.get("tensor_parallel", 1),
                               maximum=MAX_GPUS_PER_MACHINE)
            name = name_field(conf, "name", f"{gname}-tp{tp}", path, f"{field}.name")
            names.append(name)
            table = conf.get("requests_per_s")
            if not isinstance(table, dict) or not table:
                raise InputError(path, f"{field}.requests_per_s",
                                 f"required: a mapping of class name to requests/s, got {shown(table)}")
            capacity = []
            for cname, mu in table.items():
                if not isinstance(cname, str) or cname not in own:
                    raise InputError(path, f"{field}.requests_per_s.{cname}", f"unknown class of {models[m]} "
                                     f"(classes: {', '.join(list(own)[:10])}{', …' if len(own) > 10 else ''})")
                mu = _number(path, f"{field}.requests_per_s.{cname}", mu, maximum=MAX_RATE)
                capacity.append((own[cname], mu))
            pairs += len(capacity)
            if pairs > MAX_PAIRS:
                raise InputError(path, field, f"at most {MAX_PAIRS:,} (class, configuration) capacities in all")
            configs.append(Configuration(name, m, gpu_index[gname], tp, tuple(capacity)))
            if len(configs) > MAX_CONFIGURATIONS:
                raise InputError(path, field, f"at most {MAX_CONFIGURATIONS:,} configurations in all")
        _unique(path, f"{mfield}.configurations", names, "configuration name")
        served = {k for conf in configs[len(configs) - len(names):] for k, _ in conf.capacity}
        for k in range(first, len(classes)):
            if classes[k].rate > 0 and k not in served:
                raise InputError(path, f"{mfield}.classes[{k - first}]", f"class {classes[k].name!r} "
                                 f"({classes[k].rate:g} req/s) has no configuration with a capacity for it")
    _unique(path, "models", models, "model name")
    return ClassPlanProblem(name_field(data, "name", path.stem, path), tuple(models), tuple(gpus), tuple(classes),
                            tuple(configs), source)
