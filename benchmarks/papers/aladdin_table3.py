"""Aladdin Table 3 (best GPUs per worker on A100: 70B → 2, 13B → 1, 7B → 1) and its sensitivity to memory.

Eq. 6 as `planner plan worker-config` evaluates it (`planner.placement.worker_config`): per-GPU decode
throughput at the batch that fills the KV cache or meets the ATGT SLO, whichever is smaller.

Paper setting (§4.1, §6.1): KV capacity = "the sum of the GPUs' memory on each worker minus the model
size" (memory utilisation u = 1, nothing reserved), ATGT SLOs of Table 2 (70B 75 ms, 13B 30 ms, 7B
15 ms), ShareGPT lengths (the project's `sharegpt` distribution), A100 80 GB, 4 GPUs per server
(degrees 1, 2, 4; `--degrees` to change).  Cost models: the shipped `models/aladdin/` files (70B:
Splitwise end-to-end fits at TP ≥ 2, Vidur composition at TP 1; 7B: Vidur composition; 13B:
DERIVED from the 7B files by `models/derive_llama2_13b.py`).

Sensitivity (second table): u swept, under three readings of the memory each worker has:

* ``80e9``: the catalog's 80 GB read as 80·10⁹ bytes (what `plan worker-config` uses);
* ``80GiB``: the device's 80 GiB = 85.9·10⁹ bytes (nvidia-smi reports 81,920 MiB; vLLM's
  gpu_memory_utilization multiplies the total CUDA reports, close to this);
* ``80GiB-2GB``: as ``80GiB`` with 2 GB per GPU reserved inside the budget for activations and
  engine state (vLLM profiles a peak forward pass before sizing the KV cache; 2 GB is an ASSUMED
  round figure, the heterogeneous-cluster paper's δ_engine, not a measurement).

The last table gives, per reading, the lowest u at which 70B → 2 still holds (bisection on u).

Usage:  python benchmarks/papers/aladdin_table3.py [--degrees 1,2,4] [--workload sharegpt]
        [--out FILE | --update-results]
(stdout; also benchmarks/_runs/papers_aladdin_table3.md unless --out / --update-results, which writes
the committed benchmarks/results/papers_aladdin_table3.md).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent))

from results_paths import add_output_options, command_args, output_path  # noqa: E402

from planner.catalog import find_gpu, find_model  # noqa: E402
from planner.placement.worker_config import worker_configurations  # noqa: E402
from planner.workloads.streams import find_distribution  # noqa: E402

MODELS = {"Llama-2-70B": 0.075, "Llama-2-13B": 0.030, "Llama-2-7B": 0.015}  # Aladdin Table 2 ATGT SLOs
PAPER = {"Llama-2-70B": 2, "Llama-2-13B": 1, "Llama-2-7B": 1}  # Aladdin Table 3, A100 column
GIB = 2**30 / 1e9
READINGS = {"80e9": (80.0, 0.0), "80GiB": (80.0 * GIB, 0.0), "80GiB-2GB": (80.0 * GIB, 2.0)}
UTILISATIONS = (0.80, 0.85, 0.88, 0.90, 0.92, 0.95, 1.00)


def report(model: str, degrees, dist, u: float = 1.0, reading: str = "80e9"):
    gpu = find_gpu("A100-80GB-SXM")
    memory, reserve = READINGS[reading]
    # kv = t·(u·M − reserve) − W  ==  t·u·(M − reserve/u) − W
    gpu = gpu.model_copy(update={"memory_gb": memory - reserve / u})
    return worker_configurations(find_model(model), gpu, atgt_s=MODELS[model], mean_input=dist.mean_input,
                                 mean_output=dist.mean_output, degrees=degrees, memory_utilization=u)


def best(rep) -> str:
    b = rep.best
    return "none" if b is None else str(b.tensor_parallel)


def cell(rep, g: int) -> str:
    o = next(o for o in rep.options if o.tensor_parallel == g)
    if not o.feasible:
        return "weights do not fit" if o.kv_capacity_gb <= 0 else "infeasible"
    return f"{o.tokens_per_s_per_gpu:.1f} ({o.bottleneck}, {o.cost_source})"


def lowest_u(model: str, degrees, dist, reading: str, want: int) -> str:
    """The lowest u (to 0.001) with best == want, assuming the answer is monotone in u above it."""
    if best(report(model, degrees, dist, 1.0, reading)) != str(want):
        return f"never (at u = 1 best is {best(report(model, degrees, dist, 1.0, reading))})"
    lo, hi = 0.5, 1.0
    if best(report(model, degrees, dist, lo, reading)) == str(want):
        return f"≤ {lo}"
    while hi - lo > 1e-3:
        mid = (lo + hi) / 2
        if best(report(model, degrees, dist, mid, reading)) == str(want):
            hi = mid
        else:
            lo = mid
    return f"{hi:.3f}"



def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--degrees", default="1,2,4", help="TP degrees (default 1,2,4: the paper's 4-GPU servers)")
    parser.add_argument("--workload", default="sharegpt", help="length distribution (default sharegpt)")
    add_output_options(parser, "papers_aladdin_table3")
    args = parser.parse_args()
    try:
        degrees = tuple(int(d) for d in args.degrees.split(","))
    except ValueError:
        parser.error(f"--degrees must be comma-separated integers, got {args.degrees!r}")
    if any(d < 1 for d in degrees):
        parser.error("--degrees must be positive")
    out = output_path(parser, args, "papers_aladdin_table3")
    dist = find_distribution(args.workload)
    lines = ["# Aladdin Table 3: best GPUs per worker on A100 (Eq. 6, `planner plan worker-config`)", "",
             f"Command: `python benchmarks/papers/aladdin_table3.py{command_args()}`.  Workload "
             f"'{dist.name}': mean input {dist.mean_input:.0f}, mean output {dist.mean_output:.0f} tokens; "
             f"degrees {', '.join(map(str, degrees))}; cost models: models/aladdin/ (13B DERIVED, see "
             "models/derive_llama2_13b.py).", "",
             "## Paper setting (u = 1: KV = Σ GPU memory − weights; Table 2 ATGT SLOs)", "",
             "| model | ATGT SLO | " + " | ".join(f"TP {g}: tokens/s/GPU" for g in degrees)
             + " | best | paper |", "|---|---|" + "---|" * len(degrees) + "---|---|"]
    for model, slo in MODELS.items():
        rep = report(model, degrees, dist)
        lines.append(f"| {model} | {1000 * slo:g} ms | " + " | ".join(cell(rep, g) for g in degrees)
                     + f" | **{best(rep)}** | {PAPER[model]} |")
    lines += ["", "## Best TP over memory utilisation u, per memory reading", "",
              "Readings: 80e9 = 80·10⁹ B per GPU (catalog); 80GiB = 85.9·10⁹ B (device); "
              "80GiB-2GB = 80GiB with 2 GB per GPU ASSUMED reserved for activations/engine inside the budget.", "",
              "| u | " + " | ".join(f"{m.removeprefix('Llama-2-')} {r}" for m in MODELS for r in READINGS) + " |",
              "|---|" + "---|" * (len(MODELS) * len(READINGS))]
    for u in UTILISATIONS:
        answers = (best(report(m, degrees, dist, u, r)) for m in MODELS for r in READINGS)
        lines.append(f"| {u:.2f} | " + " | ".join(answers)
                     + " |")
    lines += ["", "## 70B at TP 2: KV cache and the batch it holds", "",
              "| reading | u | KV cache (GB) | batch (KV) | batch (SLO) | bottleneck |", "|---|---|---|---|---|---|"]
    for r in READINGS:
        for u in (0.90, 1.00):
            o = next(o for o in report("Llama-2-70B", degrees, dist, u, r).options if o.tensor_parallel == 2)
            lines.append(f"| {r} | {u:.2f} | {o.kv_capacity_gb:.1f} | {o.batch_kv:.1f} | {o.batch_slo:.1f} | "
                         f"{o.bottleneck or o.reason} |")
    lines += ["", "## Lowest u at which each model keeps the paper's answer", "",
              "| model | paper | " + " | ".join(READINGS) + " |", "|---|---|" + "---|" * len(READINGS)]
    for model in MODELS:
        lines.append(f"| {model} | {PAPER[model]} | "
                     + " | ".join(lowest_u(model, degrees, dist, r, PAPER[model]) for r in READINGS) + " |")
    text = "\n".join(lines) + "\n"
    print(text)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    print(f"wrote {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
