"""`planner models`: every shipped cost-model file with its kind, source, coverage and held-out error.

Per row: ``source`` (measured end-to-end / kernel composition / derived / published, read from the file);
``heldout`` with its ``heldout_basis`` (batch-time files: 5-fold cross-validation on measured rows; Aladdin,
bilinear and hetero files: their own 25 % hold-out, which for Vidur fits is on rows the fitter composed);
for Aladdin / bilinear / hetero files, from the file's own ``measured_rows`` section
(planner/costmodels/measured_error.py): ``measured_rows`` (the section), ``measured_rows_basis`` (measured
rows / batch-time model / none), ``measured_rows_mape`` (this file's coefficients on the measured rows of
its configuration) and ``measured_rows_heldout_mape`` (its form's 5-fold cross-validation on them);
``caveats`` (codes: the file's own, plus ``scored_on_synthesised_rows`` for a ``heldout`` on composed rows and
``no_measured_rows_section`` for a file that states no error against measured rows).
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


def describe_file(path: Path, kind: str) -> dict[str, Any]:
    """One row of `planner models` for ``path`` (read with the loader of its kind: a bad file is an error row)."""
    row: dict[str, Any] = {"file": str(path), "kind": kind}
    try:
        data = _read_checked(path, kind)
    except PlannerError as exc:
        return {**row, "error": str(exc)}
    row.update(model=data.get("model", data.get("name")), gpu=data.get("gpu"),
               tensor_parallel=data.get("tensor_parallel"), source=_source_of(kind, data))
    if kind == "batchtime":
        caveats = _describe_batchtime(row, data)
    elif kind == "infermax":
        caveats = _describe_infermax(row, data)
    else:
        caveats = _describe_fitted(row, data)
    if kind != "batchtime":
        caveats = _describe_measured_rows(row, data, caveats)
    row["caveats"] = caveats
    return row


def _read_checked(path: Path, kind: str) -> dict[str, Any]:
    """The file's mapping, once the loader of its kind has accepted it (else that loader's `PlannerError`)."""
    from planner.core.io import read_yaml_mapping  # noqa: PLC0415

    if kind == "infermax":
        from planner.batching.costmodel import load_infermax_model  # noqa: PLC0415

        load_infermax_model(path)
    else:
        from planner.costmodels.files import load_cost_model  # noqa: PLC0415

        load_cost_model(path)
    return read_yaml_mapping(path)


def _describe_batchtime(row: dict[str, Any], data: dict[str, Any]) -> list[str]:
    """Coverage, held-out error (5-fold cross-validation by configuration and by batch size) and derived
    forms of a batch-time file into ``row``; returns the file's caveat codes."""
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
    caveats = [c["code"] for c in data.get("caveats", [])]
    row["derived"] = {k: {"approximation_mape": d.get("approximation_mape"), "error_basis": d.get("error_basis"),
                          "current_file_mape": d.get("current_file_mape")}
                      for k, d in (data.get("derived") or {}).items()}
    return caveats


def _describe_infermax(row: dict[str, Any], data: dict[str, Any]) -> list[str]:
    """Held-out error per term of an InferMax file's ``fit_report`` into ``row`` (none for published
    coefficients); returns ``attention_extrapolated`` for a fitted file."""
    rep = data.get("fit_report") or {}
    row["coverage"] = None
    row["heldout"] = ({"non_attention": {"mape": rep.get("nonattention_holdout_mape_pct")},
                       "decode_attention": {"mape": rep.get("decode_attention_holdout_mape_pct")},
                       "prefill_attention": {"mape": rep.get("prefill_attention_holdout_mape_pct")}}
                      if rep else None)
    row["heldout_basis"] = ("25 % of profiled configurations held out, per term (fit_report)" if rep
                            else "none (published coefficients)")
    return ["attention_extrapolated"] if rep else []


def _describe_fitted(row: dict[str, Any], data: dict[str, Any]) -> list[str]:
    """Valid range and 25 % hold-out error of an Aladdin / bilinear / hetero file into ``row``, with the
    basis of that error by the file's source; returns ``scored_on_synthesised_rows`` for a kernel
    composition (its hold-out rows are composed by the fitter, not measured)."""
    caveats: list[str] = []
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
        basis = "none (derived, not fitted)"
    if row["source"] == "published":
        basis = "none (published coefficients)"
    row["heldout_basis"] = basis
    return caveats


