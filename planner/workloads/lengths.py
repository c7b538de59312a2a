"""Request-length distributions derived from real traces, and sampling from them.

A `LengthDistribution` is a compact description of the joint distribution of
(input tokens, output tokens) of a trace: input-length bins (log-spaced, with
their probabilities and within-bin input quantiles) and, per bin, the output
quantiles and the mean output.  It is what the project ships (``models/
workloads/*.yaml``) instead of the raw traces, with the source named in the
file.  The per-bin mean output is Aladdin's output predictor ("the historical
mean output length for the same input length").

Sampling (seeded): draw a bin by its probability, an input by inverse-CDF
interpolation of the bin's input quantiles, an output by inverse-CDF
interpolation of the bin's output quantiles.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pandas as pd
import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

from planner.core.io import MAX_TRACE_BYTES, read_input_text, read_yaml_mapping, validate_model
from planner.core.outputs import replace_atomically
from planner.errors import InputError, PlannerError

INPUT_QUANTILES = np.linspace(0.0, 1.0, 11)
OUTPUT_QUANTILES = np.linspace(0.0, 1.0, 21)


class LengthBin(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    probability: float = Field(gt=0.0, le=1.0)
    input_quantiles: list[float]
    output_quantiles: list[float]
    output_mean: float = Field(gt=0.0)

    @model_validator(mode="after")
    def _sorted(self) -> "LengthBin":
        for name in ("input_quantiles", "output_quantiles"):
            q = getattr(self, name)
            if len(q) < 2 or any(b < a for a, b in zip(q, q[1:])):
                raise ValueError(f"{name} must be a non-decreasing list of at least 2 values")
        return self


class LengthDistribution(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    source: str
    num_samples: int
    max_total_tokens: int | None = None
    bins: list[LengthBin]

    @model_validator(mode="after")
    def _probabilities(self) -> "LengthDistribution":
        total = sum(b.probability for b in self.bins)
        if not self.bins or abs(total - 1.0) > 1e-6:
            raise ValueError(f"bin probabilities must sum to 1 (got {total:.6f})")
        return self

    # ---- statistics -----------------------------------------------------------
    @property
    def mean_input(self) -> float:
        return float(sum(b.probability * np.mean(_quantile_mean(b.input_quantiles)) for b in self.bins))

    @property
    def mean_output(self) -> float:
        return float(sum(b.probability * b.output_mean for b in self.bins))

    def _bin_of(self, input_tokens: np.ndarray) -> np.ndarray:
        uppers = np.array([b.input_quantiles[-1] for b in self.bins])
        return np.minimum(np.searchsorted(uppers, input_tokens, side="left"), len(self.bins) - 1)

    def predict_output(self, input_tokens: np.ndarray | float) -> np.ndarray:
        """Aladdin's predictor: mean output of the input's bin (≥ 1 token)."""
        idx = self._bin_of(np.atleast_1d(np.asarray(input_tokens, dtype=float)))
        means = np.array([b.output_mean for b in self.bins])
        return np.maximum(np.rint(means[idx]), 1).astype(np.int64)

    def conditional_mean_output(self, input_tokens: float, generated: float) -> float:
        """E[o | o > generated, input bin] from the bin's output quantile function (Alg. 2 re-prediction)."""
        b = self.bins[int(self._bin_of(np.array([float(input_tokens)]))[0])]
        q = np.asarray(b.output_quantiles, dtype=float)
        values = np.interp(np.linspace(0.0, 1.0, 401), np.linspace(0.0, 1.0, q.size), q)
        above = values[values > generated]
        if above.size == 0:
            return float(generated + 1)
        return float(max(above.mean(), generated + 1))

    # ---- sampling -------------------------------------------------------------
    def sample(
        self, count: int, rng: np.random.Generator, max_total_tokens: int | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """``count`` (input, output) pairs, integers ≥ 1; pairs longer than ``max_total_tokens``
        (default: the distribution's own cap, e.g. the model's context length) are redrawn."""
        cap = max_total_tokens if max_total_tokens is not None else self.max_total_tokens
        if cap is not None and cap < 2:
            raise PlannerError(f"max_total_tokens must be at least 2, got {cap}")
        probs = np.array([b.probability for b in self.bins])
        inputs = np.empty(count, dtype=np.int64)
        outputs = np.empty(count, dtype=np.int64)
        filled = 0
        while filled < count:
            need = count - filled
            idx = rng.choice(len(self.bins), size=need, p=probs)
            u_in, u_out = rng.random(need), rng.random(need)
            inp = np.empty(need)
            out = np.empty(need)
            for k, b in enumerate(self.bins):
                sel = idx == k
                if not sel.any():
                    continue
                qi = np.asarray(b.input_quantiles)
                qo = np.asarray(b.output_quantiles)
                inp[sel] = np.interp(u_in[sel], np.linspace(0, 1, qi.size), qi)
                out[sel] = np.interp(u_out[sel], np.linspace(0, 1, qo.size), qo)
            inp = np.maximum(np.rint(inp), 1).astype(np.int64)
            out = np.maximum(np.rint(out), 1).astype(np.int64)
            ok = np.ones(need, dtype=bool) if cap is None else (inp + out <= cap)
            take = min(int(ok.sum()), need)
            inputs[filled : filled + take] = inp[ok][:take]
            outputs[filled : filled + take] = out[ok][:take]
            filled += take
        return inputs, outputs


def _quantile_mean(q: list[float]) -> float:
    """Mean of a distribution given by equally spaced quantiles (piecewise-linear inverse CDF)."""
    arr = np.asarray(q, dtype=float)
    return float(((arr[1:] + arr[:-1]) / 2).mean())


def derive_length_distribution(
    inputs: np.ndarray,
    outputs: np.ndarray,
    *,
    name: str,
    source: str,
    num_bins: int = 24,
    min_bin_mass: float = 0.005,
    max_total_tokens: int | None = None,
) -> LengthDistribution:
    """Summarise (input, output) samples as log-spaced input bins with quantiles."""
    inputs = np.asarray(inputs, dtype=float)
    outputs = np.asarray(outputs, dtype=float)
    keep = (inputs >= 1) & (outputs >= 1)
    if max_total_tokens is not None:
        keep &= inputs + outputs <= max_total_tokens
    inputs, outputs = inputs[keep], outputs[keep]
    if inputs.size < 50:
        raise PlannerError(f"{name}: need at least 50 samples to derive a distribution, got {inputs.size}")
    edges = np.unique(np.geomspace(inputs.min(), inputs.max() + 1, num_bins + 1))
    which = np.clip(np.searchsorted(edges, inputs, side="right") - 1, 0, edges.size - 2)
    # merge light bins into their right neighbour
    groups: list[np.ndarray] = []
    pending = np.zeros(inputs.size, dtype=bool)
    for k in range(edges.size - 1):
        pending |= which == k
        if pending.mean() >= min_bin_mass:
            groups.append(pending)
            pending = np.zeros(inputs.size, dtype=bool)
    if pending.any():
        if groups:
            groups[-1] = groups[-1] | pending
        else:
            groups.append(pending)
    bins = []
    for sel in groups:
        bins.append(
            LengthBin(
                probability=float(sel.mean()),
                input_quantiles=[float(v) for v in np.quantile(inputs[sel], INPUT_QUANTILES)],
                output_quantiles=[float(v) for v in np.quantile(outputs[sel], OUTPUT_QUANTILES)],
                output_mean=float(outputs[sel].mean()),
            )
        )
    total = sum(b.probability for b in bins)
    bins = [b.model_copy(update={"probability": b.probability / total}) for b in bins]
    return LengthDistribution(
        name=name, source=source, num_samples=int(inputs.size), max_total_tokens=max_total_tokens, bins=bins
    )


# ---- trace readers (for `planner workload derive` and tests; the traces stay in ../shared/data) ----

TRACE_FORMATS = ("sharegpt", "azure", "mooncake")


def read_trace_lengths(path: Path | str, fmt: str) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """(inputs, outputs, arrival seconds or None) of a trace file in a known format; one-line errors."""
    path = Path(path)
    if fmt not in TRACE_FORMATS:
        raise InputError(path, "format", f"unknown trace format {fmt!r} (expected one of {', '.join(TRACE_FORMATS)})")
    text = read_input_text(path, "a trace file", MAX_TRACE_BYTES)  # a regular UTF-8 file (planner.core.io)
    if fmt == "mooncake":
        return _read_mooncake(path, text)
    if "\x00" in text:
        raise InputError(path, "", "not a valid CSV (contains a NUL byte: binary data?)")
    try:
        df = pd.read_csv(io.StringIO(text))
    except (pd.errors.ParserError, pd.errors.EmptyDataError, ValueError) as exc:
        raise InputError(path, "", f"not a valid CSV ({str(exc).splitlines()[0][:200]})") from None
    columns = ("num_prefill_tokens", "num_decode_tokens") if fmt == "sharegpt" else (
        "TIMESTAMP", "ContextTokens", "GeneratedTokens")
    for col in columns:
        if col not in df:
            raise InputError(path, col, f"required column is missing ({fmt} trace format)")
    tokens = [c for c in columns if c != "TIMESTAMP"]
    for col in tokens:
        values = pd.to_numeric(df[col], errors="coerce")
        if values.isna().any():
            row = int(np.flatnonzero(values.isna().to_numpy())[0]) + 1
            raise InputError(path, f"row {row}, column {col}", f"not a number: {df[col].iloc[row - 1]!r}")
        df[col] = values
    if fmt == "sharegpt":
        return df[tokens[0]].to_numpy(), df[tokens[1]].to_numpy(), None
    ts = pd.to_datetime(df.TIMESTAMP, format="mixed", errors="coerce")
    if ts.isna().any():
        row = int(np.flatnonzero(ts.isna().to_numpy())[0]) + 1
        raise InputError(path, f"row {row}, column TIMESTAMP", f"not a timestamp: {df.TIMESTAMP.iloc[row - 1]!r}")
    arrival = (ts - ts.iloc[0]).dt.total_seconds().to_numpy()
    return _in_time_order(df[tokens[0]].to_numpy(), df[tokens[1]].to_numpy(), arrival)


def _in_time_order(inputs: np.ndarray, outputs: np.ndarray, arrival: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows sorted by arrival (stable, so ties keep file order), arrivals counted from the earliest request."""
    order = np.argsort(arrival, kind="stable")
    arrival = arrival[order]
    return inputs[order], outputs[order], arrival - arrival[0]


def _read_mooncake(path: Path, text: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rows = []
    for k, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise InputError(path, f"line {k}", f"not valid JSON ({exc.msg})") from None
        except (ValueError, RecursionError) as exc:  # an integer of > 4,300 digits; nesting too deep
            raise InputError(path, f"line {k}", f"not valid JSON ({str(exc).splitlines()[0][:120]})") from None
        if not isinstance(rows[-1], dict):
            raise InputError(path, f"line {k}", "expected a JSON object")
        for key in ("timestamp", "input_length", "output_length"):
            if not isinstance(rows[-1].get(key), (int, float)) or isinstance(rows[-1][key], bool):
                raise InputError(path, f"line {k}, field {key}", "missing or not a number")
    if not rows:
        raise InputError(path, "", "no requests")
    inp = np.array([r["input_length"] for r in rows])
    out = np.array([r["output_length"] for r in rows])
    arr = np.array([r["timestamp"] for r in rows], dtype=float) / 1000.0
    if not np.isfinite(arr).all():
        raise InputError(path, f"line {int(np.flatnonzero(~np.isfinite(arr))[0]) + 1}, field timestamp", "not a finite number")
    return _in_time_order(inp, out, arr)


def load_length_distribution(path: Path | str) -> LengthDistribution:
    return validate_model(LengthDistribution, read_yaml_mapping(path), path)


def save_length_distribution(dist: LengthDistribution, path: Path | str) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = dist.model_dump(mode="json")
    for b in data["bins"]:
        b["input_quantiles"] = [round(v, 2) for v in b["input_quantiles"]]
        b["output_quantiles"] = [round(v, 2) for v in b["output_quantiles"]]
        b["output_mean"] = round(b["output_mean"], 3)
        b["probability"] = round(b["probability"], 8)
    total = sum(b["probability"] for b in data["bins"])
    data["bins"][-1]["probability"] = round(data["bins"][-1]["probability"] + (1 - total), 8)
    header = f"# Request-length distribution '{dist.name}', derived by `planner workload derive` from: {dist.source}\n"
    return replace_atomically(path, header + yaml.safe_dump(data, sort_keys=False, width=200, default_flow_style=None,
                                                            allow_unicode=True))
