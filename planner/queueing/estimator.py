"""QLM's request-waiting-time (RWT) estimator (docs/formulations.md §4.1, Eqs. 1–5 and 14–22).

Throughput Θ per (model, GPU type, TP) comes from the foundation's Aladdin cost model
(`planner.costmodels.files.find_cost_model("aladdin", model, gpu, tp)`) and the catalog's
memory sizes, following the appendix:

* batch size (Eq. 16): ``B = min(max_batch, KV tokens / (μ_I + μ_O))`` with
  ``KV tokens = (tp · memory · utilization − weight bytes) / kv_bytes_per_token``;
* per-token decode time ``d`` = one decode iteration of ``B`` requests whose mean context is
  ``μ_I + μ_O/2`` (Aladdin Eq. 3: ``k2·B + k3·B·(μ_I + μ_O/2) + c2``);
* throughput (Eq. 15): ``Θ = B / (d · ε)`` output tokens per second, ε = batching inefficiency;
* prefill ``P`` = Aladdin Eq. 2 for one prompt of ``μ_I`` tokens.

So heterogeneous instances (A100 vs H100, TP 1 vs 4) get different Θ, P and d.

Per group of ``n`` requests (Eqs. 2–4):

* ``work = n·μ_O / Θ`` (mean mode) or ``(n·μ_O + z·√n·σ_O)/Θ`` (quantile mode, z from the
  quantile; additive per group, hence an upper bound of the CLT quantile of the whole queue);
* conservative mode for short queues: groups with fewer than ``conservative_below`` requests use
  ``n·O_max/Θ`` (the CLT is unreliable for few requests; QLM reports R² = 0.99 only with ≥ 4 groups);
* ``tail = P + O_max·ε·d`` (Eq. 4 with the model's maximum output, conservative), so a group's
  completion estimate is ``start + work + tail`` (Eq. 1, Eq. 5 = the last request of the group).

`queue_waiting_quantile` is the estimator's exact CLT statement (Eq. 3) for a whole queue.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from statistics import NormalDist

import numpy as np

from planner.catalog import find_gpu, find_model
from planner.costmodels.files import find_cost_model
from planner.costmodels.models import AladdinCostModel
from planner.errors import PlannerError


@dataclass(frozen=True)
class EstimatorSettings:
    epsilon: float = 1.1  # continuous-batching inefficiency ε (≥ 1)
    quantile: float | None = None  # None: mean estimate; e.g. 0.99 for the p99 of Eq. 3
    conservative_below: int = 0  # groups with fewer requests use O_max per request
    max_batch_size: int = 256
    memory_utilization: float = 0.9


@dataclass(frozen=True)
class ServingRates:
    """Θ, P and d of one model on one instance type for one token mix."""

    batch_size: float
    decode_s_per_token: float  # d
    throughput_tokens_per_s: float  # Θ
    prefill_s: float  # P
    source: str


def instance_fits(model: str, gpu: str, tensor_parallel: int, utilization: float = 0.9) -> bool:
    """Weights fit in ``tensor_parallel`` GPUs with room for at least one KV token."""
    llm, spec = find_model(model), find_gpu(gpu)
    if llm is None or spec is None:
        return False
    return llm.weight_bytes < tensor_parallel * utilization * spec.memory_bytes


def serving_rates(
    cost: AladdinCostModel, model: str, gpu: str, mean_input: float, mean_output: float,
    settings: EstimatorSettings,
) -> ServingRates:
    """Θ, P, d from an Aladdin cost model (see the module docstring)."""
    llm, spec = find_model(model), find_gpu(gpu)
    if llm is None or spec is None:
        raise PlannerError(f"unknown model or GPU ({model!r} on {gpu!r})")
    usable = cost.tensor_parallel * settings.memory_utilization * spec.memory_bytes - llm.weight_bytes
    kv_tokens = usable / cost.kv_bytes_per_token
    per_request = max(mean_input + mean_output, 1.0)
    batch = float(min(settings.max_batch_size, max(1.0, math.floor(kv_tokens / per_request))))
    d = cost.decode_time(batch, batch * (mean_input + mean_output / 2.0))
    theta = batch / (d * settings.epsilon)
    return ServingRates(batch, d, theta, cost.prefill_time(mean_input), cost.provenance.split(";")[0][:80])


def rates_for(model: str, gpu: str, tensor_parallel: int, mean_input: float, mean_output: float,
              settings: EstimatorSettings, models_dir: str | None = None) -> ServingRates | None:
    """Rates of ``model`` on (gpu, tp), or None when the weights do not fit; error without a cost model."""
    if not instance_fits(model, gpu, tensor_parallel, settings.memory_utilization):
        return None
    cost = _cost_model(model, gpu, tensor_parallel, models_dir)
    if cost is None or not isinstance(cost, AladdinCostModel):
        raise PlannerError(
            f"no Aladdin cost model for {model} on {gpu} with TP {tensor_parallel}; fit one with `planner fit`"
        )
    return serving_rates(cost, model, gpu, mean_input, mean_output, settings)


@lru_cache(maxsize=256)
def _cost_model(model: str, gpu: str, tensor_parallel: int, models_dir: str | None):
    """The shipped Aladdin cost model (cached: a file read per (model, GPU, TP), not per group)."""
    return find_cost_model("aladdin", model, gpu, tensor_parallel, models_dir)


def group_work_s(num_requests: int, mean_output: float, std_output: float, max_output: float,
                 theta: float, settings: EstimatorSettings) -> float:
    """Eq. 2/3 for one group: seconds of instance time its output tokens take."""
    if num_requests < settings.conservative_below:
        return num_requests * max_output / theta
    tokens = num_requests * mean_output
    if settings.quantile is not None:
        tokens += NormalDist().inv_cdf(settings.quantile) * math.sqrt(num_requests) * std_output
    return tokens / theta


def group_tail_s(rates: ServingRates, max_output: float, settings: EstimatorSettings) -> float:
    """Eq. 1/4: prefill plus the decode of the group's last request (O_max·ε·d)."""
    return rates.prefill_s + max_output * settings.epsilon * rates.decode_s_per_token


def queue_waiting_quantile(counts: np.ndarray, means: np.ndarray, stds: np.ndarray, theta: float,
                           quantile: float | None) -> float:
    """Eq. 3: waiting time of a request behind groups with these (count, μ_O, σ_O), at a quantile."""
    mean = float(np.dot(counts, means))
    if quantile is None:
        return mean / theta
    std = math.sqrt(float(np.dot(counts, np.square(stds))))
    return (mean + NormalDist().inv_cdf(quantile) * std) / theta
