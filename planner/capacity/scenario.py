"""The capacity scenario file (YAML) and its loader with one-line errors.

```yaml
name: llama2-70b-sharegpt
model: Llama-2-70B                  # catalog name (planner/catalog/models.yaml)
slos: {ttft_s: 1.6, atgt_s: 0.075}
workload: {distribution: sharegpt}  # a shipped distribution (models/workloads/) or a YAML path,
                                    # or {trace: FILE, format: azure|mooncake|...} for a real trace
rates: [2, 4, 8]                    # arrival rates (req/s), positive
gpus:
  - {type: A100-80GB-SXM, price_per_hour: 1.90, tensor_parallel: [2, 4]}
  - {type: H100-80GB-SXM, price_per_hour: 3.20, tensor_parallel: best}   # best = Eqs. 5–6 choice
placement: {strictness: 0.5, kv_headroom: 1.0}
solve: {time_limit_s: 10, exact_max_requests: 400, seed: 0}
```

A real trace contributes its (input, output) lengths only: they are summarised as a length
distribution (`derive_length_distribution`, requests longer than the model's context dropped) and
the arrival rate stays the swept variable; the trace's own timestamps are not used.

Prices: the GPU catalog deliberately has none, so ``price_per_hour`` (US$ per GPU-hour) is
required unless the catalog entry carries one.  Cost models come from ``models/aladdin/`` (or
``cost_models_dir``); a TP degree without one is reported and skipped (Eq. 5 extrapolation is
used only by ``tensor_parallel: best`` through `worker_configurations`).
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator

from planner.catalog import find_gpu, find_model, gpu_names
from planner.core.io import (
    MAX_TRACE_BYTES,
    NotBool,
    check_input_dir,
    check_input_file,
    read_yaml_mapping,
    resolve_relative,
    validate_model,
)
from planner.core.types import GPUSpec, LLMSpec
from planner.errors import InputError, PlannerError
from planner.workloads.lengths import TRACE_FORMATS, LengthDistribution, derive_length_distribution, read_trace_lengths
from planner.workloads.streams import find_distribution


#: Largest seed accepted (numpy seeds any non-negative integer; int64 keeps the results database portable).
MAX_SEED = 2**63 - 1

#: Most requests the seeded master stream of one point may hold (λ_max · H, expected): the snapshot is
#: built and best-fit runs without a time limit, so a larger stream would not honour ``time_limit_s``.
MAX_MASTER_REQUESTS = 50_000


def _finite(value: object) -> object:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and not math.isfinite(value):
        raise ValueError(f"must be finite, got {value}")
    return value


def _seed(value: object) -> object:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_SEED:
        shown = str(value).lower() if isinstance(value, bool) else value
        raise ValueError(f"must be a non-negative integer, got {shown}")
    return value


def _positive_rate(value: object) -> object:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and not value > 0:
        raise ValueError(f"arrival rates must be positive, got {value:g}")
    return value


Finite = BeforeValidator(_finite)
PositiveNumber = Annotated[float, NotBool, Finite, Field(gt=0)]
Seed = Annotated[int, BeforeValidator(_seed)]


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


class ScenarioSLOs(_Strict):
    ttft_s: PositiveNumber
    atgt_s: PositiveNumber


class ScenarioWorkload(_Strict):
    distribution: str | None = None
    trace: str | None = None
    format: str = "azure"

    @field_validator("format")
    @classmethod
    def _known_format(cls, value: str) -> str:
        if value not in TRACE_FORMATS:
            raise ValueError(f"must be one of {', '.join(TRACE_FORMATS)}")
        return value


class ScenarioGPU(_Strict):
    type: str
    price_per_hour: PositiveNumber | None = None
    tensor_parallel: list[int] | Literal["best"] = "best"

    @field_validator("tensor_parallel", mode="before")
    @classmethod
    def _degrees(cls, value: object) -> object:
        if isinstance(value, list):
            for k, degree in enumerate(value):
                if isinstance(degree, bool) or not isinstance(degree, int) or degree < 1:
                    shown = str(degree).lower() if isinstance(degree, bool) else repr(degree)
                    raise ValueError(f"[{k}] must be a positive integer TP degree, got {shown}")
        elif value != "best":
            raise ValueError(f"must be a list of TP degrees or 'best', got {value!r}")
        return value

    @field_validator("tensor_parallel")
    @classmethod
    def _not_empty(cls, value: list[int] | str) -> list[int] | str:
        if isinstance(value, list) and not value:
            raise ValueError("give at least one degree, or 'best'")
        return value


class ScenarioPlacement(_Strict):
    strictness: Annotated[float, NotBool, Finite, Field(ge=0.0, le=1.0)] = 0.5
    kv_headroom: Annotated[float, NotBool, Finite, Field(gt=0.0, le=1.0)] = 1.0


class ScenarioSolve(_Strict):
    time_limit_s: PositiveNumber = 10.0
    exact_max_requests: Annotated[int, NotBool, Field(ge=0)] = 400
    seed: Seed = 0


class ScenarioFile(_Strict):
    name: str = "capacity"
    family: Literal["capacity"] | None = None
    model: str
    slos: ScenarioSLOs
    workload: ScenarioWorkload = ScenarioWorkload(distribution="sharegpt")
    rates: list[Annotated[float, NotBool, Finite, BeforeValidator(_positive_rate)]]
    gpus: list[ScenarioGPU]
    placement: ScenarioPlacement = ScenarioPlacement()
    solve: ScenarioSolve = ScenarioSolve()
    cost_models_dir: str | None = None

    @field_validator("rates")
    @classmethod
    def _rates(cls, value: list[float]) -> list[float]:
        if not value:
            raise ValueError("the rate grid is empty; give at least one arrival rate (req/s)")
        bad = [r for r in value if not r > 0]
        if bad:
            raise ValueError(f"arrival rates must be positive, got {bad[0]!r}")
        if len(set(value)) != len(value):
            raise ValueError("arrival rates must be distinct")
        return sorted(value)

    @field_validator("gpus")
    @classmethod
    def _gpus(cls, value: list[ScenarioGPU]) -> list[ScenarioGPU]:
        if not value:
            raise ValueError("give at least one candidate GPU type")
        return value


class CandidateGPU(BaseModel):
    """A resolved GPU candidate: catalog spec with its price, and the TP degrees asked for."""

    model_config = ConfigDict(frozen=True)
    spec: GPUSpec
    degrees: tuple[int, ...] | None  # None: choose by Eqs. 5–6 ("best")


class Scenario(BaseModel):
    """A validated, resolved capacity scenario (frozen)."""

    model_config = ConfigDict(frozen=True)
    source: str
    name: str
    model: LLMSpec
    ttft_s: float
    atgt_s: float
    distribution: LengthDistribution
    workload_label: str
    rates: tuple[float, ...]
    gpus: tuple[CandidateGPU, ...]
    strictness: float
    kv_headroom: float
    time_limit_s: float
    exact_max_requests: int
    seed: int
    cost_models_dir: str | None

    def fingerprint(self) -> str:
        """Hash of everything that defines the sweep's points (the results database's identity)."""
        data = self.model_dump(mode="json", exclude={"source", "name"})
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def load_scenario(path: Path | str) -> Scenario:
    """Read and resolve a scenario; every problem is one `InputError` line (file, field, problem)."""
    path = Path(path)
    raw = read_yaml_mapping(path)
    for required in ("model", "slos"):
        if raw.get(required) in (None, "", {}):
            raise InputError(path, required, "required field is missing")
    if "rates" not in raw:
        raise InputError(path, "rates", "required field is missing")
    if "gpus" not in raw:
        raise InputError(path, "gpus", "required field is missing")
    data = validate_model(ScenarioFile, raw, path)
    model = find_model(data.model)
    if model is None:
        raise InputError(path, "model", f"unknown model {data.model!r} (see planner/catalog/models.yaml)")
    gpus = []
    for k, entry in enumerate(data.gpus):
        spec = find_gpu(entry.type)
        if spec is None:
            raise InputError(path, f"gpus[{k}].type", f"unknown GPU type {entry.type!r} (known: {', '.join(gpu_names())})")
        price = entry.price_per_hour or spec.price_per_hour
        if price is None:
            raise InputError(path, f"gpus[{k}].price_per_hour",
                             f"required: the catalog has no price for {spec.name} (US$ per GPU-hour)")
        degrees = None if entry.tensor_parallel == "best" else tuple(sorted(set(entry.tensor_parallel)))
        gpus.append(CandidateGPU(spec=spec.model_copy(update={"price_per_hour": price}), degrees=degrees))
    names = [g.spec.name for g in gpus]
    if len(set(names)) != len(names):
        raise InputError(path, "gpus", "each GPU type may appear once")
    dist, label = _workload(path, data.workload, model.max_context_tokens)
    _check_stream_size(path, raw["rates"], data.rates[-1], dist, data.slos.atgt_s, model.max_context_tokens)
    models_dir = None
    if data.cost_models_dir:
        models_dir = str(check_input_dir(resolve_relative(path, data.cost_models_dir), "a directory of cost models "
                                         "(aladdin/)", source=path, field="cost_models_dir"))
    return Scenario(
        source=str(path), name=data.name, model=model, ttft_s=data.slos.ttft_s, atgt_s=data.slos.atgt_s,
        distribution=dist, workload_label=label, rates=tuple(data.rates), gpus=tuple(gpus),
        strictness=data.placement.strictness, kv_headroom=data.placement.kv_headroom,
        time_limit_s=data.solve.time_limit_s, exact_max_requests=data.solve.exact_max_requests,
        seed=data.solve.seed, cost_models_dir=models_dir,
    )


def _check_stream_size(path: Path, raw_rates: list, rate_max: float, dist: LengthDistribution,
                       atgt_s: float, cap: int) -> None:
    """Every point draws λ_max · H master requests: refuse a grid whose stream would not fit a time limit."""
    from planner.capacity.points import master_horizon_s  # noqa: PLC0415 (points imports the solver stack)

    horizon = master_horizon_s(dist, atgt_s, cap)
    expected = rate_max * horizon
    if expected <= MAX_MASTER_REQUESTS:
        return
    index = next((k for k, r in enumerate(raw_rates) if r == rate_max), None)
    field = "rates" if index is None else f"rates[{index}]"
    raise InputError(path, field, f"rate {rate_max:g} req/s over the {horizon:g} s snapshot horizon draws about "
                                  f"{expected:.3g} requests per point; at most {MAX_MASTER_REQUESTS} are supported "
                                  f"(rate ≤ {MAX_MASTER_REQUESTS / horizon:.0f} req/s for this workload and ATGT)")


def _workload(path: Path, spec: ScenarioWorkload, cap: int) -> tuple[LengthDistribution, str]:
    if (spec.distribution is None) == (spec.trace is None):
        raise InputError(path, "workload", "give exactly one of distribution (a named distribution) or trace (a file)")
    if spec.distribution is not None:
        name = spec.distribution
        target = resolve_relative(path, name) if name.endswith((".yaml", ".yml")) else name
        try:
            return find_distribution(str(target)), f"distribution {name}"
        except PlannerError as exc:
            raise InputError(path, "workload.distribution", str(exc)) from None
    trace = resolve_relative(path, spec.trace)  # type: ignore[arg-type]
    check_input_file(trace, "a trace file", MAX_TRACE_BYTES, source=path, field="workload.trace")
    try:
        inputs, outputs, _ = read_trace_lengths(trace, spec.format)
    except PlannerError as exc:
        raise InputError(path, "workload.trace", str(exc)) from None
    keep = (inputs >= 1) & (outputs >= 1) & (inputs + outputs <= cap)
    if keep.sum() < 50:
        raise InputError(path, "workload.trace", f"{trace}: only {int(keep.sum())} requests fit the model's context; need ≥ 50")
    dist = derive_length_distribution(inputs[keep], outputs[keep], name=trace.stem, source=str(trace),
                                      max_total_tokens=cap)
    return dist, f"trace {trace.name} ({int(keep.sum())} requests)"
