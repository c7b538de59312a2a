"""`planner fit`: cost models from profiling data, with held-out error."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from planner.cli.common import JsonOption, check_output_dir, err, out, to_json
from planner.errors import PlannerError

FORMATS = ("splitwise", "vidur", "table")
UPSTREAM = {
    "splitwise": "splitwise-sim data/perf_model.csv, Mutinifni/splitwise-sim@8f99e7d, MIT",
    "vidur": "Vidur per-layer profiles, microsoft/vidur@7d47513 (+ legacy attention/all-reduce files), MIT; "
    "kernel-only composition with extrapolated attention (planner/costmodels/vidur.py): a lower bound on end-to-end time",
    "table": "user batch-profile table",
}


def _read(source: Path, fmt: str):
    from planner.costmodels.profiles import read_profile_table, read_splitwise

    if fmt == "splitwise":
        return read_splitwise(source)
    if fmt == "vidur":
        from planner.costmodels.vidur import read_vidur

        return read_vidur(source)
    if fmt == "table":
        return read_profile_table(source), 0
    raise PlannerError(f"--format must be one of {', '.join(FORMATS)}, got {fmt!r}")


def _guess_format(source: Path) -> str:
    if source.is_dir():
        return "vidur"
    if source.name == "perf_model.csv":
        return "splitwise"
    return "table"


def fit_cmd(
    source: Path = typer.Argument(..., help="profile: splitwise perf_model.csv, a Vidur profiling directory, or a batch-profile CSV"),
    fmt: str = typer.Option(None, "--format", help="splitwise | vidur | table (default: guessed from the path)"),
    kind: str = typer.Option("aladdin", help="aladdin, bilinear, hetero (p1..p8 of the heterogeneous-cluster paper) or both (aladdin + bilinear)"),
    out_dir: Path = typer.Option(Path("models"), "--out-dir", help="where to write <kind>/<model>__<gpu>__tp<g>.yaml"),
    model: str = typer.Option(None, help="fit only this model (catalog name)"),
    gpu: str = typer.Option(None, help="fit only this GPU type"),
    tensor_parallel: int = typer.Option(None, "--tp", help="fit only this TP degree"),
    seed: int = typer.Option(0, help="seed of the held-out split"),
    force: bool = typer.Option(False, help="overwrite existing model files"),
    json_out: JsonOption = False,
) -> None:
    """Fit cost models by least squares and report held-out error (MAPE on rows not used for fitting)."""
    from planner.costmodels.files import cost_model_filename, save_cost_model

    if not source.exists():
        raise PlannerError(f"{source}: file not found")
    if tensor_parallel is not None and tensor_parallel < 1:
        raise PlannerError(f"--tp must be at least 1, got {tensor_parallel}")
    check_output_dir(out_dir, "--out-dir")  # before fitting: a file, or a place that cannot be written
    fmt = fmt or _guess_format(source)
    kinds = ("aladdin", "bilinear") if kind == "both" else (kind,)
    for k in kinds:
        if k not in ("aladdin", "bilinear", "hetero"):
            raise PlannerError(f"--kind must be aladdin, bilinear, hetero (p1..p8) or both, got {kind!r}")
    from planner.costmodels.fitting import fit_groups  # scipy.optimize: imported only when fitting

    profile, dropped = _read(source, fmt)
    from planner.catalog import canonical_gpu_name, canonical_model_name

    if model:
        profile = profile[profile.model.str.lower() == (canonical_model_name(model) or model).lower()]
    if gpu:
        profile = profile[profile.gpu.str.lower() == (canonical_gpu_name(gpu) or gpu).lower()]
    if tensor_parallel is not None:
        profile = profile[profile.tensor_parallel == tensor_parallel]
    if profile.empty:
        raise PlannerError(f"{source}: no profile rows match the --model/--gpu/--tp filters")
    rows = []
    skipped: list[str] = []
    for k in kinds:
        fitted_models, skipped_groups = fit_groups(profile, k, source=f"{source} ({UPSTREAM[fmt]})", seed=seed, dropped_rows=dropped)
        skipped += skipped_groups
        for fitted in fitted_models:
            path = out_dir / cost_model_filename(k, fitted.model, fitted.gpu, fitted.tensor_parallel)
            written = "skipped (exists; --force to overwrite)"
            if force or not path.exists():
                try:
                    save_cost_model(fitted, path)
                except OSError as exc:  # a file where a directory should be, no permission, disk full
                    raise PlannerError(f"{path}: cannot write the cost model: {exc.strerror or exc}") from None
                written = "written"
            phases = fitted.fit.phases if fitted.fit else {}
            rows.append(
                {
                    "kind": k,
                    "model": fitted.model,
                    "gpu": fitted.gpu,
                    "tensor_parallel": fitted.tensor_parallel,
                    "file": str(path),
                    "status": written,
                    **{f"{ph}_train_mape": q.train_mape for ph, q in phases.items()},
                    **{f"{ph}_holdout_mape": q.holdout_mape for ph, q in phases.items()},
                    **{f"{ph}_holdout_rows": q.holdout_rows for ph, q in phases.items()},
                }
            )
    if json_out:
        print(to_json({"source": str(source), "format": fmt, "dropped_rows": dropped, "models": rows, "skipped": skipped}))
        return
    t = Table(title=f"Fitted cost models from {source} ({fmt}); held-out = configurations not used for fitting",
              title_justify="left")
    for col in ("kind", "model", "gpu", "TP", "prefill MAPE train/held-out", "decode MAPE train/held-out", "file"):
        t.add_column(col)
    for r in rows:
        t.add_row(
            r["kind"], r["model"], r["gpu"], str(r["tensor_parallel"]),
            f"{r['prefill_train_mape']:.1f}% / {_pct(r.get('prefill_holdout_mape'))}",
            f"{r['decode_train_mape']:.1f}% / {_pct(r.get('decode_holdout_mape'))}",
            f"{r['file']} ({r['status']})",
        )
    out.print(t)
    for line in skipped:
        err.print(line)
    if dropped:
        err.print(f"{dropped} profile rows were dropped by the {fmt} reader (inconsistent or out of the profiled range; "
                  "see its docstring).")


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}%"
