"""How fast is one trace-driven fleet simulation (`planner.fleet.simulate_fleet`) of a whole real trace?

Workload: the whole Azure LLM inference 2023 conversation trace (19,366 requests over one hour,
../shared/data/traces/azure_llm_inference_2023/AzureLLMInferenceTrace_conv.csv), every request kept
(1,612 of them have I + O above Llama-2-70B's 4,096-token context; the cost model extrapolates for
them; ``--context-filter`` drops them as ``planner simulate replay`` does).

Fleet: Llama-2-70B on H100-80GB-SXM with TP 2 under the shipped Aladdin cost model
(models/aladdin/llama-2-70b__h100-80gb-sxm__tp2.yaml), scheduler ``sarathi`` (chunked prefill, P = 512,
C = 4,096, R_max = 256), router ``jsq``.  The worker count is the fewest N whose simulation meets
P99 TTFT ≤ 1 s and P99 TPOT ≤ 50 ms (`planner.fleet.fewest_workers`: doubling from 1, then bisection;
every step is listed).

Timing: numba's kernels are loaded and warmed by one small simulation first; then the simulation at the
chosen N runs ``--repeats`` times and the table gives the least and the median wall time, simulated
requests per second and iterations (batches) per second.  The other routers are run once at the same N.
Timings depend on what else the machine runs: the machine line gives the load average.

Usage:  python benchmarks/fleet_sim.py [--repeats 3] [--quick] [--out FILE | --update-results]
(``--quick``: the first 600 s of the trace only.)
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from machine_info import machine_line
from results_paths import add_output_options, output_path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
TRACE = REPO.parent / "shared/data/traces/azure_llm_inference_2023/AzureLLMInferenceTrace_conv.csv"
TTFT_S, TPOT_S = 1.0, 0.05


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="the first 600 s of the trace only")
    parser.add_argument("--context-filter", action="store_true", help="drop requests with I + O > 4,096")
    add_output_options(parser, "fleet_sim")
    args = parser.parse_args()
    path = output_path(parser, args, "fleet_sim")

    from planner.catalog import find_gpu, find_model
    from planner.core.types import WorkerConfig
    from planner.costmodels.files import cost_model_filename, default_models_dir, load_cost_model
    from planner.fleet import ROUTERS, FleetRequests, LinearBatchCost, WorkerSpec, fewest_workers, simulate_fleet

    llm, gpu = find_model("Llama-2-70B"), find_gpu("H100-80GB-SXM")
    cost_file = default_models_dir() / cost_model_filename("aladdin", llm.name, gpu.name, 2)
    cost = load_cost_model(cost_file)
    requests = FleetRequests.from_trace(TRACE, "azure", window_s=600.0 if args.quick else None,
                                        max_total_tokens=llm.max_context_tokens if args.context_filter else None)
    spec = WorkerSpec.from_aladdin(llm, WorkerConfig(gpu=gpu, tensor_parallel=2), cost, scheduler="sarathi",
                                   source=cost_file.name)

    t0 = time.perf_counter()
    simulate_fleet(FleetRequests([0.0, 0.1], [10, 20], [3, 4]), WorkerSpec(cost=LinearBatchCost(db=0.01), M=100),
                   n_workers=2)
    warm = time.perf_counter() - t0

    found = fewest_workers(requests, spec, ttft_s=TTFT_S, tpot_s=TPOT_S, percentile=99, router="jsq")
    n_workers = found.workers
    search = [(n, found.percentile_ttft[n], found.percentile_tpot[n], met) for n, met in found.tried.items()]

    walls, result = [], None
    for _ in range(max(args.repeats, 1)):
        result = simulate_fleet(requests, spec, n_workers=n_workers, router="jsq", ttft_s=TTFT_S, tpot_s=TPOT_S)
        walls.append(result.wall_seconds)
    s = result.summary()
    iters = int(result.iterations.sum())
    best, med = min(walls), statistics.median(walls)

    lines = [
        "# Fleet simulation speed (`benchmarks/fleet_sim.py`)",
        "",
        f"Machine: {machine_line(('numpy', 'numba'))}",
        "",
        f"Workload: {requests.source}; {requests.n:,} requests over {requests.arrival_s.max():,.0f} s "
        f"({'first 600 s; ' if args.quick else ''}"
        f"{'I + O ≤ 4,096' if args.context_filter else 'no context filter'}).",
        f"Fleet: Llama-2-70B on H100-80GB-SXM TP 2 under cost model {cost_file.name} "
        f"({cost.provenance.split(' [')[0]}); KV limit {spec.M:,} tokens per worker; scheduler sarathi "
        f"(C = 4,096, P = 512, R_max = 256); router jsq.",
        f"numba warm-up (cache load + first call): {warm:.2f} s (not in the times below).",
        "",
        f"## Worker count: fewest N with P99 TTFT ≤ {TTFT_S:g} s and P99 TPOT ≤ {TPOT_S * 1000:g} ms",
        "",
        "| N | P99 TTFT (s) | P99 TPOT (ms) | meets |",
        "|---:|---:|---:|:---:|",
        *[f"| {n} | {p_ttft:.3f} | {p_tpot * 1000:.2f} | {'yes' if ok else 'no'} |"
          for n, p_ttft, p_tpot, ok in sorted(search)],
        "",
        f"## Speed at N = {n_workers} ({n_workers * 2} GPUs), {len(walls)} runs",
        "",
        "| requests | iterations | wall min (s) | wall median (s) | requests/s | iterations/s | SLO attainment "
        "| mean utilisation |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
        f"| {requests.n:,} | {iters:,} | {best:.2f} | {med:.2f} | {requests.n / best:,.0f} | {iters / best:,.0f} | "
        f"{s['slo_attainment']:.4f} | {s['mean_utilisation']:.3f} |",
        "",
        f"## Routers at N = {n_workers}",
        "",
        "| router | P99 TTFT (s) | P99 TPOT (ms) | P50 TPOT (ms) | attainment | preemptions | wall (s) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for router in ROUTERS:
        res = simulate_fleet(requests, spec, n_workers=n_workers, router=router, ttft_s=TTFT_S, tpot_s=TPOT_S)
        r = res.summary()
        lines.append(f"| {router} | {r['p99_ttft_s']:.3f} | {r['p99_tpot_s'] * 1000:.2f} | "
                     f"{r['p50_tpot_s'] * 1000:.2f} | "
                     f"{r['slo_attainment']:.4f} | {r['preemptions']:,} | {res.wall_seconds:.2f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    print(f"written: {path}", file=sys.stderr)
    assert np.isfinite(result.finish_s).all()


if __name__ == "__main__":
    main()
