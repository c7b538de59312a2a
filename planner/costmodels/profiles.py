"""Profile readers: turn profiling data into one tidy *batch profile* table.

Every source becomes rows with the columns of `PROFILE_COLUMNS`:

* ``phase``: ``prefill`` (time of one prefill batch) or ``decode`` (time of one
  decode iteration);
* ``batch_size`` b and ``tokens_per_request``: prompt length for prefill, mean
  context length per request over the measured decode iterations for decode;
* ``time_s``; ``config_id`` (rows of one measured configuration share it, so
  the held-out split never leaks repetitions of a configuration into training).

Sources:

* ``splitwise``: ``perf_model.csv`` of splitwise-sim (batch-level DGX-A100/H100
  measurements of Llama-2-70B and BLOOM-176B with TP).
* ``table``: a user CSV already in this schema (``time_ms`` or ``time_s``).
* ``vidur``: per-layer Vidur operator profiles composed into batch times
  (see `planner.costmodels.vidur`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from planner.catalog import canonical_gpu_name, canonical_model_name
from planner.core.io import read_csv_table
from planner.errors import InputError

PROFILE_COLUMNS = [
    "model",
    "gpu",
    "tensor_parallel",
    "phase",
    "batch_size",
    "tokens_per_request",
    "time_s",
    "config_id",
]

# splitwise-sim names → catalog names (DGX machines are SXM parts).
_SPLITWISE_GPU = {"a100-80gb": "A100-80GB-SXM", "h100-80gb": "H100-80GB-SXM", "h100-80gb-pcap": "H100-80GB-SXM-pcap"}
_SPLITWISE_MODEL = {"llama2-70b": "Llama-2-70B", "bloom-176b": "BLOOM-176B"}

#: A splitwise row is kept only if its own end-to-end time agrees with
#: ``prompt_time + (token_size − 1)·token_time`` within this relative tolerance.
SPLITWISE_CONSISTENCY_TOLERANCE = 0.10


def _cell_text(value: float) -> str:
    value = float(value)
    return str(int(value)) if np.isfinite(value) and value.is_integer() else str(value)


def check_positive_columns(table: pd.DataFrame, path: Path | str, columns: tuple[str, ...]) -> None:
    """Each listed column must hold finite positive numbers: else ``row N, column c: must be positive, got '-5'``.

    Rows are 1-based data rows, as in `read_csv_table` messages.
    """
    for col in columns:
        if col not in table:
            continue
        values = table[col].astype(float).to_numpy()
        bad = ~(np.isfinite(values) & (values > 0))
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            if np.isnan(values[k]):
                problem = "must be a positive number"
            elif not np.isfinite(values[k]):
                problem = "must be finite"
            else:
                problem = "must be positive"
            raise InputError(path, f"row {k + 1}, column {col}", f"{problem}, got {_cell_text(values[k])!r}")


def read_splitwise(path: Path | str) -> tuple[pd.DataFrame, int]:
    """Read splitwise-sim ``perf_model.csv``; return (profile rows, rows dropped as inconsistent).

    Consistency filter: upstream notes that ``e2e_time ≈ prompt_time +
    (token_size−1)·token_time`` "for most rows, but not every row fits".  Rows
    where it fails by more than 10 % did not run the configuration their
    columns describe (e.g. batch 64 at TP2 reports a 794 ms prefill, 8× less
    than batch 32, while its e2e is 160 s; decodes of ≥ 1024 tokens report an
    e2e that implies ~580 generated tokens).  Those rows are dropped from both
    phases and counted.

    Decode context: a request with prompt p generating T tokens holds
    p + k tokens at decode step k = 1..T−1, a mean of p + T/2.
    """
    table = read_csv_table(
        path,
        required={
            "model": str,
            "hardware": str,
            "prompt_size": int,
            "batch_size": int,
            "token_size": int,
            "prompt_time": float,
            "token_time": float,
            "e2e_time": float,
            "tensor_parallel": int,
        },
        optional={"peak_power": float, "average_power": float},
    )
    check_positive_columns(table, path, ("prompt_size", "batch_size", "token_size", "tensor_parallel",
                                         "prompt_time", "token_time", "e2e_time"))
    predicted = table.prompt_time + (table.token_size - 1) * table.token_time
    consistent = (predicted - table.e2e_time).abs() <= SPLITWISE_CONSISTENCY_TOLERANCE * table.e2e_time
    dropped = int((~consistent).sum())
    kept = table[consistent]
    model = kept.model.map(lambda m: _SPLITWISE_MODEL.get(m, m))
    gpu = kept.hardware.map(lambda h: _SPLITWISE_GPU.get(h, h))
    config = (
        kept.prompt_size.astype(str) + "-" + kept.batch_size.astype(str) + "-" + kept.token_size.astype(str)
    )
    common = {
        "model": model.to_numpy(),
        "gpu": gpu.to_numpy(),
        "tensor_parallel": kept.tensor_parallel.astype(int).to_numpy(),
        "batch_size": kept.batch_size.astype(int).to_numpy(),
        "config_id": config.to_numpy(),
    }
    prefill = pd.DataFrame(
        {
            **common,
            "phase": "prefill",
            "tokens_per_request": kept.prompt_size.astype(float).to_numpy(),
            "time_s": kept.prompt_time.to_numpy() / 1000.0,
        }
    )
    decode = pd.DataFrame(
        {
            **common,
            "phase": "decode",
            "tokens_per_request": (kept.prompt_size + kept.token_size / 2.0).astype(float).to_numpy(),
            "time_s": kept.token_time.to_numpy() / 1000.0,
        }
    )
    return pd.concat([prefill, decode], ignore_index=True)[PROFILE_COLUMNS], dropped


def read_profile_table(path: Path | str) -> pd.DataFrame:
    """Read a CSV already in the batch-profile schema (``time_ms`` or ``time_s``)."""
    table = read_csv_table(
        path,
        required={"phase": str, "batch_size": int, "tokens_per_request": float},
        optional={
            "time_ms": float,
            "time_s": float,
            "model": str,
            "gpu": str,
            "tensor_parallel": int,
            "config_id": str,
        },
    )
    if "time_s" not in table and "time_ms" not in table:
        raise InputError(path, "time_s", "required column is missing (give time_s or time_ms)")
    if "time_s" not in table:
        table["time_s"] = table.pop("time_ms") / 1000.0
    elif "time_ms" in table:
        table = table.drop(columns="time_ms")
    bad_phase = ~table.phase.isin(["prefill", "decode"])
    if bad_phase.any():
        row = int(np.flatnonzero(bad_phase.to_numpy())[0]) + 1
        raise InputError(path, f"row {row}, column phase", f"must be prefill or decode, got {table.phase.iloc[row - 1]!r}")
    check_positive_columns(table, path, ("batch_size", "tokens_per_request", "time_s"))
    table["model"] = table.get("model", pd.Series(["unknown"] * len(table))).fillna("unknown")
    table["gpu"] = table.get("gpu", pd.Series(["unknown"] * len(table))).fillna("unknown")
    table["tensor_parallel"] = table.get("tensor_parallel", pd.Series([1] * len(table))).fillna(1).astype(int)
    if "config_id" not in table:
        table["config_id"] = [f"row{i}" for i in range(len(table))]
    table["model"] = table.model.map(lambda m: canonical_model_name(m) or m)
    table["gpu"] = table.gpu.map(lambda g: canonical_gpu_name(g) or g)
    table["batch_size"] = table.batch_size.astype(int)
    return table[PROFILE_COLUMNS]
