"""Calibrate the nominal-seconds constants of `planner.batching.effort` on this machine.

`planner.batching.pipeline.solve_batching` decides its phases on nominal seconds (work counts × constants,
`planner.core.work.WorkClock`) so that a time-limited solve is repeatable.  This script measures, on the
instances of `benchmarks/batching_scaling.py` (B requests, I, O uniform in [1, 64], M = 0.6 × Σ(I+O−1),
published 7B costs) for B ∈ {2, 4, 8, 16} and seeds 0–1, the wall time of each kind of step next to
its work count, and prints per kind the ratio wall / count (median, 90th percentile, max) and the
shipped constant.  Shipped constants are meant to sit at or above the 90th percentile, so that on the
reference machine the nominal clock runs ahead of the wall clock and the wall-clock guard never fires.

Kinds: a preset (``PRESET_FIXED`` + ``SIM_PER_REQUEST_BATCH`` × requests × batches), an order-search
simulation (same count), a rollout (``ROLLOUT_PER_REQUEST_BATCH`` × requests × batches of the best preset),
a lazy plan MIP (per nonzero at its node limit), the main MIP's build + hand-over (per nonzero) and its
root (per nonzero; HiGHS stopped after the root, ``--root-cap`` seconds at most).

Usage:  python benchmarks/batching_effort.py [--sizes 2,4,8,16] [--seeds 0,1] [--root-cap 30] [--out FILE]
Timings depend on what else the machine runs: the machine line gives the load average.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from machine_info import machine_line

from planner.batching import effort
from planner.batching.flow_formulation import applicable, build_flow_model
from planner.batching.formulation import batch_count_bound, build_model
from planner.batching.orderings import permuted
from planner.batching.problem import make_problem
from planner.batching.rollouts import best_rollout_schedule
from planner.batching.scheduler import PRESETS, simulate
from planner.batching.pipeline import heuristic_results, run_scheduler
from planner.batching.staggered import PLAN_NODE_LIMIT, lazy_plan, lazy_plan_nonzeros
from planner.solver import SolveOptions, solve


def instance(B: int, seed: int):
    rng = np.random.default_rng(seed)
    I, O = rng.integers(1, 65, B), rng.integers(1, 65, B)
    M = max(int((I + O - 1).max()), int(0.6 * (I + O - 1).sum()))
    return make_problem(I, O, M=M, name=f"B{B}-seed{seed}")


def timed(call):
    t = time.perf_counter()
    out = call()
    return out, time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", default="2,4,8,16")
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--root-cap", type=float, default=30.0, help="wall seconds for one root solve at most")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    ratios: dict[str, list[float]] = {k: [] for k in ("preset", "simulation", "rollout", "plan MIP", "build", "root")}
    for B in map(int, args.sizes.split(",")):
        for seed in map(int, args.seeds.split(",")):
            p = instance(B, seed)
            for name in PRESETS:
                result, wall = timed(lambda: run_scheduler(p, name))
                ratios["preset"].append(wall / effort.preset_seconds(p.n, result.solution.num_batches))
            best = min(heuristic_results(p).values(), key=lambda r: r.objective)
            batches = best.solution.num_batches
            order = np.random.default_rng(seed).permutation(p.n)
            for preset in ("vllm", "sarathi-nocp"):
                _, wall = timed(lambda: simulate(permuted(p, order), preset))
                ratios["simulation"].append(wall / effort.simulation_seconds(p.n, batches))
            best_rollout_schedule(p, rollouts=10)  # compile
            count = 400
            _, wall = timed(lambda: best_rollout_schedule(p, rollouts=count, seed=seed))
            ratios["rollout"].append(wall / (count * effort.rollout_seconds(p.n, batches)))
            N = int(p.outputs.max()) + 2
            _, wall = timed(lambda: lazy_plan(p, N, True, node_limit=PLAN_NODE_LIMIT, time_limit=args.root_cap))
            ratios["plan MIP"].append(wall / effort.plan_mip_seconds(lazy_plan_nonzeros(p, N, True), PLAN_NODE_LIMIT))
            J = batch_count_bound(p, best.objective)
            use_paths = applicable(p)[0] and J >= int(p.outputs.max())
            model, wall = timed(lambda: (build_flow_model(p, J) if use_paths else build_model(p, J)).model)
            nnz = int(model.matrix.nnz)
            out, root_wall = timed(lambda: solve(model, "highs", SolveOptions(node_limit=1, time_limit=args.root_cap)))
            ratios["build"].append(wall / effort.build_seconds(nnz))
            if "time limit" not in (out.message or "").lower():
                ratios["root"].append(root_wall / effort.root_seconds(nnz))
            print(f"B={B} seed={seed}: {p.n} requests, best preset {batches} batches, J={J}, "
                  f"{'paths' if use_paths else 'bigm'} model {nnz:,} nonzeros, build {wall:.2f} s, "
                  f"root {root_wall:.2f} s ({out.status.value}, {out.message})", flush=True)
    lines = ["# Batching effort calibration (wall / nominal under the shipped constants)", "", machine_line(), "",
             "| kind | samples | median | 90th pct | max |", "|---|---|---|---|---|"]
    for kind, values in ratios.items():
        if values:
            v = np.array(values)
            lines.append(f"| {kind} | {v.size} | {np.median(v):.2f} | {np.quantile(v, 0.9):.2f} | {v.max():.2f} |")
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
