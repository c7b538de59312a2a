"""Inputs of the fleet simulator: the request arrays and the workers.

`FleetRequests` holds arrival times (s), prompt and output lengths (tokens) and optionally the
predicted output lengths the ``aladdin`` router uses (the real output when absent).  Sources: a real
trace (`FleetRequests.from_trace`, through `planner.workloads.lengths.read_trace_lengths`), a Poisson
stream from a length distribution (`FleetRequests.poisson`), or a `planner.core.types.Workload`.

`WorkerSpec` is one worker configuration: its batch-time model (`LinearBatchCost`, or `BatchTimeCost`
from a batch-time model file: `WorkerSpec.from_batchtime`), KV limit ``M``
in tokens, the scheduler preset of `planner.batching.scheduler.PRESETS` and the limits C (tokens per
batch), P (prefill tokens per batch; the preset's P applies on top, as in
`planner.batching.scheduler.effective_limits`) and R_max (running requests; None = unlimited).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from planner.errors import PlannerError
from planner.fleet.costs import BatchTimeCost, LinearBatchCost

#: Default limits of `WorkerSpec.from_aladdin` (vLLM's defaults: max_num_batched_tokens, max_num_seqs).
DEFAULT_C = 4096
DEFAULT_R_MAX = 256


@dataclass(frozen=True)
class FleetRequests:
    """Arrays of one request stream (one entry per request, any order; ties in arrival keep index order)."""

    arrival_s: np.ndarray
    input_tokens: np.ndarray
    output_tokens: np.ndarray
    predicted_output: np.ndarray | None = None
    source: str = ""

    def __post_init__(self) -> None:
        arrival = np.asarray(self.arrival_s, dtype=float)
        inp = np.asarray(self.input_tokens)
        out = np.asarray(self.output_tokens)
        n = arrival.shape[0] if arrival.ndim == 1 else -1
        arrays = {"input_tokens": inp, "output_tokens": out}
        if self.predicted_output is not None:
            arrays["predicted_output"] = np.asarray(self.predicted_output)
        if n < 1:
            raise PlannerError("the request stream is empty (no arrivals)")
        for name, values in arrays.items():
            if values.shape != (n,):
                raise PlannerError(f"{name} has shape {values.shape}, expected ({n},) like arrival_s")
            if not np.all(np.isfinite(values.astype(float))) or np.any(values.astype(float) % 1 != 0):
                raise PlannerError(f"{name} must hold whole numbers")
            if values.min() < 1:
                k = int(np.argmin(values))
                raise PlannerError(f"{name}[{k}] = {values[k]}: every request needs at least 1 token")
        if not np.all(np.isfinite(arrival)) or arrival.min() < 0:
            k = int(np.flatnonzero(~(np.isfinite(arrival) & (arrival >= 0)))[0])
            raise PlannerError(f"arrival_s[{k}] = {arrival[k]}: arrivals must be finite and ≥ 0")
        object.__setattr__(self, "arrival_s", arrival)
        for name, values in arrays.items():
            object.__setattr__(self, name, values.astype(np.int64))

    @property
    def n(self) -> int:
        return int(self.arrival_s.size)

    @property
    def predicted(self) -> np.ndarray:
        """Predicted outputs, or the real ones when none were given."""
        return self.predicted_output if self.predicted_output is not None else self.output_tokens

    @classmethod
    def from_workload(cls, workload, source: str = "workload") -> "FleetRequests":
        """From a `planner.core.types.Workload` (its predicted outputs included)."""
        return cls(workload.arrival_s, workload.input_tokens, workload.output_tokens,
                   workload.predicted_output_tokens, source)

    @classmethod
    def from_trace(cls, path: Path | str, fmt: str, *, window_s: float | None = None,
                   max_total_tokens: int | None = None, predictor=None) -> "FleetRequests":
        """A timestamped trace (``azure``, ``mooncake``): the requests arriving in ``[0, window_s)`` whose
        prompt and output are ≥ 1 token and, with ``max_total_tokens``, whose I + O fits the model's
        context (the rule of ``planner replay``); ``predictor`` (a `LengthDistribution`) gives the
        predicted outputs, else the real ones are used.  One-line errors for a trace without
        timestamps or a window with no request."""
        from planner.workloads.lengths import read_trace_lengths

        inputs, outputs, arrivals = read_trace_lengths(path, fmt)
        if arrivals is None:
            raise PlannerError(f"{path}: the {fmt} format has no timestamps; use a Poisson stream instead")
        if window_s is not None and not window_s > 0:
            raise PlannerError(f"the trace window must be positive, got {window_s}")
        fits = (inputs >= 1) & (outputs >= 1)
        if max_total_tokens is not None:
            fits &= inputs + outputs <= max_total_tokens
        in_window = arrivals < window_s if window_s is not None else np.ones(arrivals.size, bool)
        keep = fits & in_window
        if not keep.any():
            where = f" within the first {window_s:g} s" if window_s is not None else ""
            fits = f" with I + O ≤ {max_total_tokens}" if max_total_tokens is not None else ""
            raise PlannerError(f"{path}: no request of the trace{fits}{where}")
        inputs, outputs, arrivals = inputs[keep], outputs[keep], arrivals[keep]
        predicted = None
        if predictor is not None:
            predicted = np.maximum(np.asarray(predictor.predict_output(inputs)), 1)
            if max_total_tokens is not None:
                predicted = np.minimum(predicted, np.maximum(max_total_tokens - inputs, 1))
        dropped = int((in_window & ~fits).sum())
        source = f"{Path(path).name} ({fmt}, {int(keep.sum()):,} requests" + (
            f" arriving in [0, {window_s:g}) s" if window_s is not None else "") + (
            f"; {dropped:,} dropped: I + O > {max_total_tokens:,} or a 0-token prompt/output" if dropped else "") + ")"
        return cls(arrivals, inputs, outputs, predicted, source)

    @classmethod
    def poisson(cls, dist, *, rate: float, duration_s: float, seed: int = 0,
                max_total_tokens: int | None = None, name: str = "") -> "FleetRequests":
        """Poisson arrivals at ``rate`` req/s over ``[0, duration_s)`` with lengths from ``dist``
        (`planner.workloads.streams.poisson_workload`, seeded; Aladdin's predictor for the predictions)."""
        from planner.workloads.streams import poisson_workload

        if not (rate > 0 and math.isfinite(rate)):
            raise PlannerError(f"arrival rate must be a positive finite number, got {rate}")
        if not (duration_s > 0 and math.isfinite(duration_s)):
            raise PlannerError(f"duration must be a positive finite number of seconds, got {duration_s}")
        workload = poisson_workload(dist, rate=rate, duration_s=duration_s, seed=seed,
                                    max_total_tokens=max_total_tokens)
        if len(workload) == 0:
            raise PlannerError(f"no Poisson arrival within {duration_s:g} s at {rate:g} req/s (seed {seed})")
        return cls.from_workload(workload, f"Poisson {rate:g} req/s × {duration_s:g} s, "
                                           f"{name or 'lengths'} (seed {seed})")


@dataclass(frozen=True)
class WorkerSpec:
    """One worker configuration (module docstring).  ``gpus`` and ``label`` are for reports only."""

    cost: LinearBatchCost
    M: int
    scheduler: str = "sarathi"
    C: int = DEFAULT_C
    P: int | None = None
    R_max: int | None = None
    label: str = "worker"
    gpus: int = 1
    extra: dict = field(default_factory=dict, compare=False)

    def resolved(self) -> tuple[int, int, int, int, bool, bool, bool, bool]:
        """(C, P, M, R_max, prefill_first, hybrid, chunked, evict) the engine runs with; one-line errors."""
        from planner.batching.scheduler import MAX_LIMIT, preset_config

        config = preset_config(self.scheduler)
        if config.rank != "arrival":
            raise PlannerError(f"scheduler {self.scheduler!r}: the fleet engine ranks the waiting queue "
                               "by arrival only")
        for name, value in (("C", self.C), ("P", self.P), ("M", self.M), ("R_max", self.R_max)):
            if value is not None and not (isinstance(value, (int, np.integer)) and 1 <= value <= MAX_LIMIT):
                raise PlannerError(f"worker {self.label!r}: {name} must be a whole number from 1 to {MAX_LIMIT:,}, "
                                   f"got {value!r}")
        C = int(self.C)
        P = min(C, self.P if self.P is not None else C)
        if config.P is not None:
            P = min(P, config.P)
        R = int(self.R_max) if self.R_max is not None else MAX_LIMIT
        return C, P, int(self.M), R, config.priority == "prefill", config.hybrid, config.chunked, config.evict

    @classmethod
    def from_batching(cls, problem, config="vllm") -> "WorkerSpec":
        """The worker that runs `planner.batching.scheduler.simulate(problem, config)`: same limits, same
        cost model (`LinearBatchCost.from_infermax`)."""
        from dataclasses import replace

        from planner.batching.scheduler import effective_limits, preset_config

        cfg = preset_config(config) if isinstance(config, str) else config
        C, P, M, R = effective_limits(problem, cfg)
        base = cfg.name
        known = base in _preset_names()
        if not known or replace(preset_config(base), C=cfg.C, M=cfg.M, R_max=cfg.R_max, P=cfg.P) != cfg:
            raise PlannerError(f"scheduler {cfg.name!r}: only the presets of planner.batching.scheduler.PRESETS run "
                               "in the fleet engine")
        return cls(cost=LinearBatchCost.from_infermax(problem.cost), M=M, scheduler=base, C=C, P=P, R_max=R,
                   label=f"{problem.name}/{base}")

    @classmethod
    def from_aladdin(cls, model, worker, cost, *, scheduler: str = "vllm", C: int = DEFAULT_C,
                     P: int | None = None, R_max: int | None = DEFAULT_R_MAX, kv_headroom: float = 1.0,
                     source: str | None = None) -> "WorkerSpec":
        """A worker of ``worker`` (`WorkerConfig`: GPU type × TP) serving ``model`` (`LLMSpec`) under the
        `AladdinCostModel` ``cost``.  KV limit, as the placement family computes ``kv_capacity``:
        ``M = ⌊θ · M_kv / a_kv⌋`` tokens with ``M_kv = g·u·M_GPU − M_model``
        (`WorkerConfig.kv_capacity_bytes`)
        and a_kv the cost model's ``kv_bytes_per_token``; its per-request ``kv_bytes_base`` (0 in every
        shipped file) is not modelled by the token-granular engine."""
        if cost.tensor_parallel != worker.tensor_parallel:
            raise PlannerError(f"cost model fitted for TP {cost.tensor_parallel}, "
                               f"worker has TP {worker.tensor_parallel}")
        if not 0 < kv_headroom <= 1:
            raise PlannerError(f"kv_headroom must be in (0, 1], got {kv_headroom}")
        kv_bytes = worker.kv_capacity_bytes(model)
        M = int(math.floor(kv_headroom * kv_bytes / cost.kv_bytes_per_token))
        if M < 1:
            raise PlannerError(f"{model.name} does not fit on {worker.label}: "
                               f"{kv_bytes / 1e9:.1f} GB left for the KV cache")
        return cls(cost=LinearBatchCost.from_aladdin(cost, source), M=M, scheduler=scheduler, C=C, P=P, R_max=R_max,
                   label=worker.label, gpus=worker.num_gpus,
                   extra={"price_per_hour": worker.gpu.price_per_hour})

    @classmethod
    def from_batchtime(cls, model, worker, cost, *, scheduler: str = "vllm", C: int = DEFAULT_C,
                       P: int | None = None, R_max: int | None = DEFAULT_R_MAX, kv_headroom: float = 1.0,
                       source: str | None = None) -> "WorkerSpec":
        """A worker of ``worker`` (`WorkerConfig`) serving ``model`` (`LLMSpec`) under the `BatchTimeModel`
        ``cost`` (`BatchTimeCost.from_batchtime`).  KV limit as in `from_aladdin`, with a_kv the batch-time
        file's ``kv_bytes_per_token`` (the model's architecture figure when the file has none)."""
        if cost.tensor_parallel != worker.tensor_parallel:
            raise PlannerError(f"batch-time model fitted for TP {cost.tensor_parallel}, "
                               f"worker has TP {worker.tensor_parallel}")
        if not 0 < kv_headroom <= 1:
            raise PlannerError(f"kv_headroom must be in (0, 1], got {kv_headroom}")
        a_kv = cost.kv_bytes_per_token or model.kv_bytes_per_token
        kv_bytes = worker.kv_capacity_bytes(model)
        M = int(math.floor(kv_headroom * kv_bytes / a_kv))
        if M < 1:
            raise PlannerError(f"{model.name} does not fit on {worker.label}: "
                               f"{kv_bytes / 1e9:.1f} GB left for the KV cache")
        return cls(cost=BatchTimeCost.from_batchtime(cost, source), M=M, scheduler=scheduler, C=C, P=P,
                   R_max=R_max, label=worker.label, gpus=worker.num_gpus,
                   extra={"price_per_hour": worker.gpu.price_per_hour})


def _preset_names() -> tuple[str, ...]:
    from planner.batching.scheduler import PRESETS

    return tuple(PRESETS)
