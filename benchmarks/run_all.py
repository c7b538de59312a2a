"""Run every family's scaling benchmark and collect the results in one markdown file.

One command reproduces the performance claims of the README::

    python benchmarks/run_all.py                     # full runs (long: each script's own defaults)
    python benchmarks/run_all.py --quick             # reduced runs, each script < 2 minutes
    python benchmarks/run_all.py --update-results    # full runs, written over the committed results

Every ``benchmarks/*_scaling.py`` script found is run in its own process as
``python benchmarks/<family>_scaling.py --out <file> [--quick]`` (``--quick`` passes through).
Each script writes a markdown table of its instances — sizes, build and solve seconds, status,
gap — and its own machine line.  Three checks run the same way: ``time_limit.py`` (does
``--time-limit`` hold for the whole call, with a bound, and repeat?) and ``fuzz_run.py`` (the bad-input
corpus: exit 0 or one line, never a traceback or hang), which have no ``--quick`` and run in full runs
only, and ``fleet_sim.py`` (the whole Azure 2023 conv trace through the fleet simulator).

Where: an ordinary run touches no committed file.  Its tables and the collected file go to a
fresh folder ``benchmarks/_runs/<UTC time>[-quick]/`` (git-ignored), and the collected markdown
is also printed on stdout (progress lines go to stderr).  Only ``--update-results`` (full runs
only: quick results never replace full ones) writes the committed
``benchmarks/results/<family>_scaling.md`` and ``benchmarks/RESULTS.md``.  ``--out FILE`` and
``--results-dir DIR`` write exactly where asked.  The collected file holds:

* the machine description (CPU, cores, load average at the start, Python, HiGHS and Gurobi
  versions) — the numbers are wall-clock seconds and depend on what else the machine runs;
* one row per script: exit status, wall seconds, output file;
* each script's markdown output, embedded verbatim (headings demoted one level).

A script that fails (non-zero exit, time-out, or no ``--quick`` when ``--quick`` is asked) is
reported with its last error line and does not stop the others.

With ``--only a,b`` (families to run, by the name before ``_scaling.py``) a full run also
collects the other families' committed tables (``benchmarks/results/``), marked as from an
earlier run.  ``--timeout S``: per script (default none for full runs, 600 s with ``--quick``).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from machine_info import machine_line

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
#: Committed results: written only with --update-results.
COMMITTED_RESULTS = BENCH / "results"
COMMITTED_SUMMARY = BENCH / "RESULTS.md"
#: Ordinary runs (git-ignored).
RUNS = BENCH / "_runs"



#: Checks that are not scaling runs but whose tables belong in RESULTS.md: name → script (table ``<name>.md``).
CHECK_SCRIPTS = {"time_limit": "time_limit.py", "fuzz": "fuzz_run.py", "fleet_sim": "fleet_sim.py",
                 "melange_compare": "melange_compare.py", "capacity_speed": "capacity_speed.py"}


def family_of(script: Path) -> str:
    """The name a script's table is filed under: ``<family>_scaling.py`` → family; a check → its name."""
    for name, file in CHECK_SCRIPTS.items():
        if script.name == file:
            return name
    return script.name.removesuffix("_scaling.py")


def table_name(script: Path) -> str:
    """The script's markdown table: ``<family>_scaling.md``, or ``<name>.md`` for a check."""
    return f"{family_of(script)}.md" if script.name in CHECK_SCRIPTS.values() else f"{script.stem}.md"


def find_scripts(only: set[str] | None = None) -> list[Path]:
    scripts = sorted(BENCH.glob("*_scaling.py")) + [BENCH / file for file in CHECK_SCRIPTS.values()]
    if only is not None:
        scripts = [s for s in scripts if family_of(s) in only]
    return scripts


def supports_quick(script: Path) -> bool:
    """Whether the script's argparse accepts --quick (read from its source, without running it)."""
    return "--quick" in script.read_text()


def run_script(script: Path, out: Path, quick: bool, timeout: float | None) -> dict:
    family = family_of(script)
    row = {"family": family, "script": script.name, "out": out, "status": "", "seconds": 0.0, "detail": ""}
    if quick and not supports_quick(script):
        row.update(status="skipped", detail="the script has no --quick option")
        return row
    cmd = [sys.executable, str(script), "--out", str(out), *(["--quick"] if quick else [])]
    out.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    try:
        proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        row.update(status="timeout", seconds=time.perf_counter() - start, detail=f"stopped after {timeout:g} s")
        return row
    row["seconds"] = time.perf_counter() - start
    if proc.returncode != 0:
        lines = [line for line in (proc.stderr or proc.stdout).strip().splitlines() if line.strip()]
        row.update(status=f"error (exit {proc.returncode})", detail=lines[-1] if lines else "")
    elif not out.exists():
        row.update(status="error", detail=f"the script wrote no {out.name}")
    else:
        row["status"] = "ok"
    return row


#: Hand-written targets and analyses, copied into RESULTS.md below the summary table.
TARGETS = Path(__file__).resolve().parent / "TARGETS.md"


