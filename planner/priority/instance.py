"""Priority instance files (YAML).

::

    family: priority
    name: paper-mix-n10
    description: ...
    b_max: 1
    cost_model: ../../models/bilinear/qwen2.5-7b__v100-32gb-sxm2__tp2.yaml   # relative to this file
    token_capacity: 20000          # optional, Eq. 20 (or give `memory:` instead)
    memory: {memory_gb: 64, utility: 0.9, kv_bytes_per_token: 524288}        # optional, Eq. 20
    jobs:
      - {name: j0, kind: chat, input_tokens: 210, output_tokens: 340, slo_ttft_ms: 10000, slo_tpot_ms: 50}
      - {name: j1, kind: e2e,  input_tokens: 800, output_tokens: 120, slo_e2e_ms: 30000}
      # toy jobs may give explicit latencies per batch size instead of a cost model:
      - {name: a, kind: e2e, input_tokens: 1, output_tokens: 1, slo_e2e_ms: 600, exec_ms: [300, 500, 800]}

Every problem becomes one `InputError` line naming the file and field (``jobs[2].slo_tpot_ms``),
never an echo of the whole input.  Numbers must be YAML numbers (true/false and text such as ``"12"``
are rejected: `planner.core.io.check_numbers`), lengths
are at most `planner.priority.problem.MAX_JOB_TOKENS`, a job gives only the SLOs of its kind, and a ``b_max`` above the
number of jobs is stored as the number of jobs (it allows no other plans).  ``memory`` values are finite
numbers with ``0 < memory_gb ≤ MAX_MEMORY_GB``, ``0 < utility ≤ 1`` and ``kv_bytes_per_token ≥ 1``
(`memory_capacity`); explicit ``exec_ms`` / ``prefill_ms`` entries are finite and at most
`planner.priority.problem.MAX_LATENCY_MS` (SLOs may be ``.inf``: a best-effort job).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from planner.core.io import (
    MAX_YAML_BYTES,
    check_input_file,
    check_numbers,
    number_text_problem,
    read_yaml_mapping,
    resolve_relative,
)
from planner.core.outputs import write_file
from planner.costmodels.files import load_cost_model
from planner.costmodels.models import BilinearCostModel
from planner.errors import InputError, PlannerError
from planner.priority.multi import token_num
from planner.priority.problem import FieldError, PriorityProblem

KNOWN_KEYS = {"family", "name", "description", "b_max", "cost_model", "token_capacity", "memory", "jobs"}


def load_priority_instance(path: Path | str, b_max: int | None = None) -> PriorityProblem:
    """Read and validate an instance; ``b_max`` overrides the file's value."""
    path = Path(path)
    data = read_yaml_mapping(path)
    family = data.get("family", "priority")
    if family != "priority":
        raise InputError(path, "family", f"this is a {family!r} instance, not a priority one")
    unknown = sorted(set(data) - KNOWN_KEYS)
    if unknown:
        raise InputError(path, unknown[0], "unknown field (check the spelling)")
    if b_max is not None:
        data["b_max"] = b_max
    if "b_max" not in data:
        raise InputError(path, "b_max", "required field is missing")
    if isinstance(data["b_max"], bool):
        raise InputError(path, "b_max", f"expected a number, got {str(data['b_max']).lower()}")
    if isinstance(data["b_max"], int) and data["b_max"] < 1:
        raise InputError(path, "b_max", f"must be at least 1, got {data['b_max']}")
    jobs = data.get("jobs")
    if not isinstance(jobs, list) or not jobs:
        raise InputError(path, "jobs", "must be a non-empty list of jobs")
    for k, job in enumerate(jobs):
        if isinstance(job, dict) and "kind" in job and job["kind"] not in ("e2e", "chat"):
            raise InputError(path, f"jobs[{k}].kind", f"unknown task type {job['kind']!r} (use e2e or chat)")
    cost = data.get("cost_model")
    model: BilinearCostModel | None = None
    if cost is not None:
        if not isinstance(cost, str):
            raise InputError(path, "cost_model", "must be a path to a bilinear cost-model YAML file")
        cost_path = resolve_relative(path, cost)
        check_input_file(cost_path, "a bilinear cost-model YAML file", MAX_YAML_BYTES, source=path, field="cost_model")
        try:
            loaded = load_cost_model(cost_path)
        except PlannerError as exc:
            raise InputError(path, "cost_model", str(exc)) from None
        if not isinstance(loaded, BilinearCostModel):
            raise InputError(path, "cost_model", f"needs a bilinear model (Eqs. 14–16), got kind {loaded.kind!r}")
        check_bilinear_coefficients(cost_path, loaded)
        model = loaded
    capacity = data.get("token_capacity")
    memory = data.get("memory")
    if memory is not None:
        if capacity is not None:
            raise InputError(path, "memory", "give either token_capacity or memory, not both")
        capacity = memory_capacity(path, memory)
    payload = {
        "name": data.get("name", path.stem),
        "description": data.get("description", ""),
        "b_max": data["b_max"],
        "token_capacity": capacity,
        "cost_model": model,
        "jobs": jobs,
    }
    check_numbers(PriorityProblem, payload, path)  # "12" or true where a number belongs: refused, not converted
    try:
        return PriorityProblem.model_validate(payload)
    except ValidationError as exc:
        field, problem = describe_validation_error(exc)
        raise InputError(path, field, problem) from None


