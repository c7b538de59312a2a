"""Heterogeneous-cluster paper §5.1: can its TP ranking on 8 x V100 (t=2 > t=4 > t=1 > t=8) be reproduced?

The paper runs Llama-3-8B (FP16) on one 8 x V100-SXM2-32GB box whose GPUs talk over PCIe 3.0 x16,
φ = 0.9, δ_engine = 2 GB, and ranks t = 1, 2, 4, 8 by Alg. 1 (static batching) with p1..p8 fitted on
that box.  ../shared/data has no V100 profile, so every p1..p8 set below is DERIVED, not measured.
Each variant runs the project's own pipeline (`load_cluster_problem` + `enumerate_cluster`, what
`planner solve deployment` runs) on `instances/deployment/clusters/llama3-8b-8xv100.yaml` with two
things changed:

* KV bytes per token: ``gqa`` = the real Llama-3-8B (8 KV heads: 128 KiB/token), or ``paper`` =
  the paper's reading without GQA (32 KV heads: 512 KiB/token), given as a model mapping in the
  instance (``model: {name: Llama-3-8B, ..., num_kv_heads: 32}``).  Only Alg. 1's batching sees it:
  the time model is the engine's (which holds GQA KV).
* p1..p8 per t:
  - ``shipped``: `models/hetero/llama-3-8b__v100-*` (A100 Vidur fits x peak ratios; they carry the
    A100's NVSwitch all-reduce and CPU overhead, scaled as if they were GPU work);
  - ``shipped+pcie``: the same plus a ring all-reduce over PCIe (below);
  - ``roofline``: V100 roofline from the architecture: prefill p1 = 2·params/(t·F·η_c) + all-reduce
    bytes term, decode p5 = KV bytes/(t·BW·η_m), p6 = 2·params/(t·F·η_c) + all-reduce bytes term,
    p8 = weights/(t·BW·η_m) + all-reduce latency + a fixed per-step overhead; p4 = the same weight
    read + latency + overhead; p2 = p3 = p7 = 0.  F = 125 TFLOPS, BW = 900 GB/s (catalog), η_c = 0.5,
    η_m = 0.8, overhead 5 ms (ASSUMED round figures).

All-reduce over PCIe (ring, 2·layers = 64 all-reduces per pass, 2·hidden bytes per token each):
``64·[2(t−1)·α + 2(t−1)/t · tokens·8192 B / B_bus]`` with α = 30 µs and B_bus = 6 GB/s by default
(ASSUMED: PCIe 3.0 x16 is 16 GB/s raw per direction; NCCL bus bandwidth through the host bridges is
lower).  ``--sweep`` repeats the roofline variant over α ∈ {10, 30, 100} µs, B_bus ∈ {3, 6, 12} GB/s,
overhead ∈ {2, 5, 10} ms and η_c ∈ {0.3, 0.5, 0.7}, and counts which rankings occur.

Usage:  python benchmarks/papers/hetero_v100_ranking.py [--workload sharegpt] [--sweep]
        [--out FILE | --update-results]
(stdout; also benchmarks/_runs/papers_hetero_v100.md unless --out / --update-results, which writes
the committed benchmarks/results/papers_hetero_v100.md).
"""

from __future__ import annotations

import argparse
import collections
import itertools
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1]
REPO = BENCH.parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(REPO))

from results_paths import add_output_options, command_args, output_path  # noqa: E402

from planner.catalog import find_gpu, find_model  # noqa: E402
from planner.core.io import read_yaml_mapping  # noqa: E402
from planner.costmodels.files import cost_model_filename, load_cost_model, save_cost_model  # noqa: E402
from planner.costmodels.models import HeteroCostModel  # noqa: E402
from planner.deployment.enumeration import enumerate_cluster  # noqa: E402
from planner.deployment.instance import load_cluster_problem  # noqa: E402

