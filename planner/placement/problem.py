"""Problem data of Aladdin's placement (one scheduling heartbeat), frozen and validated.

A `PlacementProblem` holds the requests of one heartbeat: *new* requests to
place and *ongoing* requests already decoding on a known worker (no migration).
Workers are identical: one model replica on ``tensor_parallel`` GPUs of one
type, with the Aladdin cost model fitted for that configuration.

`PlacementArrays` derives the per-request quantities the formulation and the
heuristics use.  The independent validator (`planner.placement.validator`)
deliberately does **not** use them: it recomputes everything from the raw
fields below.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Annotated, Literal

import numpy as np
from pydantic import Field, NonNegativeInt, model_validator

from planner.core.io import NotBool
from planner.core.types import Frozen, LLMSpec, PlannedRequest, SLOSet, WorkerConfig
from planner.costmodels.models import AladdinCostModel


_Frozen = Frozen


class OngoingState(_Frozen):
    """An ongoing request: the worker it decodes on, tokens generated so far, decode time so far (finite)."""

    worker: NonNegativeInt
    generated_tokens: NonNegativeInt
    decode_s: Annotated[float, NotBool, Field(ge=0.0, allow_inf_nan=False)] = 0.0


class PlacementOptions(_Frozen):
    """Knobs of the placement MIP.

    * ``mode``: ``colocated`` (vLLM default: prefill and decode on the same
      worker; TTFT and prefill-preemption constraints apply) or
      ``decode_only`` (split-phase serving: only decode workers are placed, as
      in Aladdin §6.4; no TTFT/prefill constraints).
    * ``strictness`` λ ∈ [0, 1] (Aladdin's "strictness knob"; 0.5 meets ATGT on
      average, see the formulation docstring).
    * ``kv_headroom`` θ ∈ (0, 1]: fraction of the KV cache the plan may fill.
    * ``max_workers``: an inventory cap on the total worker count (optional).
    """

    mode: Literal["colocated", "decode_only"] = "colocated"
    strictness: Annotated[float, NotBool, Field(ge=0.0, le=1.0)] = 0.5
    kv_headroom: Annotated[float, NotBool, Field(gt=0.0, le=1.0)] = 1.0
    max_workers: Annotated[int, NotBool, Field(gt=0)] | None = None


class PlacementProblem(_Frozen):
    name: str = "placement"
    model: LLMSpec
    worker: WorkerConfig
    cost: AladdinCostModel
    slos: SLOSet
    requests: tuple[PlannedRequest, ...]
    ongoing: dict[str, OngoingState] = Field(default_factory=dict)
    options: PlacementOptions = PlacementOptions()

    @model_validator(mode="after")
    def _consistent(self) -> "PlacementProblem":
        if not self.requests:
            raise ValueError("requests: at least one request is required")
        ids = [r.request_id for r in self.requests]
        if len(set(ids)) != len(ids):
            dup = next(i for i in ids if ids.count(i) > 1)
            raise ValueError(f"requests: duplicate request_id {dup!r}")
        known = set(ids)
        for rid in self.ongoing:
            if rid not in known:
                raise ValueError(f"ongoing: request {rid!r} is not among the requests")
        if self.cost.tensor_parallel != self.worker.tensor_parallel:
            raise ValueError(
                f"cost model is for tensor_parallel={self.cost.tensor_parallel} but the worker has "
                f"tensor_parallel={self.worker.tensor_parallel}"
            )
        if self.worker.kv_capacity_bytes(self.model) <= 0:
            raise ValueError(
                f"weights of {self.model.name} ({self.model.weight_bytes / 1e9:.1f} GB) do not fit in "
                f"{self.worker.tensor_parallel} x {self.worker.gpu.name} "
                f"({self.worker.tensor_parallel * self.worker.memory_utilization * self.worker.gpu.memory_gb:.1f} GB usable)"
            )
        for r in self.requests:
            if r.slo_class not in self.slos.classes:
                raise ValueError(f"request {r.request_id!r}: unknown slo_class {r.slo_class!r}")
            slo = self.slos[r.slo_class]
            if slo.atgt_s is None:
                raise ValueError(f"slos.{r.slo_class}.atgt_s: required by the placement family")
            if slo.atgt_s <= self.cost.decode_base_s + self.cost.decode_s_per_request:
                raise ValueError(
                    f"slos.{r.slo_class}.atgt_s: {slo.atgt_s} s is not above the un-batched decode "
                    f"iteration time {self.cost.decode_base_s + self.cost.decode_s_per_request:.4f} s "
                    "of the cost model; no batch can meet it"
                )
            if self.options.mode == "colocated" and r.request_id not in self.ongoing and slo.ttft_s is None:
                raise ValueError(f"slos.{r.slo_class}.ttft_s: required for new requests in colocated mode")
        return self

    @property
    def num_requests(self) -> int:
        return len(self.requests)

    @cached_property
    def arrays(self) -> "PlacementArrays":
        return PlacementArrays.from_problem(self)


@dataclass(frozen=True)
class PlacementArrays:
    """Per-request quantities derived once from a `PlacementProblem`.

    Symbols (docs/formulations.md §1): I input tokens, ô predicted output, g
    generated so far, τ decode seconds so far, λ strictness, θ headroom.

    * ``remaining`` r = max(ô − g, 1): decode iterations still to run.  A
      running request whose prediction was reached (g ≥ ô) still needs at
      least one more iteration; Alg. 2 re-predicts it before the next
      heartbeat.
    * ``context`` I + g; ``ell`` ℓ(λ) = I + g + λ·max(ô − g, 0) (M2).
    * ``atgt_load`` k3·ℓ + k2: the request's share of a decode iteration (s).
    * ``kv_base`` (I + g + b_kv/a_kv): KV tokens-equivalent at its first
      iteration; at iteration t ≤ r it holds ``kv_base + t − 1``.
    """

    num_requests: int
    request_ids: tuple[str, ...]
    is_new: np.ndarray
    ongoing_worker: np.ndarray  # worker label, −1 for new requests
    input_tokens: np.ndarray
    predicted_output: np.ndarray
    generated: np.ndarray
    decode_s: np.ndarray
    remaining: np.ndarray
    context: np.ndarray
    ell: np.ndarray
    atgt_load: np.ndarray
    atgt_limit: np.ndarray  # per request: its class's ATGT SLO (s)
    ttft_limit: np.ndarray  # per request: its class's TTFT SLO (s), inf if none / not applicable
    prefill_load: np.ndarray  # k1·I for new requests (s), 0 for ongoing
    kv_base: np.ndarray
    kv_capacity: float  # θ·M_kv / a_kv in tokens-equivalent
    decode_base_s: float  # c2
    prefill_base_s: float  # c1
    colocated: bool
    ongoing_labels: np.ndarray  # sorted distinct worker labels of ongoing requests
    preemption_slack: np.ndarray  # per ongoing worker label (aligned with ongoing_labels): min(t_atgt·g − τ)
    max_workers: int | None

    @classmethod
    def from_problem(cls, p: PlacementProblem) -> "PlacementArrays":
        n = p.num_requests
        cost = p.cost
        lam = p.options.strictness
        ids = tuple(r.request_id for r in p.requests)
        inp = np.array([r.input_tokens for r in p.requests], dtype=float)
        pred = np.array([r.predicted_output_tokens for r in p.requests], dtype=float)
        state = [p.ongoing.get(rid) for rid in ids]
        is_new = np.array([s is None for s in state])
        gen = np.array([0.0 if s is None else s.generated_tokens for s in state])
        dec = np.array([0.0 if s is None else s.decode_s for s in state])
        worker = np.array([-1 if s is None else s.worker for s in state], dtype=np.int64)
        remaining = np.maximum(pred - gen, 1.0)
        context = inp + gen
        ell = context + lam * np.maximum(pred - gen, 0.0)
        atgt_limit = np.array([p.slos[r.slo_class].atgt_s for r in p.requests], dtype=float)
        colocated = p.options.mode == "colocated"
        ttft = np.array(
            [
                (p.slos[r.slo_class].ttft_s if (colocated and new and p.slos[r.slo_class].ttft_s) else np.inf)
                for r, new in zip(p.requests, is_new)
            ],
            dtype=float,
        )
        prefill = np.where(is_new & colocated, cost.prefill_s_per_token * inp, 0.0)
        kv_capacity = p.options.kv_headroom * p.worker.kv_capacity_bytes(p.model) / cost.kv_bytes_per_token
        labels = np.unique(worker[~is_new])
        slack = np.array(
            [
                np.min(atgt_limit[worker == lab] * gen[worker == lab] - dec[worker == lab])
                for lab in labels
            ],
            dtype=float,
        )
        return cls(
            num_requests=n,
            request_ids=ids,
            is_new=is_new,
            ongoing_worker=worker,
            input_tokens=inp,
            predicted_output=pred,
            generated=gen,
            decode_s=dec,
            remaining=remaining,
            context=context,
            ell=ell,
            atgt_load=cost.decode_s_per_context_token * ell + cost.decode_s_per_request,
            atgt_limit=atgt_limit,
            ttft_limit=ttft,
            prefill_load=prefill,
            kv_base=context + cost.kv_bytes_base / cost.kv_bytes_per_token,
            kv_capacity=float(kv_capacity),
            decode_base_s=cost.decode_base_s,
            prefill_base_s=cost.prefill_base_s,
            colocated=colocated,
            ongoing_labels=labels,
            preemption_slack=slack,
            max_workers=p.options.max_workers,
        )

    @property
    def new_indices(self) -> np.ndarray:
        return np.flatnonzero(self.is_new)

    @property
    def num_ongoing_workers(self) -> int:
        return int(self.ongoing_labels.size)

    def kv_peak_alone(self) -> np.ndarray:
        """KV tokens-equivalent of each request at its own last iteration."""
        return self.kv_base + self.remaining - 1.0


def normalised_size(a: PlacementArrays) -> np.ndarray:
    """Largest share of one worker a request takes in any dimension (ATGT, KV peak, prefill)."""
    t_max = float(a.atgt_limit.max())
    shares = [a.atgt_load / (t_max - a.decode_base_s), a.kv_peak_alone() / a.kv_capacity]
    if a.colocated and np.isfinite(a.ttft_limit[a.is_new]).any():
        t = float(a.ttft_limit[a.is_new].max())
        shares.append(a.prefill_load / max(t - a.prefill_base_s, 1e-12))
    return np.max(np.vstack(shares), axis=0)
