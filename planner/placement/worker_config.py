"""Worker configuration (Aladdin Eqs. 5–6): GPUs per worker maximising per-GPU decode throughput.

For a tensor-parallel degree g with decode model ``t(b, g) = k2(g)·b + k3(g)·b·l̄ + c2(g)`` (Eq. 3
at mean context l̄ per request):

* KV capacity ``M_kv(g) = g·u·M_GPU − M_model``; ``B_kv(g) = M_kv(g) / k̄v`` requests, with
  ``k̄v = a_kv·(Ī + Ō/2) + b_kv`` the time-averaged KV of a request (its context grows from
  I to I + O while it decodes);
* ``b_slo(g)`` solves ``t(b_slo, g) = t_atgt``: ``b_slo = (t_atgt − c2)/(k2 + k3·l̄)``;
* Eq. 6: ``thr(g) = (1/g)·min(B_kv/t(B_kv), b_slo/t_atgt)`` tokens/s per GPU.  Since b/t(b)
  grows with b, this is ``b*/t(b*)/g`` with ``b* = min(B_kv, b_slo)``; the smaller of the two
  names the bottleneck (KV cache full, or iteration time at the SLO).

``l̄ = Ī + Ō/2`` uses the workload's mean input and output lengths.  g* = argmax thr(g) over
feasible g; it does not depend on the arrival rate.  A row's source says "derived" for a model
file whose provenance starts with "DERIVED" (not fitted to measurements of that model, e.g.
``models/aladdin/llama-2-13b__*``, written by ``models/derive_llama2_13b.py``).

Eq. 5 (extrapolation only, [R] docs/formulations.md §1.2): degrees without a fitted model get each
decode coefficient from ``coef(g) = A/g + B`` (compute split over g GPUs plus a constant
part), least squares over the fitted degrees (at least two); such rows say "Eq. 5".
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from planner.core.types import GPUSpec, LLMSpec, WorkerConfig
from planner.costmodels.files import find_cost_model
from planner.costmodels.models import AladdinCostModel, cost_model_caveats


@dataclass(frozen=True)
class WorkerOption:
    tensor_parallel: int
    feasible: bool
    reason: str
    cost_source: str = ""
    kv_capacity_gb: float = 0.0
    #: codes of the cost-model file's caveats (``above_target``, ``derived_from_other_model`` …)
    cost_caveats: tuple[str, ...] = ()
    batch_kv: float = 0.0
    batch_slo: float = 0.0
    batch: float = 0.0
    bottleneck: str = ""
    iteration_s: float = 0.0
    tokens_per_s_per_gpu: float = 0.0
    usd_per_million_tokens: float | None = None

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class WorkerConfigReport:
    model: str
    gpu: str
    atgt_s: float
    mean_input: float
    mean_output: float
    options: tuple[WorkerOption, ...]

    @property
    def best(self) -> WorkerOption | None:
        feasible = [o for o in self.options if o.feasible]
        return max(feasible, key=lambda o: (o.tokens_per_s_per_gpu, -o.tensor_parallel)) if feasible else None

    def to_dict(self) -> dict:
        best = self.best
        return {
            "model": self.model,
            "gpu": self.gpu,
            "atgt_s": self.atgt_s,
            "mean_input": self.mean_input,
            "mean_output": self.mean_output,
            "best_tensor_parallel": best.tensor_parallel if best else None,
            "options": [o.to_dict() for o in self.options],
        }


def _extrapolate(fitted: dict[int, AladdinCostModel], g: int) -> AladdinCostModel | None:
    """Eq. 5: each decode coefficient as A/g + B fitted over the available degrees."""
    if len(fitted) < 2:
        return None
    degrees = np.array(sorted(fitted), dtype=float)
    X = np.column_stack([1.0 / degrees, np.ones_like(degrees)])
    coefs = {}
    for name in ("decode_s_per_request", "decode_s_per_context_token", "decode_base_s", "prefill_s_per_token", "prefill_base_s"):
        y = np.array([getattr(fitted[int(d)], name) for d in degrees])
        sol, *_ = np.linalg.lstsq(X, y, rcond=None)
        coefs[name] = float(max(sol[0] / g + sol[1], 0.0))
    ref = fitted[int(degrees[0])]
    return ref.model_copy(
        update={**coefs, "tensor_parallel": g, "fit": None, "provenance": f"Eq. 5 extrapolation from degrees {sorted(fitted)}"}
    )


def worker_configurations(
    model: LLMSpec,
    gpu: GPUSpec,
    *,
    atgt_s: float,
    mean_input: float,
    mean_output: float,
    degrees: tuple[int, ...] = (1, 2, 4, 8),
    memory_utilization: float = 1.0,
    cost_models: dict[int, AladdinCostModel] | None = None,
    models_dir: str | None = None,
) -> WorkerConfigReport:
    """Evaluate Eq. 6 for every degree; cost models come from ``cost_models`` or the models directory."""
    fitted: dict[int, AladdinCostModel] = dict(cost_models or {})
    if cost_models is None:
        for g in degrees:
            found = find_cost_model("aladdin", model.name, gpu.name, g, models_dir)
            if isinstance(found, AladdinCostModel):
                fitted[g] = found
    context = mean_input + mean_output / 2.0
    options = []
    for g in degrees:
        worker = WorkerConfig(gpu=gpu, tensor_parallel=g, memory_utilization=memory_utilization)
        kv_bytes = worker.kv_capacity_bytes(model)
        if kv_bytes <= 0:
            options.append(WorkerOption(g, False, f"weights ({model.weight_bytes / 1e9:.1f} GB) do not fit in "
                                                  f"{g} x {gpu.memory_gb:g} GB", kv_capacity_gb=kv_bytes / 1e9))
            continue
        cost = fitted.get(g)
        source = "" if cost is None else "derived" if cost.provenance.startswith("DERIVED") else "fitted"
        if cost is None:
            cost = _extrapolate(fitted, g)
            source = "Eq. 5 extrapolation" if cost is not None else ""
        if cost is None:
            options.append(WorkerOption(g, False, "no cost model for this degree (fit one with `planner fit`)",
                                        kv_capacity_gb=kv_bytes / 1e9))
            continue
        kv_per_request = cost.kv_bytes_per_token * context + cost.kv_bytes_base
        batch_kv = kv_bytes / kv_per_request
        per_request = cost.decode_s_per_request + cost.decode_s_per_context_token * context
        batch_slo = (atgt_s - cost.decode_base_s) / per_request
        if batch_slo < 1.0:
            options.append(WorkerOption(g, False, f"ATGT SLO {atgt_s:g} s is below the un-batched decode iteration "
                                                  f"{cost.decode_base_s + per_request:.4f} s", source,
                                        kv_capacity_gb=kv_bytes / 1e9, batch_kv=batch_kv, batch_slo=batch_slo))
            continue
        if batch_kv < 1.0:
            options.append(WorkerOption(g, False, "KV cache holds less than one average request", source,
                                        kv_capacity_gb=kv_bytes / 1e9, batch_kv=batch_kv, batch_slo=batch_slo))
            continue
        batch = min(batch_kv, batch_slo)
        caveats = tuple(c.split(":", 1)[0] for c in cost_model_caveats(cost))
        iteration = cost.decode_base_s + per_request * batch
        thr = batch / iteration / g
        price = gpu.price_per_hour
        usd = price / 3600.0 / thr * 1e6 if price else None
        options.append(
            WorkerOption(
                tensor_parallel=g,
                feasible=True,
                reason="",
                cost_source=source,
                cost_caveats=caveats,
                kv_capacity_gb=kv_bytes / 1e9,
                batch_kv=batch_kv,
                batch_slo=batch_slo,
                batch=batch,
                bottleneck="kv" if batch_kv < batch_slo else "slo",
                iteration_s=iteration,
                tokens_per_s_per_gpu=thr,
                usd_per_million_tokens=usd,
            )
        )
    return WorkerConfigReport(model.name, gpu.name, atgt_s, mean_input, mean_output, tuple(options))
