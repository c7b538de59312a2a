"""`planner validate FAMILY INSTANCE PLAN.json`: the family's independent validator on any plan.

The plan is either a bare solution mapping (the family's plan format, `FamilyHarness.plan_from_dict`)
or the object `planner solve FAMILY … --json` prints (its ``solution`` is read; a ``family`` other
than FAMILY is one line).  Exit codes: 0 the plan is feasible, 1 the validator found violations,
2 bad input (file, JSON, plan format, family).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import typer
from rich.table import Table

from planner.cli.common import (
    JsonOption,
    cost_model_label,
    cost_models_of,
    fmt,
    out,
    print_cost_caveats,
    several_cost_model_caveats,
    to_json,
)
from planner.errors import InputError, PlannerError

#: Largest plan file read, bytes (a plan lists one entry per request, batch or group).
MAX_PLAN_BYTES = 256 * 2**20
#: Violations listed on the terminal (``--json`` lists all of them).
SHOWN_VIOLATIONS = 20

HELP = """Check a plan made anywhere (a solve, another tool, your current deployment) with the family's independent validator: prints the verdict, every violated constraint and the objective recomputed from the plan alone.

FAMILY is placement, batching, priority, queueing, deployment, deployment-tp or routing.  PLAN.json is the object `planner solve FAMILY ... --json` prints, or the plan alone (its "solution" part).  Only the decisions are read; summary fields (worker counts, metrics, times) are recomputed.  Plans written by hand use the ids and names of the instance file:

placement: {"assignment": {"r1": 0, "r2": 0, "r3": 1}} - the worker label of every request; an ongoing request keeps its worker's label.

batching: {"batches": [{"tokens": {"a": 2, "b": 1}}, {"tokens": {"a": 1}, "evicted": ["b"]}]} - the batches in order: the tokens each request processes in the batch, and the requests whose KV is dropped before it.

priority: {"batches": [["job1", "job2"], ["job3"]]} - the batches in the order they run; for several instances {"instances": [{"batches": [...]}, {"batches": [...]}]}.

queueing: {"queues": {"a100x4-1": ["chat-7b", "code-34b-a", "summ-7b"]}} - the group order on each queue (queues
are named <instance type>-<k>; optional "objective" and "deadline" score the plan on another objective).

deployment (cost plan): {"instances": [{"model": "Llama-2-70B", "gpu": "H100-80GB-SXM", "tensor_parallel": 4,
"count": 4}]} - the instances you run; (request classes): {"instances": [{"configuration": "...", "count": 2}],
"routing_fractions": {"<class>": {"<configuration>": 1.0}}}, or "routed_rps" in req/s.

