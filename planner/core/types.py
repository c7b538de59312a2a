"""Frozen, validated problem data shared by every formulation family.

All types are pydantic models with ``frozen=True`` and ``extra="forbid"``: a
typo in an instance file is an error, not a silently ignored key, and nothing
mutates problem data after validation.

Units: times in seconds, memory in bytes (GPU memory is given in decimal GB as
marketed and converted with 1 GB = 1e9 bytes), lengths in tokens.
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, Annotated

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt, model_validator

from planner.core.io import MAX_REQUEST_TOKENS, NotBool

if TYPE_CHECKING:
    import pandas as pd

GB = 1e9


class Frozen(BaseModel):
    """Frozen, strict base: unknown keys are errors; derived data may be cached.

    ``cached_property`` values live in the instance ``__dict__``; pydantic's
    ``model_copy`` would copy them into a copy with *updated* fields, so they
    are dropped here and recomputed on first use.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", ignored_types=(cached_property,), protected_namespaces=())

    def model_copy(self, *, update=None, deep: bool = False):  # type: ignore[override]
        copy = super().model_copy(update=update, deep=deep)
        for klass in type(self).__mro__:
            for name, attr in vars(klass).items():
                if isinstance(attr, cached_property):
                    copy.__dict__.pop(name, None)
        return copy


_Frozen = Frozen


class LLMSpec(_Frozen):
    """Architecture of a decoder-only transformer, enough for memory and KV sizing."""

    name: str = Field(min_length=1)
    num_layers: PositiveInt
    hidden_size: PositiveInt
    num_attention_heads: PositiveInt
    num_kv_heads: PositiveInt
    head_dim: PositiveInt
    num_parameters: PositiveInt
    dtype_bytes: PositiveFloat = 2.0
    max_context_tokens: PositiveInt = 4096

    @model_validator(mode="after")
    def _heads_consistent(self) -> "LLMSpec":
        if self.num_kv_heads > self.num_attention_heads:
            raise ValueError("num_kv_heads cannot exceed num_attention_heads")
        if self.num_attention_heads % self.num_kv_heads:
            raise ValueError("num_attention_heads must be a multiple of num_kv_heads (GQA groups)")
        return self

    @property
    def weight_bytes(self) -> float:
        """Bytes of weights: parameters × bytes per parameter."""
        return float(self.num_parameters) * self.dtype_bytes

    @property
    def kv_bytes_per_token(self) -> float:
        """KV-cache bytes per token: 2 (K and V) × layers × KV heads × head dim × bytes (GQA-correct)."""
        return 2.0 * self.num_layers * self.num_kv_heads * self.head_dim * self.dtype_bytes


class GPUSpec(_Frozen):
    """One accelerator SKU."""

    name: str = Field(min_length=1)
    memory_gb: PositiveFloat
    price_per_hour: PositiveFloat | None = None
    memory_bandwidth_gb_s: PositiveFloat | None = None
    fp16_tflops: PositiveFloat | None = None

    @property
    def memory_bytes(self) -> float:
        return self.memory_gb * GB


class WorkerConfig(_Frozen):
    """A serving worker: ``tensor_parallel`` GPUs of one type running one model replica.

    ``memory_utilization`` is the fraction of GPU memory the engine may use
    (vLLM's ``gpu_memory_utilization``).  Aladdin's KV capacity is
    ``M_kv(g) = g·M_GPU − M_model`` [P]; with utilization u it is
    ``g·u·M_GPU − M_model``.  The default 1.0 reproduces the paper.
    """

    gpu: GPUSpec
    tensor_parallel: PositiveInt = 1
    memory_utilization: Annotated[float, Field(gt=0.0, le=1.0)] = 1.0

    def kv_capacity_bytes(self, model: LLMSpec) -> float:
        """Bytes left for the KV cache after the weights (may be ≤ 0: weights do not fit)."""
        usable = self.tensor_parallel * self.memory_utilization * self.gpu.memory_bytes
        return usable - model.weight_bytes

    @property
    def num_gpus(self) -> int:
        return self.tensor_parallel

    @property
    def label(self) -> str:
        return f"{self.gpu.name}x{self.tensor_parallel}"


