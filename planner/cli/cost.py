"""`planner cost predict`: a cost model's prefill and per-token decode times for rows of a CSV; `planner cost derive`:
an Aladdin or bilinear file derived from a batch-time model (`planner.costmodels.derived`).

Reading of a row ``batch_size = b, prompt_tokens = p, output_tokens = o, context_tokens = k`` (k = 0 when
absent): b requests, each with p new prompt tokens over k tokens already cached, then o generated tokens.

* ``prefill_s``: one prefill iteration of the b prompts together (b chunks of p tokens over k cached).
* ``decode_s_per_token``: the mean time of one decode iteration of the b requests over the o generated
  tokens, i.e. the iteration time at the mean context ``k + p + o/2`` (every model here is linear in the
  context of a decode iteration, so the mean of the iterations is the iteration at the mean context; the
  same reading as `planner.costmodels.profiles.read_splitwise`).

Per model kind: batchtime → `BatchTimeModel.prefill_time` / `decode_step_time`; aladdin → Eq. 2 of
b·p tokens (no context term: k is ignored) / Eq. 3 with b·(mean context); bilinear and hetero → Eq. 14 /
Eq. 15 (hetero as its bilinear form); infermax → the §3.2 batch of b prefill chunks / b decode requests.
"""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from planner.cli.common import (ForceOption, JsonOption, check_output_file, cost_model_caveats, out, print_cost_caveats,
                               to_json, write_output)
from planner.errors import InputError, PlannerError

app = typer.Typer(help="Cost models: predict batch times from a model file; derive simpler forms from a batch-time model.",
                  no_args_is_help=True)


def load_any_cost_model(path: Path):
    """A cost-model file of any kind (batchtime, aladdin, bilinear, hetero, infermax)."""
    from planner.core.io import read_yaml_mapping  # noqa: PLC0415

    data = read_yaml_mapping(path)
    if data.get("kind") == "infermax":
        from planner.batching.costmodel import load_infermax_model  # noqa: PLC0415

        return load_infermax_model(path)
    if "kind" not in data:
        raise InputError(path, "kind", "required field is missing (batchtime, aladdin, bilinear, hetero or infermax)")
    if data["kind"] not in ("batchtime", "aladdin", "bilinear", "hetero"):
        raise InputError(path, "kind", f"unknown cost-model kind {data['kind']!r} "
                                       "(expected batchtime, aladdin, bilinear, hetero or infermax)")
    from planner.costmodels.files import load_cost_model  # noqa: PLC0415

    return load_cost_model(path)


def read_rows(path: Path):
    """The rows CSV: positive whole batch_size, prompt_tokens, output_tokens; optional context_tokens ≥ 0."""
    import numpy as np  # noqa: PLC0415 (imported when rows are read: CLI start-up stays light)

    from planner.core.io import read_csv_table  # noqa: PLC0415
    from planner.costmodels.profiles import check_positive_columns  # noqa: PLC0415

    table = read_csv_table(path, required={"batch_size": int, "prompt_tokens": int, "output_tokens": int},
                           optional={"context_tokens": int})
    check_positive_columns(table, path, ("batch_size", "prompt_tokens", "output_tokens"))
    if "context_tokens" in table:
        ctx = table.context_tokens.astype(float).to_numpy()
        bad = ~(ctx >= 0)
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            shown = "empty" if np.isnan(ctx[k]) else repr(f"{ctx[k]:g}")
            raise InputError(path, f"row {k + 1}, column context_tokens", f"must be 0 or more, got {shown}")
    else:
        table["context_tokens"] = 0
    return table.astype({"batch_size": float, "prompt_tokens": float, "output_tokens": float,
                         "context_tokens": float})


def predict(model, b: float, p: float, o: float, k: float) -> tuple[float, float]:
    """(prefill seconds, mean decode seconds per token) of one row under ``model`` (module docstring)."""
    mean_ctx = k + p + o / 2.0
    kind = getattr(model, "kind", "")
    if kind == "batchtime":
        return model.prefill_time(b, p, k), model.decode_step_time(b, mean_ctx)
    if kind == "aladdin":
        return model.prefill_time(b * p), model.decode_time(b, b * mean_ctx)
    if kind == "hetero":
        model = model.as_bilinear()
        kind = "bilinear"
    if kind == "bilinear":
        return model.prefill_time_s(b, p), model.decode_step_time_s(b, mean_ctx)
    if kind == "infermax":
        n = int(b)
        return (model.batch_seconds(b * p, b * p * p, n, 0.0, 0),
                model.batch_seconds(b, 0.0, 0, b * mean_ctx, n))
    raise PlannerError(f"cost model kind {kind!r} cannot predict rows")