deployment-tp (a cluster's TP degrees): {"kind": "tp_degrees", "degrees": {"dgx-a100": 4, "dgx-h100": 8}} - one TP
degree per machine group.

routing: {"assignment": {"r0": "v100-t4", "r1": "v100-t1#0"}} - one instance per request id (an instance with
count > 1 is named <name>#<k>).

Exit code 0 when the plan is feasible, 1 when the validator finds violations, 2 for bad input (a missing or malformed file, a plan of another family, an unknown id)."""


def _refuse_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise ValueError(f"duplicate key {key!r} in one object")
        seen[key] = value
    return seen


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def read_plan_json(path: Path) -> Any:
    """The JSON value in ``path``; one `InputError` line for an unreadable file, text that is not JSON,
    a key repeated within one object, or NaN/Infinity."""
    from planner.core.io import read_input_text  # noqa: PLC0415

    text = read_input_text(path, "a JSON plan", MAX_PLAN_BYTES)
    try:
        return json.loads(text, object_pairs_hook=_refuse_duplicates, parse_constant=_refuse_constant)
    except json.JSONDecodeError as exc:
        raise InputError(path, "", f"not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    except RecursionError:
        raise InputError(path, "", "not a plan: JSON nested too deeply") from None
    except ValueError as exc:  # a repeated key, NaN/Infinity, an integer of more than 4300 digits
        raise InputError(path, "", f"not a valid plan ({str(exc)[:200]})") from None


def plan_mapping(data: Any, family: str, path: Path) -> tuple[dict[str, Any], str]:
    """The plan mapping in ``data`` and the field prefix of its keys: ``solution`` of a solve's output
    (which must be of ``family``), or ``data`` itself."""
    if not isinstance(data, dict):
        raise InputError(path, "", "expected a JSON object (a plan or the output of `planner solve ... --json`)")
    declared = data.get("family", family)
    if declared != family:
        raise InputError(path, "family", f"this is a plan of family {str(declared)[:60]!r}, not {family!r}")
    if "solution" in data:
        plan = data["solution"]
        if plan is None:
            raise InputError(path, "solution", "is null: the run this output comes from found no plan")
        return plan, "solution"
    return {k: v for k, v in data.items() if k != "family"}, ""


def validate_cmd(
    family: str = typer.Argument(..., help="placement, batching, priority, queueing, deployment, deployment-tp or routing"),
    instance: Path = typer.Argument(..., help="the instance file the plan is for"),
    plan: Path = typer.Argument(..., help="the plan (JSON): a solve's --json output or the plan mapping alone"),
    json_out: JsonOption = False,
) -> None:
    harness = _harness(family)
    problem = harness.load(instance)
    data, prefix = plan_mapping(read_plan_json(plan), family, plan)
    try:
        solution = harness.plan_from_dict(problem, data)
    except InputError as exc:  # the plan readers name the field within the plan; here the file is known
        field = f"{prefix}.{exc.field}" if prefix and exc.field else (prefix or exc.field)
        raise InputError(plan, field, exc.problem) from None
    report = harness.validate(problem, solution)
    objective_name = report.objective_name or harness.objective_name
    objective = report.objective if report.objective is not None and math.isfinite(report.objective) else None
    models = cost_models_of(problem, SimpleNamespace(solution=solution))  # the models the plan's numbers use
    labels = list(dict.fromkeys(cost_model_label(m) for m in models))
    under = ", ".join(labels) or "the instance's own latency tables"
    if json_out:
        print(to_json({
            "family": family, "instance": str(instance), "name": getattr(problem, "name", None), "plan": str(plan),
            "feasible": report.feasible, "objective": objective, "objective_name": objective_name,
            "sense": harness.sense, "violations": [v.to_dict() for v in report.violations],
            "details": report.details, "cost_models": labels,
            "cost_model_caveats": several_cost_model_caveats(models),
        }))
    else:
        _print_report(family, instance, plan, report, objective, objective_name, under)
        print_cost_caveats(*models)
    if not report.feasible:
        raise typer.Exit(1)


validate_cmd.__doc__ = HELP


def _harness(family: str) -> Any:
    """The harness of ``family`` with the Solution contract; only that family's package is imported."""
    import importlib  # noqa: PLC0415

    from planner.harness import FAMILY_MODULES  # noqa: PLC0415

    if family not in FAMILY_MODULES:
        raise PlannerError(f"unknown family {family!r} (use one of {', '.join(FAMILY_MODULES)})")
    try:
        harness = importlib.import_module(FAMILY_MODULES[family]).HARNESS
    except ModuleNotFoundError as exc:
        if exc.name and FAMILY_MODULES[family].startswith(exc.name):
            raise PlannerError(f"the {family} family is not part of this install") from None
        raise
    if harness.plan_from_dict is None or harness.validate is None:
        raise PlannerError(f"validation of {family} plans is not available")
    return harness


def _print_report(family: str, instance: Path, plan: Path, report: Any, objective: float | None,
                  objective_name: str, under: str) -> None:
    """Verdict, violations and objective on stdout (the consoles print text as written: no markup)."""
    head = f"{family} plan {plan} on {instance}"
    if report.feasible:
        out.print(f"{head}: feasible (the independent validator finds no violated constraint)")
    else:
        n = len(report.violations)
        out.print(f"{head}: INFEASIBLE ({n} violated constraint{'s' if n != 1 else ''})")
        table = Table(title_justify="left")
        for col in ("constraint", "where", "value", "limit", "problem"):
            table.add_column(col)
        for v in report.violations[:SHOWN_VIOLATIONS]:
            table.add_row(v.constraint, v.where, fmt(v.value, 6), fmt(v.limit, 6), v.message)
        out.print(table)
        if n > SHOWN_VIOLATIONS:
            out.print(f"(+{n - SHOWN_VIOLATIONS} more violations; --json lists all)")
    value = "-" if objective is None else fmt(objective, 9)
    note = "" if report.feasible else " (of an infeasible plan)"
    out.print(f"objective recomputed from the plan{note}: {objective_name} = {value}, under {under}")