class SLOClass(_Frozen):
    """Service-level objectives of one request class; unset fields are not constrained.

    ``atgt_s`` is Aladdin's average token generation time (decode time / output
    tokens), the same quantity other papers call TPOT.
    """

    ttft_s: PositiveFloat | None = None
    atgt_s: PositiveFloat | None = None
    e2e_s: PositiveFloat | None = None


class SLOSet(_Frozen):
    """SLOs per request class (``slo_class`` column of the workload)."""

    classes: dict[str, SLOClass]

    @model_validator(mode="after")
    def _not_empty(self) -> "SLOSet":
        if not self.classes:
            raise ValueError("at least one SLO class is required")
        return self

    def __getitem__(self, name: str) -> SLOClass:
        return self.classes[name]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.classes)


#: A request's token count: a positive integer (not a boolean) of at most `MAX_REQUEST_TOKENS`.
RequestTokens = Annotated[int, NotBool, Field(gt=0, le=MAX_REQUEST_TOKENS)]


class Request(_Frozen):
    """One inference request — the request type of every family that plans individual requests.

    Units are in the field names: ``request_id``; ``arrival_s``, the arrival time in seconds (≥ 0, finite);
    ``input_tokens``, the prompt length I; ``output_tokens``, the true output length O (the tokens the
    request generates; known in traces and to InferMax's offline schedule).  Token counts are positive
    integers of at most `MAX_REQUEST_TOKENS`; booleans are refused rather than read as 0/1.

    Batching instances hold `Request` itself; placement, capacity, the fleet simulator and the online
    replay hold `PlannedRequest`, which adds what the planner may use before the request runs."""

    request_id: str = Field(min_length=1)
    arrival_s: Annotated[float, NotBool, Field(ge=0.0, allow_inf_nan=False)] = 0.0
    input_tokens: RequestTokens
    output_tokens: RequestTokens

    @property
    def kv_need(self) -> int:
        """KV tokens held at the last token: ``I + O − 1`` (the last token is never stored)."""
        return self.input_tokens + self.output_tokens - 1

    def as_request(self) -> "Request":
        """This request as a plain `Request` (the fields above only; a `PlannedRequest`'s prediction and
        SLO class are dropped)."""
        if type(self) is Request:
            return self
        return Request(request_id=self.request_id, arrival_s=self.arrival_s, input_tokens=self.input_tokens,
                       output_tokens=self.output_tokens)


class PlannedRequest(Request):
    """A `Request` as a planner sees it before it runs: ``predicted_output_tokens``, the output length
    the planner may use (Aladdin plans with a prediction; ``output_tokens`` stays the true length, used
    by the online replay and the simulators), and ``slo_class``, the key of its SLOs in an `SLOSet`.
    The prediction is required: a placement input without it is refused, never read as the true length."""

    predicted_output_tokens: RequestTokens
    slo_class: str = "default"


class Workload(_Frozen):
    """An ordered collection of requests with unique ids."""

    requests: tuple[PlannedRequest, ...]

    @model_validator(mode="after")
    def _unique_ids(self) -> "Workload":
        seen: set[str] = set()
        for r in self.requests:
            if r.request_id in seen:
                raise ValueError(f"duplicate request_id {r.request_id!r}")
            seen.add(r.request_id)
        return self

    def __len__(self) -> int:
        return len(self.requests)

    def __iter__(self):  # type: ignore[override]
        return iter(self.requests)

    @cached_property
    def input_tokens(self) -> np.ndarray:
        return np.array([r.input_tokens for r in self.requests], dtype=np.int64)

    @cached_property
    def output_tokens(self) -> np.ndarray:
        return np.array([r.output_tokens for r in self.requests], dtype=np.int64)

    @cached_property
    def predicted_output_tokens(self) -> np.ndarray:
        return np.array([r.predicted_output_tokens for r in self.requests], dtype=np.int64)

    @cached_property
    def arrival_s(self) -> np.ndarray:
        return np.array([r.arrival_s for r in self.requests], dtype=float)

    def to_frame(self) -> pd.DataFrame:
        import pandas as pd  # lazily: pandas costs half a second of every CLI start

        return pd.DataFrame([r.model_dump() for r in self.requests])
