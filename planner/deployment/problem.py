"""Frozen, validated data of the deployment family: clusters (TP enumeration), cost plans, routing batches."""

from __future__ import annotations

from functools import cached_property
from typing import Literal

import numpy as np
from pydantic import Field, NonNegativeFloat, PositiveFloat, PositiveInt, model_validator

from planner.core.types import Frozen, GPUSpec, LLMSpec
from planner.costmodels.models import AladdinCostModel, HeteroCostModel
from planner.deployment.memory import DEFAULT_ENGINE_OVERHEAD_GB, DEFAULT_MEMORY_UTILIZATION
from planner.deployment.throughput import DEFAULT_MAX_BATCH


class MemoryOptions(Frozen):
    """Eq. 1 parameters: engine memory fraction φ and per-instance engine overhead δ."""

    memory_utilization: float = Field(DEFAULT_MEMORY_UTILIZATION, gt=0.0, le=1.0)
    engine_overhead_gb: NonNegativeFloat = DEFAULT_ENGINE_OVERHEAD_GB
    max_batch: PositiveInt = DEFAULT_MAX_BATCH


# ---- TP enumeration over a cluster ---------------------------------------------------------------

class MachineGroup(Frozen):
    """``count`` machines of one GPU type with ``gpus_per_machine`` accelerators each."""

    name: str
    gpu: GPUSpec
    gpus_per_machine: PositiveInt
    count: PositiveInt = 1
    tensor_parallel: PositiveInt | None = None  # fixed by the user; else enumerated

    @model_validator(mode="after")
    def _divides(self) -> "MachineGroup":
        if self.tensor_parallel is not None and self.gpus_per_machine % self.tensor_parallel:
            raise ValueError(f"tensor_parallel {self.tensor_parallel} does not divide the "
                             f"{self.gpus_per_machine} GPUs of a machine")
        return self


class ClusterProblem(Frozen):
    """Pick a TP degree per machine group to maximise cluster throughput (tokens/s) for one model."""

    name: str
    model: LLMSpec
    machines: tuple[MachineGroup, ...] = Field(min_length=1)
    sample_inputs: tuple[int, ...] = Field(min_length=1)
    sample_outputs: tuple[int, ...] = Field(min_length=1)
    max_input: PositiveInt
    max_output: PositiveInt
    memory: MemoryOptions = MemoryOptions()
    estimator: Literal["static", "continuous"] = "static"
    ttft_s: PositiveFloat | None = None
    atgt_s: PositiveFloat | None = None
    #: per (gpu name, t): p1..p8 models (static) or Aladdin models (continuous)
    hetero_models: dict[str, HeteroCostModel] = Field(default_factory=dict)
    aladdin_models: dict[str, AladdinCostModel] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _lengths(self) -> "ClusterProblem":
        if len(self.sample_inputs) != len(self.sample_outputs):
            raise ValueError("sample_inputs and sample_outputs differ in length")
        return self


def model_key(gpu: str, tensor_parallel: int) -> str:
    return f"{gpu}@tp{tensor_parallel}"


# ---- cost-minimal plan -------------------------------------------------------------------------

class GPUInventory(Frozen):
    """Machines of one GPU type that may be used, and the price of one GPU-hour."""

    gpu: GPUSpec
    machines: PositiveInt
    gpus_per_machine: PositiveInt
    price_per_gpu_hour: PositiveFloat

    @property
    def gpus(self) -> int:
        return self.machines * self.gpus_per_machine


class ModelDemand(Frozen):
    """Expected load of one model: request rate, mean lengths and SLOs."""

    model: str
    rate: PositiveFloat  # requests/s
    mean_input: PositiveFloat = 1.0
    mean_output: PositiveFloat = 1.0
    ttft_s: PositiveFloat | None = None
    atgt_s: PositiveFloat | None = None


class InstanceOption(Frozen):
    """One candidate instance: ``tensor_parallel`` GPUs of inventory ``gpu_index`` serving ``model_index``."""

    gpu_index: int = Field(ge=0)
    tensor_parallel: PositiveInt
    model_index: int = Field(ge=0)
    capacity: PositiveFloat  # requests/s at the SLOs
    source: str = ""
    #: the Aladdin model the capacity was estimated from (None when the file gives it); not serialised,
    #: read by the CLI for the model's caveats
    cost_model: AladdinCostModel | None = Field(default=None, exclude=True)


