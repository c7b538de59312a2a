"""How long does `planner capacity` take: one point (search included) and the shipped scenario.

Runs ``planner capacity instances/capacity/llama2-70b-sharegpt-a100-h100.yaml --json`` (20 points: A100
TP 2/4/8 and H100 at its Eqs. 5–6 degree, 5 rates; the default local pool, 2 workers on 2 cores) and
the README's flags-only query — and the size-class and two-model examples
(``instances/capacity/llama2-70b-sharegpt-size-classes.yaml``, ``two-models-shared-inventory.yaml``; no
target) — as subprocesses — what a user runs — after one untimed warm-up run that
loads numba's compiled kernels into the cache.  Reports the whole call's wall time and every point's
own seconds (bound + simulated search + snapshot).  Targets (issue 23): a point ≤ 30 s, the shipped
scenario ≤ 60 s on 2 cores.

Usage:  python benchmarks/capacity_speed.py [--out FILE | --update-results]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from machine_info import machine_line
from results_paths import add_output_options, output_path

REPO = Path(__file__).resolve().parents[1]
SHIPPED = ["capacity", "instances/capacity/llama2-70b-sharegpt-a100-h100.yaml", "--no-progress", "--json"]
CLASSES = ["capacity", "instances/capacity/llama2-70b-sharegpt-size-classes.yaml", "--no-progress", "--json"]
TWO_MODELS = ["capacity", "instances/capacity/two-models-shared-inventory.yaml", "--no-progress", "--json"]
QUICK = ["capacity", "--model", "Llama-2-70B", "--gpu", "H100-80GB-SXM", "--gpu", "A100-80GB-SXM", "--rate", "10",
         "--ttft", "1", "--tpot", "0.05", "--price", "H100-80GB-SXM=3.0", "--price", "A100-80GB-SXM=1.8",
         "--no-progress", "--json"]


def run(args: list[str]) -> tuple[float, dict]:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "planner", *args], cwd=REPO, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"planner {' '.join(args)} failed: {proc.stderr.strip()}")
    return wall, json.loads(proc.stdout)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_output_options(parser, "capacity_speed")
    args = parser.parse_args(argv)
    out = output_path(parser, args, "capacity_speed")
    machine = machine_line()
    run(QUICK)  # warm-up: numba kernels compiled and cached
    lines = [f"Machine: {machine}", "",
             "| command | points | wall (s) | longest point (s) | point | status |", "|---|---:|---:|---:|---|---|"]
    for name, cmd in (("README quick start (flags, 10 req/s)", QUICK), ("shipped scenario (YAML)", SHIPPED),
                      ("size classes, 2 × 2 (YAML)", CLASSES), ("two models sharing an inventory (YAML)", TWO_MODELS)):
        wall, data = run(cmd)
        pts = data.get("points") or [p for m in data.get("models", []) for p in m.get("points", [])]
        longest = max(pts, key=lambda p: p["seconds"])
        where = f"{longest['gpu']} TP {longest['tensor_parallel']} at {longest['rate']:g} req/s ({longest['workers']} workers)"
        lines.append(f"| {name} | {len(pts)} | {wall:.1f} | {longest['seconds']:.1f} | {where} | {data['status']} |")
    text = "\n".join(lines) + "\n"
    print(text)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
