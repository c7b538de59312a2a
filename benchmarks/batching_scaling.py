"""Batching (InferMax) scaling: MIP build/solve time, status and gap for B heterogeneous requests
(I, O ≤ 64), and simulator throughput on 1,024 requests × 1,024 output tokens.

    python benchmarks/batching_scaling.py [--quick] [--time-limit S] [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

from planner.batching.problem import make_problem
from planner.batching.scheduler import simulate
from planner.batching.formulation import CUT_DEFINITIONS
from planner.batching.solve import heuristic_results, solve_batching


def machine_line() -> str:
    import highspy

    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    ver = getattr(highspy.Highs(), "version", lambda: "?")()
    return (f"machine: {cpu}, {os.cpu_count()} cores visible, Python {sys.version.split()[0]}, HiGHS {ver}, "
            f"load average at start {os.getloadavg()[0]:.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="B ∈ {2,4,8}, 20 s limit, smaller simulator run")
    ap.add_argument("--time-limit", type=float, default=None)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--cuts", choices=("default", "all", "none"), default="default",
                    help="valid inequalities of the MIP: the default groups, every group, or none")
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/batching_scaling.md"))
    args = ap.parse_args()
    sizes = (2, 4, 8) if args.quick else (2, 4, 8, 16, 32)
    limit = args.time_limit or (20.0 if args.quick else 60.0)
    cuts = {"default": True, "all": tuple(CUT_DEFINITIONS), "none": False}[args.cuts]
    lines = ["# Batching (InferMax) scaling", "", machine_line(), "",
             f"MIP: B requests, I, O uniform in [1, 64] (seed 0), M = 0.6 × Σ(I+O−1) (contention), C = P = 4096, "
             f"published 7B cost set, HiGHS, {args.threads} threads, time limit {limit:.0f} s, warm start from the best preset, "
             f"cuts: {args.cuts}.  *comb. bound* = `bounds.latency_lower_bound`; *bound* = max(MIP bound, comb. bound).",
             "", "| B | J | columns | rows | build s | solve s | nodes | status | objective (s) | bound (s) | comb. bound (s) "
             "| gap | best preset (s) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for B in sizes:
        rng = np.random.default_rng(0)
        I, O = rng.integers(1, 65, B), rng.integers(1, 65, B)
        M = max(int((I + O - 1).max()), int(0.6 * (I + O - 1).sum()))
        p = make_problem(I, O, M=M, name=f"B{B}")
        res = solve_batching(p, time_limit=limit, threads=args.threads, cuts=cuts)
        s = res.stats
        best = min(r.objective for r in heuristic_results(p).values())
        gap = "-" if res.gap is None else f"{100 * res.gap:.2f}%"
        lines.append(f"| {B} | {s['J']} | {s['columns']} | {s['rows']} | {res.build_seconds:.1f} | {res.solve_seconds:.1f} | "
                     f"{s['nodes']} | {res.status.value} | {res.objective:.6f} | {res.bound:.6f} | "
                     f"{s['combinatorial_bound']:.6f} | {gap} | {best:.6f} |")
        print(lines[-1], flush=True)
    n, out_len = (256, 256) if args.quick else (1024, 1024)
    rng = np.random.default_rng(0)
    p = make_problem(rng.integers(1, 1025, n), np.full(n, out_len), M=100_000)
    lines += ["", f"Simulator: {n} requests, I uniform in [1, 1024], O = {out_len}, M = 100K, C = 4096 (wall seconds).", "",
              "| scheduler | wall s | batches | evictions | total latency (s) | tokens/s |", "|---|---|---|---|---|---|"]
    for name in ("vllm", "sarathi", "vllm-ef", "sarathi-ef"):
        t = time.perf_counter()
        sim = simulate(p, name)
        m = sim.schedule.metrics
        lines.append(f"| {name} | {time.perf_counter() - t:.2f} | {m['batches']} | {m['evictions']} | "
                     f"{m['total_latency']:.2f} | {m['tokens_per_second']:.0f} |")
        print(lines[-1], flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
