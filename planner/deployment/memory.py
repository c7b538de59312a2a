"""Memory feasibility (docs/formulations.md §5.2 Eq. 1–2).

* Eq. 1  ``KVSize(s) = t·d·φ − δ_engine − Φ·b``: bytes left for the KV cache on an instance of ``t``
  accelerators with ``d`` bytes each, engine memory fraction φ (vLLM ``gpu_memory_utilization``),
  engine overhead δ (subtracted once per instance, as written) and weights ``Φ·b``.
* Eq. 2 [P*]  ``KVSize(s) ≥ kv_token·(I_max + O_max)``: the longest request must fit.  The paper prints
  ``2·l·h·b`` bytes per token (and drops it from the inequality); that ignores grouped-query
  attention.  We use the GQA-correct ``2·l·n_kv·d_head·b`` from the model's KV heads
  (`LLMSpec.kv_bytes_per_token`): 128 KiB for Llama-3-8B instead of 512 KiB.
  `paper_kv_bytes_per_token` gives the printed value for comparison.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.core.types import GB, GPUSpec, LLMSpec

#: §5.5: vLLM gpu_memory_utilization = 0.9, δ_engine = 2 GB.
DEFAULT_MEMORY_UTILIZATION = 0.9
DEFAULT_ENGINE_OVERHEAD_GB = 2.0


def kv_size_bytes(
    model: LLMSpec, gpu: GPUSpec, tensor_parallel: int,
    memory_utilization: float = DEFAULT_MEMORY_UTILIZATION, engine_overhead_gb: float = DEFAULT_ENGINE_OVERHEAD_GB,
) -> float:
    """Eq. 1: bytes available for the KV cache on one instance (≤ 0: the weights do not fit)."""
    return tensor_parallel * gpu.memory_bytes * memory_utilization - engine_overhead_gb * GB - model.weight_bytes


def paper_kv_bytes_per_token(model: LLMSpec) -> float:
    """The paper's ``2·l·h·b^bytes`` (no GQA): for comparison only."""
    return 2.0 * model.num_layers * model.hidden_size * model.dtype_bytes


def divisors(count: int) -> list[int]:
    """Every TP degree t with ``p·t = count`` (t divides the machine's accelerator count)."""
    return [t for t in range(1, count + 1) if count % t == 0]


@dataclass(frozen=True)
class DegreeCheck:
    """Eq. 1–2 for one TP degree on one machine type."""

    tensor_parallel: int
    instances: int
    kv_size_bytes: float
    required_bytes: float
    feasible: bool
    reason: str

    @property
    def kv_size_gb(self) -> float:
        return self.kv_size_bytes / GB

    def to_dict(self) -> dict:
        return {
            "tensor_parallel": self.tensor_parallel, "instances": self.instances,
            "kv_size_gb": self.kv_size_gb, "required_gb": self.required_bytes / GB,
            "feasible": self.feasible, "reason": self.reason,
        }


def check_degrees(
    model: LLMSpec, gpu: GPUSpec, gpus_per_machine: int, *, max_input: int, max_output: int,
    memory_utilization: float = DEFAULT_MEMORY_UTILIZATION, engine_overhead_gb: float = DEFAULT_ENGINE_OVERHEAD_GB,
    degrees: list[int] | None = None,
) -> list[DegreeCheck]:
    """Eq. 1–2 for every divisor t of the machine's accelerator count (or the given ``degrees``)."""
    required = model.kv_bytes_per_token * (max_input + max_output)
    checks = []
    for t in degrees if degrees is not None else divisors(gpus_per_machine):
        kv = kv_size_bytes(model, gpu, t, memory_utilization, engine_overhead_gb)
        if kv <= 0:
            reason = f"weights ({model.weight_bytes / GB:.2f} GB) + engine do not fit in {t} x {gpu.memory_gb:g} GB"
        elif kv < required:
            reason = (f"KV {kv / GB:.2f} GB < {required / GB:.2f} GB needed by the longest request "
                      f"({max_input}+{max_output} tokens)")
        else:
            reason = ""
        checks.append(DegreeCheck(t, gpus_per_machine // t, kv, required, not reason, reason))
    return checks