def _demote(markdown: str) -> str:
    return "\n".join("#" + line if line.startswith("#") else line for line in markdown.splitlines())


def render(rows: list[dict], quick: bool, started: str, machine_line: str, update_results: bool = False) -> str:
    command = "python benchmarks/run_all.py" + (" --quick" if quick else "") + (" --update-results" if update_results else "")
    parts = [
        "# Benchmark results",
        "",
        f"Generated by `{command}` on {started}.",
        "",
        f"Machine: {machine_line}.",
        "",
        "Times are wall-clock seconds on this machine; other processes sharing the CPU (see the load",
        "average) slow them down. Each script's own section below states its settings (time limits, threads).",
        "",
        "| family | script | status | wall s | output |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        status = r["status"] + (f": {r['detail']}" if r["detail"] else "")
        rel = os.path.relpath(r["out"], REPO)
        parts.append(f"| {r['family']} | {r['script']} | {status} | {r['seconds']:.1f} | {rel} |")
    if TARGETS.exists():  # the hand-written targets and analyses (benchmarks/TARGETS.md)
        parts += ["", _demote(TARGETS.read_text().strip())]
    for r in rows:
        parts += ["", f"## {r['family']}", ""]
        if r["status"] in ("ok", "earlier run"):
            if r["detail"]:
                parts += [f"*{r['detail'][0].upper()}{r['detail'][1:]}.*", ""]
            parts.append(_demote(Path(r["out"]).read_text().strip()))
        else:
            parts.append(f"Not available: {r['status']}" + (f" — {r['detail']}" if r["detail"] else "") + ".")
    return "\n".join(parts) + "\n"


def output_places(args: argparse.Namespace, now: datetime) -> tuple[Path, Path]:
    """(folder of the per-script tables, collected markdown file): module docstring, "Where"."""
    run_dir = RUNS / (now.strftime("%Y%m%d-%H%M%S") + ("-quick" if args.quick else ""))
    if args.update_results:
        results_dir, summary = COMMITTED_RESULTS, COMMITTED_SUMMARY
    else:
        results_dir, summary = run_dir, run_dir / "RESULTS.md"
    if args.results_dir:
        results_dir = Path(args.results_dir)
    if args.out:
        summary = Path(args.out)
    return results_dir, summary


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="reduced runs (each script < 2 minutes)")
    ap.add_argument("--update-results", action="store_true",
                    help="write the committed benchmarks/results/*.md and benchmarks/RESULTS.md (full runs only)")
    ap.add_argument("--out", default=None, help="the collected results (markdown; default: "
                    "benchmarks/_runs/<time>/RESULTS.md, git-ignored; with --update-results: benchmarks/RESULTS.md)")
    ap.add_argument("--only", default=None, help="comma-separated families to run (default: every script); the "
                    "others' committed results files are collected as they are, marked as from an earlier run")
    ap.add_argument("--results-dir", default=None,
                    help="where each script writes its table (default: the run's folder under benchmarks/_runs; "
                         "with --update-results: benchmarks/results)")
    ap.add_argument("--timeout", type=float, default=None, help="seconds per script (default: none; 600 with --quick)")
    args = ap.parse_args(argv)
    if args.update_results and args.quick:
        ap.error("--update-results takes full runs: quick results never replace the committed ones")
    only = None if args.only is None else {s.strip() for s in args.only.split(",") if s.strip()}
    scripts = find_scripts(only)
    if not scripts:
        print(f"no benchmarks/*_scaling.py script found{' for --only ' + args.only if only else ''}", file=sys.stderr)
        return 2
    timeout = args.timeout if args.timeout is not None else (600.0 if args.quick else None)
    now = datetime.now(timezone.utc)
    started = now.strftime("%Y-%m-%d %H:%M UTC")
    machine = machine_line(("highspy", "gurobipy"))
    results_dir, target = output_places(args, now)
    rows = []
    for script in scripts:
        out = results_dir / table_name(script)
        print(f"running {script.name}{' --quick' if args.quick else ''} …", file=sys.stderr, flush=True)
        row = run_script(script, out, args.quick, timeout)
        print(f"  {row['status']} in {row['seconds']:.1f} s{': ' + row['detail'] if row['detail'] else ''}",
              file=sys.stderr, flush=True)
        rows.append(row)
    if only is not None and not args.quick:  # the other families: their committed full results, said to be earlier
        for script in find_scripts(None):
            if script in scripts:
                continue
            out = COMMITTED_RESULTS / table_name(script)
            row = {"family": family_of(script), "script": script.name, "out": out,
                   "seconds": 0.0, "status": "ok", "detail": ""}
            if out.exists():
                stamp = datetime.fromtimestamp(out.stat().st_mtime, timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
                row.update(status="earlier run", detail=f"not re-run here; results file written {stamp}")
            else:
                row.update(status="missing", detail="not run and no earlier results")
            rows.append(row)
        rows.sort(key=lambda r: r["family"])
    text = render(rows, args.quick, started, machine, args.update_results)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    print(text, end="")
    print(f"wrote {target}", file=sys.stderr)
    return 0 if all(r["status"] in ("ok", "skipped", "missing", "earlier run") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
