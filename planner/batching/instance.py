"""Batching instance files (YAML).

```yaml
family: batching
name: tiny
limits: {C: 4096, P: 4096, M: 100000, R_max: 8}   # P, R_max optional
cost_model: infermax-7b            # a published set name, a model file path, or an inline mapping
requests:                          # inline list, or `requests_csv: file.csv`
  - {request_id: a, input_tokens: 4, output_tokens: 2}   # optional arrival_s (seconds, default 0)
```
A CSV has the columns ``request_id,input_tokens,output_tokens[,arrival_s]``: the field names and units of
`planner.core.types.Request`.  The keys of earlier files (``id``, ``input_len``, ``output_len``,
``arrival``) are refused with a line naming the key that replaced each (`problem.RENAMED_REQUEST_KEYS`).
Every problem is one line naming file, field and problem (`InputError`).  Limits: input_tokens and
output_tokens at most 1,000,000 tokens each, C, P, M and R_max at most 10^12 (whole numbers; ``1.0e+6``
is read as 1000000, while YAML reads ``1e6`` as text, which is refused like any text where a number
belongs: `planner.core.io.check_numbers`), arrivals finite and ≥ 0 (`planner.batching.problem`).  The
``name`` is text.  Give ``requests`` or ``requests_csv``, not both; ids are text or whole numbers, unique
(in a CSV, duplicates are named by row).  Cost-model limits: `planner.batching.costmodel`.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from planner.batching.costmodel import PUBLISHED, InferMaxCostModel, load_infermax_model
from planner.batching.problem import LIMIT_NAMES, RENAMED_REQUEST_KEYS, BatchingProblem, Request
from planner.core.io import (
    MAX_REQUEST_TOKENS,
    MAX_TABLE_BYTES,
    MAX_YAML_BYTES,
    check_family,
    check_input_file,
    check_numbers,
    format_validation_error,
    name_field,
    read_csv_table,
    read_input_text,
    read_yaml_mapping,
    resolve_relative,
    shown,
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
    if not os.path.lexists(target):
        raise InputError(path, "cost_model", f"{shown(value)} is neither a published set ({', '.join(PUBLISHED)}) "
                                             "nor an existing file")
    check_input_file(target, "an infermax cost-model file", MAX_YAML_BYTES, source=path, field="cost_model")
    return load_infermax_model(target)


def _shown(value: Any) -> str:
    """A YAML value as the user wrote it: ``null``, ``true``, ``123``, ``a list``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, str) and not value.strip():
        return "an empty string"
    return shown(value)


def _csv_path(data: dict, path: Path) -> Path:
    value = data["requests_csv"]
    if "requests" in data:
        raise InputError(path, "requests_csv", "give either requests or requests_csv, not both")
    if not isinstance(value, str) or not value.strip():
        raise InputError(path, "requests_csv", f"expected a CSV file path, got {_shown(value)}")
    target = resolve_relative(path, value)
    return check_input_file(target, "a CSV file", MAX_TABLE_BYTES, source=path, field="requests_csv")


def _request_id(value: Any, source: Path, where: str) -> str:
    """An id is text or a whole number (``7`` → "7"); null, booleans, floats and lists are refused."""
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    problem = f"expected a string or a whole number, got {_shown(value)}"
    if isinstance(value, bool):
        problem += " (YAML reads unquoted yes/no/on/off/true/false as booleans: quote the id)"
    raise InputError(source, where, problem)


def _renamed(old: str) -> str:
    """The one-line problem of a request key of earlier files."""
    return f"renamed: use {RENAMED_REQUEST_KEYS[old]} (the field names and units of planner.core.types.Request)"


def _refuse_renamed_columns(target: Path, path: Path) -> None:
    """A CSV whose header has a column of earlier files is refused naming the column that replaced it."""
    text = read_input_text(target, "a CSV file", MAX_TABLE_BYTES, source=path, field="requests_csv")
    header = next((line for line in text.lstrip("\ufeff").splitlines() if line.strip()), "")
    names = {name.strip().strip('"').strip() for name in header.split(",")}
    old = next((key for key in RENAMED_REQUEST_KEYS if key in names), None)
    if old is not None:
        raise InputError(target, old, _renamed(old))


def _request_rows(data: dict, path: Path) -> tuple[list, Path]:
    """The request rows (mappings) and the file they came from (the instance, or its CSV)."""
    if "requests_csv" not in data:
        rows = data.get("requests")
        if not isinstance(rows, list) or not rows:
            raise InputError(path, "requests",
                             "required: a non-empty list of {request_id, input_tokens, output_tokens[, arrival_s]}")
        return rows, path
    target = _csv_path(data, path)
    _refuse_renamed_columns(target, path)
    frame = read_csv_table(target, {"input_tokens": int, "output_tokens": int},
                           {"request_id": str, "arrival_s": float},
                           maximum={"input_tokens": MAX_REQUEST_TOKENS, "output_tokens": MAX_REQUEST_TOKENS})
    rows = [{key: (int(value) if key in ("input_tokens", "output_tokens") else value)
             for key, value in record.items()
             if value is not None and not (isinstance(value, float) and math.isnan(value))}
            for record in frame.astype(object).to_dict("records")]
    return rows, target


def _requests(data: dict, path: Path) -> tuple[Request, ...]:
    rows, source = _request_rows(data, path)
    csv = source != path
    out = []
    first_row: dict[str, int] = {}
    for k, row in enumerate(rows):
        label = f"row {k + 1}" if csv else f"requests[{k}]"  # CSV rows as `read_csv_table` numbers them
        if not isinstance(row, dict):
            raise InputError(source, label, "expected a mapping")
        row = dict(row)
        old = next((key for key in RENAMED_REQUEST_KEYS if key in row), None)
        if old is not None:
            raise InputError(source, f"{label}.{old}", _renamed(old))
        where = f"{label}, column request_id" if csv else f"{label}.request_id"
        row["request_id"] = _request_id(row["request_id"], source, where) if "request_id" in row else f"r{k}"
        if csv:  # the YAML list's duplicates are named by `BatchingProblem` (requests[i] and requests[k])
            rid = row["request_id"]
            if rid in first_row:
                raise InputError(source, "request_id", f"duplicate request id {rid!r} "
                                                       f"(rows {first_row[rid] + 1} and {k + 1})")
            first_row[rid] = k
        for key in ("input_tokens", "output_tokens"):
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
    check_numbers(BatchingProblem, limits, path, "limits")  # "12" or true is not a limit
    try:
        return BatchingProblem(name=name_field(data, "name", path.stem, path), requests=requests,
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
                            "requests": [r.model_dump(exclude_defaults=True) | {"request_id": r.request_id}
                                         for r in problem.requests]}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False, width=200))
    return path