def _describe_measured_rows(row: dict[str, Any], data: dict[str, Any], caveats: list[str]) -> list[str]:
    """The file's own error against the measured rows of its configuration (its ``measured_rows`` section,
    planner/costmodels/measured_error.py) into ``row``; returns ``caveats`` plus ``no_measured_rows_section``
    when the file states no such error, plus the file's own caveat codes not already listed."""
    measured = data.get("measured_rows")
    if measured is None:
        caveats.append("no_measured_rows_section")  # the file states no error against measured rows
    else:
        phases = measured.get("phases") or {}
        row["measured_rows_basis"] = measured.get("basis")
        row["measured_rows"] = measured
        if phases:
            row["measured_rows_mape"] = {ph: q.get("mape") for ph, q in phases.items()}
            if any(q.get("cv_mape") is not None for q in phases.values()):
                row["measured_rows_heldout_mape"] = {ph: q.get("cv_mape") for ph, q in phases.items()}
    caveats += [c["code"] for c in data.get("caveats") or [] if c["code"] not in caveats]
    return caveats


def _measured_cell(row: dict[str, Any], phase: str) -> str:
    """``file % / CV %`` of the file's ``measured_rows`` section, for the table."""
    basis = row.get("measured_rows_basis")
    if basis is None:
        return "-"
    if basis == "none":
        return "none"
    q = ((row.get("measured_rows") or {}).get("phases") or {}).get(phase) or {}
    if q.get("mape") is None:
        return "-"
    text = f"{q['mape']:.1f}%"
    if basis == "batch-time model":
        return f"{text} (model)"
    return text + ("" if q.get("cv_mape") is None else f" / {q['cv_mape']:.1f}%")


def models_cmd(
    models_dir: Path = typer.Option(None, "--models-dir", help="folder of model files (default: $PLANNER_MODELS_DIR, "
                                    "./models, or the one shipped beside the package)"),
    json_out: JsonOption = False,
) -> None:
    """List every cost-model file: kind, source, coverage and held-out error (and the basis of that error)."""
    from planner.costmodels.files import default_models_dir  # noqa: PLC0415

    root = Path(models_dir) if models_dir else default_models_dir()
    if not root.is_dir():
        raise PlannerError(f"{root}: models directory not found")
    rows = [describe_file(p, kind) for kind in COST_MODEL_KINDS
            for p in sorted((root / kind).glob("*.yaml"))]
    if json_out:
        print(to_json({"models_dir": str(root), "target_mape_pct": 5.0, "models": rows}))
        return
    t = Table(title=f"Cost-model files under {root}; held-out MAPE on rows not used for fitting (basis per kind: "
                    "see --json heldout_basis)", title_justify="left")
    for col in ("kind", "model", "gpu", "TP", "source", "prefill held-out", "decode held-out",
                "prefill measured file / CV", "decode measured file / CV", "caveats", "file"):
        t.add_column(col, overflow="fold" if col == "caveats" else "ellipsis", min_width=24 if col == "caveats" else None)
    for r in rows:
        if "error" in r:
            t.add_row(r["kind"], "-", "-", "-", "-", "-", "-", "-", "-", "unreadable", r["file"])
            continue
        held = r.get("heldout") or {}

        def pct(ph: str) -> str:
            v = (held.get(ph) or {}).get("mape")
            return "-" if v is None else f"{v:.1f}%"

        t.add_row(r["kind"], str(r["model"]), str(r["gpu"] or "-"), str(r["tensor_parallel"] or "-"), r["source"],
                  pct("prefill"), pct("decode"), _measured_cell(r, "prefill"), _measured_cell(r, "decode"),
                  "\n".join(r["caveats"]) or "-", Path(r["file"]).name)
    out.print(t)
    out.print("measured file / CV: this file's own MAPE on the measured rows of its configuration / its form's "
              "5-fold cross-validated MAPE on them; '(model)': scored against the batch-time model (the rows hold no "
              "attention); 'none': no measured rows; '-': batch-time files (their held-out IS on measured rows) or "
              "no section in the file.")
    bad = [r for r in rows if "error" in r]
    for r in bad:
        err.print(r["error"])
