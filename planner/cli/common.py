"""Shared CLI pieces: consoles, one-line errors, JSON output, progress display."""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from rich.console import Console
from rich.live import Live
from rich.text import Text

from planner.core.outputs import check_output_dir, check_output_file, write_file, write_files  # noqa: F401 (re-exported)
from planner.errors import PlannerError

if TYPE_CHECKING:
    from planner.solver import ProgressEvent

SOLVER_HELP = "MIP solver: highs (default, no license) or gurobi (size-limited pip license)"

# The options every solve / compare command shares, declared once.  Use them as annotations with the
# default in the signature, e.g. ``solver: SolverOption = "highs"``; a command whose option needs other
# help text declares its own ``typer.Option``.
SolverOption = Annotated[str, typer.Option(help=SOLVER_HELP)]
TimeLimitOption = Annotated[Optional[float], typer.Option(
    "--time-limit", help="seconds for the whole solve (heuristics, model build, solver); returns the incumbent and bound when hit")]
ThreadsOption = Annotated[Optional[int], typer.Option(
    help="solver threads (default: the solver's; HiGHS: fixed for the process after the first solve)")]
def _check_seed(value: int | None) -> int | None:
    """--seed feeds numpy's generators, which take non-negative integers only: one clear line otherwise."""
    if value is not None and value < 0:
        from planner.errors import PlannerError

        raise PlannerError(f"--seed must be a non-negative integer, got {value}")
    return value


SeedOption = Annotated[int, typer.Option(help="random seed (same inputs and seed give the same plan)",
                                         callback=_check_seed)]
JsonOption = Annotated[bool, typer.Option("--json", help="print one JSON object instead of tables")]
OutOption = Annotated[Optional[Path], typer.Option("--out", help="also write the JSON result to this file")]
ForceOption = Annotated[bool, typer.Option("--force", help="overwrite --out if it exists")]


@dataclass(frozen=True)
class CommandGroups:
    """The typer command groups family CLI modules register their commands on."""

    app: Any  # planner
    solve: Any  # planner solve ...
    compare: Any  # planner compare ...
    generate: Any  # planner generate ...
    simulate: Any  # planner simulate ...
    plan: Any  # planner plan ...


# Rich markup is off on both consoles: every string printed (tables, titles, notes, warnings) may carry
# user text — names, file names, values — and ``[/]`` or ``[red]x[/red]`` in it must print as written,
# not raise MarkupError or vanish.  A site that means markup passes ``markup=True`` and escapes the user
# text it embeds (`rich.markup.escape`), as the error line in `planner.cli.main` does.  Emoji codes
# (``:cat:``) are not replaced either: they are user text too.
out = Console(highlight=False, soft_wrap=True, markup=False, emoji=False)
if not out.is_terminal:  # pipes and files: wide enough that tables never truncate names
    out = Console(highlight=False, soft_wrap=True, width=160, markup=False, emoji=False)
err = Console(stderr=True, highlight=False, soft_wrap=True, markup=False, emoji=False)


_CONTROL = ({c: f"\\x{c:02x}" for c in (*range(0x20), 0x7F, 0x85) if c != 0x09}
            | {0x0A: "\\n", 0x0D: "\\r", 0x2028: "\\u2028", 0x2029: "\\u2029"})


def one_line(text: str) -> str:
    """``text`` with line breaks and other control characters written as escapes (``\\n``, ``\\x1b``),
    so that an error message quoting user text stays one line on the terminal."""
    return text.translate(_CONTROL)


def _clean(value: Any) -> Any:
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        try:
            return _clean(value.item())
        except (TypeError, ValueError):
            return value
    return value


def to_json(data: Any) -> str:
    return json.dumps(_clean(data), indent=2, default=str)


def check_out(path: Path | None, force: bool, option: str = "--out") -> None:
    """Before any solving: one line unless ``path`` (if given) can be written (`planner.core.outputs`)."""
    check_output_file(path, force, option)


def write_output(path: Path | None, text: str, force: bool) -> None:
    """Write ``text`` to ``path`` atomically; never overwrite an existing file without ``force``.

    The command calls `check_output_file` (the same checks) before it solves; this final write cannot
    overwrite a file that appeared meanwhile (`planner.core.outputs`)."""
    if path is None:
        return
    write_file(path, text, force)


def check_run_options(time_limit: float | None = None, threads: int | None = None) -> None:
    """The same one-line errors for --time-limit and --threads in every solve / compare / simulate command."""
    if time_limit is not None and not time_limit > 0:  # also NaN
        raise PlannerError(f"--time-limit must be positive, got {time_limit}")
    if threads is not None and threads < 1:
        raise PlannerError(f"--threads must be at least 1, got {threads}")


def fmt(value: float | None, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if math.isinf(value):
        return str(value)
    if float(value).is_integer() and abs(value) < 1e15:
        return f"{int(value)}"
    return f"{value:.{digits}g}"


def fmt_gap(gap: float | None) -> str:
    """A relative gap as a percentage; "-" when unknown (None or NaN).  Below 0.1 % four decimals, so a
    gap is never shown as 0.00 % or 0.01 % next to the 0.01 % optimality tolerance when it is not."""
    if gap is None or math.isnan(gap):
        return "-"
    return f"{100 * gap:.2f}%" if gap == 0 or abs(gap) >= 1e-3 else f"{100 * gap:.4f}%"


class SolveProgress:
    """Shows phase, incumbent and bound on stderr once a solve has run for more than a second.

    A rich `Live` display refreshes itself four times a second from the clock, so the elapsed
    time keeps moving through phases that report nothing (presolve, LNS rounds); it renders
    nothing during the first second and disappears when the solve ends.
    """

    def __init__(self, enabled: bool = True, unit: str = "") -> None:
        self.enabled = enabled and err.is_terminal
        self.unit = unit
        self.start = time.perf_counter()
        self.phase_text = "starting"
        self.incumbent: float | None = None
        self.bound: float | None = None
        self.live: Live | None = None
        if self.enabled:
            self.live = Live(console=err, transient=True, refresh_per_second=4, get_renderable=self._render)
            self.live.start()

    def _render(self) -> Text:
        elapsed = time.perf_counter() - self.start
        if elapsed < 1.0:
            return Text("")
        parts = [self.phase_text, f"{elapsed:5.1f}s"]
        if self.incumbent is not None:
            parts.append(f"incumbent {fmt(self.incumbent)}{self.unit}")
        if self.bound is not None:
            parts.append(f"bound {fmt(self.bound)}{self.unit}")
        return Text(" | ".join(parts), style="cyan")

    def phase(self, text: str) -> None:
        self.phase_text = text

    def __call__(self, event: ProgressEvent) -> None:
        if event.incumbent is not None:
            self.incumbent = event.incumbent
        if event.bound is not None:
            self.bound = math.ceil(event.bound - 1e-6) if self.unit == " workers" else event.bound

    def close(self) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None

    def __enter__(self) -> "SolveProgress":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def debug_enabled() -> bool:
    return os.environ.get("PLANNER_DEBUG", "") not in ("", "0")
