"""`planner models`: every shipped cost-model file with its kind, source, coverage and held-out error.

Per row: ``source`` (measured end-to-end / kernel composition / derived / published, read from the file);
``heldout`` with its ``heldout_basis`` (batch-time files: 5-fold cross-validation on measured rows; Aladdin,
bilinear and hetero files: their own 25 % hold-out, which for Vidur fits is on rows the fitter composed);
for Aladdin / bilinear / hetero files with a batch-time file of the same configuration, also
``measured_rows_heldout_mape`` (the form's 5-fold cross-validation on that file's measured rows, when they
hold every term) and ``measured_rows_mape`` (this file's coefficients on those rows); ``caveats`` (codes).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from planner.cli.common import JsonOption, err, out, to_json
from planner.errors import PlannerError

#: Folders of cost-model files under the models directory (``workloads/`` holds no cost models).
COST_MODEL_KINDS = ("batchtime", "aladdin", "bilinear", "hetero", "infermax")


def _source_of(kind: str, data: dict[str, Any]) -> str:
    """measured end-to-end / kernel composition / derived / published, read from the file's own fields."""
    if kind == "batchtime":
        return str(data.get("source_kind", "unknown"))
    text = f"{data.get('provenance', '')} {(data.get('fit') or {}).get('source', '')}".lower()
    if "derived, not measured" in text or "derived from" in text:
        return "derived"
    if kind == "infermax" and "fit" not in text:
        return "published"
    if "perf_model.csv" in text or "splitwise" in text:
        return "measured end-to-end"
    if "vidur" in text or "mlp.csv" in text:
        return "kernel composition"
    return "unknown"


def describe_file(path: Path, kind: str, batchtime: dict[tuple[str, str, int], dict]) -> dict[str, Any]:
    """One row of `planner models` for ``path`` (read with the loader of its kind: a bad file is an error row)."""
    from planner.core.io import read_yaml_mapping  # noqa: PLC0415

    row: dict[str, Any] = {"file": str(path), "kind": kind}
    try:
        if kind == "infermax":
            from planner.batching.costmodel import load_infermax_model  # noqa: PLC0415

            load_infermax_model(path)
        else:
            from planner.costmodels.files import load_cost_model  # noqa: PLC0415

            load_cost_model(path)
        data = read_yaml_mapping(path)
    except PlannerError as exc:
        return {**row, "error": str(exc)}
    row.update(model=data.get("model", data.get("name")), gpu=data.get("gpu"),
               tensor_parallel=data.get("tensor_parallel"), source=_source_of(kind, data))
    caveats: list[str] = []
    if kind == "batchtime":
        cov = data.get("coverage") or {}
        row["coverage"] = {"prefill_batch_sizes": cov.get("prefill_batch_sizes"),
                           "decode_batch_sizes": cov.get("decode_batch_sizes"),
                           "prefill_tokens_per_request": cov.get("prefill_tokens_per_request"),
                           "decode_context_tokens": cov.get("decode_context_tokens")}
        phases = (data.get("fit") or {}).get("phases", {})
        row["heldout"] = {ph: {"mape": q["cv"]["configuration"].get("mape"),
                               "max_ape": q["cv"]["configuration"].get("max_ape"),
                               "batch_size_folds_mape": q["cv"]["batch_size"].get("mape")}
                          for ph, q in phases.items()}
        row["heldout_basis"] = ("5-fold cross-validation on measured rows (folds by configuration); terms scored: "
                                + str((data.get("fit") or {}).get("scored_terms", "")))
        caveats += [c["code"] for c in data.get("caveats", [])]
        row["derived"] = {k: {"approximation_mape": d.get("approximation_mape"), "error_basis": d.get("error_basis"),
                              "current_file_mape": d.get("current_file_mape")}
                          for k, d in (data.get("derived") or {}).items()}
    elif kind == "infermax":
        rep = data.get("fit_report") or {}
        row["coverage"] = None
        row["heldout"] = ({"non_attention": {"mape": rep.get("nonattention_holdout_mape_pct")},
                           "decode_attention": {"mape": rep.get("decode_attention_holdout_mape_pct")},
                           "prefill_attention": {"mape": rep.get("prefill_attention_holdout_mape_pct")}}
                          if rep else None)
        row["heldout_basis"] = ("25 % of profiled configurations held out, per term (fit_report)" if rep
                                else "none (published coefficients)")
        if rep:
            caveats.append("attention_extrapolated")
    else:
        vr = data.get("valid_range") or {}
        row["coverage"] = {"max_batch_size": vr.get("max_batch_size"),
                           "max_tokens_per_request": vr.get("max_tokens_per_request")}
        phases = (data.get("fit") or {}).get("phases", {})
        row["heldout"] = {ph: {"mape": q.get("holdout_mape"), "max_ape": q.get("holdout_max_ape")}
                          for ph, q in phases.items() if ph in ("prefill", "decode")} or None
        basis = "25 % of configurations held out"
        if row["source"] == "kernel composition":
            basis += " of rows composed by the fitter (includes extrapolated attention; not measured rows)"
            caveats.append("scored_on_synthesised_rows")
        if row["source"] == "derived":
            basis = "none on this hardware (derived from another GPU's fit)"
            caveats.append("derived_from_other_gpu")
        row["heldout_basis"] = basis
        key = (str(row["model"]), str(row["gpu"]), int(row["tensor_parallel"] or 0))
        form = kind if kind != "hetero" else "bilinear"
        bt = batchtime.get(key, {})
        derived = (bt.get("derived") or {}).get(form) or {}
        if derived.get("current_file_mape"):
            row["measured_rows_mape"] = derived["current_file_mape"]  # this file's coefficients, in-sample
        phases = (bt.get("fit") or {}).get("phases") or {}
        if all(form in (phases.get(ph) or {}).get("forms_cv", {}) for ph in ("prefill", "decode")):
            # 5-fold CV (configuration folds) of this form's least-squares fit on the measured rows
            row["measured_rows_heldout_mape"] = {ph: phases[ph]["forms_cv"][form]["direct"]
                                                 for ph in ("prefill", "decode")}
    row["caveats"] = caveats
    return row


