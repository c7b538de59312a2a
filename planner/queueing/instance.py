"""Queueing instance files (YAML) → `QueueingProblem`, with one-line errors.

```yaml
family: queueing
name: two-models
objective: penalty            # penalty | total_lateness | max_lateness | late_groups
deadline: start               # start | completion
slo_classes: {interactive: 20, batch-1: 60}         # TTFT SLO per class (s)
estimator: {epsilon: 1.1, quantile: null, conservative_below: 0, delta: 4}
instance_types:
  - {name: a100x4, gpu: A100-80GB-SXM, tensor_parallel: 4, swap_time_s: 12, count: 2,
     extra_available: 2, loaded_models: [Llama-2-7B, null]}
groups:                       # either groups (already formed) ...
  - {name: chat, model: Llama-2-7B, slo_class: interactive, num_requests: 8,
     mean_input_tokens: 300, mean_output_tokens: 200, std_output_tokens: 50, max_output_tokens: 512}
requests:                     # ... or requests, grouped by §4.2 (model, class, length bucket; δ split)
  - {model: Llama-2-7B, slo_class: interactive, input_tokens: 300, output_tokens: 200, arrival_s: 0}
now_s: 0                      # the SLO slack of a request is slo − (now − arrival)
```
Times are on the trace clock, which starts at 0 (`planner.queueing.trigger`): ``now_s``, the moment
the plan is made, is at least 0 (a negative ``now_s`` is refused: a plan cannot be made before the
clock starts); an ``arrival_s`` may be negative (a request queued before the trace began) or later
than ``now_s`` (a request planned ahead of its arrival, as the trace replay does).
Θ, P and d come from the shipped Aladdin cost models (`planner.queueing.estimator`).

Every number must be finite and not a boolean; token counts are at most 1,000,000 per request
(`MAX_REQUEST_TOKENS`), ``max_output_tokens`` at least ``mean_output_tokens``, ``swap_time_s`` at most
one day, at most 4,096 instances over all types, existing and scale-up candidates (`MAX_INSTANCES`),
at most 10,000 groups (`MAX_GROUPS`) and 4,194,304 instances × groups (`MAX_CELLS`),
names (of the instance, instance types, groups and SLO classes) text, names of instance types and
groups unique, and every model in ``loaded_models`` one that fits on its instance type.  An instance
whose estimated serving time exceeds `MAX_HORIZON_S` is refused (the MILP's constants would be out
of the solver's range), and so is an SLO slack (``slo − (now_s − arrival_s)``) beyond ±`MAX_HORIZON_S`
(a deadline so far in the past or future puts constants of that size into every objective).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import numpy as np
from pydantic import BeforeValidator, Field, ValidationInfo, field_validator

from planner.catalog import canonical_gpu_name, canonical_model_name, gpu_alias_problem, model_names
from planner.core.io import (
    MAX_REQUEST_TOKENS,
    NotBool,
    StrictSpec,
    check_family,
    check_unique,
    read_yaml_mapping,
    validate_model,
)
from planner.errors import InputError, PlannerError
from planner.queueing.estimator import EstimatorSettings, group_tail_s, group_work_s, instance_fits, rates_for
from planner.queueing.groups import QueuedRequest, form_groups
from planner.queueing.problem import OBJECTIVES, InstanceType, QueueingProblem, RequestGroup, VirtualQueue

#: Longest model load (swap) time accepted, seconds (one day).
MAX_SWAP_S = 86_400.0
#: Largest estimated serving time of an instance (Σ work + swaps + tail + slack), seconds (~31,700 years).
MAX_HORIZON_S = 1e12
#: Most serving instances of one instance file, existing (``count``) and scale-up candidates
#: (``extra_available``) over all types together: one virtual queue each, and every method's work and
#: memory grow with queues × groups (the baselines, the descent's per-queue profiles, the MILPs).
MAX_INSTANCES = 4096
#: Most request groups (given, or formed from ``requests``), and most (instance, group) cells
#: (instances counted with their scale-up candidates): the baselines, validations and descents grow with
#: both, and past these sizes a 5 s solve does not end near its time limit (measured: 10,000 groups ×
#: 400 queues 2.4 s, 4,000 × 1,024 2.3 s; 10,000 × 4,096 took 19 s and 2 GB).
MAX_GROUPS = 10_000
MAX_CELLS = 1 << 22

PosInt = Annotated[int, NotBool, Field(gt=0)]
NonNegInt = Annotated[int, NotBool, Field(ge=0)]
PosFloat = Annotated[float, NotBool, Field(gt=0)]
Seconds = Annotated[float, NotBool]
TokenCount = Annotated[float, NotBool, Field(gt=0, le=MAX_REQUEST_TOKENS)]
TokenSpread = Annotated[float, NotBool, Field(ge=0, le=MAX_REQUEST_TOKENS)]
RequestTokens = Annotated[int, NotBool, Field(gt=0, le=MAX_REQUEST_TOKENS)]


def _text(value: object) -> object:
    """A name must be YAML text: ``[1, 2]``, ``null`` or ``7`` is refused, not turned into "[1, 2]" or "None"."""
    if not isinstance(value, str):
        raise ValueError(f"expected a name (text), got {_shown(value)}")  # noqa: TRY004 (pydantic needs ValueError)
    return value


def _shown(value: object) -> str:
    return "null" if value is None else str(value).lower() if isinstance(value, bool) else repr(value)


#: A name field (instance types, groups, the instance): text only.
Name = Annotated[str, BeforeValidator(_text)]


class EstimatorSpec(StrictSpec):
    epsilon: Annotated[float, NotBool, Field(ge=1.0)] = 1.1
    quantile: Annotated[float, NotBool, Field(gt=0.0, lt=1.0)] | None = None
    conservative_below: NonNegInt = 0
    delta: PosFloat = 4.0
    max_batch_size: PosInt = 256
    memory_utilization: Annotated[float, NotBool, Field(gt=0.0, le=1.0)] = 0.9


class InstanceTypeSpec(StrictSpec):
    name: Name = Field(min_length=1)
    gpu: str
    tensor_parallel: PosInt = 1
    swap_time_s: Annotated[float, NotBool, Field(ge=0, le=MAX_SWAP_S)]
    count: NonNegInt
    extra_available: NonNegInt = 0
    cost_per_instance: PosFloat = 1.0
    loaded_models: list[str | None] = []


class GroupSpec(StrictSpec):
    name: Name = Field(min_length=1)
    model: str
    slo_class: str
    num_requests: PosInt
    mean_input_tokens: TokenCount
    mean_output_tokens: TokenCount
    std_output_tokens: TokenSpread = 0.0
    max_output_tokens: TokenCount | None = None
    arrival_s: Seconds = 0.0

    @field_validator("max_output_tokens")
    @classmethod
    def _max_at_least_mean(cls, value: float | None, info: ValidationInfo) -> float | None:
        mean = info.data.get("mean_output_tokens")
        if value is not None and mean is not None and value < mean:
            raise ValueError(f"must be at least mean_output_tokens ({mean:g}), got {value:g}")
        return value


class RequestSpec(StrictSpec):
    model: str
    slo_class: str
    input_tokens: RequestTokens
    output_tokens: RequestTokens
    arrival_s: Seconds = 0.0
    max_output_tokens: RequestTokens | None = None

    @field_validator("max_output_tokens")
    @classmethod
    def _max_at_least_output(cls, value: int | None, info: ValidationInfo) -> int | None:
        out = info.data.get("output_tokens")
        if value is not None and out is not None and value < out:
            raise ValueError(f"must be at least output_tokens ({out}), got {value}")
        return value


class QueueingSpec(StrictSpec):
    family: str = "queueing"
    name: Name = ""
    description: str = ""
    objective: str = "penalty"
    deadline: str = "start"
    now_s: Annotated[float, NotBool, Field(ge=0.0)] = 0.0  # the trace clock starts at 0 (module docstring)
    slo_classes: dict[str, Seconds]
    estimator: EstimatorSpec = EstimatorSpec()
    instance_types: list[InstanceTypeSpec]
    groups: list[GroupSpec] = []
    requests: list[RequestSpec] = []

    @field_validator("slo_classes", mode="before")
    @classmethod
    def _class_names(cls, classes: object) -> object:
        if isinstance(classes, dict):
            for key in classes:
                if not isinstance(key, str):
                    raise ValueError(f"key {_shown(key)}: expected a class name (text)")  # noqa: TRY004 (pydantic)
        return classes

    @field_validator("instance_types")
    @classmethod
    def _unique_types(cls, types: list[InstanceTypeSpec]) -> list[InstanceTypeSpec]:
        check_unique([t.name for t in types], "instance type name", "instance_types")
        return types

    @field_validator("groups")
    @classmethod
    def _unique_groups(cls, groups: list[GroupSpec]) -> list[GroupSpec]:
        check_unique([g.name for g in groups], "group name", "groups")
        return groups


def load_queueing_instance(path: Path | str) -> QueueingProblem:
    path = Path(path)
    data = read_yaml_mapping(path)
    check_family(data, path, "queueing")
    spec = validate_model(QueueingSpec, data, path)
    return problem_from_spec(spec, path)


def _check_model(path: Path, field: str, name: str) -> str:
    canonical = canonical_model_name(name)
    if canonical is None:
        raise InputError(path, field, f"unknown model {name!r} (catalog: {', '.join(model_names())})")
    return canonical


def problem_from_spec(spec: QueueingSpec, path: Path | str = "<instance>") -> QueueingProblem:
    path = Path(path)
    if spec.family != "queueing":
        raise InputError(path, "family", f"this is a {spec.family!r} instance, not a queueing one")
    if spec.objective not in OBJECTIVES:
        raise InputError(path, "objective", f"unknown objective {spec.objective!r} (expected one of: {', '.join(OBJECTIVES)})")
    if spec.deadline not in ("start", "completion"):
        raise InputError(path, "deadline", f"expected start or completion, got {spec.deadline!r}")
    for cls, slo in spec.slo_classes.items():
        if not slo > 0:
            raise InputError(path, f"slo_classes.{cls}", f"SLO must be positive, got {slo}")
    if not spec.instance_types or sum(t.count for t in spec.instance_types) == 0:
        raise InputError(path, "instance_types", "zero serving instances (give at least one type with count ≥ 1)")
    if bool(spec.groups) == bool(spec.requests):
        raise InputError(path, "groups", "give either groups or requests (exactly one of them)")
    settings = EstimatorSettings(spec.estimator.epsilon, spec.estimator.quantile, spec.estimator.conservative_below,
                                 spec.estimator.max_batch_size, spec.estimator.memory_utilization)
    _check_instance_total(path, spec)
    if spec.groups:
        _check_group_count(path, spec, len(spec.groups))  # before any per-group work
    types, queues = [], []
    for k, t in enumerate(spec.instance_types):
        gpu = canonical_gpu_name(t.gpu)
        if gpu is None:
            raise InputError(path, f"instance_types[{k}].gpu", f"unknown GPU type {t.gpu!r}")
        if gpu.lower() != t.gpu.lower():  # an alias names a family of SKUs: refused, never rewritten
            raise InputError(path, f"instance_types[{k}].gpu", gpu_alias_problem(t.gpu))
        if len(t.loaded_models) > t.count:
            raise InputError(path, f"instance_types[{k}].loaded_models", f"{len(t.loaded_models)} entries for {t.count} instances")
        loaded = [None if m is None else _check_model(path, f"instance_types[{k}].loaded_models[{c}]", m)
                  for c, m in enumerate(t.loaded_models)]
        for c, m in enumerate(loaded):
            if m is not None and not instance_fits(m, gpu, t.tensor_parallel, settings.memory_utilization):
                raise InputError(path, f"instance_types[{k}].loaded_models[{c}]",
                                 f"{m} does not fit on {t.name} ({t.tensor_parallel} × {gpu}: weights exceed "
                                 f"{settings.memory_utilization:g} of its memory), so it cannot be loaded there")
        loaded += [None] * (t.count - len(loaded))
        types.append(InstanceType(t.name, gpu, t.tensor_parallel, t.swap_time_s, t.count, t.extra_available, t.cost_per_instance))
        queues += [VirtualQueue(f"{t.name}-{c + 1}", k, loaded[c]) for c in range(t.count)]
    groups = _groups(spec, path, settings, types)
    if not spec.groups:
        _check_group_count(path, spec, len(groups))  # the groups formed from the requests
    work = np.full((len(types), len(groups)), np.inf)
    tail = np.full((len(types), len(groups)), np.inf)
    for t, typ in enumerate(types):
        for i, g in enumerate(groups):
            try:
                rates = rates_for(g.model, typ.gpu, typ.tensor_parallel, g.mean_input_tokens, g.mean_output_tokens, settings)
            except PlannerError as exc:
                raise InputError(path, f"instance_types[{t}]", str(exc)) from None
            if rates is None:
                continue
            work[t, i] = group_work_s(g.num_requests, g.mean_output_tokens, g.std_output_tokens, g.max_output_tokens,
                                      rates.throughput_tokens_per_s, settings)
            tail[t, i] = group_tail_s(rates, g.max_output_tokens, settings)
    existing = [q.type_index for q in queues]
    for i, g in enumerate(groups):
        if not np.isfinite(work[existing, i]).any():
            raise InputError(path, f"group {g.name}", f"model {g.model} fits on no instance (weights exceed every instance's memory)")
    _check_horizon(path, spec, groups, types, work, tail)
    return QueueingProblem(spec.name or path.stem, tuple(groups), tuple(types), tuple(queues), work, tail,
                           objective=spec.objective, deadline=spec.deadline, description=spec.description)  # type: ignore[arg-type]


def _check_group_count(path: Path, spec: QueueingSpec, num_groups: int) -> None:
    """At most `MAX_GROUPS` groups and `MAX_CELLS` (instance, group) cells (module docstring)."""
    field = "groups" if spec.groups else "requests"
    formed = "" if spec.groups else f" (formed from {len(spec.requests)} requests)"
    if num_groups > MAX_GROUPS:
        raise InputError(path, field, f"{num_groups} groups{formed}; the planner handles at most {MAX_GROUPS}: "
                                      "split the queue into several planning problems")
    instances = sum(t.count + t.extra_available for t in spec.instance_types)
    if instances * num_groups > MAX_CELLS:
        raise InputError(path, field, f"{num_groups} groups{formed} on {instances} instances (count + extra_available) "
                                      f"is {instances * num_groups} instance × group pairs; the planner handles at "
                                      f"most {MAX_CELLS}: fewer groups or instances per planning problem")


def _check_instance_total(path: Path, spec: QueueingSpec) -> None:
    """At most `MAX_INSTANCES` instances (count + extra_available over all types); the line names the
    field where the running total first passes the cap."""
    declared = sum(t.count + t.extra_available for t in spec.instance_types)
    if declared <= MAX_INSTANCES:
        return
    total = 0
    for k, t in enumerate(spec.instance_types):
        for field, n in (("count", t.count), ("extra_available", t.extra_available)):
            total += n
            if total > MAX_INSTANCES:
                raise InputError(path, f"instance_types[{k}].{field}",
                                 f"at most {MAX_INSTANCES} instances in total (count + extra_available over all "
                                 f"instance types); this file declares {declared}")


def _check_horizon(path: Path, spec: QueueingSpec, groups: list[RequestGroup], types: list[InstanceType],
                   work: np.ndarray, tail: np.ndarray) -> None:
    """Refuse sizes whose serving time leaves the solver's numeric range (`MAX_HORIZON_S`), naming the
    group with the most work, or with the largest SLO slack when that is what is out of range."""
    finite_work = np.where(np.isfinite(work), work, 0.0)
    finite_tail = np.where(np.isfinite(tail), tail, 0.0)
    slacks = np.array([g.slo_s for g in groups])
    for t, typ in enumerate(types):
        total = (finite_work[t].sum() + typ.swap_time_s * (len(groups) + 1) + finite_tail[t].max()
                 + max(float(slacks.max()), 0.0))
        if total <= MAX_HORIZON_S:
            continue
        by_slack = slacks.max() > finite_work[t].sum()
        i = int(np.argmax(slacks if by_slack else finite_work[t]))
        field = f"groups[{i}]" if spec.groups else "requests"
        cause = "its SLO slack (slo_classes, now_s, arrival_s)" if by_slack else "num_requests and the token counts"
        raise InputError(path, field, f"estimated serving time {total:.3g} s on {typ.name} is beyond what the planner "
                                      f"handles ({MAX_HORIZON_S:.0e} s); check {cause}")


def _slo(path: Path, spec: QueueingSpec, field: str, cls: str) -> float:
    if cls not in spec.slo_classes:
        raise InputError(path, field, f"unknown SLO class {cls!r} (declared: {', '.join(spec.slo_classes)})")
    return spec.slo_classes[cls]


def _check_slack(path: Path, spec: QueueingSpec, where: str, cls: str, slo: float, arrival: float) -> float:
    """The SLO slack ``slo − (now_s − arrival_s)`` of ``where`` (a group or request); one line naming the
    largest of the three terms when its magnitude exceeds `MAX_HORIZON_S` (either sign: a deadline long
    past puts lateness of that size into every objective and solver constant)."""
    slack = slo - (spec.now_s - arrival)
    if abs(slack) <= MAX_HORIZON_S:
        return slack
    terms = [("now_s", abs(spec.now_s)), (f"{where}.arrival_s", abs(arrival)), (f"slo_classes.{cls}", abs(slo))]
    field = max(terms, key=lambda term: term[1])[0]
    raise InputError(path, field, f"{where} SLO slack {slack:.3g} s (slo − (now_s − arrival_s)) is beyond what "
                                  f"the planner handles (±{MAX_HORIZON_S:.0e} s)")


def _groups(spec: QueueingSpec, path: Path, settings: EstimatorSettings, types: list[InstanceType]) -> list[RequestGroup]:
    if spec.groups:
        out = []
        for k, g in enumerate(spec.groups):
            model = _check_model(path, f"groups[{k}].model", g.model)
            slo = _slo(path, spec, f"groups[{k}].slo_class", g.slo_class)
            slack = _check_slack(path, spec, f"groups[{k}]", g.slo_class, slo, g.arrival_s)
            out.append(RequestGroup(g.name, model, g.slo_class, slack, g.num_requests, g.mean_input_tokens,
                                    g.mean_output_tokens, g.std_output_tokens,
                                    g.max_output_tokens or 2 * g.mean_output_tokens, g.arrival_s))
        return out
    requests = []
    for k, r in enumerate(spec.requests):
        model = _check_model(path, f"requests[{k}].model", r.model)
        slo = _slo(path, spec, f"requests[{k}].slo_class", r.slo_class)
        slack = _check_slack(path, spec, f"requests[{k}]", r.slo_class, slo, r.arrival_s)
        requests.append(QueuedRequest(model, r.slo_class, slack, r.input_tokens, r.output_tokens, r.arrival_s, r.max_output_tokens))
    avg_batch: dict[str, float] = {}
    for model in {r.model for r in requests}:
        mine = [r for r in requests if r.model == model]
        mi = float(np.mean([r.input_tokens for r in mine]))
        mo = float(np.mean([r.output_tokens for r in mine]))
        batches = []
        for t in types:
            try:
                rates = rates_for(model, t.gpu, t.tensor_parallel, mi, mo, settings)
            except PlannerError:
                rates = None
            if rates is not None:
                batches.append(rates.batch_size)
        avg_batch[model] = float(np.mean(batches)) if batches else 1.0
    return list(form_groups(requests, avg_batch, spec.estimator.delta))
