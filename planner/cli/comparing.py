"""Rendering of `planner.compare.Comparison` for every ``planner compare FAMILY`` command: progress on
stderr, the JSON payload and the table (the family adds its own columns)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.table import Table
from rich.text import Text

from planner.cli.common import LiveLine, err, fmt, fmt_gap, out, print_cost_caveats

if TYPE_CHECKING:
    from planner.compare import Comparison, ComparisonRow, MethodEvent
    from planner.cli.options import RunArgs
    from planner.core.contract import FamilyHarness, RunOptions

#: A family column: header and the cell of one row.
Column = tuple[str, Callable[["ComparisonRow"], str]]


class CompareProgress(LiveLine):
    """One line per method on stderr as it finishes (``[k/n] method: status, objective, seconds``) and, below
    them, the method that runs with its elapsed seconds; only when stderr is a terminal
    (`planner.core.consoles.err`); the running line disappears when the comparison ends (`LiveLine`)."""

    def __init__(self, unit: str = "") -> None:
        self.unit = unit
        self.running = ""
        self.started = time.perf_counter()
        super().__init__()

    def _render(self) -> Text:
        if not self.running:
            return Text("")
        return Text(f"{self.running} … {time.perf_counter() - self.started:.1f} s", style="cyan")

    def __call__(self, event: MethodEvent) -> None:
        if not self.enabled:
            return
        if event.result is None:
            self.running = f"[{event.index + 1}/{event.total}] {event.method}"
            self.started = time.perf_counter()
            return
        self.running = ""
        r = event.result
        objective = "-" if r.objective is None else f"{fmt(r.objective, 6)}{self.unit}"
        err.print(f"[{event.index + 1}/{event.total}] {event.method}: {r.status.value}, {objective}, "
                  f"{r.solve_seconds:.2f} s", highlight=False, markup=False)


def valid_cell(row: ComparisonRow) -> str:
    return "-" if row.valid is None else ("yes" if row.valid else "NO")


def comparison_table(comparison: Comparison, title: str, columns: Sequence[Column], unit: str = "") -> Table:
    """``method``, the family's ``columns``, ``gap``, ``time (s)``, ``valid``, ``status``; the title ends
    with what the gaps are relative to (`Comparison.reference_text`)."""
    t = Table(title=f"{title} ({comparison.reference_text(unit)})", title_justify="left")
    headers = ["method", *(h for h, _ in columns), "gap", "time (s)", "valid", "status"]
    for col in headers:
        t.add_column(col, justify="left" if col in ("method", "status") else "right")
    for row in comparison.rows:
        t.add_row(row.method, *(cell(row) for _, cell in columns), fmt_gap(row.gap), f"{row.seconds:.3f}",
                  valid_cell(row), row.status)
    return t


def comparison_payload(instance: Path, name: str, comparison: Comparison,
                       extras: Callable[[ComparisonRow], dict[str, Any]] | None = None,
                       **fields: Any) -> dict[str, Any]:
    """The ``--json`` object: instance, name, `Comparison.to_dict` (per method the `ComparisonRow` fields,
    the family's ``extras`` and ``result``, the method's `Result.to_dict`) and ``fields``."""
    data = comparison.to_dict()
    if extras is not None:
        for row, entry in zip(comparison.rows, data["methods"]):
            result = entry.pop("result")
            entry.update(extras(row))
            entry["result"] = result
    return {"instance": str(instance), "name": name, **data, **fields}


def exact_line(comparison: Comparison, unit: str = "") -> None:
    """One line on the exact method: its proven optimum, or its status, best plan and bound; then, on
    stderr, why each heuristic without a plan has none."""
    for row in comparison.rows:
        if row.kind == "heuristic" and row.objective is None and row.message:
            err.print(f"{row.method}: {row.message}", highlight=False, markup=False)
    row = comparison.exact
    if row is None:
        return
    r = row.result
    solver = f" ({r.solver})" if r is not None and r.solver else ""
    if row.status == "optimal":
        out.print(f"{row.method}{solver}: optimum {fmt(row.objective, 6)}{unit}.", highlight=False, markup=False)
    else:
        parts = [row.status]
        if row.objective is not None:
            parts.append(f"best plan {fmt(row.objective, 6)}{unit}")
        if row.bound is not None:
            parts.append(f"bound {fmt(row.bound, 6)}{unit}")
        out.print(f"{row.method}{solver}: {', '.join(parts)}." + (f" {row.message}" if row.message else ""),
                  highlight=False, markup=False)
    if row.status == "error" and row.message:
        err.print(row.message, highlight=False, markup=False)


def run_comparison(problem: Any, harness: FamilyHarness, options: RunOptions, unit: str = "",
                   methods: Sequence[str] | None = None) -> Comparison:
    """`planner.compare.compare` with the progress lines on stderr (`CompareProgress`)."""
    from planner.compare import compare  # noqa: PLC0415 (keeps `planner --help` fast)

    with CompareProgress(unit) as progress:
        return compare(problem, harness, methods, options, progress)


@dataclass
class CompareView:
    """What a family's compare command shows beside the shared rows: the table's title and the family's
    columns, the per-method ``extras`` and top-level ``fields`` of the JSON, the cost models behind the
    numbers (their caveats end the output), and lines printed after the exact method's line."""

    title: str
    unit: str = ""
    columns: Sequence[Column] = ()
    extras: Callable[[ComparisonRow], dict[str, Any]] | None = None
    fields: dict[str, Any] = field(default_factory=dict)
    cost_models: Sequence[Any] = ()
    caveats: list[str] = field(default_factory=list)
    after: Callable[[], None] | None = None


def show_comparison(instance: Path, name: str, comparison: Comparison, view: CompareView, run: RunArgs) -> None:
    """The end of every ``planner compare FAMILY``: the JSON (to ``--out``; on stdout with ``--json``), else the
    table, the exact method's line, the family's ``after`` lines and the cost models' caveats."""
    def show() -> None:
        out.print(comparison_table(comparison, view.title, view.columns, view.unit))
        exact_line(comparison, view.unit)
        if view.after is not None:
            view.after()
        print_cost_caveats(*view.cost_models)

    run.emit(comparison_payload(instance, name, comparison, view.extras, **view.fields,
                                cost_model_caveats=view.caveats), show=show)