def models_cmd(
    models_dir: Path = typer.Option(None, "--models-dir", help="folder of model files (default: $PLANNER_MODELS_DIR, "
                                    "./models, or the one shipped beside the package)"),
    json_out: JsonOption = False,
) -> None:
    """List every cost-model file: kind, source, coverage and held-out error (and the basis of that error)."""
    from planner.core.io import read_yaml_mapping  # noqa: PLC0415
    from planner.costmodels.files import default_models_dir  # noqa: PLC0415

    root = Path(models_dir) if models_dir else default_models_dir()
    if not root.is_dir():
        raise PlannerError(f"{root}: models directory not found")
    batchtime: dict[tuple[str, str, int], dict] = {}
    for path in sorted((root / "batchtime").glob("*.yaml")):
        try:
            data = read_yaml_mapping(path)
            batchtime[(str(data.get("model")), str(data.get("gpu")), int(data.get("tensor_parallel", 0)))] = data
        except (PlannerError, TypeError, ValueError):
            continue
    rows = [describe_file(p, kind, batchtime) for kind in COST_MODEL_KINDS
            for p in sorted((root / kind).glob("*.yaml"))]
    if json_out:
        print(to_json({"models_dir": str(root), "target_mape_pct": 5.0, "models": rows}))
        return
    t = Table(title=f"Cost-model files under {root}; held-out MAPE on rows not used for fitting (basis per kind: "
                    "see --json heldout_basis)", title_justify="left")
    for col in ("kind", "model", "gpu", "TP", "source", "prefill held-out", "decode held-out", "caveats", "file"):
        t.add_column(col)
    for r in rows:
        if "error" in r:
            t.add_row(r["kind"], "-", "-", "-", "-", "-", "-", "unreadable", r["file"])
            continue
        held = r.get("heldout") or {}

        def pct(ph: str) -> str:
            v = (held.get(ph) or {}).get("mape")
            return "-" if v is None else f"{v:.1f}%"

        t.add_row(r["kind"], str(r["model"]), str(r["gpu"] or "-"), str(r["tensor_parallel"] or "-"), r["source"],
                  pct("prefill"), pct("decode"), ", ".join(r["caveats"]) or "-", Path(r["file"]).name)
    out.print(t)
    bad = [r for r in rows if "error" in r]
    for r in bad:
        err.print(r["error"])