#: Largest ``memory.memory_gb`` accepted (a petabyte per instance): far above any GPU server, and it keeps
#: memory_gb · 10^9 · utility / kv_bytes_per_token a finite number.
MAX_MEMORY_GB = 1e6
#: Smallest ``memory.kv_bytes_per_token`` accepted: one byte (real models store kilobytes to megabytes).
MIN_KV_BYTES_PER_TOKEN = 1.0


def memory_capacity(path: Path | str, memory: Any) -> int:
    """Eq. 20 from an instance's ``memory:`` mapping; every problem is one line naming ``memory.<field>``.

    Each value must be a finite YAML number (a boolean or text is refused — ``"64"``, or ``5e5``, which
    YAML 1.1 reads as text; the message gives the spelling to use): ``0 < memory_gb ≤ MAX_MEMORY_GB``,
    ``0 < utility ≤ 1``, ``kv_bytes_per_token ≥ MIN_KV_BYTES_PER_TOKEN``; and the capacity must hold a token."""
    import math

    keys = ("memory_gb", "utility", "kv_bytes_per_token")
    if not isinstance(memory, dict) or set(memory) != set(keys):
        raise InputError(path, "memory", "needs exactly memory_gb, utility and kv_bytes_per_token")
    values: dict[str, float] = {}
    for key in keys:
        value = memory[key]
        if isinstance(value, bool):
            raise InputError(path, f"memory.{key}", "expected a number, got a boolean")
        if isinstance(value, str):  # "64", or 5e5, which YAML 1.1 reads as text: refused, with the spelling to use
            raise InputError(path, f"memory.{key}", number_text_problem(value))
        if not isinstance(value, (int, float)):
            raise InputError(path, f"memory.{key}", f"expected a number, got {_shown(value)}")
        try:
            number = float(value)
        except OverflowError:  # an integer beyond the float range
            number = math.inf
        if not math.isfinite(number):
            raise InputError(path, f"memory.{key}", f"must be a finite number, got {number}")
        values[key] = number
    memory_gb, utility, per_token = values["memory_gb"], values["utility"], values["kv_bytes_per_token"]
    if not 0 < memory_gb <= MAX_MEMORY_GB:
        raise InputError(path, "memory.memory_gb", f"must be positive and at most {MAX_MEMORY_GB:g}, got {memory_gb:g}")
    if not 0 < utility <= 1:
        raise InputError(path, "memory.utility", f"must be in (0, 1] (the fraction of memory used), got {utility:g}")
    if per_token < MIN_KV_BYTES_PER_TOKEN:
        raise InputError(path, "memory.kv_bytes_per_token",
                         f"must be at least {MIN_KV_BYTES_PER_TOKEN:g} byte, got {per_token:g}")
    capacity = token_num(memory_gb * 1e9, utility, per_token)
    if capacity < 1:
        raise InputError(path, "memory", f"holds no token: {memory_gb:g} GB × {utility:g} / {per_token:g} bytes per "
                                         "token < 1 (Eq. 20)")
    return capacity