@app.command("predict")
def predict_cmd(
    model_file: Path = typer.Argument(..., help="cost-model YAML (models/<kind>/...; any kind)"),
    rows_csv: Path = typer.Argument(..., help="CSV with batch_size, prompt_tokens, output_tokens[, context_tokens]"),
    out_path: Path = typer.Option(None, "--csv", help="also write the rows with their predictions as CSV to this file"),
    force: ForceOption = False,
    json_out: JsonOption = False,
) -> None:
    """Predicted prefill seconds and per-token decode seconds for each row, under MODEL_FILE."""
    check_output_file(out_path, force, "--csv")
    model = load_any_cost_model(model_file)
    table = read_rows(rows_csv)
    preds = [predict(model, *vals) for vals in table[["batch_size", "prompt_tokens", "output_tokens",
                                                      "context_tokens"]].itertuples(index=False, name=None)]
    table["prefill_s"] = [p for p, _ in preds]
    table["decode_s_per_token"] = [d for _, d in preds]
    for col in ("batch_size", "prompt_tokens", "output_tokens", "context_tokens"):
        table[col] = table[col].astype(int)
    provenance = getattr(model, "provenance", "") or ""
    caveats = [c.code for c in getattr(model, "caveats", None) or []]  # None: the file states none
    if out_path is not None:
        write_output(out_path, table.to_csv(index=False), force)
    records = table.to_dict(orient="records")
    if json_out:
        print(to_json({"model_file": str(model_file), "kind": getattr(model, "kind", ""), "provenance": provenance,
                       "caveats": caveats, "cost_model_caveats": cost_model_caveats(model), "rows_file": str(rows_csv),
                       "csv": str(out_path) if out_path else None, "rows": records}))
        return
    t = Table(title=f"Predicted times (s) under cost model {model_file} ({getattr(model, 'kind', '')}"
                    + (f"; caveats: {', '.join(caveats)}" if caveats else "") + ")", title_justify="left")
    for col in ("row", "batch", "prompt", "output", "context", "prefill s", "decode s/token"):
        t.add_column(col, justify="right")
    for i, r in enumerate(records, 1):
        t.add_row(str(i), str(r["batch_size"]), str(r["prompt_tokens"]), str(r["output_tokens"]),
                  str(r["context_tokens"]), f"{r['prefill_s']:.6g}", f"{r['decode_s_per_token']:.6g}")
    out.print(t)
    print_cost_caveats(model)
    if out_path is not None:
        out.print(f"wrote {out_path}")


@app.command("derive")
def derive_cmd(
    batchtime_file: Path = typer.Argument(..., help="batch-time model YAML (models/batchtime/...)"),
    out_path: Path = typer.Argument(..., help="the model file to write (YAML); never overwritten without --force"),
    kind: str = typer.Option(..., "--kind", help="form to write: aladdin, bilinear or infermax"),
    force: ForceOption = False,
    json_out: JsonOption = False,
) -> None:
    """Write an Aladdin, bilinear or InferMax model file derived from a batch-time model: its projected
    coefficients, the projection's error against the measured rows and the batch-time file's caveats
    (`planner.costmodels.derived`).  Every family reads it like a fitted file."""
    from planner.costmodels.derived import DERIVABLE, derived_cost_model  # noqa: PLC0415
    from planner.costmodels.files import save_cost_model  # noqa: PLC0415

    check_output_file(out_path, force, "OUT_PATH")
    source = load_any_cost_model(batchtime_file)
    if getattr(source, "kind", "") != "batchtime":
        raise InputError(batchtime_file, "kind", f"is {getattr(source, 'kind', '?')!r}; derive reads a batch-time "
                                                 "model (kind: batchtime)")
    if kind == "infermax":
        from planner.batching.costmodel import infermax_from_batchtime, save_infermax_model  # noqa: PLC0415

        model = infermax_from_batchtime(source, str(batchtime_file))
        save_infermax_model(model, out_path)
        what = f"{source.model} / {source.gpu} / TP {source.tensor_parallel}"
    elif kind in DERIVABLE:
        model = derived_cost_model(source, kind, str(batchtime_file))
        save_cost_model(model, out_path)
        what = f"{model.model} / {model.gpu} / TP {model.tensor_parallel}"
    else:
        raise PlannerError(f"--kind must be one of {', '.join((*DERIVABLE, 'infermax'))}, got {kind!r}")
    errors = ", ".join(f"{ph} {e.mape:.1f} %" for ph, e in model.measured_rows.phases.items())
    if json_out:
        print(to_json({"model_file": str(out_path), "kind": kind, "source": str(batchtime_file),
                       "provenance": model.provenance, "measured_rows": model.measured_rows.model_dump(mode="json"),
                       "caveats": [c.code for c in model.caveats or []],
                       "cost_model_caveats": cost_model_caveats(model)}))
        return
    out.print(f"wrote {out_path}: {kind} model of {what} derived from {batchtime_file}; error against the "
              f"{model.measured_rows.basis}: {errors}")
    print_cost_caveats(model)
