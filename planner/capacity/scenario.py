"""The capacity scenario (a YAML file or the `planner capacity` query flags) and its loader with one-line errors.

```yaml
name: llama2-70b-sharegpt
model: Llama-2-70B                  # catalog name (planner/catalog/models.yaml), not an alias
slos: {ttft_s: 1.6, tpot_s: 0.075}  # tpot_s or atgt_s: the same quantity (see below)
criterion: {percentile: 99}         # or {attainment: 0.99}; default {percentile: 99}
workload: {distribution: sharegpt}  # a shipped distribution (models/workloads/) or a YAML path,
                                    # or {isl: 2000, osl: 400} (every request the same lengths),
                                    # or {trace: FILE, format: azure|mooncake|sharegpt, start_s: 0, duration_s: 600}
rates: [2, 4, 8]                    # arrival rates (req/s), positive
gpus:
  - {type: A100-80GB-SXM, price_per_hour: 1.90, tensor_parallel: [2, 4]}
  - {type: H100-80GB-SXM, price_per_hour: 3.20, tensor_parallel: best}   # best = Eqs. 5–6 choice
  - {type: H100-80GB-SXM, price_per_hour: 3.20, tensor_parallel: all}    # every degree with a cost model
  # optional per GPU type: available: 16  (GPUs the mixed fleet may use; the mixed answer adds other types)
placement: {strictness: 0.5, kv_headroom: 1.0}
simulation: {router: jsq, scheduler: vllm, duration_s: null, warmup_s: null, snapshot: true}
solve: {time_limit_s: 10, exact_max_requests: 400, seed: 0, solver: highs}   # solver: highs, cbc or gurobi
classes: {input: [1024], output: [256]}   # optional: size classes for the mixed fleet (see below)
```

The same scenario without a file: ``planner capacity --model Llama-2-70B --gpu H100-80GB-SXM --rate 10
--ttft 1 --tpot 0.05 --price H100-80GB-SXM=3`` (`scenario_from_flags`).  The flags are turned into the
mapping above and validated by the same code (`scenario_from_mapping`); an error names the flag
instead of the YAML field.  Without ``--tp`` every TP degree with a cost model is tried
(``tensor_parallel: all``).

SLOs.  ``ttft_s``: time to first token (s).  ``tpot_s`` (time per output token) and ``atgt_s``
(average time between tokens, Aladdin's name) are one quantity: the mean gap between a request's
output tokens, (e2e − TTFT) / (output tokens − 1); either key may be given, both only when equal.

Criterion.  ``percentile: P`` (0 < P < 100, default 99): the fleet must keep the P-th percentile of
TTFT and of TPOT over the requests within the SLOs; ``attainment: A`` (0 < A ≤ 1): at least a
fraction A of the requests must meet both SLOs.  Stored on the `Scenario` (``percentile`` /
``attainment``, exactly one set) for the fleet simulation that checks a fleet size.

Names.  GPU and model names are catalog names (any letter case): an alias is refused with a
"did you mean" line listing every catalog entry it could mean, never rewritten (``A100-80GB`` is not
silently ``A100-80GB-SXM``; it could as well be ``A100-80GB-PCIe``).

GPUs outside the catalog.  ``type`` may instead be a mapping of the GPU's specs (`GPUSpec`), in a
single- or a multi-model file:

```yaml
gpus:
  - type: {name: L40S-custom, memory_gb: 48, memory_bandwidth_gb_s: 864, fp16_tflops: 362}
    price_per_hour: 1.90          # required: a GPU defined by its specs has no catalog price
    tensor_parallel: [1, 2]
```

``name`` (letters, digits and ``. _ + -``, starting with a letter or digit, at most 64 characters) and
``memory_gb`` (GB per GPU, 0 < m ≤ 100,000) are required; ``memory_bandwidth_gb_s`` and
``fp16_tflops`` are optional and positive (the capacity sweep reads the memory only: the time of a
batch comes from the cost model).  The GPU keeps its name exactly, and its Aladdin cost models are
looked up by that name in ``cost_models_dir`` (``aladdin/<model>__<gpu>__tp<g>.yaml``, names in
`planner.costmodels.files.slug` form), the files ``planner fit PROFILE --gpu NAME --out-dir DIR``
writes.  A name that is a catalog name or alias, or one that would share a catalog GPU's cost-model
file name, is refused (write the catalog name as text, or choose another name): a catalog entry is
never shadowed, redefined or rewritten.

Workloads.  A real trace contributes its (input, output) lengths: they are summarised as a length
distribution (`derive_length_distribution`, requests longer than the model's context dropped) and
the arrival rate stays the swept variable.  ``start_s`` / ``duration_s`` keep the requests arriving
in [start_s, start_s + duration_s) seconds after the trace's first request (formats with
timestamps: azure, mooncake); the window is kept on the `Scenario` (``trace``) for trace replay.
``isl``/``osl`` give the degenerate distribution where every request has exactly those lengths
(``isl + osl`` must fit the model's context).

Simulation (`planner.capacity.points`).  A fleet size is checked by simulating it: ``router`` (jsq,
round_robin, least_kv, aladdin) in front of workers running the ``scheduler`` preset of the batching
family (default ``vllm``: whole prefill batches and decode iterations, the two batch kinds the
Aladdin cost model was fitted on; a hybrid Sarathi batch would pay both fixed costs c1 + c2).  The
simulated stream covers ``duration_s`` seconds of arrivals (default: long enough for
`MIN_MEASURED_REQUESTS` measured requests at the lowest rate, at least 300 s); requests arriving in
the first ``warmup_s`` (default 10 % of the window) are simulated but not measured.  ``snapshot``
also solves Aladdin's steady-state snapshot placement, shown beside the answer.

Size classes (optional, ``classes:``; flag ``--bucket input=1024 --bucket output=256``).  ``input`` and
``output`` are increasing bucket edges in tokens: edges e_1 < … < e_m split a length L into the buckets
L ≤ e_1, e_1 < L ≤ e_2, …, L > e_m; a request's class is its (input bucket, output bucket) pair, so
``{input: [1024], output: [256]}`` gives 2 × 2 classes (an axis without edges is one bucket).  Classes
with no request in a rate's stream are dropped.  With classes, `planner.capacity.classes` measures
each (class, configuration) capacity by simulation, plans the mixed fleet over the classes with the
request-class MILP and checks it with class-aware routing, per rate, beside the one-class mixed
fleet; the per-configuration answers do not change.  The cost is one worker search per (rate,
class, configuration): keep the classes few.

Several models (``models:`` instead of ``model:``), sharing one GPU inventory:

```yaml
name: two-models
models:                               # each entry: model, slos, workload, rates[, criterion]
  - {model: Llama-2-70B, slos: {ttft_s: 1.6, tpot_s: 0.075}, workload: {distribution: sharegpt}, rates: [2, 4]}
  - {model: Llama-2-7B, slos: {ttft_s: 0.5, tpot_s: 0.03}, rates: [10, 20], criterion: {attainment: 0.99}}
gpus:                                 # shared: types, prices, TP degrees (per model: best / all resolve per model)
  - {type: H100-80GB-SXM, price_per_hour: 3.00, tensor_parallel: [1, 2, 4], available: 8}
  - {type: A100-80GB-SXM, price_per_hour: 1.80, tensor_parallel: [1, 2, 4]}
simulation: {duration_s: 600}         # placement, simulation, solve, cost_models_dir: shared as well
```

Every model has the same number of rates, strictly increasing; rate index i of every model forms
joint point i (model A at its i-th rate while model B runs at its i-th rate).  Each model is the
`Scenario` a single-model file with its entry and the shared fields would give (`MultiScenario`), so
it is swept exactly as one (same points, same fingerprint).  ``slos``, ``criterion``, ``workload``,
``rates`` and ``model`` at the top level, ``model:`` together with ``models:``, a model given twice,
rates of different lengths or not increasing, unknown fields of an entry, and ``classes:`` are
refused with one line naming the field (``models[1].rates``); an error inside a model's entry names
``models[i].<field>``, one in a shared field names that field and the model it arose for.

Prices: the GPU catalog deliberately has none, so ``price_per_hour`` (US$ per GPU-hour) is
required unless the catalog entry carries one (the report ranks configurations by $/h).  Cost
models come from ``models/aladdin/`` (or ``cost_models_dir``): a model, or a GPU type, without any
cost model file for the degrees asked for is refused at load time; a single TP degree without one
is reported and skipped by the sweep.  `Scenario.cost_model_source` names each (GPU, TP)'s file,
the kind of its source (measured end-to-end, kernel composition, derived, published) and its fit's
held-out error.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator

from planner.catalog import find_gpu, find_model, gpu_names
from planner.core.io import (
    MAX_TRACE_BYTES,
    NotBool,
    StrictSpec as _Strict,
    check_input_dir,
    check_input_file,
    read_yaml_mapping,
    resolve_relative,
    validate_model,
)
from planner.core.types import GPUSpec, LLMSpec
from planner.errors import InputError, PlannerError
from planner.workloads.lengths import (
    TRACE_FORMATS,
    LengthBin,
    LengthDistribution,
    derive_length_distribution,
    read_trace_lengths,
)
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


class ScenarioSLOs(_Strict):
    ttft_s: PositiveNumber
    atgt_s: PositiveNumber | None = None  # = tpot_s: the mean gap between a request's output tokens (s)
    tpot_s: PositiveNumber | None = None


def _open_percentile(value: float) -> float:
    if not 0 < value < 100:
        raise ValueError(f"must be strictly between 0 and 100, got {value:g}")
    return value


def _attainment(value: float) -> float:
    if not 0 < value <= 1:
        raise ValueError(f"must be in (0, 1] (a fraction of requests), got {value:g}")
    return value


class ScenarioCriterion(_Strict):
    percentile: Annotated[float, NotBool, Finite] | None = None
    attainment: Annotated[float, NotBool, Finite] | None = None

    @field_validator("percentile")
    @classmethod
    def _percentile(cls, value: float | None) -> float | None:
        return None if value is None else _open_percentile(value)

    @field_validator("attainment")
    @classmethod
    def _fraction(cls, value: float | None) -> float | None:
        return None if value is None else _attainment(value)


class ScenarioWorkload(_Strict):
    distribution: str | None = None
    trace: str | None = None
    format: str = "azure"
    start_s: Annotated[float, NotBool, Finite, Field(ge=0)] | None = None
    duration_s: PositiveNumber | None = None
    isl: Annotated[int, NotBool, Field(ge=1)] | None = None
    osl: Annotated[int, NotBool, Field(ge=1)] | None = None

    @field_validator("format")
    @classmethod
    def _known_format(cls, value: str) -> str:
        if value not in TRACE_FORMATS:
            raise ValueError(f"must be one of {', '.join(TRACE_FORMATS)}")
        return value


#: Largest ``memory_gb`` and ``memory_bandwidth_gb_s`` / ``fp16_tflops`` of a GPU defined by its specs.
MAX_GPU_MEMORY_GB = 1e5
MAX_GPU_SPEC = 1e9
#: The name of a GPU defined by its specs (module docstring, GPUs outside the catalog).
CUSTOM_GPU_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}")


class ScenarioGPUSpec(_Strict):
    """A GPU outside the catalog, given by its `GPUSpec` fields (its price is the entry's ``price_per_hour``)."""

    name: str
    memory_gb: Annotated[float, NotBool, Finite, Field(gt=0, le=MAX_GPU_MEMORY_GB)]
    memory_bandwidth_gb_s: Annotated[float, NotBool, Finite, Field(gt=0, le=MAX_GPU_SPEC)] | None = None
    fp16_tflops: Annotated[float, NotBool, Finite, Field(gt=0, le=MAX_GPU_SPEC)] | None = None

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not CUSTOM_GPU_NAME.fullmatch(value):
            raise ValueError(f"{value!r} is not a usable GPU name: letters, digits and . _ + - (starting with a "
                             "letter or digit), at most 64 characters")
        return value


def _gpu_type(value: object) -> object:
    if isinstance(value, str) and value.strip():
        return value
    if isinstance(value, dict):
        return value
    raise ValueError(f"must be a catalog GPU name or a mapping of its specs {{name, memory_gb[, "
                     f"memory_bandwidth_gb_s, fp16_tflops]}}, got {value!r}")


class ScenarioGPU(_Strict):
    type: Annotated[str | dict, BeforeValidator(_gpu_type)]  # a catalog name, or a `ScenarioGPUSpec` mapping
    price_per_hour: PositiveNumber | None = None
    available: Annotated[int, NotBool, Field(ge=1)] | None = None  # GPUs of this type the mixed fleet may use
    tensor_parallel: list[int] | Literal["best", "all"] = "best"

    @field_validator("tensor_parallel", mode="before")
    @classmethod
    def _degrees(cls, value: object) -> object:
        if isinstance(value, list):
            for k, degree in enumerate(value):
                if isinstance(degree, bool) or not isinstance(degree, int) or degree < 1:
                    shown = str(degree).lower() if isinstance(degree, bool) else repr(degree)
                    raise ValueError(f"[{k}] must be a positive integer TP degree, got {shown}")
        elif value not in ("best", "all"):
            raise ValueError(f"must be a list of TP degrees, 'best' or 'all', got {value!r}")
        return value

    @field_validator("tensor_parallel")
    @classmethod
    def _not_empty(cls, value: list[int] | str) -> list[int] | str:
        if isinstance(value, list) and not value:
            raise ValueError("give at least one degree, 'best' or 'all'")
        return value


class ScenarioPlacement(_Strict):
    strictness: Annotated[float, NotBool, Finite, Field(ge=0.0, le=1.0)] = 0.5
    kv_headroom: Annotated[float, NotBool, Finite, Field(gt=0.0, le=1.0)] = 1.0


class ScenarioSimulation(_Strict):
    """The fleet simulation that checks a fleet size (`planner.capacity.points`).  The choices are
    `planner.fleet.simulate.ROUTERS` and the batching presets without eviction-free variants (tested
    to agree; spelled out here so that reading a scenario does not load the compiled simulator)."""

    router: Literal["jsq", "round_robin", "least_kv", "aladdin"] = "jsq"
    # vLLM's default engine runs whole prefill batches and decode iterations, the two batch kinds the
    # Aladdin cost model (Eqs. 2-3) was fitted on; a hybrid (Sarathi) batch would pay both fixed costs.
    scheduler: Literal["vllm", "sarathi", "sarathi-pc", "sarathi-nocp", "vllm-hy", "sarathi-nohy"] = "vllm"
    duration_s: PositiveNumber | None = None  # arrival window; default: ≥ 2,000 measured requests at the lowest rate
    warmup_s: Annotated[float, NotBool, Finite, Field(ge=0)] | None = None  # default: 10 % of the window
    snapshot: bool = True  # also solve Aladdin's steady-state snapshot placement (shown beside the answer)


class ScenarioSolve(_Strict):
    time_limit_s: PositiveNumber = 10.0
    exact_max_requests: Annotated[int, NotBool, Field(ge=0)] = 400
    seed: Seed = 0
    solver: Literal["highs", "cbc", "gurobi"] = "highs"  # the MILPs' solver (`planner.solver.SOLVERS`)


#: Most size classes a scenario may ask for (input buckets × output buckets).
MAX_CLASSES = 16


def _edges(value: object) -> object:
    if value is None:
        return value
    if not isinstance(value, list) or not value:
        raise ValueError("must be a non-empty list of bucket edges in tokens, e.g. [512, 2048]")
    for k, edge in enumerate(value):
        if isinstance(edge, bool) or not isinstance(edge, int) or edge < 1:
            shown = str(edge).lower() if isinstance(edge, bool) else repr(edge)
            raise ValueError(f"[{k}] must be a positive whole number of tokens, got {shown}")
    if any(b <= a for a, b in zip(value, value[1:])):
        raise ValueError(f"edges must be strictly increasing, got {value}")
    return value


class ScenarioClasses(_Strict):
    """Size classes of the mixed fleet (module docstring, Size classes)."""

    input: Annotated[list[int] | None, BeforeValidator(_edges)] = None
    output: Annotated[list[int] | None, BeforeValidator(_edges)] = None


class ScenarioFile(_Strict):
    name: str = "capacity"
    family: Literal["capacity"] | None = None
    model: str
    slos: ScenarioSLOs
    criterion: ScenarioCriterion = ScenarioCriterion()
    workload: ScenarioWorkload = ScenarioWorkload(distribution="sharegpt")
    rates: list[Annotated[float, NotBool, Finite, BeforeValidator(_positive_rate)]]
    gpus: list[ScenarioGPU]
    placement: ScenarioPlacement = ScenarioPlacement()
    simulation: ScenarioSimulation = ScenarioSimulation()
    solve: ScenarioSolve = ScenarioSolve()
    classes: ScenarioClasses | None = None
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


#: TP degrees tried for ``tensor_parallel: best`` and ``all`` (only those with a cost model file).
TP_DEGREES = (1, 2, 4, 8)

#: The ``source`` of a scenario built from the query flags; its errors name the flag (`FLAG_OF_FIELD`).
FLAGS_SOURCE = "planner capacity flags"


class CandidateGPU(BaseModel):
    """A resolved GPU candidate: its spec (the catalog's, or the one the scenario defines) with its price,
    and the TP degrees asked for."""

    model_config = ConfigDict(frozen=True)
    spec: GPUSpec
    degrees: tuple[int, ...] | None  # None: choose by Eqs. 5–6 ("best"); ``all`` is resolved to a tuple
    available: int | None = None  # GPUs of this type the mixed fleet may use (None: no limit)


class TraceWindow(BaseModel):
    """The real trace behind a workload: the file, its format and the window of arrivals used.

    ``start_s`` and ``duration_s`` are seconds after the trace's first request (``duration_s`` None:
    to the end); ``requests`` counts the window's requests that fit the model's context, the ones
    the length distribution summarises."""

    model_config = ConfigDict(frozen=True)
    path: str
    format: str
    start_s: float = 0.0
    duration_s: float | None = None
    requests: int


class CostModelSource(BaseModel):
    """Where the cost model of one (GPU type, TP degree) comes from.

    ``label`` is read from the file's provenance text (`cost_model_label`): "measured end-to-end
    (Splitwise)", "kernel composition (Vidur)" (kernel times only: a lower bound on end-to-end time),
    "derived (not measured)", "published coefficients", or "other".  ``holdout_mape`` /
    ``holdout_max_ape`` (per phase, %) are the fit's error on profiling rows it did not see (for a
    kernel composition: rows the fitter composed itself); None when the file has no fit summary.
    ``measured_mape`` (the file's own coefficients on the measured rows of its configuration) and
    ``measured_cv_mape`` (its form's k-fold cross-validated MAPE on them) come from the file's
    ``measured_rows`` section, on the basis ``measured_basis`` ("measured rows", "batch-time model" or
    "none"); ``caveats`` are the file's stated limits ("code: detail").  All are errors relative to
    profiling data, not to a serving engine."""

    model_config = ConfigDict(frozen=True)
    gpu: str
    tensor_parallel: int
    path: str
    provenance: str
    label: str
    holdout_mape: dict[str, float] | None = None
    holdout_max_ape: dict[str, float] | None = None
    measured_basis: str | None = None
    measured_mape: dict[str, float] | None = None
    measured_cv_mape: dict[str, float] | None = None
    caveats: tuple[str, ...] = ()

    def holdout_text(self) -> str:
        """The error the file states, measured rows first ("error vs measured rows: prefill 12.4 % (CV
        20.6 %), decode 2.1 % (CV 3.6 %)"); else the fit's held-out error on its profiling rows; else
        "error not measured"."""
        if self.measured_mape:
            cv = self.measured_cv_mape or {}
            parts = ", ".join(f"{phase} {value:.1f} %" + (f" (CV {cv[phase]:.1f} %)" if phase in cv else "")
                              for phase, value in self.measured_mape.items())
            basis = "measured rows" if self.measured_basis == "measured rows" else f"its {self.measured_basis}"
            return f"error vs {basis}: {parts}"
        if not self.holdout_mape:
            return "error not measured (no measured rows for this configuration)"
        parts = ", ".join(f"{phase} {value:.1f} %" for phase, value in self.holdout_mape.items())
        return f"held-out error vs its profiling rows: {parts}"

    def caveat_codes(self) -> list[str]:
        """The caveats' codes (e.g. ``above_target``, ``attention_extrapolated``)."""
        return [c.split(":", 1)[0] for c in self.caveats]


def cost_model_label(provenance: str) -> str:
    """The kind of a cost model's source, from its provenance text (see `CostModelSource`)."""
    text = provenance.lower()
    if text.startswith("derived") or "derived, not measured" in text:
        return "derived (not measured)"
    if "splitwise" in text:
        return "measured end-to-end (Splitwise)"
    if "vidur" in text:
        return "kernel composition (Vidur)"
    if "published" in text:
        return "published coefficients"
    return "other (see the file's provenance)" if text else "unknown (no provenance in the file)"


class Scenario(BaseModel):
    """A validated, resolved capacity scenario (frozen).

    ``atgt_s`` is the TPOT SLO (``tpot_s`` is the same value); exactly one of ``percentile`` (0–100,
    exclusive) and ``attainment`` (0–1] is set (module docstring, Criterion); ``trace`` is the
    real-trace window behind ``distribution``, or None for a named or fixed-length distribution."""

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
    percentile: float | None = 99.0
    attainment: float | None = None
    trace: TraceWindow | None = None
    router: str = "jsq"
    scheduler: str = "vllm"
    window_s: float = 1000.0  # arrival window of the simulated stream (s)
    warmup_s: float = 100.0  # requests arriving earlier are simulated but not measured (s)
    snapshot: bool = True
    #: size-class bucket edges (tokens) on input and output length; both empty: no size classes
    class_input_edges: tuple[int, ...] = ()
    class_output_edges: tuple[int, ...] = ()
    #: the solver of the snapshot placement MIP and of the request-class MILPs (`planner.solver.SOLVERS`)
    solver: str = "highs"

    @property
    def has_classes(self) -> bool:
        return bool(self.class_input_edges or self.class_output_edges)

    @property
    def tpot_s(self) -> float:
        """The TPOT SLO (s): the same quantity as ``atgt_s``."""
        return self.atgt_s

    @property
    def criterion_label(self) -> str:
        """The SLO criterion in words, e.g. "P99 TTFT ≤ 1 s and P99 TPOT ≤ 0.05 s"."""
        if self.attainment is not None:
            return (f"≥ {100 * self.attainment:g} % of requests with TTFT ≤ {self.ttft_s:g} s and "
                    f"TPOT ≤ {self.atgt_s:g} s")
        return f"P{self.percentile:g} TTFT ≤ {self.ttft_s:g} s and P{self.percentile:g} TPOT ≤ {self.atgt_s:g} s"

    def cost_model_source(self, gpu: str, tensor_parallel: int) -> CostModelSource | None:
        """The Aladdin cost-model file of (``gpu``, ``tensor_parallel``) for this model, or None."""
        return _cost_model_source(self.model.name, gpu, tensor_parallel, self.cost_models_dir)

    def fingerprint(self) -> str:
        """Hash of everything that defines the sweep's points (the results database's identity); the size
        classes do not change a point, so they are left out (`classes_fingerprint` covers them).  The solver is
        part of it except for the default HiGHS, so that a database written before the solver was a choice
        still resumes."""
        return self._digest({"source", "name", "class_input_edges", "class_output_edges"})

    def classes_fingerprint(self) -> str:
        """Hash of the points' identity and the size classes (the class-capacity database's identity)."""
        return self._digest({"source", "name"})

    def _digest(self, exclude: set[str]) -> str:
        data = self.model_dump(mode="json", exclude=exclude | ({"solver"} if self.solver == "highs" else set()))
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def _cost_model_source(model: str, gpu: str, tensor_parallel: int, models_dir: str | None) -> CostModelSource | None:
    from planner.costmodels.files import find_cost_model_path, load_cost_model  # noqa: PLC0415

    path = find_cost_model_path("aladdin", model, gpu, tensor_parallel, models_dir)
    if path is None:
        return None
    cost = load_cost_model(path)
    mape = maxape = None
    if cost.fit is not None:
        mape = {k: float(v.holdout_mape) for k, v in cost.fit.phases.items() if v.holdout_mape is not None} or None
        maxape = {k: float(v.holdout_max_ape) for k, v in cost.fit.phases.items()
                  if v.holdout_max_ape is not None} or None
    from planner.costmodels.models import cost_model_caveats  # noqa: PLC0415

    measured = getattr(cost, "measured_rows", None)
    phases = measured.phases if measured is not None else {}
    return CostModelSource(
        gpu=gpu, tensor_parallel=tensor_parallel, path=str(path), provenance=cost.provenance,
        label=cost_model_label(cost.provenance), holdout_mape=mape, holdout_max_ape=maxape,
        measured_basis=None if measured is None else measured.basis,
        measured_mape={k: float(v.mape) for k, v in phases.items()} or None,
        measured_cv_mape={k: float(v.cv_mape) for k, v in phases.items() if v.cv_mape is not None} or None,
        caveats=tuple(cost_model_caveats(cost)))


def load_scenario(path: Path | str) -> Scenario:
    """Read and resolve a scenario file; every problem is one `InputError` line (file, field, problem)."""
    path = Path(path)
    return scenario_from_mapping(read_yaml_mapping(path), path)


def scenario_from_mapping(raw: dict, source: Path | str) -> Scenario:
    """Validate and resolve a scenario mapping (a YAML file's, or the one `scenario_from_flags` builds).

    Relative paths in it (workload, trace, cost_models_dir) are resolved against ``source``'s folder
    (the working directory for the flags).  Every problem is one `InputError` naming ``source`` and
    the field."""
    path = Path(source)
    for required in ("model", "slos"):
        if raw.get(required) in (None, "", {}):
            raise InputError(path, required, "required field is missing")
    if "rates" not in raw:
        raise InputError(path, "rates", "required field is missing")
    if "gpus" not in raw:
        raise InputError(path, "gpus", "required field is missing")
    data = validate_model(ScenarioFile, raw, path)
    atgt_s = _tpot(path, data.slos)
    percentile, attainment = _criterion(path, data.criterion)
    model = _catalog_model(path, data.model)
    models_dir = None
    if data.cost_models_dir:
        models_dir = str(check_input_dir(resolve_relative(path, data.cost_models_dir), "a directory of cost models "
                                         "(aladdin/)", source=path, field="cost_models_dir"))
    _check_model_has_cost_models(path, model, models_dir)
    gpus = []
    for k, entry in enumerate(data.gpus):
        given = isinstance(entry.type, dict)
        spec = (_given_gpu(path, f"gpus[{k}].type", entry.type) if given
                else _catalog_gpu(path, f"gpus[{k}].type", entry.type))
        price = entry.price_per_hour or spec.price_per_hour
        if price is None:
            why = ("a GPU defined by its specs has no catalog price" if given
                   else f"the catalog has no price for {spec.name}")
            raise InputError(path, f"gpus[{k}].price_per_hour", f"required: {why} (US$ per GPU-hour)")
        degrees = _degrees(path, k, model, spec.name, entry.tensor_parallel, models_dir, given=given)
        gpus.append(CandidateGPU(spec=spec.model_copy(update={"price_per_hour": price}), degrees=degrees,
                                 available=entry.available))
    from planner.costmodels.files import slug  # noqa: PLC0415

    names = [slug(g.spec.name) for g in gpus]  # one cost-model file name per GPU type
    if len(set(names)) != len(names):
        raise InputError(path, "gpus", "each GPU type may appear once")
    dist, label, trace = _workload(path, data.workload, model.max_context_tokens)
    _check_stream_size(path, raw["rates"], data.rates[-1], dist, atgt_s, model.max_context_tokens)
    window_s, warmup_s = _simulation_window(path, data.simulation, data.rates)
    if data.classes is not None:
        if not data.classes.input and not data.classes.output:
            raise InputError(path, "classes", "give input and/or output bucket edges, e.g. {input: [1024], output: [256]}")
        count = (len(data.classes.input or ()) + 1) * (len(data.classes.output or ()) + 1)
        if count > MAX_CLASSES:
            raise InputError(path, "classes", f"{count} size classes; at most {MAX_CLASSES} are supported "
                                              "(each costs one worker search per rate and configuration)")
    return Scenario(
        source=str(path), name=data.name, model=model, ttft_s=data.slos.ttft_s, atgt_s=atgt_s,
        distribution=dist, workload_label=label, rates=tuple(data.rates), gpus=tuple(gpus),
        strictness=data.placement.strictness, kv_headroom=data.placement.kv_headroom,
        time_limit_s=data.solve.time_limit_s, exact_max_requests=data.solve.exact_max_requests,
        seed=data.solve.seed, solver=data.solve.solver, cost_models_dir=models_dir, percentile=percentile,
        attainment=attainment, trace=trace,
        router=data.simulation.router, scheduler=data.simulation.scheduler, window_s=window_s, warmup_s=warmup_s,
        snapshot=data.simulation.snapshot,
        class_input_edges=tuple(data.classes.input or ()) if data.classes else (),
        class_output_edges=tuple(data.classes.output or ()) if data.classes else (),
    )


#: Measured requests the default window gives the lowest rate (P99 then rests on ≥ 20 requests).
MIN_MEASURED_REQUESTS = 2_000
#: Most requests the simulated stream of the highest rate may hold (expected λ_max · window).
MAX_SIMULATED_REQUESTS = 200_000


def _simulation_window(path: Path, sim: ScenarioSimulation, rates: list[float]) -> tuple[float, float]:
    """(window, warm-up) of the simulated stream: given, or the window that gives the lowest rate
    `MIN_MEASURED_REQUESTS` measured requests after a warm-up of 10 % of the window (at least 300 s)."""
    if sim.duration_s is not None:
        window = float(sim.duration_s)
    else:
        window = max(300.0, MIN_MEASURED_REQUESTS / (0.9 * min(rates)))
    warmup = 0.1 * window if sim.warmup_s is None else float(sim.warmup_s)
    if warmup >= window:
        raise InputError(path, "simulation.warmup_s", f"{warmup:g} s must be shorter than the window {window:g} s")
    if max(rates) * window > MAX_SIMULATED_REQUESTS:
        raise InputError(path, "simulation.duration_s",
                         f"{max(rates):g} req/s × {window:g} s is about {max(rates) * window:,.0f} requests to simulate "
                         f"per fleet, more than {MAX_SIMULATED_REQUESTS:,}; give a shorter duration_s")
    return window, warmup


def _tpot(path: Path, slos: ScenarioSLOs) -> float:
    """The TPOT SLO from ``atgt_s`` or ``tpot_s`` (one quantity; both only when equal)."""
    if slos.atgt_s is None and slos.tpot_s is None:
        raise InputError(path, "slos.atgt_s", "required field is missing (give tpot_s or atgt_s: the same quantity, "
                                              "the mean gap between a request's output tokens, s)")
    if slos.atgt_s is not None and slos.tpot_s is not None and slos.atgt_s != slos.tpot_s:
        raise InputError(path, "slos.tpot_s", f"{slos.tpot_s:g} s differs from atgt_s {slos.atgt_s:g} s; they are the "
                                              "same quantity (mean gap between a request's output tokens): give one")
    return float(slos.atgt_s if slos.atgt_s is not None else slos.tpot_s)  # type: ignore[arg-type]


def _criterion(path: Path, crit: ScenarioCriterion) -> tuple[float | None, float | None]:
    if crit.percentile is not None and crit.attainment is not None:
        raise InputError(path, "criterion", "give percentile or attainment, not both")
    if crit.attainment is not None:
        return None, crit.attainment
    return (99.0 if crit.percentile is None else crit.percentile), None


def _did_you_mean(names: list[str]) -> str:
    shown = names[0] if len(names) == 1 else "one of " + ", ".join(names)
    return f"; did you mean {shown}? (an alias is not read as a catalog name)"


def _catalog_model(path: Path, name: str) -> LLMSpec:
    """The catalog model called ``name`` (any letter case); an alias is refused, not rewritten."""
    model = find_model(name)
    if model is None:
        raise InputError(path, "model", f"unknown model {name!r} (see planner/catalog/models.yaml)")
    if model.name.lower() != name.lower():
        raise InputError(path, "model", f"unknown model {name!r}{_did_you_mean([model.name])}")
    return model


def _catalog_gpu(path: Path, field: str, name: str) -> GPUSpec:
    """The catalog GPU called ``name`` (any letter case); an alias is refused, not rewritten: it may
    name several SKUs (``A100-80GB``: SXM or PCIe), so every catalog GPU it could mean is listed."""
    spec = find_gpu(name)
    if spec is None:
        raise InputError(path, field, f"unknown GPU type {name!r} (known: {', '.join(gpu_names())}; a GPU outside "
                                      "the catalog is defined in a scenario file by its specs: "
                                      "type: {name: NAME, memory_gb: GB})")
    if spec.name.lower() != name.lower():
        similar = sorted({g for g in gpu_names() if g.lower().startswith(name.lower())} | {spec.name})
        raise InputError(path, field, f"unknown GPU type {name!r}{_did_you_mean(similar)}")
    return spec


def _given_gpu(path: Path, field: str, mapping: dict) -> GPUSpec:
    """The GPU a scenario defines by its specs (module docstring, GPUs outside the catalog).  Its name may
    not be a catalog name or alias, nor share a catalog GPU's cost-model file name (`slug`): a catalog
    entry is never shadowed or redefined."""
    from planner.costmodels.files import slug  # noqa: PLC0415

    data = validate_model(ScenarioGPUSpec, mapping, path, field)
    name = data.name
    clash = find_gpu(name)
    candidates = [] if clash is None else [clash.name]
    if clash is not None and clash.name.lower() == name.lower():
        what = "is the catalog GPU"
    elif clash is not None:  # an alias may name several SKUs (A100-80GB: SXM or PCIe): list them, pick none
        stem = name.lower().split("-")[0]
        candidates = sorted({g for g in gpu_names() if g.lower().split("-")[0] == stem} | {clash.name})
        what = f"is an alias in the GPU catalog ({', '.join(candidates)})"
    else:
        clash = find_gpu(slug(name)) or next((find_gpu(g) for g in gpu_names() if slug(g) == slug(name)), None)
        candidates = [] if clash is None else [clash.name]
        what = f"shares its cost-model file name ({slug(name)}) with the catalog GPU {clash.name}" if clash else ""
    if clash is not None:
        shown = candidates[0] if len(candidates) == 1 else "one of " + ", ".join(candidates)
        raise InputError(path, f"{field}.name", f"{name!r} {what}; write the catalog name as text "
                                                f"(type: {shown}), or give this GPU another name")
    return GPUSpec(name=name, memory_gb=data.memory_gb, memory_bandwidth_gb_s=data.memory_bandwidth_gb_s,
                   fp16_tflops=data.fp16_tflops)


def _models_root(models_dir: str | None) -> Path:
    from planner.costmodels.files import default_models_dir  # noqa: PLC0415

    return (Path(models_dir) if models_dir else default_models_dir()) / "aladdin"


def _check_model_has_cost_models(path: Path, model: LLMSpec, models_dir: str | None) -> None:
    from planner.costmodels.files import slug  # noqa: PLC0415

    root = _models_root(models_dir)
    if not any(root.glob(f"{slug(model.name)}__*.yaml")):
        raise InputError(path, "model", f"no Aladdin cost model for {model.name} in {root} "
                                        "(fit one with `planner fit`, or give cost_models_dir)")


def _degrees(path: Path, k: int, model: LLMSpec, gpu: str, asked: list[int] | str,
             models_dir: str | None, *, given: bool = False) -> tuple[int, ...] | None:
    """The TP degrees of one candidate: a sorted tuple, or None for ``best``; ``all`` = every degree of
    `TP_DEGREES` with a cost model file.  A GPU type with no cost model at any of them is refused (for a
    GPU defined by its specs, ``given``, the line says how to fit one)."""
    from planner.costmodels.files import find_cost_model_path  # noqa: PLC0415

    wanted = TP_DEGREES if asked in ("best", "all") else tuple(sorted(set(asked)))
    fitted = tuple(g for g in wanted if find_cost_model_path("aladdin", model.name, gpu, g, models_dir) is not None)
    if not fitted:
        shown = ", ".join(str(g) for g in wanted)
        how = (f" (fit one with `planner fit PROFILE --model {model.name} --gpu {gpu} --out-dir DIR` and give "
               "cost_models_dir: DIR)" if given else "")
        raise InputError(path, f"gpus[{k}].type", f"no Aladdin cost model for {model.name} on {gpu} at TP {shown} "
                                                  f"in {_models_root(models_dir)}{how}")
    if asked == "best":
        return None
    return fitted if asked == "all" else wanted


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


#: Fewest requests a trace window must hold to be summarised as a length distribution.
MIN_TRACE_REQUESTS = 50


def fixed_length_distribution(isl: int, osl: int) -> LengthDistribution:
    """The degenerate distribution: every request has ``isl`` input and ``osl`` output tokens."""
    return LengthDistribution(
        name=f"fixed-isl{isl}-osl{osl}", source=f"fixed lengths: isl={isl}, osl={osl}", num_samples=0,
        max_total_tokens=isl + osl,
        bins=[LengthBin(probability=1.0, input_quantiles=[isl, isl], output_quantiles=[osl, osl], output_mean=osl)],
    )


def _workload(path: Path, spec: ScenarioWorkload, cap: int) -> tuple[LengthDistribution, str, TraceWindow | None]:
    fixed = spec.isl is not None or spec.osl is not None
    given = [k for k, v in (("distribution", spec.distribution is not None), ("trace", spec.trace is not None),
                            ("isl/osl", fixed)) if v]
    if len(given) != 1:
        raise InputError(path, "workload", "give exactly one of distribution (a named distribution), trace (a file) "
                                           f"or isl and osl (fixed lengths){'; got ' + ', '.join(given) if given else ''}")
    if spec.trace is None:
        for key in ("start_s", "duration_s"):
            if getattr(spec, key) is not None:
                raise InputError(path, f"workload.{key}", "applies to a trace only")
    if fixed:
        if spec.isl is None or spec.osl is None:
            missing = "isl" if spec.isl is None else "osl"
            raise InputError(path, f"workload.{missing}", "required field is missing (isl and osl go together)")
        if spec.isl + spec.osl > cap:
            raise InputError(path, "workload.isl", f"isl + osl = {spec.isl + spec.osl} tokens exceeds the model's "
                                                   f"context of {cap} tokens")
        return fixed_length_distribution(spec.isl, spec.osl), f"fixed lengths isl={spec.isl}, osl={spec.osl}", None
    if spec.distribution is not None:
        name = spec.distribution
        target = resolve_relative(path, name) if name.endswith((".yaml", ".yml")) else name
        try:
            return find_distribution(str(target)), f"distribution {name}", None
        except PlannerError as exc:
            raise InputError(path, "workload.distribution", str(exc)) from None
    trace = resolve_relative(path, spec.trace)  # type: ignore[arg-type]
    check_input_file(trace, "a trace file", MAX_TRACE_BYTES, source=path, field="workload.trace")
    try:
        inputs, outputs, arrival = read_trace_lengths(trace, spec.format)
    except PlannerError as exc:
        raise InputError(path, "workload.trace", str(exc)) from None
    start = 0.0 if spec.start_s is None else float(spec.start_s)
    window = ""
    if spec.start_s is not None or spec.duration_s is not None:
        if arrival is None:
            raise InputError(path, "workload.start_s" if spec.start_s is not None else "workload.duration_s",
                             f"the {spec.format} format has no arrival times, so a trace window cannot be chosen")
        end = math.inf if spec.duration_s is None else start + float(spec.duration_s)
        inside = (arrival >= start) & (arrival < end)
        span = f"the trace's requests arrive from 0 to {float(arrival.max()) if arrival.size else 0:g} s"
        if not inside.any():
            raise InputError(path, "workload.start_s" if spec.start_s is not None else "workload.duration_s",
                             f"no requests in the window [{start:g}, {end:g}) s of {trace.name} ({span})")
        inputs, outputs = inputs[inside], outputs[inside]
        window = f", {start:g}–{end:g} s"
    keep = (inputs >= 1) & (outputs >= 1) & (inputs + outputs <= cap)
    if keep.sum() < MIN_TRACE_REQUESTS:
        raise InputError(path, "workload.trace", f"{trace}: only {int(keep.sum())} requests{window and ' in the window'} "
                                                 f"fit the model's context; need ≥ {MIN_TRACE_REQUESTS}")
    dist = derive_length_distribution(inputs[keep], outputs[keep], name=trace.stem, source=str(trace),
                                      max_total_tokens=cap)
    info = TraceWindow(path=str(trace), format=spec.format, start_s=start, duration_s=spec.duration_s,
                       requests=int(keep.sum()))
    return dist, f"trace {trace.name} ({int(keep.sum())} requests{window})", info


# ---- the query flags ------------------------------------------------------------------------------

#: Scenario field (indices dropped) → the `planner capacity` flag that sets it, for error lines.
FLAG_OF_FIELD = {
    "model": "--model",
    "slos": "--ttft/--tpot",
    "slos.ttft_s": "--ttft",
    "slos.atgt_s": "--tpot",
    "slos.tpot_s": "--tpot",
    "criterion": "--percentile/--attainment",
    "criterion.percentile": "--percentile",
    "criterion.attainment": "--attainment",
    "workload": "--workload/--trace/--isl",
    "workload.distribution": "--workload",
    "workload.trace": "--trace",
    "workload.format": "--trace-format",
    "workload.start_s": "--trace-start",
    "workload.duration_s": "--trace-duration",
    "workload.isl": "--isl",
    "workload.osl": "--osl",
    "rates": "--rate",
    "gpus": "--gpu",
    "gpus.type": "--gpu",
    "gpus.price_per_hour": "--price",
    "gpus.tensor_parallel": "--tp",
    "solve.time_limit_s": "--time-limit",
    "solve.seed": "--seed",
    "solve.solver": "--solver",
    "cost_models_dir": "--models-dir",
    "classes": "--bucket",
    "classes.input": "--bucket",
    "classes.output": "--bucket",
}


def parse_buckets(items: list[str]) -> dict[str, list] | None:
    """``--bucket input=512,2048 --bucket output=128`` → ``{"input": [512, 2048], "output": [128]}`` (the
    scenario's ``classes`` mapping; the edges' values are checked by the scenario's validation)."""
    if not items:
        return None
    table: dict[str, list] = {}
    for item in items:
        axis, sep, edges = item.partition("=")
        axis = axis.strip()
        if not sep or axis not in ("input", "output") or not edges.strip():
            raise InputError("--bucket", "", f"expected input=EDGES or output=EDGES (comma-separated token "
                                             f"counts, e.g. input=512,2048), got {item!r}")
        if axis in table:
            raise InputError("--bucket", "", f"{axis} buckets are given twice")
        values: list = []
        for text in edges.split(","):
            try:
                values.append(int(text.strip()))
            except ValueError:
                raise InputError("--bucket", "", f"{item!r}: edge {text.strip()!r} is not a whole number of "
                                                 "tokens") from None
        table[axis] = values
    return table


def parse_prices(prices: list[str], gpus: list[str]) -> dict[str, float]:
    """``--price GPU=USD`` values → {GPU: US$ per GPU-hour}; the GPU must be one given with ``--gpu``
    (as written there).  A value that is not a number is left to the scenario's validation as text."""
    table: dict[str, float] = {}
    for item in prices:
        name, sep, value = item.rpartition("=")
        if not sep or not name.strip() or not value.strip():
            raise InputError("--price", "", f"expected GPU=USD_PER_GPU_HOUR, got {item!r}")
        name = name.strip()
        if name not in gpus:
            raise InputError("--price", "", f"{item!r} prices a GPU not asked for with --gpu "
                                            f"(asked: {', '.join(gpus) if gpus else 'none'})")
        if name in table:
            raise InputError("--price", "", f"{name} is priced twice")
        try:
            table[name] = float(value)
        except ValueError:
            raise InputError("--price", "", f"{item!r}: the price {value.strip()!r} is not a number "
                                            "(US$ per GPU-hour)") from None
    return table


def flags_mapping(
    *,
    model: str | None,
    gpus: list[str],
    rates: list[float],
    ttft_s: float | None,
    tpot_s: float | None = None,
    atgt_s: float | None = None,
    tensor_parallel: list[int] | None = None,
    prices: dict[str, float] | None = None,
    percentile: float | None = None,
    attainment: float | None = None,
    workload: str | None = None,
    isl: int | None = None,
    osl: int | None = None,
    trace: str | None = None,
    trace_format: str | None = None,
    trace_start_s: float | None = None,
    trace_duration_s: float | None = None,
    time_limit_s: float | None = None,
    seed: int | None = None,
    cost_models_dir: str | None = None,
    classes: dict | None = None,
    solver: str | None = None,
) -> dict:
    """The scenario mapping (the YAML file's content) the query flags stand for; nothing is checked here."""
    raw: dict = {"name": "capacity"}
    if model is not None:
        raw["model"] = model
    slos = {k: v for k, v in (("ttft_s", ttft_s), ("tpot_s", tpot_s), ("atgt_s", atgt_s)) if v is not None}
    if slos:
        raw["slos"] = slos
    criterion = {k: v for k, v in (("percentile", percentile), ("attainment", attainment)) if v is not None}
    if criterion:
        raw["criterion"] = criterion
    work = {k: v for k, v in (("distribution", workload), ("isl", isl), ("osl", osl), ("trace", trace),
                              ("format", trace_format), ("start_s", trace_start_s),
                              ("duration_s", trace_duration_s)) if v is not None}
    if work:
        raw["workload"] = work
    if rates:
        raw["rates"] = list(rates)
    if gpus:
        raw["gpus"] = []
        for name in gpus:
            entry: dict = {"type": name, "tensor_parallel": list(tensor_parallel) if tensor_parallel else "all"}
            if prices and name in prices:
                entry["price_per_hour"] = prices[name]
            raw["gpus"].append(entry)
    solve = {k: v for k, v in (("time_limit_s", time_limit_s), ("seed", seed), ("solver", solver)) if v is not None}
    if solve:
        raw["solve"] = solve
    if cost_models_dir is not None:
        raw["cost_models_dir"] = cost_models_dir
    if classes:
        raw["classes"] = classes
    return raw


def flag_of(field: str) -> str:
    """The flag behind a scenario field path such as ``gpus[1].price_per_hour`` (the field itself if none)."""
    bare = re.sub(r"\[\d+\]", "", field)
    while bare and bare not in FLAG_OF_FIELD and "." in bare:
        bare = bare.rsplit(".", 1)[0]
    return FLAG_OF_FIELD.get(bare, field)


def scenario_from_flags(raw: dict) -> Scenario:
    """`scenario_from_mapping` on the flags' mapping (`flags_mapping`), errors naming the flag:
    ``--rate: arrival rates must be positive, got -1``."""
    try:
        return scenario_from_mapping(raw, FLAGS_SOURCE)
    except InputError as exc:
        if exc.source != FLAGS_SOURCE:
            raise
        flag = flag_of(exc.field) if exc.field else "flags"
        problem = exc.problem
        for yaml_words, flag_words in _FLAG_WORDS:
            problem = problem.replace(yaml_words, flag_words)
        if flag == "--price" and problem.startswith("required"):
            problem += "; give --price GPU=USD for it"
        raise InputError(flag, "", problem) from None


#: YAML wording in shared error messages → the flags' wording.
_FLAG_WORDS = (
    ("required field is missing", "required option is missing"),
    ("give tpot_s or atgt_s", "give --tpot or --atgt"),
    ("differs from atgt_s", "differs from --atgt"),
    ("give percentile or attainment", "give --percentile or --attainment"),
    ("distribution (a named distribution), trace (a file) or isl and osl (fixed lengths)",
     "--workload (a named distribution), --trace (a file) or --isl and --osl (fixed lengths)"),
    ("isl and osl go together", "--isl and --osl go together"),
    ("isl + osl", "--isl + --osl"),
    ("give cost_models_dir", "give --models-dir DIR"),
)


# ---- several models sharing a GPU inventory --------------------------------------------------------

#: Fields of one entry of ``models:`` (the rest of a scenario is shared by every model).
MODEL_FIELDS = ("model", "slos", "criterion", "workload", "rates")


class MultiScenario(BaseModel):
    """Several models sharing one GPU inventory (module docstring, Several models).

    ``models[m]`` is model m's own `Scenario`, exactly the one a single-model file with that model's
    entry and the shared fields would give (same fingerprint, so its sweep resumes the same way);
    joint point i is rate ``models[m].rates[i]`` of every model m."""

    model_config = ConfigDict(frozen=True)
    source: str
    name: str
    models: tuple[Scenario, ...]

    @property
    def points(self) -> int:
        """Joint points (every model has this many rates)."""
        return len(self.models[0].rates)

    @property
    def gpus(self) -> tuple[CandidateGPU, ...]:
        """The shared GPU types with price and inventory (``available``)."""
        return self.models[0].gpus

    def fingerprints(self) -> dict[str, str]:
        """Model name → its sweep's fingerprint (`Scenario.fingerprint`)."""
        return {s.model.name: s.fingerprint() for s in self.models}


def is_multi_model(raw: dict) -> bool:
    """A scenario mapping with a top-level ``models:`` list (several models)."""
    return "models" in raw


def read_capacity_file(path: Path | str) -> Scenario | MultiScenario:
    """A scenario file: one model (`Scenario`) or, with ``models:``, several (`MultiScenario`)."""
    path = Path(path)
    raw = read_yaml_mapping(path)
    return multi_scenario_from_mapping(raw, path) if is_multi_model(raw) else scenario_from_mapping(raw, path)


def multi_scenario_from_mapping(raw: dict, source: Path | str) -> MultiScenario:
    """Validate a ``models:`` scenario mapping (module docstring, Several models): each entry with the shared
    fields goes through `scenario_from_mapping`; every problem is one `InputError` naming ``source`` and the
    field (``models[1].rates``: ...)."""
    path = Path(source)
    entries = _model_entries(raw, path)
    seen: dict[str, int] = {}
    lengths: list[int] = []
    for i, entry in enumerate(entries):
        _check_model_entry(entry, i, path)
        _check_entry_name(entry, i, path, seen)
        _check_entry_rates(entry, i, path, lengths)
    shared = {k: v for k, v in raw.items() if k != "models"}
    title = str(raw.get("name", "capacity"))
    scenarios = [_entry_scenario(shared, entry, i, title, path) for i, entry in enumerate(entries)]
    _check_distinct_models(scenarios, path)
    return MultiScenario(source=str(path), name=title, models=tuple(scenarios))


def _model_entries(raw: dict, path: Path) -> list:
    """The ``models:`` list of a several-model mapping, once the top level is checked: no ``model:``
    beside it, a non-empty list, no shared per-model field (slos, criterion, workload, rates) and no
    size classes."""
    if "model" in raw:
        raise InputError(path, "model", "give model: (one model) or models: (several sharing the GPUs), not both")
    entries = raw["models"]
    if not isinstance(entries, list) or not entries:
        raise InputError(path, "models", "must be a non-empty list of models, each a mapping "
                                         "{model, slos, workload, rates[, criterion]}")
    for key in ("slos", "criterion", "workload", "rates"):
        if key in raw:
            raise InputError(path, key, f"with models: give {key} per model (models[i].{key}); only gpus, placement, "
                                        "simulation, solve and cost_models_dir are shared")
    if "classes" in raw:
        raise InputError(path, "classes", "size classes are not supported with models: (give one model, or drop classes)")
    return entries


def _check_model_entry(entry: object, i: int, path: Path) -> None:
    """Entry ``models[i]`` is a mapping of `MODEL_FIELDS` only, with model, slos and rates given."""
    if not isinstance(entry, dict):
        raise InputError(path, f"models[{i}]", "must be a mapping {model, slos, workload, rates[, criterion]}")
    for key in entry:
        if key not in MODEL_FIELDS:
            raise InputError(path, f"models[{i}].{key}", f"unknown field (a model entry takes "
                                                        f"{', '.join(MODEL_FIELDS)}; gpus, placement, simulation and "
                                                        "solve are shared, at the top level)")
    for key in ("model", "slos", "rates"):
        if entry.get(key) in (None, "", {}):
            raise InputError(path, f"models[{i}].{key}", "required field is missing")


def _check_entry_name(entry: dict, i: int, path: Path, seen: dict[str, int]) -> None:
    """A model name given as text is not given twice (case-insensitive); ``seen``: lower-case name → index."""
    name = entry["model"]
    if isinstance(name, str):
        if name.lower() in seen:
            raise InputError(path, f"models[{i}].model", f"{name} is given twice (models[{seen[name.lower()]}] and "
                                                         f"models[{i}]); give each model once")
        seen[name.lower()] = i


def _check_entry_rates(entry: dict, i: int, path: Path, lengths: list[int]) -> None:
    """A list of rates is strictly increasing (when all are numbers) and as long as ``models[0].rates``
    (rate index i of every model forms joint point i); ``lengths``: the list lengths seen so far."""
    rates = entry["rates"]
    if not isinstance(rates, list):
        return
    numbers = all(isinstance(r, (int, float)) and not isinstance(r, bool) for r in rates)
    if numbers and any(b <= a for a, b in zip(rates, rates[1:])):
        raise InputError(path, f"models[{i}].rates", f"must be strictly increasing, got {rates} (rate index i "
                                                     "of every model forms joint point i)")
    if lengths and len(rates) != lengths[0]:
        raise InputError(path, f"models[{i}].rates", f"{len(rates)} rate(s), but models[0].rates has "
                                                     f"{lengths[0]}: every model needs one rate per joint point "
                                                     "(rate index i of every model forms joint point i)")
    lengths.append(len(rates))


def _entry_scenario(shared: dict, entry: dict, i: int, title: str, path: Path) -> Scenario:
    """Model ``models[i]``'s own `Scenario` (its entry over the shared fields); an error in one of its own
    fields names ``models[i].<field>``, an error in a shared field names that field and the model."""
    try:
        return scenario_from_mapping({**shared, **entry, "name": f"{title} / {entry['model']}"}, path)
    except InputError as exc:
        if exc.source != str(path):
            raise
        root = re.split(r"[.\[]", exc.field, maxsplit=1)[0] if exc.field else ""
        if root in MODEL_FIELDS:
            raise InputError(path, f"models[{i}].{exc.field}", exc.problem) from None
        raise InputError(path, exc.field or "models", f"{exc.problem} (for models[{i}], {entry['model']})") from None


def _check_distinct_models(scenarios: list[Scenario], path: Path) -> None:
    """No catalog model appears twice (two spellings of one model)."""
    names = [s.model.name for s in scenarios]
    for j, name in enumerate(names):
        if names.index(name) != j:
            raise InputError(path, f"models[{j}].model", f"{name} is given twice (models[{names.index(name)}] and "
                                                         f"models[{j}]); give each model once")