def _shown(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, str):
        return f"the text {value!r}" if len(value) <= 40 else "a text"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


def check_bilinear_coefficients(path: Path | str, model: BilinearCostModel) -> None:
    """Finite coefficients of moderate size, not all 0 in a phase: else one line naming the phase.
    (Booleans are refused when the model loads: `planner.costmodels.models.BilinearCoefficients`.)
    An all-zero phase makes every latency 0 (and the objective G divides by the total latency).
    """
    import math

    for phase in ("prefill", "decode"):
        coefficients = getattr(model, phase)
        numbers = {key: float(getattr(coefficients, key)) for key in ("alpha", "beta", "gamma", "delta")}
        for key, value in numbers.items():
            if not math.isfinite(value) or abs(value) > MAX_COEFFICIENT:
                raise InputError(path, f"{phase}.{key}", f"must be a finite number of at most {MAX_COEFFICIENT:g}, got {value}")
        if all(value == 0 for value in numbers.values()):
            raise InputError(path, phase, "all coefficients are 0 (every latency would be 0)")


#: Largest bilinear coefficient accepted (ms or s per token / request): far above any fitted model, far below
#: the float range, so that latency sums over many jobs and tokens stay finite.
MAX_COEFFICIENT = 1e9


def describe_validation_error(exc: ValidationError) -> tuple[str, str]:
    """The first error as (field, problem), e.g. ("jobs[2].slo_tpot_ms", "required for a chat job").
    Names the precise field of a `FieldError`; echoes the offending value only when it is short."""
    err = exc.errors()[0]
    loc = err.get("loc", ())
    cause = (err.get("ctx") or {}).get("error")
    if isinstance(cause, FieldError):
        return field_path(loc, cause.field), cause.problem
    kind = err.get("type")
    if kind == "extra_forbidden":
        return field_path(loc), "unknown field (check the spelling)"
    if kind == "missing":
        return field_path(loc), "required field is missing"
    problem = err.get("msg", "invalid value").removeprefix("Value error, ")
    value = err.get("input")
    short = isinstance(value, (int, float, str)) and not isinstance(value, bool) and len(repr(value)) <= 40
    if kind != "value_error" and short:  # own ValueErrors already say what they got
        problem = f"{problem} (got {value!r})"
    return field_path(loc), problem


def field_path(loc: tuple[int | str, ...], tail: str = "") -> str:
    """("jobs", 3, "name") -> "jobs[3].name"; ``tail`` (a FieldError's field) is appended."""
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    if tail:
        path = f"{path}.{tail}" if path else tail
    return path


def problem_to_yaml(problem: PriorityProblem, cost_model_ref: str | None) -> str:
    """Serialise a problem; ``cost_model_ref`` is the path written for its cost model."""
    data: dict[str, Any] = {"family": "priority", "name": problem.name}
    if problem.description:
        data["description"] = problem.description
    data["b_max"] = problem.b_max
    if cost_model_ref is not None:
        data["cost_model"] = cost_model_ref
    if problem.token_capacity is not None:
        data["token_capacity"] = problem.token_capacity
    data["jobs"] = [job.model_dump(exclude_none=True, exclude_defaults=False) for job in problem.jobs]
    for job in data["jobs"]:
        for key in ("exec_ms", "prefill_ms"):
            if key in job:
                job[key] = list(job[key])
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=140)


def save_priority_instance(problem: PriorityProblem, path: Path | str, cost_model_ref: str | None, force: bool = False) -> Path:
    path = Path(path)
    if path.is_dir():
        raise PlannerError(f"{path}: is a directory, expected a file name")
    if path.exists() and not force:
        raise PlannerError(f"{path}: already exists; pass --force to overwrite it")
    write_file(path, problem_to_yaml(problem, cost_model_ref), force, "OUTPUT")  # atomic; no overwrite without force
    return path
