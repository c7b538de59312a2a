"""Run `planner` on every variant of the bad-input corpus and count the outcomes.

Each variant of ``benchmarks/fuzz_corpus.py`` is run as a real subprocess (``python -m planner
<argv>`` in the variant's directory) with a wall-clock timeout (default 30 s; the process group is
killed at the timeout) and an address-space cap (default 2 GiB, ``RLIMIT_AS`` set before exec).
Outcomes:

* ``exit 0``            — the planner accepted the variant (with ``--json``: stdout must parse as one
  JSON object, else it is counted as ``bad json``);
* ``one-line error``    — a non-zero exit with exactly one non-empty stderr line (the contract);
* ``traceback``         — a Python traceback or ``internal error`` on stderr, or death by a signal;
* ``multi-line stderr`` — a non-zero exit with more than one stderr line, without a traceback;
* ``hang``              — still running at the timeout;
* ``memory``            — ``MemoryError`` / ``bad_alloc`` / ``Cannot allocate memory`` on stderr, or
  a peak resident size at the cap.

The summary (counts per outcome and per category, wall time, the slowest variants, and every
variant that is not ``exit 0`` or ``one-line error``) is printed; ``--json-out FILE`` also writes every
result as JSON.  The corpus is written to a temporary directory (removed afterwards) unless
``--corpus DIR`` is given; nothing in the repository is written.

Usage:  python benchmarks/fuzz_run.py [--seed 0] [--count 1200] [--jobs 2] [--timeout 30]
        [--memory-gb 2] [--only placement,batching] [--category aliases] [--json-out report.json]
        [--out FILE | --update-results]   (markdown summary; default benchmarks/_runs/fuzz.md, git-ignored)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fuzz_corpus import CATEGORIES, build_corpus, write_corpus  # noqa: E402
from machine_info import machine_line  # noqa: E402
from results_paths import add_output_options, output_path  # noqa: E402

OUTCOMES = ("exit 0", "one-line error", "traceback", "multi-line stderr", "hang", "memory", "bad json")
_MEMORY_SIGNS = ("MemoryError", "bad_alloc", "Cannot allocate memory", "out of memory")


def _limits(memory_bytes: int):  # noqa: ANN202
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    return apply


def run_one(folder: Path, argv: list[str], timeout: float, memory_bytes: int, json_expected: bool) -> dict:
    """Run one variant; the result's ``outcome`` is one of `OUTCOMES`."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
           "PYTHONHASHSEED": "0", "COLUMNS": "120"}
    env.pop("PLANNER_DEBUG", None)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "planner", *argv], cwd=folder, stdout=out, stderr=err,
                                stdin=subprocess.DEVNULL, env=env, start_new_session=True,
                                preexec_fn=_limits(memory_bytes))
        status, usage, hung = None, None, False
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() - start > timeout:
                hung = True
                os.killpg(proc.pid, signal.SIGKILL)
                _, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.02)
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait again
        seconds = time.perf_counter() - start
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode(errors="replace")
        stderr = err.read().decode(errors="replace")
    code = proc.returncode
    peak_mb = usage.ru_maxrss / 1024 if usage is not None else 0.0
    lines = [line for line in stderr.splitlines() if line.strip()]
    if hung:
        outcome = "hang"
    elif any(sign in stderr for sign in _MEMORY_SIGNS) or peak_mb * 2**20 >= 0.95 * memory_bytes:
        outcome = "memory"
    elif "Traceback" in stderr or "internal error" in stderr or code < 0:
        outcome = "traceback"
    elif code == 0:
        outcome = "exit 0"
        if json_expected:
            try:
                if not isinstance(json.loads(stdout), dict):
                    outcome = "bad json"
            except ValueError:
                outcome = "bad json"
    elif len(lines) == 1:
        outcome = "one-line error"
    else:
        outcome = "multi-line stderr"
    return {"outcome": outcome, "exit": code, "seconds": round(seconds, 3), "peak_mb": round(peak_mb, 1),
            "stderr_tail": lines[-3:] if outcome not in ("exit 0", "one-line error") else lines[:1]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--count", type=int, default=1200, help="at least this many variants")
    parser.add_argument("--jobs", type=int, default=2, help="variants run at the same time")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per variant (hang guard)")
    parser.add_argument("--memory-gb", type=float, default=2.0, help="address-space cap per variant (GiB)")
    parser.add_argument("--only", default=None, help="comma-separated families")
    parser.add_argument("--category", default=None, help=f"comma-separated categories ({', '.join(CATEGORIES)})")
    parser.add_argument("--ids", default=None, help="comma-separated variant ids (as printed) to run only")
    parser.add_argument("--corpus", type=Path, default=None, help="write the corpus here and keep it")
    parser.add_argument("--json-out", type=Path, default=None, help="also write every result as JSON to this file")
    add_output_options(parser, "fuzz")
    args = parser.parse_args()
    out_path = output_path(parser, args, "fuzz")

    variants = build_corpus(args.seed, args.count)
    total = len(variants)
    if args.only:
        keep = {f.strip() for f in args.only.split(",")}
        variants = [v for v in variants if v.family in keep]
    if args.category:
        keep = {c.strip() for c in args.category.split(",")}
        variants = [v for v in variants if v.category in keep]
    if args.ids:
        keep = {i.strip() for i in args.ids.split(",")}
        variants = [v for v in variants if v.id in keep]
    scratch = None
    if args.corpus is None:
        scratch = tempfile.TemporaryDirectory(prefix="planner-fuzz-")
        root = Path(scratch.name)
    else:
        root = args.corpus
    write_corpus(variants, root)
    memory = int(args.memory_gb * 2**30)
    print(f"{len(variants)} of {total} variants (seed {args.seed}), {args.jobs} at a time, timeout {args.timeout:g} s, "
          f"memory cap {args.memory_gb:g} GiB; {machine_line()}", flush=True)
    start = time.perf_counter()
    results: list[dict] = []

    def work(v) -> dict:  # noqa: ANN001
        res = run_one(root / v.id, v.argv, args.timeout, memory, "--json" in v.argv)
        return {"id": v.id, "family": v.family, "category": v.category, "base": v.base, "mutation": v.mutation,
                "argv": v.argv, **res}

    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for k, res in enumerate(pool.map(work, variants), start=1):
            results.append(res)
            if res["outcome"] not in ("exit 0", "one-line error"):
                print(f"  {res['id']} [{res['outcome']}, {res['seconds']:.1f} s] {res['mutation']}: "
                      f"{' | '.join(res['stderr_tail'])[:300]}", flush=True)
            if k % 100 == 0:
                print(f"  … {k}/{len(variants)} done, {time.perf_counter() - start:.0f} s", flush=True)
    wall = time.perf_counter() - start
    if scratch is not None:
        scratch.cleanup()

    counts = Counter(r["outcome"] for r in results)
    md = ["# Bad-input fuzz corpus", "",
          f"`python benchmarks/fuzz_run.py`: {len(results)} of {total} mutations of the shipped instances (seed "
          f"{args.seed}; `benchmarks/fuzz_corpus.py`), each run as a real `planner` process, {args.jobs} at a time, "
          f"with a {args.timeout:g} s hang guard and a {args.memory_gb:g} GiB address-space cap; {wall:.0f} s wall.", "",
          f"Machine: {machine_line()}.", "",
          "| outcome | variants |", "|---|---:|"]
    md += [f"| {outcome} | {counts.get(outcome, 0)} |" for outcome in OUTCOMES]
    md += ["", "| category | variants | exit 0 | one-line error | other |", "|---|---:|---:|---:|---:|"]
    for category in CATEGORIES:
        rows = [r for r in results if r["category"] == category]
        if rows:
            c = Counter(r["outcome"] for r in rows)
            md.append(f"| {category} | {len(rows)} | {c['exit 0']} | {c['one-line error']} | "
                      f"{len(rows) - c['exit 0'] - c['one-line error']} |")
    md += ["", "| family | variants | exit 0 | one-line error | other |", "|---|---:|---:|---:|---:|"]
    for family in sorted({r["family"] for r in results}):
        rows = [r for r in results if r["family"] == family]
        c = Counter(r["outcome"] for r in rows)
        md.append(f"| {family} | {len(rows)} | {c['exit 0']} | {c['one-line error']} | "
                  f"{len(rows) - c['exit 0'] - c['one-line error']} |")
    errors = sorted(r["seconds"] for r in results if r["outcome"] == "one-line error")
    if errors:
        slowest_error = max((r for r in results if r["outcome"] == "one-line error"), key=lambda r: r["seconds"])
        md += ["", (f"One-line errors, wall seconds per process (start-up included): median "
                    f"{errors[len(errors) // 2]:.2f}, p90 {errors[int(0.9 * (len(errors) - 1))]:.2f}, max "
                    f"{errors[-1]:.2f} ({slowest_error['id']}: {slowest_error['mutation']}).")]
    slow = sorted(results, key=lambda r: -r["seconds"])[:5]
    md += ["", "Slowest variants: " + "; ".join(f"{r['id']} {r['seconds']:.1f} s" for r in slow) + ".",
           f"Largest peak RSS: {max((r['peak_mb'] for r in results), default=0):.0f} MB."]
    text = "\n".join(md) + "\n"
    print("\n" + text)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(text)
    print(f"wrote {out_path}", file=sys.stderr)
    if args.json_out is not None:
        args.json_out.write_text(json.dumps({"seed": args.seed, "variants": len(results), "wall_s": round(wall, 1),
                                             "counts": dict(counts), "results": results}, indent=1))
        print(f"wrote {args.json_out}", file=sys.stderr)
    bad = sum(counts.get(k, 0) for k in ("traceback", "hang", "memory", "multi-line stderr", "bad json"))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
