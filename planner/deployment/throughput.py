"""Throughput estimators (docs/formulations.md §5.3 and a continuous-batching estimate).

**Alg. 1 (static batching), with the [P*] fixes.**  Requests are taken in sample order; a batch
``[begin..r]`` grows while ``kv_token·Σ I + (r−begin+1)·kv_token·max O ≤ KVSize(s)`` and always takes
at least one request (and at most ``max_batch``, the engine's ``max_num_seqs``; [R], vLLM default 256).
Each batch costs ``T_prefill(b, I_B) + T_decode(b, I_B, O_B)`` (Eq. 3–4, ``I_B``/``O_B`` the longest in
the batch); the loop ends when every request is batched (``≥ q``).  The machine's throughput is
``(u/t)·tokenNum/totalTime`` tokens/s (the printed ``t·…`` is a typo, see §5.3).

**Continuous-batching estimate [R]** from an Aladdin cost model (Eqs. 1–3 of §1.2), SLO-aware:
at mean input Ī and output Ō the time-averaged context of a running request is ``l̄ = Ī + Ō/2``;

* KV-limited batch ``B_kv = KVSize / (kv_token·l̄)``;
* ATGT-limited batch ``b_slo = (ATGT − c2)/(k2 + k3·l̄)`` (decode iteration ≤ ATGT);
* ``b* = min(B_kv, b_slo, max_batch)``, iteration ``τ = c2 + (k2 + k3·l̄)·b*``;
* an instance serves ``λ = 1 / (t_pre(Ī) + Ō·τ/b*)`` requests/s: each request uses the instance for
  its prefill and for ``Ō`` decode iterations shared with ``b* − 1`` others;
* infeasible when ``b* < 1`` or the prefill of a mean prompt exceeds the TTFT SLO.

The paper notes that its static estimate only preserves the ranking of TP degrees; the continuous
estimate is the one the cost plan uses by default (it carries the SLOs).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from planner.costmodels.files import find_cost_model
from planner.costmodels.models import AladdinCostModel, HeteroCostModel

#: vLLM's default max_num_seqs: the most requests one engine batches.
DEFAULT_MAX_BATCH = 256


def find_hetero_model(model: str, gpu: str, tensor_parallel: int, models_dir: Path | str | None = None) -> HeteroCostModel | None:
    found = find_cost_model("hetero", model, gpu, tensor_parallel, models_dir)
    return found if isinstance(found, HeteroCostModel) else None


def find_aladdin_model(model: str, gpu: str, tensor_parallel: int, models_dir: Path | str | None = None) -> AladdinCostModel | None:
    found = find_cost_model("aladdin", model, gpu, tensor_parallel, models_dir)
    return found if isinstance(found, AladdinCostModel) else None


@dataclass(frozen=True)
class StaticEstimate:
    """Alg. 1 result for one instance type and the machine it runs on."""

    tokens_per_s_instance: float
    tokens_per_s_machine: float
    batches: int
    total_time_s: float
    token_count: int

    def to_dict(self) -> dict:
        return asdict(self)


def static_batches(inputs: np.ndarray, outputs: np.ndarray, kv_size: float, kv_per_token: float,
                   max_batch: int = DEFAULT_MAX_BATCH) -> list[tuple[int, int]]:
    """Alg. 1's greedy batching: ``[(begin, end)]`` half-open index ranges in sample order."""
    q = len(inputs)
    batches = []
    begin = 0
    while begin < q:  # [P*] loop until every request is batched
        end = begin + 1  # [P*] at least one request per batch
        sum_in = float(inputs[begin])
        max_out = float(outputs[begin])
        while end < q and end - begin < max_batch:
            new_sum = sum_in + inputs[end]
            new_max = max(max_out, float(outputs[end]))
            if kv_per_token * new_sum + (end - begin + 1) * kv_per_token * new_max > kv_size:
                break
            sum_in, max_out = new_sum, new_max
            end += 1
        batches.append((begin, end))
        begin = end
    return batches


def static_throughput(
    cost: HeteroCostModel, *, kv_size: float, kv_per_token: float, inputs: np.ndarray, outputs: np.ndarray,
    gpus_per_machine: int, max_batch: int = DEFAULT_MAX_BATCH,
) -> StaticEstimate:
    """Alg. 1: tokens/s of one instance and of the machine (``u/t`` instances)."""
    inputs = np.asarray(inputs, dtype=float)
    outputs = np.asarray(outputs, dtype=float)
    total = 0.0
    batches = static_batches(inputs, outputs, kv_size, kv_per_token, max_batch)
    for begin, end in batches:
        b = end - begin
        longest_in = float(inputs[begin:end].max())
        longest_out = float(outputs[begin:end].max())
        total += cost.prefill_time_s(b, longest_in) + cost.decode_time_s(b, longest_in, longest_out)
    tokens = int(inputs.sum() + outputs.sum())
    per_instance = tokens / total
    instances = gpus_per_machine // cost.tensor_parallel
    return StaticEstimate(per_instance, per_instance * instances, len(batches), total, tokens)


@dataclass(frozen=True)
class CapacityEstimate:
    """Continuous-batching capacity of one instance under the SLOs."""

    feasible: bool
    reason: str
    requests_per_s: float = 0.0
    tokens_per_s: float = 0.0
    batch: float = 0.0
    bottleneck: str = ""
    iteration_s: float = 0.0
    prefill_s: float = 0.0

    def to_dict(self) -> dict:
        return asdict(self)


def continuous_capacity(
    cost: AladdinCostModel, *, kv_size: float, kv_per_token: float, mean_input: float, mean_output: float,
    ttft_s: float | None, atgt_s: float | None, max_batch: int = DEFAULT_MAX_BATCH,
) -> CapacityEstimate:
    """The SLO-constrained continuous-batching throughput of one instance (module docstring)."""
    if kv_size <= 0:
        return CapacityEstimate(False, "weights do not fit")
    context = mean_input + mean_output / 2.0
    batch_kv = kv_size / (kv_per_token * context)
    per_request = cost.decode_s_per_request + cost.decode_s_per_context_token * context
    batch_slo = float("inf") if atgt_s is None else (atgt_s - cost.decode_base_s) / per_request
    batch = min(batch_kv, batch_slo, float(max_batch))
    prefill = cost.prefill_time(mean_input)
    if ttft_s is not None and prefill > ttft_s:
        return CapacityEstimate(False, f"prefill of a mean prompt {prefill:.3f} s > TTFT {ttft_s:g} s", prefill_s=prefill)
    if batch < 1.0:
        why = "ATGT below one un-batched decode iteration" if batch_slo < 1 else "KV holds less than one mean request"
        return CapacityEstimate(False, why, batch=batch, prefill_s=prefill)
    bottleneck = "kv" if batch == batch_kv else ("slo" if batch == batch_slo else "max_batch")
    iteration = cost.decode_base_s + per_request * batch
    rate = 1.0 / (prefill + mean_output * iteration / batch)
    return CapacityEstimate(True, "", rate, rate * (mean_input + mean_output), batch, bottleneck, iteration, prefill)
