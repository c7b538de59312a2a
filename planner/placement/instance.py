"""Placement instance files: a YAML scenario plus a CSV of requests.

Scenario (``*.yaml``)::

    name: sharegpt-70b-a100-small
    description: one heartbeat of ShareGPT requests on Llama-2-70B, 2xA100 workers
    model: Llama-2-70B              # catalog name or alias, or a mapping of LLMSpec fields
    gpu: A100-80GB-SXM              # catalog name or alias, or a mapping of GPUSpec fields
    tensor_parallel: 2
    memory_utilization: 1.0         # optional (vLLM gpu_memory_utilization)
    cost_model: ../../models/aladdin/llama-2-70b__a100-80gb-sxm__tp2.yaml   # relative to this file
    slos:
      default: {ttft_s: 1.6, atgt_s: 0.075}
    placement: {mode: colocated, strictness: 0.5, kv_headroom: 1.0, max_workers: null}
    requests: requests.csv          # relative to this file

Requests (``*.csv``), one row per request::

    request_id,arrival_s,input_tokens,output_tokens,predicted_output_tokens,slo_class[,worker,generated_tokens,decode_s]

A row with ``worker`` set is an *ongoing* request (it must also give
``generated_tokens``; ``decode_s`` defaults to 0).  Cells are read by
`planner.core.io.read_csv_table`: spaces around a cell are not part of it (``" 12 "`` in the
``worker`` column is worker 12), spaces inside a number make it not a number.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
import pandas as pd
import yaml
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from planner.catalog import (
    canonical_gpu_name,
    canonical_model_name,
    find_gpu,
    find_model,
    gpu_alias_problem,
    gpu_names,
    model_names,
)
from planner.core.io import (
    MAX_REQUEST_TOKENS,
    MAX_TABLE_BYTES,
    MAX_YAML_BYTES,
    NotBool,
    check_input_file,
    format_validation_error,
    read_csv_table,
    read_yaml_mapping,
    resolve_relative,
    validate_model,
)
from planner.core.types import GPUSpec, LLMSpec, PlannedRequest, SLOClass, SLOSet, WorkerConfig
from planner.core.outputs import replace_atomically
from planner.costmodels.files import load_cost_model
from planner.costmodels.models import AladdinCostModel
from planner.errors import InputError
from planner.placement.problem import OngoingState, PlacementOptions, PlacementProblem

REQUEST_COLUMNS = {
    "request_id": str,
    "input_tokens": int,
    "output_tokens": int,
    "predicted_output_tokens": int,
}
OPTIONAL_COLUMNS = {"arrival_s": float, "slo_class": str, "worker": int, "generated_tokens": int, "decode_s": float}
#: Token counts of a request (prompt, output, prediction, generated so far) are at most `MAX_REQUEST_TOKENS`,
#: as in every family: the KV footprints are kept per future iteration.
TOKEN_MAXIMUM = {col: MAX_REQUEST_TOKENS for col in
                 ("input_tokens", "output_tokens", "predicted_output_tokens", "generated_tokens")}
#: Float columns, which must be finite when given (``inf`` parses as a number; ``nan`` is refused as "not a number").
FINITE_COLUMNS = ("arrival_s", "decode_s")


def _name_or_fields(value: Any) -> Any:
    """``model``/``gpu``: a catalog name or a mapping of fields; anything else is one message naming the
    field itself (pydantic would name the union member it tried last, e.g. ``model.str``)."""
    if isinstance(value, (str, dict)):
        return value
    raise ValueError(f"expected a catalog name or a mapping of fields, got {value!r}")


NameOrFields = Annotated[str | dict[str, Any], BeforeValidator(_name_or_fields)]


class PlacementScenario(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    family: Literal["placement"] = "placement"
    name: str = Field(min_length=1)
    description: str = ""
    model: NameOrFields
    gpu: NameOrFields
    tensor_parallel: Annotated[int, NotBool, Field(gt=0)]
    memory_utilization: Annotated[float, NotBool, Field(gt=0.0, le=1.0)] = 1.0
    price_per_hour: Annotated[float, NotBool, Field(gt=0.0, allow_inf_nan=False)] | None = None
    cost_model: str
    slos: dict[str, SLOClass]
    placement: PlacementOptions = PlacementOptions()
    requests: str


def resolve_model(spec: str | dict, source: Path | str, field: str = "model") -> LLMSpec:
    if isinstance(spec, dict):
        return validate_model(LLMSpec, spec, source, field)
    found = find_model(spec)
    if found is None:
        raise InputError(source, field, f"unknown model {spec!r} (catalog: {', '.join(model_names())}; or give its fields)")
    return found


def resolve_gpu(spec: str | dict, source: Path | str, field: str = "gpu") -> GPUSpec:
    if isinstance(spec, dict):
        return validate_model(GPUSpec, spec, source, field)
    found = find_gpu(spec, aliases=False)
    if found is None and gpu_alias_problem(spec):  # an alias names a family of SKUs: refused, never rewritten
        raise InputError(source, field, gpu_alias_problem(spec))
    if found is None:
        raise InputError(source, field, f"unknown GPU type {spec!r} (catalog: {', '.join(gpu_names())}; or give its fields)")
    return found


def _same(a: str, b: str, canon) -> bool:  # noqa: ANN001
    return (canon(a) or a).lower() == (canon(b) or b).lower()


def _check_finite(path: Path, table: pd.DataFrame) -> None:
    """A float cell reading ``inf`` (or ``-inf``) is one line naming its row and column."""
    for col in FINITE_COLUMNS:
        if col not in table:
            continue
        values = table[col].to_numpy(dtype=float)
        bad = np.flatnonzero(np.isinf(values))
        if bad.size:
            row = int(bad[0])
            raise InputError(path, f"row {row + 1}, column {col}", f"must be a finite number, got {values[row]:g}")


def read_requests(path: Path) -> tuple[tuple[PlannedRequest, ...], dict[str, OngoingState]]:
    table = read_csv_table(path, REQUEST_COLUMNS, OPTIONAL_COLUMNS, maximum=TOKEN_MAXIMUM)
    _check_finite(path, table)
    requests: list[PlannedRequest] = []
    ongoing: dict[str, OngoingState] = {}
    has_worker = "worker" in table
    for k, row in enumerate(table.to_dict("records")):
        where = f"row {k + 1}"
        data = {
            "request_id": row["request_id"],
            "arrival_s": 0.0 if _missing(row.get("arrival_s")) else row["arrival_s"],
            "input_tokens": row["input_tokens"],
            "output_tokens": row["output_tokens"],
            "predicted_output_tokens": row["predicted_output_tokens"],
            "slo_class": "default" if _missing(row.get("slo_class")) else row["slo_class"],
        }
        try:
            requests.append(PlannedRequest.model_validate({k2: _plain(v) for k2, v in data.items()}))
        except ValidationError as exc:
            field, msg = format_validation_error(exc)
            raise InputError(path, f"{where}, column {field}", msg) from None
        if has_worker and not _missing(row.get("worker")):
            if _missing(row.get("generated_tokens")):
                raise InputError(path, f"{where}, column generated_tokens", "required for an ongoing request (worker is set)")
            state = {
                "worker": _plain(row["worker"]),
                "generated_tokens": _plain(row["generated_tokens"]),
                "decode_s": 0.0 if _missing(row.get("decode_s")) else _plain(row["decode_s"]),
            }
            try:
                ongoing[requests[-1].request_id] = OngoingState.model_validate(state)
            except ValidationError as exc:
                field, msg = format_validation_error(exc)
                raise InputError(path, f"{where}, column {field}", msg) from None
    ids = [r.request_id for r in requests]
    if len(set(ids)) != len(ids):
        seen: set[str] = set()
        for k, rid in enumerate(ids):
            if rid in seen:
                raise InputError(path, f"row {k + 1}, column request_id", f"duplicate request_id {rid!r}")
            seen.add(rid)
    return tuple(requests), ongoing


def _missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NA


def _plain(v: Any) -> Any:
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating,)):
        return float(v)
    return v


def load_placement_instance(path: Path | str) -> PlacementProblem:
    """Read and validate a placement scenario and its requests; errors are one line."""
    path = Path(path)
    raw = read_yaml_mapping(path)
    sc = validate_model(PlacementScenario, raw, path)
    model = resolve_model(sc.model, path)
    gpu = resolve_gpu(sc.gpu, path)
    if sc.price_per_hour is not None:
        gpu = gpu.model_copy(update={"price_per_hour": sc.price_per_hour})
    cost_path = _referenced_file(path, "cost_model", sc.cost_model, "an aladdin cost-model file")
    cost = load_cost_model(cost_path)
    if not isinstance(cost, AladdinCostModel):
        raise InputError(path, "cost_model", f"{cost_path.name} is a {cost.kind} model; placement needs an aladdin model")
    if not _same(cost.model, model.name, canonical_model_name):
        raise InputError(path, "cost_model", f"{cost_path.name} was fitted for model {cost.model}, not {model.name}")
    if not _same(cost.gpu, gpu.name, canonical_gpu_name):
        raise InputError(path, "cost_model", f"{cost_path.name} was fitted for GPU {cost.gpu}, not {gpu.name}")
    if cost.tensor_parallel != sc.tensor_parallel:
        raise InputError(
            path, "cost_model", f"{cost_path.name} was fitted for tensor_parallel={cost.tensor_parallel}, "
            f"not {sc.tensor_parallel}"
        )
    try:
        slos = SLOSet(classes=sc.slos)
    except ValidationError as exc:
        field, msg = format_validation_error(exc, "slos")
        raise InputError(path, field, msg) from None
    req_path = _referenced_file(path, "requests", sc.requests, "a CSV of requests")
    requests, ongoing = read_requests(req_path)
    worker = WorkerConfig(gpu=gpu, tensor_parallel=sc.tensor_parallel, memory_utilization=sc.memory_utilization)
    try:
        return PlacementProblem(
            name=sc.name, model=model, worker=worker, cost=cost, slos=slos,
            requests=requests, ongoing=ongoing, options=sc.placement,
        )
    except ValidationError as exc:
        _, msg = format_validation_error(exc)
        raise _problem_error(msg, path, req_path) from None


def _referenced_file(path: Path, field: str, value: str, what: str) -> Path:
    """The file a scenario field names (relative to the scenario); an empty value, a missing file or a
    directory, a FIFO, a device or an oversized file is one line naming the field (not the directory an
    empty path resolves to); nothing is read from it here (`planner.core.io.check_input_file`)."""
    if not value.strip():
        raise InputError(path, field, f"empty; give the path of {what} (relative to this file)")
    target = resolve_relative(path, value)
    limit = MAX_TABLE_BYTES if field == "requests" else MAX_YAML_BYTES
    return check_input_file(target, what, limit, source=path, field=field)  # a FIFO or /dev/zero: refused unread


def _problem_error(msg: str, yaml_path: Path, csv_path: Path) -> InputError:
    """Route a `PlacementProblem` consistency error to the file and field it is about."""
    head, _, rest = msg.partition(": ")
    if head.startswith("slos."):
        return InputError(yaml_path, head, rest)
    if head.startswith("request ") or head in ("requests", "ongoing"):
        return InputError(csv_path, head, rest)
    if msg.startswith("weights of"):
        return InputError(yaml_path, "tensor_parallel", msg)
    return InputError(yaml_path, "", msg)


def save_placement_instance(
    problem: PlacementProblem,
    yaml_path: Path | str,
    *,
    cost_model_path: Path | str,
    description: str = "",
) -> tuple[Path, Path]:
    """Write ``problem`` as a scenario YAML plus ``<stem>.csv`` beside it."""
    yaml_path = Path(yaml_path)
    yaml_path.parent.mkdir(parents=True, exist_ok=True)
    csv_path = yaml_path.with_suffix(".csv")
    rows = []
    for r in problem.requests:
        row = r.model_dump()
        st = problem.ongoing.get(r.request_id)
        if problem.ongoing:
            row.update(
                worker=st.worker if st else None,
                generated_tokens=st.generated_tokens if st else None,
                decode_s=round(st.decode_s, 6) if st else None,
            )
        rows.append(row)
    frame = pd.DataFrame(rows)
    if problem.ongoing:
        frame["worker"] = frame["worker"].astype("Int64")
        frame["generated_tokens"] = frame["generated_tokens"].astype("Int64")
    csv_text = frame.to_csv(index=False)
    rel_cost = Path(os.path.relpath(Path(cost_model_path).resolve(), yaml_path.parent.resolve()))
    scenario = {
        "family": "placement",
        "name": problem.name,
        "description": description,
        "model": problem.model.name,
        "gpu": problem.worker.gpu.name,
        "tensor_parallel": problem.worker.tensor_parallel,
        "memory_utilization": problem.worker.memory_utilization,
        "cost_model": str(rel_cost),
        "slos": {k: v.model_dump(exclude_none=True) for k, v in problem.slos.classes.items()},
        "placement": problem.options.model_dump(),
        "requests": csv_path.name,
    }
    yaml_text = yaml.safe_dump(scenario, sort_keys=False, width=200, allow_unicode=True)
    replace_atomically(csv_path, csv_text)  # private temporary files: an interrupted save leaves no partial file
    replace_atomically(yaml_path, yaml_text)
    return yaml_path, csv_path
