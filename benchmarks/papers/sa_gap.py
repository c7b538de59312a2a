"""SLO-aware SA paper: SA's gap to the exact optimum of G, in the paper's setting and in a harder mix.

The paper claims SA is "within 1 % of exhaustive search".  Instances are `generate_priority_problem`
(the paper's Table 2 latency model `models/bilinear/qwen2.5-7b__v100-32gb-sxm2__tp2.yaml`, equal
chat/code mix, SLOs 30 s e2e / 10 s TTFT / 50 ms TPOT), N jobs, one instance per seed
1000, 1001, ... (``--first-seed``); the optimum is proven by `prove_optimum` (subset DP at b_max = 1, branch-and-bound
otherwise), every heuristic plan is scored against it: gap = (G* − G) / G*.

Settings (``--setting``):

* ``paper``: b_max = 1, constant SLOs (spread 0), N = 10 — the paper's own experiment.
* ``mix``: b_max cycling 1, 2, 4 and every other instance with per-job SLOs spread ±50 % — the
  setting of `benchmarks/priority_scaling.py`'s "Gap to the exact optimum" table (and of the figure
  the README quotes for it).
* ``both`` (default): the two tables one after the other.

Usage:  python benchmarks/papers/sa_gap.py [--setting paper|mix|both] [--count 100] [--jobs 10] [--first-seed 1000]
        [--out FILE | --update-results]
(stdout, and benchmarks/_runs/papers_sa_gap.md unless --out / --update-results, which writes the
committed benchmarks/results/papers_sa_gap.md).  Deterministic: SA runs with seed 0.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent))

from machine_info import machine_line  # noqa: E402
from results_paths import add_output_options, output_path  # noqa: E402

from planner.priority.generator import generate_priority_problem  # noqa: E402
from planner.priority.heuristics import HEURISTICS  # noqa: E402
from planner.priority.pipeline import prove_optimum  # noqa: E402

SETTINGS = {
    "paper": dict(b_maxes=[1], spreads=[0.0],
                  label="paper setting: b_max = 1, constant SLOs (spread 0)"),
    "mix": dict(b_maxes=[1, 2, 4], spreads=[0.5, 0.0],
                label="harder mix: b_max cycling 1, 2, 4; every other instance with per-job SLO spread ±50 %"),
}


def gap_table(setting: str, count: int, jobs: int, first_seed: int = 1000) -> list[str]:
    spec = SETTINGS[setting]
    gaps: dict[str, list[float]] = {name: [] for name in HEURISTICS}
    hits = dict.fromkeys(HEURISTICS, 0)
    for k in range(count):
        b_max = spec["b_maxes"][k % len(spec["b_maxes"])]
        spread = spec["spreads"][k % len(spec["spreads"])]
        problem = generate_priority_problem(jobs, b_max, first_seed + k, slo_spread=spread)
        plans = {name: HEURISTICS[name](problem, 0) for name in HEURISTICS}
        outcome, _ = prove_optimum(problem, max(plans.values(), key=lambda p: p.g))
        if not outcome.proven:
            raise SystemExit(f"instance seed {first_seed + k} ({setting}): optimum not proven")
        for name, plan in plans.items():
            gap = (outcome.plan.g - plan.g) / outcome.plan.g if outcome.plan.g > 0 else 0.0
            gaps[name].append(gap)
            hits[name] += gap <= 1e-9
    rows = [f"### {spec['label']}, N = {jobs}, {count} instances (seeds {first_seed}–{first_seed + count - 1})", "",
            "| method | mean gap to optimum | worst gap | optimal on |", "|---|---|---|---|"]
    for name, values in gaps.items():
        rows.append(f"| {name} | {100 * statistics.mean(values):.2f} % | {100 * max(values):.2f} % | "
                    f"{hits[name]} of {len(values)} |")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--setting", choices=["paper", "mix", "both"], default="both")
    parser.add_argument("--count", type=int, default=100, help="instances per setting (default 100)")
    parser.add_argument("--jobs", type=int, default=10, help="jobs per instance, N (default 10)")
    parser.add_argument("--first-seed", type=int, default=1000, help="seed of the first instance (default 1000)")
    add_output_options(parser, "papers_sa_gap")
    args = parser.parse_args()
    if args.count < 1 or args.jobs < 1:
        parser.error("--count and --jobs must be positive")
    out = output_path(parser, args, "papers_sa_gap")
    started = time.perf_counter()
    lines = ["# SLO-aware SA: gap to the exact optimum of G (paper's claim: within 1 % of exhaustive)", "",
             f"Machine: {machine_line(('numpy', 'numba'))}.", "",
             f"Command: `python benchmarks/papers/sa_gap.py --setting {args.setting} --count {args.count} "
             f"--jobs {args.jobs} --first-seed {args.first_seed}`.  Latency model: the paper's Table 2 "
             "(`models/bilinear/qwen2.5-7b__v100-32gb-sxm2__tp2.yaml`); SA seed 0.", ""]
    for setting in (["paper", "mix"] if args.setting == "both" else [args.setting]):
        table = gap_table(setting, args.count, args.jobs, args.first_seed)
        print("\n".join(table), flush=True)
        lines += table + [""]
    lines.append(f"Total time: {time.perf_counter() - started:.0f} s.")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
