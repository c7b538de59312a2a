"""Placement MIP scaling: N = 100, 250, 500, 1000 requests (issue target: proven optimum at N=1000 in 60 s).

Two instance families, generated from the ShareGPT length distribution with the Llama-2-70B /
2xA100 cost model fitted to the Splitwise profiles (Aladdin Table 2 SLOs: TTFT 1.6 s, ATGT 75 ms):

* ``decode_only`` — split-phase decode workers (Aladdin §6.4): all N requests are new, only the
  ATGT and KV families apply.  This is the hard case: a multi-dimensional bin packing with
  ~18 requests per worker.
* ``colocated`` — one heartbeat of a busy colocated deployment: N/10 new requests arrive while
  9N/10 are decoding on their (fixed) workers; TTFT and prefill-preemption apply.

For each (family, N, seed) it prints and writes: model size, build seconds, total solve seconds
(heuristics + LNS + MIP), status, workers, bound, gap and the build share of the total.

Usage:  python benchmarks/placement_scaling.py [--sizes 100,250,500,1000] [--seeds 0,1,2]
        [--time-limit 60] [--threads 2] [--out FILE | --update-results] [--quick]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from machine_info import machine_line
from results_paths import add_output_options, output_path
from planner.catalog import find_gpu, find_model
from planner.core.types import SLOClass, SLOSet, WorkerConfig
from planner.costmodels.files import find_cost_model
from planner.placement.generator import generate_placement_problem
from planner.placement.problem import PlacementOptions
from planner.core.contract import RunOptions
from planner.placement.pipeline import solve_placement
from planner.workloads.streams import find_distribution

REPO = Path(__file__).resolve().parents[1]



def make_problem(family: str, n: int, seed: int):
    model, gpu = find_model("Llama-2-70B"), find_gpu("A100-80GB-SXM")
    cost = find_cost_model("aladdin", model.name, gpu.name, 2, REPO / "models")
    common = dict(
        dist=find_distribution("sharegpt", REPO / "models"), model=model,
        worker=WorkerConfig(gpu=gpu, tensor_parallel=2), cost=cost,
        slos=SLOSet(classes={"default": SLOClass(ttft_s=1.6, atgt_s=0.075)}), seed=seed,
    )
    if family == "decode_only":
        return generate_placement_problem(name=f"decode-n{n}-s{seed}", options=PlacementOptions(mode="decode_only"),
                                          new_requests=n, **common)
    return generate_placement_problem(name=f"heartbeat-n{n}-s{seed}", options=PlacementOptions(mode="colocated"),
                                      new_requests=n // 10, ongoing_requests=n - n // 10, **common)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="100,250,500,1000")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--families", default="decode_only,colocated")
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--solver", default="highs")
    add_output_options(ap, "placement_scaling")
    ap.add_argument("--quick", action="store_true", help="N = 100, 250 with seed 0 only (about a minute)")
    args = ap.parse_args()
    args.out = output_path(ap, args, "placement_scaling")
    if args.quick:
        args.sizes, args.seeds = "100,250", "0"
    header = ("| family | N | seed | variables | rows | nonzeros | build s | total s | status | workers | bound "
              "| gap | build share | LNS |")
    lines = [f"# Placement MIP scaling ({args.solver}, time limit {args.time_limit:g} s, {args.threads} threads)", "",
             f"Machine: {machine_line()}", "", header, "|" + "---|" * 14]
    print(header)
    for family in args.families.split(","):
        for n in (int(s) for s in args.sizes.split(",")):
            for seed in (int(s) for s in args.seeds.split(",")):
                problem = make_problem(family, n, seed)
                t0 = time.perf_counter()
                res = solve_placement(problem, RunOptions(solver=args.solver, time_limit=args.time_limit,
                                                          threads=args.threads, seed=seed))
                total = time.perf_counter() - t0
                s = res.stats
                gap = "-" if res.gap is None else f"{100 * res.gap:.2f}%"
                lns = "yes" if "repack" in str(s.get("warm_start")) else "no"
                row = (f"| {family} | {problem.num_requests} | {seed} | {s.get('variables')} | {s.get('constraints')} | "
                       f"{s.get('nonzeros')} | {res.build_seconds:.3f} | {total:.2f} | {res.status.value} | "
                       f"{res.objective:g} | {res.bound:g} | {gap} | {100 * res.build_seconds / max(total, 1e-9):.1f}% | "
                       f"{lns} |")
                print(row, flush=True)
                lines.append(row)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