INSTANCE = REPO / "instances/deployment/clusters/llama3-8b-8xv100.yaml"
MODEL, GPU, DEGREES = "Llama-3-8B", "V100-32GB-SXM2", (1, 2, 4, 8)
PAPER_RANKING = (2, 4, 1, 8)
DEFAULTS = dict(alpha_us=30.0, bus_gb_s=6.0, overhead_ms=5.0, eta_c=0.5, eta_m=0.8)


def model_mapping(kv: str) -> dict:
    spec = find_model(MODEL).model_dump()
    if kv == "paper":
        spec["num_kv_heads"] = spec["num_attention_heads"]  # no GQA: 2·32·32·128·2 B = 512 KiB/token
    return spec


def allreduce_terms(t: int, alpha_us: float, bus_gb_s: float) -> tuple[float, float]:
    """(ms per token, ms per pass) of the 64 ring all-reduces of one forward pass at TP t."""
    spec = find_model(MODEL)
    n_ar = 2 * spec.num_layers
    if t == 1:
        return 0.0, 0.0
    per_token = n_ar * 2 * (t - 1) / t * (2 * spec.hidden_size) / (bus_gb_s * 1e9) * 1e3
    per_pass = n_ar * 2 * (t - 1) * alpha_us * 1e-3
    return per_token, per_pass


def with_pcie(base: HeteroCostModel, alpha_us: float, bus_gb_s: float) -> HeteroCostModel:
    scale = 1.0 if base.time_unit == "ms" else 1e-3
    per_token, per_pass = allreduce_terms(base.tensor_parallel, alpha_us, bus_gb_s)
    return base.model_copy(update={
        "p1": base.p1 + per_token * scale, "p4": base.p4 + per_pass * scale,
        "p6": base.p6 + per_token * scale, "p8": base.p8 + per_pass * scale, "fit": None,
        "provenance": (f"DERIVED: {base.provenance[:60]}... + PCIe ring all-reduce "
                       f"(α {alpha_us:g} µs, {bus_gb_s:g} GB/s)")})


def roofline(t: int, alpha_us: float, bus_gb_s: float, overhead_ms: float, eta_c: float,
             eta_m: float) -> HeteroCostModel:
    spec, gpu = find_model(MODEL), find_gpu(GPU)
    flops = gpu.fp16_tflops * 1e12 * eta_c
    bw = gpu.memory_bandwidth_gb_s * 1e9 * eta_m
    per_token, per_pass = allreduce_terms(t, alpha_us, bus_gb_s)
    compute = 2 * spec.num_parameters / (t * flops) * 1e3  # ms per token
    weights = spec.weight_bytes / (t * bw) * 1e3  # ms per pass
    return HeteroCostModel(
        model=MODEL, gpu=GPU, tensor_parallel=t, time_unit="ms",
        p1=compute + per_token, p2=0.0, p3=0.0, p4=weights + per_pass + overhead_ms,
        p5=spec.kv_bytes_per_token / (t * bw) * 1e3, p6=compute + per_token, p7=0.0,
        p8=weights + per_pass + overhead_ms,
        provenance=(f"DERIVED roofline (benchmarks/papers/hetero_v100_ranking.py): V100 {gpu.fp16_tflops:g} "
                    f"TFLOPS x {eta_c}, "
                    f"{gpu.memory_bandwidth_gb_s:g} GB/s x {eta_m}, overhead {overhead_ms:g} ms/pass, PCIe all-reduce "
                    f"α {alpha_us:g} µs, {bus_gb_s:g} GB/s"))


def write_models(root: Path, models: dict[int, HeteroCostModel]) -> Path:
    for t, m in models.items():
        save_cost_model(m, root / cost_model_filename("hetero", MODEL, GPU, t))
    return root


def ranking(kv: str, models_dir: Path | None, workload: str) -> tuple[tuple[int, ...], dict[int, float]]:
    data = dict(read_yaml_mapping(INSTANCE))
    data["model"] = model_mapping(kv)
    data["workload"] = workload
    if models_dir is not None:
        data["models_dir"] = str(models_dir)
    problem = load_cluster_problem(INSTANCE, data)
    solution, _ = enumerate_cluster(problem)
    tput = {e.tensor_parallel: e.tokens_per_s_machine for e in solution.estimates if e.feasible}
    return tuple(sorted(tput, key=lambda t: -tput[t])), tput


