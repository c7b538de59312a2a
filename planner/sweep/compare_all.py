"""`planner compare all INSTANCE_DIR`: every family's heuristics and exact solver on every instance.

Generic over `planner.harness.available_families()`: an instance file belongs to a family by its
``family:`` key or its directory (`planner.harness.family_of`); each (instance, method) pair is one
point of a resumable sweep (`planner.sweep.run_sweep`), so the exact solves of many instances run in
parallel, locally or on Ray, and an interrupted comparison resumes.

Table columns: ``family, instance, method, kind (heuristic|exact), status, objective, bound, gap,
gap_reference, valid, seconds, message`` (``valid``: the independent validator's verdict on the
plan, None without a plan).  ``gap`` and ``gap_reference`` are `planner.compare`'s, per instance: the
same `planner.compare.reference_of` (the exact solver's proven optimum, else its bound, else the best
validated plan) and `planner.core.status.signed_gap`, so `planner compare FAMILY` shows the same gaps
for the same method and instance.  The summary gives each heuristic's mean and worst gap over the
instances where it found a plan, and ``no_plan``: on how many it found none (infeasible or failed).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from planner.compare import Scored, reference_of, run_method
from planner.core.outputs import write_files
from planner.core.status import signed_gap
from planner.errors import PlannerError
from planner.harness import RunOptions, available_families, family_of
from planner.sweep.engine import SweepPoint, SweepSummary, run_sweep

TABLE_COLUMNS = ("family", "instance", "method", "kind", "status", "objective", "bound", "gap", "gap_reference", "valid",
                 "seconds", "message")


def find_instances(instance_dir: Path, families: tuple[str, ...] | None = None) -> list[tuple[str, Path]]:
    """(family, path) of every instance file under ``instance_dir`` (recursive, sorted)."""
    if not instance_dir.exists():
        raise PlannerError(f"{instance_dir}: directory not found")
    if not instance_dir.is_dir():
        raise PlannerError(f"{instance_dir}: not a directory")
    present = available_families()
    if families is not None:
        unknown = [f for f in families if f not in present]
        if unknown:
            raise PlannerError(f"--family {unknown[0]!r}: not an available family ({', '.join(present)})")
        present = {k: v for k, v in present.items() if k in families}
    found = []
    for path in sorted(p for p in instance_dir.rglob("*") if p.suffix.lower() in (".yaml", ".yml") and p.is_file()):
        fam = family_of(path, present)
        if fam is not None:
            found.append((fam, path))
    if not found:
        raise PlannerError(f"{instance_dir}: no instance of the families {', '.join(present)} found "
                           "(YAML files with a family: key or under a directory named after the family)")
    return found


def run_compare_point(params: dict[str, Any]) -> dict[str, Any]:
    """Sweep function: one method of one family on one instance file."""
    import time

    harness = available_families()[params["family"]]
    start = time.perf_counter()
    problem = harness.load(Path(params["path"]))
    options = RunOptions(solver=params["solver"], time_limit=params["time_limit"], threads=params["threads"],
                         seed=params["seed"])
    result = run_method(harness, problem, params["method"], options)  # a method that cannot finish: infeasible
    validation = result.validation
    message = result.message
    if validation is not None and not validation.feasible:
        message = (message + "; " if message else "") + f"validator: {validation.summary()}"
    return {
        "status": result.status.value,
        "objective": result.objective,
        "bound": result.bound,
        "seconds": result.solve_seconds,
        "wall_seconds": time.perf_counter() - start,
        "validated": None if validation is None else bool(validation.feasible),
        "objective_offset": result.objective_offset,
        "message": message,
    }


def _fingerprint(instances: list[tuple[str, Path]], solver: str, time_limit: float, seed: int, threads: int = 1) -> str:
    h = hashlib.sha256(json.dumps([solver, time_limit, seed] + ([threads] if threads != 1 else [])).encode())
    for fam, path in instances:
        h.update(fam.encode())
        h.update(str(path.resolve()).encode())
        h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()[:16]


def compare_all(
    instance_dir: Path,
    out_dir: Path,
    *,
    solver: str = "highs",
    time_limit: float = 60.0,
    executor: str = "local",
    address: str | None = None,
    workers: int | None = None,
    families: tuple[str, ...] | None = None,
    seed: int = 0,
    threads: int = 1,
    progress: bool = True,
    force: bool = False,
) -> tuple[pd.DataFrame, SweepSummary]:
    """Run the comparison (resuming from ``out_dir/results.sqlite``); write compare.csv and summary.csv
    (all or none; over existing ones only with ``force``: `check_compare_files` refuses them up front).
    ``threads``: solver threads of each run (runs go in parallel: one by default)."""
    instances = find_instances(instance_dir, families)
    harnesses = available_families()
    points = []
    for fam, path in instances:
        harness = harnesses[fam]
        rel = str(path.relative_to(instance_dir))
        for method in (*harness.heuristics, harness.exact_method):
            points.append(SweepPoint(f"{fam}|{rel}|{method}", {
                "family": fam, "path": str(path.resolve()), "instance": rel, "method": method, "solver": solver,
                "time_limit": time_limit, "threads": threads, "seed": seed,
                "kind": "exact" if method == harness.exact_method else "heuristic",
            }))
    results, summary = run_sweep(points, run_compare_point, db_path=out_dir / "results.sqlite",
                                 fingerprint=_fingerprint(instances, solver, time_limit, seed, threads), executor=executor,
                                 workers=workers, address=address, progress=progress, description="compare all")
    table = build_table(points, results, summary.failures)
    write_files([(out_dir / COMPARE_FILES[0], table.to_csv(index=False)),
                 (out_dir / COMPARE_FILES[1], summarise(table).to_csv(index=False))], force)
    return table, summary


#: The result files `compare_all` writes into its output directory (beside ``results.sqlite``).
COMPARE_FILES = ("compare.csv", "summary.csv")


def check_compare_files(out_dir: Path, force: bool) -> None:
    """Before the sweep: one line if ``out_dir`` holds a result file of an earlier run and not ``force``."""
    existing = [name for name in COMPARE_FILES if os.path.lexists(out_dir / name)]
    for name in existing:
        if (out_dir / name).is_dir():
            raise PlannerError(f"--report {out_dir / name}: is a directory; the table cannot be written")
    if existing and not force:
        raise PlannerError(f"{out_dir}: already holds {', '.join(existing)} of an earlier run; pass --force to "
                           "overwrite them (finished runs are not solved again) or use another --report directory")


def build_table(points: list[SweepPoint], results: dict[str, Any], failures: dict[str, str]) -> pd.DataFrame:
    """One row per point; gaps to each instance's one reference (`planner.compare.reference_of`)."""
    harnesses = available_families()

    def scored(p: SweepPoint) -> Scored | None:
        res = results.get(p.key)
        if res is None:
            return None
        return Scored(p.params["method"], p.params["kind"], res["status"], res["objective"], res["bound"],
                      res.get("validated"))

    by_instance: dict[tuple[str, str], list[Scored]] = {}
    for p in points:
        entry = scored(p)
        if entry is not None:
            by_instance.setdefault((p.params["family"], p.params["instance"]), []).append(entry)
    references = {key: reference_of(entries, harnesses[key[0]].sense) for key, entries in by_instance.items()}
    rows = []
    for p in points:
        fam, inst = p.params["family"], p.params["instance"]
        res, entry = results.get(p.key), scored(p)
        if res is None or entry is None:
            rows.append({"family": fam, "instance": inst, "method": p.params["method"], "kind": p.params["kind"],
                         "status": "failed", "objective": None, "bound": None, "gap": None, "gap_reference": "", "valid": None,
                         "seconds": float("nan"), "message": failures.get(p.key, "not run")})
            continue
        reference, kind = references[(fam, inst)]
        offset = float(res.get("objective_offset") or 0.0)  # results stored before the field: no offset
        gap = signed_gap(res["objective"], reference, harnesses[fam].sense, offset) if entry.has_plan else None
        rows.append({"family": fam, "instance": inst, "method": p.params["method"], "kind": p.params["kind"],
                     "status": res["status"], "objective": res["objective"], "bound": res["bound"], "gap": gap,
                     "gap_reference": kind if gap is not None else "", "valid": res.get("validated"),
                     "seconds": res["seconds"], "message": res["message"]})
    return pd.DataFrame(rows, columns=list(TABLE_COLUMNS))


def summarise(table: pd.DataFrame) -> pd.DataFrame:
    """Mean and worst gap of each heuristic, per family (rows without a gap are left out)."""
    rows = []
    heur = table[(table.kind == "heuristic")]
    for (fam, method), frame in heur.groupby(["family", "method"], sort=False):
        gaps = pd.to_numeric(frame.gap, errors="coerce")
        valid = gaps.notna()
        no_plan = int(frame.objective.isna().sum())
        if not valid.any():
            rows.append({"family": fam, "method": method, "instances": 0, "no_plan": no_plan, "mean_gap": None,
                         "worst_gap": None, "worst_instance": ""})
            continue
        worst = int(np.nanargmax(gaps.to_numpy(dtype=float)))
        rows.append({"family": fam, "method": method, "instances": int(valid.sum()), "no_plan": no_plan,
                     "mean_gap": float(gaps[valid].mean()), "worst_gap": float(gaps.max()),
                     "worst_instance": str(frame.instance.iloc[worst])})
    return pd.DataFrame(rows, columns=["family", "method", "instances", "no_plan", "mean_gap", "worst_gap",
                                       "worst_instance"])
