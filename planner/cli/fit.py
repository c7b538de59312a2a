"""`planner fit`: cost models from profiling data, with held-out error."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from planner.cli.common import ForceOption, JsonOption, SeedOption, check_output_dir, err, out, run_progress, to_json
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
    raise PlannerError(f"--source-format must be one of {', '.join(FORMATS)}, got {fmt!r}")


def _guess_format(source: Path) -> str:
    if source.is_dir():
        return "vidur"
    if source.name == "perf_model.csv":
        return "splitwise"
    return "table"


def fit_cmd(
    source: Path = typer.Argument(..., help="profile: splitwise perf_model.csv, a Vidur profiling directory, or a batch-profile CSV"),
    fmt: str = typer.Option(None, "--source-format", help="splitwise | vidur | table (default: guessed from the path)"),
    kind: str = typer.Option("aladdin", help="aladdin, bilinear, hetero (p1..p8 of the heterogeneous-cluster paper), "
                             "both (aladdin + bilinear) or batchtime (one batch-time model per configuration, "
                             "k-fold cross-validated on measured rows)"),
    out_dir: Path = typer.Option(Path("models"), "--out-dir", help="where to write <kind>/<model>__<gpu>__tp<g>.yaml"),
    model: str = typer.Option(None, help="fit only this model (catalog name)"),
    gpu: str = typer.Option(None, help="fit only this GPU type"),
    tensor_parallel: int = typer.Option(None, "--tp", help="fit only this TP degree"),
    seed: SeedOption = 0,
    force: ForceOption = False,
    json_out: JsonOption = False,
) -> None:
    """Fit cost models by least squares and report held-out error (MAPE on rows not used for fitting).

    --seed draws the held-out split; --force overwrites existing model files in --out-dir."""
    from planner.costmodels.files import cost_model_filename

    _check_request(source, tensor_parallel, out_dir)
    fmt = fmt or _guess_format(source)
    if kind == "batchtime":
        if fmt not in FORMATS:
            raise PlannerError(f"--source-format must be one of {', '.join(FORMATS)}, got {fmt!r}")
        _fit_batchtime(source, fmt, out_dir, model, gpu, tensor_parallel, seed, force, json_out)
        return
    kinds = _fit_kinds(kind)
    from planner.costmodels.fitting import fit_groups  # scipy.optimize: imported only when fitting

    profile, dropped = _read(source, fmt)
    profile = _matching_profile(profile, source, model, gpu, tensor_parallel)
    rows = []
    skipped: list[str] = []
    for k in kinds:
        with run_progress(f"fitting {k} cost models on {len(profile):,} rows"):
            fitted_models, skipped_groups = fit_groups(profile, k, source=f"{source} ({UPSTREAM[fmt]})", seed=seed,
                                                       dropped_rows=dropped)
        skipped += skipped_groups
        for fitted in fitted_models:
            path = out_dir / cost_model_filename(k, fitted.model, fitted.gpu, fitted.tensor_parallel)
            written = _write_model(fitted, path, force, keep_measured=fmt != "splitwise")
            rows.append(_fit_row(k, fitted, path, written))
    if json_out:
        print(to_json({"source": str(source), "format": fmt, "dropped_rows": dropped, "models": rows, "skipped": skipped}))
        return
    _show_fits(source, fmt, rows, skipped, dropped)


def _check_request(source: Path, tensor_parallel: int | None, out_dir: Path) -> None:
    """Refuse, before any fitting, a missing source, a TP below 1 and an --out-dir that cannot be written."""
    if not source.exists():
        raise PlannerError(f"{source}: file not found")
    if tensor_parallel is not None and tensor_parallel < 1:
        raise PlannerError(f"--tp must be at least 1, got {tensor_parallel}")
    check_output_dir(out_dir, "--out-dir")  # before fitting: a file, or a place that cannot be written


def _fit_kinds(kind: str) -> tuple[str, ...]:
    """The per-phase forms ``--kind`` stands for (``both`` = aladdin + bilinear); any other word is refused."""
    kinds = ("aladdin", "bilinear") if kind == "both" else (kind,)
    for k in kinds:
        if k not in ("aladdin", "bilinear", "hetero"):
            raise PlannerError(f"--kind must be aladdin, bilinear, hetero (p1..p8), both or batchtime, got {kind!r}")
    return kinds


def _matching_profile(profile, source: Path, model: str | None, gpu: str | None, tensor_parallel: int | None):
    """The profile rows of the --model / --gpu / --tp filters (catalog names or aliases; case-insensitive);
    no matching row is an error."""
    from planner.catalog import canonical_gpu_name, canonical_model_name

    if model:
        profile = profile[profile.model.str.lower() == (canonical_model_name(model) or model).lower()]
    if gpu:
        profile = profile[profile.gpu.str.lower() == (canonical_gpu_name(gpu) or gpu).lower()]
    if tensor_parallel is not None:
        profile = profile[profile.tensor_parallel == tensor_parallel]
    if profile.empty:
        raise PlannerError(f"{source}: no profile rows match the --model/--gpu/--tp filters")
    return profile


def _write_model(fitted, path: Path, force: bool, *, keep_measured: bool) -> str:
    """Write ``fitted`` to ``path`` unless a file is there (then only with ``force``); returns the status
    shown for the file.  With ``keep_measured`` a file fitted on end-to-end measurements (`_measured_file`)
    is kept even with ``force``."""
    from planner.costmodels.files import save_cost_model

    if force and keep_measured and path.exists() and _measured_file(path):
        return "kept (the existing file is fitted on end-to-end measurements)"
    if path.exists() and not force:
        return "skipped (exists; --force to overwrite)"
    try:
        save_cost_model(fitted, path)
    except OSError as exc:  # a file where a directory should be, no permission, disk full
        raise PlannerError(f"{path}: cannot write the cost model: {exc.strerror or exc}") from None
    return "written"


def _fit_row(kind: str, fitted, path: Path, written: str) -> dict:
    """One reported row of an Aladdin / bilinear / hetero fit: train and held-out MAPE per phase."""
    phases = fitted.fit.phases if fitted.fit else {}
    return {
        "kind": kind,
        "model": fitted.model,
        "gpu": fitted.gpu,
        "tensor_parallel": fitted.tensor_parallel,
        "file": str(path),
        "status": written,
        **{f"{ph}_train_mape": q.train_mape for ph, q in phases.items()},
        **{f"{ph}_holdout_mape": q.holdout_mape for ph, q in phases.items()},
        **{f"{ph}_holdout_rows": q.holdout_rows for ph, q in phases.items()},
    }


def _show_fits(source: Path, fmt: str, rows: list[dict], skipped: list[str], dropped: int) -> None:
    """The table of an Aladdin / bilinear / hetero fit, then the skipped groups and dropped rows (stderr)."""
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


def _fit_batchtime(source: Path, fmt: str, out_dir: Path, model: str | None, gpu: str | None,
                   tensor_parallel: int | None, seed: int, force: bool, json_out: bool) -> None:
    """`planner fit --kind batchtime`: `planner.costmodels.batchtime` per (model, GPU, TP), with derived forms."""
    groups, skipped, dropped = _batchtime_groups(source, fmt)
    groups = _matching_groups(groups, source, model, gpu, tensor_parallel)
    rows = []
    for g in groups:
        row = _fit_batchtime_group(g, source, fmt, out_dir, seed, force, skipped)
        if row is not None:
            rows.append(row)
    if not rows:  # every group was refused: say why (one line) instead of an empty table
        raise PlannerError(skipped[0] if len(skipped) == 1 else f"{skipped[0]} (and {len(skipped) - 1} more groups)")
    if json_out:
        print(to_json({"source": str(source), "format": fmt, "kind": "batchtime", "dropped_rows": dropped,
                       "models": rows, "skipped": skipped}))
        return
    _show_batchtime_fits(source, fmt, rows, skipped, dropped)


def _batchtime_groups(source: Path, fmt: str) -> tuple[list, list[str], int]:
    """(measured-row groups per (model, GPU, TP), skipped-group reasons, rows dropped by the reader):
    Vidur kernel compositions (`batchtime_sources.vidur_groups`) or Splitwise / table rows
    (`batchtime_sources.splitwise_groups`)."""
    import warnings

    from planner.costmodels.batchtime_sources import splitwise_groups, vidur_groups

    if fmt == "vidur":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            groups, skipped = vidur_groups(source)
        return groups, skipped, 0
    profile, dropped = _read(source, fmt)
    return splitwise_groups(profile), [], dropped


def _matching_groups(groups: list, source: Path, model: str | None, gpu: str | None,
                     tensor_parallel: int | None) -> list:
    """The groups of the --model / --gpu / --tp filters (catalog names or aliases; case-insensitive);
    no matching group is an error."""
    from planner.catalog import canonical_gpu_name, canonical_model_name

    want_model = (canonical_model_name(model) or model).lower() if model else None
    want_gpu = (canonical_gpu_name(gpu) or gpu).lower() if gpu else None
    groups = [g for g in groups if (want_model is None or g.model.lower() == want_model)
              and (want_gpu is None or g.gpu.lower() == want_gpu)
              and (tensor_parallel is None or g.tensor_parallel == tensor_parallel)]
    if not groups:
        raise PlannerError(f"{source}: no profile rows match the --model/--gpu/--tp filters")
    return groups


def _fit_batchtime_group(g, source: Path, fmt: str, out_dir: Path, seed: int, force: bool,
                         skipped: list[str]) -> dict | None:
    """Fit, derive the per-phase forms of, and write the batch-time model of group ``g``; its reported row,
    or None when the fit refuses the group (the reason is appended to ``skipped``)."""
    from planner.costmodels.batchtime import derive_forms
    from planner.costmodels.batchtime_sources import fit_group
    from planner.costmodels.files import cost_model_filename

    label = f"{source} ({UPSTREAM[fmt]}) [model={g.model}, gpu={g.gpu}, tp={g.tensor_parallel}]"
    try:
        with run_progress(f"fitting the batch-time model of {g.model} on {g.gpu} TP {g.tensor_parallel}"):
            bt = fit_group(g, source=label, seed=seed)
    except PlannerError as exc:
        skipped.append(f"batchtime {g.model} on {g.gpu} tp{g.tensor_parallel}: skipped ({exc})")
        return None
    current = _current_files(g, out_dir)
    bt = bt.model_copy(update={"derived": derive_forms(bt, g.rows, layers=g.layers, current=current,
                                                       against_model=bool(g.attention_added))})
    path = out_dir / cost_model_filename("batchtime", bt.model, bt.gpu, bt.tensor_parallel)
    written = _write_model(bt, path, force, keep_measured=bt.source_kind != "measured end-to-end")
    return _batchtime_row(bt, path, written)


def _current_files(g, out_dir: Path) -> dict:
    """The readable Aladdin / bilinear files of group ``g`` already in ``out_dir`` ({kind: (path, model)}),
    scored by `derive_forms` on the group's rows; none when the rows lack the attention terms (the shipped
    forms can be scored only on rows that hold every term)."""
    from planner.costmodels.files import cost_model_filename, load_cost_model

    current = {}
    if g.attention_added:
        return current
    for k in ("aladdin", "bilinear"):
        existing = out_dir / cost_model_filename(k, g.model, g.gpu, g.tensor_parallel)
        if existing.exists():
            try:
                current[k] = (existing, load_cost_model(existing))
            except PlannerError:
                pass
    return current


def _batchtime_row(bt, path: Path, written: str) -> dict:
    """One reported row of a batch-time fit: train MAPE and the two cross-validated MAPEs per phase."""
    phases = bt.fit.phases if bt.fit else {}
    return {
        "kind": "batchtime", "model": bt.model, "gpu": bt.gpu, "tensor_parallel": bt.tensor_parallel,
        "source_kind": bt.source_kind, "file": str(path), "status": written,
        **{f"{ph}_train_mape": q.train_mape for ph, q in phases.items()},
        **{f"{ph}_cv_configuration_mape": q.cv["configuration"].mape for ph, q in phases.items()},
        **{f"{ph}_cv_batch_size_mape": q.cv["batch_size"].mape for ph, q in phases.items()},
        "caveats": [c.code for c in bt.caveats],
    }


def _show_batchtime_fits(source: Path, fmt: str, rows: list[dict], skipped: list[str], dropped: int) -> None:
    """The table of a batch-time fit, then the skipped groups and dropped rows (stderr)."""
    t = Table(title=f"Batch-time models from {source} ({fmt}); held-out MAPE = 5-fold cross-validation on measured "
                    "rows (folds by configuration / by tokens in the batch)", title_justify="left")
    for col in ("model", "gpu", "TP", "source", "prefill held-out conf/size", "decode held-out conf/size", "caveats",
                "file"):
        t.add_column(col)
    for r in rows:
        t.add_row(r["model"], r["gpu"], str(r["tensor_parallel"]), r["source_kind"],
                  f"{_pct(r.get('prefill_cv_configuration_mape'))} / {_pct(r.get('prefill_cv_batch_size_mape'))}",
                  f"{_pct(r.get('decode_cv_configuration_mape'))} / {_pct(r.get('decode_cv_batch_size_mape'))}",
                  ", ".join(r["caveats"]) or "-", f"{r['file']} ({r['status']})")
    out.print(t)
    for line in skipped:
        err.print(line)
    if dropped:
        err.print(f"{dropped} profile rows were dropped by the {fmt} reader (inconsistent; see its docstring).")


def _measured_file(path: Path) -> bool:
    """Whether the model file at ``path`` is fitted on end-to-end measurements (a batch-time file's
    ``source_kind``, an Aladdin / bilinear / hetero file's Splitwise provenance): such a file is never
    replaced by a kernel composition or another table, even with --force — measured end-to-end rows are
    the better source."""
    from planner.core.io import read_yaml_mapping

    try:
        data = read_yaml_mapping(path)
    except PlannerError:
        return False
    return (data.get("source_kind") == "measured end-to-end"
            or "splitwise" in str(data.get("provenance", "")).lower()
            and not str(data.get("provenance", "")).upper().startswith("DERIVED"))
