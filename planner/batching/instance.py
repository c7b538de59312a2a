"""Batching instance files (YAML).

```yaml
family: batching
name: tiny
limits: {C: 4096, P: 4096, M: 100000, R_max: 8}   # P, R_max optional
cost_model: infermax-7b            # a published set name, a model file path, or an inline mapping
requests:                          # inline list, or `requests_csv: file.csv` (id,input_len,output_len[,arrival])
  - {id: a, input_len: 4, output_len: 2}
```
Every problem is one line naming file, field and problem (`InputError`).  Limits: input_len and
output_len at most 1,000,000 tokens each, C, P, M and R_max at most 10^12 (whole numbers; ``1.0e+6``
is read as 1000000), arrivals finite and ≥ 0 (`planner.batching.problem`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from planner.batching.costmodel import PUBLISHED, InferMaxCostModel, load_infermax_model
from planner.batching.problem import LIMIT_NAMES, BatchingProblem, Request
from planner.core.io import (
    check_family,
    format_validation_error,
    read_csv_table,
    read_yaml_mapping,
    resolve_relative,
    validate_model,
)
from planner.errors import InputError

KNOWN_KEYS = {"family", "name", "limits", "cost_model", "requests", "requests_csv", "description"}


def _cost_model(value: Any, path: Path) -> InferMaxCostModel:
    if value is None:
        return PUBLISHED["7b"]
    if isinstance(value, dict):
        return validate_model(InferMaxCostModel, value, path, "cost_model")
    if not isinstance(value, str):
        raise InputError(path, "cost_model", "expected a published set name, a file path or a mapping")
    key = value.lower().removeprefix("infermax-")
    if key in PUBLISHED:
        return PUBLISHED[key]
    target = resolve_relative(path, value)
    if not target.is_file():
        raise InputError(path, "cost_model", f"{value!r} is neither a published set ({', '.join(PUBLISHED)}) "
                                             "nor an existing file")
    return load_infermax_model(target)


def _requests(data: dict, path: Path) -> tuple[Request, ...]:
    if "requests_csv" in data:
        target = resolve_relative(path, data["requests_csv"])
        if not target.is_file():
            raise InputError(path, "requests_csv", f"file not found: {target}")
        frame = read_csv_table(target, {"input_len": int, "output_len": int}, {"id": str, "arrival": float})
        rows = [{key: (int(value) if key in ("input_len", "output_len") else value) for key, value in record.items()
                 if value is not None and not (isinstance(value, float) and math.isnan(value))}
                for record in frame.astype(object).to_dict("records")]
        source = target
    else:
        rows = data.get("requests")
        source = path
        if not isinstance(rows, list) or not rows:
            raise InputError(path, "requests", "required: a non-empty list of {id, input_len, output_len[, arrival]}")
    out = []
    for k, row in enumerate(rows):
        csv = source != path
        label = f"row {k + 1}" if csv else f"requests[{k}]"  # CSV rows as `read_csv_table` numbers them
        if not isinstance(row, dict):
            raise InputError(source, label, "expected a mapping")
        row = dict(row)
        row.setdefault("id", f"r{k}")
        row["id"] = str(row["id"])
        for key in ("input_len", "output_len"):
            value = row.get(key)
            if isinstance(value, (int, float)) and value < 0:
                raise InputError(source, f"{label}, column {key}" if csv else f"{label}.{key}",
                                 f"must not be negative, got {value}")
        if csv:
            try:
                out.append(Request.model_validate(row))
            except ValidationError as exc:
                field, message = format_validation_error(exc)
                raise InputError(source, f"{label}, column {field}", message) from None
        else:
            out.append(validate_model(Request, row, source, label))
    return tuple(out)


def load_batching_instance(path: Path | str) -> BatchingProblem:
    path = Path(path)
    data = read_yaml_mapping(path)
    check_family(data, path, "batching")
    unknown = set(data) - KNOWN_KEYS
    if unknown:
        raise InputError(path, sorted(unknown)[0], f"unknown field (expected one of: {', '.join(sorted(KNOWN_KEYS))})")
    limits = data.get("limits", {}) or {}
    if not isinstance(limits, dict):
        raise InputError(path, "limits", "expected a mapping with C, P, M, R_max")
    bad = set(limits) - set(LIMIT_NAMES)
    if bad:
        raise InputError(path, f"limits.{sorted(bad)[0]}", "unknown limit (expected C, P, M, R_max)")
    requests = _requests(data, path)
    try:
        return BatchingProblem(name=str(data.get("name", path.stem)), requests=requests,
                               cost=_cost_model(data.get("cost_model"), path), **limits)
    except ValidationError as exc:
        field, problem = format_validation_error(exc)
        if field.split(".")[0] in LIMIT_NAMES:
            field = f"limits.{field}"
        raise InputError(path, field, problem) from None


def save_batching_instance(problem: BatchingProblem, path: Path | str, cost_model: str | None = None) -> Path:
    path = Path(path)
    data: dict[str, Any] = {"family": "batching", "name": problem.name,
                            "limits": {k: v for k, v in (("C", problem.C), ("P", problem.P), ("M", problem.M),
                                                         ("R_max", problem.R_max)) if v is not None},
                            "cost_model": cost_model or problem.cost.model_dump(mode="json"),
                            "requests": [r.model_dump(exclude_defaults=True) | {"id": r.id} for r in problem.requests]}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False, width=200))
    return path