def fmt_rank(order: tuple[int, ...]) -> str:
    return " > ".join(f"t={t}" for t in order)



def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="sharegpt",
                        help="length distribution of the 200 samples (default sharegpt)")
    parser.add_argument("--sweep", action="store_true", help="also sweep the roofline variant's assumed parameters")
    add_output_options(parser, "papers_hetero_v100")
    args = parser.parse_args()
    out = output_path(parser, args, "papers_hetero_v100")
    shipped_dir = REPO / "models"
    lines = ["# Heterogeneous clusters §5.1: TP ranking of Llama-3-8B on 8 x V100 (Alg. 1, static estimate)", "",
             f"Command: `python benchmarks/papers/hetero_v100_ranking.py{command_args()}`.  Instance: "
             f"{INSTANCE.relative_to(REPO)} (φ = 0.9, δ = 2 GB, 200 '{args.workload}' samples, seed 0).  "
             f"Paper: {fmt_rank(PAPER_RANKING)}.  Every p1..p8 set here is DERIVED (no V100 data).", "",
             "| p1..p8 | KV bytes/token | t=1 | t=2 | t=4 | t=8 (tokens/s per machine) | ranking | = paper |",
             "|---|---|---|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as tmp:
        pcie_dir = write_models(Path(tmp) / "pcie", {
            t: with_pcie(load_cost_model(shipped_dir / cost_model_filename("hetero", MODEL, GPU, t)),
                         DEFAULTS["alpha_us"], DEFAULTS["bus_gb_s"]) for t in DEGREES})
        roof_dir = write_models(Path(tmp) / "roof", {t: roofline(t, **DEFAULTS) for t in DEGREES})
        for label, models_dir in (("shipped", None), ("shipped+pcie", pcie_dir), ("roofline", roof_dir)):
            for kv in ("gqa", "paper"):
                order, tput = ranking(kv, models_dir, args.workload)
                kv_label = "128 KiB (GQA)" if kv == "gqa" else "512 KiB (paper, no GQA)"
                lines.append(f"| {label} | {kv_label} | " + " | ".join(f"{tput.get(t, 0):.0f}" for t in DEGREES)
                             + f" | {fmt_rank(order)} | {'yes' if order == PAPER_RANKING else 'no'} |")
        if args.sweep:
            grid = dict(alpha_us=(10.0, 30.0, 100.0), bus_gb_s=(3.0, 6.0, 12.0), overhead_ms=(2.0, 5.0, 10.0),
                        eta_c=(0.3, 0.5, 0.7))
            for kv in ("gqa", "paper"):
                seen: collections.Counter = collections.Counter()
                hits = []
                for k, values in enumerate(itertools.product(*grid.values())):
                    params = dict(zip(grid, values), eta_m=DEFAULTS["eta_m"])
                    d = write_models(Path(tmp) / f"sweep{kv}{k}", {t: roofline(t, **params) for t in DEGREES})
                    order, _ = ranking(kv, d, args.workload)
                    seen[order] += 1
                    if order == PAPER_RANKING:
                        hits.append(params)
                total = sum(seen.values())
                lines += ["", f"Sweep, roofline, KV {kv} ({total} parameter sets: α {grid['alpha_us']} µs, bus "
                          f"{grid['bus_gb_s']} GB/s, overhead {grid['overhead_ms']} ms, η_c {grid['eta_c']}):", "",
                          "| ranking | parameter sets |", "|---|---|"]
                lines += [f"| {fmt_rank(o)} | {n} |" for o, n in seen.most_common()]
                if hits:
                    lines += ["", "paper's ranking at: " + "; ".join(
                        ", ".join(f"{k}={v:g}" for k, v in h.items()) for h in hits[:6])
                        + (f" (and {len(hits) - 6} more)" if len(hits) > 6 else "")]
    text = "\n".join(lines) + "\n"
    print(text)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    print(f"wrote {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