class CostPlanProblem(Frozen):
    """Choose instance counts per option: serve every model's rate at minimum $/h within the inventory."""

    name: str
    inventory: tuple[GPUInventory, ...] = Field(min_length=1)
    demands: tuple[ModelDemand, ...] = Field(min_length=1)
    options: tuple[InstanceOption, ...]
    skipped: tuple[str, ...] = ()  # candidate combinations without a capacity, and why

    @model_validator(mode="after")
    def _indices(self) -> "CostPlanProblem":
        for k, o in enumerate(self.options):
            if o.gpu_index >= len(self.inventory) or o.model_index >= len(self.demands):
                raise ValueError(f"option {k} refers to a missing GPU type or model")
            inv = self.inventory[o.gpu_index]
            if inv.gpus_per_machine % o.tensor_parallel:
                raise ValueError(f"option {k}: TP {o.tensor_parallel} does not divide the "
                                 f"{inv.gpus_per_machine} GPUs of a {inv.gpu.name} machine")
        names = [d.model for d in self.demands]
        if len(set(names)) != len(names):
            raise ValueError("a model is listed twice in demands")
        return self

    @cached_property
    def option_price(self) -> np.ndarray:
        """$/h of one instance of each option: t × price per GPU-hour."""
        return np.array([o.tensor_parallel * self.inventory[o.gpu_index].price_per_gpu_hour for o in self.options])

    def option_label(self, k: int) -> str:
        o = self.options[k]
        return f"{self.demands[o.model_index].model} on {self.inventory[o.gpu_index].gpu.name} tp{o.tensor_parallel}"


# ---- routing batch -------------------------------------------------------------------------------

class ServingInstance(Frozen):
    """One engine instance: ``tensor_parallel`` GPUs of one type with a p1..p8 model and its KV size."""

    name: str
    gpu: str
    tensor_parallel: PositiveInt
    kv_size_bytes: PositiveFloat
    cost: HeteroCostModel


class RoutingProblem(Frozen):
    """Assign a batch of requests (all present at time 0) to heterogeneous instances; minimise the makespan."""

    name: str
    model: LLMSpec
    instances: tuple[ServingInstance, ...] = Field(min_length=1)
    request_ids: tuple[str, ...] = Field(min_length=1)
    inputs: tuple[PositiveInt, ...]
    predicted_outputs: tuple[PositiveInt, ...]
    theta: PositiveFloat = 2.0
    max_batch: PositiveInt = DEFAULT_MAX_BATCH
    wrr_weights: tuple[PositiveFloat, ...] | None = None  # default: estimated throughput (Alg. 1)

    @model_validator(mode="after")
    def _lengths(self) -> "RoutingProblem":
        if not len(self.request_ids) == len(self.inputs) == len(self.predicted_outputs):
            raise ValueError("request_ids, inputs and predicted_outputs differ in length")
        if len(set(self.request_ids)) != len(self.request_ids):
            raise ValueError("request ids must be unique")
        if self.wrr_weights is not None and len(self.wrr_weights) != len(self.instances):
            raise ValueError("wrr_weights needs one weight per instance")
        return self

    @property
    def kv_per_token(self) -> float:
        return self.model.kv_bytes_per_token

    @cached_property
    def batch_sizes(self) -> np.ndarray:
        """Eq. 5 [P*, R]: ``b_r^s = floor(KVSize(s) / (kv_token·(I_r+Õ_r)))``, at least 1, at most max_batch."""
        need = self.kv_per_token * (np.asarray(self.inputs, float) + np.asarray(self.predicted_outputs, float))
        kv = np.array([s.kv_size_bytes for s in self.instances])
        return np.clip(np.floor(kv[None, :] / need[:, None]), 1, self.max_batch)

    @cached_property
    def fits(self) -> np.ndarray:
        """``fits[r, s]``: request r alone fits in the KV cache of instance s."""
        need = self.kv_per_token * (np.asarray(self.inputs, float) + np.asarray(self.predicted_outputs, float))
        kv = np.array([s.kv_size_bytes for s in self.instances])
        return need[:, None] <= kv[None, :]

    @cached_property
    def processing_times(self) -> np.ndarray:
        """Eq. 6: ``T_r^s = [T_prefill(s, B_r) + T_decode(s, B_r)] / b_r^s`` seconds (B_r = b copies of r)."""
        inputs = np.asarray(self.inputs, float)
        outputs = np.asarray(self.predicted_outputs, float)
        times = np.empty((len(inputs), len(self.instances)))
        for s, inst in enumerate(self.instances):
            b = self.batch_sizes[:, s]
            cost = inst.cost.as_bilinear()  # Eqs. 3–4, evaluated element-wise on the arrays
            times[:, s] = (cost.prefill_time_s(b, inputs) + cost.decode_time_s(b, inputs, outputs)) / b
        return times
